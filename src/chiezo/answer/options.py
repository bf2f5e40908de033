"""How one question is to be answered: the choices every surface (CLI, REST, web chat) passes
through unchanged, in one object rather than a parameter list copied into each of them.

``None`` means "the configured default" (``CHIEZO_ANSWER_*``, core/config.py); :meth:`resolved`
fills those in and checks the bounds once, so the surfaces only parse.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace

from chiezo.core.config import MAX_SECONDS
from chiezo.core.errors import BadQuery

MODES = ("rag", "agent")
MAX_EXCERPTS = 20
MAX_TOKENS = 8192


@dataclass(frozen=True)
class AnswerOptions:
    source: str | None = None  # answer from this source only
    mode: str | None = None  # rag | agent
    grounded: bool | None = None  # only from the sources (the default) or beyond, marked so
    budget: int | None = None  # characters of excerpts (rag)
    excerpts: int | None = None  # documents read (rag)
    max_tokens: int | None = None  # the answer's length cap
    steps: int = 6  # agent: tool-call steps
    result_chars: int = 3000  # agent: characters of each tool result the model reads
    deadline: float | None = None  # agent: seconds for the whole run (CHIEZO_AGENT_DEADLINE)
    strict: bool = False  # any uncited or unsupported sentence fails the answer
    writable: bool = False  # chat/agent may offer `remember` (never `ask`)

    @classmethod
    def of(cls, **values) -> AnswerOptions:
        """Options from keyword arguments, unknown names refused (a typo is not a default)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TypeError(f"unknown answer options: {', '.join(unknown)}")
        return cls(**values)

    def resolved(self, settings) -> AnswerOptions:
        options = replace(
            self,
            mode=self.mode or settings.answer_mode,
            grounded=settings.answer_grounded if self.grounded is None else self.grounded,
            budget=self.budget or settings.answer_budget,
            excerpts=self.excerpts or settings.answer_excerpts,
            max_tokens=self.max_tokens or settings.answer_max_tokens,
            deadline=self.deadline or settings.agent_deadline,
        )
        options.check()
        return options

    def check(self) -> None:
        if self.mode not in MODES:
            raise BadQuery(f"mode must be rag or agent, got {self.mode!r}")
        _within("excerpts", self.excerpts, 1, MAX_EXCERPTS)
        _within("max_tokens", self.max_tokens, 16, MAX_TOKENS)
        _within("budget", self.budget, 300, 200_000)
        _within("steps", self.steps, 1, 20)
        _within("result_chars", self.result_chars, 200, 20_000)
        _within("deadline", self.deadline, 0.1, MAX_SECONDS)


def _within(name: str, value, low, high) -> None:
    if value is not None and not low <= value <= high:
        raise BadQuery(f"{name} must be within {low}..{high}, got {value}")
