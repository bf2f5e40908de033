"""An offline map: the points of a result page drawn as SVG over a graticule.

No tile server exists offline, so the map is only what the library knows — the points, their
numbers in the result list, a "you are here" mark for ``near``, lines of latitude and longitude
with their degrees and a scale bar, so a reader can tell where (and how spread out) things are.
The projection is equirectangular around the points' middle latitude (longitude scaled by
its cosine): distances look right at the scale of a city or a country.

With nothing to compare against, one point on an empty grid says no more than its two
numbers, so callers ask :func:`worth_drawing` first. Numbered labels never cover each other:
one that would is moved to the nearest free spot and tied to its place by a leader line
(:func:`place_labels`), so results a few metres apart still show every number.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from html import escape

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


@dataclass(frozen=True)
class MapPoint:
    lat: float
    lon: float
    label: str
    href: str | None = None
    number: int | None = None  # its place in the result list
    distance_km: float | None = None  # from the query point, when there is one


Box = tuple[float, float, float, float]  # left, top, width, height (SVG pixels)


def worth_drawing(points: list[MapPoint], center: tuple[float, float] | None = None) -> bool:
    """A map adds something to a list only when there is something to compare: two or more
    points, or a point and the query point it was found around."""
    return len(points) >= 2 or (center is not None and len(points) >= 1)


def render_map(
    points: list[MapPoint],
    center: tuple[float, float] | None = None,
    title: str = "",
    width: int = WIDTH,
    max_height: int = MAX_HEIGHT,
    center_label: str = "",
) -> str:
    """The SVG (a string) for ``points``; empty when there is nothing to draw."""
    if not points:
        return ""
    lats = [p.lat for p in points] + ([center[0]] if center else [])
    lons = [p.lon for p in points] + ([center[1]] if center else [])
    frame = _Frame.around(min(lats), max(lats), min(lons), max(lons), width, max_height)
    scale, scale_box = _scale_bar(frame)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="map" role="img" '
        f'viewBox="0 0 {width} {frame.height}" width="100%" '
        f'aria-label="{escape(title)}" data-points="{len(points)}">',
        f'<rect class="map-sea" x="0" y="0" width="{width}" height="{frame.height}"/>',
        *frame.graticule(),
        scale,
    ]
    obstacles = [scale_box] if scale_box else []
    if center:
        x, y = frame.xy(*center)
        parts.append(_center_mark(x, y, center_label))
        obstacles.append(_square(x, y, 2 * CENTER_RADIUS))
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
        cls, south: float, north: float, west: float, east: float, width: int, max_height: int
    ) -> _Frame:
        middle = (south + north) / 2
        shrink = max(math.cos(math.radians(middle)), 0.05)
        lat_span = max(north - south, MIN_SPAN_DEG)
        lon_span = max(east - west, MIN_SPAN_DEG / shrink)
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
