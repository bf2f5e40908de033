"""Source kind ``zim``: a Kiwix ZIM file (offline Wikipedia, Wikibooks, …).

Every article entry becomes a document: its title, its HTML turned into Markdown-shaped text
(ingest/htmltext.page_text — words kept apart at every block and cell, what the page hides left
out, infobox rows as ``Label: value`` lines, ``## `` headings that become breadcrumbs under the
title, the ``<h1>`` that repeats the title left out), the lead as the opening, internal links as
links, the ZIM path as url. Redirect entries become
aliases of their target, and so do redirects rendered as a copy of their target's page. Both namespace schemes are read: the old one (articles under ``A/``)
and the new one (no namespaces; articles are the HTML entries). The file's metadata (title,
language, date, creator…) goes into the source's ``input`` record; its language into
``language``.
"""

from __future__ import annotations

import contextlib
import functools
import posixpath
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from chiezo.core.config import Settings
from chiezo.core.errors import InputError
from chiezo.core.markdown import BREADCRUMB_SEPARATOR
from chiezo.core.models import Doc
from chiezo.core.progress import NullProgress, Progress
from chiezo.ingest.documents import document_from_text
from chiezo.ingest.htmltext import page_text
from chiezo.ingest.zimdirectory import cluster_order
from chiezo.ingest.zimscan import Scanned, scan
from chiezo.store import generations
from chiezo.store.build import BuildOptions, BuildReport, GenerationBuilder
from chiezo.store.kinds import ArchiveEntry, Attribution, Capabilities, NoOptions, SourceKind

if TYPE_CHECKING:
    # libzim ships .pyi files but no py.typed marker: to mypy these are Any
    from libzim.reader import Archive, Entry

    from chiezo.store.source_info import SourceInfo

KIND = "zim"
METADATA = ("Title", "Name", "Language", "Date", "Creator", "Publisher", "Description", "License")


def open_archive(path: Path):
    """The ZIM file at ``path`` opened with libzim; InputError saying why it cannot be."""
    archive, why = _opened(path)
    if archive is None:
        raise InputError(f"{path} is not a readable ZIM file: {why}", path=str(path))
    return archive


def unreadable(path: Path) -> str | None:
    """Why ``path`` is no ZIM file a source can be built from, in a few words; None when
    libzim opens it."""
    return _opened(path)[1]


def _opened(path: Path):
    """(the archive, None), or (None, why it cannot be opened)."""
    try:
        from libzim.reader import Archive
    except ImportError as exc:
        raise InputError("reading ZIM files needs the libzim package") from exc
    why = _not_a_zim_file(path)
    if why is not None:
        return None, why
    try:
        return Archive(str(path)), None
    except RuntimeError as exc:  # libzim checks the header's offsets against the file's size
        return None, f"truncated or damaged (libzim: {exc})"


# the first bytes of every ZIM file: its magic number, 72173914, little-endian
ZIM_MAGIC = (72173914).to_bytes(4, "little")


def _not_a_zim_file(path: Path) -> str | None:
    """What a look at the file system and the first bytes tells against ``path`` being a ZIM
    file: a dangling link or a directory fails in libzim with a message that names neither."""
    if path.is_symlink() and not path.exists():
        return f"a broken link (to {path.readlink()})"
    if not path.exists():
        return "no such file"
    if path.is_dir():
        return "a directory, not a file"
    if not path.is_file():
        return "not a regular file"  # a pipe or a device: never opened, it could block
    try:
        with path.open("rb") as fh:
            head = fh.read(len(ZIM_MAGIC))
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    if not head:
        return "an empty file"
    return None if head == ZIM_MAGIC else "not a ZIM file (it does not begin as one)"


def metadata(archive: Archive) -> dict[str, str]:
    out = {}
    for key in METADATA:
        if key in archive.metadata_keys:
            out[key.lower()] = bytes(archive.get_metadata(key)).decode("utf-8", "replace").strip()
    return out


def ingest_zim(
    settings: Settings,
    path: Path,
    name: str | None = None,
    *,
    options: BuildOptions | None = None,
    progress: Progress | None = None,
) -> BuildReport:
    path = Path(path)
    archive = open_archive(path)
    facts = metadata(archive)
    name = name or source_name(path, facts)
    options = options or BuildOptions()
    if not options.language and facts.get("language"):
        options = replace(options, language=facts["language"].split(",")[0][:3])
    progress = progress or NullProgress()
    builder = GenerationBuilder(
        settings,
        name,
        KIND,
        input_identity={**identity(path, archive), **facts},
        options=options,
        progress=progress,
        expected_bytes=path.stat().st_size * 6,
    )
    settings.corpus_dir.mkdir(parents=True, exist_ok=True)
    with (
        generations.scratch_dir(settings.corpus_dir, "zim-scan-") as tmp,
        scan(archive, Path(tmp) / "scan.db", progress) as scanned,
    ):
        return _read_articles(builder, path, archive, scanned)


def _read_articles(
    builder: GenerationBuilder, path: Path, archive: Archive, scanned: Scanned
) -> BuildReport:
    articles = scanned.articles
    main = _main_path(archive) if len(articles) > 1 else None
    in_clusters = cluster_order(path, archive, articles)
    with builder, _cluster_cache(CLUSTER_CACHE if in_clusters is not None else None):
        builder.start_reading(len(articles))
        for entry_id in articles if in_clusters is None else in_clusters.tolist():
            doc = _doc(archive._get_entry_by_id(entry_id), scanned)
            if doc is None:
                builder.warn(f"{archive._get_entry_by_id(entry_id).path}: no text; skipped")
                continue
            if doc.key == main:
                doc.attrs["flag"] = ["main"]  # a table of contents: never an answer's excerpt
            builder.add(doc)
        return builder.finish()


# libzim's cache of decompressed clusters while a build reads in cluster order, in libzim's
# own accounting (which counts about a quarter of the memory a cluster really holds, measured):
# reading cluster by cluster needs the one being read; 1 MiB held 2.9 MiB for 64,000 articles,
# where the default 16 MiB held 71 MiB (design.md §35.17)
CLUSTER_CACHE = 2**20


@contextlib.contextmanager
def _cluster_cache(limit: int | None):
    """libzim's cluster cache bounded to ``limit`` bytes meanwhile (it is the process's, and
    serving archive pages wants the default back); None leaves it as it is."""
    if limit is None:
        yield
        return
    from libzim.reader import get_cluster_cache_max_size, set_cluster_cache_max_size

    before = get_cluster_cache_max_size()
    set_cluster_cache_max_size(limit)
    try:
        yield
    finally:
        set_cluster_cache_max_size(before)


def source_name(path: Path, facts: dict[str, str]) -> str:
    """``zim_`` + the file's Name metadata (its file name without one)."""
    named = "".join(c if c.isalnum() else "_" for c in (facts.get("name") or path.stem))
    return "zim_" + named.strip("_").lower()


def identity(path: Path, archive: Archive) -> dict:
    """What says a source was built from this very file: where it is, its size, the UUID
    libzim gives every file it writes, and how many articles it says it holds."""
    return {
        "path": str(path.resolve()),
        "bytes": path.stat().st_size,
        "uuid": str(archive.uuid),
        "articles": archive.article_count,
        "new_namespace_scheme": archive.has_new_namespace_scheme,
    }


def library_files(inputs: list[Path]) -> list[list[Path]]:
    """Each ZIM file given, a folder given as the ``.zim`` files in it (a Kiwix library, in
    name order): one source each. Broken ones too (``ZimKind.unusable`` says why)."""
    files: list[Path] = []
    for given in inputs:
        files += sorted(given.glob("*.zim")) if given.is_dir() else [given]
    if not files:
        raise InputError(f"no .zim file in {', '.join(map(str, inputs))}")
    return [[f] for f in dict.fromkeys(files)]


def _main_path(archive: Archive) -> str | None:
    """The path of the archive's main page (its welcome page, often a redirect to one)."""
    if not archive.has_main_entry:
        return None
    entry = archive.main_entry
    return entry.get_redirect_entry().path if entry.is_redirect else entry.path


def _doc(entry: Entry, scanned: Scanned) -> Doc | None:
    markup = bytes(entry.get_item().content).decode("utf-8", "replace")
    made = article_document(entry.path, markup, entry.title)
    if made is None:
        return None
    doc, page = made
    doc.url = entry.path
    doc.aliases = sorted(set(scanned.aliases(entry.path)) - {doc.title})
    targets = _links(entry.path, page.links)
    titles = scanned.titles_of(targets)
    doc.links = [titles[p] for p in targets if p in titles]
    doc.extra = {"path": entry.path, "format": "zim"}
    return doc


def article_document(path: str, markup: str, title: str):
    """(the document, its page text) of a ZIM article's HTML — read from the file, or from a
    kiwix-serve (ingest/kiwix.py); None for a page with no text."""
    page = page_text(markup, title)
    if not page.text.strip():
        return None
    title = title or page.title or path
    doc = document_from_text(path, Path(path), page.text, {"title": title}, markdown=True)
    for chunk in doc.chunks:
        # the title leads every breadcrumb, as the <h1> the text leaves out did (and as a
        # Wikipedia article's do: Ray Charles > Early life)
        chunk.heading_path = (
            f"{title}{BREADCRUMB_SEPARATOR}{chunk.heading_path}" if chunk.heading_path else title
        )
    return doc, page


def _links(source_path: str, hrefs: list[str]) -> list[str]:
    """Internal link targets as ZIM paths (hrefs resolved against the page's own path)."""
    out = []
    base = posixpath.dirname(source_path)
    for href in hrefs:
        if "://" in href or href.startswith(("#", "mailto:", "javascript:")):
            continue
        target = unquote(href.split("#", 1)[0])
        if target:
            out.append(posixpath.normpath(posixpath.join(base, target)))
    return list(dict.fromkeys(out))


# -- the kind -------------------------------------------------------------------------------------


MAX_REDIRECTS = 16  # libzim's writer removes loops and blind chains; a ZIM made by hand may not


def _redirected(entry: Entry) -> Entry | None:
    """The entry a redirect chain ends at; None for a loop or a chain beyond MAX_REDIRECTS
    (served as "no such entry", not followed by the browser until it gives up)."""
    for _ in range(MAX_REDIRECTS):
        entry = entry.get_redirect_entry()
        if not entry.is_redirect:
            return entry
    return None


def book_line(given: dict, *more: str) -> str:
    """A book's title · language · date · article count (a ZIM's metadata, or kiwix-serve's
    catalog entry for it), then ``more``."""
    parts = [given.get("title"), given.get("language"), given.get("date")]
    if given.get("articles"):
        parts.append(f"{given['articles']:,} articles")
    return " · ".join(str(p) for p in (*parts, *more) if p)


def _stamp(path: Path) -> tuple[int, int]:
    stat = path.stat()
    return stat.st_size, stat.st_mtime_ns


@functools.lru_cache(maxsize=8)
def _reader(path: str, size: int, mtime_ns: int):
    """An open archive, kept while its file is unchanged (opening reads its directory; a page
    asks for its pictures and styles right after it). libzim's reader is thread-safe."""
    return open_archive(Path(path))


class ZimKind(SourceKind):
    name = KIND
    summary = """Build a source from a Kiwix ZIM file, or one per file of a folder of them (a
    Kiwix library; files unchanged since their source was built are skipped): every article a
    document, redirects as aliases, old and new namespace schemes."""
    argument = "FILE|DIR"
    many_inputs = True  # several files, or a folder of them (a Kiwix library): a source each
    names_itself = True  # zim_<the file's Name>
    # the body's sections are "## " headings; each article is served from the file as Kiwix
    # shows it (surfaces/web/archive_pages.py)
    capabilities = Capabilities(headed_pages=True, archive=True)

    def build(
        self,
        settings: Settings,
        inputs: list[Path],
        name: str | None,
        options: NoOptions,
        build: BuildOptions,
        progress: Progress,
    ) -> BuildReport:
        return ingest_zim(settings, inputs[0], name, options=build, progress=progress)

    def each_source(self, inputs: list[Path]) -> list[list[Path]]:
        return library_files(inputs)

    def unusable(self, inputs: list[Path]) -> str | None:
        return unreadable(inputs[0])

    def name_for(self, inputs: list[Path]) -> str | None:
        return source_name(inputs[0], metadata(open_archive(inputs[0])))

    def unchanged(self, recorded: dict, inputs: list[Path]) -> bool:
        path = inputs[0]
        if recorded.get("path") != str(path.resolve()) or not recorded.get("uuid"):
            return False
        return recorded == {**recorded, **identity(path, open_archive(path))}

    def about(self, info: SourceInfo) -> str | None:
        given = info.input
        shown = book_line(given)
        return f"{shown} ({given['description']})" if given.get("description") else shown

    def archive_entry(self, archive: Path, path: str) -> ArchiveEntry | None:
        opened = _reader(str(archive), *_stamp(archive))
        if not opened.has_entry_by_path(path):
            return None
        entry = opened.get_entry_by_path(path)
        if entry.is_redirect:  # straight to the end of the chain: one 302, not one a hop
            target = _redirected(entry)
            return None if target is None else ArchiveEntry(redirect=target.path)
        item = entry.get_item()
        return ArchiveEntry(media_type=item.mimetype, content=item.content)

    def attribution(self, info: SourceInfo) -> Attribution:
        given = info.input
        who = given.get("creator") or given.get("publisher") or given.get("title") or "ZIM file"
        described = given.get("title") if given.get("title") and given.get("title") != who else ""
        return Attribution(
            who + (f" — {described}" if described else ""), given.get("license") or None
        )


SOURCE_KIND = ZimKind()
