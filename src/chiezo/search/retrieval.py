"""One search over one source in any of the three modes.

``keyword``   full text only (search/fts.py).
``semantic``  the nearest chunks by meaning (search/semantic.py), best chunk per document.
``hybrid``    both, over-fetching ``top_n`` from each side and fusing (search/hybrid.py).
``auto``      hybrid only when needed: a query that is a document's title (or alias) exactly is
              searched by words alone — that document comes first in every mode, and meaning
              would only add neighbours — anything else as hybrid (docs/design.md §34.5: a
              signal from the words side's coverage lost recall on natural questions).

The default is hybrid where the source has vectors, keyword elsewhere. Title-exact documents
come first in every mode that runs the keyword side. The semantic floor (search/semantic.py)
keeps a document out that *only* the semantic side found below it; in hybrid, a document the
keyword side found keeps its semantic score whatever it is — the floor guards against adding the
nearest junk, not against re-ranking real matches (docs/design.md §18). With ``near``, the first ``top_n`` by
relevance are reordered by distance — and the result says so. If embedding the query or the
vector search runs past its budget, keyword results come back marked as a fallback rather than
a failure or a wait.
"""

from __future__ import annotations

import concurrent.futures
import math
import time
from dataclasses import dataclass, replace

from chiezo.core import db
from chiezo.core.errors import BadQuery
from chiezo.core.models import Hit, SearchResult
from chiezo.core.query import parse_query
from chiezo.core.textnorm import clipped
from chiezo.core.words import evidence_words, light_words, query_words
from chiezo.search import languages
from chiezo.search.evidence import coverage, specificity
from chiezo.search.filters import Filters, Near, filter_ids
from chiezo.search.fts import MAX_WINDOW, read_hits, title_exact
from chiezo.search.hybrid import Fused, fuse, scale_to_max
from chiezo.search.keyword import KeywordPlan, keyword_search, plan_keyword
from chiezo.search.notices import Notice
from chiezo.search.pdf_pages import is_pdf_url, page_of_heading, with_page
from chiezo.search.rank import Candidate
from chiezo.search.sections import section_of
from chiezo.search.semantic import (
    BELOW_FLOOR_OWNERS,
    SemanticHit,
    default_floor,
    embed_query,
    require_vectors,
    semantic_candidates,
)
from chiezo.search.snippet import SNIPPET_CHARS as MARKED_SNIPPET_CHARS
from chiezo.search.snippet import past_headings, snippet_at
from chiezo.store import chunk_text
from chiezo.store.library import LiveSource, Source
from chiezo.store.model_host import query_embedder
from chiezo.store.vectors import vector_info

RETRIEVAL_MODES = ("keyword", "semantic", "hybrid", "auto")  # the search's public ``mode``
FUSIONS = ("minmax", "rrf")
# The keyword side's weight in min-max fusion, per model, for a query with a specific word (a
# query of common words only gets less: keyword_weight): a weaker semantic model earns less
# weight. The one declaration of it — the docs point here. use-m's 0.8 is best with the word
# index and coverage (docs/design.md §24.2: JaQuAD train; 0.6 with trigrams alone, §18) and on
# whole articles with natural questions (§31.4: 0.7–0.9 flat). e5-small's 0.4 is measured with
# trigrams alone (§18), not with the word index.
KEYWORD_WEIGHT = {"use-m": 0.8, "e5-small": 0.4}
DEFAULT_KEYWORD_WEIGHT = 0.5
# The keyword side's weight for a query in another script than the source's (search/languages.py):
# its words can only match the few words the source writes in the query's script (a romanised
# name, a loan), so meaning leads. English questions over the jawiki excerpt, R@1 of the two
# sets: 0.8 × specificity (the same-script weight) .587/.381; 0 .652/.587; 0.2 .717/.603; 0.5
# .870/.603 — the higher values won only where articles spell the subject's name in Latin
# letters (桂正和's "Katsura Masakazu"), and questions held out showed meaning alone ahead of
# words, so the low end of the flat range (docs/design.md §42).
CROSS_SCRIPT_KEYWORD_WEIGHT = 0.2
# How much lower the semantic floor is for such a query: cosines across scripts run lower than
# within one (use-m: 両国国技館 0.422 for an English question about the sumo hall, under the
# jawiki excerpt's floor of 0.443), and with no words to find it by, a floor calibrated on
# same-script junk leaves the article out. Measured in docs/design.md §42.
CROSS_SCRIPT_FLOOR_DROP = 0.06
DEFAULT_TOP_N = 50
SNIPPET_CHARS = 200
SEMANTIC_BUDGET = 3.0  # seconds for embedding the query and searching vectors
_pool = concurrent.futures.ThreadPoolExecutor(max_workers=2, thread_name_prefix="semantic")


@dataclass(frozen=True)
class RetrievalOptions:
    retrieval: str | None = None  # RETRIEVAL_MODES; None: default_retrieval (the public ``mode``)
    keyword_weight: float | None = None  # None: KEYWORD_WEIGHT of the source's model
    fusion: str = "minmax"
    top_n: int = DEFAULT_TOP_N
    explain: bool = False
    min_score: float | None = None
    near: Near | None = None

    def checked(self) -> RetrievalOptions:
        if self.retrieval is not None and self.retrieval not in RETRIEVAL_MODES:
            raise BadQuery(
                f"mode must be one of {', '.join(RETRIEVAL_MODES)}, got {self.retrieval!r}"
            )
        if self.fusion not in FUSIONS:
            raise BadQuery(f"fusion must be one of {', '.join(FUSIONS)}, got {self.fusion!r}")
        if self.keyword_weight is not None and not 0.0 <= self.keyword_weight <= 1.0:
            raise BadQuery(f"keyword_weight must be within 0..1, got {self.keyword_weight}")
        if not 1 <= self.top_n <= 1000:
            raise BadQuery(f"top_n must be within 1..1000, got {self.top_n}")
        return self


def names_a_document(source: Source, text: str, filters: Filters | None) -> bool:
    """Whether ``text`` is exactly the title or an alias of a document (that meets
    ``filters``): one seek in ``titles``, as the full-text plans' title-exact step makes it."""
    ids = title_exact(source.conn, parse_query(text, folded=source.has_words).norm)
    return bool(filter_ids(source.conn, filters, ids) if filters else ids)


def default_retrieval(source: Source) -> str:
    info = vector_info(source.meta)
    return "hybrid" if info is not None and info.count else "keyword"


def retrieve(
    source: Source,
    text: str,
    *,
    limit: int,
    offset: int,
    timeout: float | None,
    filters: Filters | None = None,
    options: RetrievalOptions | None = None,
) -> SearchResult:
    options = (options or RetrievalOptions()).checked()
    # a live source's server searches (a kiwix-serve book): by its own index, in its order
    if isinstance(source, LiveSource):
        if options.near is not None:
            raise BadQuery(f"source {source.name!r} has no coordinates", source=source.name)
        live = source.search(text, limit=limit, offset=offset, timeout=timeout, filters=filters)
        for hit in live.hits:  # as wide as every source's snippets
            hit.snippet = clipped(hit.snippet, MARKED_SNIPPET_CHARS)
        return live
    retrieval = options.retrieval or default_retrieval(source)
    options = _across_scripts(source, text, options, retrieval)
    by_name = retrieval == "auto" and names_a_document(source, text, filters)
    if retrieval == "auto":
        retrieval = "keyword" if by_name else default_retrieval(source)
    near = options.near
    want = offset + limit
    if retrieval == "keyword" and near is None and not options.explain:
        result = keyword_search(
            source,
            text,
            limit=limit,
            offset=offset,
            timeout=timeout,
            filters=filters,
        )
        result.retrieval = "keyword"
        if by_name:
            result.notes.append(Notice("auto_by_name"))
        return result
    n = max(options.top_n, want)
    notes: list[str] = []
    semantic: list[SemanticHit] | None = None
    # the two sides run at once: embedding (ONNX) and SQLite both release the GIL
    pending = _start_semantic(source, text, n, filters, options, timeout, retrieval)
    keyword = None
    if retrieval == "hybrid":
        keyword = _keyword_side(source, text, n, timeout, filters)
    if pending is not None:
        semantic = pending.result()
        if semantic is None:
            notes.append(Notice("semantic_timeout"))
            retrieval = "keyword-fallback"
    if retrieval != "semantic" and keyword is None:
        keyword = _keyword_side(source, text, n, timeout, filters)
    if keyword is not None:
        notes += keyword.notes
    if keyword is not None and semantic:
        semantic = _floored(source, semantic, keyword, options)
    if keyword is not None and semantic is not None and options.fusion == "minmax":
        keyword = _by_coverage(source, text, keyword)
    weight = keyword_weight(source, options, text) if semantic is not None else 1.0
    fused = _fuse(keyword, semantic, options, weight)
    if options.explain and retrieval == "hybrid":
        notes.append(Notice("fusion", fusion=options.fusion, weight=weight))
    total, lower = _total(keyword, semantic, fused, n)
    order = "relevance"
    distances: dict[int, float] = {}
    if near is not None:
        considered = fused[: options.top_n]
        fused, distances = _by_distance(source, considered, near)
        if not lower and total == len(considered):  # every match was weighed: count exactly
            total = len(fused)
        order = f"top {options.top_n} by relevance, then by distance"
        notes.append(Notice("by_distance", n=options.top_n))
    page = fused[offset : offset + limit]
    hits = _hits(source, page, keyword, semantic, text, options.explain, distances)
    return SearchResult(
        query=text.strip(),
        hits=hits,
        total=total,
        mode=keyword.plan if keyword is not None else "semantic",
        offset=offset,
        limit=limit,
        total_is_lower_bound=lower,
        notes=notes,
        sources=[source.name],
        retrieval=retrieval,
        order=order,
        weighed=list(
            dict.fromkeys([*(f.doc_id for f in fused), *(keyword.seen if keyword else ())])
        ),
    )


def _across_scripts(
    source: Source, text: str, options: RetrievalOptions, retrieval: str
) -> RetrievalOptions:
    """The options for a query in another script than the source's: the semantic floor
    lowered by ``CROSS_SCRIPT_FLOOR_DROP`` unless one was asked for."""
    if options.min_score is not None or retrieval == "keyword" or not CROSS_SCRIPT_FLOOR_DROP:
        return options
    if default_retrieval(source) != "hybrid" or not languages.crosses(source, text):
        return options
    floor = default_floor(source, require_vectors(source).model) - CROSS_SCRIPT_FLOOR_DROP
    return replace(options, min_score=floor)


def _keyword_side(
    source: Source, text: str, n: int, timeout: float | None, filters: Filters | None
) -> KeywordPlan:
    with db.deadline(source.conn, timeout, what=f"search in {source.name!r}"):
        return plan_keyword(source, text, want=min(n, MAX_WINDOW), filters=filters)


@dataclass
class _PendingSemantic:
    future: concurrent.futures.Future[list[SemanticHit]]
    deadline: float

    def result(self) -> list[SemanticHit] | None:
        """The semantic candidates, or None when they took longer than their budget."""
        try:
            return self.future.result(timeout=max(self.deadline - time.monotonic(), 0.0))
        except concurrent.futures.TimeoutError:
            return None


def _start_semantic(
    source: Source,
    text: str,
    n: int,
    filters: Filters | None,
    options: RetrievalOptions,
    timeout: float | None,
    retrieval: str,
) -> _PendingSemantic | None:
    if retrieval not in ("semantic", "hybrid"):
        return None
    budget = min(SEMANTIC_BUDGET, timeout) if timeout else SEMANTIC_BUDGET
    # Loading the model and opening the index happen once per process, here, outside the
    # budget: a cold start is not a slow query (and a missing model is an error, not a
    # fallback). The server does both before its first request (ops/operating.py warm).
    query_embedder(require_vectors(source).model)
    _ = source.vectors

    # hybrid fetches below the floor too; _floored decides per document
    below = BELOW_FLOOR_OWNERS if retrieval == "hybrid" else 0

    def run() -> list[SemanticHit]:
        vector = embed_query(source, text)
        return semantic_candidates(
            source, vector, n, filters=filters, min_score=options.min_score, below_floor=below
        )

    return _PendingSemantic(_pool.submit(run), time.monotonic() + budget)


def _floored(
    source: Source, semantic: list[SemanticHit], keyword: KeywordPlan, options: RetrievalOptions
) -> list[SemanticHit]:
    """Semantic hits at or above the floor, and any the keyword side found too."""
    floor = options.min_score
    if floor is None:
        floor = default_floor(source, require_vectors(source).model)
    found = {d for d, _ in keyword.ranked}
    return [h for h in semantic if h.score >= floor or h.doc_id in found]


def _by_coverage(source: Source, text: str, keyword: KeywordPlan) -> KeywordPlan:
    """The keyword side's scores (divided by the best, 0..1) times the square root of each document's
    coverage of the query's content words (search/evidence.py; light words such as 一番 are no
    evidence, docs/design.md §31.4), kept on that scale in the fusion.
    Min-max alone makes the best keyword match 1.0 even when it holds one word of six —
    Sudachi's 使う in つかった — and it then outweighs the passage meaning found. JaQuAD train
    R@1 .893 → .899, R@5 .983 → .984 (docs/design.md §24)."""
    covered = coverage(source, evidence_words(text), [d for d, _ in keyword.ranked])
    if not covered:
        return keyword
    ranked = dict(
        zip(
            [d for d, _ in keyword.ranked],
            scale_to_max([s for _, s in keyword.ranked]),
            strict=True,
        )
    )
    scaled = sorted(
        ((d, s * math.sqrt(covered.get(d, 0.0))) for d, s in ranked.items()),
        key=lambda pair: -pair[1],
    )
    return replace(keyword, ranked=scaled, scaled=True)


def _fuse(
    keyword: KeywordPlan | None,
    semantic: list[SemanticHit] | None,
    options: RetrievalOptions,
    weight: float = DEFAULT_KEYWORD_WEIGHT,
) -> list[Fused]:
    k_pairs = keyword.ranked if keyword else []
    s_pairs = [(h.doc_id, h.score) for h in semantic] if semantic is not None else []
    first = keyword.lead if keyword else []
    if semantic is None:  # keyword only (or the fallback)
        return fuse(k_pairs, [], keyword_weight=1.0, first=first)
    if keyword is None:
        return fuse([], s_pairs, keyword_weight=0.0)
    return fuse(
        k_pairs,
        s_pairs,
        keyword_weight=weight,
        method=options.fusion,
        first=first,
        keyword_scaled=keyword.scaled,
    )


def keyword_weight(source: Source, options: RetrievalOptions, text: str) -> float:
    """The keyword side's weight for ``text``: the one asked for, else the model's
    (``KEYWORD_WEIGHT``) times how specific the query's words are in the source
    (evidence.specificity): a question whose words are all common there — 「日本で最も南にある
    県は？」 — is not told apart by them, and meaning leads (docs/design.md §31.4)."""
    if options.keyword_weight is not None:
        return options.keyword_weight
    if languages.crosses(source, text):
        return CROSS_SCRIPT_KEYWORD_WEIGHT
    weight = KEYWORD_WEIGHT.get(require_vectors(source).model, DEFAULT_KEYWORD_WEIGHT)
    return round(weight * specificity(source, query_words(text), light_words(text)), 3)


def _total(
    keyword: KeywordPlan | None,
    semantic: list[SemanticHit] | None,
    fused: list[Fused],
    n: int,
) -> tuple[int, bool]:
    if keyword is None:
        return len(fused), len(fused) >= n
    extra = len({f.doc_id for f in fused} - {d for d, _ in keyword.ranked})
    return keyword.total + extra, keyword.lower_bound or (
        semantic is not None and len(semantic) >= n
    )


def _by_distance(
    source: Source, fused: list[Fused], near: Near
) -> tuple[list[Fused], dict[int, float]]:
    ids = [f.doc_id for f in fused]
    if not ids:
        return [], {}
    marks = ",".join("?" * len(ids))
    points = {
        d: near.distance(lat, lon)
        for d, lat, lon in source.conn.execute(
            f"SELECT doc_id, lat, lon FROM doc_points WHERE doc_id IN ({marks})", ids
        )
    }
    # a radius reaches the search as its bounding box (search/filters.py): the corners go here
    located = [
        f
        for f in fused
        if f.doc_id in points and (near.radius_km is None or points[f.doc_id] <= near.radius_km)
    ]
    located.sort(key=lambda f: (points[f.doc_id], f.doc_id))
    return located, points


def _hits(
    source: Source,
    page: list[Fused],
    keyword: KeywordPlan | None,
    semantic: list[SemanticHit] | None,
    text: str,
    explain: bool,
    distances: dict[int, float],
) -> list[Hit]:
    """Read the rows of the page: a document the keyword side found shows where its words
    are; one found by meaning alone, the passage that matched."""
    chunks = {h.doc_id: h for h in semantic} if semantic else {}
    by_words = {d for d, _ in keyword.ranked} if keyword else set()
    first = set(keyword.first) if keyword else set()
    needles = keyword.needles if keyword else text.split()
    floor = default_floor(source, require_vectors(source).model) if semantic else None
    by_meaning = {f.doc_id for f in page if f.doc_id in chunks and f.doc_id not in by_words}
    read = read_hits(
        source,
        [Candidate(f.doc_id, 0.0, source.rank_of(f.doc_id), f.doc_id in first) for f in page],
        needles,
        from_chunks=by_meaning,
    )
    known = {h.doc_id: h for h in read}
    _chunk_snippets(source, [h for h in read if h.doc_id in by_meaning], chunks)
    out = []
    for f in page:
        hit = known.get(f.doc_id)
        if hit is None:
            continue
        hit = replace(hit, score=round(f.score, 6), semantic=calibrated(f.semantic_score, floor))
        if f.doc_id in distances:
            hit.distance_km = round(distances[f.doc_id], 3)
        if explain:
            hit.explain = {
                "keyword_rank": f.keyword_rank,
                "semantic_rank": f.semantic_rank,
                "keyword_score": f.keyword_score,
                "semantic_score": f.semantic_score,
                "fused": round(f.score, 6),
            }
        out.append(hit)
    return out


def calibrated(cosine: float | None, floor: float | None) -> float | None:
    """A cosine as how far it is above the source's floor (unrelated text), 0..1."""
    if cosine is None or floor is None or floor >= 1.0:
        return None
    return min(max((cosine - floor) / (1.0 - floor), 0.0), 1.0)


def _chunk_snippets(source: Source, hits: list[Hit], matched: dict[int, SemanticHit]) -> None:
    """A document found by meaning shows the passage that matched — from the start of the unit
    that matched — not its first lines, and that passage's section."""
    for hit in hits:
        found = matched[hit.doc_id]
        row = chunk_text.one_chunk(source.conn, found.chunk_id)
        if row:
            _, heading, passage = row
            if is_pdf_url(hit.url):  # the page of the passage that matched
                hit.url = with_page(hit.url, page_of_heading(heading))
            start = past_headings(passage, found.span[0] if found.span else 0)
            # plain text, like the keyword side's snippets; the breadcrumb apart, as theirs
            hit.snippet = snippet_at(passage, start, SNIPPET_CHARS)
            hit.section = section_of(heading, hit.title)
