"""Areas as shapes: polygons (with holes, several parts) and whether a point lies inside.

A shape is a set of rings under the even-odd rule — a point is inside when a ray from it
crosses an odd number of ring edges — so holes and the parts of a multipolygon need no
bookkeeping of which ring belongs to which (GeoJSON's outer/inner order is not trusted: OSM's
assembled areas and a user's polygon both arrive here).

Testing a point against every edge costs too much for a city boundary of thousands of vertices
tested against tens of thousands of points, so a shape keeps a grid over its bounding box
(``GRID`` × ``GRID``): a cell no edge crosses is wholly inside or outside (decided once, from its
centre), and a point in such a cell is answered by one lookup; a point in a cell an edge
crosses casts its ray only against the edges of its grid row (a horizontal ray at latitude y
can only cross edges whose latitude span holds y, and those all touch that row).

SQL sees a shape through one function, ``chiezo_within(key, lat, lon)``, registered on every
reader connection (core/db.py): a condition (search/filters.py) registers its shape here under a
key and names the key in its SQL, so the planner's plans — driving, ``EXISTS`` per row,
``IN`` for full-text — work on polygons as on any index set. The grid's decided cells go into
the SQL too (``cell_sql``, ``decided_cells``): a point in one is answered by SQLite's own
arithmetic, and only those in edge cells call back into Python — at 1M places a city polygon
of 200 vertices holding ~14,000 of them took p50 89 / p99 137 ms calling Python for every
candidate (~3 µs a call), against 35 ms for its bounding box alone (bench/filter_scale.py).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field

Point = tuple[float, float]  # (lon, lat)
Ring = list[Point]  # first point not repeated at the end
# an edge of a ring: (ring index, index of its end point, start point, end point)
RingEdge = tuple[int, int, Point, Point]
GRID = 128  # 128² cells: 14 % of a city polygon's box in edge cells, against 27 % at 64
REGISTERED_MAX = 256  # shapes kept for SQL at once; a shape is re-registered when it is used


def point_in_ring(x: float, y: float, ring: Ring) -> bool:
    """Ray casting (even-odd rule)."""
    inside = False
    j = len(ring) - 1
    for i in range(len(ring)):
        xi, yi = ring[i]
        xj, yj = ring[j]
        if (yi > y) != (yj > y) and x < (xj - xi) * (y - yi) / (yj - yi) + xi:
            inside = not inside
        j = i
    return inside


Edge = tuple[float, float, float, float]  # x1, y1, x2, y2


@dataclass
class Shape:
    """Rings under the even-odd rule, with a bounding box and a grid for fast tests."""

    rings: list[Ring]
    label: str = ""
    bbox: tuple[float, float, float, float] = (0.0, 0.0, 0.0, 0.0)  # west, south, east, north
    _rows: list[list[Edge]] = field(default_factory=list, repr=False)
    _cells: list[list[int]] = field(default_factory=list, repr=False)  # 0 out, 1 in, 2 edge

    def __post_init__(self) -> None:
        xs = [x for ring in self.rings for x, _ in ring]
        ys = [y for ring in self.rings for _, y in ring]
        self.bbox = (min(xs), min(ys), max(xs), max(ys))
        self._index()

    @property
    def vertices(self) -> int:
        return sum(len(r) for r in self.rings)

    @functools.cached_property
    def key(self) -> str:
        """The same rings give the same key (SQL names a shape by it); hashed once — a plan
        asks for it in every SQL fragment, and a city boundary is thousands of vertices."""
        digest = hashlib.blake2b(json.dumps(self.rings).encode(), digest_size=12)
        return digest.hexdigest()

    def area_deg2(self) -> float:
        """Even-odd area in square degrees (holes subtract when they lie in a part)."""
        total = 0.0
        for ring in self.rings:
            twice = sum(
                ring[i - 1][0] * ring[i][1] - ring[i][0] * ring[i - 1][1] for i in range(len(ring))
            )
            total += abs(twice) / 2
        return total

    def _cell_of(self, x: float, y: float) -> tuple[int, int]:
        west, south, east, north = self.bbox
        cx = int((x - west) / max(east - west, 1e-12) * GRID)
        cy = int((y - south) / max(north - south, 1e-12) * GRID)
        return min(max(cx, 0), GRID - 1), min(max(cy, 0), GRID - 1)

    def _index(self) -> None:
        west, south, east, north = self.bbox
        height = max(north - south, 1e-12) / GRID
        width = max(east - west, 1e-12) / GRID
        self._rows = [[] for _ in range(GRID)]
        self._cells = [[0] * GRID for _ in range(GRID)]
        for ring in self.rings:
            for i in range(len(ring)):
                x1, y1 = ring[i - 1]
                x2, y2 = ring[i]
                if y1 == y2:
                    continue  # a horizontal edge is never crossed by a horizontal ray
                low, high = sorted((self._cell_of(x1, y1)[1], self._cell_of(x2, y2)[1]))
                for row in range(low, high + 1):
                    self._rows[row].append((x1, y1, x2, y2))
                self._mark_cells(x1, y1, x2, y2)
        for cy in range(GRID):
            cells, cx = self._cells[cy], 0
            while cx < GRID:
                if cells[cx] == 2:
                    cx += 1
                    continue
                # a run of cells no edge touches lies wholly on one side: one ray decides it
                centre = (west + (cx + 0.5) * width, south + (cy + 0.5) * height)
                decided = 1 if self._cast(*centre, cy) else -1
                while cx < GRID and cells[cx] != 2:
                    cells[cx] = decided
                    cx += 1

    def _mark_cells(self, x1: float, y1: float, x2: float, y2: float) -> None:
        """Mark every cell the segment's bounding cells touch as an edge cell (a superset:
        such a cell is only tested the slow way, never answered wrongly)."""
        (ax, ay), (bx, by) = self._cell_of(x1, y1), self._cell_of(x2, y2)
        for cy in range(min(ay, by), max(ay, by) + 1):
            for cx in range(min(ax, bx), max(ax, bx) + 1):
                self._cells[cy][cx] = 2

    def _cast(self, x: float, y: float, row: int) -> bool:
        inside = False
        for x1, y1, x2, y2 in self._rows[row]:
            if (y1 > y) != (y2 > y) and x < (x2 - x1) * (y - y1) / (y2 - y1) + x1:
                inside = not inside
        return inside

    @functools.cached_property
    def cell_codes(self) -> bytes:
        """Each grid cell (``row * GRID + column``) as a byte: 1 wholly inside, 0 wholly
        outside, 2 crossed by an edge. SQL reads a point's with ``substr`` (O(1) on a blob) and
        answers it without calling back into Python unless it is 2 (cell_sql)."""
        code = {1: 1, -1: 0, 2: 2}
        return bytes(code[cell] for row in self._cells for cell in row)

    def cell_sql(self, lat: str, lon: str) -> str:
        """The SQL expression of a point's cell, as ``_cell_of`` computes it (a point outside
        the box gets a number no list holds, and is left to ``chiezo_within``)."""
        west, south, east, north = self.bbox
        kx = GRID / max(east - west, 1e-12)
        ky = GRID / max(north - south, 1e-12)
        return (
            f"(CAST(({lat} - {south!r}) * {ky!r} AS INTEGER) * {GRID} "
            f"+ CAST(({lon} - {west!r}) * {kx!r} AS INTEGER))"
        )

    def contains(self, lon: float, lat: float) -> bool:
        west, south, east, north = self.bbox
        if not (west <= lon <= east and south <= lat <= north):
            return False
        cx, cy = self._cell_of(lon, lat)
        cell = self._cells[cy][cx]
        if cell != 2:
            return cell == 1
        return self._cast(lon, lat, cy)


# -- validation of a shape someone wrote -----------------------------------------------------


def self_intersection(rings: list[Ring]) -> tuple[int, int] | None:
    """The first two edges (as ring index, edge index of the first) that cross, or None.
    Edges are bucketed on a grid so that only neighbours are compared: a 1,000-vertex polygon
    is checked in milliseconds, not a million pair tests."""
    edges: list[RingEdge] = [
        (r, i, ring[i - 1], ring[i]) for r, ring in enumerate(rings) for i in range(len(ring))
    ]
    if not edges:
        return None
    xs = [p[0] for _, _, a, b in edges for p in (a, b)]
    ys = [p[1] for _, _, a, b in edges for p in (a, b)]
    west, south = min(xs), min(ys)
    span = max(max(xs) - west, max(ys) - south, 1e-12)
    cells = max(1, int(math.sqrt(len(edges))))
    buckets: dict[tuple[int, int], list[int]] = {}
    for n, (_, _, a, b) in enumerate(edges):
        x0, x1 = sorted((a[0], b[0]))
        y0, y1 = sorted((a[1], b[1]))
        for cx in range(_bucket(x0, west, span, cells), _bucket(x1, west, span, cells) + 1):
            for cy in range(_bucket(y0, south, span, cells), _bucket(y1, south, span, cells) + 1):
                buckets.setdefault((cx, cy), []).append(n)
    for members in buckets.values():
        for i, m in enumerate(members):
            for n in members[i + 1 :]:
                if _adjacent(edges[m], edges[n], rings):
                    continue
                if _segments_cross(edges[m][2], edges[m][3], edges[n][2], edges[n][3]):
                    return edges[m][0], edges[m][1]
    return None


def _bucket(value: float, origin: float, span: float, cells: int) -> int:
    return min(int((value - origin) / span * cells), cells - 1)


def _adjacent(e: RingEdge, f: RingEdge, rings: list[Ring]) -> bool:
    """Two consecutive edges of one ring share a vertex by construction."""
    if e[0] != f[0]:
        return False
    size = len(rings[e[0]])
    return abs(e[1] - f[1]) in (1, size - 1)


def _orientation(a: Point, b: Point, c: Point) -> float:
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])


def _segments_cross(a: Point, b: Point, c: Point, d: Point) -> bool:
    """Whether segments ab and cd share a point (touching counts: a ring that touches itself
    is as ambiguous as one that crosses)."""
    d1, d2 = _orientation(c, d, a), _orientation(c, d, b)
    d3, d4 = _orientation(a, b, c), _orientation(a, b, d)
    if ((d1 > 0) != (d2 > 0) and d1 != 0 and d2 != 0) and (
        (d3 > 0) != (d4 > 0) and d3 != 0 and d4 != 0
    ):
        return True
    return any(
        o == 0 and _on_segment(p, q, r)
        for o, p, q, r in ((d1, c, d, a), (d2, c, d, b), (d3, a, b, c), (d4, a, b, d))
    )


def _on_segment(p: Point, q: Point, r: Point) -> bool:
    return min(p[0], q[0]) <= r[0] <= max(p[0], q[0]) and min(p[1], q[1]) <= r[1] <= max(p[1], q[1])


# -- shapes seen from SQL ----------------------------------------------------------------------

_registered: OrderedDict[str, Shape] = OrderedDict()
_lock = threading.Lock()


def register(shape: Shape) -> str:
    """Make ``shape`` answer ``chiezo_within(key, lat, lon)``; returns its key."""
    key = shape.key
    with _lock:
        _registered[key] = shape
        _registered.move_to_end(key)
        while len(_registered) > REGISTERED_MAX:
            _registered.popitem(last=False)
    return key


def within(key: str, lat: float, lon: float) -> int:
    """The SQL function: 1 when the point is inside the shape registered as ``key``."""
    shape = _registered.get(key)
    if shape is None:  # evicted mid-query by 256 newer shapes: fail loudly, never answer 0
        raise KeyError(f"shape {key} is no longer registered")
    return 1 if shape.contains(lon, lat) else 0


SQL_FUNCTION = ("chiezo_within", 3, within)
