"""``chiezo ingest places FILE… --name N`` end to end: the AED workbook, a GeoJSON and a GPX file
built as one source through the real command line, then filtered by distance and category,
searched near a point, listed by feature, rebuilt with its recorded options; broken rows and
unusable files reported as a user sees them."""

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from chiezo.ops import reading, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest, SearchRequest
from chiezo.surfaces.cli.main import cli

from helpers import data_file

DATA = Path(__file__).parent / "data" / "places"
TAKAMATSU = (34.33333, 134.05)  # GeoNames 1851100


def haversine(a, b) -> float:
    lat1, lon1, lat2, lon2 = map(math.radians, (*a, *b))
    h = (
        math.sin((lat2 - lat1) / 2) ** 2
        + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    return 2 * 6371.0088 * math.asin(math.sqrt(h))


def run(settings, *args):
    return CliRunner().invoke(cli, ["--data", str(settings.data_dir), *map(str, args)])


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    from chiezo.core.config import Settings

    settings = Settings(data_dir=tmp_path_factory.mktemp("places_cli") / "data")
    aed = data_file("docs/office/yaizu-aed_location.xlsx")
    result = run(
        settings,
        "ingest",
        "places",
        aed,
        DATA / "helsinki.geojson",
        DATA / "kagawa.gpx",
        "--name",
        "mine",
        "--json",
    )
    assert result.exit_code == 0, result.output
    return settings, json.loads(result.output)


@pytest.mark.slow
def test_three_formats_build_one_source_with_every_row(built):
    settings, report = built
    assert report["kind"] == "places"
    service = Context(settings)
    info = service.library.get("mine").info()
    assert info.docs == report["docs"] and info.docs > 455  # every AED, café and town
    assert info.points >= 455
    assert info.input["files"] == 3 and len(info.input["paths"]) == 3
    assert info.attribution["text"].startswith("your places (yaizu-aed_location.xlsx")


def test_filter_near_with_a_feature_orders_by_distance(built):
    settings, _ = built
    result = run(
        settings,
        "filter",
        "mine",
        "--near",
        "34.33333,134.05",
        "--radius-km",
        "60",
        "--feature",
        "type=PPLA2",
        "--fields",
        "title,point",
        "--json",
    )
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    titles = [d["title"] for d in found["docs"]]
    assert set(titles) == {"丸亀市", "坂出"}  # the GPX's PPLA2 waypoints within 60 km
    distances = [
        haversine(TAKAMATSU, (d["point"]["lat"], d["point"]["lon"])) for d in found["docs"]
    ]
    assert distances == sorted(distances) and found["total"] == 2


def test_search_near_a_point_carries_the_distance(built):
    settings, _ = built
    result = run(
        settings, "search", "ホテル", "--source", "mine", "--near", "34.33333,134.05", "--json"
    )
    assert result.exit_code == 0, result.output
    hits = json.loads(result.output)["hits"]
    assert len(hits) >= 5 and all("ホテル" in h["title"] + h["snippet"] for h in hits[:5])
    service = Context(settings)
    for hit in hits:
        point = reading.doc(
            service, DocRequest.of(source="mine", doc_id=hit["doc_id"], fields=["point"])
        )["point"]
        assert hit["distance_km"] == pytest.approx(
            haversine(TAKAMATSU, (point["lat"], point["lon"])), abs=0.01
        )


def test_features_listing_counts_the_categories(built):
    settings, _ = built
    result = run(settings, "features", "mine", "--json")
    assert result.exit_code == 0, result.output
    counts = {f["feature"]: f["docs"] for f in json.loads(result.output)["features"]}
    assert counts["amenity=cafe"] == 3 and counts["type=PPLA2"] == 2


@pytest.mark.slow
def test_rebuild_keeps_the_files_and_options(built, tmp_path):
    settings, report = built
    rebuilt = run(settings, "rebuild", "mine", "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    again = json.loads(rebuilt.output)
    assert again["docs"] == report["docs"] and again["kind"] == "places"


def test_broken_rows_are_reported_and_kept(tmp_path, settings):
    result = run(settings, "ingest", "places", DATA / "kagawa-broken.csv", "--name", "broken")
    assert result.exit_code == 0, result.output
    assert "rows 6–9, 13" in result.output and "kept without a point" in result.output
    service = Context(settings)
    assert service.library.get("broken").info().docs == 13  # 14 records, one empty
    no_point = reading.doc(service, DocRequest.of(source="broken", title="志度", fields=["point"]))
    assert no_point.get("point") is None


def test_a_file_without_coordinates_is_a_usage_error_naming_its_headers(tmp_path, settings):
    shops = tmp_path / "shops.csv"
    shops.write_text("名称,住所,電話\n本店,高松市番町1-1,087-000-0000\n", encoding="utf-8")
    result = run(settings, "ingest", "places", shops, "--name", "shops")
    assert result.exit_code == 2
    assert "名称" in result.output and "住所" in result.output and "--lat" in result.output
    assert "shops" not in Context(settings).library.names()  # nothing was switched in


def test_places_needs_at_least_one_file(tmp_path, settings):
    result = run(settings, "ingest", "places", "--name", "none")
    assert result.exit_code == 2  # FILE… is required


def test_every_other_column_is_an_attribute_a_filter_reads(built):
    settings, _ = built
    result = run(
        settings,
        "filter",
        "mine",
        "--attr",
        "installationPosition=１階ロビー",
        "--fields",
        "title,attrs",
        "--json",
    )
    assert result.exit_code == 0, result.output
    found = json.loads(result.output)
    assert "ＪＲホテルクレメント高松" in [d["title"] for d in found["docs"]]
    assert all(d["attrs"]["installationPosition"] == ["１階ロビー"] for d in found["docs"])
    town = run(settings, "filter", "mine", "--area", "綾川町", "--json")
    assert town.exit_code == 0 and json.loads(town.output)["total"] >= 1


def test_a_rebuild_reads_only_the_files_that_changed(tmp_path, settings):
    from shutil import copy

    folder = tmp_path / "in"
    folder.mkdir()
    gpx, csv = copy(DATA / "kagawa.gpx", folder), copy(DATA / "kagawa-broken.csv", folder)
    first = json.loads(run(settings, "ingest", "places", gpx, csv, "--name", "k", "--json").output)
    assert first["conversions"] == {"converted": 2, "reused": 0}
    with open(csv, "a", encoding="utf-8") as fh:
        fh.write("14,琴平町,集落,香川県仲多度郡琴平町,34.19167,133.82083,\n")
    again = run(settings, "rebuild", "k", "--json")
    report = json.loads(again.output)
    assert report["conversions"] == {"converted": 1, "reused": 1}  # only the CSV read again
    assert report["docs"] == first["docs"] + 1
    assert "rows 6–9, 13" in " ".join(report["warnings"])  # the reused file's warnings too
    same = json.loads(run(settings, "rebuild", "k", "--json").output)
    assert same["conversions"] == {"converted": 0, "reused": 2}
    service = Context(settings)
    assert (
        reading.doc(service, DocRequest.of(source="k", title="琴平町", fields=["point"]))["point"][
            "lat"
        ]
        == 34.19167
    )
    ids = [
        h.doc_id
        for h in searching.search(service, SearchRequest.of(query="高松市", source="k")).hits
    ]
    assert ids  # documents from the cache are searchable as before
    other = json.loads(
        run(settings, "ingest", "places", csv, "--name", "k2", "--title", "所在地", "--json").output
    )
    assert other["conversions"] == {"converted": 1, "reused": 0}  # other options: read again
