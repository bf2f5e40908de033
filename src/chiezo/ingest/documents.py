"""Source kind ``docs``: a folder of documents — Markdown and plain text, and PDF, Word, Excel,
PowerPoint, HTML and CSV/TSV through ingest/formats.py (one file = one document; one sheet of
a workbook = one document). Each records its path, format, size, modified time and content
hash; its url is the file's ``file://`` URL.

A file that cannot be used (unreadable, binary, not decodable) is named in a warning and
skipped; ``strict=True`` turns any such warning into a failed build. YAML front matter gives the
title, aliases, tags and rank, and every other field becomes an attribute.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import os
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import yaml

from chiezo.core.errors import BadQuery, BuildError, InputError
from chiezo.core.markdown import (
    TARGET_CHARS,
    Section,
    chunk_sections,
    document_title,
    markdown_links,
    opening_paragraph,
    parse_sections,
)
from chiezo.core.models import Chunk, Doc
from chiezo.ingest.formats import SUFFIXES as FORMAT_SUFFIXES
from chiezo.ingest.formats import convert
from chiezo.ingest.textdecode import Unreadable, read_text
from chiezo.store.kinds import (
    Attribution,
    Capabilities,
    SourceKind,
    option_field,
    recorded_options,
)

if TYPE_CHECKING:
    from chiezo.core.config import Settings
    from chiezo.core.progress import Progress
    from chiezo.store.build import BuildOptions, BuildReport
    from chiezo.store.source_info import SourceInfo

KIND = "docs"
MARKDOWN_SUFFIXES = {".md", ".markdown", ".mdown", ".mkd", ".mdx"}
TEXT_SUFFIXES = {".txt", ".text"}
SUFFIXES = MARKDOWN_SUFFIXES | TEXT_SUFFIXES | FORMAT_SUFFIXES
MAX_CONVERTED_BYTES = 200 * 2**20  # PDFs and workbooks are bigger than text for the same words

_FRONT_MATTER = re.compile(r"\A---[ \t]*\r?\n(.*?)\r?\n(?:---|\.\.\.)[ \t]*(?:\r?\n|\Z)", re.S)
_TAG_KEYS = ("tags", "categories", "category", "keywords")
_RESERVED_KEYS = {"title", "aliases", "alias", "rank_score", "rank", "url", *_TAG_KEYS}


@dataclass
class DocumentFolder:
    """Streams the documents of a folder (or of a single file)."""

    root: Path
    strict: bool = False
    on_warning: Callable[[str], None] | None = None
    on_file_read: Callable[[], None] | None = None  # after each file (see docs())
    warnings: list[str] = field(default_factory=list)
    cache: Any = None  # a ConversionCache (ingest/conversions.py), or None
    chunk_chars: int = TARGET_CHARS  # the passage size aimed at (core/markdown.py)

    def __post_init__(self) -> None:
        self.root = Path(self.root).expanduser()
        if not self.root.exists():
            raise InputError(f"no such folder: {self.root}")
        if not (self.root.is_dir() or self.root.is_file()):
            raise InputError(f"not a folder or a file: {self.root}")
        self.files = self._scan()

    def _scan(self) -> list[Path]:
        if self.root.is_file():
            return [self.root]
        found = []
        root = self.root.resolve()
        for directory, dirnames, filenames in os.walk(self.root, onerror=self._walk_error):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
            for name in dirnames:  # os.walk does not follow links: say so when one leads out
                self._outside(Path(directory) / name, root)
            for filename in sorted(filenames):
                path = Path(directory) / filename
                if filename.startswith(".") or path.suffix.lower() not in SUFFIXES:
                    continue
                if not self._outside(path, root):
                    found.append(path)
        return found

    def _outside(self, path: Path, root: Path) -> bool:
        """A symbolic link leading out of the folder is not indexed (said in the report): the
        folder is what the user chose to share, and a link to /etc/passwd is not part of it."""
        if not path.is_symlink():
            return False
        target = path.resolve()
        if target.is_relative_to(root):
            return False
        self._warn(f"{path}: a link to {target}, outside the folder; not indexed")
        return True

    def _walk_error(self, exc: OSError) -> None:
        self._warn(f"{exc.filename}: cannot list folder ({exc.strerror})")

    @functools.cached_property
    def _stats(self) -> list[os.stat_result]:
        stats = []
        for path in self.files:
            with contextlib.suppress(OSError):  # reported when the file is read
                stats.append(path.stat())
        return stats

    @property
    def total_bytes(self) -> int:
        return sum(st.st_size for st in self._stats)

    def identity(self) -> dict[str, Any]:
        newest = max((st.st_mtime for st in self._stats), default=0.0)
        return {
            "path": str(self.root.resolve()),
            "files": len(self.files),
            "bytes": self.total_bytes,
            "newest_mtime": dt.datetime.fromtimestamp(newest, dt.UTC).isoformat()
            if newest
            else None,
        }

    def _warn(self, message: str) -> None:
        if self.strict:
            raise BuildError(message, hint="fix or remove the file, or build without --strict")
        self.warnings.append(message)
        if self.on_warning is not None:
            self.on_warning(message)

    def docs(self) -> Iterator[Doc]:
        """Yield one Doc per usable file (per sheet of a workbook); each skipped file is
        reported through ``_warn`` with the reason. ``on_file_read()`` follows each file, its
        documents taken or it skipped: progress counts files against ``len(files)``, as a
        count of documents would pass it (a workbook of three sheets is three documents)."""
        for path in self.files:
            yield from self._file_docs(path)
            if self.on_file_read is not None:
                self.on_file_read()

    def _file_docs(self, path: Path) -> Iterator[Doc]:
        key = self._key(path)
        if path.suffix.lower() in FORMAT_SUFFIXES:
            yield from self._converted(path, key)
            return
        try:
            text = read_text(path)
        except Unreadable as exc:
            self._warn(f"{path}: {exc}; skipped")
            return
        (front, body), front_problem = split_front_matter(text)
        if front_problem:
            self._warn(f"{path}: {front_problem}; front matter read as text")
        doc = document_from_text(key, path, body, front, chunk_chars=self.chunk_chars)
        yield _with_file_facts(doc, path)

    def _converted(self, path: Path, key: str) -> Iterator[Doc]:
        import hashlib

        try:
            if path.stat().st_size > MAX_CONVERTED_BYTES:
                raise Unreadable(f"larger than {MAX_CONVERTED_BYTES // 2**20} MiB")
            digest = hashlib.sha1(path.read_bytes()).hexdigest()
            parts = self.cache.get(digest) if self.cache is not None else None
            if parts is None:
                parts = convert(path)
                if self.cache is not None:
                    self.cache.put(digest, parts)
        except (Unreadable, OSError) as exc:
            self._warn(f"{path}: {exc}; skipped")
            return
        for part in parts:
            for warning in part.warnings:  # the file is indexed; the user should still know
                self._warn(f"{path}: {warning}")
            front = {"title": part.title} if part.title else {}
            doc = document_from_text(
                key + part.key_suffix,
                path,
                part.text,
                front,
                markdown=True,
                merge=not part.one_chunk_per_section,
                chunk_chars=self.chunk_chars,
            )
            doc.extra.update(part.extra, format=path.suffix.lower().lstrip("."))
            yield _with_file_facts(doc, path, digest)

    def _key(self, path: Path) -> str:
        if self.root.is_file():
            return path.name
        return path.relative_to(self.root).as_posix()


def split_front_matter(text: str) -> tuple[tuple[dict[str, Any], str], str | None]:
    """((fields, body), problem). Without front matter: ({}, text). Invalid YAML: a problem."""
    match = _FRONT_MATTER.match(text)
    if not match:
        return ({}, text), None
    try:
        fields = yaml.safe_load(match.group(1))
    except yaml.YAMLError as exc:
        reason = str(exc).splitlines()[0]
        return ({}, text), f"invalid YAML front matter ({reason})"
    if fields is None:
        fields = {}
    if not isinstance(fields, dict):
        return ({}, text), "front matter is not a mapping of fields"
    return (fields, text[match.end() :]), None


def _with_file_facts(doc: Doc, path: Path, digest: str | None = None) -> Doc:
    """Path, size, modified time, content hash (``digest`` when the caller already hashed the
    bytes) and a ``file://`` url, with the key's ``#Sheet`` part (``#page=N`` for a PDF is added
    per hit, search/pdf_pages.py)."""
    import hashlib

    with contextlib.suppress(OSError):
        stat = path.stat()
        doc.extra.update(
            size=stat.st_size,
            modified=dt.datetime.fromtimestamp(stat.st_mtime, dt.UTC).isoformat(),
            sha1=digest or hashlib.sha1(path.read_bytes()).hexdigest(),
        )
    if not doc.url:
        _, mark, part = doc.key.partition("#")
        doc.url = path.resolve().as_uri() + mark + part
    return doc


def document_from_text(
    key: str,
    path: Path,
    body: str,
    front: dict[str, Any],
    *,
    markdown: bool | None = None,
    merge: bool = True,
    chunk_chars: int = TARGET_CHARS,
) -> Doc:
    is_markdown = path.suffix.lower() in MARKDOWN_SUFFIXES if markdown is None else markdown
    sections = parse_sections(body) if is_markdown else _text_sections(body)
    title = _scalar(front.get("title")) or (document_title(sections) if is_markdown else None)
    title = title or _title_from_filename(path)
    chunks = chunk_sections(sections, chunk_chars, 2 * chunk_chars, merge=merge)
    if not chunks and body.strip():
        chunks = [Chunk(text=body.strip()[: 2 * chunk_chars])]
    return Doc(
        key=key,
        title=title,
        body=body.strip(),
        opening=opening_paragraph(
            sections, soft_wraps=path.suffix.lower() in MARKDOWN_SUFFIXES and is_markdown
        ),
        url=_web_url(front.get("url")),
        rank_score=_rank(front),
        aliases=_strings(front.get("aliases", front.get("alias"))),
        tags=[t for k in _TAG_KEYS for t in _strings(front.get(k), split_commas=True)],
        links=_local_links(key, markdown_links(body)) if is_markdown else [],
        attrs=_attributes(front),
        chunks=chunks,
        extra={"path": key, "format": "markdown" if is_markdown else "text"},
    )


def _web_url(value: Any) -> str | None:
    """A front-matter ``url`` is the document's address on the web, nothing else: a
    ``file://`` (or any other) url there would name a file the server might read;
    such a document keeps the url of its own file."""
    url = _scalar(value)
    if not url or urlsplit(url.strip()).scheme.lower() not in ("http", "https"):
        return None
    return url.strip()


def _text_sections(body: str) -> list[Section]:
    return [Section(0, (), body.splitlines())] if body.strip() else []


def _title_from_filename(path: Path) -> str:
    stem = unicodedata.normalize("NFC", path.stem)
    return stem.replace("_", " ").replace("-", " ").strip() or path.name


def _scalar(value: Any) -> str | None:
    if value is None or isinstance(value, dict | list):
        return None
    text = str(value).strip()
    return text or None


def _strings(value: Any, split_commas: bool = False) -> list[str]:
    if value is None:
        return []
    if isinstance(value, list):
        return [s for v in value if (s := _scalar(v))]
    text = _scalar(value)
    if not text:
        return []
    return [p.strip() for p in text.split(",") if p.strip()] if split_commas else [text]


def _rank(front: dict[str, Any]) -> float:
    for name in ("rank_score", "rank"):
        value = front.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return min(max(float(value), 0.0), 1.0)
    return 0.0


def _attributes(front: dict[str, Any]) -> dict[str, list[str]]:
    attrs: dict[str, list[str]] = {}
    for name, value in front.items():
        if name in _RESERVED_KEYS or not isinstance(name, str):
            continue
        values = value if isinstance(value, list) else [value]
        strings = [_attr_value(v) for v in values if not isinstance(v, dict | list)]
        strings = [s for s in strings if s]
        if strings:
            attrs[name] = strings
    return attrs


def _attr_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dt.date | dt.datetime):
        return value.isoformat()
    return str(value).strip()


def _local_links(key: str, targets: list[str]) -> list[str]:
    """Links to other files of the folder become their keys (``guide/intro.md``); links to the
    web stay as they are; in-page anchors are dropped."""
    out = []
    base = PurePosixPath(key).parent
    for target in targets:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            out.append(target)
            continue
        path = unquote(target.split("#", 1)[0])
        if not path:
            continue
        parts: list[str] = []
        for part in (base / path).parts:
            if part == "..":
                if parts:
                    parts.pop()
            elif part not in (".", ""):
                parts.append(part)
        if parts:
            out.append("/".join(parts))
    return out


# -- the kind -------------------------------------------------------------------------------------


@dataclass
class DocsOptions:
    strict: bool = option_field(False, help="Fail the build on any unusable file.", recorded=False)
    chunk_chars: int = option_field(
        TARGET_CHARS,
        low=100,
        high=5000,
        help="Target passage size in characters (a section longer than twice that is cut) for "
        "snippets, excerpts and vectors; recorded, so a rebuild cuts the same way.",
    )


class DocumentsKind(SourceKind):
    name = KIND
    summary = """Build source NAME from a folder of documents — Markdown, text, PDF, Word, Excel,
    PowerPoint, HTML, CSV (one file = one document, chunked along its structure). A rebuild
    converts only changed files; --watch keeps rebuilding as files change."""
    Options = DocsOptions
    build_flags = ("allow_shrink", "min_docs", "language")
    capabilities = Capabilities(originals=True, watchable=True)

    def build(
        self,
        settings: Settings,
        inputs: list[Path],
        name: str | None,
        options: DocsOptions,
        build: BuildOptions,
        progress: Progress,
    ) -> BuildReport:
        if name is None:  # a folder's or a file's source takes no name of its own
            raise BadQuery(f"name the {KIND} source (--name)")
        from chiezo.ingest.conversions import ConversionCache
        from chiezo.store.build import GenerationBuilder

        folder = DocumentFolder(inputs[0], strict=options.strict, chunk_chars=options.chunk_chars)
        builder = GenerationBuilder(
            settings,
            name,
            KIND,
            # the options a rebuild must cut the same way with (chunk_chars)
            input_identity={**folder.identity(), "options": recorded_options(options)},
            options=build,
            progress=progress,
            expected_bytes=folder.total_bytes,
        )
        folder.cache = ConversionCache(settings.data_dir / "cache")
        try:
            with builder:
                for message in folder.warnings:  # said while scanning (links leading out...)
                    builder.warn(message)
                folder.on_warning = builder.warn
                folder.on_file_read = builder.advance
                builder.start_reading(len(folder.files), "files")
                for doc in folder.docs():
                    builder.add(doc)
                report = builder.finish()
        finally:
            folder.cache.close()
        report.conversions = {"converted": folder.cache.misses, "reused": folder.cache.hits}
        return report

    def options_from_record(self, recorded: dict[str, Any]) -> Any:
        # strict is the builder's choice of the day, not how the source is cut: not recorded
        return super().options_from_record(recorded)

    def attribution(self, info: SourceInfo) -> Attribution:
        path = info.input.get("path")
        return Attribution(f"your documents ({path})" if path else "your documents")


SOURCE_KIND = DocumentsKind()
