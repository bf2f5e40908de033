"""A document page's parts: the body under its headings, and the original file behind it."""

from __future__ import annotations

import mimetypes
import re
from pathlib import Path

from fastapi.responses import FileResponse

from chiezo.core.errors import NotFound
from chiezo.core.markdown import parse_sections
from chiezo.ops import links, reading
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest
from chiezo.store.library import Source
from chiezo.surfaces.web.markdown_view import render_markdown

DOC_BODY_CHARS = 60_000  # a long article is cut here unless asked for whole (``?full=1``)


def headed_pages(source: Source) -> bool:
    """Whether the source's bodies mark their headings (its kind's capability)."""
    return bool(source.kind and source.kind.capabilities.headed_pages)


def body_parts(doc: dict, headed: bool) -> dict:
    """What the page shows of a document's stored body: the opening box, then the rest —
    rendered Markdown, or sections of paragraphs under the body's own headings.

    The page reads the body, not the chunks: the chunks were cut from the same text with the
    last lines of a long passage repeated at the start of the next (core/markdown.py,
    ``split_long``), and a place's chunk is a shorter passage made for vectors — assembled
    again, they would show a paragraph twice. The body is stored once, as written.

    A file converted to text (ingest/formats.py: PDF, Office, HTML, CSV) or a ZIM page marks
    its structure with Markdown headings — a PDF page is ``## p. 12``, a slide
    ``## Slide 3: …``, a block of rows ``## rows 2–51`` — and is read as headed whatever its
    kind says (else ``## p. 1`` would show as text). A plain-text file's ``#`` is
    its own text, as is one in the body of a kind that records no format (a place's)."""
    body = doc.get("body") or ""
    parts = {
        "opening": [],
        "sections": [],
        "body_html": None,
        "shown_chars": len(body),
        "total_chars": doc.get("body_chars", len(body)),
    }
    written = (doc.get("extra") or {}).get("format")
    if written == "markdown":
        # the file is shown as written: its first paragraph stands where it is, not above it
        parts["body_html"] = render_markdown(body, doc["source"], doc["key"])
        return parts
    opening, rest = split_opening(body, doc.get("opening") or "")
    parts["opening"] = paragraphs(opening)
    parts["sections"] = body_sections(
        rest, headed=headed or written not in (None, "text"), title=doc.get("title") or ""
    )
    return parts


def split_opening(body: str, opening: str) -> tuple[str, str]:
    """(the opening as the box shows it, the body after it), so that it is shown once. The
    body goes on after the opening where it starts with it and the opening ends at a line's
    end; an opening cut short (a long lead is kept to 3,000 characters; a document's first
    paragraph to 400 with ``…``) leaves the box out and the body whole, and so does one the
    body holds further on (a document's first paragraph under its first headings: a PDF's
    ``## p. 1``, a Word file's title; a sheet's first row), however the two break their
    lines; an opening the body does not hold is shown above it."""
    stem = opening.removesuffix("…")
    words = stem.split()
    if not words:
        return "", body
    # the opening's words in order, however the body spaced and broke them
    match = re.match(r"\s*" + r"\s+".join(map(re.escape, words)), body)
    if match is None:
        return ("", body) if "".join(words) in "".join(body.split()) else (opening, body)
    rest = body[match.end() :]
    if stem != opening or not (rest == "" or rest[0] in "\r\n"):
        return "", body
    return opening, rest


def body_sections(text: str, headed: bool, title: str = "") -> list[dict]:
    """``text`` as sections of paragraphs. ``headed``: the text marks its headings as Markdown
    does (a Wikipedia article's ``## 歴史`` lines, ingest/wikitext.py; a PDF's ``## p. 1``),
    read by the same parser the chunks were cut with, so that a heading is shown as a heading
    of its level (the page title is the h1: a level-1 heading shows as h2), never as ``##``
    text. A first heading that is the page's ``title`` (a Word file's Title, a ZIM page's
    ``# Ray Charles``) is not shown again under it."""
    if not headed:
        return [{"heading": "", "level": 0, "paragraphs": paragraphs(text)}] if text.strip() else []
    sections = []
    parsed = parse_sections(text)
    first = next((s for s in parsed if s.level), None)
    for section in parsed:
        lines = section.lines[1:] if section.level else section.lines
        heading = section.path[-1] if section.level else ""
        if section is first and " ".join(heading.split()) == " ".join(title.split()):
            heading = ""
        if heading or paragraphs("\n".join(lines)):
            sections.append(
                {
                    "heading": heading,
                    "level": min(max(section.level, 2), 6) if heading else 0,
                    "paragraphs": paragraphs("\n".join(lines)),
                }
            )
    return sections


def paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def original_path(service: Context, source: str, doc_id: int) -> Path:
    """The file behind a document of a source whose kind serves originals: the document's key
    (its path inside the folder it was built from) under the input recorded *here* — a local
    build's folder, or the one the user named importing the source (``chiezo import --input``;
    none: nothing is served). Never the document's url: front matter sets that, and an
    imported archive sets both url and recorded folder (``url: file:///etc/passwd`` with the
    folder rewritten to ``/`` would serve the password file). The path must resolve to a
    file inside that folder (a link out of it is not followed)."""
    doc = reading.doc(service, DocRequest.of(source=source, doc_id=doc_id, fields=["key"]))
    opened = service.library.get(source)
    root = opened.info().input.get("path")
    offers = bool(opened.kind and opened.kind.capabilities.originals)
    if not offers or not root:
        raise NotFound(
            f"{source} document {doc_id} has no original file to show",
            hint=None if offers else "its source keeps no original files",
        )
    path = _inside(Path(root), (doc.get("key") or "").partition("#")[0])
    if path is None:
        raise NotFound(
            f"the original file of {source} document {doc_id} is not there any more",
            hint="rebuild the source if its folder changed",
        )
    return path


def _inside(root: Path, key: str) -> Path | None:
    """``key`` (a path relative to ``root``, or the file's name when ``root`` is the file a
    source was built from) as an existing file inside ``root``; None otherwise."""
    root = root.resolve()
    if root.is_file():
        return root if key == root.name else None
    if not key or key.startswith("/") or "\0" in key:
        return None
    path = (root / key).resolve()
    return path if path.is_relative_to(root) and path.is_file() else None


def original_href(doc: dict, *, archived: bool = False) -> str | None:
    """Where the page's "Original" link goes (ops/links.py ``original_href``): from what the
    source stores (``source_url``; ``url`` in a dict made without links)."""
    stored = doc["source_url"] if "source_url" in doc else doc.get("url")
    return links.original_href(doc["source"], doc["doc_id"], stored, archived)


# An indexed file is the user's, not Chiezo's: served on Chiezo's origin, an HTML, SVG or XML
# file's scripts would run with the right to call the API (an indexed page's
# fetch('/v1/notes', {method: 'POST'}) would succeed). So every original is sandboxed — a unique
# origin, no scripts, nothing fetched from anywhere (inline styles and data: images only, so a
# page still reads as a page) — and never sniffed into something more dangerous than it says.
# PDFs are the exception: Chromium does not render a PDF in a sandboxed document at all, and
# its viewer runs a PDF's scripts outside the page's origin.
SANDBOX = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'"
SHOWN_AS_TEXT = {
    ".md",
    ".markdown",
    ".txt",
    ".text",
    ".csv",
    ".tsv",
    ".rst",
    ".json",
    ".yaml",
    ".yml",
}
SHOWN_INLINE = ("application/pdf", "text/html", "application/xhtml+xml", "image/")


def original_response(path: Path) -> FileResponse:
    """The original file as a browser may safely open it: PDFs, pages and pictures inline,
    text as plain text, everything else (Office files, archives) as a download."""
    media_type = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    if path.suffix.lower() in SHOWN_AS_TEXT:
        media_type = "text/plain; charset=utf-8" if _is_utf8(path) else "text/plain"
    inline = media_type.startswith(SHOWN_INLINE) or media_type.startswith("text/plain")
    headers = {"X-Content-Type-Options": "nosniff"}
    if media_type != "application/pdf":
        headers["Content-Security-Policy"] = SANDBOX
    return FileResponse(
        path,
        media_type=media_type,
        headers=headers,
        content_disposition_type="inline" if inline else "attachment",
    )


def _is_utf8(path: Path, sample: int = 1 << 20) -> bool:
    """Whether the file reads as UTF-8 (else the browser picks the encoding: Shift_JIS text)."""
    with path.open("rb") as handle:
        head = handle.read(sample)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return len(head) == sample and exc.start > sample - 4  # cut by the sample's end
    return True
