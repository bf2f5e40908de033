"""``ask`` / ``chat`` in rag mode: plan → retrieve → excerpt → answer from numbered sources.

The model sees only the excerpts, numbered, and is told to cite them as [n]. When nothing was
found, the model is **not called**: the reply is a fixed "no basis in the library" — a small
model asked without sources invents. The queries actually used, the planner that made them,
the references, what the answer cites and every sentence checked against the excerpts it
cites (support.py) are all in the result; ``grounded`` is true only when every sentence that
states something cites an excerpt that supports it.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from chiezo.answer import budget, here_answers, web_answers
from chiezo.answer.excerpt import Excerpt, excerpt_text
from chiezo.answer.here_answers import Around
from chiezo.answer.llm import Call, LLMClient, Stage
from chiezo.answer.lookups import Lookups
from chiezo.answer.options import AnswerOptions
from chiezo.answer.passages import choose
from chiezo.answer.plan import (
    ACROSS_LANGUAGES,
    MAX_QUERIES,
    PLAN_PROMPT,
    Plan,
    keyword_queries,
    leans_on_context,
    parse_plan_reply,
    strip_reasoning,
    without_reasoning,
)
from chiezo.answer.repetition import LoopGuard, unusable
from chiezo.answer.sentences import AnswerSentence, answer_sentences, cited
from chiezo.answer.subject import Missing, missing_subject, no_basis_reply
from chiezo.answer.support import (
    NO_CLAIM,
    SUPPORTED,
    Claim,
    Embed,
    check_claims,
    cited_numbers,
    summary,
)
from chiezo.answer.websearch import WEB
from chiezo.core.config import ENV
from chiezo.core.errors import BadQuery, ChiezoError, ContextExceeded, LLMUnavailable
from chiezo.core.here import Need, NeedsAnswer
from chiezo.core.models import Hit, SearchResult
from chiezo.core.textnorm import JAPANESE, language_of, normalise_title
from chiezo.search.languages import OTHER, script_of_language, script_of_text
from chiezo.search.notices import Notice

HITS_PER_QUERY = 5
HISTORY_TURNS = 4
SKIPPED_FLAGS = {"disambiguation": "disambiguation page", "main": "main page"}
DEMOTED_FLAGS = ("list", "date")

NO_BASIS = {
    "ja": "ライブラリにはこの質問に答える根拠が見つかりませんでした。",
    "en": "There is no basis in the library for answering this question.",
}

ANSWER_PROMPT = """Answer the question using ONLY the numbered sources below.
- Cite every fact with its source number in square brackets, like [1] or [2].
- If the sources do not contain the answer, say that the library does not say.
- Answer briefly, in the language of the question."""

# Why a model's answer was cut or stood in for: what ``stopped`` says and the warning explains.
# A loop keeps the answer up to where it began; an unusable reply is a failure of the model (a
# CLI exits 1) for which the library's own sentences stand in. (A deadline or a dropped
# connection is an error that carries the library's findings: Prepared.findings.)
STOPPED = {
    "loop": "the model began repeating itself: stopped there, the text before the loop kept",
    "empty": "the model's reply was empty: the library's own sentences stand in for it",
    "echo": "the model only said the question back: the library's own sentences stand in for it",
}

# grounded=False (asked for explicitly): the model may fall back on what it knows, and must say so
UNGROUNDED_PROMPT = """Answer the question. Prefer the numbered sources below and cite them as
[1] or [2]; if they do not contain the answer, you may answer from your own knowledge but must
begin that part with "(not from the library)". Answer briefly, in the language of the question."""


@dataclass
class Answer:
    question: str
    answer: str
    references: list[dict[str, Any]]
    queries: list[str]
    planner: str
    model: str | None
    only_from_sources: bool  # what was asked (grounded on); ``grounded`` is what came back
    warnings: list[str] = field(default_factory=list)
    excerpts: list[Excerpt] = field(default_factory=list)
    cited: list[int] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    no_basis: bool = False  # the library holds nothing that answers it
    steps: list[dict[str, Any]] = field(default_factory=list)  # agent: the tool calls made
    sentences: list[AnswerSentence] = field(default_factory=list)  # the library's own, best first
    stopped: str | None = None  # why the model's answer is cut or stood in for (STOPPED)
    calls: list[dict[str, Any]] = field(default_factory=list)  # each model call, timed
    stages: list[dict[str, Any]] = field(default_factory=list)  # where the time went: timeline()
    # what the person must give before it can be answered (core/here.py Need): the answer
    # is then the question asking for it, and no model was called
    needs: list[dict[str, Any]] = field(default_factory=list)
    # what the sources are: the library, or (rag with --web, the library having none) the web
    basis: str = web_answers.LIBRARY

    @property
    def supported(self) -> bool:
        """Every sentence that states something cites a source that supports it."""
        return (
            not self.no_basis
            and bool(self.cited)
            and all(c.status in (SUPPORTED, NO_CLAIM) for c in self.claims)
        )

    @property
    def grounded(self) -> bool:
        """Supported by the library's documents: snippets of web pages are a weaker kind of
        reference, never counted as the library's (web_answers)."""
        return self.supported and self.basis == web_answers.LIBRARY

    def check(
        self,
        texts: dict[int, str],
        embed: Embed | None = None,
        aliases: dict[int, list[str]] | None = None,
    ) -> Answer:
        """Citations and claims checked against ``texts`` (citation number → what the model
        read), each with its title and aliases (``aliases``, else those of the excerpt of that
        number), the question's own names being no invention. An answer that only says the
        sources do not answer it is a "no basis" reply."""
        self.cited = [n for n in cited_numbers(self.answer) if n in texts]
        titles = {r["n"]: r["title"] for r in self.references}
        if aliases is None:
            aliases = {e.n: list(getattr(e, "aliases", None) or []) for e in self.excerpts}
        self.claims = check_claims(self.answer, texts, embed, titles, aliases, self.question)
        if not any(c.status != NO_CLAIM for c in self.claims):
            self.no_basis = True
        return self

    def to_dict(self, with_excerpts: bool = False) -> dict[str, Any]:
        out = {
            "question": self.question,
            "answer": self.answer,
            "references": self.references,
            "queries": self.queries,
            "planner": self.planner,
            "model": self.model,
            "grounded": self.grounded,
            "only_from_sources": self.only_from_sources,
            "no_basis": self.no_basis,
            "cited": self.cited,
            "claims": [c.to_dict() for c in self.claims],
            **summary(self.claims),
            "warnings": self.warnings,
            "answer_sentences": [s.to_dict() for s in self.sentences],
            "stopped": self.stopped,
            "calls": self.calls,
            "stages": self.stages,
        }
        if self.steps:
            out["steps"] = self.steps
        if self.needs:
            out["needs"] = self.needs
        if self.basis != web_answers.LIBRARY:
            out["basis"] = self.basis
            out["web_supported"] = self.supported
        if with_excerpts:
            out["excerpts"] = [e.to_dict() for e in self.excerpts]
        return out


@dataclass(frozen=True)
class Span:
    """A stage of answering that is not a model call (those are timed as they are made:
    llm.Call), timed where it ran: ``plan``, ``search``, ``excerpts`` or ``tool``."""

    stage: str
    name: str  # what it was: the planner, the query, the tool
    started: float  # time.monotonic(): where it goes in the timeline
    seconds: float

    @classmethod
    def since(cls, stage: str, name: str, started: float, *, within: Iterable[Call] = ()) -> Span:
        """The span from ``started`` to now, less the model calls made ``within`` it (each is
        a stage of its own: the seconds of a timeline add up, nothing counted twice)."""
        asked = sum(c.seconds or 0.0 for c in within)
        return cls(stage, name, started, max(0.0, time.monotonic() - started - asked))


def timeline(spans: Iterable[Span], calls: Iterable[Call]) -> list[dict[str, Any]]:
    """The stages of an answer in the order they began: the spans timed where they ran and
    a ``model`` stage for each call (its stage name, seconds and tokens as the call has them:
    the endpoint's counts where it reports usage)."""
    rows = [(s.started, _stage(s.stage, s.name, s.seconds, None, None)) for s in spans]
    for c in calls:
        seconds = c.elapsed() if c.seconds is None else c.seconds  # (None: still running)
        rows.append((c.started, _stage("model", c.stage, seconds, c.tokens_in, c.tokens_out)))
    return [row for _, row in sorted(rows, key=lambda r: r[0])]


def _stage(
    stage: str, name: str, seconds: float, tokens_in: int | None, tokens_out: int | None
) -> dict[str, Any]:
    return {
        "stage": stage,
        "name": name,
        "seconds": round(seconds, 3),
        "tokens_in": tokens_in,
        "tokens_out": tokens_out,
    }


def _listed(
    question: str, sources: list[str], languages: dict[str, str | None]
) -> tuple[str, bool]:
    """The sources as the planner reads them, each with its language where one is known
    (``jawiki (ja)``), and whether any is in another script than the question."""
    script = script_of_text(question)
    across = any(script_of_language(languages.get(name)) not in (None, script) for name in sources)
    shown = [f"{n} ({languages[n]})" if languages.get(n) else n for n in sources]
    return ", ".join(shown), across


def plan_queries(
    question: str,
    llm: LLMClient | None,
    sources: list[str],
    history: list[dict] | None = None,
    timeout: float | None = None,
    planner: str = "auto",
    languages: dict[str, str | None] | None = None,
) -> Plan:
    """The searches for ``question``. ``planner``: ``keywords`` — the question's own words,
    no model call; ``model`` — the model's plan if it gives a usable one, else the keywords
    with a note saying why; ``auto`` — the model only for a chat follow-up that leans on
    earlier turns, the keywords otherwise (on a small model the plan costs a whole call and
    found no more: design.md §38.1). ``timeout``: seconds the planner may take
    (``CHIEZO_PLAN_TIMEOUT``, within ``CHIEZO_LLM_TIMEOUT``)."""
    wanted = planner == "model" or (
        planner == "auto" and bool(history) and leans_on_context(question)
    )
    if llm is None or not wanted:
        return Plan(keyword_queries(question, history), planner="keywords")
    recent = "\n".join(f"{m['role']}: {m['content']}" for m in (history or [])[-HISTORY_TURNS:])
    listed, across = _listed(question, sources, languages or {})
    user = (
        f"Sources: {listed}\n"
        + (f"Conversation so far:\n{recent}\n" if recent else "")
        + f"Question: {question}"
    )
    # each request's own limit (CHIEZO_LLM_TIMEOUT) holds for the planner too
    planning = (
        Stage("planning", timeout, ENV["plan_timeout"])
        if timeout and timeout < llm.timeout
        else Stage("planning", llm.timeout, ENV["llm_timeout"])
    )
    try:
        reply = llm.chat(
            [
                {"role": "system", "content": PLAN_PROMPT + (ACROSS_LANGUAGES if across else "")},
                {"role": "user", "content": user},
            ],
            max_tokens=200,
            timeout=planning.seconds,
            stage=planning,
        )
    except LLMUnavailable as exc:
        return Plan(
            keyword_queries(question, history),
            planner="keywords",
            notes=[f"planning without a model: {exc.message}"],
        )
    queries, source = parse_plan_reply(reply.content, sources)
    if not queries:
        return Plan(
            keyword_queries(question, history),
            planner="keywords",
            notes=["the model's plan was unusable; keywords from the question"],
        )
    return Plan(queries, source, planner="model")


def find_documents(
    lookups: Lookups,
    plan: Plan,
    source: str | None,
    max_docs: int,
    spans: list[Span] | None = None,
    around: Around | None = None,
) -> tuple[list[Hit], list[str]]:
    """Documents for the plan's queries, in order, each article once (one title, one
    excerpt); disambiguation and main pages skipped, list and date pages after the rest.
    Returns (hits, warnings); each search is timed into ``spans``."""
    chosen_source = source or plan.source
    seen: dict[tuple[str, str], Hit] = {}
    for query in plan.queries:
        started = time.monotonic()
        try:
            result = _searched(lookups, query, chosen_source, around)
        except NeedsAnswer:
            raise  # only the person can say which kind: the answer asks (prepare)
        except BadQuery:
            continue
        finally:
            if spans is not None:
                spans.append(Span.since("search", query, started))
        for hit in result.hits:
            # the same article under two entries (a ZIM page and its copy) is read once
            seen.setdefault((hit.source, normalise_title(hit.title)), hit)
    warnings: list[str] = []
    kept: list[Hit] = []
    demoted: list[Hit] = []
    for hit in seen.values():
        flags = _flags(lookups, hit)
        skipped = [f for f in flags if f in SKIPPED_FLAGS]
        if skipped:
            warnings.append(f"skipped {SKIPPED_FLAGS[skipped[0]]} {hit.title}")
            continue
        (demoted if any(f in flags for f in DEMOTED_FLAGS) else kept).append(hit)
    return (kept + demoted)[:max_docs], warnings


def _question_first(question: str, queries: list[str]) -> list[str]:
    """The question as typed searched first: where only meaning can find the documents (a
    question in another script than every source with vectors), the whole question carries
    more of it than a name alone — English questions over the jawiki excerpt, the excerpts'
    documents R@5 .365 → .587 and .239 → .696 across sources (docs/design.md §42.6)."""
    return [question, *(q for q in queries if q != question)]


COUNTERPART_QUERIES = 2  # titles added through Wikidata: each is one more search


def _through_wikidata(lookups: Lookups, plan: Plan, source: str | None) -> Plan:
    """The plan with the titles that the same Wikidata items have in other sources, of the
    plan's queries that are a document's title or alias ("Austria" in enwiki → オーストリア in
    jawiki): the planner without a model finds the article in the other language by its id,
    where words could not. Nothing is added where no two sources record Wikidata ids."""
    found = lookups.counterparts(plan.queries[:MAX_QUERIES], source)  # the library listed once
    added = [title for title in found if title not in plan.queries][:COUNTERPART_QUERIES]
    if not added:
        return plan
    said = f"looked up through Wikidata: {', '.join(added)}"
    return replace(plan, queries=[*plan.queries, *added], notes=[*plan.notes, said])


def _searched(
    lookups: Lookups, query: str, source: str | None, around: Around | None
) -> SearchResult:
    """One planned search; around the person, a source that requires a kind the question
    names (洪水) is searched for it (here_answers.narrowed)."""
    try:
        return lookups.search(query, source, HITS_PER_QUERY, around)
    except NeedsAnswer as refused:
        kinds = here_answers.narrowed(around, refused.needs) if around else None
        if kinds is None:
            raise
        return lookups.search(query, source, HITS_PER_QUERY, kinds)


def _flags(lookups: Lookups, hit: Hit) -> list[str]:
    try:
        attrs = lookups.read(hit.source, hit.doc_id, ["attrs"]).get("attrs") or {}
    except ChiezoError:
        return []
    flags = attrs.get("flag") or []
    return flags if isinstance(flags, list) else [flags]


def make_excerpts(
    lookups: Lookups, hits: Sequence[Hit], question: str, budget: int
) -> list[Excerpt]:
    """The excerpts the model reads: the passages of ``hits`` that best answer ``question``,
    chosen on evidence within ``budget`` characters (passages.py), a document's own in its
    order; a document none of whose passages is chosen is not an excerpt."""
    out: list[Excerpt] = []
    for document in choose(lookups, hits, question, budget):
        text = excerpt_text(document.chosen)
        if any(e.text == text for e in out):
            continue  # two entries with one text (a copy under another path)
        hit = document.hit
        doc = lookups.read(hit.source, hit.doc_id, ["url", "key"])
        url, cite = lookups.reference_link(
            hit.source, hit.doc_id, doc.get("key"), doc.get("url") or hit.url
        )
        out.append(
            Excerpt(
                len(out) + 1,
                hit.source,
                hit.doc_id,
                document.title,
                url,
                text,
                cite,
                aliases=document.aliases,
                passages=document.chosen,
                distance_km=getattr(hit, "distance_km", None),  # a search hit near=here
                meaning=getattr(hit, "semantic", None),
            )
        )
    return out


def answer_messages(
    question: str,
    excerpts: list[Excerpt],
    history: list[dict] | None = None,
    grounded: bool = True,
    basis: str = web_answers.LIBRARY,
) -> list[dict[str, Any]]:
    sources = "\n\n".join(f"{e.heading()}\n{e.text}" for e in excerpts) or "(none found)"
    system = ANSWER_PROMPT if grounded else UNGROUNDED_PROMPT
    if basis == WEB:
        system = web_answers.WEB_PROMPT
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for turn in (history or [])[-HISTORY_TURNS:]:
        messages.append({"role": turn["role"], "content": turn["content"]})
    messages.append({"role": "user", "content": f"Sources:\n{sources}\n\nQuestion: {question}"})
    return messages


@dataclass
class Prepared:
    """Everything up to the answer: planning and retrieval are done before any byte of a
    streamed answer is sent, so their failures are real HTTP errors."""

    question: str
    plan: Plan
    excerpts: list[Excerpt]
    warnings: list[str]
    history: list[dict]
    options: AnswerOptions
    embed: Embed | None = None  # the sources' embedder, for checking claims
    sentences: list[AnswerSentence] = field(default_factory=list)  # the library's, best first
    first_token: float | None = None  # seconds the first piece may take (the setting's)
    calls: list[Call] = field(default_factory=list)  # model calls so far (the planner's)
    missing: Missing | None = None  # the subject named that no document found is about
    spans: list[Span] = field(default_factory=list)  # plan, searches, excerpts: timed
    around: Around | None = None  # a question about here: searched around the person
    bodies: dict[int, str] = field(default_factory=dict)  # around: each excerpt's document
    needs: list[Need] = field(default_factory=list)  # what the person must say first
    basis: str = web_answers.LIBRARY  # the web: the library had none (web_answers)

    def result(
        self,
        reply: str,
        model: str | None,
        stopped: str | None = None,
        calls: Iterable[Call] = (),
    ) -> Answer:
        """The answer to return for the model's ``reply`` (reasoning residue stripped),
        its citations and claims checked against the excerpts. ``stopped``: why the reply
        is cut (:data:`STOPPED`); a reply with nothing usable in it has the library's own
        sentences stand in for it, saying so."""
        text = strip_reasoning(reply)
        instructions = ANSWER_PROMPT if self.options.grounded else UNGROUNDED_PROMPT
        stopped = stopped or unusable(text, self.question, instructions)
        if stopped in ("empty", "echo") and self.sentences:
            text, model = self.library_answer(), None
        answer = Answer(
            self.question,
            text,
            [e.reference() for e in self.excerpts],
            self.plan.queries,
            self.plan.planner,
            model,
            bool(self.options.grounded),
            list(self.warnings)
            + ([STOPPED[stopped]] if stopped else [])
            + _language_warning(self.question, text),
            self.excerpts,
            sentences=self.sentences,
            stopped=stopped,
            calls=[c.to_dict() for c in [*self.calls, *calls]],
            stages=timeline(self.spans, [*self.calls, *calls]),
            basis=self.basis,
        )
        answer.check({e.n: e.text for e in self.excerpts}, self.embed)
        footer = self.footer(answer.cited)
        if footer:
            answer.answer = f"{answer.answer.rstrip()}\n\n{footer}"
        return answer

    def footer(self, cited: list[int]) -> str:
        """What the answer ends with: that its basis is the web (web_answers), or the places
        around the person it rests on (here_answers)."""
        if self.basis == WEB:
            return web_answers.footer(self.question)
        if self.around is None:
            return ""
        return here_answers.place_footer(
            [e.reference() for e in self.excerpts],
            lambda ref: self.bodies.get(ref["n"], ""),
            cited,
            language_of(self.question),
        )

    def library_answer(self) -> str:
        """The library's own sentences that answer the question, each citing its excerpt:
        what stands in when the model gives nothing usable."""
        return cited(self.sentences)

    def messages(self) -> list[dict[str, Any]]:
        return answer_messages(
            self.question, self.excerpts, self.history, bool(self.options.grounded), self.basis
        )

    @contextlib.contextmanager
    def handing_over(self, llm: LLMClient) -> Iterator[None]:
        """No model could answer: the error carries what was found (the lookup is not
        wasted; the CLI prints it, the API returns it) and the model calls made."""
        try:
            yield
        except LLMUnavailable as exc:
            exc.extras.update(self.findings())
            exc.extras["calls"] = [c.to_dict() for c in [*self.calls, *llm.calls]]
            exc.extras["stages"] = timeline(self.spans, [*self.calls, *llm.calls])
            raise

    def findings(self) -> dict[str, Any]:
        """What the library found, for an error to carry when no answer was written."""
        return {
            "answer_sentences": [s.to_dict() for s in self.sentences],
            "excerpts": [e.to_dict() for e in self.excerpts],
            "queries": self.plan.queries,
        }

    @property
    def needs_model(self) -> bool:
        """A grounded answer without excerpts, or about a subject no excerpt is about, is the
        fixed reply: the model is not asked (a small model asked anyway answers from
        whatever it was given: 夏目漱石's birth "from [1] 愛媛県")."""
        return (bool(self.excerpts) and self.missing is None) or not self.options.grounded

    @property
    def max_tokens(self) -> int:
        """The answer's length cap: never None once the options are resolved (prepare's)."""
        assert self.options.max_tokens is not None
        return self.options.max_tokens


def prepare(
    lookups: Lookups,
    question: str,
    options: AnswerOptions,
    history: list[dict] | None = None,
    llm: LLMClient | None = None,
) -> Prepared:
    """Plan, retrieve and excerpt. With a model whose context window is known, the excerpts
    are fitted to it (budget.py): a question too long for it is refused here, before the
    model is asked anything."""
    question = question.strip()  # the caller refused an empty one
    if options.source is not None:
        lookups.check_source(options.source)  # unknown: a 404 naming the known ones, up front
    # the caller resolved the options (AnswerOptions.resolved): no default is left as None
    assert options.max_tokens is not None
    assert options.budget is not None and options.excerpts is not None
    history = list(history or [])
    fitted = None
    if llm is not None:
        fitted = budget.fit_rag(
            llm,
            lookups.settings,
            lambda turns, excerpts: answer_messages(
                question, excerpts, turns, bool(options.grounded)
            ),
            history,
            HISTORY_TURNS,
            options.max_tokens,
        )
    names = lookups.source_names()
    # turns left out to fit the context are left out of the planner's prompt too
    turns = fitted.history if fitted is not None and fitted.dropped else history
    spans: list[Span] = []
    asked, started = len(llm.calls) if llm is not None else 0, time.monotonic()
    around = here_answers.around(question, options.location)
    # around the person, the words say what is sought; where is the location's (and the
    # place words of the question would match no document)
    sought = here_answers.without_place_words(question) if around else question
    plan = plan_queries(
        sought, llm, names, turns, lookups.settings.plan_timeout, options.plan or "auto",
        {name: lookups.source_language(name) for name in names},
    )  # fmt: skip
    if plan.planner == "keywords":  # no model to translate: a title's counterparts
        plan = _through_wikidata(lookups, plan, options.source)
        if not history and lookups.by_meaning_only(sought, options.source):
            plan = replace(plan, queries=_question_first(sought, plan.queries))
    planning = llm.calls[asked:] if llm is not None else []
    spans.append(Span.since("plan", plan.planner, started, within=planning))
    needs: list[Need] = []
    try:
        hits, warnings = find_documents(
            lookups, plan, options.source, options.excerpts, spans, around
        )
    except NeedsAnswer as refused:  # a source's places matched; which kind, the person says
        hits, warnings = [], []
        refusals = [n.to_dict() for n in refused.needs]
        needs = here_answers.to_ask(refusals, question, language_of(question))
    if around is not None and around.radius_km is not None and not hits:
        warnings.append(str(Notice("none_within", radius_km=f"{around.radius_km:g}")))
    started = time.monotonic()  # the excerpts: passages chosen, cut, the library's sentences
    chars = options.budget
    if fitted is not None:
        found = " ".join(f"{h.title} {getattr(h, 'snippet', '') or ''}" for h in hits)
        chars = fitted.excerpt_chars(options.budget, found, len(hits))
    excerpts = make_excerpts(lookups, hits, question, chars)
    if fitted is not None:
        excerpts = fitted.trim(excerpts)
        warnings = warnings + fitted.said(options.budget, excerpts)
    embed = lookups.claim_embedder([e.source for e in excerpts])
    sentences = answer_sentences(question, excerpts)
    missing = _missing(lookups, question, excerpts, options)
    spans.append(Span.since("excerpts", _excerpts_name(excerpts, hits), started))
    basis = web_answers.LIBRARY
    if options.web and (not excerpts or missing is not None) and not needs:
        started = time.monotonic()
        from_web, said = web_answers.excerpts(lookups, question)
        spans.append(Span.since("web", f"{len(from_web)} results", started))
        warnings = warnings + said
        if from_web:  # the web's results are the sources; nothing of the library's stays
            excerpts, missing, embed, basis = from_web, None, None, WEB
            sentences = answer_sentences(question, excerpts)
    return Prepared(
        question,
        plan,
        excerpts,
        plan.notes + warnings,
        turns,
        options,
        embed,
        sentences,
        lookups.settings.first_token_timeout,
        list(llm.calls) if llm is not None else [],
        missing,
        spans,
        around,
        _bodies(lookups, excerpts) if around and basis != WEB else {},
        needs,
        basis,
    )


def _bodies(lookups: Lookups, excerpts: list[Excerpt]) -> dict[int, str]:
    """Each excerpt's whole document text (the place answer quotes the first match's own
    words, not the passage cut for the model); one that cannot be read is left out."""
    bodies = {}
    for e in excerpts:
        with contextlib.suppress(ChiezoError):
            bodies[e.n] = str(lookups.read(e.source, e.doc_id, ["body"]).get("body") or "")
    return bodies


def _excerpts_name(excerpts: list[Excerpt], hits: list[Hit]) -> str:
    chars = sum(len(e.text) for e in excerpts)
    return f"{len(excerpts)} of {len(hits)} documents, {chars:,} characters"


def _language_warning(question: str, text: str) -> list[str]:
    """A warning when the answer is written in another language than the question (a small
    English-only model answering a Japanese question: SmolLM2-135M did so every time)."""
    letters = re.findall(r"[^\W\d_]", re.sub(r"\[\d+\]", "", text))
    if not letters:
        return []
    japanese = sum(bool(JAPANESE.match(c)) for c in letters)
    written = "ja" if japanese >= len(letters) / 2 else "en"  # a name quoted is not a language
    asked = language_of(question)
    if written == asked:
        return []
    named = {"ja": "Japanese", "en": "English"}
    return [
        f"the model answered in {named[written]} a question asked in {named[asked]}: "
        "see what the library says (answer_sentences)"
    ]


# Meaning this far above the floor makes an excerpt titled in another script than the question
# count as about its subject: no title can stand for "Austria" in jawiki, so the subject test
# (answer/subject.py) cannot tell, and it called 35 of 109 English questions over the jawiki
# excerpt unanswerable whose right article was among the excerpts. At 0.15, 19 of the 35 are
# answered and none of 120 SQuAD questions (subjects the library lacks) loses its "no basis";
# 0.1 answers 27 and lets 2 of the 120 through to the model (docs/design.md §42.6).
ACROSS_SCRIPTS_ABOUT = 0.15


def _about_across_scripts(question: str, excerpts: list[Excerpt]) -> bool:
    """Whether meaning found an excerpt titled in another script than ``question`` strongly
    enough to count as about its subject (``ACROSS_SCRIPTS_ABOUT``)."""
    theirs = (script_of_text(question), OTHER)
    strong = [e for e in excerpts if (e.meaning or 0.0) >= ACROSS_SCRIPTS_ABOUT]
    return any(script_of_text(e.title) not in theirs for e in strong)


def _missing(
    lookups: Lookups, question: str, excerpts: list[Excerpt], options: AnswerOptions
) -> Missing | None:
    """The subject the question names that no excerpt is about (answer/subject.py), where the
    library has no article of that title either (the search may have missed one); None when
    the answer may go beyond the sources or nothing was found (the plain fixed reply)."""
    if not options.grounded or not excerpts or _about_across_scripts(question, excerpts):
        return None
    return missing_subject(
        question, excerpts, has_article=lambda name: lookups.has_article(name, options.source)
    )


def no_basis(prepared: Prepared) -> Answer:
    """The fixed reply, decided before any model is asked: the library holds nothing that
    answers the question, or nothing about the subject it names (said by name, with the
    documents that mention it in passing)."""
    if prepared.needs:  # not "nothing found": the person is asked what only they can say
        return _asked_back(prepared)
    language = language_of(prepared.question)
    missing = prepared.missing
    return Answer(
        prepared.question,
        no_basis_reply(missing, language) if missing else NO_BASIS[language],
        [],
        prepared.plan.queries,
        prepared.plan.planner,
        None,
        bool(prepared.options.grounded),
        list(prepared.warnings),
        no_basis=True,
        calls=[c.to_dict() for c in prepared.calls],
        stages=timeline(prepared.spans, prepared.calls),
    )


def _asked_back(prepared: Prepared) -> Answer:
    """The question back to the person (here_answers): no model asked, nothing guessed."""
    return Answer(
        prepared.question,
        here_answers.asking(prepared.needs),
        [],
        prepared.plan.queries,
        prepared.plan.planner,
        None,
        bool(prepared.options.grounded),
        list(prepared.warnings),
        calls=[c.to_dict() for c in prepared.calls],
        stages=timeline(prepared.spans, prepared.calls),
        needs=[n.to_dict() for n in prepared.needs],
    )


def answer(prepared: Prepared, llm: LLMClient) -> Answer:
    """The model's answer over the excerpts (grounded and none → the fixed reply, no call),
    read as a stream so that a loop is stopped where it begins (:func:`written`)."""
    if not prepared.needs_model:
        return no_basis(prepared)
    for name, data in written(prepared, llm):
        if name == "answer":
            return data
    raise AssertionError("written() ends with the answer")


def stream_answer(prepared: Prepared, llm: LLMClient | None) -> Iterator[tuple[str, Any]]:
    """Events: ``references``, then ``delta``…, then ``done`` with the whole answer, its claims
    checked (and the name of the model that wrote it: a UI shows it as the speaker)."""
    yield "references", _references(prepared)
    if not prepared.needs_model:
        result = no_basis(prepared)
        yield "delta", {"text": result.answer}
        yield "done", result.to_dict()
        return
    assert llm is not None
    for name, data in written(prepared, llm):
        if name == "answer":
            yield "done", data.to_dict()
        else:
            yield name, data


def written(prepared: Prepared, llm: LLMClient) -> Iterator[tuple[str, Any]]:
    """The answer as the model writes it: ``delta`` events, a new ``references`` one if the
    excerpts had to be cut to the model's context, and last ``("answer", Answer)``. A loop
    stops the request where it begins (the text before it is the answer); a failure — no
    first piece in time, the deadline, a dropped connection — is the error, carrying what
    the library found (its sentences and the excerpts: Prepared.findings)."""
    guard, parts, stopped = LoopGuard(), [], None
    with prepared.handing_over(llm):
        for attempt in (1, 2):
            try:
                for delta in _pieces(prepared, llm):
                    if guard.feed(delta):
                        stopped = "loop"
                        break
                    parts.append(delta)
                    yield "delta", {"text": delta}
                break
            except ContextExceeded as exc:  # refused before its first piece: cut, once more
                if parts or attempt == 2:
                    raise
                before = [e.reference() for e in prepared.excerpts]
                budget.refit(prepared, exc, llm)
                if [e.reference() for e in prepared.excerpts] != before:
                    yield "references", _references(prepared)
    text = guard.kept if stopped == "loop" else "".join(parts)
    result = prepared.result(text or "", llm.streamed_model, stopped, llm.calls)
    footer = prepared.footer(result.cited)
    if footer:  # streamed too: a reader of the deltas sees what the answer ends with
        yield "delta", {"text": f"\n\n{footer}"}
    yield "answer", result


def _pieces(prepared: Prepared, llm: LLMClient) -> Iterator[str]:
    messages = prepared.messages()
    first = llm.first_token_deadline(messages, prepared.first_token or llm.timeout)
    stream = llm.stream(messages, max_tokens=prepared.max_tokens, first_token=first)
    try:
        yield from without_reasoning(stream)
    finally:
        stream.close()  # a loop stops reading: the connection closes, the model stops


def _references(prepared: Prepared) -> dict[str, Any]:
    return {
        "references": [e.reference() for e in prepared.excerpts],
        "queries": prepared.plan.queries,
        "planner": prepared.plan.planner,
    }
