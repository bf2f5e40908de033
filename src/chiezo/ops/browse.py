"""Reading documents and browsing a source: one document, titles by prefix, tags, links, and
filter listings. Pure functions over an open Source; the handlers (ops/reading.py,
ops/searching.py) add deadlines and limits."""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from typing import Any

from chiezo.core import db
from chiezo.core.errors import BadQuery, Operation, Option
from chiezo.core.textnorm import normalise_title
from chiezo.search.facets import Facets, of_filter
from chiezo.search.filters import Filters, check_filters
from chiezo.search.notices import Notice
from chiezo.search.setplan import run_filters
from chiezo.store import chunk_text
from chiezo.store.library import Source

# (source, doc_id, stored url) → the url a person opens the document at (ops/links.py)
Link = Callable[[Source, int, str | None], str | None]

DOC_FIELDS = (
    "source",
    "doc_id",
    "key",
    "title",
    "url",  # where a person opens it (ops/links.py, through the Context)
    "source_url",  # what the source stores: a public page, a file:// url, an archive entry
    "rank_score",
    "aliases",
    "opening",
    "body",
    "tags",
    "links",
    "attrs",
    "point",
    "chunks",
    "extra",
)
DEFAULT_DOC_FIELDS = tuple(f for f in DOC_FIELDS if f != "chunks")


def check_fields(fields: list[str] | None) -> tuple[str, ...]:
    if not fields:
        return DEFAULT_DOC_FIELDS
    unknown = [f for f in fields if f not in DOC_FIELDS]
    if unknown:
        raise BadQuery(
            f"unknown field{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}",
            allowed_fields=list(DOC_FIELDS),
        )
    return tuple(fields)


def read_doc(
    src: Source,
    doc_id: int,
    fields: tuple[str, ...],
    max_chars: int | None,
    link: Link | None = None,
) -> dict[str, Any]:
    """The document's ``fields``. With ``link`` (ops/links.py through the Context), ``url``
    is where a person opens it; ``source_url`` is always what the source stores."""
    conn = src.conn
    # body is the last column of docs: leaving it out spares its overflow pages
    body_column = "body" if "body" in fields else "''"
    extra_column = "extra" if "extra" in fields else "NULL"
    row = conn.execute(
        f"SELECT key, title, url, rank_score, aliases, opening, {extra_column}, {body_column} "
        "FROM docs WHERE doc_id = ?",
        (doc_id,),
    ).fetchone()
    key, title, url, rank_score, aliases, opening, extra, body = row
    full: dict[str, Any] = {
        "source": src.name,
        "doc_id": doc_id,
        "key": key,
        "title": title,
        "url": url,
        "source_url": url,
        "rank_score": rank_score,
        "aliases": [a for a in (aliases or "").split("\n") if a],
        "opening": opening,
        "extra": json.loads(extra) if extra else {},
    }
    out = {f: full[f] for f in fields if f in full}
    if link is not None and "url" in out:
        out["url"] = link(src, doc_id, url)
    if "body" in fields:
        out["body"] = body if max_chars is None else body[:max_chars]
        out["body_chars"] = len(body)
        if max_chars is not None and len(body) > max_chars:
            out["truncated"] = True
    if "tags" in fields:
        out["tags"] = [
            r[0]
            for r in conn.execute(
                "SELECT tag FROM doc_tags WHERE doc_id = ? ORDER BY tag", (doc_id,)
            )
        ]
    if "links" in fields:
        out["links"] = [
            r[0]
            for r in conn.execute(
                "SELECT target FROM doc_links WHERE doc_id = ? ORDER BY target", (doc_id,)
            )
        ]
    if "attrs" in fields:
        attrs: dict[str, list[str]] = {}
        for name, value in conn.execute(
            "SELECT name, value FROM doc_attrs WHERE doc_id = ? ORDER BY name, value", (doc_id,)
        ):
            attrs.setdefault(name, []).append(value)
        out["attrs"] = attrs
    if "point" in fields:
        point = conn.execute(
            "SELECT lat, lon FROM doc_points WHERE doc_id = ?", (doc_id,)
        ).fetchone()
        out["point"] = {"lat": point[0], "lon": point[1]} if point else None
    if "chunks" in fields:
        out["chunks"] = [
            {"ord": o, "heading_path": h, "text": t}
            for _, o, h, t in chunk_text.document_chunks(conn, doc_id)
        ]
    if max_chars is not None:
        fit_lists(out, max_chars)
    return out


# Lists a document answer carries, in the order they share what max_chars leaves: the short
# ones first, the links last (パリ has 1,040: 26 KB of an answer asked for 400 characters).
FITTED_LISTS = ("answer_sentences", "aliases", "tags", "attrs", "links", "chunks")
MIN_LIST_SHARE = 4  # the lists get at least max_chars / 4, however long the body


def fit_lists(out: dict[str, Any], max_chars: int) -> None:
    """Keep ``out`` within ``max_chars`` as a whole: the body was cut to it, the opening — the
    body's own start — gets what the body leaves; the lists share what both
    leave (at least a quarter of ``max_chars``), in ``FITTED_LISTS`` order, each item costing
    its JSON length. A list cut short says how long it is (``<name>_total``) and ``more`` says
    how to read the rest."""
    used = len(out.get("body") or "")
    if out.get("opening"):
        out["opening"] = out["opening"][: max(max_chars - used, 0)]
        used += len(out["opening"])
    left = max(max_chars - used, max_chars // MIN_LIST_SHARE)
    for name in FITTED_LISTS:
        if name not in out:
            continue
        items = list(out[name].items()) if isinstance(out[name], dict) else out[name]
        kept = 0
        for item in items:
            cost = len(json.dumps(item, ensure_ascii=False)) + 1
            if cost > left:
                break
            left, kept = left - cost, kept + 1
        if kept < len(items):
            out[name] = dict(items[:kept]) if isinstance(out[name], dict) else items[:kept]
            out[f"{name}_total"] = len(items)
            out.setdefault("more", {})[name] = _MORE[name]


_MORE = {
    "answer_sentences": "ask again without max_chars",
    "aliases": "ask again without max_chars, fields=['aliases']",
    "tags": "ask again without max_chars, fields=['tags']",
    "attrs": "ask again without max_chars, fields=['attrs']",
    "links": "the links tool (direction out) pages them: limit, offset",
    "chunks": "ask again without max_chars, fields=['chunks']",
}


def chunk_ids(src: Source, doc_id: int) -> dict[int, int]:
    """A document's passages: each one's place in the document (``ord``) → its chunk_id."""
    return dict(src.conn.execute("SELECT ord, chunk_id FROM chunks WHERE doc_id = ?", (doc_id,)))


def titles_by_prefix(src: Source, prefix: str, limit: int) -> dict[str, Any]:
    """Titles (and aliases) starting with ``prefix``, case- and width-insensitive, in
    alphabetical order of their normalised form."""
    norm = normalise_title(prefix)
    if not norm:
        raise BadQuery("prefix must not be empty")
    rows = src.conn.execute(
        "SELECT t.norm, t.doc_id, t.is_alias, d.title, d.key FROM titles t "
        "JOIN docs d ON d.doc_id = t.doc_id WHERE t.norm >= ? AND t.norm < ? "
        "ORDER BY t.norm, t.doc_id LIMIT ?",
        (norm, norm + "\U0010ffff", limit + 1),
    ).fetchall()
    items = [
        {"title": title, "doc_id": doc_id, "key": key, "via_alias": bool(is_alias)}
        for _, doc_id, is_alias, title, key in rows[:limit]
    ]
    return {"source": src.name, "prefix": prefix, "titles": items, "more": len(rows) > limit}


def list_tags(
    src: Source,
    *,
    prefix: str | None = None,
    contains: str | None = None,
    limit: int,
    offset: int,
) -> dict[str, Any]:
    """Tag names with their document counts, most used first. ``prefix`` reads an index range;
    ``contains`` scans the per-tag count table (one row per tag, not per document)."""
    if prefix and contains:
        raise BadQuery("give prefix or contains, not both")
    total, rows = _counted(src.conn, "tag_counts", "tag", "", (), prefix, contains, limit, offset)
    return {
        "source": src.name,
        "total": total,
        "tags": [{"tag": t, "docs": n} for t, n in rows],
    }


def list_links(
    src: Source,
    doc_id: int,
    *,
    direction: str,
    limit: int,
    offset: int,
) -> dict[str, Any]:
    """Links of a document: ``out`` = its link targets (with the doc_id when the target is a
    document of this source), ``in`` = documents linking to it (by title or key)."""
    conn = src.conn
    title, key = conn.execute("SELECT title, key FROM docs WHERE doc_id = ?", (doc_id,)).fetchone()
    if direction == "out":
        total = conn.execute(
            "SELECT count(*) FROM doc_links WHERE doc_id = ?", (doc_id,)
        ).fetchone()[0]
        rows = conn.execute(
            "SELECT target FROM doc_links WHERE doc_id = ? ORDER BY target LIMIT ? OFFSET ?",
            (doc_id, limit, offset),
        ).fetchall()
        links = [{"target": t, "doc_id": _resolve_target(src, t)} for (t,) in rows]
    elif direction == "in":
        targets = list(dict.fromkeys([title, key]))
        marks = ",".join("?" * len(targets))
        total = conn.execute(
            f"SELECT count(DISTINCT doc_id) FROM doc_links WHERE target IN ({marks})", targets
        ).fetchone()[0]
        rows = conn.execute(
            f"SELECT DISTINCT l.doc_id, d.title FROM doc_links l JOIN docs d "
            f"ON d.doc_id = l.doc_id WHERE l.target IN ({marks}) ORDER BY l.doc_id "
            "LIMIT ? OFFSET ?",
            (*targets, limit, offset),
        ).fetchall()
        links = [{"doc_id": i, "title": t} for i, t in rows]
    else:
        raise BadQuery(f"direction must be 'out' or 'in', got {direction!r}")
    return {
        "source": src.name,
        "doc_id": doc_id,
        "title": title,
        "direction": direction,
        "total": total,
        "links": links,
    }


def _resolve_target(src: Source, target: str) -> int | None:
    row = src.conn.execute("SELECT doc_id FROM docs WHERE key = ?", (target,)).fetchone()
    if row is None:
        row = src.conn.execute(
            "SELECT doc_id FROM titles WHERE norm = ? ORDER BY is_alias, doc_id LIMIT 1",
            (normalise_title(target),),
        ).fetchone()
    return row[0] if row else None


FILTER_FIELDS = ("doc_id", "key", "title", "url", "source_url", "point")


def filter_docs(
    src: Source,
    filters: Filters,
    *,
    limit: int,
    offset: int,
    fields: tuple[str, ...] | None = None,
    counted: Facets | None = None,
    link: Link | None = None,
) -> dict[str, Any]:
    """Every document meeting all conditions — most popular first, or nearest first with
    ``distance_km`` — with the total counted from the index sets (the way to list a category:
    by tag, never by full-text search). ``counted``: facets to add this source's matches to
    (search/facets.py)."""
    check = check_filters(src, filters)
    order = "distance" if filters.near else "rank"
    out: dict[str, Any] = {"source": src.name, "offset": offset, "limit": limit, "order": order}
    if check.impossible:
        if counted is not None:
            counted.source_totals[src.name] = (0, False)
        return {**out, "total": 0, "total_is_lower_bound": False, "docs": [], "notes": check.notes}
    page = run_filters(src, filters, limit, offset)
    if counted is not None:
        counted.source_totals[src.name] = (page.total, page.total_is_lower_bound)
        counted.add(*of_filter(src, filters, counted.names, page.matched))
    wanted = fields or FILTER_FIELDS
    docs = []
    for doc_id in page.ids:
        doc = read_doc(src, doc_id, wanted, max_chars=2000, link=link)
        if doc_id in page.distances:
            doc["distance_km"] = round(page.distances[doc_id], 3)
        docs.append(doc)
    notes = list(check.notes)
    if page.total_is_lower_bound:
        notes.append(Notice("total_at_least", total=page.total))
    return {
        **out,
        "total": page.total,
        "total_is_lower_bound": page.total_is_lower_bound,
        "plan": page.plan,
        "docs": docs,
        "notes": notes,
    }


RANDOM_FIELDS = (*FILTER_FIELDS, "opening")


def random_docs(
    src: Source,
    filters: Filters,
    *,
    count: int,
    seed: int | None = None,
    fields: tuple[str, ...] | None = None,
    link: Link | None = None,
) -> dict[str, Any]:
    """``count`` documents drawn without repeats, each as likely as any other: from the whole
    source by doc_id (one index seek each), or from the set the conditions make (counted
    exactly, then one page of one document per draw: the cost of a filter page each)."""
    rng = random.Random(seed)
    out: dict[str, Any] = {"source": src.name}
    if filters:
        if filters.near is not None and filters.near.radius_km is None:
            raise BadQuery(
                "random draws from a set: give near with radius_km (within it), not the "
                "nearest order",
                hint="e.g. {see}",
                see=Option("radius_km", "2"),
            )
        check = check_filters(src, filters)
        first = None if check.impossible else run_filters(src, filters, 1, 0)
        total = first.total if first else 0
        notes = list(check.notes)
        if first and first.total_is_lower_bound:
            notes.append(Notice("total_at_least", total=total))
        picks = [
            run_filters(src, filters, 1, k).ids[0]
            for k in rng.sample(range(total), min(count, total))
        ]
    else:
        highest = src.conn.execute("SELECT max(doc_id) FROM docs").fetchone()[0] or 0
        total, notes = src.doc_count, []
        picks = [
            _at_or_after(src, d) for d in rng.sample(range(1, highest + 1), min(count, highest))
        ]
    wanted = fields or RANDOM_FIELDS
    docs = [read_doc(src, doc_id, wanted, 2000, link) for doc_id in dict.fromkeys(picks)]
    return {**out, "total": total, "docs": docs, "notes": notes}


def _at_or_after(src: Source, doc_id: int) -> int:
    """The document ``doc_id``, or the next one where ids have gaps (notes deleted)."""
    row = src.conn.execute(
        "SELECT doc_id FROM docs WHERE doc_id >= ? ORDER BY doc_id LIMIT 1", (doc_id,)
    ).fetchone()
    return row[0] if row else src.conn.execute("SELECT min(doc_id) FROM docs").fetchone()[0]


def list_features(
    src: Source,
    *,
    prefix: str | None = None,
    contains: str | None = None,
    limit: int,
    offset: int,
) -> dict[str, Any]:
    """Feature values (``key=value``) with document counts, most common first: what a model can
    put in ``feature=`` instead of guessing."""
    if "feature" not in src.attributes:
        raise BadQuery(
            f"source {src.name!r} has no features",
            source=src.name,
            known_attributes=src.attributes,
            hint=f"features come from place sources ({', '.join(place_kinds())}); "
            "{see} names each kind",
            see=Operation("sources"),
        )
    total, rows = _counted(
        src.conn, "attr_counts", "value", "name = 'feature'", (), prefix, contains, limit, offset
    )
    return {
        "source": src.name,
        "total": total,
        "features": [{"feature": v, "docs": n} for v, n in rows],
    }


def _counted(
    conn: db.Connection,
    table: str,
    column: str,
    where: str,
    params: tuple,
    prefix: str | None,
    contains: str | None,
    limit: int,
    offset: int,
) -> tuple[int, list[tuple[str, int]]]:
    """(total, [(name, count)]) from a per-name count table, most used first; ``prefix`` is an
    index range, ``contains`` a scan of the count table (one row per name, not per document)."""
    clauses, args = ([where] if where else []), list(params)
    if prefix:
        clauses.append(f"{column} >= ? AND {column} < ?")
        args += [prefix, prefix + "\U0010ffff"]
    if contains:
        clauses.append(f"instr({column}, ?) > 0")
        args.append(contains)
    sql_where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    total = conn.execute(f"SELECT count(*) FROM {table} {sql_where}", args).fetchone()[0]
    rows = conn.execute(
        f"SELECT {column}, n FROM {table} {sql_where} ORDER BY n DESC, {column} LIMIT ? OFFSET ?",
        (*args, limit, offset),
    ).fetchall()
    return total, rows


def place_kinds() -> list[str]:
    """The kinds whose documents are places (their capability), e.g. osm, geonames, places."""
    from chiezo.store.kinds import kinds

    return sorted(name for name, kind in kinds().items() if kind.capabilities.places)
