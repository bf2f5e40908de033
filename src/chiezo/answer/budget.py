"""What the model reads, fitted to its context window, in tokens.

A request is the prompt — instructions, the conversation's recent turns, the question and the
excerpts (rag) or the tool results (agent) — plus the room the answer is written in
(``max_tokens``); llama.cpp refuses a prompt longer than one slot's context with HTTP 400, and
one that leaves less room than ``max_tokens`` has its answer cut where the context ends. So,
where the model's window is known (the endpoint says, or ``CHIEZO_LLM_CONTEXT``):

* the prompt may hold ``window − max_tokens − margin`` tokens (:class:`Room`);
* rag: the instructions, turns and question are counted first (the oldest turns go when they
  would take more than half of that); what is left is the excerpts' — turned into characters
  with the tokens a character of the documents found takes, never more than
  ``CHIEZO_ANSWER_BUDGET``; the excerpts made are counted again and cut (``excerpt.fit``)
  if they still do not fit;
* agent: each tool result is cut to a share of what is left, and before each request the
  oldest results are cut further until the conversation fits;
* a question that alone leaves no room is a clear :class:`ContextExceeded` before any model
  is asked;
* every cut is said in the answer's warnings.

Where nobody says what the window is, nothing is cut in advance: the configured budget is
used and an overflow reply decides. Either way an overflow reply (a ``/props`` that lies, an
estimate that was short) is recognised (answer/llm.py), the excerpts or tool results are cut to the
context it names, and the request is made **once** more, saying so; a second overflow is the
error.

Counting is the endpoint's own ``/tokenize`` where it has one, else answer/context.py's estimate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from chiezo.answer.context import ContextWindow, tokens_per_char
from chiezo.answer.excerpt import Excerpt, fit
from chiezo.answer.llm import Count, LLMClient
from chiezo.core.config import ENV, Settings
from chiezo.core.errors import ContextExceeded

MIN_EXCERPT_TOKENS = 96  # less room than this for excerpts: the question is too long
MIN_EXCERPT_CHARS = 100  # excerpts cut below this answer nothing: the error instead
MIN_RESULT_CHARS = 200  # the least of a tool result worth keeping (options' lower bound)
HEADER_TOKENS = 12  # an excerpt's "[n] title" line and the blank line after it
CUT_SLACK = 1.1  # cut a tenth more than the arithmetic says: one cut, not two
ESTIMATE_DOUBT = 0.5  # an estimate may be twice the truth: refuse only what surely does not fit
CUT_MARK = "\n… (cut to fit the model's context)"


@dataclass(frozen=True)
class Room:
    """A request's tokens: the window, the answer's room and a margin for what counting
    misses (template markup, a tokenizer's rounding)."""

    window: ContextWindow
    answer: int  # max_tokens

    @property
    def margin(self) -> int:
        return max(32, self.window.tokens // 50)

    @property
    def prompt(self) -> int:
        """The most a prompt may hold."""
        return self.window.tokens - self.answer - self.margin


def room_for(llm: LLMClient, settings: Settings, max_tokens: int) -> Room | None:
    """The room one request has, or None where nobody says what the window is."""
    window = llm.window(settings.llm_context)
    return Room(window, max_tokens) if window.said else None


def surely_over(count: Count, limit: int) -> bool:
    return count.tokens > limit if count.exact else count.tokens * ESTIMATE_DOUBT > limit


# -- rag ---------------------------------------------------------------------------------------


@dataclass
class RagFit:
    """The room a rag answer has, and what of the conversation it keeps."""

    llm: LLMClient
    room: Room
    messages_for: Callable[[list[dict], list[Excerpt]], list[dict[str, Any]]]
    history: list[dict]
    fixed: Count  # the prompt without excerpts
    warnings: list[str] = field(default_factory=list)
    limit: int | None = None  # the characters of excerpts it allows (excerpt_chars)
    dropped: int = 0  # the conversation's oldest messages left out

    @property
    def excerpt_tokens(self) -> int:
        return self.room.prompt - self.fixed.tokens

    def excerpt_chars(self, configured: int, sample: str, docs: int) -> int:
        """Characters of excerpts for ``docs`` documents whose text is like ``sample``
        (what was found: titles and snippets), at most ``configured``."""
        tokens = self.excerpt_tokens - HEADER_TOKENS * max(1, docs)
        per_char = self.llm.tokens_per_char(sample) if sample.strip() else tokens_per_char("")
        self.limit = max(MIN_EXCERPT_CHARS, min(configured, int(tokens / per_char)))
        return self.limit

    def trim(self, excerpts: list[Excerpt]) -> list[Excerpt]:
        """The excerpts, cut (``excerpt.fit``) until the whole prompt fits — counted, not
        estimated, where the endpoint tokenizes."""
        for attempt in range(1, 4):
            count = self.llm.count(self.messages_for(self.history, excerpts))
            if count.tokens <= self.room.prompt or not excerpts:
                return excerpts
            chars = sum(len(e.text) for e in excerpts)
            per_char = max(count.tokens - self.fixed.tokens, 1) / max(chars, 1)
            needed = (count.tokens - self.room.prompt) * CUT_SLACK / per_char
            # passages go whole: cut at least a twentieth more each time round
            target = int(chars - max(needed, chars * attempt / 20))
            if target < MIN_EXCERPT_CHARS:
                break
            excerpts = fit(excerpts, target)
        count = self.llm.count(self.messages_for(self.history, excerpts))
        if count.tokens <= self.room.prompt or not surely_over(count, self.room.prompt):
            return excerpts
        raise too_large(count.tokens, self.room, "the question and its excerpts")

    def said(self, configured: int, excerpts: list[Excerpt]) -> list[str]:
        """The warnings: turns left out, and excerpts held below the configured budget."""
        out = list(self.warnings)
        chars = sum(len(e.text) for e in excerpts)
        limit = self.limit
        if limit is not None and limit < configured:
            out.append(
                f"excerpts fitted to the model's context of {self.room.window.describe()}: "
                f"{chars:,} characters read (of the {configured:,} of {ENV['answer_budget']}), "
                f"{self.room.answer:,} tokens kept for the answer"
            )
        return out


def fit_rag(
    llm: LLMClient,
    settings: Settings,
    question_messages: Callable[[list[dict], list[Excerpt]], list[dict[str, Any]]],
    history: list[dict],
    turns: int,
    max_tokens: int,
) -> RagFit | None:
    """The room for a rag answer (None where the window is unknown). ``question_messages
    (history, excerpts)`` builds the answer's messages; ``turns``: how many of the history's
    last messages a prompt carries. The oldest turns go (two at a time, a question and its
    answer) while they would take more than half the prompt's room; a question that leaves
    less than :data:`MIN_EXCERPT_TOKENS` is refused."""
    room = room_for(llm, settings, max_tokens)
    if room is None:
        return None
    kept = list(history)[-turns:] if turns else []
    fixed = llm.count(question_messages(kept, []))
    dropped = 0
    while kept and fixed.tokens > room.prompt // 2:
        kept, dropped = kept[2:], dropped + min(2, len(kept))
        fixed = llm.count(question_messages(kept, []))
    warnings = []
    if dropped:
        warnings.append(
            f"the conversation's {dropped} oldest messages were left out to fit the "
            f"model's context of {room.window.describe()}"
        )
    if surely_over(fixed, room.prompt - MIN_EXCERPT_TOKENS):
        raise too_large(fixed.tokens, room, "the question")
    return RagFit(llm, room, question_messages, kept, fixed, warnings, dropped=dropped)


def too_large(tokens: int, room: Room, what: str) -> ContextExceeded:
    """The error for a prompt that cannot fit: both sizes, and what to change."""
    answer_heavy = room.answer >= room.window.tokens // 2
    setting = ENV["answer_max_tokens"] if answer_heavy else None
    hint = (
        f"lower {ENV['answer_max_tokens']} (now {room.answer:,})"
        if answer_heavy
        else "ask a shorter question"
        if what == "the question"
        else f"lower {ENV['answer_budget']}"
    )
    return ContextExceeded(
        f"{what} take {tokens:,} tokens, and {room.answer:,} are kept for the answer: more than "
        f"the model's context of {room.window.describe()}",
        prompt_tokens=tokens,
        context_tokens=room.window.tokens,
        answer_tokens=room.answer,
        context_source=room.window.source,
        setting=setting,
        cause="context_exceeded",
        hint=f"{hint}, or give the model a larger context (llama.cpp: -c, which --parallel "
        "splits among slots; Ollama: num_ctx)",
    )


def shrink_excerpts(
    excerpts: list[Excerpt],
    error: ContextExceeded,
    llm: LLMClient,
    max_tokens: int,
    configured_context: int | None,
) -> tuple[list[Excerpt], str]:
    """After an overflow reply: the excerpts cut to fit the context it names (or half, where
    it names none), and the warning that says so. Raises ``error`` when nothing can be cut."""
    chars = sum(len(e.text) for e in excerpts)
    window = error.extras.get("context_tokens") or llm.window(configured_context).tokens
    prompt = error.extras.get("prompt_tokens")
    if prompt and window:
        room = Room(ContextWindow(window, "the endpoint's overflow reply"), max_tokens)
        per_char = llm.tokens_per_char(" ".join(e.text for e in excerpts))
        target = int(chars - (prompt - room.prompt) * CUT_SLACK / per_char)
    else:
        target = chars // 2
    if not excerpts or target < MIN_EXCERPT_CHARS:
        error.extras["hint"] = "even without excerpts the request does not fit: " + str(
            error.extras.get("hint", "")
        )
        raise error
    sizes = (
        f"the request took {prompt:,} tokens of its {window:,}"
        if prompt and window
        else error.message
    )
    return fit(excerpts, target), (
        f"the model's context was smaller than expected ({sizes}): the excerpts were cut to "
        f"{target:,} characters and the question asked again"
    )


class Cuttable(Protocol):
    """What :func:`refit` cuts and tells of a rag answer being written (rag.Prepared, which
    imports this module)."""

    excerpts: list[Excerpt]
    warnings: list[str]

    @property
    def max_tokens(self) -> int: ...


def refit(prepared: Cuttable, error: ContextExceeded, llm: LLMClient) -> None:
    """A rag answer's excerpts cut after an overflow reply, the cut said in its warnings;
    ``error`` raised when nothing can be cut."""
    prepared.excerpts, said = shrink_excerpts(
        prepared.excerpts, error, llm, prepared.max_tokens, None
    )
    prepared.warnings.append(said)


# -- agent -------------------------------------------------------------------------------------


class AgentFit:
    """The room of an agent run: tool results cut to a share of what the instructions, tool
    schemas, turns and question leave, and the conversation compacted before each request."""

    def __init__(self, llm: LLMClient, room: Room):
        self.llm, self.room = llm, room
        self.warnings: list[str] = []

    def result_chars(self, fixed: Count, configured: int, steps: int, sample: str) -> int:
        """Characters of one tool result: a share of what the fixed part leaves (room for
        about three results, or ``steps``, whichever is fewer), in text like ``sample`` (the
        question), at most ``configured``. Results in a denser script are cut further by
        :meth:`compact`."""
        left = self.room.prompt - fixed.tokens
        share = left // max(1, min(3, steps)) if left > 0 else 0
        chars = int(share / self.llm.tokens_per_char(sample))
        return max(MIN_RESULT_CHARS, min(configured, chars))

    def compact(self, messages: list[dict[str, Any]], tools: list[dict] | None) -> bool:
        """Cut the oldest tool results (keeping their ``cite as`` line) until ``messages``
        fit; False when even cut they do not."""
        for _ in range(8):
            count = self.llm.count(messages, tools)
            if count.tokens <= self.room.prompt:
                return True
            excess = count.tokens - self.room.prompt
            if not _cut_oldest(messages, excess):
                return not surely_over(count, self.room.prompt)
        return self.llm.count(messages, tools).tokens <= self.room.prompt


def _cut_oldest(messages: list[dict[str, Any]], excess_tokens: int) -> bool:
    """Cut tool results, oldest first, by about ``excess_tokens``; False when none can be."""
    cut_any = False
    for message in messages:
        if excess_tokens <= 0:
            break
        if message.get("role") != "tool":
            continue
        body, cite = _split_cite(message.get("content") or "")
        body = body.removesuffix(CUT_MARK)
        if len(body) <= MIN_RESULT_CHARS:
            continue
        per_char = tokens_per_char(body)
        keep = max(MIN_RESULT_CHARS, int(len(body) - excess_tokens * CUT_SLACK / per_char))
        excess_tokens -= int((len(body) - keep) * per_char)
        message["content"] = body[:keep].rstrip() + CUT_MARK + cite
        cut_any = True
    return cut_any


def _split_cite(text: str) -> tuple[str, str]:
    """(a tool result's text, its trailing ``cite as`` line with the newline before it)."""
    at = text.rfind("\ncite as: ")
    return (text[:at], text[at:]) if at >= 0 else (text, "")
