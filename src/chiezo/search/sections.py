"""Where a hit is: its document's coordinates, and the section its snippet quotes.

Both are read for the page of hits only — one query for the page's points, one for its
documents' headings, then one probe per hit whose document has more than one section — so
their cost follows the hits shown, never the size of the source.

A section is the heading path of a chunk (``chunks.heading_path``, "A > B > C",
core/markdown.py) without the document's own title in front: a Wikipedia passage's path
starts with its article title (浅草寺 > 歴史, ingest/wikipedia.py) and a Markdown file's with its
H1, and the hit shows the title already. The lead of an article (its path is the title alone)
has no section; nor has a document without headings (a place, a plain text).

Which chunk a keyword snippet quotes: the chunker keeps the body's lines as written (it strips
and joins them, and splits only a line over 800 characters, after a sentence end), so the text
around the snippet's anchor, within its line, occurs in the chunk that holds it. The first
chunk holding it in document order is that chunk, or the piece before it when the line is one
that a split repeats — under the same heading either way.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from chiezo.core.markdown import BREADCRUMB_SEPARATOR
from chiezo.core.models import Point
from chiezo.core.textnorm import normalise_title
from chiezo.store import chunk_text
from chiezo.store.library import Source

PROBE_CHARS = 24  # of the anchor's line, each side of the anchor
MIN_PROBE_CHARS = 4  # a shorter probe would be found in whichever chunk comes first
# where the chunker cuts a long line (markdown._SENTENCE_END): a probe must not straddle one
_SENTENCE_END = re.compile(r"[。．！？!?]|[.;:](?=\s)")


def points_of(source: Source, doc_ids: Iterable[int]) -> dict[int, Point]:
    """The coordinates of those of ``doc_ids`` that have them: one indexed query, none in a
    source without points."""
    ids = list(dict.fromkeys(doc_ids))
    if not ids or not int(source.meta.get("point_count", 0) or 0):
        return {}
    marks = ",".join("?" * len(ids))
    rows = source.conn.execute(
        f"SELECT doc_id, lat, lon FROM doc_points WHERE doc_id IN ({marks})", ids
    )
    return {doc_id: Point(lat, lon) for doc_id, lat, lon in rows}


def section_of(heading_path: str | None, title: str) -> str | None:
    """``heading_path`` as shown under the hit's title: without the title in front; None when
    nothing is left."""
    parts = (heading_path or "").split(BREADCRUMB_SEPARATOR)
    if parts and normalise_title(parts[0]) == normalise_title(title):
        parts = parts[1:]
    return BREADCRUMB_SEPARATOR.join(p for p in parts if p.strip()) or None


def sections_at(source: Source, anchors: dict[int, tuple[str, int, str]]) -> dict[int, str]:
    """doc_id → the section of each ``(body, anchor, title)``: the heading path of the chunk
    that holds ``body[anchor]``. Documents with one heading path (a place, a short file)
    need no probe; a probe that matches no chunk gives no section rather than a guess."""
    if not anchors:
        return {}
    conn = source.conn
    marks = ",".join("?" * len(anchors))
    # heading_path is stored before text: reading it never touches a chunk's overflow pages
    spans = {
        doc_id: (low, high)
        for doc_id, low, high in conn.execute(
            f"SELECT doc_id, min(heading_path), max(heading_path) FROM chunks "
            f"WHERE doc_id IN ({marks}) GROUP BY doc_id",
            list(anchors),
        )
    }
    out: dict[int, str] = {}
    for doc_id, (body, anchor, title) in anchors.items():
        low, high = spans.get(doc_id, ("", ""))
        path = low if low == high else _probe(source, doc_id, body, anchor)
        section = section_of(path, title)
        if section:
            out[doc_id] = section
    return out


def _probe(source: Source, doc_id: int, body: str, anchor: int) -> str | None:
    conn = source.conn
    rows = conn.execute(
        f"SELECT heading_path, text, {chunk_text.spans_column(conn)} FROM chunks "
        "WHERE doc_id = ? ORDER BY ord",
        (doc_id,),
    ).fetchall()
    for heading_path, _, spans in rows:  # a passage kept as spans of this body says where it is
        if spans and chunk_text.covers(spans, anchor):
            return heading_path
    for probe in probes(body, anchor):
        for heading_path, text, spans in rows:
            if probe in (chunk_text.from_spans(body, spans) if spans else text):
                return heading_path
    return None


def probes(body: str, anchor: int) -> list[str]:
    """What to look for in the chunks, best first: the anchor's line, ``PROBE_CHARS`` each
    side; from the anchor to the first sentence end, should that straddle a place where the
    chunker cut a long line; the text from the anchor on, across lines (a name alone on a line
    of a list is too short to tell its chunk). The chunks hold no blank lines' whitespace as
    the body does, so an anchor on whitespace moves to the text after it."""
    while anchor < len(body) and body[anchor].isspace():
        anchor += 1
    line_start = body.rfind("\n", 0, anchor) + 1
    line_end = body.find("\n", anchor)
    line_end = len(body) if line_end == -1 else line_end
    around = body[max(line_start, anchor - PROBE_CHARS) : min(line_end, anchor + PROBE_CHARS)]
    ahead = body[anchor : min(line_end, anchor + PROBE_CHARS)]
    cut = _SENTENCE_END.search(ahead)
    if cut:
        ahead = ahead[: cut.end()]
    across = body[anchor : anchor + PROBE_CHARS]
    found = [p.strip() for p in (around, ahead, across)]
    return [p for p in dict.fromkeys(found) if len(p) >= MIN_PROBE_CHARS]
