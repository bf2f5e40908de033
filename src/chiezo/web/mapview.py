"""An offline map: the points of a result page drawn as SVG over a graticule.

No tile server exists offline, so the map is only what the library knows — the points, their
numbers in the result list, a "you are here" mark for ``near``, and lines of latitude and
longitude with their degrees, so a reader can tell where (and how spread out) things are.
The projection is equirectangular around the points' middle latitude (longitude scaled by
its cosine): distances look right at the scale of a city or a country.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

WIDTH = 640
MIN_HEIGHT, MAX_HEIGHT = 220, 440
PAD = 28  # pixels around the points, room for the degree labels
MIN_SPAN_DEG = 0.01  # about a kilometre: a single point still gets a sensible frame
STEPS = (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30, 45, 90)


@dataclass(frozen=True)
class MapPoint:
    lat: float
    lon: float
    label: str
    href: str | None = None
    number: int | None = None  # its place in the result list


def render_map(points: list[MapPoint], center: tuple[float, float] | None = None,
               title: str = "", width: int = WIDTH, max_height: int = MAX_HEIGHT) -> str:  # fmt: skip
    """The SVG (a string) for ``points``; empty when there is nothing to draw."""
    if not points:
        return ""
    lats = [p.lat for p in points] + ([center[0]] if center else [])
    lons = [p.lon for p in points] + ([center[1]] if center else [])
    frame = _Frame.around(min(lats), max(lats), min(lons), max(lons), width, max_height)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="map" role="img" '
        f'viewBox="0 0 {width} {frame.height}" width="100%" '
        f'aria-label="{escape(title)}" data-points="{len(points)}">',
        f'<rect class="map-sea" x="0" y="0" width="{width}" height="{frame.height}"/>',
        *frame.graticule(),
    ]
    if center:
        x, y = frame.xy(*center)
        parts.append(f'<g class="map-center"><circle cx="{x:.1f}" cy="{y:.1f}" r="7"/>'
                     f'<circle cx="{x:.1f}" cy="{y:.1f}" r="2"/></g>')  # fmt: skip
    # numbered results drawn last, the first of them on top
    points = sorted(points, key=lambda p: -(p.number or 0) if p.number else float("-inf"))
    for point in points:
        parts.append(_marker(frame, point))
    parts.append("</svg>")
    return "".join(parts)


def _marker(frame: _Frame, point: MapPoint) -> str:
    x, y = frame.xy(point.lat, point.lon)
    tip = f"<title>{escape(point.label)} ({point.lat:.5f}, {point.lon:.5f})</title>"
    number = (f'<text x="{x:.1f}" y="{y + 3.5:.1f}" text-anchor="middle">{point.number}</text>'
              if point.number is not None else "")  # fmt: skip
    dot = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{8 if number else 3.5}"/>'
    body = f'<g class="map-point{"" if number else " map-other"}" data-label="{escape(point.label)}">{tip}{dot}{number}</g>'
    if point.href:
        return f'<a href="{escape(point.href)}">{body}</a>'
    return body


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
    def around(cls, south: float, north: float, west: float, east: float, width: int,
               max_height: int) -> _Frame:  # fmt: skip
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
            south=middle - lat_span_canvas / 2, north=middle + lat_span_canvas / 2,
            west=centre_lon - lon_span_canvas / 2, east=centre_lon + lon_span_canvas / 2,
            x_scale=per_deg * shrink, y_scale=per_deg, height=height, width=width,
        )  # fmt: skip

    def xy(self, lat: float, lon: float) -> tuple[float, float]:
        return PAD + (lon - self.west) * self.x_scale, PAD + (self.north - lat) * self.y_scale

    def graticule(self) -> list[str]:
        out = ['<g class="map-grid">']
        lat_step = _step(self.north - self.south)
        lon_step = _step(self.east - self.west)
        for lat in _ticks(self.south, self.north, lat_step):
            _, y = self.xy(lat, self.west)
            out.append(f'<line x1="0" y1="{y:.1f}" x2="{self.width}" y2="{y:.1f}"/>'
                       f'<text x="3" y="{y - 3:.1f}">{_degrees(lat, lat_step, "N", "S")}</text>')  # fmt: skip
        for lon in _ticks(self.west, self.east, lon_step):
            x, _ = self.xy(self.south, lon)
            out.append(f'<line x1="{x:.1f}" y1="0" x2="{x:.1f}" y2="{self.height}"/>'
                       f'<text x="{x + 3:.1f}" y="{self.height - 4}">'
                       f'{_degrees(lon, lon_step, "E", "W")}</text>')  # fmt: skip
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
