"""Attribute and place conditions as doc-id sets.

Conditions (AND between them; a comma inside one value is OR):

* ``tag``                      — ``doc_tags`` (tag, doc_id)
* ``feature``/``area``/``wikidata``/``attr=name=value`` — ``doc_attrs`` (name, value, doc_id)
* ``bbox=south,west,north,east`` — the R*Tree ``doc_coords``, checked exactly on ``doc_points``
* ``near=lat,lon`` [+ ``radius_km``], ``near_doc=source:title`` — distance from a point

Each condition yields a set of doc_ids from an index, never reading document rows, and answers
"which of these ids are members" in batches: the planner (``setplan.py``) intersects them,
counts totals from them and reads rows only for the page shown. Because doc_id is the
popularity ordinal, an index range in doc_id order is already ranked.

A condition the source can never satisfy (an attribute it does not have, tags on a source
without tags) is an error that says why and which sources do have it: a model that gets 0
results retries the same impossible query forever.

Names of places are written many ways: an ``area`` matches its stored value or the source's
``area_alias`` (the area's other names: Tokyo for 東京都), ignoring case, width and accents
(kyoto, ＫＹＯＴＯ, Kyōto). ``Filters.resolved`` turns the values asked for into the ones stored, once per
query, so each condition stays one index range. A value that matches nothing gets the values
that name the same area in another language (東京都 → Tokyo on a source built before areas had
Japanese names), then the closest values by spelling.
"""

from __future__ import annotations

import difflib
import functools
import math
import re
import unicodedata
from collections.abc import Sized
from dataclasses import dataclass, field
from typing import TypeGuard

from chiezo.core import db
from chiezo.core.errors import BadQuery, Operation, Option
from chiezo.core.geometry import Shape, register
from chiezo.search.lacks import SourceLacks, with_attribute, with_points
from chiezo.search.notices import Notice
from chiezo.store.library import Source

MAX_CONDITIONS = 12
BOX_ESTIMATE_CAP = 60_000  # above setplan.MATERIALIZE: a box this full is read page by page
BATCH = 500
EARTH_KM = 6371.0088
NAMED_ATTRIBUTES = ("feature", "area", "wikidata")
# Attributes whose values are names, matched by spelling (``fold_name``) and through
# "<name>_alias" (another stored attribute holding the same places' other names).
NAME_ATTRIBUTES = ("area",)
ALIAS = "_alias"
SIMILAR_POOL = 50_000  # values compared for "closest": ~0.1 s of difflib; more → same first letter
SIMILAR_CUTOFF = 0.4


@dataclass(frozen=True)
class Condition:
    """One indexed set of documents."""

    def estimate(self, conn: db.Connection) -> int:
        raise NotImplementedError

    def ids(self, conn: db.Connection) -> list[int]:
        """Every member, in doc_id (= popularity) order."""
        sql, params = self.select()
        return [r[0] for r in conn.execute(f"{sql} ORDER BY doc_id", params)]

    def select(self) -> tuple[str, tuple]:
        """``SELECT doc_id ...`` of the members (no ORDER BY)."""
        raise NotImplementedError

    def keep(self, conn: db.Connection, ids: list[int]) -> set[int]:
        """Those of ``ids`` that are members."""
        sql, params = self.select()
        found: set[int] = set()
        for start in range(0, len(ids), BATCH):
            part = ids[start : start + BATCH]
            marks = ",".join("?" * len(part))
            found.update(
                r[0] for r in conn.execute(f"{sql} AND doc_id IN ({marks})", (*params, *part))
            )
        return found

    @property
    def ordered(self) -> bool:
        """Whether ``select()`` reads one index range already in doc_id order."""
        return False

    def exists(self, column: str) -> tuple[str, tuple]:
        """A correlated test "``column`` is a member": one index seek per row tested."""
        sql, params = self.select()
        return f"{column} IN ({sql})", params


@dataclass(frozen=True)
class TagCondition(Condition):
    tags: tuple[str, ...]

    def select(self) -> tuple[str, tuple]:
        marks = ",".join("?" * len(self.tags))
        distinct = "DISTINCT " if len(self.tags) > 1 else ""  # a doc may carry two of them
        return f"SELECT {distinct}doc_id FROM doc_tags WHERE tag IN ({marks})", self.tags

    def estimate(self, conn: db.Connection) -> int:
        marks = ",".join("?" * len(self.tags))
        row = conn.execute(f"SELECT sum(n) FROM tag_counts WHERE tag IN ({marks})", self.tags)
        return row.fetchone()[0] or 0

    def exists(self, column: str) -> tuple[str, tuple]:
        marks = ",".join("?" * len(self.tags))
        return (
            f"EXISTS (SELECT 1 FROM doc_tags x WHERE x.tag IN ({marks}) AND x.doc_id = {column})",
            self.tags,
        )

    @property
    def ordered(self) -> bool:
        return len(self.tags) == 1

    def describe(self) -> str:
        return "tag=" + ",".join(self.tags)


class _AttrRows(Condition):
    """A condition on rows of ``doc_attrs`` (counted in ``attr_counts``) that ``clause()``
    states: the members are the documents of those rows."""

    def clause(self, table: str = "") -> tuple[str, tuple]:
        raise NotImplementedError

    def select(self) -> tuple[str, tuple]:
        where, params = self.clause()
        distinct = "" if self.ordered else "DISTINCT "  # a doc may carry two of them
        return f"SELECT {distinct}doc_id FROM doc_attrs WHERE {where}", params

    def estimate(self, conn: db.Connection) -> int:
        where, params = self.clause()
        row = conn.execute(f"SELECT sum(n) FROM attr_counts WHERE {where}", params).fetchone()
        return row[0] or 0

    def exists(self, column: str) -> tuple[str, tuple]:
        where, params = self.clause("x.")
        return (
            f"EXISTS (SELECT 1 FROM doc_attrs x WHERE {where} AND x.doc_id = {column})",
            params,
        )


@dataclass(frozen=True)
class AttrCondition(_AttrRows):
    name: str
    values: tuple[str, ...]
    # the stored attributes read: ``(name,)`` unless resolved to its alias (area_alias)
    within: tuple[str, ...] = ()

    @property
    def attributes(self) -> tuple[str, ...]:
        return self.within or (self.name,)

    def clause(self, table: str = "") -> tuple[str, tuple]:
        """``name = ? AND value IN (...)`` over the columns of ``table`` (an alias + ".")."""
        names, marks = self.attributes, _marks(self.values)
        name = f"{table}name = ?" if len(names) == 1 else f"{table}name IN ({_marks(names)})"
        return f"{name} AND {table}value IN ({marks})", (*names, *self.values)

    @property
    def ordered(self) -> bool:
        return len(self.values) == 1 and len(self.attributes) == 1

    def describe(self) -> str:
        return f"{self.name}=" + ",".join(self.values)


@dataclass(frozen=True)
class RangeCondition(_AttrRows):
    """Documents whose attribute ``name`` is a number ``op`` ``bound`` (population>=1000000):
    the typed facts of infoboxes (ingest/infoboxes.py). Reads the attribute's values — cost
    grows with the documents that carry it, not with the source."""

    name: str
    op: str  # one of < <= > >=
    bound: float

    def clause(self, table: str = "") -> tuple[str, tuple]:
        # a value is a number when nothing but digits, one point and a sign remain after
        # trimming them: CAST would read "12 km" as 12 and "n/a" as 0
        return (
            f"{table}name = ? AND trim({table}value, '0123456789.-') = '' "
            f"AND {table}value GLOB '*[0-9]*' AND CAST({table}value AS REAL) {self.op} ?",
            (self.name, self.bound),
        )

    @property
    def attributes(self) -> tuple[str, ...]:
        return (self.name,)

    def describe(self) -> str:
        return f"{self.name}{self.op}{_number(self.bound)}"


@dataclass(frozen=True)
class BoxCondition(Condition):
    south: float
    west: float
    north: float
    east: float

    def select(self) -> tuple[str, tuple]:
        # The R*Tree's 32-bit boundaries round outwards; doc_points has the exact values.
        return (
            "SELECT doc_id FROM doc_points WHERE lat BETWEEN ? AND ? AND lon BETWEEN ? AND ? "
            "AND doc_id IN (SELECT doc_id FROM doc_coords WHERE max_lat >= ? AND min_lat <= ? "
            "AND max_lon >= ? AND min_lon <= ?)",
            (
                self.south,
                self.north,
                self.west,
                self.east,
                self.south,
                self.north,
                self.west,
                self.east,
            ),
        )

    def keep(self, conn: db.Connection, ids: list[int]) -> set[int]:
        found: set[int] = set()
        for start in range(0, len(ids), BATCH):
            part = ids[start : start + BATCH]
            marks = ",".join("?" * len(part))
            found.update(
                r[0]
                for r in conn.execute(
                    f"SELECT doc_id FROM doc_points WHERE doc_id IN ({marks}) "
                    "AND lat BETWEEN ? AND ? AND lon BETWEEN ? AND ?",
                    (*part, self.south, self.north, self.west, self.east),
                )
            )
        return found

    def exists(self, column: str) -> tuple[str, tuple]:
        return (
            f"EXISTS (SELECT 1 FROM doc_points x WHERE x.doc_id = {column} "
            "AND x.lat BETWEEN ? AND ? AND x.lon BETWEEN ? AND ?)",
            (self.south, self.north, self.west, self.east),
        )

    def estimate(self, conn: db.Connection) -> int:
        """Counted from the R*Tree up to a cap: a dense box is "large" either way."""
        sql = (
            "SELECT count(*) FROM (SELECT 1 FROM doc_coords WHERE max_lat >= ? AND min_lat <= ? "
            f"AND max_lon >= ? AND min_lon <= ? LIMIT {BOX_ESTIMATE_CAP + 1})"
        )
        row = conn.execute(sql, (self.south, self.north, self.west, self.east)).fetchone()
        return row[0]

    def describe(self) -> str:
        return f"bbox={self.south},{self.west},{self.north},{self.east}"


@dataclass(frozen=True)
class WithinCondition(Condition):
    """Documents whose point lies inside a shape (search/shapes.py): the R*Tree finds those in
    its box, ``chiezo_within`` (core/geometry.py) keeps those inside — an exact set, counted
    like a box's."""

    key: str  # the shape's key in SQL (core/geometry.register)
    box: BoxCondition
    label: str
    share: float  # the shape's area over its box's: how much of the box's count it keeps
    shape: Shape = field(compare=False, hash=False, repr=False)

    @classmethod
    def of(cls, shape: Shape) -> WithinCondition:
        west, south, east, north = shape.bbox
        box_area = max((east - west) * (north - south), 1e-18)
        share = min(shape.area_deg2() / box_area, 1.0)
        box = BoxCondition(south, west, north, east)
        return cls(register(shape), box, shape.label, share, shape)

    def _registered(self) -> str:
        """The key, with the shape registered now: a condition outlives nothing but its
        request, yet 256 newer shapes in between must not make its SQL fail."""
        return register(self.shape)

    def inside(self, table: str = "") -> tuple[str, tuple]:
        """SQL true for a point of ``table`` (an alias + ".") inside the shape: decided cells
        by arithmetic, the rest by ``chiezo_within`` (core/geometry.py says why)."""
        lat, lon = f"{table}lat", f"{table}lon"
        cell = self.shape.cell_sql(lat, lon)
        return (
            f"CASE substr(?, {cell} + 1, 1) WHEN x'01' THEN 1 WHEN x'00' THEN 0 "
            f"ELSE chiezo_within(?, {lat}, {lon}) END",
            (self.shape.cell_codes, self._registered()),
        )

    def select(self) -> tuple[str, tuple]:
        sql, params = self.box.select()
        test, args = self.inside()
        return f"{sql} AND {test}", (*params, *args)

    def keep(self, conn: db.Connection, ids: list[int]) -> set[int]:
        test, args = self.inside()  # its cell arithmetic holds inside the box only
        box = (self.box.south, self.box.north, self.box.west, self.box.east)
        found: set[int] = set()
        for start in range(0, len(ids), BATCH):
            part = ids[start : start + BATCH]
            found.update(
                r[0]
                for r in conn.execute(
                    f"SELECT doc_id FROM doc_points WHERE doc_id IN ({_marks(part)}) "
                    f"AND lat BETWEEN ? AND ? AND lon BETWEEN ? AND ? AND {test}",
                    (*part, *box, *args),
                )
            )
        return found

    def exists(self, column: str) -> tuple[str, tuple]:
        sql, params = self.box.exists(column)
        test, args = self.inside("x.")
        return f"{sql[:-1]} AND {test})", (*params, *args)

    def estimate(self, conn: db.Connection) -> int:
        return max(int(self.box.estimate(conn) * self.share), 1)

    def describe(self) -> str:
        return f"within={self.label}"


@dataclass(frozen=True)
class Near:
    lat: float
    lon: float
    radius_km: float | None = None
    label: str = ""
    # how an address given as near was resolved (a Notice), for the result to say so
    note: str | None = field(default=None, compare=False)
    # the person's own location (near=here): used for distances, never stated in a result
    hidden: bool = False

    def box(self, km: float) -> BoxCondition:
        dlat = math.degrees(km / EARTH_KM)
        coslat = max(math.cos(math.radians(self.lat)), 1e-6)
        dlon = min(math.degrees(km / (EARTH_KM * coslat)), 180.0)
        return BoxCondition(
            max(self.lat - dlat, -90), self.lon - dlon, min(self.lat + dlat, 90), self.lon + dlon
        )

    def distance(self, lat: float, lon: float) -> float:
        return haversine_km(self.lat, self.lon, lat, lon)


def haversine_km(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_KM * math.asin(min(1.0, math.sqrt(a)))


@dataclass(frozen=True)
class Filters:
    """The conditions of one request; ``near`` orders by distance (and bounds it)."""

    conditions: tuple[Condition, ...] = ()
    near: Near | None = None

    @classmethod
    def parse(
        cls,
        tags: list[str] | None = None,
        attrs: list[str] | None = None,
        *,
        feature: list[str] | None = None,
        area: list[str] | None = None,
        wikidata: list[str] | None = None,
        bbox: str | None = None,
        near: Near | None = None,
        within: Shape | None = None,
    ) -> Filters:
        conditions: list[Condition] = []
        for value in tags or []:
            group = _split_or(value)
            if group:
                conditions.append(TagCondition(group))
        for value in feature or []:
            group = _split_or(value)
            for item in group:
                if "=" not in item or item.startswith("=") or item.endswith("="):
                    raise BadQuery(
                        f"a feature is key=value (e.g. tourism=museum, railway=station), "
                        f"got {item!r}",
                        hint="list the source's features with {see}",
                        see=Operation("features"),
                    )
            if group:
                conditions.append(AttrCondition("feature", group))
        for name, values in (("area", area), ("wikidata", wikidata)):
            for value in values or []:
                group = _split_or(value)
                if group:
                    conditions.append(AttrCondition(name, group))
        for value in attrs or []:
            if value and value.strip():
                name, op, raw = parse_attr(value)
                conditions.append(
                    AttrCondition(name, _split_or(raw))
                    if op == "="
                    else RangeCondition(name, op, float(raw))
                )
        if bbox:
            conditions.append(parse_bbox(bbox))
        if within is not None:
            conditions.append(WithinCondition.of(within))
        if near is not None and near.radius_km is not None:
            conditions.append(near.box(near.radius_km))
        if len(conditions) > MAX_CONDITIONS:
            raise BadQuery(f"at most {MAX_CONDITIONS} filter conditions per query")
        return cls(tuple(dict.fromkeys(conditions)), near)

    def __bool__(self) -> bool:
        return bool(self.conditions or self.near)

    def resolved(self, source: Source) -> Filters:
        """These filters with each name value (``NAME_ATTRIBUTES``) written as ``source`` stores
        it: 東京都, Tokyo, tokyo or ＴＯＫＹＯ all become the stored value(s). Values it does not
        have stay as asked, for ``check_filters`` to report with the closest ones."""
        if not any(_is_name(c) for c in self.conditions):
            return self
        conditions = [_resolve(source, c) if _is_name(c) else c for c in self.conditions]
        return Filters(tuple(dict.fromkeys(conditions)), self.near)

    @property
    def indexed(self) -> tuple[Condition, ...]:
        return tuple(
            c
            for c in self.conditions
            if isinstance(c, TagCondition | AttrCondition | RangeCondition)
        )

    def where(self, column: str = "rowid") -> tuple[str, tuple]:
        """`` AND +rowid IN (...)`` clauses for an FTS query. The unary ``+`` keeps SQLite from
        driving the FTS table by rowid lookups (one doclist walk per candidate)."""
        clauses, params = [], ()
        for condition in self.conditions:
            sql, args = condition.select()
            clauses.append(f" AND +{column} IN ({sql})")
            params += args
        return "".join(clauses), params


_LATIN_MARKS = re.compile(r"[\u0300-\u036f]")


def fold_name(text: str) -> str:
    """A name compared without case, width, accents or spacing: ＫＹＯＴＯ, kyoto, Kyōto and
    Kyoto are one. Only Latin/Greek/Cyrillic combining marks go: the kana voicing marks that
    NFKD also splits off (が = か + ゙) are put back by NFC."""
    bare = _LATIN_MARKS.sub("", unicodedata.normalize("NFKD", text))
    return " ".join(unicodedata.normalize("NFKC", bare).casefold().split())


def _is_name(condition: Condition) -> TypeGuard[AttrCondition]:
    return isinstance(condition, AttrCondition) and condition.name in NAME_ATTRIBUTES


def _name_attributes(source: Source, name: str) -> tuple[str, ...]:
    """``name`` and its alias attribute, those the source has."""
    return tuple(n for n in (name, name + ALIAS) if n in source.attributes)


def _resolve(source: Source, condition: AttrCondition) -> AttrCondition:
    names = _name_attributes(source, condition.name)
    if condition.name not in names:
        return condition  # check_filters says the source has no such attribute
    found = stored_spellings(source.conn, names, condition.values)
    values: list[str] = []
    within: set[str] = set()
    for asked in condition.values:
        pairs = found.get(asked)
        if not pairs:
            values.append(asked)  # matches nothing: check_filters says so, with the closest
            continue
        values += [value for _, value in pairs]
        within.update(attr for attr, _ in pairs)
    # Reading every value in every attribute of ``within`` is harmless: a name stored as an
    # area or as an area's other name denotes the same area.
    within_names = tuple(sorted(within)) or (condition.name,)
    return AttrCondition(condition.name, tuple(dict.fromkeys(values)), within_names)


def stored_spellings(
    conn: db.Connection, names: tuple[str, ...], values: tuple[str, ...]
) -> dict[str, list[tuple[str, str]]]:
    """Each value → the (attribute, value) pairs stored for it: the exact spelling where one
    exists (one index seek), else every value equal to it through ``fold_name`` (a scan of
    the attribute's values, a few thousand admin areas)."""
    found: dict[str, list[tuple[str, str]]] = {}
    for value in values:
        exact = unicodedata.normalize("NFKC", value)
        rows = conn.execute(
            f"SELECT name, value FROM attr_counts WHERE name IN ({_marks(names)}) "
            "AND value IN (?, ?)",
            (*names, value, exact),
        ).fetchall()
        if rows:
            found[value] = [tuple(r) for r in rows]
    missing: dict[str, list[str]] = {}
    for value in values:
        if value not in found:
            missing.setdefault(fold_name(value), []).append(value)
    if missing:
        for name, stored in conn.execute(
            f"SELECT name, value FROM attr_counts WHERE name IN ({_marks(names)})", names
        ):
            for asked in missing.get(fold_name(stored), ()):
                found.setdefault(asked, []).append((name, stored))
    return found


def _marks(items: Sized) -> str:
    return ",".join("?" * len(items))


def _split_or(value: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(v.strip() for v in str(value).split(",") if v.strip()))


_COMPARISON = re.compile(r"[<>=]")


def parse_attr(text: str) -> tuple[str, str, str]:
    """``name=value`` (one of the values, comma = OR) or ``name>number`` (also ``>=``, ``<``,
    ``<=``): the first of ``= < >`` decides which (ops/patterns.ATTR states the same)."""
    found = _COMPARISON.search(text)
    name = text[: found.start()].strip() if found else ""
    op = found.group(0) if found else ""
    value = text[found.end() :] if found else ""
    if op in "<>" and value.startswith("="):
        op, value = op + "=", value[1:]
    if not name or not value.strip():
        raise BadQuery(
            f"an attribute filter is name=value or name>number, got {text!r}",
            hint="e.g. {see}",
            see=Option("attr", "population>=1000000"),
        )
    if op != "=" and not _DECIMAL.fullmatch(value.strip()):
        raise BadQuery(
            f"{name}{op} compares with a number, got {value.strip()!r}",
            hint="e.g. {see}",
            see=Option("attr", f"{name}{op}1000"),
        )
    return name, op, value.strip()


def parse_bbox(text: str) -> BoxCondition:
    try:
        south, west, north, east = (_degrees(v) for v in text.split(","))
    except ValueError as exc:
        raise BadQuery(
            f"bbox is south,west,north,east in degrees, got {text!r}",
            hint="e.g. {see}",
            see=Option("bbox", "34.9,135.6,35.1,135.9"),
        ) from exc
    if not (-90 <= south <= north <= 90 and -180 <= west <= 180 and -180 <= east <= 180):
        raise BadQuery(f"bbox {text!r} is not south ≤ north within ±90 and longitudes within ±180")
    if west > east:
        raise BadQuery("bbox crossing the antimeridian is not supported; split it in two")
    return BoxCondition(south, west, north, east)


_DECIMAL = re.compile(r"[-+]?[0-9]+(?:\.[0-9]+)?")


def _degrees(text: str) -> float:
    """A number of degrees written as a plain decimal, between the spaces ``str.strip``
    removes: exactly what the API's documented patterns (ops/patterns.py) describe. ``float``
    alone would also take "1e1", "1_0", "inf" and "5.", and keep U+001C–U+001F."""
    stripped = text.strip()
    if not _DECIMAL.fullmatch(stripped):
        raise ValueError(text)
    return float(stripped)


def parse_near(text: str, radius_km: float | None = None) -> Near:
    try:
        lat, lon = (_degrees(v) for v in text.split(","))
    except ValueError as exc:
        raise BadQuery(
            f"near is lat,lon in degrees, got {text!r}",
            hint="e.g. {see}",
            see=Option("near", "35.71,139.80"),
        ) from exc
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        raise BadQuery(f"near {text!r} is outside ±90 latitude / ±180 longitude")
    return Near(lat, lon, checked_radius(radius_km), label=text)


def checked_radius(radius_km: float | None) -> float | None:
    if radius_km is None:
        return None
    if not radius_km > 0:
        raise BadQuery(f"radius_km must be positive, got {radius_km}")
    return min(float(radius_km), 20_100.0)


@dataclass
class FilterCheck:
    notes: list[str] = field(default_factory=list)
    impossible: bool = False  # a condition matches no document at all


def check_filters(source: Source, filters: Filters) -> FilterCheck:
    """Refuse conditions the source can never satisfy; explain the ones that match nothing."""
    check = FilterCheck()
    conn = source.conn
    for condition in filters.conditions:
        if isinstance(condition, TagCondition):
            _check_tags(source, condition, check)
        elif isinstance(condition, AttrCondition):
            _check_attr(source, condition, check)
        elif isinstance(condition, RangeCondition):
            _check_range(source, condition, check)
    if (
        filters.near
        or any(isinstance(c, BoxCondition | WithinCondition) for c in filters.conditions)
    ) and not (conn.execute("SELECT 1 FROM doc_points LIMIT 1").fetchone()):
        raise SourceLacks(
            f"source {source.name!r} has no coordinates, so bbox/near can never match",
            source=source.name,
            has=with_points,
        )
    return check


def _check_tags(source: Source, condition: TagCondition, check: FilterCheck) -> None:
    conn = source.conn
    if not conn.execute("SELECT 1 FROM tag_counts LIMIT 1").fetchone():
        raise BadQuery(
            f"source {source.name!r} has no tags, so a tag filter can never match",
            source=source.name,
            hint="search without {see}, or use a source that has tags",
            see=Option("tag"),
        )
    marks = ",".join("?" * len(condition.tags))
    present = {
        r[0]
        for r in conn.execute(f"SELECT tag FROM tag_counts WHERE tag IN ({marks})", condition.tags)
    }
    missing = [t for t in condition.tags if t not in present]
    for tag in missing:
        similar = similar_tags(conn, tag)
        check.notes.append(Notice("no_such_tag", tag=tag, similar=similar))
    if not present:
        check.impossible = True


def _check_range(source: Source, condition: RangeCondition, check: FilterCheck) -> None:
    _require_attribute(source, condition.name)
    if condition.estimate(source.conn):
        return
    low, high = source.conn.execute(
        "SELECT min(CAST(value AS REAL)), max(CAST(value AS REAL)) FROM attr_counts "
        "WHERE name = ? AND trim(value, '0123456789.-') = '' AND value GLOB '*[0-9]*'",
        (condition.name,),
    ).fetchone()
    if low is None:
        raise BadQuery(
            f"attribute {condition.name!r} of {source.name!r} holds no numbers, so "
            f"{condition.describe()} can never match",
            source=source.name,
            hint="compare it with {see}",
            see=Option("attr", f"{condition.name}=VALUE"),
        )
    check.notes.append(
        Notice(
            "no_value_in_range",
            name=condition.name,
            op=condition.op,
            bound=_number(condition.bound),
            low=_number(low),
            high=_number(high),
        )
    )
    check.impossible = True


def _number(value: float) -> str:
    """1000000000, not 1e+09: as the user typed it and as the values are stored."""
    return f"{value:.0f}" if float(value).is_integer() else f"{value}"


def _require_attribute(source: Source, name: str) -> None:
    known = set(source.attributes)
    if name not in known:
        label = name if name in NAMED_ATTRIBUTES else f"attr={name}"
        raise SourceLacks(
            f"source {source.name!r} has no attribute {name!r}, so {label}=... can never match",
            has=with_attribute(name),
            source=source.name,
            known_attributes=sorted(known),
            candidates=difflib.get_close_matches(name, sorted(known), n=5) or None,
        )


def _check_attr(source: Source, condition: AttrCondition, check: FilterCheck) -> None:
    name = condition.name
    _require_attribute(source, name)
    where, params = condition.clause()
    present = {
        r[0] for r in source.conn.execute(f"SELECT value FROM attr_counts WHERE {where}", params)
    }
    missing = [v for v in condition.values if v not in present]
    if missing:
        names = _name_attributes(source, name) if name in NAME_ATTRIBUTES else (name,)
        values = similar_values(source.conn, name, missing[0], names=names)
        check.notes.append(Notice("no_such_value", name=name, values=missing, similar=values))
    if not present:
        check.impossible = True


def similar_tags(conn: db.Connection, tag: str, n: int = 5) -> list[str]:
    """Tags sharing the first characters or close in spelling, most used first."""
    rows = conn.execute(
        "SELECT tag FROM tag_counts WHERE tag >= ? AND tag < ? ORDER BY n DESC LIMIT ?",
        (tag[:2], tag[:2] + "\U0010ffff", 50),
    ).fetchall()
    names = [r[0] for r in rows]
    return difflib.get_close_matches(tag, names, n=n, cutoff=0.3) or names[:n]


def similar_values(
    conn: db.Connection, name: str, value: str, n: int = 8, names: tuple[str, ...] = ()
) -> list[str]:
    """The values of an attribute (or of ``names``: an area and its other-language names)
    closest in spelling to ``value``, closest first, compared through ``fold_name``; a
    feature's within its key (amenity=caffe → amenity=cafe). A name (``NAME_ATTRIBUTES``)
    first gets the stored values naming the same area in another language (``same_areas``):
    no spelling is close between 東京都 and Tokyo. None when nothing is close: the commonest
    values (England, California for 東京都) would only mislead."""
    key = value.split("=", 1)[0] + "=" if name == "feature" and "=" in value else ""
    by_fold: dict[str, list[str]] = {}
    for stored in _value_pool(conn, names or (name,), key, fold_name(value[len(key) :])[:1]):
        by_fold.setdefault(fold_name(stored), []).append(stored)
    same = [f for f in same_areas(value) if f in by_fold] if name in NAME_ATTRIBUTES else []
    close = difflib.get_close_matches(fold_name(value), list(by_fold), n=n, cutoff=SIMILAR_CUTOFF)
    return list(dict.fromkeys(v for f in (*same, *close) for v in by_fold[f]))[:n]


@functools.cache
def _area_groups() -> dict[str, tuple[str, ...]]:
    """Each known area name, folded → every folded name of that area (47 prefectures)."""
    # imported here: a search that never misses an area need not load the GeoNames kind
    from chiezo.ingest.geonames import known_area_names

    groups: dict[str, tuple[str, ...]] = {}
    for names in known_area_names():
        folded = tuple(dict.fromkeys(fold_name(n) for n in names))
        for one in folded:
            groups[one] = folded
    return groups


def same_areas(value: str) -> tuple[str, ...]:
    """The other names (folded) of the area ``value`` names: 東京都 → 東京, tokyo."""
    asked = fold_name(value)
    return tuple(f for f in _area_groups().get(asked, ()) if f != asked)


def _value_pool(conn: db.Connection, names: tuple[str, ...], key: str, first: str) -> list[str]:
    """The values to compare: all of them (starting with ``key``), or, past SIMILAR_POOL (a
    Wikidata id per document), those whose next letter is ``first`` in either case."""
    where = f"name IN ({_marks(names)}) AND value >= ? AND value < ?"
    sql = f"SELECT value FROM attr_counts WHERE {where} LIMIT {SIMILAR_POOL + 1}"
    pool = [r[0] for r in conn.execute(sql, (*names, key, key + "\U0010ffff"))]
    if len(pool) <= SIMILAR_POOL or not first:
        return pool
    pool = []
    for start in dict.fromkeys((key + first, key + first.upper())):
        pool += [r[0] for r in conn.execute(sql, (*names, start, start + "\U0010ffff"))]
    return pool


def filter_ids(conn: db.Connection, filters: Filters, ids: list[int]) -> list[int]:
    """The ids (order kept) that satisfy every condition."""
    kept = list(ids)
    for condition in filters.conditions:
        if not kept:
            break
        members = condition.keep(conn, kept)
        kept = [i for i in kept if i in members]
    return kept
