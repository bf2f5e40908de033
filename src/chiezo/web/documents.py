"""A document page's parts: the body under its headings, and the original file behind it."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

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
