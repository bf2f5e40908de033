"""Attribute filters as doc-id sets: tags (``tag=ラーメン店``) and attributes
(``attr=version=1.0``).

Each condition is a set of doc_ids read from an index (``doc_tags``, ``doc_attrs``); conditions
combine by intersection and document rows are read only for the page shown. Because doc_id is
the popularity ordinal, "the most popular members of a set" is simply its smallest doc_ids — an
index range read in order, stopped after the page.

A condition the source can never satisfy (an attribute it does not have, tags on a source
without tags) is an error that says why, not an empty result: a model that gets 0 results
retries the same impossible query forever.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from .. import db
from ..errors import BadQuery
from ..library import Source

MAX_CONDITIONS = 8


@dataclass(frozen=True)
class Filters:
    tags: tuple[str, ...] = ()
    attrs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def parse(cls, tags: list[str] | None = None, attrs: list[str] | None = None) -> Filters:
        tag_list = tuple(dict.fromkeys(t.strip() for t in tags or [] if t and t.strip()))
        pairs = tuple(dict.fromkeys(parse_attr(a) for a in attrs or [] if a and a.strip()))
        if len(tag_list) + len(pairs) > MAX_CONDITIONS:
            raise BadQuery(f"at most {MAX_CONDITIONS} filter conditions per query")
        return cls(tag_list, pairs)

    def __bool__(self) -> bool:
        return bool(self.tags or self.attrs)

    def subqueries(self) -> list[tuple[str, tuple]]:
        """One ``SELECT doc_id ...`` per condition, in index order (= popularity order)."""
        out = [("SELECT doc_id FROM doc_tags WHERE tag = ?", (t,)) for t in self.tags]
        out += [
            ("SELECT doc_id FROM doc_attrs WHERE name = ? AND value = ?", (n, v))
            for n, v in self.attrs
        ]
        return out

    def where(self, column: str = "rowid") -> tuple[str, tuple]:
        """`` AND +rowid IN (...)`` clauses for an FTS query. The unary ``+`` keeps SQLite from
        driving the FTS table by rowid lookups (one doclist walk per candidate)."""
        clauses, params = [], ()
        for sql, args in self.subqueries():
            clauses.append(f" AND +{column} IN ({sql})")
            params += args
        return "".join(clauses), params


@dataclass
class FilterCheck:
    notes: list[str] = field(default_factory=list)
    impossible: bool = False  # a condition matches no document at all


def parse_attr(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name.strip() or not value.strip():
        raise BadQuery(
            f"an attribute filter is name=value, got {text!r}",
            hint="e.g. attr=version=1.0",
        )
    return name.strip(), value.strip()


def check_filters(source: Source, filters: Filters) -> FilterCheck:
    """Refuse conditions the source can never satisfy; explain the ones that match nothing."""
    check = FilterCheck()
    conn = source.conn
    if filters.tags and not conn.execute("SELECT 1 FROM tag_counts LIMIT 1").fetchone():
        raise BadQuery(
            f"source {source.name!r} has no tags, so a tag filter can never match",
            source=source.name,
            hint="search without tag=, or use a source that has tags",
        )
    for tag in filters.tags:
        if not conn.execute("SELECT 1 FROM tag_counts WHERE tag = ?", (tag,)).fetchone():
            check.impossible = True
            similar = similar_tags(conn, tag)
            check.notes.append(
                f"no document has the tag {tag!r}"
                + (f"; similar tags: {', '.join(similar)}" if similar else "")
            )
    known = set(source.attributes)
    for name, value in filters.attrs:
        if name not in known:
            raise BadQuery(
                f"source {source.name!r} has no attribute {name!r}, so attr={name}=... can "
                "never match",
                source=source.name,
                known_attributes=sorted(known),
                candidates=difflib.get_close_matches(name, sorted(known), n=5) or None,
            )
        hit = conn.execute(
            "SELECT 1 FROM doc_attrs WHERE name = ? AND value = ? LIMIT 1", (name, value)
        ).fetchone()
        if not hit:
            check.impossible = True
            values = [
                r[0]
                for r in conn.execute(
                    "SELECT value FROM attr_counts WHERE name = ? ORDER BY n DESC LIMIT 10",
                    (name,),
                )
            ]
            check.notes.append(
                f"no document has {name}={value!r}; common values: {', '.join(values)}"
            )
    return check


def similar_tags(conn: db.Connection, tag: str, n: int = 5) -> list[str]:
    """Tags sharing the first characters or containing the text, most used first."""
    rows = conn.execute(
        "SELECT tag FROM tag_counts WHERE tag >= ? AND tag < ? ORDER BY n DESC LIMIT ?",
        (tag[:2], tag[:2] + "\U0010ffff", 50),
    ).fetchall()
    names = [r[0] for r in rows]
    return difflib.get_close_matches(tag, names, n=n, cutoff=0.3) or names[:n]


def count_members(conn: db.Connection, filters: Filters) -> int:
    """Exact size of the intersection, counted from the indexes only."""
    if len(filters.tags) == 1 and not filters.attrs:
        row = conn.execute("SELECT n FROM tag_counts WHERE tag = ?", filters.tags).fetchone()
        return row[0] if row else 0
    sql, params = _intersection(filters)
    return conn.execute(f"SELECT count(*) FROM ({sql})", params).fetchone()[0]


def members(conn: db.Connection, filters: Filters, limit: int, offset: int) -> list[int]:
    """doc_ids in the intersection, most popular first."""
    sql, params = _intersection(filters)
    rows = conn.execute(f"{sql} ORDER BY doc_id LIMIT ? OFFSET ?", (*params, limit, offset))
    return [r[0] for r in rows]


def filter_ids(conn: db.Connection, filters: Filters, ids: list[int]) -> list[int]:
    """The ids (order kept) that satisfy every condition."""
    if not filters or not ids:
        return ids
    keep = set(ids)
    for sql, args in filters.subqueries():
        found: set[int] = set()
        candidates = sorted(keep)
        for start in range(0, len(candidates), 500):
            part = candidates[start : start + 500]
            marks = ",".join("?" * len(part))
            rows = conn.execute(f"{sql} AND doc_id IN ({marks})", (*args, *part))
            found.update(r[0] for r in rows)
        keep = found
    return [i for i in ids if i in keep]


def _intersection(filters: Filters) -> tuple[str, tuple]:
    parts = filters.subqueries()
    sql = " INTERSECT ".join(p[0] for p in parts)
    params: tuple = ()
    for _, args in parts:
        params += args
    return sql, params
