"""``within``: the area a search or filter keeps to, written three ways.

* a GeoJSON ``Polygon`` or ``MultiPolygon`` (bare, or as a ``Feature``'s geometry), lon/lat
  in degrees as GeoJSON has them;
* a box ``south,west,north,east`` (as ``bbox``);
* a named area of a built OSM source, ``source:name`` (``osm_kanto:東京都``): that source's admin
  boundary, kept at build time (ingest/osm.py ``store_shapes``).

A shape someone wrote is checked before it is used, because a wrong one silently answers wrong
(a bow-tie polygon's even-odd inside is not what its author meant): rings must be closed, have
at least three distinct points, stay within ±90/±180, not cross themselves or each other, and
stay within ``MAX_VERTICES`` — a 400 names the limit and the ring at fault. A boundary from the
user's own OSM build is trusted (it was assembled by osmium) and may be larger.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from chiezo.core import db
from chiezo.core.errors import BadQuery, Option
from chiezo.core.geometry import Ring, Shape, self_intersection
from chiezo.search.filters import fold_name, parse_bbox
from chiezo.search.lacks import SourceLacks
from chiezo.store.library import Source

MAX_VERTICES = 1_000  # a written polygon; checked for crossings in ~20 ms at this size
MAX_RINGS = 100
MAX_WITHIN_CHARS = 7_000  # a GET must carry it: 9 bytes a character escaped stays under 64 KiB
EXAMPLE_POLYGON = (
    '{"type":"Polygon","coordinates":[[[139.74,35.67],[139.80,35.67],'
    "[139.80,35.72],[139.74,35.72],[139.74,35.67]]]}"
)


def is_named(text: str) -> bool:
    """``source:name`` rather than GeoJSON or a box."""
    stripped = text.strip()
    return not stripped.startswith(("{", "[")) and ":" in stripped


def parse_within(text: str) -> Shape:
    """A written shape (GeoJSON or a box) checked; a named one is ``named_area``'s."""
    stripped = text.strip()
    if len(stripped) > MAX_WITHIN_CHARS:
        raise BadQuery(
            f"within is {len(stripped):,} characters long; the limit is {MAX_WITHIN_CHARS:,}",
            hint=f"simplify the polygon to at most {MAX_VERTICES:,} vertices",
        )
    if not stripped.startswith(("{", "[")):
        box = parse_bbox(stripped)
        ring = [(box.west, box.south), (box.east, box.south), (box.east, box.north)]
        ring.append((box.west, box.north))
        return Shape([ring], label=f"bbox {stripped}")
    try:
        document = json.loads(stripped)
    except ValueError as exc:
        raise _bad(f"within is not valid JSON ({exc.args[0]})") from exc
    except RecursionError as exc:  # [[[[… thousands deep: no GeoJSON nests past four
        raise _bad("within nests too deeply to be GeoJSON") from exc
    return _checked(_rings_of(document), label="polygon")


def _bad(message: str) -> BadQuery:
    return BadQuery(
        message,
        hint="give a GeoJSON Polygon or MultiPolygon (lon,lat), a box south,west,north,east, "
        "or source:name of an OSM admin area, e.g. {see}",
        see=Option("within", EXAMPLE_POLYGON),
    )


def _rings_of(document: Any) -> list[list[Any]]:
    if isinstance(document, dict) and document.get("type") == "Feature":
        document = document.get("geometry")
    if not isinstance(document, dict):
        raise _bad("within must be a GeoJSON object with a type")
    kind, coordinates = document.get("type"), document.get("coordinates")
    if not isinstance(coordinates, list) or not coordinates:
        raise _bad(f"within: a {kind} needs its coordinates")
    if kind == "Polygon":
        return coordinates
    if kind == "MultiPolygon":
        if not all(isinstance(p, list) for p in coordinates):
            raise _bad("within: a MultiPolygon's coordinates are a list of polygons")
        return [ring for polygon in coordinates for ring in polygon]
    raise _bad(f"within takes a Polygon or MultiPolygon, got type {kind!r}")


def _checked(raw_rings: list[Any], label: str) -> Shape:
    if len(raw_rings) > MAX_RINGS:
        raise _bad(f"within has {len(raw_rings)} rings; the limit is {MAX_RINGS}")
    rings = [_ring(raw, n) for n, raw in enumerate(raw_rings, 1)]
    vertices = sum(len(r) for r in rings)
    if vertices > MAX_VERTICES:
        raise _bad(f"within has {vertices:,} vertices; the limit is {MAX_VERTICES:,}")
    crossing = self_intersection(rings)
    if crossing is not None:
        ring, edge = crossing
        raise _bad(
            f"within crosses itself: ring {ring + 1}, edge {edge + 1} meets another edge "
            "(a crossing polygon has no clear inside)"
        )
    shape = Shape(rings, label=label)
    if shape.area_deg2() == 0:
        raise _bad("within encloses no area")
    return shape


def _ring(raw: Any, n: int) -> Ring:
    if not isinstance(raw, list) or not all(
        isinstance(p, list | tuple)
        and len(p) >= 2
        and all(isinstance(c, int | float) and not isinstance(c, bool) for c in p[:2])
        for p in raw
    ):
        raise _bad(f"within: ring {n} is not a list of [lon, lat] positions")
    try:
        points = [(float(p[0]), float(p[1])) for p in raw]
    except OverflowError as exc:  # an integer of 400 digits is no degree
        raise _bad(f"within: ring {n} has a number outside ±180 / ±90") from exc
    for lon, lat in points:
        if not (-180 <= lon <= 180 and -90 <= lat <= 90):
            raise _bad(
                f"within: ring {n} has [{lon}, {lat}], outside ±180 longitude / ±90 latitude "
                "(GeoJSON is [lon, lat])"
            )
    if len(points) < 4 or points[0] != points[-1]:
        raise _bad(
            f"within: ring {n} is not closed (GeoJSON repeats the first position at the end, "
            "at least 4 positions)"
        )
    ring = points[:-1]
    if len(set(ring)) < 3:
        raise _bad(f"within: ring {n} has fewer than 3 distinct points")
    return ring


# -- named areas -------------------------------------------------------------------------------


def has_shapes(source: Source) -> bool:
    return bool(
        source.conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'area_shapes'"
        ).fetchone()
    )


def named_area(source: Source, name: str) -> Shape:
    """The admin boundary ``name`` of an OSM ``source`` (its spelling folded: tokyo, ＴＯＫＹＯ);
    several boundaries of that name (a town and its ward) → the most detailed level's union
    is not meant, so the lowest admin level (the larger area) is used and said."""
    if not has_shapes(source):
        raise SourceLacks(
            f"source {source.name!r} has no admin boundaries to take {name!r} from",
            has=has_shapes,
            source=source.name,
            hint="name an area of an OSM source built by this version (chiezo rebuild it), or "
            "give a GeoJSON polygon",
        )
    rows = _rows_named(source.conn, name)
    if not rows:
        names = [r[0] for r in source.conn.execute("SELECT DISTINCT name FROM area_shapes")]
        by_fold = {fold_name(n): n for n in names}
        close = difflib.get_close_matches(fold_name(name), list(by_fold), n=8, cutoff=0.4)
        raise BadQuery(
            f"source {source.name!r} has no admin area named {name!r}",
            source=source.name,
            candidates=[by_fold[c] for c in close] or sorted(names)[:8] or None,
        )
    rowid, found, level = rows[0]
    (rings,) = source.conn.execute(
        "SELECT rings FROM area_shapes WHERE rowid = ?", (rowid,)
    ).fetchone()
    return Shape(
        [[(x, y) for x, y in ring] for ring in json.loads(rings)],
        label=f"{source.name}:{found} (admin_level {level})",
    )


def _rows_named(conn: db.Connection, name: str) -> list[tuple[int, str, str]]:
    """(rowid, name, level) of the boundaries called ``name``, the lowest level first."""
    order = "ORDER BY CAST(level AS INTEGER)"
    exact = conn.execute(
        f"SELECT rowid, name, level FROM area_shapes WHERE name = ? {order}", (name.strip(),)
    ).fetchall()
    if exact:
        return exact
    wanted = fold_name(name)
    rows = conn.execute(f"SELECT rowid, name, level FROM area_shapes {order}")
    return [row for row in rows if fold_name(row[1]) == wanted]
