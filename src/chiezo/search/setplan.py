"""Running a filter: intersecting condition sets with a cost that follows the matches.

Plans (the ``plan`` reported with every result):

``range``        one condition over one index range (one tag, one attribute value): the index
                 is already in doc_id = popularity order, so the page is read directly with
                 LIMIT/OFFSET and the total comes from the per-value count table. Cost follows
                 offset + limit, whatever the set's size.
``driven``       the condition with the smallest estimated set drives; every other condition is
                 an index seek per driven row (``EXISTS``). A driving set under ``MATERIALIZE``
                 ids is read once for page and total; a larger one gives the page through its
                 doc_id order and a total counted over its first ``COUNT_SCAN`` ids — exact
                 when that was all of it, else a lower bound (counting an intersection of two
                 sets of 250k and 200k ids costs ~200 ms however it is done in SQLite).
``distance``     ``near``: the matches with their coordinates, sorted by great-circle distance.
``nearest``      ``near`` without a radius: a box around the point grows (×4) until it holds the
                 page, then the matches in it are sorted by distance — cost follows local density.

The choice is made from estimates that cost nothing or little: ``tag_counts``/``attr_counts``
for index sets, a capped R*Tree count for a box.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from chiezo.core import db
from chiezo.core.errors import BadQuery
from chiezo.search.filters import Condition, Filters, Near
from chiezo.store.library import Source

MATERIALIZE = 60_000  # a driving set this small is read whole: page and total in one pass
COUNT_SCAN = 60_000  # driven ids counted for an exact total; more → a lower bound
NEAREST_START_KM = 1.0
NEAREST_MAX_KM = 20_100.0


@dataclass
class FilterPage:
    ids: list[int]
    total: int
    plan: str
    total_is_lower_bound: bool = False
    distances: dict[int, float] = field(default_factory=dict)
    # every match, when the plan read them all anyway (facets count them instead of asking
    # again: at 1M places a bbox + feature filter's facets cost 2.1x the filter without this)
    matched: list[int] | None = None


def run_filters(source: Source, filters: Filters, limit: int, offset: int) -> FilterPage:
    conn = source.conn
    if not filters:
        raise BadQuery(
            "give at least one condition",
            hint="tag, feature (key=value), area, wikidata, attr, bbox, near or near_doc",
        )
    if filters.near is not None and filters.near.radius_km is None:
        return _nearest(source, filters, limit, offset)
    estimates = {c: c.estimate(conn) for c in filters.conditions}  # each costs a lookup or scan
    ranked = sorted(filters.conditions, key=estimates.__getitem__)
    driver, others = ranked[0], ranked[1:]
    if filters.near is not None:
        return _by_distance(conn, driver, others, filters.near, limit, offset)
    if not others and driver.ordered:
        sql, params = driver.select()
        rows = conn.execute(f"{sql} ORDER BY doc_id LIMIT ? OFFSET ?", (*params, limit, offset))
        return FilterPage([r[0] for r in rows], estimates[driver], "range")
    return _driven(conn, driver, estimates[driver], others, limit, offset)


def _exists_all(others: list[Condition]) -> tuple[str, tuple]:
    clauses, args = [], ()
    for other in others:
        clause, more = other.exists("d.doc_id")
        clauses.append(clause)
        args += more
    return ((" WHERE " + " AND ".join(clauses)) if clauses else ""), args


def _matches_sql(driver: Condition, others: list[Condition]) -> tuple[str, tuple]:
    sql, params = driver.select()
    where, args = _exists_all(others)
    return f"SELECT d.doc_id FROM ({sql}) d{where}", (*params, *args)


def _driven(
    conn: db.Connection,
    driver: Condition,
    size: int,
    others: list[Condition],
    limit: int,
    offset: int,
) -> FilterPage:
    sql, params = _matches_sql(driver, others)
    if size <= MATERIALIZE:  # one pass: every match, then page and count
        ids = [r[0] for r in conn.execute(f"{sql} ORDER BY d.doc_id", params)]
        return FilterPage(ids[offset : offset + limit], len(ids), "driven", matched=ids)
    ids = [
        r[0]
        for r in conn.execute(f"{sql} ORDER BY d.doc_id LIMIT ? OFFSET ?", (*params, limit, offset))
    ]
    total, lower = _count(conn, driver, size, others)
    return FilterPage(ids, total, "driven", lower)


def _count(
    conn: db.Connection, driver: Condition, size: int, others: list[Condition]
) -> tuple[int, bool]:
    """Matches among the first COUNT_SCAN driven ids: exact when the driver is smaller."""
    sql, params = driver.select()
    where, args = _exists_all(others)
    scanned = f"SELECT doc_id FROM ({sql}) LIMIT {COUNT_SCAN + 1}"
    count = conn.execute(f"SELECT count(*) FROM ({scanned}) d{where}", (*params, *args))
    return count.fetchone()[0], size > COUNT_SCAN


def _by_distance(
    conn: db.Connection,
    driver: Condition,
    others: list[Condition],
    near: Near,
    limit: int,
    offset: int,
) -> FilterPage:
    sql, params = _matches_sql(driver, others)
    rows = conn.execute(
        f"SELECT m.doc_id, p.lat, p.lon FROM ({sql}) m JOIN doc_points p ON p.doc_id = m.doc_id",
        params,
    ).fetchall()
    distances = {doc_id: near.distance(lat, lon) for doc_id, lat, lon in rows}
    if near.radius_km is not None:  # the box was a prefilter: keep the circle
        distances = {d: km for d, km in distances.items() if km <= near.radius_km}
    ordered = sorted(distances, key=lambda d: (distances[d], d))
    page = ordered[offset : offset + limit]
    near_page = {d: distances[d] for d in page}
    return FilterPage(page, len(ordered), "distance", False, near_page, sorted(ordered))


def _nearest(source: Source, filters: Filters, limit: int, offset: int) -> FilterPage:
    """Grow a box around the point until it holds offset + limit matches; everything outside
    the circle inscribed in the last box is farther than everything inside it."""
    conn = source.conn
    near = filters.near
    assert near is not None
    want = offset + limit
    km = NEAREST_START_KM
    while True:
        box = near.box(km)
        conditions = sorted((*filters.conditions, box), key=lambda c: c.estimate(conn))
        sql, params = _matches_sql(conditions[0], list(conditions[1:]))
        rows = conn.execute(
            f"SELECT m.doc_id, p.lat, p.lon FROM ({sql}) m JOIN doc_points p "
            "ON p.doc_id = m.doc_id",
            params,
        ).fetchall()
        distances = {doc_id: near.distance(lat, lon) for doc_id, lat, lon in rows}
        inside = {d: v for d, v in distances.items() if v <= km}
        if len(inside) >= want or km >= NEAREST_MAX_KM:
            break
        km = min(km * 4, NEAREST_MAX_KM)
    ordered = sorted(inside, key=lambda d: (inside[d], d))
    page = ordered[offset : offset + limit]
    total, lower = _nearest_total(source, filters)
    return FilterPage(page, total, "nearest", lower, {d: inside[d] for d in page})


def _nearest_total(source: Source, filters: Filters) -> tuple[int, bool]:
    """Every match with coordinates, however far."""
    conn = source.conn
    if not filters.conditions:
        return conn.execute("SELECT count(*) FROM doc_points").fetchone()[0], False
    estimates = {c: c.estimate(conn) for c in filters.conditions}
    conditions = sorted(filters.conditions, key=estimates.__getitem__)
    driver, others = conditions[0], conditions[1:]
    return _count(conn, driver, estimates[driver], [*others, _HasPoint()])


@dataclass(frozen=True)
class _HasPoint(Condition):
    def select(self) -> tuple[str, tuple]:
        return "SELECT doc_id FROM doc_points", ()

    def exists(self, column: str) -> tuple[str, tuple]:
        return f"EXISTS (SELECT 1 FROM doc_points x WHERE x.doc_id = {column})", ()

    def estimate(self, conn: db.Connection) -> int:
        return conn.execute("SELECT count(*) FROM doc_points").fetchone()[0]


def match_ids(source: Source, filters: Filters, cap: int) -> tuple[list[int], bool]:
    """The first ``cap`` matches in doc_id (= popularity) order, and whether that is all of
    them — what facets count (search/facets.py). With ``near`` and no radius every match with
    a point counts (the nearest order is endless); with a radius, those inside the circle."""
    conn = source.conn
    conditions = list(filters.conditions)
    if filters.near is not None:
        conditions.append(_HasPoint())
    ranked = sorted(conditions, key=lambda c: c.estimate(conn))
    sql, params = _matches_sql(ranked[0], ranked[1:])
    near = filters.near
    if near is None or near.radius_km is None:
        rows = conn.execute(f"{sql} ORDER BY d.doc_id LIMIT ?", (*params, cap + 1))
        ids = [r[0] for r in rows]
        return ids[:cap], len(ids) <= cap
    rows = conn.execute(
        f"SELECT m.doc_id, p.lat, p.lon FROM ({sql}) m JOIN doc_points p ON p.doc_id = m.doc_id "
        "ORDER BY m.doc_id",
        params,
    )
    radius = near.radius_km
    inside = [d for d, lat, lon in rows if near.distance(lat, lon) <= radius]
    return inside[:cap], len(inside) <= cap
