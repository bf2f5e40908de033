"""The searching operations: search, filter, random and geocode — one source or several,
with conditions and ``near`` resolved in search/where.py."""

from __future__ import annotations

import concurrent.futures
import contextvars
import math
import time
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from chiezo.core import db
from chiezo.core.errors import (
    BadQuery,
    Conflict,
    NotFound,
    Operation,
    QueryTimeout,
    SourceUnavailable,
)
from chiezo.core.here import NeedsAnswer
from chiezo.core.models import Hit, SearchResult
from chiezo.core.query import has_terms
from chiezo.core.validation import checked_text
from chiezo.core.words import query_words
from chiezo.ops import browse
from chiezo.ops.context import Context, refusals_name_sources
from chiezo.ops.requests import FilterRequest, GeocodeRequest, RandomRequest, SearchRequest
from chiezo.search import counterparts, evidence, facets, notices, where
from chiezo.search.filters import Filters, Near
from chiezo.search.fts import MAX_WINDOW
from chiezo.search.notices import Notice
from chiezo.search.retrieval import DEFAULT_TOP_N, RetrievalOptions, default_retrieval, retrieve
from chiezo.store.library import Source


@checked_text
@refusals_name_sources
def search(ctx: Context, request: SearchRequest) -> SearchResult:
    """Search one source (or all, in one order of evidence) by keyword, meaning or both
    (search/retrieval.py). Every surface builds the request (ops/requests.py)."""
    q, source, limit, offset = request.query, request.source, request.limit, request.offset
    near, near_doc, radius_km = request.near, request.near_doc, request.radius_km
    # limit and offset are within their window: the request's bounds (ops/requests.py)
    facets.check_facets(request.facets)
    point = where.resolve_near(ctx.library, near, near_doc, radius_km, request.location)
    filters = where.conditions(ctx.library, request, point if point and point.radius_km else None)
    weight = request.keyword_weight
    options = RetrievalOptions(
        retrieval=request.mode,
        keyword_weight=ctx.settings.keyword_weight if weight is None else weight,
        fusion=request.fusion or ctx.settings.fusion,
        top_n=request.top_n or DEFAULT_TOP_N,
        explain=request.explain,
        min_score=request.min_score,
        near=point,
    ).checked()
    names = source_names(source)
    started = time.monotonic()
    if len(names) == 1:
        src = ctx.library.get(names[0])
        where.check_required(src, request.feature, point)
        result = retrieve(
            src,
            q,
            limit=limit,
            offset=offset,
            timeout=ctx.settings.query_timeout,
            filters=filters.resolved(src),
            options=options,
        )
        if request.facets:
            _search_facets(ctx, {src.name: result}, result, request.facets, started)
    else:
        result = _search_all(
            ctx, q, limit, offset, options, names, filters, request.facets, started,
            request.feature,
        )  # fmt: skip
    result.notes.extend(where.near_notes(point, result.total))
    _name_counterparts(ctx, result.hits)
    ctx.openable(result.hits)
    for observe in ctx.search_observers:
        observe(result)
    return result


def _name_counterparts(ctx: Context, hits: list[Hit]) -> None:
    """Each hit of a source that records Wikidata ids names the same item's documents in the
    other sources that do (both Wikipedias built): read only when a hit's source has ids."""
    if any(
        counterparts.WIKIDATA in ctx.library.get(n).attributes for n in {h.source for h in hits}
    ):
        counterparts.name_counterparts(hits, ctx.library.sources())


def _search_facets(
    ctx: Context,
    results: dict[str, SearchResult],
    into: SearchResult,
    names: list[str],
    started: float,
) -> None:
    """``into.facets``: counts of the documents each source's search matched
    (search/facets.py), within what is left of the query's time; a source that runs out
    of it is left out of the counts, with a note."""
    wanted = facets.check_facets(names)
    counted = facets.Facets(wanted)
    for name, one in results.items():
        src = ctx.library.get(name)
        counted.source_totals[name] = (one.total, one.total_is_lower_bound)
        left = ctx.settings.query_timeout - (time.monotonic() - started)
        try:
            if left <= 0:
                raise QueryTimeout("no time left")
            with db.deadline(src.conn, left, what="facets"):
                counts = facets.of_search(src, one, wanted)
        except QueryTimeout:
            counted.exact = False
            into.notes.append(Notice("facets_timeout", sources=[name]))
            continue
        counted.add(*counts)
    into.facets = counted.to_dict()


def _search_all(
    ctx: Context,
    q: str,
    limit: int,
    offset: int,
    options: RetrievalOptions,
    names: list[str] | None = None,
    filters: Filters | None = None,
    facet_names: list[str] | None = None,
    started: float | None = None,
    feature: list[str] | None = None,
) -> SearchResult:
    """The sources ``names`` (default: those in the default set) searched for the first
    offset+limit hits, merged in one order of evidence (search/evidence.py), or by distance
    with ``near``. Conditions apply to every source that can meet them; one that cannot
    (no such attribute, no coordinates) is left out and named in a note — a 400 only when
    none can. Notes: one line per kind, naming the sources; how each source planned its
    search only with ``explain``."""
    filters = filters or Filters()
    left_out: list[str] = []
    if names:
        sources = [ctx.library.get(n) for n in names]
    else:
        sources, left_out = ctx.library.default_sources()
    if not sources:
        raise NotFound(
            "there are no sources yet",
            hint="build one with {see}",
            see=Operation("ingest", kind="docs"),
        )
    deadline = time.monotonic() + ctx.settings.query_timeout
    results: dict[str, SearchResult] = {}
    notes_: dict[str, list[str]] = {n: [Notice("not_in_default")] for n in left_out}
    timed_out = False
    refused: list[BadQuery | Conflict] = []

    def one(src: Source) -> SearchResult:
        return _search_one(ctx, src, q, offset + limit, options, filters, deadline, feature)

    # A live source's server is asked meanwhile, in a thread of its own: asked in turn, one
    # that answers slowly would take the whole deadline from the sources after it.
    asking = {src.name: _LIVE_ASKING.submit(contextvars.copy_context().run, one, src)
              for src in sources if src.live}  # fmt: skip
    for src in sorted(sources, key=lambda src: src.live):  # the built ones first
        if options.retrieval in ("semantic", "hybrid") and default_retrieval(src) == "keyword":
            notes_.setdefault(src.name, []).append(Notice("no_vectors", sources=[src.name]))
        try:
            if src.live:
                left = max(deadline - time.monotonic(), 0.0)
                try:
                    results[src.name] = asking[src.name].result(timeout=left)
                except concurrent.futures.TimeoutError:
                    raise QueryTimeout("no time left") from None
            else:
                results[src.name] = one(src)
        except QueryTimeout:
            timed_out = True
            notes_.setdefault(src.name, []).append(Notice("source_timeout", sources=[src.name]))
        except SourceUnavailable as exc:  # a live source's server: the others still answer
            timed_out = timed_out or bool(exc.extras.get("timed_out"))
            notes_.setdefault(src.name, []).append(
                Notice("source_unavailable", sources=[src.name], reason=exc.message)
            )
        except NeedsAnswer:  # its places matched; which kind is meant only the person says
            raise
        # a condition this source cannot meet; a live source that knows no server
        except (BadQuery, Conflict) as exc:
            refused.append(exc)
            # the reason without the source's name: sources with the same one share a line
            reason = exc.message.replace(f"source {src.name!r} ", "")
            notes_.setdefault(src.name, []).append(Notice("left_out", reason=reason))
    if not results and refused:
        raise refused[0]  # no source can meet the conditions: the first one's reason
    if not results and timed_out:
        raise QueryTimeout(
            f"searching every source took longer than {ctx.settings.query_timeout:g} s"
        )
    merged = _by_distance(results.values()) if options.near else _merged(ctx, q, results, options)
    for name, r in results.items():
        shown = r.notes if options.explain else [n for n in r.notes if _about_sources(n)]
        notes_.setdefault(name, []).extend(shown)
    found = SearchResult(
        query=q.strip(),
        hits=merged[offset : offset + limit],
        total=sum(r.total for r in results.values()),
        mode="fused:" + ",".join(sorted({r.mode for r in results.values()})),
        offset=offset,
        limit=limit,
        total_is_lower_bound=timed_out or any(r.total_is_lower_bound for r in results.values()),
        notes=notices.merge(notes_),
        sources=sorted(results),
        # how each source was searched, e.g. "hybrid+keyword" (one without vectors)
        retrieval="+".join(sorted({r.retrieval for r in results.values()})) or "keyword",
    )
    if facet_names:
        begun = time.monotonic() if started is None else started
        _search_facets(ctx, results, found, facet_names, begun)
    return found


def _search_one(
    ctx: Context,
    src: Source,
    q: str,
    want: int,
    options: RetrievalOptions,
    filters: Filters | None,
    deadline: float,
    feature: list[str] | None = None,
) -> SearchResult:
    """One source's first ``want`` hits for a search of several, by ``deadline``. A source
    that must be told a kind around a point (where.check_required) and is not: its own
    search says whether it matters — words that find none of its places leave it quietly
    out of the answer; words that find some make the whole search ask which kind."""
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        raise QueryTimeout("no time left")
    if options.near is not None:
        where.refuse_without_points(src)
    per_source = options
    if options.retrieval in ("semantic", "hybrid") and default_retrieval(src) == "keyword":
        per_source = replace(options, retrieval="keyword")
    found = retrieve(
        src,
        q,
        limit=want,
        offset=0,
        timeout=remaining,
        filters=filters.resolved(src) if filters else None,
        options=per_source,
    )
    try:
        where.check_required(src, feature, options.near)
    except NeedsAnswer:
        if found.hits:
            raise
        return found
    return found


def _merged(ctx: Context, q: str, results: dict[str, SearchResult], options: RetrievalOptions):
    """Every source's hits in one order of evidence (search/evidence.py). Coverage here
    counts every word of the question, light ones (一番) too: leaving them out, as a
    source's own search does, measured no better across sources (docs/design.md §31.4)."""
    words = query_words(q)
    lists = []
    for name, result in results.items():
        src = ctx.library.get(name)
        covered = evidence.covered(src, words, result.hits)
        weighed = evidence.weighing(src, q, result.retrieval)
        lists.append(
            [
                evidence.Weighed(h, evidence.relevance(h, covered.get(h.doc_id), weighed), i)
                for i, h in enumerate(result.hits)
            ]
        )
    return evidence.merge(lists)


@checked_text
@refusals_name_sources
def filter(ctx: Context, request: FilterRequest) -> dict[str, Any]:
    """List every document meeting all conditions (see search/filters.py)."""
    source, limit, offset, fields = (
        request.source,
        request.limit,
        request.offset,
        request.fields,
    )
    wanted = browse.check_fields(fields) if fields else None
    facet_names = facets.check_facets(request.facets)
    point = where.resolve_near(
        ctx.library, request.near, request.near_doc, request.radius_km, request.location
    )
    filters = where.conditions(ctx.library, request, point)
    names = source_names(source)
    if len(names) > 1:
        result = _filter_several(
            ctx, names, filters, limit, offset, wanted, facet_names, request.feature
        )
        return _with_near(result, point)
    src, deadline = ctx.read(source, "filter")
    counted = facets.Facets(facet_names) if facet_names else None
    with deadline:
        where.check_required(src, request.feature, point)
        result = browse.filter_docs(
            src,
            filters.resolved(src),
            limit=limit,
            offset=offset,
            fields=wanted,
            counted=counted,
            link=ctx.doc_link,
        )
    if counted is not None:
        result["facets"] = counted.to_dict()
    return _with_near(result, point)


def _with_near(result: dict[str, Any], point: Near | None) -> dict[str, Any]:
    found = result.get("total", len(result.get("docs") or ()))
    notes = [*result.get("notes", []), *where.near_notes(point, found)]
    return {**result, **_near_stated(point), "notes": notes}


def _near_stated(point: Near | None) -> dict[str, Any]:
    """The point a filter was made around, and how an address given was resolved; the
    person's own location (near=here) is said to be theirs, never with its numbers."""
    if point is None:
        return {}
    stated: dict[str, Any] = {"from": point.label, "radius_km": point.radius_km}
    if not point.hidden:
        stated.update(lat=point.lat, lon=point.lon)
    if point.note is not None and not point.hidden:
        stated["place"] = point.note.params  # type: ignore[attr-defined]
    return {"near": {**stated, "distance": where.STRAIGHT}}


def _filter_several(
    ctx: Context,
    names: list[str],
    filters: Filters,
    limit: int,
    offset: int,
    fields: tuple[str, ...] | None,
    facet_names: tuple[str, ...] = (),
    feature: list[str] | None = None,
) -> dict[str, Any]:
    """Several sources' documents meeting the conditions as one list: nearest first with
    ``near`` (places of an OSM extract and of GeoNames together), else each source's in
    its own order, in the order named. A source that cannot meet a condition is left out
    with a note; a 400 only when none can. Each source gives its first offset+limit, so the
    window is a search's (``MAX_WINDOW``), not a single filter's."""
    if offset + limit > MAX_WINDOW:
        raise BadQuery(
            f"offset + limit may reach {MAX_WINDOW:,} when several sources are filtered "
            "together; filter one source to page further"
        )
    shown = tuple(dict.fromkeys((*(fields or browse.FILTER_FIELDS), "source")))
    results, notes_, refused = {}, {}, []
    counted = facets.Facets(facet_names)
    for name in names:
        try:
            src, deadline = ctx.read(name, "filter")
            with deadline:
                where.check_required(src, feature, filters.near)
                results[name] = browse.filter_docs(
                    src,
                    filters.resolved(src),
                    limit=offset + limit,
                    offset=0,
                    fields=shown,
                    counted=counted if facet_names else None,
                    link=ctx.doc_link,
                )
        except BadQuery as exc:
            refused.append(exc)
            reason = exc.message.replace(f"source {name!r} ", "")
            notes_[name] = [Notice("left_out", reason=reason)]
    if not results:
        raise refused[0]
    for name, result in results.items():
        notes_.setdefault(name, []).extend(result.get("notes") or [])
    docs = [d for r in results.values() for d in r["docs"]]
    if filters.near is not None:
        docs.sort(key=lambda d: d.get("distance_km", math.inf))
    return {
        "source": ",".join(results),
        "sources": list(results),
        "offset": offset,
        "limit": limit,
        "order": "distance" if filters.near is not None else "source, then rank",
        "total": sum(r["total"] for r in results.values()),
        "total_is_lower_bound": any(r["total_is_lower_bound"] for r in results.values()),
        "plan": "+".join(sorted({r.get("plan", "") for r in results.values()} - {""})),
        "docs": docs[offset : offset + limit],
        "notes": notices.merge(notes_),
        **({"facets": counted.to_dict()} if facet_names else {}),
    }


@checked_text
@refusals_name_sources
def random(ctx: Context, request: RandomRequest) -> dict[str, Any]:
    """Documents drawn at random, from the source or from those meeting the conditions."""
    wanted = browse.check_fields(request.fields) if request.fields else None
    point = where.resolve_near(
        ctx.library, request.near, request.near_doc, request.radius_km, request.location
    )
    filters = where.conditions(ctx.library, request, point)
    src, deadline = ctx.read(request.source, "random")
    with deadline:
        where.check_required(src, request.feature, point)
        drawn = browse.random_docs(
            src,
            filters.resolved(src),
            count=request.count,
            seed=request.seed,
            fields=wanted,
            link=ctx.doc_link,
        )
    return _with_near(drawn, point) if point is not None else drawn


@checked_text
def geocode(ctx: Context, request: GeocodeRequest) -> dict[str, Any]:
    """An address or place name → the most precise points the library's places give, with
    the level matched and the source (search/geocode.py)."""
    if not has_terms(request.address):  # blank, or control characters only
        raise BadQuery("give an address or a place name to look for", field="address")
    names = source_names(request.source)
    sources = [ctx.library.get(n) for n in names] if names else None
    return where.geocoded(ctx.library, request.address, sources, request.limit).to_dict()


MAX_NAMED_SOURCES = 100  # a list longer than any library's: a mistake, answered before work


def source_names(source: str | None) -> list[str]:
    """``jawiki,osm_kanto`` → the sources named, in order, each once; [] for all of them."""
    names = list(dict.fromkeys(n.strip() for n in (source or "").split(",") if n.strip()))
    if len(names) > MAX_NAMED_SOURCES:
        raise BadQuery(
            f"{len(names):,} sources named; at most {MAX_NAMED_SOURCES} in one request",
            hint="leave source out to search every source searched by default",
        )
    return names


def _by_distance(results: Iterable[SearchResult]) -> list[Hit]:
    """Hits of several sources nearest first (each source ordered its own by distance)."""
    hits = [h for r in results for h in r.hits]
    return sorted(hits, key=lambda h: (h.distance_km is None, h.distance_km or 0.0))


def _about_sources(note: str) -> bool:
    """Notes a search across sources shows without ``explain``: what the user can act on."""
    return getattr(note, "code", None) in notices.ABOUT_SOURCES


# Live sources asked while the others of a search are searched (``_search_all``): each call
# is bounded by its own deadline and by the process's live slots (store/library.py LiveSlots).
_LIVE_ASKING = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="chiezo-live")
