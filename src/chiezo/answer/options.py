"""How one question is to be answered: the choices every surface (CLI, REST, web chat) passes
through unchanged, in one object rather than a parameter list copied into each of them.

``None`` means "the configured default" (``CHIEZO_ANSWER_*``, core/config.py); :meth:`resolved`
fills those in and checks the bounds once, so the surfaces only parse.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from chiezo.core.config import ANSWER_MODES, MAX_SECONDS, PLANNERS, Settings
from chiezo.core.errors import BadQuery
from chiezo.core.here import Here

# The bounds of each numeric choice, declared once: check() enforces them here, and the
# answer request model (ops/requests.py), from which the CLI, REST and the web derive their
# own, states them.
BOUNDS: dict[str, tuple[float, float]] = {
    "excerpts": (1, 20),
    "max_tokens": (16, 8192),
    "budget": (300, 200_000),
    "steps": (1, 20),
    "result_chars": (200, 20_000),
    "deadline": (0.1, MAX_SECONDS),
}
DEFAULT_STEPS = 6


@dataclass(frozen=True)
class AnswerOptions:
    source: str | None = None  # answer from this source only
    mode: str | None = None  # rag | agent
    plan: str | None = None  # auto | keywords | model: who plans a rag answer's searches
    grounded: bool | None = None  # only from the sources (the default) or beyond, marked so
    budget: int | None = None  # characters of excerpts (rag)
    excerpts: int | None = None  # documents read (rag)
    max_tokens: int | None = None  # the answer's length cap
    steps: int = DEFAULT_STEPS  # agent: tool-call steps
    result_chars: int = 3000  # agent: characters of each tool result the model reads
    deadline: float | None = None  # agent: seconds for the whole run (CHIEZO_AGENT_DEADLINE)
    writable: bool = False  # chat/agent may offer `remember` (never `ask`)
    # rag: with no basis in the library, the configured web search's results are the basis
    web: bool | None = None
    # the person's current location (core/here.py): tools take it as near=here, re-checked
    # for its age before every call; never shown to the model, never logged
    location: Here | None = None

    @classmethod
    def of(cls, **values: Any) -> AnswerOptions:
        """Options from keyword arguments, unknown names refused (a typo is not a default)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise TypeError(f"unknown answer options: {', '.join(unknown)}")
        return cls(**values)

    def resolved(self, settings: Settings) -> AnswerOptions:
        options = replace(
            self,
            mode=self.mode or settings.answer_mode,
            plan=self.plan or settings.answer_plan,
            grounded=settings.answer_grounded if self.grounded is None else self.grounded,
            budget=self.budget or settings.answer_budget,
            excerpts=self.excerpts or settings.answer_excerpts,
            max_tokens=self.max_tokens or settings.answer_max_tokens,
            deadline=self.deadline or settings.agent_deadline,
            web=settings.answer_web if self.web is None else self.web,
        )
        options.check()
        return options

    def check(self) -> None:
        if self.mode not in ANSWER_MODES:
            raise BadQuery(f"mode must be {' or '.join(ANSWER_MODES)}, got {self.mode!r}")
        if self.plan not in PLANNERS:
            raise BadQuery(f"plan must be {', '.join(PLANNERS)}, got {self.plan!r}")
        for name, (low, high) in BOUNDS.items():
            _within(name, getattr(self, name), low, high)


def _within(name: str, value: float | None, low: float, high: float) -> None:
    if value is not None and not low <= value <= high:
        raise BadQuery(f"{name} must be within {low}..{high}, got {value}")
