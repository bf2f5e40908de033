"""The search page's query string and what it shows: hits or filtered documents, and the map.

Words search (``Context.search``); filters without words list every match with the exact
total (``Context.filter``), as the API's ``/filter`` does. Either way the items carry what a
page shows: number, title, section (the breadcrumb of the passage quoted), snippet, source,
distance, coordinates, a served original — all from the hits themselves (search/sections.py).
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Sequence
from typing import Any

from markupsafe import Markup
from starlette.requests import Request

from chiezo.core import db
from chiezo.core.errors import ChiezoError
from chiezo.core.here import HERE, Here
from chiezo.core.textnorm import clipped
from chiezo.core.validation import MAX_OFFSET
from chiezo.ops import reading, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import (
    DocRequest,
    FeaturesRequest,
    FilterRequest,
    SearchRequest,
    TagsRequest,
    params,
)
from chiezo.search import where
from chiezo.search.facets import FACETS
from chiezo.search.shapes import has_shapes
from chiezo.search.snippet import plain_text
from chiezo.store.library import Source
from chiezo.surfaces.web.document_pages import original_href
from chiezo.surfaces.web.i18n import DEFAULT, Translator, pick_language
from chiezo.surfaces.web.mapview import (
    AREAS_DRAWN,
    METRES_PER_DEGREE,
    MIN_SPAN_DEG,
    Boundary,
    HereMark,
    LonLatBox,
    MapPoint,
    Ring,
    render_map,
    worth_drawing,
)

PAGE_SIZE = 10
MAP_POINTS = 500  # filtered places drawn beyond the page's own (as small unnumbered dots)
NEARBY_KM = 2.0  # a document page's map and its "find nearby" link: places this close
NEARBY_POINTS = 30  # at most this many of them on the document page's map
# A place with no neighbours within NEARBY_KM is shown on a regional locator map (about
# 330 km north to south) where no OSM source has boundaries for its town: at that span
# Natural Earth's land and borders are drawn (mapview.CITY_SPAN_DEG), and a lone dot on
# an empty 4 km grid would say no more than its two numbers.
LOCATOR_SPAN_DEG = 3.0
_POINT = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*$")


class SearchForm:
    """The search page's query string, read once and checked for shape. Its fields are
    parameters of the search operation (ops/requests.py), spelt as in the REST API; ``near``
    also takes a title (sent as near_doc) and ``here`` (the person's current location, sent
    as ``location``: read here, never written back into the page)."""

    FIELDS = (
        "q",
        "source",
        "mode",
        "tag",
        "feature",
        "area",
        "near",
        "radius_km",
        "within",
        "location",
    )
    MODES = next(p.choices for p in params(SearchRequest) if p.name == "mode")

    def __init__(self, values: dict[str, str], offset: int, language: str = DEFAULT):
        self.values = values
        self.offset = offset
        self.language = language  # the words drawn on the map (the current location's)

    @classmethod
    def read(cls, request: Request) -> SearchForm:
        params = request.query_params
        values = {f: (params.get(f) or "").strip() for f in cls.FIELDS}
        return cls(values, read_offset(params.get("offset")), pick_language(request))

    def __getattr__(self, name: str) -> str:
        if name in SearchForm.FIELDS:
            return self.values[name]
        raise AttributeError(name)

    @property
    def has_filters(self) -> bool:
        return any(self.values[f] for f in ("tag", "feature", "area", "near", "within"))

    @property
    def near_here(self) -> bool:
        return self.near.lower() == HERE

    def near_arguments(self) -> dict[str, Any]:
        """``near`` is a point (``lat,lon``), ``here`` (with its ``location``),
        ``source:title`` or a title in this source."""
        text = self.near
        if not text:
            return {}
        radius = float(self.radius_km) if _is_number(self.radius_km) else None
        if self.near_here:
            # no location: the operation asks for one (a 400 with ``needs``)
            return {"near": HERE, "location": self.location or None, "radius_km": radius}
        if _POINT.match(text):
            return {"near": text, "radius_km": radius}
        reference = text if ":" in text else f"{self.source}:{text}"
        return {"near_doc": reference, "radius_km": radius}

    def filter_arguments(self) -> dict[str, Any]:
        """The conditions, for one source or several (a facet's link adds one to a search
        of every source; a title for ``near`` needs the source it is in)."""
        return {
            "feature": [self.feature] if self.feature else None,
            "area": [self.area] if self.area else None,
            "within": self.within or None,
            **(self.near_arguments() if self._near_is_a_point_or_sourced else {}),
        }

    @property
    def _near_is_a_point_or_sourced(self) -> bool:
        return bool(self.source or self.near_here or _POINT.match(self.near))

    def here_mark(self, ttl: float) -> HereMark | None:
        """The current location to draw on the map of a ``near=here`` search, or None (none
        given, or one the search itself refuses: it says why)."""
        if not self.near_here or not self.location:
            return None
        try:
            point = Here.of(self.location)
        except ChiezoError:
            return None
        expires = int((point.taken_at.timestamp() + ttl) * 1000)
        label = Translator(self.language)("map.here")
        return HereMark(point.lat, point.lon, label, expires, point.accuracy_m)

    @property
    def facets(self) -> list[str]:
        """What the page counts the matches by: the sources too when it searched several."""
        return [f for f in FACETS if f != "source" or not self.source]


def search_results(service: Context, form: SearchForm) -> dict[str, Any]:
    extra = form.filter_arguments()
    request = SearchRequest.of(
        query=form.q,
        source=form.source or None,
        limit=PAGE_SIZE,
        offset=form.offset,
        mode=form.mode or None,
        tag=[form.tag] if form.tag else None,
        facets=form.facets,
        **extra,
    )
    result = searching.search(service, request)
    items = []
    archives = {s: _archived(service, s) for s in {hit.source for hit in result.hits}}
    for number, hit in enumerate(result.hits, start=form.offset + 1):
        original = None
        # a local file: served, at the hit's page; an archive's entry: as the archive shows it
        if (hit.source_url or "").startswith("file://") or archives[hit.source]:
            original = original_href(
                {"source": hit.source, "doc_id": hit.doc_id, "source_url": hit.source_url},
                archived=archives[hit.source],
            )
        items.append(
            {
                "number": number,
                "source": hit.source,
                "doc_id": hit.doc_id,
                "title": hit.title,
                "section": hit.section,
                "snippet": hit.snippet,
                "url": hit.url,
                "distance_km": hit.distance_km,
                "point": (hit.point.lat, hit.point.lon) if hit.point else None,
                "original": original,
            }
        )
    summary = {
        "total": result.total,
        "at_least": result.total_is_lower_bound,
        "notes": result.notes,
        "how": result.retrieval,
        "order": result.order,
        "facets": facet_choices(result.facets, form),
    }
    here = form.here_mark(service.settings.location_ttl)
    typed = (extra.get("near") or extra.get("near_doc")) and not form.near_here
    center = _near_point(service, extra) if typed else None
    return {
        "result": summary,
        "items": items,
        "map_svg": _map(
            service, items, center, form.near, outline=_within_rings(service, form), here=here
        ),
    }


def browse_results(service: Context, form: SearchForm) -> dict[str, Any]:
    """Filters without words: every document meeting them (exact total), as the API's filter."""
    found = searching.filter(
        service,
        FilterRequest.of(
            source=form.source,
            tag=[form.tag] if form.tag else None,
            fields=["doc_id", "key", "title", "url", "point", "opening"],
            limit=PAGE_SIZE,
            offset=form.offset,
            facets=form.facets,
            **form.filter_arguments(),
        ),
    )
    items = []
    for number, doc in enumerate(found["docs"], start=form.offset + 1):
        point = doc.get("point")
        items.append(
            {
                "number": number,
                "source": form.source,
                "doc_id": doc["doc_id"],
                "title": doc["title"],
                "snippet": _cut(doc.get("opening") or "", 160),
                "url": doc.get("url"),
                "distance_km": doc.get("distance_km"),
                "point": (point["lat"], point["lon"]) if point else None,
            }
        )
    summary = {
        "total": found["total"],
        "at_least": found["total_is_lower_bound"],
        "notes": found["notes"],
        "how": "filter",
        "order": found["order"],
        "browse": True,
        "facets": facet_choices(found.get("facets"), form),
    }
    near = found.get("near")
    here = form.here_mark(service.settings.location_ttl)
    center = (near["lat"], near["lon"]) if near and not form.near_here else None
    others = _more_points(service, form, found["total"], {i["doc_id"] for i in items})
    return {
        "result": summary,
        "items": items,
        "map_more": len(others),
        "map_svg": _map(
            service,
            items,
            center,
            form.near,
            others,
            outline=_within_rings(service, form),
            here=here,
        ),
    }


FACET_CHOICES = 8  # values a facet offers on the page, the most frequent first


def facet_choices(facets: dict | None, form: SearchForm) -> list[dict[str, Any]]:
    """The facets as refinements: each value a link that adds it as a condition (the active
    one marked, to be removed); values with one match still count — a refinement to one
    document is a way to it."""
    out = []
    for name, facet in (facets or {}).items():
        active = form.values.get(name, "")
        choices = [
            {"value": v["value"], "n": v["n"], "active": v["value"] == active}
            for v in facet["values"][:FACET_CHOICES]
        ]
        if choices:
            out.append(
                {
                    "name": name,
                    "choices": choices,
                    "exact": facet["exact"],
                    "counted": facet["counted"],
                }
            )
    return out


def _more_points(service: Context, form: SearchForm, total: int, shown: set[int]) -> list:
    """Beyond the page: up to MAP_POINTS of the other matches, so the map shows the spread."""
    if total <= len(shown):
        return []
    found = searching.filter(
        service,
        FilterRequest.of(
            source=form.source,
            tag=[form.tag] if form.tag else None,
            fields=["doc_id", "title", "point"],
            limit=MAP_POINTS,
            **form.filter_arguments(),
        ),
    )
    return [
        MapPoint(
            d["point"]["lat"],
            d["point"]["lon"],
            d["title"],
            href=f"/doc/{form.source}/{d['doc_id']}",
            distance_km=d.get("distance_km"),
        )
        for d in found["docs"]
        if d.get("point") and d["doc_id"] not in shown
    ]


def _map(
    service: Context,
    items: list[dict],
    center: tuple[float, float] | None,
    near_text: str = "",
    others: Sequence[MapPoint] = (),
    outline: Sequence[Ring] = (),
    here: HereMark | None = None,
) -> Markup:
    """The page's map, when it adds something to the list (mapview.worth_drawing), with the
    area searched, the person's current location (``here``) and, at city scale, the admin
    boundaries of the results' sources first."""
    points = list(others) + [
        MapPoint(
            i["point"][0],
            i["point"][1],
            i["title"],
            href=f"/doc/{i['source']}/{i['doc_id']}",
            number=i["number"],
            distance_km=i.get("distance_km"),
        )
        for i in items
        if i.get("point")
    ]
    if not worth_drawing(points, center or here, outline):
        return Markup("")
    sources = list(dict.fromkeys(i["source"] for i in items))
    areas = functools.partial(admin_boundaries, service, first=sources)
    return Markup(
        render_map(
            points,
            center=center,
            center_label=near_text,
            outline=outline,
            areas=areas,
            here=here,
        )
    )


def _within_rings(service: Context, form: SearchForm) -> list[Ring]:
    """The ``within`` area as rings of (lon, lat), for the map to outline; none when it is not
    given or not understood (the search itself says why)."""
    if not form.within:
        return []
    try:
        return [list(ring) for ring in where.within_shape(service.library, form.within).rings]
    except ChiezoError:
        return []


def admin_boundaries(
    service: Context, view: LonLatBox, first: Sequence[str] = ()
) -> list[Boundary]:
    """The admin boundaries whose box meets ``view`` in the OSM sources that kept them (built
    since they do: ingest/osm.py store_shapes), the sources named in ``first`` before the
    others; a boundary in two overlapping extracts is drawn once. The map is an extra: a
    source that cannot be read adds nothing."""
    order = {name: i for i, name in enumerate(first)}
    opened = sorted(service.library.sources(), key=lambda s: order.get(s.name, len(order)))
    found: dict[tuple, Boundary] = {}
    for source in opened:
        if source.meta.get("kind") != "osm" or len(found) >= AREAS_DRAWN:
            continue
        try:
            with db.deadline(source.conn, service.settings.query_timeout, what="map areas"):
                rows = _boundaries_meeting(source, view)
        except (ChiezoError, db.Error):  # a timeout too: the map goes without them
            continue
        for name, level, box, rings in rows:
            found.setdefault((name, level, box), Boundary(name, level, rings))
    return list(found.values())[:AREAS_DRAWN]


def _boundaries_meeting(source: Source, view: LonLatBox) -> list[tuple[str, str, tuple, list]]:
    """(name, level, box, rings) of ``source``'s boundaries whose box meets ``view``: the
    smaller areas first (the likeliest to be what the view is about)."""
    if not has_shapes(source):
        return []
    west, south, east, north = view
    rows = source.conn.execute(
        "SELECT name, level, west, south, east, north, rings FROM area_shapes "
        "WHERE west <= ? AND east >= ? AND south <= ? AND north >= ? "
        "ORDER BY (east - west) * (north - south) LIMIT ?",
        (east, west, north, south, AREAS_DRAWN),
    )
    return [
        (name, level, (w, s, e, n), json.loads(rings)) for name, level, w, s, e, n, rings in rows
    ]


def _near_point(service: Context, near: dict[str, Any]) -> tuple[float, float] | None:
    """The point a search was made around: typed as ``lat,lon``, or a document's (its
    coordinates read once more: a search's result does not carry them)."""
    if near.get("near"):
        point = _POINT.match(near["near"])
        assert point is not None  # near_arguments gives "near" only to a lat,lon
        lat, lon = point.groups()
        return float(lat), float(lon)
    name, _, title = near["near_doc"].partition(":")
    point = reading.doc(service, DocRequest.of(source=name, title=title, fields=["point"])).get(
        "point"
    )
    return (point["lat"], point["lon"]) if point else None


def doc_map(service: Context, doc: dict) -> tuple[Markup, int]:
    """A document page's locator map and how many neighbours it shows: the document's point
    amid the nearest places of its source (those "find nearby" lists first), each a link.
    With none (or a neighbour search that fails: the map is an extra), the point alone, at
    the scale where something lies under it (:func:`_lone_span`)."""
    point = doc.get("point")
    if not point:
        return Markup(""), 0
    neighbours = _neighbours(service, doc, point)
    center = (point["lat"], point["lon"])
    areas = functools.partial(admin_boundaries, service, first=[doc["source"]])
    svg = render_map(
        neighbours,
        center=center,
        center_label=doc["title"],
        title=doc["title"],
        width=440,
        max_height=300,
        areas=areas,
        min_span_deg=MIN_SPAN_DEG if neighbours else _lone_span(service, center),
    )
    return Markup(svg), len(neighbours)


def _neighbours(service: Context, doc: dict, point: dict) -> list[MapPoint]:
    """The nearest places of the document's source within NEARBY_KM, itself left out."""
    try:
        found = searching.filter(
            service,
            FilterRequest.of(
                source=doc["source"],
                near=f"{point['lat']},{point['lon']}",
                radius_km=NEARBY_KM,
                fields=["doc_id", "title", "point"],
                limit=NEARBY_POINTS + 1,
            ),
        )
    except ChiezoError:
        return []
    return [
        MapPoint(
            d["point"]["lat"],
            d["point"]["lon"],
            d["title"],
            href=f"/doc/{doc['source']}/{d['doc_id']}",
            distance_km=d.get("distance_km"),
        )
        for d in found["docs"]
        if d["doc_id"] != doc["doc_id"] and d.get("point")
    ][:NEARBY_POINTS]


def _lone_span(service: Context, center: tuple[float, float]) -> float:
    """The span (degrees) of a map of one point: the NEARBY_KM circle where an OSM source
    has boundaries there (its town is drawn, and the empty circle is what "no neighbours"
    means), else LOCATOR_SPAN_DEG, wide enough for land and borders to show where it is."""
    half = NEARBY_KM / (METRES_PER_DEGREE / 1000)
    lat, lon = center
    shrink = max(math.cos(math.radians(lat)), 0.05)
    view = (lon - half / shrink, lat - half, lon + half / shrink, lat + half)
    return 2 * half if _has_boundaries(service, view) else LOCATOR_SPAN_DEG


def _has_boundaries(service: Context, view: LonLatBox) -> bool:
    """Whether an OSM source kept an admin boundary meeting ``view`` (one indexed probe per
    source; the rings themselves are read only for the map drawn)."""
    west, south, east, north = view
    for source in service.library.sources():
        if source.meta.get("kind") != "osm":
            continue
        try:
            with db.deadline(source.conn, service.settings.query_timeout, what="map areas"):
                if (
                    has_shapes(source)
                    and source.conn.execute(
                        "SELECT 1 FROM area_shapes WHERE west <= ? AND east >= ? AND south <= ? "
                        "AND north >= ? LIMIT 1",
                        (east, west, north, south),
                    ).fetchone()
                ):
                    return True
        except (ChiezoError, db.Error):
            continue
    return False


def suggestions(service: Context, info: dict) -> dict[str, list[dict]]:
    """The source's commonest tags and features with their counts: the filter boxes'
    drop-downs, and the ways into a source before anything is searched. Ranking every tag by
    count scans the whole count table, so a built generation's answer is kept (it cannot
    change); the notes, written in place, are read each time."""
    if info.get("writable"):
        return _commonest(service, info["name"], bool(info.get("tags")), info.get("attributes", []))
    return _commonest_cached(
        service,
        info["name"],
        info.get("generation"),
        bool(info.get("tags")),
        tuple(info.get("attributes", [])),
    )


def _commonest(
    service: Context, name: str, has_tags: bool, attributes: Sequence[str]
) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {"tags": [], "features": []}
    if has_tags:
        out["tags"] = reading.tags(service, TagsRequest.of(source=name, limit=200))["tags"]
    if "feature" in attributes:
        out["features"] = reading.features(service, FeaturesRequest.of(source=name, limit=200)).get(
            "features", []
        )
    return out


@functools.lru_cache(maxsize=64)
def _commonest_cached(
    service: Context, name: str, generation: str | None, has_tags: bool, attributes: tuple[str, ...]
) -> dict[str, list[dict]]:
    return _commonest(service, name, has_tags, attributes)


def read_offset(text: str | None) -> int:
    """A page's offset from the query string: a bad or negative one is the first page, one
    beyond the deepest page the last that can be asked for (never an OverflowError)."""
    try:
        return min(max(0, int(text or 0)), MAX_OFFSET)
    except ValueError:
        return 0


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _cut(text: str, chars: int) -> str:
    """An opening as a snippet: plain text like a search's (a Markdown file's first paragraph
    keeps its backticks and emphasis marks), cut to ``chars``."""
    return clipped(plain_text(text), chars)


def _archived(service: Context, source: str) -> bool:
    try:
        return service.library.get(source).archived
    except ChiezoError:
        return False
