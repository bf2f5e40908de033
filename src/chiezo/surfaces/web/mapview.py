"""An offline map: the points of a result page drawn as SVG over land and a graticule.

No tile server exists offline, so the map is only what the package and the library know — the
points, their numbers in the result list, a "you are here" mark for ``near``, the ``within``
area as a dashed outline, lines of latitude and longitude with their degrees and a scale bar,
so a reader can tell where (and how spread out) things are. Under them, at world and country
scale, land and borders from Natural Earth's 1:110m countries (public domain, carried in
``data/``); at city scale, where that layer's coast is kilometres off, the admin boundaries a
built OSM source kept instead (the caller looks them up: :data:`AreaLookup`). The projection is
equirectangular around the view's middle latitude (longitude scaled by its cosine): distances
look right at the scale of a city or a country.

With nothing to compare against, one point on an empty grid says no more than its two
numbers, so callers ask :func:`worth_drawing` first. Numbered labels never cover each other:
one that would is moved to the nearest free spot and tied to its place by a leader line
(:func:`place_labels`), so results a few metres apart still show every number.
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from html import escape
from importlib import resources

import numpy as np

WIDTH = 640
MIN_HEIGHT, MAX_HEIGHT = 220, 440
PAD = 28  # pixels around the points, room for the degree labels
MIN_SPAN_DEG = 0.01  # about a kilometre: points in one spot still get a sensible frame
STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 45, 90)
LABEL_HEIGHT = 16  # a numbered label: a pill this tall, wide enough for its digits
DIGIT_WIDTH = 6  # bold 9px digits are about 5.5px wide
LABEL_GAP = 2  # pixels kept free between two labels
CENTER_RADIUS = 7
METRES_PER_DEGREE = 111_195  # of latitude (a sphere of the mean earth radius)
SCALE_MAX_LAT_SPAN = 20  # degrees: beyond this one scale bar would mislead (see _scale_bar)
CITY_SPAN_DEG = 1.0  # a view less than this across (about 110 km) is at city scale
LAND_FILE = "ne_110m_countries.geojson"
# a shape may move this far when thinned: under a pixel, and more than the 0.71 px corners of
# the staircase that rounding to whole pixels makes of a smooth line
SIMPLIFY_PX = 0.75
THIN_PASSES = 1  # passes that may move a shape (each by up to SIMPLIFY_PX: errors add up)
CLIP_MARGIN = 4  # pixels: shapes are cut this far outside the canvas, where the cut is unseen
AREAS_DRAWN = 80  # admin boundaries at most on one map (the lookup gives the likeliest first)
NAME_SIZE = 10  # an area's name: 10px italic, a wide (CJK) character about this wide

LonLat = tuple[float, float]
Ring = Sequence[LonLat]  # (lon, lat) as GeoJSON has them; closed or not
LonLatBox = tuple[float, float, float, float]  # west, south, east, north (degrees)
Pixels = list[tuple[int, int]]


@dataclass(frozen=True)
class MapPoint:
    lat: float
    lon: float
    label: str
    href: str | None = None
    number: int | None = None  # its place in the result list
    distance_km: float | None = None  # from the query point, when there is one


@dataclass(frozen=True)
class HereMark:
    """The person's current location (``near=here``), drawn as its own layer: a marker with a
    word for a label and, when the browser said how well it knows it, a circle of that
    radius. Its numbers place it and appear nowhere in the SVG (no tooltip, no data
    attribute); ``expires_at_ms`` (epoch ms) lets the page's script remove it when the
    location may no longer be used (core/here.py)."""

    lat: float
    lon: float
    label: str
    expires_at_ms: int
    accuracy_m: float | None = None


@dataclass(frozen=True)
class Boundary:
    """An admin area drawn at city scale: a thin line with its name."""

    name: str
    level: str  # OSM admin_level: the lower, the larger the area and the bolder its line
    rings: Sequence[Ring]


# what the caller finds for a view at city scale: the boundaries whose box meets it
AreaLookup = Callable[[LonLatBox], list[Boundary]]
Box = tuple[float, float, float, float]  # left, top, width, height (SVG pixels)

# The map's own colours, light and dark, kept with the layers they paint (an SVG saved on its
# own still shows them); the page's --sea and --accent are used where it has them.
STYLE = (
    "<style>svg.map{--land:#ebe6d6;--border:#b3a98f;--area:#9b59c9;--area-text:#5d3f7a;"
    "--within:var(--accent,#2f5d50)}"
    "@media (prefers-color-scheme:dark){svg.map{--land:#2b3029;--border:#525a4e;"
    "--area:#b193d4;--area-text:#cdb8e6}}"
    ".map-land path{fill:var(--land);stroke:var(--border);stroke-width:.7;fill-rule:evenodd;"
    "stroke-linejoin:round}"
    ".map-area path{fill:none;stroke:var(--area);stroke-linejoin:round;opacity:.75}"
    ".map-area text{fill:var(--area-text);font-size:10px;font-style:italic;paint-order:stroke;"
    "stroke:var(--sea,#eef3f5);stroke-width:3px;stroke-linejoin:round;pointer-events:none}"
    ".map-within{fill:var(--within);fill-opacity:.08;stroke:var(--within);stroke-width:1.5;"
    "stroke-dasharray:6 4;fill-rule:evenodd}"
    ".map-here .map-accuracy{fill:#1a73e8;fill-opacity:.12;stroke:#1a73e8;stroke-width:1}"
    ".map-here .map-here-dot{fill:#1a73e8;stroke:#fff;stroke-width:2.5}"
    ".map-here text{fill:#1a73e8;font-size:11px;font-weight:700;paint-order:stroke;"
    "stroke:var(--sea,#eef3f5);stroke-width:3px;stroke-linejoin:round}</style>"
)


def worth_drawing(
    points: list[MapPoint],
    center: tuple[float, float] | HereMark | None = None,
    outline: Sequence[Ring] = (),
) -> bool:
    """A map adds something to a list only when there is something to compare: two or more
    points, or a point and the query point it was found around (a typed point, a document's,
    the person's own) or the area it was found in."""
    return len(points) >= 2 or (bool(center or outline) and len(points) >= 1)


def render_map(
    points: list[MapPoint],
    center: tuple[float, float] | None = None,
    title: str = "",
    width: int = WIDTH,
    max_height: int = MAX_HEIGHT,
    center_label: str = "",
    outline: Sequence[Ring] = (),
    areas: AreaLookup | None = None,
    here: HereMark | None = None,
    min_span_deg: float = MIN_SPAN_DEG,
) -> str:
    """The SVG (a string) for ``points``; empty when there is nothing to draw (no points and
    no ``center`` or ``here``). ``outline`` (rings of lon, lat) is the area searched, drawn
    dashed and kept in view; ``areas`` finds the admin boundaries to draw when the view is at
    city scale; ``here`` is the person's current location, its own layer; ``min_span_deg``
    the least the view spans (a lone point's locator map is wider than a city block)."""
    if not points and center is None and here is None:
        return ""
    marks = [center] if center else []
    marks += [(here.lat, here.lon)] if here else []
    lats = [p.lat for p in points] + [lat for lat, _ in marks]
    lons = [p.lon for p in points] + [lon for _, lon in marks]
    lats += [lat for ring in outline for _, lat in ring]
    lons += [lon for ring in outline for lon, _ in ring]
    frame = _Frame.around(
        min(lats), max(lats), min(lons), max(lons), width, max_height, min_span_deg
    )
    scale, scale_box = _scale_bar(frame)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="map" role="img" '
        f'viewBox="0 0 {width} {frame.height}" width="100%" '
        f'aria-label="{escape(title)}" data-points="{len(points)}">',
        STYLE,
        f'<rect class="map-sea" x="0" y="0" width="{width}" height="{frame.height}"/>',
        _ground(frame, areas),
        *frame.graticule(),
        _within(frame, outline),
        scale,
    ]
    obstacles = [scale_box] if scale_box else []
    if center:
        x, y = frame.xy(*center)
        parts.append(_center_mark(x, y, center_label))
        obstacles.append(_square(x, y, 2 * CENTER_RADIUS))
    if here:
        layer, boxes = _here_layer(frame, here)
        parts.append(layer)
        obstacles += boxes
    others = [p for p in points if p.number is None]
    numbered = sorted((p for p in points if p.number is not None), key=lambda p: p.number or 0)
    parts += [_dot(frame, p) for p in others]
    anchors = [(*frame.xy(p.lat, p.lon), *_label_size(p.number)) for p in numbered]
    spots = place_labels(anchors, obstacles, (0, 0, width, frame.height))
    # the first result drawn last: on top of any leader line that crosses it
    for point, anchor, spot in reversed(list(zip(numbered, anchors, spots, strict=True))):
        parts.append(_numbered(point, anchor, spot))
    parts.append("</svg>")
    return "".join(parts)


# -- what lies under the points -----------------------------------------------------------------


def _ground(frame: _Frame, areas: AreaLookup | None) -> str:
    """Land and borders at world and country scale; at city scale, where Natural Earth's coast
    is off by more than the view shows, the admin boundaries the library knows instead."""
    if frame.across_deg >= CITY_SPAN_DEG:
        return _land(frame)
    return _areas(frame, areas(frame.view)[:AREAS_DRAWN]) if areas else ""


@dataclass(frozen=True)
class _Polygon:
    bbox: LonLatBox
    rings: tuple[tuple[LonLat, ...], ...]  # the outer ring, then its holes


@functools.cache
def _countries() -> tuple[_Polygon, ...]:
    """Natural Earth's country polygons, read once (a 170 KB file) when a map first needs them."""
    text = resources.files("chiezo.surfaces.web").joinpath("data", LAND_FILE).read_text("utf-8")
    out = []
    for feature in json.loads(text)["features"]:
        for polygon in feature["geometry"]["coordinates"]:
            rings = tuple(tuple((x, y) for x, y in ring) for ring in polygon)
            out.append(_Polygon(_bbox(rings[0]), rings))
    return tuple(out)


def _bbox(ring: Ring) -> LonLatBox:
    xs, ys = [x for x, _ in ring], [y for _, y in ring]
    return min(xs), min(ys), max(xs), max(ys)


def _meets(a: LonLatBox, b: LonLatBox) -> bool:
    return a[0] <= b[2] and b[0] <= a[2] and a[1] <= b[3] and b[1] <= a[3]


def _land(frame: _Frame) -> str:
    """Each country whose box meets the view, one filled path with its border stroked (a coast
    and a border look alike at this scale)."""
    view = frame.view
    paths = [
        d
        for polygon in _countries()
        if _meets(polygon.bbox, view)
        for d in [_path_data(frame.pixel_rings(polygon.rings))]
        if d
    ]
    if not paths:
        return ""
    return '<g class="map-land">' + "".join(f'<path d="{d}"/>' for d in paths) + "</g>"


def _within(frame: _Frame, outline: Sequence[Ring]) -> str:
    """The area searched: dashed, lightly filled, so the points inside it still show."""
    d = _path_data(frame.pixel_rings(outline))
    return f'<path class="map-within" d="{d}"/>' if d else ""


def _areas(frame: _Frame, boundaries: Sequence[Boundary]) -> str:
    """Admin boundaries as thin lines (bolder for a lower level, a larger area), each named
    at the middle of what is seen of it when the name has room there; the most local level's
    names are placed first."""
    lines: list[str] = []
    names: list[str] = []
    taken: list[Box] = []
    for boundary in sorted(boundaries, key=lambda b: -_level(b)):
        rings = frame.pixel_rings(boundary.rings)
        d = _path_data(rings)
        if not d:
            continue
        width = 2.5 if _level(boundary) <= 4 else 2 if _level(boundary) <= 6 else 1.5
        lines.append(f'<path d="{d}" stroke-width="{width}"/>')
        name = _area_name(frame, boundary.name, rings, taken)
        if name:
            names.append(name)
    if not lines:
        return ""
    return '<g class="map-area">' + "".join(reversed(lines)) + "".join(names) + "</g>"


def _level(boundary: Boundary) -> int:
    return int(boundary.level) if boundary.level.isdigit() else 99


def _area_name(frame: _Frame, name: str, rings: list[Pixels], taken: list[Box]) -> str:
    """The name at the middle of the boundary's visible part, or nothing when another name
    is already there (names of neighbouring towns must not run into each other)."""
    xs = [min(max(x, 0), frame.width) for ring in rings for x, _ in ring]
    ys = [min(max(y, 0), frame.height) for ring in rings for _, y in ring]
    x, y = (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2
    w = sum(NAME_SIZE if ord(c) > 0x2E80 else NAME_SIZE * 0.6 for c in name)
    box = _centred(x, y, w, NAME_SIZE + 2)
    if not name or any(_overlap(box, t) for t in taken):
        return ""
    taken.append(box)
    return f'<text x="{x:.0f}" y="{y + 3:.0f}" text-anchor="middle">{escape(name)}</text>'


def _path_data(rings: list[Pixels]) -> str:
    """SVG path data for pixel rings: integers, a pair after M taken as a line to it."""
    return "".join(
        "M" + " ".join(f"{x} {y}" for x, y in ring) + "Z" for ring in rings if len(ring) >= 3
    )


def clip(ring: Sequence[tuple[float, float]], bounds: Box) -> list[tuple[float, float]]:
    """The part of a polygon inside a rectangle (Sutherland–Hodgman: exact for a rectangle, a
    concave ring's pieces joined along the rectangle's edge, which lies outside the canvas)."""
    left, top, w, h = bounds
    out = list(ring)
    for axis, limit, keep_below in ((0, left, False), (0, left + w, True), (1, top, False)):
        out = _clip_side(out, axis, limit, keep_below)
    return _clip_side(out, 1, top + h, True)


def _clip_side(
    ring: list[tuple[float, float]], axis: int, limit: float, keep_below: bool
) -> list[tuple[float, float]]:
    def inside(p: tuple[float, float]) -> bool:
        return p[axis] <= limit if keep_below else p[axis] >= limit

    out = []
    for previous, current in zip(ring[-1:] + ring[:-1], ring, strict=True):
        if inside(current) != inside(previous):
            t = (limit - previous[axis]) / (current[axis] - previous[axis])
            out.append(
                (
                    previous[0] + t * (current[0] - previous[0]),
                    previous[1] + t * (current[1] - previous[1]),
                )
            )
        if inside(current):
            out.append(current)
    return out


def fitted(x: np.ndarray, y: np.ndarray, bounds: Box) -> Pixels:
    """A projected ring (whole pixels) made fit to draw: cut to ``bounds`` and thinned to what
    a pixel can show. Each run of vertices beyond one side of the bounds is first cut to its
    two ends (the line between those stays beyond that side, so the cut is the same), which
    leaves the clip, the one loop in Python, little to do: an OSM boundary has tens of
    thousands of vertices, most off the canvas at city scale."""
    x, y = _without_repeats(x, y)
    left, top, w, h = bounds
    if x.min() < left or x.max() > left + w or y.min() < top or y.max() > top + h:
        side = np.select([x < left, x > left + w, y < top, y > top + h], [1, 2, 3, 4], 0)
        ends = ~((side != 0) & (side == _before(side)) & (side == _after(side)))
        cut = clip(list(zip(x[ends].tolist(), y[ends].tolist(), strict=True)), bounds)
        if len(cut) < 3:
            return []
        x, y = _without_repeats(*np.round(np.array(cut)).T)
    x, y = _thinned(x, y)
    return list(zip(x.astype(int).tolist(), y.astype(int).tolist(), strict=True))


def _before(a: np.ndarray) -> np.ndarray:
    """Each element's predecessor around the ring."""
    return np.concatenate((a[-1:], a[:-1]))


def _after(a: np.ndarray) -> np.ndarray:
    return np.concatenate((a[1:], a[:1]))


def _without_repeats(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A ring without a vertex on the one before (rounding puts many on one pixel)."""
    moved = (x != _before(x)) | (y != _before(y))
    if not moved.any():  # the whole ring in one pixel
        return x[:1], y[:1]
    return x[moved], y[moved]


def _thinned(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Vertices a pixel cannot show dropped: in the first THIN_PASSES passes those within
    SIMPLIFY_PX of the line between their neighbours (a wiggle smaller than a pixel, a step
    of rounding's staircase), after that only those exactly on it (a straight run's middle, as along the clip's edges). Never
    two neighbours in one pass, so each is measured against vertices that stay, and the
    shape moves at most THIN_PASSES × SIMPLIFY_PX."""
    idle, turn = 0, 0
    while idle < 2 and len(x) > 4:  # two passes in a row (both parities) dropping nothing
        tolerance = SIMPLIFY_PX if turn < THIN_PASSES else 0.0
        drop = (_off_line(x, y) <= tolerance) & (np.arange(len(x)) % 2 == turn % 2)
        drop[-1] &= len(x) % 2 == 0  # the last and the first are neighbours too
        idle = 0 if drop.any() else idle + 1
        x, y, turn = x[~drop], y[~drop], turn + 1
    return x, y


def _off_line(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Each vertex's distance from the line through its two neighbours (pixels)."""
    px, py, nx, ny = _before(x), _before(y), _after(x), _after(y)
    base = np.hypot(nx - px, ny - py)
    cross = np.abs((nx - px) * (y - py) - (ny - py) * (x - px))
    return np.where(base > 0, cross / np.maximum(base, 1e-9), np.hypot(x - px, y - py))


# -- labels that do not hide each other --------------------------------------------------------


def place_labels(
    anchors: list[tuple[float, float, float, float]], obstacles: list[Box], bounds: Box
) -> list[Box]:
    """A box for each label (anchors: x, y, width, height, in priority order): centred on its
    point when that spot is free, else the nearest free spot on rings around it (greedy: an
    earlier label keeps the better place). Free means inside ``bounds`` and clear of every
    obstacle and every label placed before by LABEL_GAP."""
    taken = list(obstacles)
    out = []
    for x, y, w, h in anchors:
        box = next(
            (
                b
                for b in _candidates(x, y, w, h)
                if _inside(b, bounds) and not any(_overlap(b, t) for t in taken)
            ),
            _centred(x, y, w, h),
        )
        taken.append(box)
        out.append(box)
    return out


def _candidates(x: float, y: float, w: float, h: float) -> Iterator[Box]:
    """The spot itself, then rings of growing radius (each ring's spots a label apart), out to
    the size of a large map; the caller falls back to the spot itself past the last."""
    yield _centred(x, y, w, h)
    step = h + LABEL_GAP
    for ring in range(1, int(2 * MAX_HEIGHT // step)):
        radius = ring * step
        count = 8 * ring
        for i in range(count):
            angle = -math.pi / 2 + 2 * math.pi * i / count  # from straight up, clockwise
            # the ring stretched sideways as much as the labels are wider than tall
            yield _centred(x + math.cos(angle) * radius * w / h, y + math.sin(angle) * radius, w, h)


def _centred(x: float, y: float, w: float, h: float) -> Box:
    return (x - w / 2, y - h / 2, w, h)


def _square(x: float, y: float, side: float) -> Box:
    return _centred(x, y, side, side)


def _inside(box: Box, bounds: Box) -> bool:
    return (
        box[0] >= bounds[0]
        and box[1] >= bounds[1]
        and box[0] + box[2] <= bounds[0] + bounds[2]
        and box[1] + box[3] <= bounds[1] + bounds[3]
    )


def _overlap(a: Box, b: Box) -> bool:
    return (
        a[0] < b[0] + b[2] + LABEL_GAP
        and b[0] < a[0] + a[2] + LABEL_GAP
        and a[1] < b[1] + b[3] + LABEL_GAP
        and b[1] < a[1] + a[3] + LABEL_GAP
    )


def _label_size(number: int | None) -> tuple[float, float]:
    digits = len(str(number))
    return max(LABEL_HEIGHT, DIGIT_WIDTH * digits + 8), LABEL_HEIGHT


# -- what is drawn ------------------------------------------------------------------------------


def _tip(point: MapPoint) -> str:
    """The hover text: the name, then distance and coordinates on a line of their own (a
    distance never runs into the coordinates)."""
    where = f"{point.lat:.5f}, {point.lon:.5f}"
    if point.distance_km is not None:
        where = f"{point.distance_km:.2f} km · {where}"
    return f"<title>{escape(point.label)}\n{where}</title>"


def _dot(frame: _Frame, point: MapPoint) -> str:
    """A match beyond the page's own: a small unnumbered dot."""
    x, y = frame.xy(point.lat, point.lon)
    body = (
        f'<g class="map-point map-other" data-label="{escape(point.label)}">{_tip(point)}'
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5"/></g>'
    )
    return _linked(point, body)


def _numbered(point: MapPoint, anchor: tuple[float, ...], box: Box) -> str:
    """A numbered label at ``box``; moved off its point, a leader line and a dot mark the
    exact place."""
    x, y = anchor[0], anchor[1]
    left, top, w, h = box
    middle_x, middle_y = left + w / 2, top + h / 2
    exact = ""
    if (middle_x, middle_y) != (x, y):
        exact = (
            f'<line class="map-leader" x1="{x:.1f}" y1="{y:.1f}" x2="{middle_x:.1f}" '
            f'y2="{middle_y:.1f}"/><circle class="map-spot" cx="{x:.1f}" cy="{y:.1f}" r="2.5"/>'
        )
    label = (
        f'<rect class="map-label" x="{left:.1f}" y="{top:.1f}" width="{w:.1f}" '
        f'height="{h:.1f}" rx="{h / 2:.1f}"/>'
        f'<text x="{middle_x:.1f}" y="{middle_y + 3.5:.1f}" text-anchor="middle">'
        f"{point.number}</text>"
    )
    body = (
        f'<g class="map-point" data-label="{escape(point.label)}" '
        f'data-number="{point.number}">{_tip(point)}{exact}{label}</g>'
    )
    return _linked(point, body)


def _linked(point: MapPoint, body: str) -> str:
    return f'<a href="{escape(point.href)}">{body}</a>' if point.href else body


def _center_mark(x: float, y: float, label: str) -> str:
    tip = f"<title>{escape(label)}</title>" if label else ""
    return (
        f'<g class="map-center">{tip}<circle cx="{x:.1f}" cy="{y:.1f}" r="{CENTER_RADIUS}"/>'
        f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2"/></g>'
    )


def _here_layer(frame: _Frame, here: HereMark) -> tuple[str, list[Box]]:
    """The current location: a filled dot ringed in white (unlike the hollow ring of a typed
    ``near`` point), its accuracy as a translucent circle, and its word beside it; with the
    boxes numbered labels must keep clear of. Only pixels and the word are written: the SVG
    is part of a page a person may save or share."""
    x, y = frame.xy(here.lat, here.lon)
    accuracy = ""
    if here.accuracy_m:
        radius = here.accuracy_m * frame.y_scale / METRES_PER_DEGREE
        accuracy = f'<circle class="map-accuracy" cx="{x:.1f}" cy="{y:.1f}" r="{radius:.1f}"/>'
    width = sum(11 if ord(c) > 0x2E80 else 6.5 for c in here.label)
    # the word to the right of the dot, or to its left where it would leave the canvas
    right = x + CENTER_RADIUS + 3 + width <= frame.width
    tx = x + CENTER_RADIUS + 3 if right else x - CENTER_RADIUS - 3
    text = (
        f'<text x="{tx:.1f}" y="{y + 4:.1f}" text-anchor="{"start" if right else "end"}">'
        f"{escape(here.label)}</text>"
    )
    svg = (
        f'<g class="map-here" data-expires-at="{here.expires_at_ms}" '
        f'aria-label="{escape(here.label)}">{accuracy}'
        f'<circle class="map-here-dot" cx="{x:.1f}" cy="{y:.1f}" r="{CENTER_RADIUS - 1}"/>'
        f"{text}</g>"
    )
    word = (tx if right else tx - width, y - 8, width, 16.0)
    return svg, [_square(x, y, 2 * CENTER_RADIUS), word]


def _scale_bar(frame: _Frame) -> tuple[str, Box | None]:
    """A bar of a round length (1, 2 or 5 × 10ⁿ metres, at most a quarter of the width) in
    the top right corner, where no degree label is drawn; with its box, which labels avoid.
    True along the middle latitude: over a frame spanning many degrees of latitude the
    east–west scale changes too much for one bar, so none is drawn there."""
    if frame.north - frame.south > SCALE_MAX_LAT_SPAN:
        return "", None
    metres_per_px = METRES_PER_DEGREE / frame.y_scale
    longest = (frame.width - 2 * PAD) / 4 * metres_per_px
    power = 10 ** math.floor(math.log10(longest))
    metres = max(m * power for m in (1, 2, 5) if m * power <= longest)
    length = metres / metres_per_px
    right, y = frame.width - 10, 16
    left = right - length
    text = f"{metres:g} m" if metres < 1000 else f"{metres / 1000:g} km"
    svg = (
        f'<g class="map-scale"><path d="M{left:.1f} {y - 4} V{y} H{right:.1f} V{y - 4}"/>'
        f'<text x="{(left + right) / 2:.1f}" y="{y - 6}" text-anchor="middle">{text}</text></g>'
    )
    return svg, (left - 2, 0.0, length + 12, y + 4)


@dataclass(frozen=True)
class _Frame:
    south: float
    north: float
    west: float
    east: float
    x_scale: float  # pixels per degree of longitude
    y_scale: float  # pixels per degree of latitude
    height: int
    width: int

    @classmethod
    def around(
        cls,
        south: float,
        north: float,
        west: float,
        east: float,
        width: int,
        max_height: int,
        min_span_deg: float = MIN_SPAN_DEG,
    ) -> _Frame:
        middle = (south + north) / 2
        shrink = max(math.cos(math.radians(middle)), 0.05)
        lat_span = max(north - south, min_span_deg)
        lon_span = max(east - west, min_span_deg / shrink)
        south, north = middle - lat_span / 2, middle + lat_span / 2
        centre_lon = (west + east) / 2
        west, east = centre_lon - lon_span / 2, centre_lon + lon_span / 2
        inner = width - 2 * PAD
        # one scale in both directions (longitude shrunk by the cosine): shapes are not stretched
        per_deg = min(inner / (lon_span * shrink), (max_height - 2 * PAD) / lat_span)
        height = int(min(max(lat_span * per_deg + 2 * PAD, MIN_HEIGHT), max_height))
        # widen the frame to the canvas so that the points sit in the middle
        lat_span_canvas = (height - 2 * PAD) / per_deg
        lon_span_canvas = inner / (per_deg * shrink)
        return cls(
            south=middle - lat_span_canvas / 2,
            north=middle + lat_span_canvas / 2,
            west=centre_lon - lon_span_canvas / 2,
            east=centre_lon + lon_span_canvas / 2,
            x_scale=per_deg * shrink,
            y_scale=per_deg,
            height=height,
            width=width,
        )

    def xy(self, lat: float, lon: float) -> tuple[float, float]:
        return PAD + (lon - self.west) * self.x_scale, PAD + (self.north - lat) * self.y_scale

    @property
    def view(self) -> LonLatBox:
        """The whole canvas in degrees (the frame plus its padding): what shapes must meet."""
        return (
            self.west - PAD / self.x_scale,
            self.north - (self.height - PAD) / self.y_scale,
            self.west + (self.width - PAD) / self.x_scale,
            self.north + PAD / self.y_scale,
        )

    @property
    def across_deg(self) -> float:
        """The canvas's longer side in degrees of latitude (111 km each): the map's scale."""
        return max(self.width, self.height) / self.y_scale

    def pixel_rings(self, rings: Sequence[Ring]) -> list[Pixels]:
        """Rings of (lon, lat) projected, cut to the canvas and rounded to whole pixels; a ring
        left with nothing to show (outside, or smaller than a pixel) is dropped."""
        bounds = (
            -CLIP_MARGIN,
            -CLIP_MARGIN,
            self.width + 2 * CLIP_MARGIN,
            self.height + 2 * CLIP_MARGIN,
        )
        out = []
        for ring in rings:
            if len(ring) < 3:
                continue
            lonlat = np.asarray(ring, dtype=float).reshape(-1, 2)
            x = np.round(PAD + (lonlat[:, 0] - self.west) * self.x_scale)
            y = np.round(PAD + (self.north - lonlat[:, 1]) * self.y_scale)
            pixels = fitted(x, y, bounds)
            if len(pixels) >= 3:
                out.append(pixels)
        return out

    def graticule(self) -> list[str]:
        out = ['<g class="map-grid">']
        lat_step = _step(self.north - self.south)
        lon_step = _step(self.east - self.west)
        for lat in _ticks(self.south, self.north, lat_step):
            _, y = self.xy(lat, self.west)
            out.append(
                f'<line x1="0" y1="{y:.1f}" x2="{self.width}" y2="{y:.1f}"/>'
                f'<text x="3" y="{y - 3:.1f}">{_degrees(lat, lat_step, "N", "S")}</text>'
            )
        for lon in _ticks(self.west, self.east, lon_step):
            x, _ = self.xy(self.south, lon)
            out.append(
                f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{self.height}"/>'
                f'<text x="{x + 3:.1f}" y="{self.height - 4}">'
                f"{_degrees(lon, lon_step, 'E', 'W')}</text>"
            )
        out.append("</g>")
        return out


def _step(span: float) -> float:
    """The graticule step giving three to seven lines across ``span`` degrees."""
    for step in STEPS:
        if span / step <= 7:
            return step
    return STEPS[-1]


def _ticks(low: float, high: float, step: float) -> list[float]:
    first = math.ceil(low / step)
    return [i * step for i in range(first, math.floor(high / step) + 1)]


def _degrees(value: float, step: float, positive: str, negative: str) -> str:
    decimals = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{abs(value):.{decimals}f}°{positive if value >= 0 else negative}"
