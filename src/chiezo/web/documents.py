"""A document page's parts: the body under its headings, and the original file behind it."""

from __future__ import annotations

import mimetypes
import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

from fastapi.responses import FileResponse

from ..errors import NotFound
from ..service import Service
from .formatting import safe_url

DOC_BODY_CHARS = 60_000  # a long article is cut here unless asked for whole (``?full=1``)


def sections_of(chunks: list[dict], limit: int | None) -> tuple[list[dict], int, int]:
    """Chunks grouped under their headings, cut after ``limit`` characters."""
    total = sum(len(c["text"]) for c in chunks)
    sections: list[dict] = []
    shown = 0
    for chunk in chunks:
        if limit is not None and shown >= limit:
            break
        heading = chunk.get("heading_path") or ""
        if not sections or sections[-1]["heading"] != heading:
            sections.append({"heading": heading, "paragraphs": []})
        text = chunk["text"]
        shown += len(text)
        sections[-1]["paragraphs"].extend(p for p in re.split(r"\n\s*\n", text) if p.strip())
    return sections, min(shown, total), total


def original_path(service: Service, source: str, doc_id: int) -> Path:
    """The file behind a document of a documents source, checked to lie inside the folder the
    source was built from (its url is build output, but a page must never serve other files)."""
    doc = service.doc(source, doc_id=doc_id, fields=["url"])
    info = service.library.get(source).info()
    url = doc.get("url") or ""
    root = (info.get("input") or {}).get("path")
    if info.get("kind") != "docs" or not url.startswith("file://") or not root:
        raise NotFound(f"{source} document {doc_id} has no original file to show")
    path = Path(unquote(urlsplit(url).path)).resolve()
    if not path.is_relative_to(Path(root).resolve()) or not path.is_file():
        raise NotFound(f"the original file of {source} document {doc_id} is not there any more",
                       hint="rebuild the source if its folder changed")  # fmt: skip
    return path


def original_href(doc: dict) -> str | None:
    """Where the page's "Original" link goes: the served file (keeping ``#page=N``) for a
    local file, the document's own url otherwise (when it is safe to link)."""
    url = doc.get("url") or ""
    if url.startswith("file://"):
        fragment = urlsplit(url).fragment
        return f"/doc/{doc['source']}/{doc['doc_id']}/original" + (
            f"#{fragment}" if fragment.startswith("page=") else ""
        )
    return safe_url(url)


# An indexed file is the user's, not Chiezo's: served on Chiezo's origin, an HTML, SVG or XML
# file's scripts would run with the right to call the API (issue #14: an indexed page's
# fetch('/v1/notes', {method: 'POST'}) succeeded). So every original is sandboxed — a unique
# origin, no scripts, nothing fetched from anywhere (inline styles and data: images only, so a
# page still reads as a page) — and never sniffed into something more dangerous than it says.
# PDFs are the exception: Chromium does not render a PDF in a sandboxed document at all, and
# its viewer runs a PDF's scripts outside the page's origin.
SANDBOX = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'"
SHOWN_AS_TEXT = {".md", ".markdown", ".txt", ".text", ".csv", ".tsv", ".rst", ".json", ".yaml",
                 ".yml"}  # fmt: skip
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
    return FileResponse(path, media_type=media_type, headers=headers,
                        content_disposition_type="inline" if inline else "attachment")  # fmt: skip


def _is_utf8(path: Path, sample: int = 1 << 20) -> bool:
    """Whether the file reads as UTF-8 (else the browser picks the encoding: Shift_JIS text)."""
    with path.open("rb") as handle:
        head = handle.read(sample)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return len(head) == sample and exc.start > sample - 4  # cut by the sample's end
    return True
