"""Source kind ``wikipedia``: a MediaWiki pages-articles XML dump → ``<lang>wiki``.

One pass over the dump. The main process reads XML (and records redirects); workers render the
wikitext (the expensive part, mwparserfromhell) in batches — processes on this machine, or with
``--ray`` tasks on a cluster (a ``RenderBackend`` that cluster/wiki.py registers here) — and the
main process feeds the builder, in dump order. Lookup tables that grow with the wiki — page
views, Wikidata ids — live in a temporary on-disk SQLite, so resident memory stays flat whatever
the dump size.

Popularity (``rank_score``, 0..1, log-scaled): page views when a pageviews file is given;
otherwise the number of links pointing at the article from the rest of the dump (through
redirects), counted after the last page. Disambiguation, list and date pages keep a tenth of it.
"""

from __future__ import annotations

import collections
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import quote

from chiezo.core import db
from chiezo.core.config import RAY_DEFAULT_ADDRESS, Settings
from chiezo.core.errors import ConfigError
from chiezo.core.models import Chunk, Doc
from chiezo.core.progress import NullProgress, Progress
from chiezo.ingest.download import mtime
from chiezo.ingest.wikidump import SiteInfo, WikiDump
from chiezo.ingest.wikilookups import WikiLookups
from chiezo.ingest.wikirender import (
    DEFAULT_CHUNK_CHARS,
    PageRow,
    Rendered,
    default_workers,
    local_parsers,
)
from chiezo.ingest.wikistreams import index_beside, stream_ranges
from chiezo.ingest.wikitext import Namespaces, mediawiki_title
from chiezo.store import generations
from chiezo.store.build import (
    BuildOptions,
    BuildReport,
    GenerationBuilder,
    check_disk,
    check_memory,
)
from chiezo.store.kinds import Attribution, Capabilities, Fetched, SourceKind, option_field
from chiezo.store.wordindex import SplitterFactory

if TYPE_CHECKING:
    from chiezo.store.source_info import SourceInfo

KIND = "wikipedia"
BATCH_PAGES = 32
IN_FLIGHT = 4  # batches queued per worker: bounds the pages held in memory
FLAG_PENALTY = 0.1
MIN_MEMORY = 1 * 2**30
TEXT_FACTOR = {".bz2": 3.0, ".xz": 3.0, ".gz": 2.5}


@dataclass
class WikiOptions:
    language: str | None = option_field(None, "--lang", help="Wiki language (default: the dump's).")
    pageviews: Path | None = option_field(
        None, help="Wikimedia pageviews file: popularity from page views."
    )
    page_props: Path | None = option_field(
        None, help="page_props SQL dump: Wikidata ids as the attribute 'wikidata'."
    )
    allow_truncated: bool = option_field(
        False, help="Build from the complete pages of a cut-off dump."
    )
    workers: int | None = option_field(
        None, help="Parser processes (with --ray: tasks at once).", low=1, high=4096, recorded=False
    )
    ray: str | None = option_field(
        None,
        recorded=False,
        flag_value=RAY_DEFAULT_ADDRESS,
        metavar="[ADDRESS]",
        help="Render the wikitext on a Ray cluster (docs/cluster.md); alone: this machine's "
        "cluster.",
    )
    # why about 500: wikirender.DEFAULT_CHUNK_CHARS
    chunk_chars: int = option_field(
        DEFAULT_CHUNK_CHARS,
        low=100,
        high=5000,
        help="Target passage size in characters (at most twice that) for snippets and vectors.",
    )
    date: str | None = option_field(
        None,
        help="Without DUMP: the dump date to fetch (YYYYMMDD).",
        recorded=False,
        for_fetch=True,
    )
    mirror: str | None = option_field(
        None, help="Without DUMP: the dumps site or mirror URL.", recorded=False, for_fetch=True
    )
    with_extras: bool = option_field(
        False,
        recorded=False,
        for_fetch=True,
        help="Without DUMP: also fetch page views and page_props for popularity and Wikidata ids.",
    )
    # set by fetch(): what was downloaded and how, so `chiezo rebuild --fetch` can do it again
    fetched: dict | None = option_field(None, cli=False)


def ingest_wikipedia(
    settings: Settings,
    path: Path,
    name: str | None = None,
    *,
    wiki: WikiOptions | None = None,
    options: BuildOptions | None = None,
    progress: Progress | None = None,
) -> BuildReport:
    """Build ``name`` (default: the dump's dbname, e.g. ``jawiki``) from a pages-articles dump."""
    wiki = wiki or WikiOptions()
    progress = progress or NullProgress()
    dump = WikiDump(Path(path), allow_truncated=wiki.allow_truncated)
    info = dump.siteinfo
    language = wiki.language or info.language or info.dbname.removesuffix("wiki") or "en"
    name = name or info.dbname or f"{language}wiki"
    options = options or BuildOptions()
    options.language = options.language or language
    splitting = _render_backend(wiki).word_splitter
    if splitting is not None and options.word_splitter is None:  # --ray: words there too
        options.word_splitter = splitting(wiki.ray)
    # refuse before reading anything: the parser workers need memory, the source needs disk
    check_memory(MIN_MEMORY, name)
    check_disk(settings.corpus_dir, expected_text_bytes(Path(path)), name)
    settings.corpus_dir.mkdir(parents=True, exist_ok=True)
    with generations.scratch_dir(settings.corpus_dir, "wiki-lookups-") as tmp:
        lookups = WikiLookups(Path(tmp) / "lookups.db")
        if wiki.pageviews:
            progress.phase("reading page views", None, "lines")
            lookups.load_pageviews(Path(wiki.pageviews), language, progress)
        if wiki.page_props:
            progress.phase("reading page props", None, "rows")
            lookups.load_page_props(Path(wiki.page_props), progress)
        builder = GenerationBuilder(
            settings,
            name,
            KIND,
            input_identity=_identity(Path(path), info, language, wiki),
            options=options,
            progress=progress,
            expected_bytes=expected_text_bytes(Path(path)),
        )
        try:
            with builder:
                _stream(
                    dump,
                    builder,
                    lookups,
                    Namespaces.for_wiki(info.namespaces, language),
                    info.article_url_prefix,
                    wiki,
                    progress,
                )
                if dump.truncated:
                    builder.warn(f"truncated dump: {dump.truncated}")
                    builder.identity["truncated"] = dump.truncated
                if not lookups.has_pageviews:
                    builder.before_ordering(rank_by_incoming_links)
                return builder.finish()
        finally:
            dump.close()
            lookups.close()


def expected_text_bytes(path: Path) -> int:
    """Text expected from a dump, for the disk check: compressed wikitext expands about 5×,
    and rendering keeps about 60% of it."""
    return int(path.stat().st_size * TEXT_FACTOR.get(path.suffix.lower(), 0.7))


def _identity(path: Path, info: SiteInfo, language: str, wiki: WikiOptions) -> dict[str, Any]:
    """What the source is built from, paths absolute (a rebuild may run from anywhere)."""
    date = re.search(r"(\d{8})", path.name)
    identity = {
        "path": str(path.resolve()),
        "bytes": path.stat().st_size,
        "mtime": mtime(path),
        "dbname": info.dbname,
        "language": language,
        "dump_date": date.group(1) if date else None,
        "pageviews": str(Path(wiki.pageviews).resolve()) if wiki.pageviews else None,
        "page_props": str(Path(wiki.page_props).resolve()) if wiki.page_props else None,
        "chunk_chars": wiki.chunk_chars,
    }
    return {**identity, "fetched": wiki.fetched} if wiki.fetched else identity


# -- where the wikitext is rendered: the seam the cluster plugs into ----------------------------


@dataclass(frozen=True)
class RenderBackend:
    """A way of rendering a build's wikitext in parallel. Each is called as ``(address, ns,
    chunk_chars, workers)`` — the ``--ray`` address (None without it), the wiki's namespaces,
    the passage size, ``--workers`` — and gives a context of ``(submit, workers)``: ``submit(…)``
    returns a result whose ``get()`` is the work's return value; ``workers`` is how many the
    builder keeps busy.

    * ``parsers``: ``submit(batch)`` renders pages the builder read
      (``wikirender.render_batch``);
    * ``stream_readers``: ``submit(dump_path, start, end)`` reads and renders a byte range of
      a multistream dump itself (``wikistreams.read_and_render``); None where the workers
      cannot read the dump;
    * ``word_splitter``: ``(address)`` → where the build splits its words
      (``BuildOptions.word_splitter``); None: this machine's processes.
    """

    parsers: Callable[..., Any]
    stream_readers: Callable[..., Any] | None = None
    word_splitter: Callable[[str | None], SplitterFactory] | None = None


def _local_parsers(address: str | None, ns: Namespaces, chunk_chars: int, workers: int | None):
    """Parser processes on this machine."""
    return local_parsers(ns, chunk_chars, workers or default_workers())


LOCAL_RENDERING, RAY_RENDERING = "local", "ray"
_render_backends: dict[str, RenderBackend] = {LOCAL_RENDERING: RenderBackend(_local_parsers)}


def register_render_backend(name: str, backend: RenderBackend) -> None:
    """Offer ``backend`` as the rendering ``name``: cluster/wiki.py registers ``ray`` when it
    is imported (the CLI's ``--ray`` imports it), so this layer never imports the optional
    extra."""
    _render_backends[name] = backend


def _render_backend(wiki: WikiOptions) -> RenderBackend:
    """Where this build renders: with ``--ray`` the cluster's backend, else this machine's."""
    if wiki.ray is None:
        return _render_backends[LOCAL_RENDERING]
    backend = _render_backends.get(RAY_RENDERING)
    if backend is None:
        raise ConfigError(
            "rendering on a Ray cluster needs the cluster backend, which is not loaded",
            hint="import chiezo.cluster.wiki before the build (the CLI's --ray does)",
        )
    return backend


# -- the pipeline -----------------------------------------------------------------------------


_T_co = TypeVar("_T_co", covariant=True)


class _Result(Protocol[_T_co]):
    """Work on its way back from a worker (a parser process, a Ray task): ``get()`` waits
    for it and gives its value."""

    def get(self) -> _T_co: ...


def _stream(
    dump: WikiDump,
    builder: GenerationBuilder,
    lookups: WikiLookups,
    ns: Namespaces,
    url_prefix: str,
    wiki: WikiOptions,
    progress: Progress,
) -> None:
    backend = _render_backend(wiki)
    readers = backend.stream_readers
    index = index_beside(dump.path) if readers is not None and not wiki.allow_truncated else None
    if readers is not None and index is not None:
        _stream_from_workers(dump, index, builder, lookups, ns, url_prefix, wiki, progress, readers)
        return
    total_bytes = max(dump.path.stat().st_size, 1)
    builder.start_reading(None)
    with backend.parsers(wiki.ray, ns, wiki.chunk_chars, wiki.workers) as (submit, workers):
        pending: collections.deque = collections.deque()  # in dump order: the order stays stable
        for batch in _article_batches(dump, builder, ns):
            pending.append((batch, submit(batch)))
            while len(pending) > IN_FLIGHT * workers:
                _store(pending.popleft(), builder, lookups, url_prefix)
            if dump.pages_read and dump.pages_read % 2048 < BATCH_PAGES:
                progress.retotal(_estimate_articles(dump, builder, total_bytes))
        while pending:
            _store(pending.popleft(), builder, lookups, url_prefix)


def _stream_from_workers(
    dump: WikiDump,
    index: Path,
    builder: GenerationBuilder,
    lookups: WikiLookups,
    ns: Namespaces,
    url_prefix: str,
    wiki: WikiOptions,
    progress: Progress,
    stream_readers: Callable[..., Any],
) -> None:
    """``--ray`` on a multistream dump with its index: the workers read their own streams
    (wikistreams.py, through the backend's ``stream_readers``); here only redirects and
    documents are stored, in dump order."""
    ranges = stream_ranges(dump.path, index)
    size, path = dump.path.stat().st_size, str(dump.path.resolve())
    builder.start_reading(None)
    with stream_readers(wiki.ray, ns, wiki.chunk_chars, wiki.workers) as (submit, workers):
        pending: collections.deque = collections.deque()
        for start, end in ranges:
            pending.append((end, submit(path, start, end)))
            while len(pending) > IN_FLIGHT * workers:
                stored_to, result = pending.popleft()
                _store_streams(result, builder, lookups, ns, url_prefix)
                progress.retotal(int(builder.docs_added * size / stored_to))
        while pending:
            _store_streams(pending.popleft()[1], builder, lookups, ns, url_prefix)


def _store_streams(
    result: _Result[dict[str, Any]],
    builder: GenerationBuilder,
    lookups: WikiLookups,
    ns: Namespaces,
    url_prefix: str,
) -> None:
    got = result.get()
    for title, target in got["redirects"]:
        _record_redirect(title, target, builder, ns)
    for (page_id, title, text, timestamp), parsed in got["articles"]:
        builder.add(_doc(page_id, title, text, timestamp, parsed, lookups, url_prefix, builder))


def _estimate_articles(dump: WikiDump, builder: GenerationBuilder, total_bytes: int) -> int:
    """Articles expected in the whole dump, from the share of compressed bytes read so far."""
    read = dump.bytes_read()
    if not read:
        return 0
    return int(builder.docs_added * total_bytes / read)


def _article_batches(
    dump: WikiDump, builder: GenerationBuilder, ns: Namespaces
) -> Iterator[list[tuple[int, str, str, str | None]]]:
    batch: list[tuple[int, str, str, str | None]] = []
    for page in dump.pages():
        if page.ns != 0:
            continue
        if page.redirect is not None:
            _record_redirect(page.title, page.redirect, builder, ns)
            continue
        batch.append((page.page_id, page.title, page.text, page.timestamp))
        if len(batch) >= BATCH_PAGES:
            yield batch
            batch = []
    if batch:
        yield batch


def _record_redirect(title: str, redirect: str, builder: GenerationBuilder, ns: Namespaces) -> None:
    target = mediawiki_title((redirect or "").split("#", 1)[0])
    prefix, sep, _ = target.partition(":")
    if not target or (sep and prefix.casefold() in ns.other | ns.file | ns.category):
        return  # a redirect out of the article namespace
    builder.add_alias(target, title)


def _store(
    item: tuple[list[PageRow], _Result[list[Rendered]]],
    builder: GenerationBuilder,
    lookups: WikiLookups,
    url_prefix: str,
) -> None:
    batch, result = item
    for (page_id, title, text, timestamp), parsed in zip(batch, result.get(), strict=True):
        builder.add(_doc(page_id, title, text, timestamp, parsed, lookups, url_prefix, builder))


def _doc(
    page_id: int,
    title: str,
    text: str,
    timestamp: str | None,
    parsed: Rendered,
    lookups: WikiLookups,
    url_prefix: str,
    builder: GenerationBuilder,
) -> Doc:
    if parsed is None:  # best effort: the raw text, so the page is still findable
        builder.warn(f"page {page_id} ({title!r}): markup could not be parsed; kept as raw text")
        parsed = {
            "text": text,
            "opening": text[:500],
            "categories": [],
            "links": [],
            "point": None,
            "flags": [],
            "chunks": [],
        }
    rank = lookups.rank(title)
    if parsed["flags"]:
        rank *= FLAG_PENALTY
    attrs: dict[str, list[str]] = {name: [value] for name, value in parsed.get("attrs", {}).items()}
    builder.tally("article points", parsed.get("point_source") or "none")
    qid = lookups.wikidata(page_id)
    if qid:
        attrs["wikidata"] = [qid]
    if parsed["flags"]:
        attrs["flag"] = parsed["flags"]
    return Doc(
        key=str(page_id),
        title=title,
        body=parsed["text"],
        opening=parsed["opening"],
        url=url_prefix + quote(title.replace(" ", "_")) if url_prefix else None,
        rank_score=rank,
        tags=parsed["categories"],
        links=parsed["links"],
        attrs=attrs,
        point=tuple(parsed["point"]) if parsed["point"] else None,
        chunks=[Chunk(text=t, heading_path=h) for h, t in parsed["chunks"]],
        extra={"page_id": page_id, "revision_timestamp": timestamp},
    )


def rank_by_incoming_links(conn: db.Connection) -> None:
    """Without page views: popularity from the links the rest of the wiki makes to each article
    (a link to a redirect counts for its target), log-scaled to 0..1; flagged pages keep a
    tenth. Runs over the staging tables, before doc_ids are assigned."""
    conn.create_function("chiezo_ln1p", 1, math.log1p, deterministic=True)
    conn.execute("CREATE INDEX stage.idx_late_aliases_alias ON late_aliases(alias)")
    conn.execute(
        "CREATE TABLE stage.inlinks AS SELECT coalesce(a.target, l.target) AS title, "
        "count(*) AS n FROM stage.links l LEFT JOIN stage.late_aliases a ON a.alias = l.target "
        "GROUP BY 1"
    )
    conn.execute("CREATE INDEX stage.idx_inlinks_title ON inlinks(title)")
    top = conn.execute("SELECT max(n) FROM stage.inlinks").fetchone()[0] or 0
    if not top:
        return
    conn.execute(
        "UPDATE stage.docs SET rank_score = chiezo_ln1p(i.n) / chiezo_ln1p(?) * CASE WHEN "
        "seq IN (SELECT seq FROM stage.attrs WHERE name = 'flag') THEN ? ELSE 1.0 END "
        "FROM stage.inlinks AS i WHERE i.title = stage.docs.title",
        (top, FLAG_PENALTY),
    )


# -- the kind -------------------------------------------------------------------------------------


def _dump_room(settings: Settings, size: int) -> list[tuple[Path, int]]:
    """The disk a build from a ``size``-byte compressed dump takes (``expected_text_bytes``)."""
    from chiezo.ingest.download import build_room

    return [build_room(settings.corpus_dir, int(size * TEXT_FACTOR[".bz2"]))]


class WikipediaKind(SourceKind):
    name = "wikipedia"
    summary = """Build a <lang>wiki source from a pages-articles XML dump (.xml, .xml.bz2, .xml.xz).
    Without DUMP, the dump of --lang (default ja) is downloaded first — resumable, checked
    against the published checksums — from the Wikimedia dumps site or --mirror."""
    Options = WikiOptions
    argument = "DUMP"
    fetches = True
    names_itself = True  # the dump's dbname, e.g. jawiki
    capabilities = Capabilities(headed_pages=True)

    def build(
        self,
        settings: Settings,
        inputs: list[Path],
        name: str | None,
        options: WikiOptions,
        build: BuildOptions,
        progress: Progress,
    ) -> BuildReport:
        return ingest_wikipedia(
            settings, inputs[0], name, wiki=options, options=build, progress=progress
        )

    def fetch(self, settings: Settings, options: WikiOptions, progress: Progress) -> Fetched:
        from dataclasses import replace

        from chiezo.ingest.wikifetch import fetch_dump

        language = options.language or "ja"
        # before any download: the parser workers' memory, and (in fetch_dump, once the dump's
        # size is known) the disk for the dump and the build from it
        check_memory(MIN_MEMORY, f"{language}wiki")
        got = fetch_dump(
            settings,
            language,
            date=options.date,
            mirror=options.mirror,
            extras=options.with_extras,
            progress=progress,
            room=partial(_dump_room, settings),
        )
        filled = {
            "pageviews": options.pageviews or got.pageviews,
            "page_props": options.page_props or got.page_props,
        }
        record = {
            "input": True,
            "date": got.date,
            "options": {
                "language": language,
                "mirror": got.site,
                "with_extras": options.with_extras,
            },
            "filled": [k for k, v in filled.items() if v and not getattr(options, k)],
        }
        completed = replace(
            options, pageviews=filled["pageviews"], page_props=filled["page_props"], fetched=record
        )
        return Fetched([got.dump], completed)

    def options_from_record(self, recorded: dict[str, Any]) -> WikiOptions:
        options = super().options_from_record(recorded)
        options.allow_truncated = bool(recorded.get("truncated") or options.allow_truncated)
        return options

    def attribution(self, info: SourceInfo) -> Attribution:
        given = info.input
        wiki = given.get("dbname") or info.name
        language = (given.get("language") or info.language or "").strip()
        date = given.get("dump_date")
        dated = f", dump {date[:4]}-{date[4:6]}-{date[6:]}" if date and len(date) == 8 else ""
        return Attribution(
            f"Wikipedia contributors ({wiki}{dated})",
            "CC BY-SA 4.0",
            f"https://{language or 'www'}.wikipedia.org/",
        )


SOURCE_KIND = WikipediaKind()
