"""The facade every surface calls: CLI, REST API and MCP server.

Behaviour is defined here once, so the answers of every surface agree. Methods take plain
arguments, return plain data (dicts, dataclasses) and raise ChiezoError subclasses; every read
runs under the query deadline (QueryTimeout → 504).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import logging
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from chiezo.answer.options import AnswerOptions
from chiezo.core import db
from chiezo.core.addresses import Credentials, credentials_under
from chiezo.core.config import Settings
from chiezo.core.errors import (
    BadQuery,
    ChiezoError,
    Conflict,
    InputError,
    InternalError,
    LLMNotConfigured,
    NotFound,
    Operation,
    Option,
    QueryTimeout,
    SourceUnavailable,
    UnknownSource,
)
from chiezo.core.geometry import Shape
from chiezo.core.models import Hit, SearchResult
from chiezo.core.progress import NullProgress, Progress
from chiezo.core.query import MAX_QUERY_CHARS, has_terms
from chiezo.core.validation import check_id, check_length, check_offset, checked_text
from chiezo.core.words import query_words
from chiezo.ops import browse, links, notes
from chiezo.ops.answers_log import AnswersLog
from chiezo.ops.patterns import LOOKS_LIKE_POINT
from chiezo.ops.requests import (
    MAX_LIMIT,
    MAX_QUESTION_CHARS,
    CountsRequest,
    FeaturesRequest,
    FilterRequest,
    GeocodeRequest,
    LinksRequest,
    RandomRequest,
    RecallRequest,
    SearchRequest,
    TagsRequest,
    TitlesRequest,
)
from chiezo.search import evidence, facets, notices, shapes
from chiezo.search.filters import Filters, Near, parse_near
from chiezo.search.fts import MAX_WINDOW
from chiezo.search.notices import Notice
from chiezo.search.retrieval import (
    DEFAULT_TOP_N,
    RetrievalOptions,
    default_retrieval,
    retrieve,
)
from chiezo.search.semantic import chunk_closeness
from chiezo.store import generations
from chiezo.store.build import BuildOptions, BuildReport
from chiezo.store.kinds import Skipped, SourceKind, kind_named
from chiezo.store.library import NOTES, Library, Source
from chiezo.store.source_info import SourceInfo

log = logging.getLogger("chiezo.service")


class Service:
    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings.from_env()
        self.library = Library(self.settings)
        self.notes = notes.NotesStore(self.settings.notes_path.parent)
        self.answers_log = AnswersLog(self.settings.data_dir)  # what was asked and answered
        # told of every search's result, whichever surface asked (a server's metrics count
        # the searches whose meaning side fell back to keywords)
        self.search_observers: list[Callable[[SearchResult], None]] = []

    def _read(self, source: str | Source, what: str):
        """(source, deadline context) for one read request."""
        src = self.library.get(source) if isinstance(source, str) else source
        src.check_answers(what)
        return src, db.deadline(src.conn, self.settings.query_timeout, what=what)

    # -- sources -----------------------------------------------------------------------------

    def sources(self) -> list[dict[str, Any]]:
        return [info.to_dict() for info in self.library.infos()]

    def input_paths(self) -> list[str]:
        """The folders and files the sources here were built from (their recorded inputs)."""
        found = []
        for info in self.library.infos():
            found += [info.input.get("path"), *(info.input.get("paths") or [])]
        return [p for p in found if isinstance(p, str) and p]

    def credentials(self) -> list[Credentials]:
        """The credentials kept for the servers live sources ask (core/addresses.py)."""
        return credentials_under(self.settings.corpus_dir)

    def set_source(self, name: str, *, in_default: bool) -> dict[str, Any]:
        """Record what the user decided about a source (store/source_settings.py)."""
        self.library.set_in_default(name, in_default)
        return {"source": name, "in_default": self.library.settings_of(name).in_default}

    def remove_source(self, name: str, *, dry_run: bool = False) -> dict[str, Any]:
        """Delete a built source: every generation, its directory (generations.remove); with
        ``dry_run`` only say what that would delete. A source that no longer opens (another
        schema, a damaged file) is removable; the notes source is not built, so is not."""
        if name == NOTES:
            raise BadQuery(
                "the notes source is not a built source and cannot be removed",
                source=NOTES,
                hint="forget notes one at a time: {see}",
                see=Operation("forget"),
            )
        try:
            self.library.get(name)  # an unknown or malformed name: UnknownSource, known ones
        except UnknownSource:
            raise
        except ChiezoError:
            pass  # there, but unreadable: removing it is the way out
        directory = generations.source_dir(self.settings.corpus_dir, name)
        if dry_run:
            return {"source": name, "removed": False, **generations.describe(directory)}
        removed = generations.remove(directory)
        self.library.forget(name)
        return {"source": name, "removed": True, **removed}

    def ingest_each(
        self,
        kind: str,
        inputs: Sequence[str | Path],
        name: str | None = None,
        **given: Any,
    ) -> Iterator[tuple[str, BuildReport | Skipped | None]]:
        """Build a source of each group the kind splits ``inputs`` into (a folder of ZIM files:
        one per file), as ``ingest`` builds one; a source already built from that very input
        (``SourceKind.unchanged``) is skipped. Yields (source name, report — None when
        skipped) as each is done, after (the input, Skipped) for each group no source can be
        built from (``SourceKind.unusable``: a broken file of a Kiwix library stops none of
        the others). InputError when no group can be built, naming each and why."""
        spec = kind_named(kind)
        groups, skipped = _usable(spec, spec.each_source([Path(p) for p in inputs]))
        if name and len(groups) > 1:
            raise BadQuery(f"--name names one source; these inputs make {len(groups)}", kind=kind)
        targets = [name or spec.name_for(group) for group in groups]
        _refuse_shared_names(kind, groups, targets)
        for one in skipped:
            yield one.input, one
        for group, target in zip(groups, targets, strict=True):
            if target and target in self.library.names():
                recorded = self.library.get(target).info().input
                if spec.unchanged(recorded, group):
                    yield target, None
                    continue
            report = self.ingest(kind, group, name, **given)
            yield report.name, report

    def ingest(
        self,
        kind: str,
        inputs: str | Path | Sequence[str | Path] | None,
        name: str | None = None,
        *,
        options: Any = None,
        build: BuildOptions | None = None,
        progress: Progress | None = None,
        embed: str | bool | None = None,
    ) -> BuildReport:
        """Build source ``name`` of ``kind`` (store/kinds.py) from ``inputs`` with the kind's
        ``options``; without inputs, a kind that can fetch its input downloads it first. Then
        embed it with ``embed`` (a model name), or — by default — with the model its previous
        generation had (cached passages are not embedded again), so a rebuild does not silently
        lose semantic search. ``embed=False`` skips that."""
        spec = kind_named(kind)
        if not spec.ingestable:
            raise BadQuery(f"a {kind} source is not built from an input", kind=kind)
        options = spec.Options() if options is None else options
        if not isinstance(options, spec.Options):
            raise BadQuery(
                f"options of a {kind} source are {spec.Options.__name__}, "
                f"not {type(options).__name__}",
                kind=kind,
            )
        paths = (
            [Path(inputs)] if isinstance(inputs, str | Path) else [Path(p) for p in inputs or []]
        )
        progress = progress or NullProgress()
        if not paths:
            if not spec.fetches:
                raise InputError(f"give the {spec.argument} to build a {kind} source from")
            fetched = spec.fetch(self.settings, options, progress)
            paths, options, name = fetched.inputs, fetched.options, name or fetched.name
        if len(paths) > 1 and not spec.many_inputs:
            raise InputError(f"a {kind} source is built from one {spec.argument}, not {len(paths)}")
        if paths:
            groups = spec.each_source(paths)
            if len(groups) > 1:
                raise BadQuery(
                    f"these inputs make {len(groups)} {kind} sources: build them with ingest_each",
                    kind=kind,
                )
            paths = groups[0]
        name = name or spec.default_name
        if not name and spec.needs_name():
            raise BadQuery(f"name the {kind} source (--name)", kind=kind)
        report = spec.build(self.settings, paths, name, options, build or BuildOptions(), progress)
        return self.embed_after_build(report, embed, progress=progress)

    def embed_after_build(
        self, report: BuildReport, embed: str | bool | None = None, *, progress=None
    ) -> BuildReport:
        """The embed step of ``ingest`` (also run on its own by background jobs, so that a
        build that succeeded is reported even when embedding then fails)."""
        step = embedding_after_build(report.previous, embed)
        if step is not None:
            model, max_chunks, unit_chars = step
            # the generation kept beside the embedded one is what served before the build,
            # not the text-only one the build switched in for the minutes embedding takes
            done = self.embed(
                report.name,
                model,
                max_chunks=max_chunks,
                unit_chars=unit_chars,
                progress=progress,
                keep_previous=report.previous,
            )
            report.embedding = done.to_dict()
        return report

    # -- search ------------------------------------------------------------------------------

    @checked_text
    def search(self, request: SearchRequest) -> SearchResult:
        """Search one source (or all, in one order of evidence) by keyword, meaning or both
        (search/retrieval.py). Every surface builds the request (ops/requests.py)."""
        q, source, limit, offset = request.query, request.source, request.limit, request.offset
        near, near_doc, radius_km = request.near, request.near_doc, request.radius_km
        # limit and offset are within their window: the request's bounds (ops/requests.py)
        facets.check_facets(request.facets)
        point = self._near(near, near_doc, radius_km)
        filters = self._conditions(request, point if point and point.radius_km else None)
        weight = request.keyword_weight
        options = RetrievalOptions(
            retrieval=request.mode,
            keyword_weight=self.settings.keyword_weight if weight is None else weight,
            fusion=request.fusion or self.settings.fusion,
            top_n=request.top_n or DEFAULT_TOP_N,
            explain=request.explain,
            min_score=request.min_score,
            near=point,
        ).checked()
        names = source_names(source)
        started = time.monotonic()
        if len(names) == 1:
            src = self.library.get(names[0])
            result = retrieve(
                src,
                q,
                limit=limit,
                offset=offset,
                timeout=self.settings.query_timeout,
                filters=filters.resolved(src),
                list_sources=self._sources_having,
                options=options,
            )
            if request.facets:
                self._search_facets({src.name: result}, result, request.facets, started)
        else:
            result = self._search_all(
                q, limit, offset, options, names, filters, request.facets, started
            )
        if point is not None and point.note:
            result.notes.append(point.note)
        self._openable(result.hits)
        for observe in self.search_observers:
            observe(result)
        return result

    def _search_facets(
        self,
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
            src = self.library.get(name)
            counted.source_totals[name] = (one.total, one.total_is_lower_bound)
            left = self.settings.query_timeout - (time.monotonic() - started)
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

    def search_for_answer(self, query: str, source: str | None, limit: int) -> SearchResult:
        """A search the answer layer runs for one planned query (answer/rag.py, below this
        layer, does not build requests itself)."""
        return self.search(SearchRequest.of(query=query, source=source, limit=limit))

    def has_article(self, name: str, source: str | None = None) -> bool:
        """Whether ``source`` (else any source) has a document titled ``name``: the answer
        layer's check that a subject the search missed is still in the library."""
        sources = [self.library.get(source)] if source else self.library.sources()
        return any(browse.has_title(src, name) for src in sources)

    def _near(self, near: str | None, near_doc: str | None, radius_km: float | None) -> Near | None:
        if near and near_doc:
            raise BadQuery("give near or near_doc, not both")
        if near and not LOOKS_LIKE_POINT.match(near):
            return self._near_place(near, radius_km)
        if near:
            return parse_near(near, radius_km)
        if near_doc:
            return self._point_of(near_doc, radius_km)
        if radius_km is not None:
            raise BadQuery("radius_km needs near or near_doc")
        return None

    def _near_place(self, address: str, radius_km: float | None) -> Near:
        """``near=香川県高松市番町一丁目10-16``: the best point the library's places give for an
        address or a place name (search/geocode.py), said in a note."""
        check_length(address, "near")
        found = self._geocoded(address, None, 1).best
        if found is None:
            raise BadQuery(
                f"no place in the library matches near {address!r}",
                hint="give lat,lon, or near_doc=source:title, or an address a place source "
                "knows ({see} shows what it finds)",
                see=Operation("geocode"),
            )
        point = parse_near(f"{found.lat},{found.lon}", radius_km)
        note = Notice(
            "near_place", asked=address, place=found.title, level=found.level, source=found.source
        )
        return replace(point, label=address, note=note)

    def _search_all(
        self,
        q: str,
        limit: int,
        offset: int,
        options: RetrievalOptions,
        names: list[str] | None = None,
        filters: Filters | None = None,
        facet_names: list[str] | None = None,
        started: float | None = None,
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
            sources = [self.library.get(n) for n in names]
        else:
            sources, left_out = self.library.default_sources()
        if not sources:
            raise NotFound(
                "there are no sources yet",
                hint="build one with {see}",
                see=Operation("ingest", kind="docs"),
            )
        deadline = time.monotonic() + self.settings.query_timeout
        results: dict[str, SearchResult] = {}
        notes_: dict[str, list[str]] = {n: [Notice("not_in_default")] for n in left_out}
        timed_out = False
        refused: list[BadQuery | Conflict] = []

        def one(src) -> SearchResult:
            return self._search_one(src, q, offset + limit, options, filters, deadline)

        # A live source's server is asked meanwhile, in a thread of its own: one that answers
        # slowly took the whole deadline from the sources after it (issue #42 item 2).
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
                f"searching every source took longer than {self.settings.query_timeout:g} s"
            )
        merged = (
            _by_distance(results.values()) if options.near else self._merged(q, results, options)
        )
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
            self._search_facets(results, found, facet_names, begun)
        return found

    def _search_one(
        self,
        src: Source,
        q: str,
        want: int,
        options: RetrievalOptions,
        filters: Filters | None,
        deadline: float,
    ) -> SearchResult:
        """One source's first ``want`` hits for a search of several, by ``deadline``."""
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise QueryTimeout("no time left")
        if options.near is not None and not _has_points(src):
            raise BadQuery(
                f"source {src.name!r} has no coordinates",
                source=src.name,
                sources_with_it=[i.name for i in self._sources_having() if i.points] or None,
            )
        per_source = options
        if options.retrieval in ("semantic", "hybrid") and default_retrieval(src) == "keyword":
            per_source = replace(options, retrieval="keyword")
        return retrieve(
            src,
            q,
            limit=want,
            offset=0,
            timeout=remaining,
            filters=filters.resolved(src) if filters else None,
            list_sources=self._sources_having,
            options=per_source,
        )

    def _merged(self, q: str, results: dict[str, SearchResult], options: RetrievalOptions):
        """Every source's hits in one order of evidence (search/evidence.py). Coverage here
        counts every word of the question, light ones (一番) too: leaving them out, as a
        source's own search does, measured no better across sources (docs/design.md §31.4)."""
        words = query_words(q)
        lists = []
        for name, result in results.items():
            src = self.library.get(name)
            covered = evidence.covered(src, words, result.hits)
            weight = evidence.MEANING_WEIGHT if result.retrieval == "hybrid" else 0.0
            lists.append(
                [
                    evidence.Weighed(h, evidence.relevance(h, covered.get(h.doc_id), weight), i)
                    for i, h in enumerate(result.hits)
                ]
            )
        return evidence.merge(lists)

    # -- documents and browsing ---------------------------------------------------------------

    @checked_text
    def doc(
        self,
        source: str,
        *,
        title: str | None = None,
        doc_id: int | None = None,
        key: str | None = None,
        fields: list[str] | None = None,
        max_chars: int | None = None,
        question: str | None = None,
    ) -> dict[str, Any]:
        """One document. With ``question``, its ``body`` is the passages that best answer it
        (answer/passages.py: what ``ask`` reads of it), within ``max_chars`` (default: the
        answer budget), in the document's order, and ``answer_sentences`` the few sentences of
        them likeliest to answer it (answer/sentences.py), best first."""
        wanted = browse.check_fields(fields)
        _check_lookup(title, key, doc_id)
        if max_chars is not None and max_chars < 0:
            raise BadQuery("max_chars must not be negative")
        if question is not None:
            _check_question(question)
        src, deadline = self._read(source, "doc")
        # a live source reads it from its server first (store/library.py LiveSource)
        src.ensure_doc(doc_id=doc_id, key=key, title=title, timeout=self.settings.query_timeout)
        with deadline:
            found, alternatives = browse.find_doc(src, title=title, doc_id=doc_id, key=key)
            out = browse.read_doc(
                src, found, wanted, None if question else max_chars, self._doc_link
            )
        if question and "body" in out:
            budget = self.settings.answer_budget if max_chars is None else max_chars
            self._answering_passages(out, src.name, found, question, budget)
            if max_chars is not None:
                browse.fit_lists(out, max_chars)
        if alternatives:
            out["alternatives"] = alternatives
        return out

    def _answering_passages(
        self, out: dict[str, Any], source: str, doc_id: int, question: str, budget: int
    ) -> None:
        from chiezo.answer.excerpt import Excerpt, excerpt_text
        from chiezo.answer.passages import Found, choose
        from chiezo.answer.sentences import answer_sentences

        # the source and id as found, not from ``out``: ``fields`` may have left them out
        hit = Found(source, doc_id, out.get("title", ""))
        chosen = choose(self, [hit], question, budget)
        out["body"] = excerpt_text(chosen[0].chosen) if chosen else ""
        if chosen:  # the sentences of those passages that answer it, best first (no model)
            document = chosen[0]
            excerpt = Excerpt(1, source, doc_id, document.title, None, out["body"],
                              aliases=document.aliases, passages=document.chosen)  # fmt: skip
            out["answer_sentences"] = [
                {"text": s.text} for s in answer_sentences(question, [excerpt])
            ]
        out["passages_for"] = question  # the body is what answers it, not the document's start
        out["truncated"] = len(out["body"]) < out["body_chars"]

    @checked_text
    def titles(self, request: TitlesRequest) -> dict[str, Any]:
        check_length(request.prefix, "prefix")
        src, deadline = self._read(request.source, "titles")
        with deadline:
            return browse.titles_by_prefix(src, request.prefix, request.limit)

    @checked_text
    def tags(self, request: TagsRequest) -> dict[str, Any]:
        return self._counted(request, "tags", browse.list_tags)

    @checked_text
    def links(self, request: LinksRequest) -> dict[str, Any]:
        title, doc_id, key = request.title, request.doc_id, request.key
        _check_lookup(title, key, doc_id)
        src, deadline = self._read(request.source, "links")
        with deadline:
            found, _ = browse.find_doc(src, title=title, doc_id=doc_id, key=key)
            return browse.list_links(
                src,
                found,
                direction=request.direction,
                limit=request.limit,
                offset=request.offset,
            )

    @checked_text
    def filter(self, request: FilterRequest) -> dict[str, Any]:
        """List every document meeting all conditions (see search/filters.py)."""
        source, limit, offset, fields = (
            request.source,
            request.limit,
            request.offset,
            request.fields,
        )
        wanted = browse.check_fields(fields) if fields else None
        facet_names = facets.check_facets(request.facets)
        point = self._near(request.near, request.near_doc, request.radius_km)
        filters = self._conditions(request, point)
        names = source_names(source)
        if len(names) > 1:
            result = self._filter_several(names, filters, limit, offset, wanted, facet_names)
            return self._with_near(result, point)
        src, deadline = self._read(source, "filter")
        counted = facets.Facets(facet_names) if facet_names else None
        with deadline:
            result = browse.filter_docs(
                src,
                filters.resolved(src),
                limit=limit,
                offset=offset,
                fields=wanted,
                list_sources=self._sources_having,
                counted=counted,
                link=self._doc_link,
            )
        if counted is not None:
            result["facets"] = counted.to_dict()
        return self._with_near(result, point)

    def _with_near(self, result: dict[str, Any], point: Near | None) -> dict[str, Any]:
        notes = [*result.get("notes", []), *([point.note] if point and point.note else [])]
        return {**result, **self._near_stated(point), "notes": notes}

    @staticmethod
    def _near_stated(point: Near | None) -> dict[str, Any]:
        """The point a filter was made around, and how an address given was resolved."""
        if point is None:
            return {}
        where = {"lat": point.lat, "lon": point.lon, "from": point.label}
        if point.note is not None:
            where["place"] = point.note.params  # type: ignore[attr-defined]
        return {"near": {**where, "radius_km": point.radius_km}}

    def _filter_several(
        self,
        names: list[str],
        filters: Filters,
        limit: int,
        offset: int,
        fields: tuple[str, ...] | None,
        facet_names: tuple[str, ...] = (),
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
                src, deadline = self._read(name, "filter")
                with deadline:
                    results[name] = browse.filter_docs(
                        src,
                        filters.resolved(src),
                        limit=offset + limit,
                        offset=0,
                        fields=shown,
                        list_sources=self._sources_having,
                        counted=counted if facet_names else None,
                        link=self._doc_link,
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
    def random(self, request: RandomRequest) -> dict[str, Any]:
        """Documents drawn at random, from the source or from those meeting the conditions."""
        wanted = browse.check_fields(request.fields) if request.fields else None
        point = self._near(request.near, request.near_doc, request.radius_km)
        filters = self._conditions(request, point)
        src, deadline = self._read(request.source, "random")
        with deadline:
            drawn = browse.random_docs(
                src,
                filters.resolved(src),
                count=request.count,
                seed=request.seed,
                fields=wanted,
                list_sources=self._sources_having,
                link=self._doc_link,
            )
        return self._with_near(drawn, point) if point is not None else drawn

    def _conditions(
        self, request: SearchRequest | FilterRequest | RandomRequest, near: Near | None
    ) -> Filters:
        """The conditions on documents that search, filter and random share, as
        search/filters.py takes them (a named ``within`` read from its source here)."""
        return Filters.parse(
            request.tag,
            request.attr,
            feature=request.feature,
            area=request.area,
            wikidata=request.wikidata,
            bbox=request.bbox,
            near=near,
            within=self.within_shape(request.within) if request.within else None,
        )

    def within_shape(self, text: str) -> Shape:
        """``within``: a written shape, or ``source:name`` of an OSM source's admin area."""
        if not shapes.is_named(text):
            return shapes.parse_within(text)
        name, _, area = text.strip().partition(":")
        src, deadline = self._read(name.strip(), "within")
        with deadline:
            return shapes.named_area(src, area, having=self._sources_with_shapes)

    def _sources_with_shapes(self) -> list[str] | None:
        opened = [self.library.get(info.name) for info in self._sources_having()]
        return [src.name for src in opened if shapes.has_shapes(src)] or None

    @checked_text
    def geocode(self, request: GeocodeRequest) -> dict[str, Any]:
        """An address or place name → the most precise points the library's places give, with
        the level matched and the source (search/geocode.py)."""
        if not has_terms(request.address):  # blank, or control characters only
            raise BadQuery("give an address or a place name to look for", field="address")
        names = source_names(request.source)
        sources = [self.library.get(n) for n in names] if names else None
        return self._geocoded(request.address, sources, request.limit).to_dict()

    def _geocoded(self, address: str, sources: list[Source] | None, limit: int):
        # imported here: it reads the places kind's address test, which a search that never
        # geocodes need not load (a cold CLI start)
        from chiezo.search.geocode import geocode

        if sources is None:
            sources = [s for s in self.library.default_sources()[0] if _has_points(s)]
        timer = self.settings.query_timeout
        with contextlib.ExitStack() as stack:
            for src in sources:
                stack.enter_context(db.deadline(src.conn, timer, what="geocoding"))
            return geocode(sources, address, limit=limit)

    def _point_of(self, reference: str, radius_km: float | None) -> Near:
        """``source:title`` → that document's coordinates (resolved server-side, so "the
        stations nearest to 浅草寺" is one call)."""
        check_length(reference, "near_doc")
        name, sep, title = reference.partition(":")
        if not sep or not name or not title.strip():
            raise BadQuery(
                f"near_doc is source:title, got {reference!r}",
                hint="e.g. {see}",
                see=Option("near_doc", "jawiki:浅草寺"),
            )
        src, deadline = self._read(name, "near_doc")
        with deadline:
            doc_id, _ = browse.find_doc(src, title=title)
            row = src.conn.execute(
                "SELECT lat, lon FROM doc_points WHERE doc_id = ?", (doc_id,)
            ).fetchone()
        if row is None:
            raise BadQuery(f"{reference!r} has no coordinates", source=name)
        near = parse_near(f"{row[0]},{row[1]}", radius_km)
        return Near(near.lat, near.lon, near.radius_km, label=reference)

    def _sources_having(self) -> list[SourceInfo]:
        """Every source that opens, for "which sources have it" (search/filters.py)."""
        return [info for info in self.library.infos() if info.ok]

    @checked_text
    def features(self, request: FeaturesRequest) -> dict[str, Any]:
        return self._counted(request, "features", browse.list_features)

    def _counted(self, request: CountsRequest, what: str, lister) -> dict[str, Any]:
        """A page of one source's names with their document counts (tags, features)."""
        check_length(request.prefix, "prefix")
        check_length(request.contains, "contains")
        src, deadline = self._read(request.source, what)
        with deadline:
            return lister(
                src,
                prefix=request.prefix,
                contains=request.contains,
                limit=request.limit,
                offset=request.offset,
            )

    # -- vectors -----------------------------------------------------------------------------

    def warm(self) -> dict[str, float]:
        """Warm every source (``Source.warm``: its embedding model, vector index and rank
        vector), so the first queries after start are as fast as the rest. Not the whole files:
        the server starts answering only after this, and reading gigabytes of generations would
        hold it up for what the page cache fills on first use. Returns seconds per source."""
        spent: dict[str, float] = {}
        for src in self.library.sources():
            try:
                spent[src.name] = round(src.warm(read_file=False), 3)
            except ChiezoError:
                continue  # reported on first use; a missing model must not stop the server
        return spent

    def embed(
        self,
        source: str,
        model: str | None = None,
        *,
        max_chunks: int | None = None,
        unit_chars: int | None = None,
        progress=None,
        keep_previous: Path | None | str = generations.REPLACED,
        runner=None,
    ):
        """Vectors for a source's chunks, as a new generation (store/embed.py); ``keep_previous``:
        the generation kept beside it (default: the one it replaces); ``runner``: where the
        vectors are computed (default: here; cluster/embedding.py: on a Ray cluster)."""
        from chiezo.store.embed import embed_source

        return embed_source(
            self.settings,
            self.library,
            source,
            model,
            max_chunks=max_chunks,
            unit_chars=unit_chars,
            progress=progress,
            keep_previous=keep_previous,
            runner=runner,
        )

    # -- answers ---------------------------------------------------------------------------

    def llm(self):
        """The configured model client, or None when answering is off (no CHIEZO_LLM_URL)."""
        from chiezo.answer.llm import LLMClient, endpoints_from

        s = self.settings
        endpoints = endpoints_from(s.llm_url, s.llm_model, s.llm_key)
        return LLMClient(endpoints, timeout=s.llm_timeout) if endpoints else None

    def require_llm(self, prepared=None):
        """The model client, or a configuration error that still hands over what was found."""
        llm = self.llm()
        if llm is None:
            found = {} if prepared is None else prepared.findings()
            raise LLMNotConfigured(
                "answering needs a language model endpoint, and none is configured",
                hint="set CHIEZO_LLM_URL (and CHIEZO_LLM_MODEL)"
                + ("; what the library says and the excerpts found are included" if found else ""),
                **found,
            )
        return llm

    @checked_text
    def prepare_answer(
        self,
        question: str,
        options: AnswerOptions | None = None,
        *,
        history: list[dict] | None = None,
    ):
        """Plan, retrieve and excerpt (answer/rag.py) — everything before the model answers."""
        from chiezo.answer import rag

        _check_question(question)
        options = (options or AnswerOptions()).resolved(self.settings)
        return rag.prepare(self, question, options, history=history, llm=self.llm())

    @checked_text
    def ask(
        self,
        question: str,
        options: AnswerOptions | None = None,
        *,
        history: list[dict] | None = None,
        on_event=None,
        log_as: str | None = None,
        **choices,
    ):
        """An answer from numbered sources with citations, its claims checked against them:
        ``rag`` (plan, search, excerpts, answer) or ``agent`` (the model calls the read-only
        tools itself, within budgets). ``choices`` are :class:`AnswerOptions` fields.
        ``log_as``: the surface asking, to keep the answer in the record of answers
        (ops/answers_log.py); None keeps nothing."""
        options = _answer_options(options, choices).resolved(self.settings)
        started = time.monotonic()
        try:
            result = self._answered(question, options, history, on_event)
        except Exception as exc:  # a failed ask is kept too, with its cause (a bug: its kind)
            if log_as:
                self._log_failure(question, exc, options.mode or "rag", started, log_as)
            raise
        if log_as:
            seconds = time.monotonic() - started
            self.answers_log.record(result.to_dict(), mode=options.mode or "rag", seconds=seconds,
                                    surface=log_as)  # fmt: skip
        return result

    def _answered(self, question: str, options: AnswerOptions, history, on_event):
        from chiezo.answer import rag

        if options.mode == "agent":
            from chiezo.answer.agent import run_agent  # on use: it loads the MCP SDK (~1 s)
            from chiezo.ops.tools import toolbox

            _check_question(question)
            return run_agent(
                self,
                question.strip(),
                self.require_llm(),
                options,
                lambda small: toolbox(
                    self, writable=options.writable, profile="compact" if small else None
                ),
                history=history,
                on_event=on_event,
            )
        prepared = self.prepare_answer(question, options, history=history)
        if not prepared.needs_model:
            return rag.no_basis(prepared)  # the model is not asked without sources
        return rag.answer(prepared, self.require_llm(prepared))

    @checked_text
    def answer_events(
        self,
        question: str,
        options: AnswerOptions | None = None,
        *,
        history: list[dict] | None = None,
        log_as: str | None = None,
        **choices,
    ):
        """The answer as it is written, as ``(event, data)`` pairs: rag gives ``references``,
        ``delta``…, ``done``; agent gives a ``step`` per tool call, then ``done``; a failure
        after the first event is an ``error`` event. Planning, retrieval and the check that a
        model is configured happen *before* this returns, so their failures are plain errors
        (an HTTP status, an exit code) rather than a broken stream."""
        options = _answer_options(options, choices).resolved(self.settings)
        started = time.monotonic()
        try:
            events = self._answer_events(question, options, history)
        except Exception as exc:
            if log_as:
                self._log_failure(question, exc, options.mode or "rag", started, log_as)
            raise
        if not log_as:
            return events
        return self._logged(events, question, options.mode or "rag", started, log_as)

    def _answer_events(self, question: str, options: AnswerOptions, history):
        from chiezo.answer import rag

        if options.mode == "agent":
            _check_question(question)
            self.require_llm()
            events = _threaded_events(
                lambda emit: self.ask(question, options, history=history, on_event=emit).to_dict()
            )
        else:
            prepared = self.prepare_answer(question, options, history=history)
            llm = self.require_llm(prepared) if prepared.needs_model else None
            events = _guarded_events(rag.stream_answer(prepared, llm))
        return events

    def _logged(self, events, question: str, mode: str, started: float, surface: str):
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
                    self.answers_log.record(data, mode=mode, seconds=seconds, surface=surface)
                elif name == "error":
                    self._log_failure(question, data, mode, started, surface, "".join(written))
                ended = ended or name in ("done", "error")
                yield name, data
        except GeneratorExit:  # the reader left before the end (a chat page closed)
            if not ended:
                gone = {"error": "the client stopped reading before the end", "cause": "abandoned"}
                self._log_failure(question, gone, mode, started, surface, "".join(written))
            raise

    def _log_failure(self, question, error, mode: str, started: float, surface: str,
                     written: str = "") -> None:  # fmt: skip
        """A failed ask kept in the record of answers, with what was written before it."""
        self.answers_log.record_error(question, error, mode=mode, surface=surface,
                                      seconds=time.monotonic() - started,
                                      model=self.settings.llm_model, answer=written)  # fmt: skip

    def claim_embedder(self, names):
        """``texts → unit vectors`` with the embedder of the first of these sources that has
        vectors (claims are compared in the space their source was searched in), or None."""
        from chiezo.store.model_host import query_embedder
        from chiezo.store.vectors import vector_info

        for name in dict.fromkeys(names):
            try:
                info = vector_info(self.library.get(name).meta)
            except ChiezoError:
                continue
            if info is not None:
                model = info.model
                return lambda texts: query_embedder(model).embed(texts, "passage")
        return None

    def reference_link(self, source: str, doc_id: int, key: str | None, url: str | None):
        """(where a person can open a cited document, its stable ``source:key``): the URL
        ops/links.py makes of its stored ``url`` — its public page, else this server's page
        for it (``CHIEZO_PUBLIC_URL``, ``chiezo serve``'s own, or the server on this data
        directory) — or None when it has neither."""
        cite = f"{source}:{key if key is not None else doc_id}"
        # a tool answer's web address is written readable (…/wiki/浅草寺): a reference gives
        # it as sources store one; an archive path or a file:// url is the stored value itself
        stored = links.encoded(url) if url is not None and links.is_public(url) else url
        return self.open_url(source, doc_id, stored), cite

    def open_url(self, source: str, doc_id: int, url: str | None) -> str | None:
        """The absolute URL a person opens the document at (ops/links.py), from its stored
        ``url`` — or from one already made so (a tool result's), which is kept."""
        return links.open_url(
            links.server_base(self.settings), source, doc_id, url, self._archived(source)
        )

    def _archived(self, source: str) -> bool:
        """Whether ``source`` was built from an archive (a ZIM: its documents' url is their
        path inside it)."""
        try:
            return self.library.get(source).archived
        except ChiezoError:
            return False

    def _doc_link(self, src: Source, doc_id: int, url: str | None) -> str | None:
        """``open_url`` for a document read from ``src`` (ops/browse.py ``read_doc``)."""
        return links.open_url(links.server_base(self.settings), src.name, doc_id, url, src.archived)

    def _openable(self, hits: list[Hit]) -> None:
        """Each hit's ``url`` made one a person can open; what the source stores kept as
        ``source_url`` (the web maps that to its own relative links)."""
        base = links.server_base(self.settings)
        archived = {name: self._archived(name) for name in {h.source for h in hits}}
        for hit in hits:
            if hit.source_url is None:
                hit.source_url = hit.url
            hit.url = links.open_url(
                base, hit.source, hit.doc_id, hit.source_url, archived[hit.source]
            )

    def llm_status(self) -> dict[str, Any]:
        """Is answering on, and does each configured endpoint answer with the model? (The web
        UI's status line and ``chiezo doctor`` both read this.)"""
        client = self.llm()
        if client is None:
            return {"configured": False, "model": None, "endpoints": []}
        checked = [client.check(endpoint) for endpoint in client.endpoints]
        usable = next((c for c in checked if c["ok"]), None)
        return {
            "configured": True,
            "model": (usable or {}).get("model") or self.settings.llm_model,
            "endpoints": checked,
        }

    def chunk_ids(self, source: str, doc_id: int) -> dict[int, int]:
        """A document's passages, ``ord`` → chunk_id: what answer/passages.py weighs them by."""
        return browse.chunk_ids(self.library.get(source), doc_id)

    def passage_closeness(
        self, source: str, chunk_ids: list[int], question: str
    ) -> dict[int, float]:
        """chunk_id → how close its best vector is to ``question`` (empty without vectors):
        the meaning answer/passages.py weighs a passage by."""
        return chunk_closeness(self.library.get(source), chunk_ids, question)

    def points(self, hits: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[float, float]]:
        """Coordinates of the given (source, doc_id) pairs that have them (for a map)."""
        wanted: dict[str, list[int]] = {}
        for name, doc_id in hits:
            wanted.setdefault(name, []).append(doc_id)
        out: dict[tuple[str, int], tuple[float, float]] = {}
        for name, ids in wanted.items():
            src, deadline = self._read(name, "points")
            if not int(src.meta.get("point_count", 0) or 0):
                continue
            marks = ",".join("?" * len(ids))
            with deadline:
                for doc_id, lat, lon in src.conn.execute(
                    f"SELECT doc_id, lat, lon FROM doc_points WHERE doc_id IN ({marks})", ids
                ):
                    out[(name, doc_id)] = (lat, lon)
        return out

    # -- notes -------------------------------------------------------------------------------

    @checked_text
    def remember(
        self, text: str, *, title: str | None = None, tags: list[str] | None = None
    ) -> dict[str, Any]:
        note_id = self.notes.remember(text, title=title, tags=tags)
        return self.note(note_id)

    def note(self, note_id: int, *, max_chars: int | None = None) -> dict[str, Any]:
        check_id(note_id, "note")
        src, deadline = self._read(self._notes_source(), "note")
        with deadline:
            found = notes.note_row(src.conn, note_id, max_chars)
        if found is None:
            raise NotFound(f"there is no note {note_id}")
        return found

    @checked_text
    def recall(
        self,
        *,
        q: str | None = None,
        since: str | None = None,
        until: str | None = None,
        tag: str | None = None,
        limit: int = RecallRequest.default("limit"),
        offset: int = RecallRequest.default("offset"),
        max_chars: int | None = RecallRequest.default("max_chars"),
    ) -> dict[str, Any]:
        limit = check_limit(limit)
        check_offset(offset)
        check_length(q, "the query", MAX_QUERY_CHARS)
        if max_chars is not None and max_chars < 0:
            raise BadQuery("max_chars must not be negative")
        src, deadline = self._read(self._notes_source(), "recall")
        with deadline:
            return notes.recall(
                src.conn,
                q=q,
                since=since,
                until=until,
                tag=tag,
                limit=limit,
                offset=offset,
                max_chars=max_chars,
            )

    @checked_text
    def update_note(
        self,
        note_id: int,
        *,
        text: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        check_id(note_id, "note")
        self.notes.update(note_id, text=text, title=title, tags=tags)
        return self.note(note_id)

    def forget(self, note_id: int) -> dict[str, Any]:
        self.notes.forget(check_id(note_id, "note"))
        return {"deleted": note_id}

    def _notes_source(self) -> Source:
        self.notes.ensure()  # an empty notes file is a valid, empty source
        return self.library.get(NOTES)


def embedding_after_build(
    previous: Path | None, embed: str | bool | None = None
) -> tuple[str, int | None, int | None] | None:
    """(model, max_chunks, unit_chars) of the embed step after a build whose previous
    generation is ``previous``: ``embed`` (a model name), or by default the previous
    generation's model with its coverage and unit size; None when nothing is embedded."""
    if embed is False:
        return None
    from chiezo.store.embed import previous_embedding

    carried = previous_embedding(previous)
    model = embed if isinstance(embed, str) else (carried[0] if carried else None)
    if not model:
        return None
    if carried is None or carried[0] != model:
        return model, None, None
    return model, carried[1], carried[2]


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


def _has_points(src: Source) -> bool:
    return src.conn.execute("SELECT 1 FROM doc_points LIMIT 1").fetchone() is not None


def _by_distance(results) -> list[Hit]:
    """Hits of several sources nearest first (each source ordered its own by distance)."""
    hits = [h for r in results for h in r.hits]
    return sorted(hits, key=lambda h: (h.distance_km is None, h.distance_km or 0.0))


def _about_sources(note: str) -> bool:
    """Notes a search across sources shows without ``explain``: what the user can act on."""
    return getattr(note, "code", None) in notices.ABOUT_SOURCES


def check_limit(limit: int, maximum: int = MAX_LIMIT) -> int:
    if limit < 1 or limit > maximum:
        raise BadQuery(f"limit must be between 1 and {maximum}, got {limit}")
    return limit


def _answer_options(options: AnswerOptions | None, choices: dict) -> AnswerOptions:
    if options is not None and choices:
        return replace(options, **choices)
    return options or AnswerOptions.of(**choices)


def _usable(spec: SourceKind, groups: list[list[Path]]) -> tuple[list[list[Path]], list[Skipped]]:
    """(the groups a source can be built from, the others as Skipped); InputError when none
    can be, one line per input saying why."""
    usable, skipped = [], []
    for group in groups:
        why = spec.unusable(group)
        if why is None:
            usable.append(group)
        else:
            skipped.append(Skipped(", ".join(map(str, group)), why))
    if not usable:
        raise InputError(
            f"no {spec.name} source can be built from these inputs:\n"
            + "\n".join(f"  {one.input}: {one.why}" for one in skipped),
            skipped=[one.to_dict() for one in skipped],
        )
    return usable, skipped


def _refuse_shared_names(kind: str, groups: list[list[Path]], targets: list[str | None]) -> None:
    """BadQuery before any build when inputs would make one source (two versions of one ZIM:
    the second build would replace the first): a line for each name so shared."""
    sharing: dict[str, list[str]] = {}
    for group, target in zip(groups, targets, strict=True):
        if target:
            sharing.setdefault(target, []).append(", ".join(map(str, group)))
    shared = {target: files for target, files in sorted(sharing.items()) if len(files) > 1}
    if shared:
        raise BadQuery(
            "\n".join(f"{', '.join(files)} would all be source {t}" for t, files in shared.items()),
            hint="build them one at a time, each with its own --name",
            kind=kind,
            shared_names=shared,
        )


# Live sources asked while the others of a search are searched (``_search_all``): each call
# is bounded by its own deadline and by the process's live slots (store/library.py LiveSlots).
_LIVE_ASKING = concurrent.futures.ThreadPoolExecutor(8, thread_name_prefix="chiezo-live")


def _guarded_events(events):
    """A stream whose failures after the first byte become an ``error`` event, the last one:
    a bug too, in the one error shape, rather than a stream cut without a word."""
    try:
        yield from events
    except Exception as exc:  # noqa: BLE001 - reported in the stream, not swallowed
        yield "error", _stream_error(exc)


def _stream_error(exc: Exception) -> dict:
    """``exc`` as an ``error`` event's data: ``ChiezoError.to_dict()``; a bug is logged."""
    if isinstance(exc, ChiezoError):
        return exc.to_dict()
    log.exception("answering failed")
    return InternalError.wrapping(exc).to_dict()


def _threaded_events(work):
    """Run ``work(emit)`` (the agent) in a thread; its events, then ``done`` with what it
    returns (or ``error``), cross over a queue as they happen."""
    import queue
    import threading

    events: queue.Queue = queue.Queue()

    def run():
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


def _check_question(question: str | None) -> None:
    if question is None or not has_terms(question):  # spaces or control characters only
        raise BadQuery("the question is empty", hint="ask something in words")
    check_length(question, "the question", MAX_QUESTION_CHARS)


def _check_lookup(title: str | None, key: str | None, doc_id: int | None) -> None:
    check_length(title, "title")
    check_length(key, "key")
    if doc_id is not None:
        check_id(doc_id, "document")
