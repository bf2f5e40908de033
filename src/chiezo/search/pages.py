"""A PDF hit's url points at its page: ``file:///…/manual.pdf#page=12``.

Hits are per document, but a PDF's chunks are its pages (breadcrumb ``p. N``, see
sources/formats.py), so the page is the first one whose text holds a searched word — or, for a
hit found by meaning, the page of the chunk that matched. Viewers (browsers, Acrobat, Preview)
open ``#page=N`` at that page."""

from __future__ import annotations

import re

from .. import db

_PAGE = re.compile(r"(?:^|> )p\. (\d+)$")


def is_pdf_url(url: str | None) -> bool:
    return bool(url) and url.lower().split("#", 1)[0].endswith(".pdf")


def page_of_heading(heading_path: str) -> int | None:
    found = _PAGE.search(heading_path or "")
    return int(found.group(1)) if found else None


def with_page(url: str, page: int | None) -> str:
    return f"{url.split('#', 1)[0]}#page={page}" if page else url


def page_for_words(conn: db.Connection, doc_id: int, needles: list[str]) -> int | None:
    """The first page of the document holding any of ``needles`` (case-insensitive)."""
    wanted = [n.lower() for n in needles if n.strip()]
    if not wanted:
        return None
    for heading, text in conn.execute(
        "SELECT heading_path, text FROM chunks WHERE doc_id = ? ORDER BY ord", (doc_id,)
    ):
        lowered = text.lower()
        if any(n in lowered for n in wanted):
            return page_of_heading(heading)
    return None
