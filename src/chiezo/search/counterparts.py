"""The same subject in another source: articles of two Wikipedias (or any sources whose
documents carry a ``wikidata`` attribute) linked by their Wikidata id.

A hit names its counterparts — オーストリア in jawiki for Austria found in enwiki — so a
person, an agent or the answer layer can read the article in the language they read. Costs grow
with the hits shown, not the library: one indexed look-up of the hit's id, then one per other
source that records ids (both on ``doc_attrs`` indexes).
"""

from __future__ import annotations

from collections.abc import Sequence

from chiezo.core import db
from chiezo.core.models import Hit
from chiezo.core.query import parse_query
from chiezo.search.fts import title_exact
from chiezo.store.library import Source

WIKIDATA = "wikidata"
PER_SOURCE = 2  # one item is one article per wiki; a second shows a duplicate exists


def linked(sources: Sequence[Source]) -> list[Source]:
    """The sources whose documents record Wikidata ids."""
    return [s for s in sources if not s.live and WIKIDATA in s.attributes]


def name_counterparts(hits: Sequence[Hit], sources: Sequence[Source]) -> None:
    """Set ``counterparts`` on each hit whose document has a Wikidata id that documents of
    other ``sources`` share: ``[{"source", "key", "title", "wikidata"}]``."""
    holding = {s.name: s for s in linked(sources)}
    if len(holding) < 2:
        return
    for hit in hits:
        own = holding.get(hit.source)
        qid = _qid(own.conn, hit.doc_id) if own is not None else None
        if qid is None:
            continue
        found = [
            {"source": other.name, "key": key, "title": title, "wikidata": qid}
            for other in holding.values()
            if other.name != hit.source
            for key, title in _holding(other.conn, qid)
        ]
        hit.counterparts = found or None


def titled(
    sources: Sequence[Source], names: Sequence[str], into: str | None = None
) -> list[tuple[str, str]]:
    """(source, title) of the documents that share a Wikidata id with a document titled —
    or aliased — one of ``names`` in another source (only those of ``into`` when given):
    "Austria" in enwiki → ("jawiki", "オーストリア"). What a planner without a model can look
    a subject up through."""
    holding = linked(sources)
    if len(holding) < 2:
        return []
    found: list[tuple[str, str]] = []
    for own in holding:
        for name in names:
            for doc_id in title_exact(own.conn, parse_query(name, folded=own.has_words).norm)[:2]:
                qid = _qid(own.conn, doc_id)
                if qid is not None:
                    found += _elsewhere(holding, own, qid, into)
    return list(dict.fromkeys(found))


def _elsewhere(
    holding: Sequence[Source], own: Source, qid: str, into: str | None
) -> list[tuple[str, str]]:
    return [
        (other.name, title)
        for other in holding
        if other.name != own.name and into in (None, other.name)
        for _, title in _holding(other.conn, qid)
    ]


def _qid(conn: db.Connection, doc_id: int) -> str | None:
    row = conn.execute(
        "SELECT value FROM doc_attrs WHERE doc_id = ? AND name = ? LIMIT 1", (doc_id, WIKIDATA)
    ).fetchone()
    return row[0] if row else None


def _holding(conn: db.Connection, qid: str) -> list[tuple[str, str]]:
    return list(
        conn.execute(
            "SELECT d.key, d.title FROM doc_attrs a JOIN docs d ON d.doc_id = a.doc_id "
            "WHERE a.name = ? AND a.value = ? LIMIT ?",
            (WIKIDATA, qid, PER_SOURCE),
        )
    )
