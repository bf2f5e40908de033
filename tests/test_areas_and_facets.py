"""``within`` (areas as shapes) and ``facets`` (counts of the matching documents), on real
sources: an OSM file written in the real format with admin boundaries and places, a GeoNames
build from the shared fixtures; through the service and the REST surface."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery
from chiezo.ingest.osm import OsmOptions
from chiezo.ops import building, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import FilterRequest, SearchRequest
from chiezo.surfaces.rest.app import create_app
from test_geonames_osm import _write_osm

from helpers import LOCAL

# An L-shaped town whose bounding box also covers a corner that belongs to its neighbour.
ELL = [(0, 0), (2, 0), (2, 1), (1, 1), (1, 2), (0, 2)]
SQUARE = [(1.05, 1.05), (2, 1.05), (2, 2), (1.05, 2)]
PLACES = [
    ("Ell Cafe", {"amenity": "cafe"}, (0.5, 1.5)),
    ("Ell Museum", {"tourism": "museum"}, (0.5, 0.5)),
    ("Ell Station Museum", {"tourism": "museum", "railway": "station"}, (1.5, 0.5)),
    ("Square Cafe", {"amenity": "cafe"}, (1.5, 1.5)),
    ("Square Museum", {"tourism": "museum"}, (1.8, 1.8)),
    ("Far Cafe", {"amenity": "cafe"}, (3, 3)),
]


def titles(result) -> list[str]:
    docs = result["docs"] if isinstance(result, dict) else result.hits
    return [d["title"] if isinstance(d, dict) else d.title for d in docs]


def _polygon(ring) -> str:
    closed = [list(p) for p in ring] + [list(ring[0])]
    return json.dumps({"type": "Polygon", "coordinates": [closed]})


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("areas")
    path = root / "towns.osm"
    _write_osm(path, [("Ell", "8", ELL), ("Square Town", "8", SQUARE)], PLACES)
    service = Context(Settings(data_dir=root / "data"))
    building.ingest(service, "osm", path, "osm_towns", options=OsmOptions(admin_levels=("8",)))
    return service


PLACES_ONLY = ["tourism=museum,amenity=cafe"]  # not the towns' own boundary documents


def _filter(service, **values):
    return searching.filter(service, FilterRequest.of(source="osm_towns", **values))


# -- within ---------------------------------------------------------------------------------


def test_within_a_polygon_keeps_its_inside_not_its_box(service):
    found = _filter(service, within=_polygon(ELL), feature=PLACES_ONLY)
    assert sorted(titles(found)) == ["Ell Cafe", "Ell Museum", "Ell Station Museum"]
    assert found["total"] == 3 and not found["total_is_lower_bound"]
    # the box of the L also holds the square's two places: a bbox keeps them
    boxed = _filter(service, within="0,0,2,2", feature=PLACES_ONLY)
    assert found["total"] < boxed["total"] == 5


def test_within_a_named_admin_area_of_an_osm_source(service):
    found = _filter(service, within="osm_towns:Square Town", feature=["amenity=cafe"])
    assert titles(found) == ["Square Cafe"]
    folded = _filter(service, within="osm_towns:square town", feature=PLACES_ONLY)  # folded
    assert sorted(titles(folded)) == ["Square Cafe", "Square Museum"]


def test_within_a_multipolygon_with_a_hole(service):
    outer = [[-1, -1], [4, -1], [4, 4], [-1, 4], [-1, -1]]
    hole = [[0.2, 0.2], [0.8, 0.2], [0.8, 0.8], [0.2, 0.8], [0.2, 0.2]]  # Ell Museum's corner
    far = [[2.9, 2.9], [3.1, 2.9], [3.1, 3.1], [2.9, 3.1], [2.9, 2.9]]
    shape = {"type": "MultiPolygon", "coordinates": [[outer, hole]]}
    inside = titles(_filter(service, within=json.dumps(shape), feature=PLACES_ONLY))
    assert "Ell Museum" not in inside and "Far Cafe" in inside and len(inside) == 5
    feature = {"type": "Feature", "geometry": {"type": "Polygon", "coordinates": [far]}}
    assert titles(_filter(service, within=json.dumps(feature))) == ["Far Cafe"]


def test_within_applies_to_search_and_random(service):
    found = searching.search(service, SearchRequest.of(query="museum", within=_polygon(SQUARE)))
    assert titles(found) == ["Square Museum"]
    drawn = searching.random(
        service,
        __import__("chiezo.ops.requests", fromlist=["RandomRequest"]).RandomRequest.of(
            source="osm_towns", within=_polygon(SQUARE), feature=PLACES_ONLY, count=5
        ),
    )
    assert sorted(d["title"] for d in drawn["docs"]) == ["Square Cafe", "Square Museum"]


@pytest.mark.parametrize(
    "within, reason",
    [
        ('{"type":"Polygon","coordinates":[[[0,0],[1,0],[1,1],[0,1]]]}', "not closed"),
        ('{"type":"Polygon","coordinates":[[[0,0],[1,1],[1,0],[0,1],[0,0]]]}', "crosses itself"),
        ('{"type":"Polygon","coordinates":[[[0,0],[200,0],[1,1],[0,0]]]}', "outside ±180"),
        ('{"type":"Point","coordinates":[0,0]}', "Polygon or MultiPolygon"),
        ('{"type":"Polygon","coordinates":[[[0,0],[1,0],[0,0],[0,0]]]}', "fewer than 3"),
        ('{"type":"Polygon","coordinates":"x"}', "needs its coordinates"),
        ('{"type":"Polygon","coordinates":[[["a","b"],[1,0],[1,1],["a","b"]]]}', "positions"),
        ("{not json", "not valid JSON"),
        ("91,0,92,1", "bbox"),
        ("osm_towns:Atlantis", "no admin area named 'Atlantis'"),
        ('{"type":"Polygon","coordinates":' + "[" * 3000 + "]" * 3000 + "}", "nests too deeply"),
        ('{"type":"Polygon","coordinates":[[[1%s,0],[1,0],[1,1],[0,0]]]}' % ("0" * 400), "±180"),
    ],
)
def test_a_bad_within_is_refused_with_its_reason(service, within, reason):
    with pytest.raises(BadQuery, match=reason):
        _filter(service, within=within)


def test_a_huge_polygon_is_refused_with_the_limit(service):
    import math

    ring = [
        [round(math.cos(i / 3000 * 2 * math.pi), 6), round(math.sin(i / 3000 * 2 * math.pi), 6)]
        for i in range(3000)
    ]
    ring.append(ring[0])
    with pytest.raises(BadQuery, match="characters long; the limit is 7,000"):
        _filter(service, within=json.dumps({"type": "Polygon", "coordinates": [ring]}))


def test_an_unknown_named_area_lists_the_known_ones(service):
    with pytest.raises(BadQuery) as caught:
        _filter(service, within="osm_towns:Squar Town")
    assert "Square Town" in caught.value.extras["candidates"]


# -- facets ---------------------------------------------------------------------------------


def test_filter_facets_count_the_matching_documents(service):
    found = _filter(service, feature=["tourism=museum"], facets=["area", "feature", "source"])
    facets = found["facets"]
    areas = {v["value"]: v["n"] for v in facets["area"]["values"]}
    assert areas == {"Ell": 2, "Square Town": 1}
    assert facets["area"]["exact"] and facets["area"]["counted"] == 3
    features = {v["value"]: v["n"] for v in facets["feature"]["values"]}
    assert features == {"tourism=museum": 3, "railway=station": 1}
    assert facets["source"]["values"] == [{"value": "osm_towns", "n": 3}]


def test_search_facets_and_refining_by_one_agree(service):
    found = searching.search(
        service, SearchRequest.of(query="museum", source="osm_towns", facets=["area"], limit=1)
    )
    assert found.facets is not None
    counts = {v["value"]: v["n"] for v in found.facets["area"]["values"]}
    assert counts == {"Ell": 2, "Square Town": 1} and found.facets["area"]["exact"]
    refined = searching.search(
        service, SearchRequest.of(query="museum", source="osm_towns", area=["Ell"], limit=10)
    )
    assert refined.total == counts["Ell"]  # a facet's count is what clicking it finds
    assert "facets" not in searching.search(service, SearchRequest.of(query="museum")).to_dict()


def test_an_unknown_facet_is_refused_with_the_known_ones(service):
    with pytest.raises(BadQuery, match="there is no facet 'areas'") as caught:
        _filter(service, feature=["amenity=cafe"], facets=["areas"])
    assert caught.value.extras["candidates"][0] == "area"


def test_rest_takes_within_and_facets(service):
    client = TestClient(create_app(service.settings), base_url=LOCAL)
    answer = client.get(
        "/v1/osm_towns/filter",
        params={"within": _polygon(SQUARE), "facets": "feature,area", "feature": PLACES_ONLY},
    )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["total"] == 2 and set(body["facets"]) == {"feature", "area"}
    bad = client.get("/v1/osm_towns/filter", params={"within": "osm_towns:Nowhere"})
    assert bad.status_code == 400 and "Nowhere" in bad.json()["error"]
    bad = client.get("/v1/search", params={"q": "museum", "facets": "colour"})
    assert bad.status_code == 400


def test_the_web_page_offers_facets_as_refinements(service):
    import re
    from html import unescape

    client = TestClient(create_app(service.settings), base_url=LOCAL)
    page = client.get("/", params={"q": "museum", "source": "osm_towns"}).text
    facets = page[page.index('id="facets"') : page.index("</nav>", page.index('id="facets"'))]
    links = dict(
        (unescape(text), unescape(href))
        for href, text in re.findall(r'<a href="([^"]+)">([^<]+)</a>', facets)
    )
    assert "Ell" in links and "tourism=museum" in links
    refined = client.get(links["Ell"]).text  # clicking a value searches with it as a condition
    assert 'name="area" value="Ell"' in refined
    assert "Ell Museum" in refined and "Square Museum" not in refined
    assert 'class="remove"' in refined  # and the active value can be taken off again


def test_the_sql_test_agrees_with_the_polygon_everywhere(service):
    """Cells decided by SQL arithmetic and edge cells tested in Python give one answer: every
    point of a fine grid over (and around) an irregular ring, as SQL keeps it and as the ring
    says (ray casting on the whole ring)."""
    import math
    import random

    from chiezo.core.geometry import Shape, point_in_ring
    from chiezo.search.filters import WithinCondition

    rng = random.Random(7)
    ring = [
        (
            0.5 + (0.3 + 0.2 * rng.random()) * math.cos(2 * math.pi * i / 60),
            0.5 + (0.3 + 0.2 * rng.random()) * math.sin(2 * math.pi * i / 60),
        )
        for i in range(60)
    ]
    condition = WithinCondition.of(Shape([ring]))
    test, args = condition.inside()
    conn = service.library.get("osm_towns").conn
    points = [(x / 97, y / 97) for x in range(-5, 103) for y in range(-5, 103)]
    named = test.replace("lat", ":lat").replace("lon", ":lon")
    sql = "SELECT " + named.replace("?", ":codes", 1).replace("?", ":key", 1)
    for lon, lat in points:
        inside_bbox = condition.shape.bbox[0] <= lon <= condition.shape.bbox[2] and (
            condition.shape.bbox[1] <= lat <= condition.shape.bbox[3]
        )
        if not inside_bbox:
            continue  # SQL always runs the test after the box's own
        values = {"lat": lat, "lon": lon, "codes": args[0], "key": args[1]}
        got = conn.execute(sql, values).fetchone()[0]
        assert bool(got) == point_in_ring(lon, lat, ring), (lon, lat)
