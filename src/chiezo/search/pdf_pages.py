"""A PDF hit's url points at its page: ``file:///…/manual.pdf#page=12``.

Hits are per document, but a PDF's chunks are its pages (breadcrumb ``p. N``, see
ingest/formats.py), so the page is the one whose text holds the most searched words — or, for a
hit found by meaning, the page of the chunk that matched. The snippet quotes that page and the
hit's section names it (``p. 12``). Viewers (browsers, Acrobat, Preview)
open ``#page=N`` at that page."""

from __future__ import annotations

import re
from typing import TypeGuard

from chiezo.core import db
from chiezo.store import chunk_text

_PAGE = re.compile(r"(?:^|> )p\. (\d+)$")


def is_pdf_url(url: str | None) -> TypeGuard[str]:
    return bool(url and url.lower().split("#", 1)[0].endswith(".pdf"))


def page_of_heading(heading_path: str) -> int | None:
    found = _PAGE.search(heading_path or "")
    return int(found.group(1)) if found else None


def with_page(url: str, page: int | None) -> str:
    return f"{url.split('#', 1)[0]}#page={page}" if page else url


def page_with_words(conn: db.Connection, doc_id: int, needles: list[str]) -> tuple[str, str] | None:
    """(heading_path, text) of the page of the document holding the most of ``needles``
    (case-insensitive), the first such page on a tie: a query's rare words and common ones
    (方法, 知識) are all needles, and the first page with any of them is often the table of
    contents. The hit quotes this page and links to it, so its snippet, section and link agree."""
    wanted = list(dict.fromkeys(n.lower() for n in needles if n.strip()))
    if not wanted:
        return None
    best, best_count = None, 0
    for _, _, heading, text in chunk_text.document_chunks(conn, doc_id):
        lowered = text.lower()
        count = sum(n in lowered for n in wanted)
        if count > best_count:
            best, best_count = (heading, text), count
            if count == len(wanted):
                break
    return best
