"""An article's own point, from the coordinates its wikitext states.

An article states many points: its own (shown at the title), its infobox's, and points of
*other* places — the rows of an extremity table (島根県's 最北端 is 竹島, 218 km from 松江),
burial mounds in a list (蝦夷), a presidential palace in the prose (イラク), the centre of a
map frame (沖縄県's frame is 190 km out at sea). Taking the first template found would store
those other points as the article's (4 of 30 prefecture articles more than 100 km off).
So a point is the article's only when the page itself says so, in this order:

1. **title** — a ``{{Coord}}``-like template displayed at the title (``display=title``,
   ``inline,title``, ``it``…): what the reader sees beside the article's name;
2. **infobox** — the infobox's own coordinate parameters (緯度度/経度度…, ``latitude``…, a
   ``coordinates = {{Coord…}}`` value) of the first infobox that has readable ones;
3. **the lead** — the first unnamed coordinate of the lead section, outside tables, lists and
   infoboxes: 「浅草寺は…寺。{{Coord…}}」 speaks of the subject (an editor who did not write
   ``display=title``). Later sections speak of other things (イラク's 政治 section places the
   presidential palace), so only the lead counts;
4. **office** — a coordinate named after the article's subject or its seat (``name=岩手県庁``
   on 岩手県, ``name=松江市役所`` on 松江市): jawiki's point for an administrative area *is* its
   office, and prefecture articles often state it only in such a row.

Everything else (unnamed inline coordinates, named other places, table rows, location-map
marks, map frames) is never the article's point. A title/infobox coordinate that states values
but cannot be read (``30°11′ N to 35° N``, latitude 123) leaves the article *without* a point —
never a guess — and is counted as ``unreadable`` in the build report; a title coordinate with
no values (jawiki's prefectures: ``{{Coord|display=inline,title}}``, filled from Wikidata
online) is counted as ``wikidata`` (the point lives in Wikidata, which a dump does not carry).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from mwparserfromhell.nodes import Template
from mwparserfromhell.wikicode import Wikicode

COORD_TEMPLATES = {
    "coord",
    "coordinates",
    "coord2",
    "ウィキ座標度分秒",
    "ウィキ座標2段度分秒",
    "ウィキ座標",
    "座標",
}
# How the article got its point (or why not), as counted in the build report.
TITLE, INFOBOX, LEAD, OFFICE = "title", "infobox", "lead", "office"
UNREADABLE, WIKIDATA, NONE = "unreadable", "wikidata", "none"
# The seat of an administrative area, after its name: 岩手県 → 岩手県庁, 松江市 → 松江市役所.
OFFICE_SUFFIXES = ("庁", "庁舎", "本庁舎", "役所", "役場", "市役所", "町役場", "村役場")
# Where a template stood when the renderer met it.
TOP, IN_INFOBOX, IN_TABLE, IN_LEAD = "top", "infobox", "table", "lead"

_NUMBER = re.compile(r"^[+-]?\d+(?:\.\d+)?$")
_TITLE_DISPLAY = re.compile(r"\btitle\b|^\s*(?:t|it|ti)\s*$", re.I)
# A written angle: 35.68 / -87.6 / 35°41′22″N / 35度41分22秒 / N 35.5 — one value, no range.
_ANGLE = re.compile(
    r"^\s*([NSEW北南東西]?)\s*([+-]?\d+(?:\.\d+)?)\s*(?:[°度]\s*(?:(\d+(?:\.\d+)?)\s*[′'分]\s*"
    r"(?:(\d+(?:\.\d+)?)\s*(?:[″\"秒]|''))?)?)?\s*([NSEW]?)\s*(?:北緯|南緯|東経|西経)?\s*$",
    re.I,
)
# Infobox keys, in order of preference: plain, then company head office before registered
# office (an inn's article may fill only 本店), then anything else carrying the same suffix.
PREFIX_ORDER = ("", "本社", "本店")
_COORD_KEY = re.compile(r"緯度|^lat|latitude|coord", re.I)


@dataclass(frozen=True)
class Placed:
    """A template and where it stood: top level, inside an infobox, inside a table."""

    template: Template
    where: str = TOP  # TOP (anywhere else), IN_LEAD, IN_INFOBOX or IN_TABLE


@dataclass(frozen=True)
class ArticlePoint:
    point: tuple[float, float] | None
    source: str  # TITLE, INFOBOX, OFFICE, UNREADABLE, WIKIDATA or NONE


def article_point(
    found: list[Placed], title: str, is_infobox: Callable[[str, Template], bool]
) -> ArticlePoint:
    """The article's own point (see the module docstring). ``is_infobox(name, template)``
    tells an infobox."""
    unreadable = wikidata = False
    infobox_point = lead_point = office_point = None
    for placed in found:
        template, name = placed.template, template_name(placed.template)
        if name in COORD_TEMPLATES:
            values = _positional(template)
            if _shown_at_title(template):
                if not any(values):
                    wikidata = True
                    continue
                point = parse_coord_values(values)
                if point is not None:
                    return ArticlePoint(point, TITLE)
                unreadable = True
            elif placed.where == IN_INFOBOX and infobox_point is None and any(values):
                infobox_point = parse_coord_values(values)
                unreadable = unreadable or infobox_point is None
            elif placed.where == IN_LEAD and lead_point is None and not _named(template):
                lead_point = parse_coord_values(values)
            elif office_point is None and _names_the_subject(template, title):
                office_point = parse_coord_values(values)
        elif (
            infobox_point is None
            and placed.where != IN_TABLE
            and is_infobox(name, template)
            and _has_coordinate_keys(template)
        ):
            infobox_point, stated = _infobox_coordinates(template)
            unreadable = unreadable or (stated and infobox_point is None)
    if infobox_point is not None:
        return ArticlePoint(infobox_point, INFOBOX)
    if lead_point is not None:
        return ArticlePoint(lead_point, LEAD)
    if office_point is not None:
        return ArticlePoint(office_point, OFFICE)
    return ArticlePoint(None, UNREADABLE if unreadable else WIKIDATA if wikidata else NONE)


def template_name(template: Template) -> str:
    return " ".join(str(template.name).replace("_", " ").split()).casefold()


def _shown_at_title(template: Template) -> bool:
    for param in template.params:
        if str(param.name).strip().casefold() == "display":
            return bool(_TITLE_DISPLAY.search(str(param.value).strip()))
    return False


def _named(template: Template) -> bool:
    return any(str(p.name).strip().casefold() == "name" for p in template.params)


def _names_the_subject(template: Template, title: str) -> bool:
    """``name=`` is the article's title, or its title and an office suffix."""
    if not title:
        return False
    for param in template.params:
        if str(param.name).strip().casefold() == "name":
            named = " ".join(_plain(param.value).split())
            base = re.sub(r"\s*\(.*\)$", "", title)  # 松江市 for "松江市 (島根県)"
            return named == base or (
                named.startswith(base) and named[len(base) :] in OFFICE_SUFFIXES
            )
    return False


def _positional(template: Template) -> list[str]:
    """The positional values of a coordinate template; ``type:city`` style parameters (a
    colon, never a number) are not values."""
    return [
        _plain(p.value).strip()
        for p in template.params
        if not p.showkey and ":" not in str(p.value)
    ]


def _plain(value: Wikicode) -> str:
    return str(value.strip_code() if hasattr(value, "strip_code") else value)


def parse_coord_values(values: list[str]) -> tuple[float, float] | None:
    """Positional values of {{Coord}}-like templates: decimal ``lat|lon``, or degree/minute/
    second groups each closed by a hemisphere letter (empty parts count as 0)."""
    values = [v.strip() for v in values]
    while values and not values[-1]:
        values.pop()  # {{ウィキ座標度分秒|33|17|03|N|044|15|22|E|}}: a trailing empty value
    directions = [i for i, v in enumerate(values) if v.upper() in ("N", "S", "E", "W")]
    if len(directions) >= 2:
        first, second = directions[0], directions[1]
        if values[first].upper() not in ("N", "S") or values[second].upper() not in ("E", "W"):
            return None  # "E … N": a longitude first is a mistake, not a point
        lat = _dms(values[:first])
        lon = _dms(values[first + 1 : second])
        if lat is None or lon is None:
            return None
        if values[first].upper() == "S":
            lat = -lat
        if values[second].upper() == "W":
            lon = -lon
        return _valid(lat, lon)
    numbers = [v for v in values if v]
    if len(numbers) == 2 and all(_NUMBER.match(v) for v in numbers):
        return _valid(float(numbers[0]), float(numbers[1]))
    return None


def _has_coordinate_keys(template: Template) -> bool:
    return any(_COORD_KEY.search(str(p.name).strip()) for p in template.params)


def _params(template: Template) -> dict[str, str]:
    return {str(p.name).strip(): _plain(p.value).strip() for p in template.params}


def _infobox_coordinates(template: Template) -> tuple[tuple[float, float] | None, bool]:
    """An infobox's own point, and whether it stated one at all (a point stated but not
    readable is counted, not guessed)."""
    params = {k: v for k, v in _params(template).items() if v}
    folded = {k.casefold(): v for k, v in params.items()}  # Latitude (Infobox U.S. state)
    stated = False
    for lat_parts, lon_parts, south, west in _dms_groups(params):
        stated = stated or any(lat_parts) or any(lon_parts)
        point = _dms_point(lat_parts, lon_parts, south, west)
        if point:
            return point, True
    for lat_key, lon_key in (
        ("緯度", "経度"),
        ("latitude", "longitude"),
        ("lat", "long"),
        ("lat", "lon"),
        ("lat", "lng"),
    ):
        if lat_key in folded and lon_key in folded:
            stated = True
            point = _valid(_angle(folded[lat_key], "S"), _angle(folded[lon_key], "W"))
            if point:
                return point, True
    for param in template.params:  # coordinates = {{Coord|...}} inside the infobox
        for inner in param.value.filter_templates(recursive=False):
            if template_name(inner) in COORD_TEMPLATES:
                values = _positional(inner)
                if any(values):
                    stated = True
                    point = parse_coord_values(values)
                    if point:
                        return point, True
    return None, stated


def _dms_groups(params: dict[str, str]):
    """(latitude parts, longitude parts, south, west) for each prefix of degree/minute/second
    keys, Japanese (緯度度/緯度分/緯度秒) then English (lat_deg/lat_min/lat_sec)."""
    keys = set(params)
    ja = {k[: -len("緯度度")] for k in keys if k.endswith("緯度度")}
    for prefix in sorted(ja, key=_prefix_rank):
        yield (
            [params.get(f"{prefix}緯度{part}", "") for part in "度分秒"],
            [params.get(f"{prefix}経度{part}", "") for part in "度分秒"],
            _hemisphere(params, prefix, ("北緯", "南緯"), "S"),
            _hemisphere(params, prefix, ("東経", "西経"), "W"),
        )
    en = {k[: -len("lat_deg")] for k in keys if k.endswith("lat_deg")}
    for prefix in sorted(en, key=_prefix_rank):
        lon = "lon" if f"{prefix}lon_deg" in params else "long"
        yield (
            [params.get(f"{prefix}lat_{part}", "") for part in ("deg", "min", "sec")],
            [params.get(f"{prefix}{lon}_{part}", "") for part in ("deg", "min", "sec")],
            params.get(f"{prefix}lat_dir", "").upper().startswith("S"),
            params.get(f"{prefix}{lon}_dir", "").upper().startswith("W"),
        )


def _prefix_rank(prefix: str) -> tuple[int, str]:
    return (PREFIX_ORDER.index(prefix) if prefix in PREFIX_ORDER else len(PREFIX_ORDER), prefix)


def _hemisphere(
    params: dict[str, str], prefix: str, markers: tuple[str, str], negative: str
) -> bool:
    """Infobox hemisphere keys look like ``N(北緯)及びS(南緯)``: read the value's letter."""
    for key, value in params.items():
        if key.startswith(prefix) and any(m in key for m in markers):
            return value.strip().upper().startswith(negative)
    return False


def _dms(parts: list[str]) -> float | None:
    parts = [p.strip() for p in parts][:3]
    if not parts or not parts[0] or not all(not p or _NUMBER.match(p) for p in parts):
        return None
    numbers = [float(p) if p else 0.0 for p in parts] + [0.0, 0.0]
    degrees, minutes, seconds = numbers[:3]
    if minutes >= 60 or seconds >= 60 or minutes < 0 or seconds < 0:
        return None  # 35|75|0: not an angle
    sign = -1 if degrees < 0 else 1
    return sign * (abs(degrees) + minutes / 60 + seconds / 3600)


def _dms_point(
    lat_parts: list[str], lon_parts: list[str], south: bool, west: bool
) -> tuple[float, float] | None:
    lat = _dms(lat_parts)
    lon = _dms(lon_parts)
    if lat is None or lon is None:
        return None
    return _valid(-lat if south else lat, -lon if west else lon)


def _angle(text: str, negative: str) -> float | None:
    """One written angle (decimal, or degrees/minutes/seconds with a hemisphere letter);
    None for anything else — a range ("30°11′ N to 35° N") is not a point."""
    match = _ANGLE.match(text)
    if not match:
        return None
    before, degrees, minutes, seconds, after = match.groups()
    value = _dms([degrees, minutes or "", seconds or ""])
    if value is None:
        return None
    letter = (before or after or "").upper()
    if letter in ("南", "西") or letter == negative:
        value = -abs(value)
    return value


def _valid(lat: float | None, lon: float | None) -> tuple[float, float] | None:
    if lat is None or lon is None:
        return None
    if -90 <= lat <= 90 and -180 <= lon <= 180 and not (lat == 0 and lon == 0):
        return round(lat, 6), round(lon, 6)
    return None
