"""A passage's text, stored once: as spans of its document's body where it is made of them.

A chunk is cut from its document's body (headings, paragraphs), so most of its text is already
in ``docs.body``: storing it again made ``chunks`` a quarter of a Wikipedia generation
(docs/design.md §35.8). The chunker joins the body's paragraphs with one newline where the
body has a blank line, and cuts long lines at sentence ends — so a chunk is usually *the body's
pieces joined by newlines*. Such a chunk is stored as ``spans`` — ``"a:b,c:d"``, character
offsets into the body, the pieces joined by ``"\\n"`` — with ``text`` empty; any other chunk
keeps its ``text`` and no spans. What a reader gets is the same string either way, so unit
hashes, snippets and offsets into a chunk do not change.

Generations built before have no ``spans`` column: ``spans_column`` says what to select.
"""

from __future__ import annotations

from collections.abc import Iterable

from chiezo.core import db

# A chunk shorter than this keeps its text: its span list (~10–20 bytes) would save little,
# and short generated passages (a place's description) are not cut from the body anyway.
SPANS_FROM = 120
SEPARATOR = "\n"


def spans_of(body: str, text: str, start: int = 0) -> tuple[str, int] | None:
    """(the spans that rebuild ``text`` from ``body``, where the last one ends) — each of
    ``text``'s lines found in ``body`` in order from ``start`` — or None when it is not made of
    the body's pieces (or too short to be worth it)."""
    if len(text) < SPANS_FROM or not body:
        return None
    spans: list[list[int]] = []
    at = start
    for line in text.split(SEPARATOR):
        found = body.find(line, at)
        if found < 0:
            return None
        end = found + len(line)
        if spans and spans[-1][1] == found - 1 and body[found - 1] == SEPARATOR:
            spans[-1][1] = end  # the body's own newline: one span across it
        else:
            spans.append([found, end])
        at = end
    return ",".join(f"{a}:{b}" for a, b in spans), at


def from_spans(body: str, spans: str) -> str:
    return SEPARATOR.join(
        body[int(a) : int(b)] for a, b in (span.split(":", 1) for span in spans.split(","))
    )


def covers(spans: str, offset: int) -> bool:
    """Whether the body's character at ``offset`` is in one of the spans."""
    for span in spans.split(","):
        a, b = span.split(":", 1)
        if int(a) <= offset < int(b):
            return True
    return False


def text_length(text: str, spans: str | None) -> int:
    """The length of a chunk's text without reading its document's body."""
    if not spans:
        return len(text)
    pieces = [span.split(":", 1) for span in spans.split(",")]
    return sum(int(b) - int(a) for a, b in pieces) + len(pieces) - 1


def spans_column(conn: db.Connection, table: str = "") -> str:
    """``spans`` (prefixed with ``table.``) for a generation that has the column, else ``NULL``
    — a file built before it (~20 µs a look)."""
    has = any(r[1] == "spans" for r in conn.execute("PRAGMA table_info(chunks)"))
    return f"{table + '.' if table else ''}spans" if has else "NULL"


class Bodies:
    """Documents' bodies read once each, for resolving the chunks of one or a few documents
    (the last ``keep`` are kept: readers go document by document)."""

    def __init__(self, conn: db.Connection, keep: int = 4) -> None:
        self.conn, self.keep = conn, keep
        self._bodies: dict[int, str] = {}

    def text(self, doc_id: int, text: str, spans: str | None) -> str:
        if not spans:
            return text
        body = self._bodies.get(doc_id)
        if body is None:
            row = self.conn.execute("SELECT body FROM docs WHERE doc_id = ?", (doc_id,)).fetchone()
            body = row[0] if row else ""
            if len(self._bodies) >= self.keep:
                self._bodies.pop(next(iter(self._bodies)))
            self._bodies[doc_id] = body
        return from_spans(body, spans)


def stored_rows(body: str, chunks: Iterable[tuple[str, str]]) -> list[tuple[str, str, str | None]]:
    """(heading_path, text to store, spans) for a document's chunks in order: each chunk's
    pieces are looked for after the previous chunk's."""
    out: list[tuple[str, str, str | None]] = []
    at = 0
    for heading_path, text in chunks:
        found = spans_of(body, text, at)
        if found is None:
            out.append((heading_path, text, None))
        else:
            out.append((heading_path, "", found[0]))
            at = found[1]
    return out


def document_chunks(conn: db.Connection, doc_id: int) -> list[tuple[int, int, str, str]]:
    """(chunk_id, ord, heading_path, text) of a document's passages in order, resolved."""
    rows = conn.execute(
        f"SELECT chunk_id, ord, heading_path, text, {spans_column(conn)} FROM chunks "
        "WHERE doc_id = ? ORDER BY ord",
        (doc_id,),
    ).fetchall()
    bodies = Bodies(conn, keep=1)
    return [(c, o, h, bodies.text(doc_id, t, s)) for c, o, h, t, s in rows]


def one_chunk(conn: db.Connection, chunk_id: int) -> tuple[int, str, str] | None:
    """(doc_id, heading_path, text) of one passage, resolved."""
    row = conn.execute(
        f"SELECT doc_id, heading_path, text, {spans_column(conn)} FROM chunks WHERE chunk_id = ?",
        (chunk_id,),
    ).fetchone()
    if row is None:
        return None
    doc_id, heading_path, text, spans = row
    return doc_id, heading_path, Bodies(conn, keep=1).text(doc_id, text, spans)
