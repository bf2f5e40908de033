"""The streams of a multistream dump, read where they are rendered.

Wikimedia's ``…-pages-articles-multistream.xml.bz2`` is a chain of independent bz2 streams of
100 pages each (the first holds the ``<siteinfo>``), and ``…-multistream-index.txt.bz2`` beside
it lists ``offset:page_id:title`` for every page. With the index, a worker can read, decompress
and parse its own byte range and render the pages in it (``read_and_render``), so the one
builder need not decompress and parse the whole XML: it only records the redirects and
stores the documents that come back (ingest/wikipedia.py, used by ``--ray``).
"""

from __future__ import annotations

import bz2
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from chiezo.core.errors import InputError
from chiezo.ingest.wikidump import Page
from chiezo.ingest.wikirender import render_batch

INDEX_SUFFIX = "-index.txt.bz2"
# A stream holds 100 pages: about 1 MiB compressed, a few MiB of XML. The index is input like the
# dump: a range or its text far beyond that is refused, not read into a worker's memory.
MAX_RANGE_BYTES = 64 * 2**20
MAX_XML_BYTES = 1 * 2**30


def index_beside(dump: Path) -> Path | None:
    """``x-multistream-index.txt.bz2`` for ``x-multistream.xml.bz2``, when it is there."""
    name = dump.name
    if not name.endswith("-multistream.xml.bz2"):
        return None
    index = dump.with_name(name.removesuffix(".xml.bz2") + INDEX_SUFFIX)
    return index if index.is_file() else None


def stream_ranges(dump: Path, index: Path) -> list[tuple[int, int]]:
    """(start, end) byte ranges of the streams that hold pages, in file order; the last one
    runs to the end of the file (it closes ``</mediawiki>``)."""
    offsets: list[int] = []
    try:
        with bz2.open(index, "rt", encoding="utf-8") as lines:
            for number, line in enumerate(lines, 1):
                head, sep, _ = line.partition(":")
                if not sep or not head.isdigit():
                    raise InputError(f"{index.name} line {number} is not offset:page_id:title")
                offset = int(head)
                if not offsets or offset != offsets[-1]:
                    if offsets and offset < offsets[-1]:
                        raise InputError(f"{index.name} line {number}: offsets go backwards")
                    offsets.append(offset)
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the multistream index {index.name}: {exc}") from exc
    size = dump.stat().st_size
    if not offsets or offsets[-1] >= size:
        raise InputError(
            f"{index.name} does not match {dump.name} (offsets beyond its {size:,} bytes)",
            hint="download the dump and its index again",
        )
    ranges = list(zip(offsets, [*offsets[1:], size], strict=True))
    widest = max(end - start for start, end in ranges)
    if widest > MAX_RANGE_BYTES:
        raise InputError(
            f"{index.name} lists a stream of {widest:,} bytes (at most "
            f"{MAX_RANGE_BYTES:,} are read at once)",
            hint="is it the index of this dump? remove it to build without",
        )
    return ranges


def read_pages(dump: Path, start: int, end: int) -> list[Page]:
    """The pages of the streams in bytes ``start``–``end`` of the dump."""
    try:
        with open(dump, "rb") as raw:
            raw.seek(start)
            compressed = raw.read(end - start)
    except OSError as exc:
        import socket

        raise InputError(
            f"{socket.gethostname()} cannot read the dump at {dump}: {exc}",
            hint="with its multistream index beside it, the cluster's workers read "
            "the dump themselves: put it at the same path on every node",
        ) from exc
    try:
        xml = _decompressed(compressed)
        # a stream of pages has no root of its own; the last one closes the dump's
        root = ET.fromstring(b"<pages>" + xml.replace(b"</mediawiki>", b"") + b"</pages>")
    except (OSError, ValueError, ET.ParseError) as exc:
        raise InputError(
            f"{dump.name}: the streams at bytes {start:,}–{end:,} are broken: {exc}",
            hint="download the dump again",
        ) from exc
    return [_page(element) for element in root.iter("page")]


def _decompressed(data: bytes) -> bytes:
    """Every bz2 stream in ``data``, at most ``MAX_XML_BYTES`` of text (a bomb is refused)."""
    out, size = [], 0
    while data:
        stream = bz2.BZ2Decompressor()
        part = stream.decompress(data, MAX_XML_BYTES - size + 1)
        size += len(part)
        if size > MAX_XML_BYTES or not stream.needs_input and not stream.eof:
            raise ValueError(f"more than {MAX_XML_BYTES:,} bytes of XML in one range")
        if not stream.eof:
            raise ValueError("a stream ends early")
        out.append(part)
        data = stream.unused_data
    return b"".join(out)


def _page(element: ET.Element) -> Page:
    redirect = element.find("redirect")
    return Page(
        page_id=int(element.findtext("id") or 0),
        title=element.findtext("title") or "",
        ns=int(element.findtext("ns") or 0),
        text=element.findtext("revision/text") or "",
        redirect=redirect.get("title") if redirect is not None else None,
        timestamp=element.findtext("revision/timestamp"),
    )


def read_and_render(dump: str, start: int, end: int) -> dict[str, Any]:
    """In a worker set up by ``wikirender.init_worker``: the streams' redirects of the article
    namespace as (title, target), and their articles as ((page_id, title, text, timestamp),
    rendered) in dump order — the text kept only where rendering failed (the builder then
    stores it raw), so what travels back is what the builder stores."""
    pages = read_pages(Path(dump), start, end)
    articles = [
        (p.page_id, p.title, p.text, p.timestamp) for p in pages if p.ns == 0 and p.redirect is None
    ]
    rendered = render_batch(articles)
    return {
        "redirects": [(p.title, p.redirect) for p in pages if p.ns == 0 and p.redirect is not None],
        "articles": [
            ((i, t, text if r is None else "", ts), r)
            for (i, t, text, ts), r in zip(articles, rendered, strict=True)
        ],
    }


def write_multistream(source: Path, folder: Path, per_stream: int = 100) -> Path:
    """A dump (any compression ``open_dump`` reads) rewritten the way Wikimedia publishes
    multistream dumps — the header stream, streams of ``per_stream`` pages, a last stream
    closing the root — with its index beside it; returns the new dump's path. Used by the
    tests and bench/cluster_scale.py (no command calls it: Wikimedia publishes the pair).
    Holds the whole decompressed XML in memory: meant for excerpts, not a whole wiki."""
    import re

    from chiezo.ingest.wikidump import open_dump

    stream, raw = open_dump(source)
    try:
        xml = stream.read()
    finally:
        stream.close()
        raw.close()
    first = xml.index(b"<page>")
    first = xml.rindex(b"\n", 0, first) + 1
    pages = re.findall(rb"[ \t]*<page>.*?</page>\n?", xml[first:], flags=re.S)
    stem = re.sub(r"(-multistream)?\.xml(\.\w+)?$", "", source.name)
    dump = folder / f"{stem}-multistream.xml.bz2"
    lines = []
    with open(dump, "wb") as out:
        out.write(bz2.compress(xml[:first]))
        for at in range(0, len(pages), per_stream):
            offset = out.tell()
            for page in pages[at : at + per_stream]:
                element = ET.fromstring(page)
                lines.append(f"{offset}:{element.findtext('id')}:{element.findtext('title')}\n")
            out.write(bz2.compress(b"".join(pages[at : at + per_stream])))
        out.write(bz2.compress(b"</mediawiki>\n"))
    index = dump.with_name(dump.name.removesuffix(".xml.bz2") + INDEX_SUFFIX)
    index.write_bytes(bz2.compress("".join(lines).encode("utf-8")))
    return dump
