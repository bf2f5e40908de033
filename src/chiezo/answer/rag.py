"""``ask`` / ``chat`` in rag mode: plan → retrieve → excerpt → answer from numbered sources.

The model sees only the excerpts, numbered, and is told to cite them as [n]. When nothing was
found, the model is **not called**: the reply is a fixed "no basis in the library" — a small
model asked without sources invents. The queries actually used, the planner that made them,
the references and whether the answer cites anything are all in the result.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..errors import BadQuery, ChiezoError
from ..llm import LLMClient, LLMUnavailable
from .excerpt import Excerpt, excerpt_text
from .plan import PLAN_PROMPT, Plan, keyword_queries, parse_plan_reply, strip_reasoning

DEFAULT_BUDGET_CHARS = 2500
DEFAULT_MAX_DOCS = 5
HITS_PER_QUERY = 5
HISTORY_TURNS = 4
SKIPPED_FLAGS = ("disambiguation",)
DEMOTED_FLAGS = ("list", "date")

NO_BASIS = {
    "ja": "ライブラリにはこの質問に答える根拠が見つかりませんでした。",
    "en": "There is no basis in the library for answering this question.",
}

ANSWER_PROMPT = """Answer the question using ONLY the numbered sources below.
- Cite every fact with its source number in square brackets, like [1] or [2].
- If the sources do not contain the answer, say that the library does not say.
- Answer briefly, in the language of the question."""

# grounded=False (asked for explicitly): the model may fall back on what it knows, and must say so
UNGROUNDED_PROMPT = """Answer the question. Prefer the numbered sources below and cite them as
[1] or [2]; if they do not contain the answer, you may answer from your own knowledge but must
begin that part with "(not from the library)". Answer briefly, in the language of the question."""

_CITATION = re.compile(r"\[(\d{1,2})\]")


@dataclass
class Answer:
    question: str
    answer: str
    references: list[dict[str, Any]]
    queries: list[str]
    planner: str
    model: str | None
    grounded: bool
    cited: list[int] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    excerpts: list[Excerpt] = field(default_factory=list)

    def to_dict(self, with_excerpts: bool = False) -> dict[str, Any]:
        out = {
            "question": self.question, "answer": self.answer, "references": self.references,
            "queries": self.queries, "planner": self.planner, "model": self.model,
            "grounded": self.grounded, "cited": self.cited, "warnings": self.warnings,
        }  # fmt: skip
        if with_excerpts:
            out["excerpts"] = [e.to_dict() for e in self.excerpts]
        return out


class NothingFound(ChiezoError):
    status = 404
    exit_code = 3


def language_of(text: str) -> str:
    return "ja" if re.search(r"[\u3040-\u30ff\u3400-\u9fff]", text) else "en"


def plan_queries(
    question: str, llm: LLMClient | None, sources: list[str], history: list[dict] | None = None
) -> Plan:
    """The model's plan if it gives a usable one; otherwise keywords from the question."""
    if llm is None:
        return Plan(keyword_queries(question), planner="keywords")
    recent = "\n".join(f"{m['role']}: {m['content']}" for m in (history or [])[-HISTORY_TURNS:])
    user = (f"Sources: {', '.join(sources)}\n" + (f"Conversation so far:\n{recent}\n" if recent else "")
            + f"Question: {question}")  # fmt: skip
    try:
        reply = llm.chat([{"role": "system", "content": PLAN_PROMPT},
                          {"role": "user", "content": user}], max_tokens=200)  # fmt: skip
    except LLMUnavailable as exc:
        return Plan(keyword_queries(question), planner="keywords",
                    notes=[f"planning without a model: {exc.message}"])  # fmt: skip
    queries, source = parse_plan_reply(reply.content, sources)
    if not queries:
        return Plan(keyword_queries(question), planner="keywords",
                    notes=["the model's plan was unusable; keywords from the question"])  # fmt: skip
    return Plan(queries, source, planner="model")


def retrieve(service, plan: Plan, question: str, source: str | None, max_docs: int):
    """Documents for the plan's queries, in order, each once; disambiguation pages skipped,
    list and date pages after the rest. Returns (hits, warnings)."""
    chosen_source = source or plan.source
    seen: dict[tuple[str, int], Any] = {}
    for query in plan.queries:
        try:
            result = service.search(query, chosen_source, limit=HITS_PER_QUERY)
        except BadQuery:
            continue
        for hit in result.hits:
            seen.setdefault((hit.source, hit.doc_id), hit)
    warnings: list[str] = []
    kept, demoted = [], []
    for hit in seen.values():
        flags = _flags(service, hit)
        if any(f in flags for f in SKIPPED_FLAGS):
            warnings.append(f"skipped disambiguation page {hit.title}")
            continue
        (demoted if any(f in flags for f in DEMOTED_FLAGS) else kept).append(hit)
    return (kept + demoted)[:max_docs], warnings


def _flags(service, hit) -> list[str]:
    try:
        attrs = service.doc(hit.source, doc_id=hit.doc_id, fields=["attrs"]).get("attrs") or {}
    except ChiezoError:
        return []
    flags = attrs.get("flag") or []
    return flags if isinstance(flags, list) else [flags]


def make_excerpts(service, hits, question: str, budget: int) -> list[Excerpt]:
    from ..search.fts import choose_grams

    if not hits:
        return []
    share = max(300, budget // len(hits))
    out: list[Excerpt] = []
    for hit in hits:
        doc = service.doc(hit.source, doc_id=hit.doc_id, fields=["body", "url"])
        source = service.library.get(hit.source)
        pieces = choose_grams(source.conn, question, int(source.meta.get("doc_count", 1)))
        text = excerpt_text(doc.get("body") or hit.snippet, pieces, share)
        out.append(Excerpt(len(out) + 1, hit.source, hit.doc_id, hit.title,
                           doc.get("url") or hit.url, text))  # fmt: skip
    return out


def answer_messages(question: str, excerpts: list[Excerpt], history: list[dict] | None = None,
                    grounded: bool = True):  # fmt: skip
    sources = "\n\n".join(f"[{e.n}] {e.title}\n{e.text}" for e in excerpts) or "(none found)"
    system = ANSWER_PROMPT if grounded else UNGROUNDED_PROMPT
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for turn in (history or [])[-HISTORY_TURNS:]:
        messages.append({"role": turn["role"], "content": turn["content"]})
    messages.append({"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {question}"})
    return messages


def citations(text: str, count: int) -> list[int]:
    """The source numbers an answer cites, in first-cited order, only those that exist."""
    out: list[int] = []
    for match in _CITATION.finditer(text):
        n = int(match.group(1))
        if 1 <= n <= count and n not in out:
            out.append(n)
    return out


@dataclass
class Prepared:
    """Everything up to the answer: planning and retrieval are done before any byte of a
    streamed answer is sent, so their failures are real HTTP errors."""

    question: str
    plan: Plan
    excerpts: list[Excerpt]
    warnings: list[str]
    history: list[dict]

    def result(self, reply: str, model: str | None, grounded: bool = True) -> Answer:
        """The answer to return for the model's ``reply`` (reasoning residue stripped)."""
        text = strip_reasoning(reply)
        return Answer(self.question, text, [e.reference() for e in self.excerpts],
                      self.plan.queries, self.plan.planner, model, grounded,
                      citations(text, len(self.excerpts)), self.warnings, self.excerpts)  # fmt: skip


def prepare(service, question: str, *, source=None, history=None, llm=None,
            budget: int = DEFAULT_BUDGET_CHARS, max_docs: int = DEFAULT_MAX_DOCS) -> Prepared:  # fmt: skip
    question = question.strip()  # Service.prepare_answer refused an empty one
    if source is not None:
        service.library.get(source)  # unknown source: a 404 with the known ones, now
    names = [s["name"] for s in service.sources()]
    plan = plan_queries(question, llm, names, history)
    hits, warnings = retrieve(service, plan, question, source, max_docs)
    excerpts = make_excerpts(service, hits, question, budget)
    return Prepared(question, plan, excerpts, plan.notes + warnings, list(history or []))


def no_basis(prepared: Prepared) -> Answer:
    return Answer(prepared.question, NO_BASIS[language_of(prepared.question)], [],
                  prepared.plan.queries, prepared.plan.planner, None, True,
                  warnings=prepared.warnings)  # fmt: skip


def answer(prepared: Prepared, llm: LLMClient, *, grounded: bool = True) -> Answer:
    """The model's answer over the excerpts (``grounded``: none → the fixed reply, no call)."""
    if not prepared.excerpts and grounded:
        return no_basis(prepared)
    try:
        reply = llm.chat(answer_messages(prepared.question, prepared.excerpts, prepared.history,
                                         grounded))  # fmt: skip
    except LLMUnavailable as exc:
        exc.extras["excerpts"] = [e.to_dict() for e in prepared.excerpts]
        exc.extras["queries"] = prepared.plan.queries
        raise
    return prepared.result(reply.content, reply.model, grounded)


def stream_answer(prepared: Prepared, llm: LLMClient | None,
                  grounded: bool = True) -> Iterator[tuple[str, Any]]:  # fmt: skip
    """Events: ``references``, then ``delta``…, then ``done`` with the whole answer (and the
    name of the model that wrote it: a UI shows it as the speaker)."""
    yield "references", {"references": [e.reference() for e in prepared.excerpts],
                         "queries": prepared.plan.queries, "planner": prepared.plan.planner}  # fmt: skip
    if not prepared.excerpts and grounded:
        result = no_basis(prepared)
        yield "delta", {"text": result.answer}
        yield "done", result.to_dict()
        return
    parts: list[str] = []
    for delta in llm.stream(answer_messages(prepared.question, prepared.excerpts,
                                            prepared.history, grounded)):  # fmt: skip
        parts.append(delta)
        yield "delta", {"text": delta}
    yield "done", prepared.result("".join(parts), llm.streamed_model, grounded).to_dict()
