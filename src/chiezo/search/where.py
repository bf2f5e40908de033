"""Where a request looks: ``near`` (a point, an address, a document) and the conditions on
documents that search, filter and random share, resolved against the library into what
search/filters.py takes.

The operations (ops/searching.py) hand over the request's values; reading a named area or a
document's point opens its source here, under the query deadline, like any other read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Protocol

from chiezo.core import db, here
from chiezo.core.errors import BadQuery, Operation, Option
from chiezo.core.geometry import Shape
from chiezo.core.textnorm import language_of
from chiezo.core.validation import check_length
from chiezo.search import shapes
from chiezo.search.filters import Filters, Near, checked_radius, parse_near
from chiezo.search.lacks import SourceLacks, with_points
from chiezo.search.lookup import find_doc
from chiezo.search.notices import Notice
from chiezo.store.library import Library, Source
from chiezo.store.requirements import required_feature

if TYPE_CHECKING:
    from chiezo.search.geocode import GeocodeResult

# what a point is written with (besides spaces): near= made of these alone is meant as lat,lon;
# ops/patterns.py's NEAR states the same split in /openapi.json
POINT_CHARS = "0123456789.,+-"
# how every distance a result states was measured (filters.haversine_km)
STRAIGHT = "straight line, not by road"


class Conditions(Protocol):
    """The conditions a request puts on documents (ops/requests.py ``ConditionsRequest``)."""

    @property
    def tag(self) -> list[str] | None: ...
    @property
    def attr(self) -> list[str] | None: ...
    @property
    def feature(self) -> list[str] | None: ...
    @property
    def area(self) -> list[str] | None: ...
    @property
    def wikidata(self) -> list[str] | None: ...
    @property
    def bbox(self) -> str | None: ...
    @property
    def within(self) -> str | None: ...


def opened(
    library: Library, source: str | Source, what: str
) -> tuple[Source, AbstractContextManager[None]]:
    """(the source, the deadline one read of it runs under)."""
    src = library.get(source) if isinstance(source, str) else source
    src.check_answers(what)
    return src, db.deadline(src.conn, library.settings.query_timeout, what=what)


def conditions(library: Library, request: Conditions, near: Near | None) -> Filters:
    """The request's conditions as search/filters.py takes them (a named ``within`` read from
    its source here)."""
    return Filters.parse(
        request.tag,
        request.attr,
        feature=request.feature,
        area=request.area,
        wikidata=request.wikidata,
        bbox=request.bbox,
        near=near,
        within=within_shape(library, request.within) if request.within else None,
    )


def resolve_near(
    library: Library,
    near: str | None,
    near_doc: str | None,
    radius_km: float | None,
    location: str | None = None,
) -> Near | None:
    """``near`` (lat,lon, an address or place name, or ``here``: ``location``) or
    ``near_doc`` (source:title) → the point, with its radius; None when neither is given."""
    if near and near_doc:
        raise BadQuery("give near or near_doc, not both")
    if near and near.strip().lower() == here.HERE:
        return near_here(location, radius_km, library.settings.location_ttl)
    if near and not _looks_like_point(near):
        return _near_place(library, near, radius_km)
    if near:
        return parse_near(near, radius_km)
    if near_doc:
        return _point_of(library, near_doc, radius_km)
    if radius_km is not None:
        raise BadQuery("radius_km needs near or near_doc")
    return None


def near_here(location: str | None, radius_km: float | None, ttl: float) -> Near:
    """``near=here``: the attached location while fresh, labelled ``here`` — the point is
    used for distances and never stated (core/here.py)."""
    if not location:
        raise here.missing()
    point = here.Here.of(location).fresh(ttl)
    radius = checked_radius(radius_km)
    note = None
    if point.accuracy_m and radius and point.accuracy_m > radius * 1000 / 2:
        note = Notice("here_coarse", accuracy_m=round(point.accuracy_m), radius_km=radius)
    return Near(point.lat, point.lon, radius, label=here.HERE, note=note, hidden=True)


def near_notes(point: Near | None, found: int) -> list[Notice]:
    """What a result around ``point`` says of itself: how an address or the person's own
    location was taken, and — when nothing lies within the radius — that none is
    *registered*, which is not that none exists."""
    if point is None:
        return []
    notes = [Notice("near_here")] if point.hidden else []
    if isinstance(point.note, Notice):
        notes.append(point.note)
    if not found and point.radius_km is not None:
        notes.append(Notice("none_within", radius_km=f"{point.radius_km:g}"))
    return notes


# how many of a required key's values a refusal offers (GSI's shelters have eight)
CHOICES = 30


def check_required(src: Source, feature: list[str] | None, point: Near | None) -> None:
    """A source whose owner declared a feature key required around a point
    (store/requirements.py: a shelter is designated per disaster type) refuses a request
    around a point that names no value of it, asking which — with the values it has."""
    key = required_feature(src)
    if key is None or point is None:
        return
    named = [f.strip() for item in feature or [] for f in item.split(",")]
    if any(f.startswith(f"{key}=") for f in named):
        return
    rows = src.conn.execute(
        "SELECT value FROM attr_counts WHERE name = 'feature' AND value >= ? AND value < ? "
        "ORDER BY n DESC, value LIMIT ?",
        (f"{key}=", f"{key}=\U0010ffff", CHOICES),
    ).fetchall()
    choices = [value.partition("=")[2] for (value,) in rows]
    lang = language_of(key + "".join(choices))
    ask = here.need("feature", lang, key=key, choices=choices)
    raise here.NeedsAnswer(
        f"source {src.name!r} is searched around a place only for one {key}: "
        f"give feature={key}=VALUE",
        ask,
        source=src.name,
        cause="feature_required",
    )


def _looks_like_point(text: str) -> bool:
    """Digits, signs, dots, commas and spaces only: meant as lat,lon (parse_near then says
    what is wrong with one) rather than an address (ops/patterns.py's NEAR states it)."""
    return all(c in POINT_CHARS or c.isspace() for c in text)


def _near_place(library: Library, address: str, radius_km: float | None) -> Near:
    """``near=香川県高松市番町一丁目10-16``: the best point the library's places give for an
    address or a place name (search/geocode.py), said in a note."""
    check_length(address, "near")
    found = geocoded(library, address, None, 1).best
    if found is None:
        raise BadQuery(
            f"no place in the library matches near {address!r}",
            hint="give lat,lon, or near_doc=source:title, or an address a place source "
            "knows ({see} shows what it finds)",
            see=Operation("geocode"),
        )
    point = parse_near(f"{found.lat},{found.lon}", radius_km)
    note = Notice(
        "near_place", asked=address, place=found.title, level=found.level, source=found.source
    )
    return replace(point, label=address, note=note)


def _point_of(library: Library, reference: str, radius_km: float | None) -> Near:
    """``source:title`` → that document's coordinates (resolved server-side, so "the
    stations nearest to 浅草寺" is one call)."""
    check_length(reference, "near_doc")
    name, sep, title = reference.partition(":")
    if not sep or not name or not title.strip():
        raise BadQuery(
            f"near_doc is source:title, got {reference!r}",
            hint="e.g. {see}",
            see=Option("near_doc", "jawiki:浅草寺"),
        )
    src, deadline = opened(library, name, "near_doc")
    with deadline:
        doc_id, _ = find_doc(src, title=title)
        row = src.conn.execute(
            "SELECT lat, lon FROM doc_points WHERE doc_id = ?", (doc_id,)
        ).fetchone()
    if row is None:
        raise BadQuery(f"{reference!r} has no coordinates", source=name)
    near = parse_near(f"{row[0]},{row[1]}", radius_km)
    return Near(near.lat, near.lon, near.radius_km, label=reference)


def within_shape(library: Library, text: str) -> Shape:
    """``within``: a written shape, or ``source:name`` of an OSM source's admin area."""
    if not shapes.is_named(text):
        return shapes.parse_within(text)
    name, _, area = text.strip().partition(":")
    src, deadline = opened(library, name.strip(), "within")
    with deadline:
        return shapes.named_area(src, area)


def geocoded(
    library: Library, address: str, sources: Sequence[Source] | None, limit: int
) -> GeocodeResult:
    """An address or place name → points from ``sources`` (default: the default sources
    that have points), under the query deadline."""
    # imported here: it reads the places kind's address test, which a search that never
    # geocodes need not load (a cold CLI start)
    from chiezo.search.geocode import geocode

    if sources is None:
        sources = [s for s in library.default_sources()[0] if has_points(s)]
    timer = library.settings.query_timeout
    with contextlib.ExitStack() as stack:
        for src in sources:
            stack.enter_context(db.deadline(src.conn, timer, what="geocoding"))
        return geocode(list(sources), address, limit=limit)


def has_points(src: Source) -> bool:
    return src.conn.execute("SELECT 1 FROM doc_points LIMIT 1").fetchone() is not None


def refuse_without_points(src: Source) -> None:
    """A search of several sources around a point leaves out one without coordinates."""
    if not has_points(src):
        raise SourceLacks(
            f"source {src.name!r} has no coordinates", source=src.name, has=with_points
        )
