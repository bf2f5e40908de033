"""Agent mode: the model calls the library's own tools, within budgets.

The tools are the library's read-only tools (ops/tools.py, which the MCP server serves too; plus
``remember`` in a chat allowed to write, never in ``ask``), converted to OpenAI function schemas
with their descriptions, and run in this process as the MCP server runs them; the system prompt
carries the MCP server's own instructions, so the model is told and reads what an MCP client
is told and reads. Budgets: steps, characters per tool result, an overall deadline
(``CHIEZO_AGENT_DEADLINE``); when one runs out the model is asked once more *without* tools for
the final answer instead of stopping empty. Where the model's context window is known, tool
results are cut to fit it and the conversation is compacted before each request (budget.py);
an overflow reply has the results cut to the context it names and the request made once more. An
identical call repeated in a run gets the earlier result back, marked as a repeat. Tool errors
(unknown source, unknown field, the 400 reasons) go back to the model as material.

Grounding is enforced here as in rag mode, not left to the model: with ``grounded`` on, a
reply that comes before any lookup is not an answer — Chiezo runs the search itself and asks
again; a run that found nothing ends in the fixed "no basis" reply; an answer citing nothing is
asked once more for citations; every sentence is then checked against what the tools returned
(support.py). ``source`` restricts every tool call to that source.

References are the documents seen in tool results, numbered in the order first seen (the
numbers each tool result tells the model to cite), with the text the model read of each.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from chiezo.answer import budget, here_answers
from chiezo.answer.context import ContextWindow
from chiezo.answer.excerpt import Excerpt
from chiezo.answer.llm import ChatReply, LLMClient, Stage
from chiezo.answer.lookups import Lookups
from chiezo.answer.options import AnswerOptions
from chiezo.answer.plan import keyword_queries, strip_reasoning
from chiezo.answer.rag import (
    HISTORY_TURNS,
    NO_BASIS,
    STOPPED,
    Answer,
    Span,
    language_of,
    timeline,
)
from chiezo.answer.repetition import loop_cut, unusable
from chiezo.answer.sentences import answer_sentences
from chiezo.answer.sentences import cited as cited_text
from chiezo.answer.tool_calls import Tool, Toolbox, call_tool, error_text
from chiezo.answer.websearch import WEB
from chiezo.core.config import ENV
from chiezo.core.errors import (
    BadQuery,
    ChiezoError,
    ContextExceeded,
    LLMTimeout,
    LLMUnavailable,
)
from chiezo.core.here import HERE, Need

AGENT_PROMPT = """You answer questions by looking things up in a library with the tools given.
Search first, read documents when a snippet is not enough, and answer ONLY from what the tools
returned, citing documents as [n] with the numbers given after each tool result. If the library
does not say, answer that it does not say. Answer briefly, in the language of the question."""

UNGROUNDED_AGENT_PROMPT = """You answer questions, looking things up in a library with the
tools given. Prefer what the tools return and cite it as [n] with the numbers given after each
tool result; where they do not say, you may answer from your own knowledge but must begin that
part with "(not from the library)". Answer briefly, in the language of the question."""

FINAL_PROMPT = """No more tool calls. Answer the question now from the tool results above,
citing [n]; if they do not contain the answer, say the library does not say."""

CITE_PROMPT = """Your answer cites no source. Answer again using only the tool results above,
citing each fact as [n] with the numbers given; if they do not contain the answer, say the
library does not say."""

SELF_SEARCH_ID = "chiezo-lookup"
# Seconds of the run's deadline kept for the answer without tools once the steps stop (at most
# a third of it): a run that spends it all on tool calls ends with nothing.
FINAL_RESERVE = 30.0
WRITE_TOOLS = ("remember",)  # offered when writes are allowed; update/forget never are
# A context is small when the full tool set's instructions and schemas alone would take more
# than this share of the prompt's room: the full profile is ~3.5k tokens, so a 4k or 8k
# context gets the compact one (~1.2k) and keeps room for results (design §39).
SMALL_CONTEXT_SHARE = 1 / 3
# (the tools of the compact profile when ``small``): handed in by the layer above (ops/tools.py)
Toolboxes = Callable[[bool], Toolbox]


class References:
    """Documents seen in tool results, numbered in the order first seen, with what of each
    the model read (for checking its claims)."""

    def __init__(self, link: Callable[[str, int, str | None, str | None], tuple[str | None, str]]):
        self.items: list[dict[str, Any]] = []
        self.texts: dict[int, str] = {}
        self._index: dict[tuple[str, int | str], int] = {}
        self._link = link

    def add(self, doc: dict[str, Any]) -> int | None:
        key = _identity(doc)
        if key is None:
            return None
        if key not in self._index:
            self.items.append({"n": len(self.items) + 1, **self._reference(doc)})
            self._index[key] = len(self.items)
        n = self._index[key]
        if isinstance(doc.get("distance_km"), int | float):  # for the place footer
            self.items[n - 1]["distance_km"] = doc["distance_km"]
        seen = " ".join(v for k, v in doc.items() if isinstance(v, str) and k not in _NOT_TEXT)
        self.texts[n] = f"{self.texts.get(n, '')}\n{seen}".strip()
        return n

    def _reference(self, doc: dict[str, Any]) -> dict[str, Any]:
        """What a reference says of a document: a web result is its URL, said to be the
        web's (never a document of the library)."""
        if doc["source"] == WEB:
            return {"source": WEB, "title": doc.get("title", ""), "url": doc["url"],
                    "cite": doc["url"], "kind": WEB}  # fmt: skip
        url, cite = self._link(doc["source"], doc["doc_id"], doc.get("key"), doc.get("url"))
        return {"source": doc["source"], "doc_id": doc["doc_id"], "title": doc.get("title", ""),
                "url": url, "cite": cite}  # fmt: skip

    def from_result(self, data: Any) -> list[int]:
        """Numbers of the documents in a tool's structured result (hits, docs, one doc)."""
        found: list[int] = []
        if not isinstance(data, dict):
            return found
        rows = data.get("hits") or data.get("docs") or data.get("notes") or []
        if "doc_id" in data and "source" in data:
            rows = [data]
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict):
                if "source" not in row and "source" in data:
                    row = {**row, "source": data["source"]}
                n = self.add(row)
                if n is not None and n not in found:
                    found.append(n)
        return found


def _identity(doc: dict[str, Any]) -> tuple[str, int | str] | None:
    """(source, doc_id) of a library document, ("web", URL) of a web result; None for
    anything else."""
    source = doc.get("source")
    if source == WEB:
        url = doc.get("url")
        return (WEB, url) if isinstance(url, str) and url else None
    doc_id = doc.get("doc_id")
    return (source, doc_id) if isinstance(source, str) and isinstance(doc_id, int) else None


_NOT_TEXT = frozenset(["source", "key", "url", "retrieval", "match", "generation"])


class Tools:
    """The library's tools offered to the model, called in-process, with the run's rules: the
    source restriction, repeats answered from memory, results cut to the budget."""

    def __init__(self, offered: list[Tool], options: AnswerOptions, references: References):
        self.options = options
        self.references = references
        self.tools: dict[str, Tool] = {t.name: t for t in offered if _offered(t, options)}
        self.schemas = [_schema(t) for t in self.tools.values()]
        self._sourced = {name for name, t in self.tools.items() if _takes_source(t)}
        self._done: dict[str, str] = {}
        # the last call's refusal (here_answers: what the person must give, the source that
        # asks it), read from the whole error: the text a model reads may be cut to its context
        self.last_refusal: dict[str, Any] = {}

    def call(self, call: dict) -> tuple[str, dict | str, str]:
        """(tool name, its arguments, the text the model gets back)."""
        self.last_refusal = {}
        function = call.get("function") or {}
        name = function.get("name", "")
        raw = function.get("arguments") or "{}"
        try:
            args = json.loads(raw) if isinstance(raw, str) else dict(raw)
            if not isinstance(args, dict):
                raise ValueError
        except (ValueError, TypeError):
            return name, str(raw)[:200], _error(f"the arguments are not a JSON object: {raw[:200]}")
        if name not in self.tools:
            return name, args, _error(f"unknown tool {name!r}", tools=sorted(self.tools))
        problem = self._restrict(name, args)
        if problem:
            return name, args, _error(problem)
        key = name + json.dumps(args, sort_keys=True, ensure_ascii=False)
        if key in self._done:
            return (
                name,
                args,
                "(a repeat of an earlier call: the same result as before)\n" + self._done[key],
            )
        self._done[key] = text = self._run(name, args)
        return name, args, text

    def last_needs(self) -> list[dict[str, Any]]:
        """What the last call's refusal says the person must give (here_answers)."""
        found = self.last_refusal.get("needs")
        return [n for n in found if isinstance(n, dict)] if isinstance(found, list) else []

    def _restrict(self, name: str, args: dict) -> str | None:
        wanted = self.options.source
        if wanted is None or name not in self._sourced:
            return None
        if args.get("source") in (None, ""):
            args["source"] = wanted  # "search everything" means this source here
        elif args["source"] != wanted:
            return f"this question is to be answered from the source {wanted!r} only"
        return None

    def _run(self, name: str, args: dict) -> str:
        limit = self.options.result_chars
        tool = self.tools[name]
        if "max_chars" in tool.parameters.get("properties", {}):  # a tool answer keeps to it
            asked = args.get("max_chars")
            if asked is None or (isinstance(asked, int) and asked > limit):
                args = {**args, "max_chars": limit}
        outcome = call_tool(tool, args)  # an error is material for the next step
        self.last_refusal = here_answers.tool_refusal(outcome.text) if outcome.failed else {}
        text = outcome.text
        cited = [] if outcome.failed else self.references.from_result(outcome.data)
        if len(text) > limit:  # a tool without max_chars
            text = text[:limit] + f"\n… (cut at {limit} characters)"
        if cited:
            items = self.references.items
            text += "\ncite as: " + ", ".join(f"[{n}] {items[n - 1]['title']}" for n in cited)
        return text


def _error(message: str, **extras: Any) -> str:
    """A call refused before it runs, in the text a tool's own errors have."""
    return error_text(BadQuery(message, **extras))


def _takes_source(tool: Tool) -> bool:
    return "source" in tool.parameters.get("properties", {})


def _offered(tool: Tool, options: AnswerOptions) -> bool:
    """Read-only tools (``remember`` too where writes are allowed); with a source named, only
    those that take a source, and the list of sources."""
    hints = tool.annotations
    read_only = hints is not None and bool(hints.read_only_hint)
    usable = read_only or (options.writable and tool.name in WRITE_TOOLS)
    return usable and (options.source is None or tool.name == "sources" or _takes_source(tool))


def _schema(tool: Tool) -> dict[str, Any]:
    """The tool as an OpenAI-compatible function."""
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": tool.parameters,
        },
    }


def system_prompt(options: AnswerOptions, instructions: str) -> str:
    prompt = AGENT_PROMPT if options.grounded else UNGROUNDED_AGENT_PROMPT
    if options.source:
        prompt += f"\nLook things up in the source {options.source!r} only."
    return f"{prompt}\n\nAbout the library and its tools:\n{instructions}"


class Run:
    """One agent run: the conversation with the model, the steps taken, the budgets left."""

    def __init__(
        self,
        lookups: Lookups,
        question: str,
        llm: LLMClient,
        options: AnswerOptions,
        history: list[dict] | None,
        on_event: Callable[[str, dict], None] | None,
        toolboxes: Toolboxes,
    ):
        self.question, self.llm, self.options = question, llm, options
        # the caller resolved the options (AnswerOptions.resolved): no default is left as None
        assert options.max_tokens is not None and options.deadline is not None
        self.max_tokens, self.deadline = options.max_tokens, options.deadline
        self.emit = on_event or (lambda name, data: None)
        self.references = References(lookups.reference_link)
        room = budget.room_for(llm, lookups.settings, self.max_tokens)
        self.small = self._use(toolboxes(False), room)
        if self.small:
            self._use(toolboxes(True), room)
        self.history = history or []
        turns = [
            {"role": m["role"], "content": m["content"]} for m in self.history[-HISTORY_TURNS:]
        ]
        self.steps: list[dict[str, Any]] = []
        self.spans: list[Span] = []  # each tool call, timed (the model's: llm.calls)
        self.warnings: list[str] = []
        self.stage = Stage("the agent's run", self.deadline, ENV["agent_deadline"])
        self.fit: budget.AgentFit | None = None
        self.refitted = False
        self.messages = self._opening(turns)
        if room is not None:
            self._fit_opening(room, turns)
        self.started = time.monotonic()
        self.model: str | None = None
        self.reserve = min(FINAL_RESERVE, self.deadline / 3)

    def _use(self, toolbox: Toolbox, room: budget.Room | None) -> bool:
        """Offer ``toolbox``; whether it is too much for a small context: the instructions and
        tool schemas alone would take more than :data:`SMALL_CONTEXT_SHARE` of the prompt's
        room (then the compact profile is offered instead)."""
        self.instructions = toolbox.instructions
        self.tools = Tools(toolbox.tools, self.options, self.references)
        if room is None:
            return False
        opening = self.llm.count(self._opening([]), self.tools.schemas)
        return opening.tokens > room.prompt * SMALL_CONTEXT_SHARE

    def _opening(self, turns: list[dict]) -> list[dict[str, Any]]:
        return [
            {"role": "system", "content": system_prompt(self.options, self.instructions)},
            *turns,
            {"role": "user", "content": self.question},
        ]

    def _fit_opening(self, room: budget.Room, turns: list[dict]) -> None:
        """Within a known context: the oldest turns out while the opening would take more
        than two thirds of the room, a question that leaves none refused, and each tool
        result cut to a share of what is left."""
        self.fit = budget.AgentFit(self.llm, room)
        fixed = self.llm.count(self.messages, self.tools.schemas)
        dropped = 0
        while turns and fixed.tokens > room.prompt * 2 // 3:
            turns, dropped = turns[2:], dropped + min(2, len(turns))
            self.messages = self._opening(turns)
            fixed = self.llm.count(self.messages, self.tools.schemas)
        if dropped:
            self.warnings.append(
                f"the conversation's {dropped} oldest messages were left out to "
                f"fit the model's context of {room.window.describe()}"
            )
        if budget.surely_over(fixed, room.prompt - budget.MIN_EXCERPT_TOKENS):
            raise budget.too_large(
                fixed.tokens,
                room,
                "the agent's instructions, its tools' descriptions and the question",
            )
        chars = self.fit.result_chars(
            fixed, self.options.result_chars, self.options.steps, self.question
        )
        if chars < self.options.result_chars:
            self.tools.options = replace(self.tools.options, result_chars=chars)
            self.warnings.append(
                f"tool results fitted to the model's context of "
                f"{room.window.describe()}: at most {chars:,} characters each "
                f"(of {self.options.result_chars:,})"
            )

    def left(self) -> float:
        return self.deadline - (time.monotonic() - self.started)

    def fits(self, *, tools: bool) -> bool:
        """Whether the conversation fits the context (tool results cut where they must be)."""
        schemas = self.tools.schemas if tools else None
        return self.fit is None or self.fit.compact(self.messages, schemas)

    def ask_model(self, *, tools: bool) -> ChatReply:
        """The model's next reply. Within a known context the conversation is compacted
        first; an overflow reply has the tool results cut to the context it names and the
        request made once more in the run, saying so; a second is the error."""
        schemas = self.tools.schemas if tools else None
        if not self.fits(tools=tools):
            assert self.fit is not None  # without a known context everything fits
            count = self.llm.count(self.messages, schemas)
            raise budget.too_large(count.tokens, self.fit.room, "the conversation")
        try:
            reply = self._chat(schemas)
        except ContextExceeded as exc:
            if self.refitted or not self._refit(exc, schemas):
                raise
            reply = self._chat(schemas)
        self.model = reply.model or self.model
        return reply

    def _chat(self, schemas: list[dict[str, Any]] | None) -> ChatReply:
        """A step's call ends in time to leave the final answer its reserve; the final
        answer (no tools) may take what is left."""
        left = self.left() - (self.reserve if schemas else 0.0)
        return self.llm.chat(
            self.messages,
            tools=schemas,
            max_tokens=self.max_tokens,
            timeout=max(5.0, left),
            stage=self.stage,
        )

    def _refit(self, exc: ContextExceeded, schemas: list[dict[str, Any]] | None) -> bool:
        self.refitted = True
        window = exc.extras.get("context_tokens")
        if window:
            room = budget.Room(
                ContextWindow(window, "the endpoint's overflow reply"), self.max_tokens
            )
        else:  # the reply names no size: two thirds of what was sent
            sent = self.llm.count(self.messages, schemas).tokens
            room = budget.Room(
                ContextWindow(
                    sent * 2 // 3 + self.max_tokens + 64,
                    "two thirds of the refused request",
                ),
                self.max_tokens,
            )
        self.fit = budget.AgentFit(self.llm, room)
        if not self.fit.compact(self.messages, schemas):
            return False
        sizes = (
            f"the request took {exc.extras['prompt_tokens']:,} tokens of its {window:,}"
            if window and exc.extras.get("prompt_tokens")
            else exc.message
        )
        self.warnings.append(
            f"the model's context was smaller than expected ({sizes}): the "
            "tool results were cut and the model asked again"
        )
        return True

    def take_step(self, step: int, calls: list[dict], content: str = "") -> None:
        self.messages.append({"role": "assistant", "content": content, "tool_calls": calls})
        for call in calls:
            started = time.monotonic()
            name, args, text = self.tools.call(call)
            span = Span.since("tool", name, started)
            self.spans.append(span)
            record = {
                "step": step,
                "tool": name,
                "arguments": args,
                "result_chars": len(text),
                "ms": round(span.seconds * 1000, 1),
            }
            if call.get("id") == SELF_SEARCH_ID:
                record["by"] = "chiezo"  # the model answered before looking anything up
            self.steps.append(record)
            self.emit("step", record)
            self.messages.append(
                {"role": "tool", "tool_call_id": call.get("id", ""), "content": text}
            )
            self._ask_back_for(text)

    def _ask_back_for(self, text: str) -> None:
        """A tool refused for want of what only the person can give (here_answers.to_ask):
        the run ends with the question to them."""
        found = self.tools.last_needs()
        if not found:
            return
        known = "\n".join(
            [self.question, *(m["content"] for m in self.history),
             *(m["content"] for m in self.messages if m["role"] == "tool" and m["content"] != text)]
        )  # fmt: skip
        wanted = here_answers.to_ask(found, known, language_of(self.question))
        if wanted:
            raise AskBack(wanted)

    def self_search(self, step: int) -> None:
        """Chiezo's own search, when the model answered before looking anything up (or ran
        out of time first); a question about here is searched around the person, by what it
        asks for (here_answers: the place words would match nothing), and again with the kind
        a matching source requires where the question names it (「洪水のときの避難場所」)."""
        around = here_answers.around(self.question, self.options.location)
        if around is None:
            query = keyword_queries(self.question, self.history)[0]
            self._search_for_the_model(step, self._restricted({"query": query}))
            return
        # around the person the question's words may all be needed (the sentence as typed
        # found nothing where its content words did: 「避難場所は?」 vs 避難場所), so the
        # planned queries are tried in turn until one finds places or a source asks a kind
        asked = here_answers.without_place_words(self.question)
        where = {"near": HERE, **({"radius_km": around.radius_km} if around.radius_km else {})}
        for query in keyword_queries(asked, self.history):
            args = self._restricted({"query": query, **where})
            seen = len(self.references.items)
            self._search_for_the_model(step, args)
            refused = here_answers.needs_of(self.tools.last_needs())
            kinds = here_answers.narrowed(around, refused) if refused else None
            source = self.tools.last_refusal.get("source")
            if kinds is not None and isinstance(source, str):  # that source, for that kind
                narrowed = {**where, "source": source, "feature": list(kinds.feature)}
                self._call_for_the_model(step, "filter", narrowed)
            if refused or len(self.references.items) > seen:
                return

    def _restricted(self, args: dict[str, Any]) -> dict[str, Any]:
        return {**args, "source": self.options.source} if self.options.source else args

    def _search_for_the_model(self, step: int, args: dict[str, Any]) -> None:
        self._call_for_the_model(step, "search", args)

    def _call_for_the_model(self, step: int, tool: str, args: dict[str, Any]) -> None:
        """Chiezo's own call of ``tool``, with the arguments the offered tool takes (the
        compact profile's search has no ``radius_km``: nearest first, then)."""
        offered = self.tools.tools.get(tool)
        if offered is not None:
            takes = offered.parameters.get("properties", {})
            args = {name: value for name, value in args.items() if name in takes}
        call = {"name": tool, "arguments": json.dumps(args, ensure_ascii=False)}
        self.take_step(step, [{"id": SELF_SEARCH_ID, "type": "function", "function": call}])

    def looked_up(self) -> bool:
        return any(s["tool"] != "sources" for s in self.steps)

    def answer(self, text: str, *notes: str) -> Answer:
        """The run's result for ``text``, its queries the searches made (claims unchecked)."""
        queries = [
            s["arguments"]["query"]
            for s in self.steps
            if s["tool"] == "search"
            and isinstance(s["arguments"], dict)
            and isinstance(s["arguments"].get("query"), str)
        ]
        return Answer(
            self.question,
            text,
            self.references.items,
            list(dict.fromkeys(queries)),
            "agent",
            self.model,
            bool(self.options.grounded),
            [*self.warnings, *notes],
            steps=self.steps,
            calls=[c.to_dict() for c in self.llm.calls],
            stages=timeline(self.spans, self.llm.calls),
        )


class AskBack(Exception):  # noqa: N818 - a turn of the conversation, not a failure
    """The run stops to ask the person for what a tool needs (here_answers.Need)."""

    def __init__(self, needs: list[Need]):
        super().__init__(here_answers.asking(needs))
        self.needs = needs


def asked_back(run: Run, needs: list[Need]) -> Answer:
    """The run's result when it must ask the person first: the question, and ``needs``."""
    answer = run.answer(here_answers.asking(needs))
    answer.needs = [n.to_dict() for n in needs]
    return answer


def run_agent(
    lookups: Lookups,
    question: str,
    llm: LLMClient,
    options: AnswerOptions,
    toolboxes: Toolboxes,
    *,
    history: list[dict] | None = None,
    on_event: Callable[[str, dict], None] | None = None,
) -> Answer:
    """``toolboxes``: the library's tools and their instructions (ops/tools.py) — the compact
    profile's for a small context — handed in by the layer above, which this one may not import."""
    run = Run(lookups, question, llm, options, history, on_event, toolboxes)
    try:
        final = _converse(run)
    except AskBack as asked:
        return asked_back(run, asked.needs)
    if final is None:
        run.messages.append({"role": "user", "content": FINAL_PROMPT})
        try:
            final = run.ask_model(tools=False).content
        except LLMUnavailable as exc:  # the final answer failed too: what was found stands
            return _findings(run, exc)
    return _finish(run, strip_reasoning(final or ""), lookups)


def _findings(run: Run, exc: LLMUnavailable) -> Answer:
    """The run's result when no model answer came at all: the library's own sentences from
    what the tools returned, each citing its reference, the cause said (a run out of time
    would otherwise print nothing)."""
    if not run.references.items:
        raise exc
    cause = str(exc.extras.get("cause") or "failed")
    note = f"the model gave no final answer ({exc.message}); the library's own sentences stand in"
    return _stood_in(run, cause, note)


def _stood_in(run: Run, cause: str, note: str) -> Answer:
    """The library's own sentences from what the tools returned, each citing its reference,
    as the answer, with why (``cause``: what ``stopped`` says)."""
    excerpts = [
        Excerpt(r["n"], r["source"], r.get("doc_id", 0), r["title"], r.get("url"),
                run.references.texts.get(r["n"], ""))
        for r in run.references.items
    ]  # fmt: skip
    sentences = answer_sentences(run.question, excerpts)
    answer = run.answer(cited_text(sentences), note)
    answer.sentences, answer.stopped, answer.model = sentences, cause, None
    answer.calls = [c.to_dict() for c in run.llm.calls]
    return answer.check(run.references.texts)


STOOD_IN = ("empty", "echo")  # replies that are no answer: the library's sentences stand in


def _judged(run: Run, text: str) -> tuple[str, str | None]:
    """The model's final ``text`` up to where it began repeating itself, and why it was cut or
    is no answer (``loop``, ``empty``, ``echo``: rag.STOPPED), else None. The final answer
    comes whole, not streamed, so rag's guard never read it: on SmolLM2-135M at -c 4096
    (bench/answer_e2e.py --modes agent, 3 + 3 questions, both trees) 10 of 12 final answers
    repeated themselves to max_tokens, and 4 of the 6 Japanese ones were the question said
    back, then again."""
    kept = loop_cut(text)
    if kept is not None:
        text = kept
    why = unusable(text, run.question, run.messages[0]["content"] if run.messages else "")
    return text, why or ("loop" if kept is not None else None)


def _converse(run: Run) -> str | None:
    """Tool calls until the model answers (None: a budget ran out first)."""
    for step in range(1, run.options.steps + 1):
        if run.left() <= run.reserve:
            run.warnings.append("the deadline ran out; answered from what was found")
            return None
        if step > 1 and not run.fits(tools=True):
            run.warnings.append("the model's context is full; answered from what was found")
            return None
        try:
            reply = run.ask_model(tools=True)
        except LLMTimeout:  # a step that outlasts its share: answer from what was found
            if not run.looked_up() and run.options.grounded:
                run.self_search(step)
            run.warnings.append("a step ran out of time; answered from what was found")
            return None
        if reply.tool_calls:
            run.take_step(step, reply.tool_calls, reply.content or "")
        elif run.options.grounded and not run.looked_up():
            run.self_search(step)  # an answer before any lookup rests on nothing
        else:
            return reply.content
    run.warnings.append(
        f"the step budget ({run.options.steps}) ran out; answered from what was found"
    )
    return None


def _finish(run: Run, text: str, lookups: Lookups) -> Answer:
    return _with_places(run, _finished(run, text, lookups), lookups)


def _with_places(run: Run, answer: Answer, lookups: Lookups) -> Answer:
    """The answer, ending with the places it rests on in the library's own words (distances
    straight-line, the first match quoted, what the library cannot say: here_answers)."""
    if answer.no_basis:
        return answer

    def body_of(ref: dict[str, Any]) -> str:
        if ref["source"] == WEB:  # a page of the web: only its snippet was read
            return ""
        try:
            return str(lookups.read(ref["source"], ref["doc_id"], ["body"]).get("body") or "")
        except ChiezoError:  # switched away since: no quote rather than no answer
            return ""

    footer = here_answers.place_footer(
        run.references.items, body_of, answer.cited, language_of(run.question)
    )
    if footer:
        answer.answer = f"{answer.answer.rstrip()}\n\n{footer}"
    return answer


def _finished(run: Run, text: str, lookups: Lookups) -> Answer:
    refs = run.references
    if run.options.grounded and not refs.items:
        answer = run.answer(text)
        answer.answer, answer.no_basis = NO_BASIS[language_of(run.question)], True
        return answer
    embed = lookups.claim_embedder([r["source"] for r in refs.items])
    answer = _judged_answer(run, text)
    if answer.stopped in STOOD_IN:
        return answer
    answer.check(refs.texts, embed)
    if run.options.grounded and not answer.cited and not answer.no_basis:
        run.messages += [
            {"role": "assistant", "content": answer.answer},  # (a loop cut off: context)
            {"role": "user", "content": CITE_PROMPT},
        ]
        retry = strip_reasoning(run.ask_model(tools=False).content or "")
        answer = _judged_answer(run, retry, "the first answer cited nothing; asked again")
        if answer.stopped not in STOOD_IN:
            answer.check(refs.texts, embed)
    return answer


def _judged_answer(run: Run, text: str, *notes: str) -> Answer:
    """The answer for the model's final ``text``: cut where it began looping, or the library's
    own sentences standing in for a reply that is no answer (empty, the question said back)."""
    kept, why = _judged(run, text)
    if why in STOOD_IN and run.references.items:
        return _stood_in(run, why, STOPPED[why])
    answer = run.answer(kept, *notes, *([STOPPED[why]] if why else []))
    answer.stopped = why
    return answer
