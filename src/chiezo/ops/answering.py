"""The answering operations: ``ask`` (and ``chat``, a question with its history) as one answer
or as the events of one being written, in rag or agent mode — the options resolved once, the
mode branched on once — and kept in the record of answers."""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from chiezo.answer.options import AnswerOptions
from chiezo.core import here
from chiezo.core.errors import ChiezoError, InternalError, WebSearchOff
from chiezo.core.validation import checked_text
from chiezo.ops import web
from chiezo.ops.context import Context
from chiezo.ops.lookups import LibraryLookups
from chiezo.ops.requests import AskRequest, ChatRequest, check_question

if TYPE_CHECKING:
    from chiezo.answer.rag import Answer, Prepared

log = logging.getLogger("chiezo.answering")

Event = tuple[str, Any]
OnEvent = Callable[[str, Any], None]
Turns = list[dict[str, Any]]


def options_of(
    ctx: Context, options: AnswerOptions | None, choices: dict[str, Any]
) -> AnswerOptions:
    """The options as given (``choices``: AnswerOptions fields), the configured defaults
    filled in and the bounds checked: the one place they are resolved."""
    if options is not None and choices:
        options = replace(options, **choices)
    resolved = (options or AnswerOptions.of(**choices)).resolved(ctx.settings)
    if resolved.web and web.configured(ctx.settings) is None:
        raise WebSearchOff(
            "answering from the web (--web, web=1, CHIEZO_ANSWER_WEB) needs a web search, "
            "and none is set up",
            field="web",
            hint=web.TURN_ON,
        )
    return resolved


@checked_text
def prepare_answer(
    ctx: Context,
    question: str,
    options: AnswerOptions | None = None,
    *,
    history: Turns | None = None,
    **choices: Any,
) -> Prepared:
    """Plan, retrieve and excerpt (answer/rag.py) — everything before the model answers."""
    return _prepared(ctx, question, options_of(ctx, options, choices), history)


def _prepared(
    ctx: Context, question: str, options: AnswerOptions, history: Turns | None
) -> Prepared:
    from chiezo.answer import rag

    check_question(question)
    return rag.prepare(LibraryLookups(ctx), question, options, history=history, llm=ctx.llm())


@checked_text
def ask(
    ctx: Context,
    question: str,
    options: AnswerOptions | None = None,
    *,
    history: Turns | None = None,
    on_event: OnEvent | None = None,
    log_as: str | None = None,
    **choices: Any,
) -> Answer:
    """An answer from numbered sources with citations, its claims checked against them:
    ``rag`` (plan, search, excerpts, answer) or ``agent`` (the model calls the read-only
    tools itself, within budgets). ``choices`` are :class:`AnswerOptions` fields.
    ``log_as``: the surface asking, to keep the answer in the record of answers
    (ops/answers_log.py); None keeps nothing."""
    options = options_of(ctx, options, choices)
    started = time.monotonic()
    try:
        result = _asked_back(ctx, question, options) or (
            _agent(ctx, question, options, history, on_event)
            if options.mode == "agent"
            else _rag(ctx, question, options, history)
        )
    except Exception as exc:  # a failed ask is kept too, with its cause (a bug: its kind)
        if log_as:
            _log_failure(ctx, question, exc, options, started, log_as)
        raise
    if log_as:
        seconds = time.monotonic() - started
        ctx.answers_log.record(result.to_dict(), mode=_mode(options), seconds=seconds,
                               surface=log_as)  # fmt: skip
    return result


def ask_question(
    ctx: Context, request: AskRequest, *, log_as: str | None = None, stream: bool = False
) -> Answer | Iterator[Event]:
    """``ask`` as bound (ops/registry.py): the answer, or with ``stream`` its events."""
    if stream:
        return answer_events(ctx, request.question, request.options(), log_as=log_as)
    return ask(ctx, request.question, request.options(), log_as=log_as)


def chat_turn(
    ctx: Context,
    request: ChatRequest,
    *,
    writable: bool = False,
    log_as: str | None = None,
    stream: bool = False,
) -> Answer | Iterator[Event]:
    """``chat`` as bound: the last message answered with the ones before it as history;
    ``writable``: the caller may let the model remember (the server's write rules)."""
    question, history = request.question(), request.history()
    options = request.options(writable=writable)
    if stream:
        return answer_events(ctx, question, options, history=history, log_as=log_as)
    return ask(ctx, question, options, history=history, log_as=log_as)


@checked_text
def answer_events(
    ctx: Context,
    question: str,
    options: AnswerOptions | None = None,
    *,
    history: Turns | None = None,
    log_as: str | None = None,
    **choices: Any,
) -> Iterator[Event]:
    """The answer as it is written, as ``(event, data)`` pairs: rag gives ``references``,
    ``delta``…, ``done``; agent gives a ``step`` per tool call, then ``done``; a failure
    after the first event is an ``error`` event. Planning, retrieval and the check that a
    model is configured happen *before* this returns, so their failures are plain errors
    (an HTTP status, an exit code) rather than a broken stream."""
    options = options_of(ctx, options, choices)
    started = time.monotonic()
    try:
        asked = _asked_back(ctx, question, options)
        if asked is not None:
            events: Iterator[Event] = iter([("done", asked.to_dict())])
        elif options.mode == "agent":
            check_question(question)
            ctx.require_llm()
            events = _threaded_events(
                lambda emit: _agent(ctx, question, options, history, emit).to_dict()
            )
        else:
            events = _rag_events(ctx, question, options, history)
    except Exception as exc:
        if log_as:
            _log_failure(ctx, question, exc, options, started, log_as)
        raise
    if not log_as:
        return events
    return _logged(ctx, events, question, options, started, log_as)


def _asked_back(ctx: Context, question: str, options: AnswerOptions) -> Answer | None:
    """The question back to the person when a question about where they are lacks what it
    needs (answer/here_answers.py): no location, an expired one, no distance for "around" —
    asked before any search or model call."""
    from chiezo.answer import here_answers
    from chiezo.answer.rag import Answer

    check_question(question)
    wanted = here_answers.needs(question, options.location, ctx.settings.location_ttl)
    if not wanted:
        return None
    asked = Answer(question, here_answers.asking(wanted), [], [], "none", None,
                   bool(options.grounded), needs=[n.to_dict() for n in wanted])  # fmt: skip
    return asked


def _rag(ctx: Context, question: str, options: AnswerOptions, history: Turns | None) -> Answer:
    from chiezo.answer import rag

    prepared = _prepared(ctx, question, options, history)
    if not prepared.needs_model:
        return rag.no_basis(prepared)  # the model is not asked without sources
    return rag.answer(prepared, ctx.require_llm(prepared))


def _rag_events(
    ctx: Context, question: str, options: AnswerOptions, history: Turns | None
) -> Iterator[Event]:
    from chiezo.answer import rag

    prepared = _prepared(ctx, question, options, history)
    llm = ctx.require_llm(prepared) if prepared.needs_model else None
    return _guarded_events(rag.stream_answer(prepared, llm))


def _agent(
    ctx: Context,
    question: str,
    options: AnswerOptions,
    history: Turns | None,
    on_event: OnEvent | None,
) -> Answer:
    from chiezo.answer.agent import run_agent  # on use: it loads the MCP SDK (~1 s)
    from chiezo.ops.tools import toolbox

    check_question(question)
    with here.attached(options.location):  # the tools' near=here, checked at each call
        return run_agent(
            LibraryLookups(ctx),
            question.strip(),
            ctx.require_llm(),
            options,
            lambda small: toolbox(
                ctx, writable=options.writable, profile="compact" if small else None
            ),
            history=history,
            on_event=on_event,
        )


def _mode(options: AnswerOptions) -> str:
    return options.mode or "rag"


def _logged(
    ctx: Context,
    events: Iterator[Event],
    question: str,
    options: AnswerOptions,
    started: float,
    surface: str,
) -> Iterator[Event]:
    """``events`` passed on, the ``done`` one — or the ``error`` one, with what was
    written before it — kept in the record of answers too."""
    written: list[str] = []
    ended = False
    try:
        for name, data in events:
            seconds = time.monotonic() - started
            if name == "delta":
                written.append(str(data.get("text") or ""))
            elif name == "done":
                ctx.answers_log.record(data, mode=_mode(options), seconds=seconds, surface=surface)
            elif name == "error":
                _log_failure(ctx, question, data, options, started, surface, "".join(written))
            ended = ended or name in ("done", "error")
            yield name, data
    except GeneratorExit:  # the reader left before the end (a chat page closed)
        if not ended:
            gone = {"error": "the client stopped reading before the end", "cause": "abandoned"}
            _log_failure(ctx, question, gone, options, started, surface, "".join(written))
        raise


def _log_failure(
    ctx: Context,
    question: str,
    error: Exception | dict[str, Any],
    options: AnswerOptions,
    started: float,
    surface: str,
    written: str = "",
) -> None:
    """A failed ask kept in the record of answers, with what was written before it."""
    ctx.answers_log.record_error(question, error, mode=_mode(options), surface=surface,
                                 seconds=time.monotonic() - started,
                                 model=ctx.settings.llm_model, answer=written)  # fmt: skip


def _guarded_events(events: Iterator[Event]) -> Iterator[Event]:
    """A stream whose failures after the first byte become an ``error`` event, the last one:
    a bug too, in the one error shape, rather than a stream cut without a word."""
    try:
        yield from events
    except Exception as exc:  # noqa: BLE001 - reported in the stream, not swallowed
        yield "error", _stream_error(exc)


def _stream_error(exc: Exception) -> dict[str, Any]:
    """``exc`` as an ``error`` event's data: ``ChiezoError.to_dict()``; a bug is logged."""
    if isinstance(exc, ChiezoError):
        return exc.to_dict()
    log.exception("answering failed")
    return InternalError.wrapping(exc).to_dict()


def _threaded_events(work: Callable[[OnEvent], dict[str, Any]]) -> Iterator[Event]:
    """Run ``work(emit)`` (the agent) in a thread; its events, then ``done`` with what it
    returns (or ``error``), cross over a queue as they happen."""
    events: queue.Queue[Event] = queue.Queue()

    def run() -> None:
        try:
            events.put(("done", work(lambda name, data: events.put((name, data)))))
        except Exception as exc:  # noqa: BLE001 - reported in the stream, not swallowed
            events.put(("error", _stream_error(exc)))

    threading.Thread(target=run, daemon=True).start()
    while True:
        name, data = events.get()
        yield name, data
        if name in ("done", "error"):
            return
