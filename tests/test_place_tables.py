"""The user's own place tables (ingest/places.py) built into real sources and read back through
the service: AED locations from a real workbook, hand-made CSV/TSV/GeoJSON/GPX files with real
coordinates (tests/data/places/README.md says where each comes from), and small files written
here where a case needs a file of its own."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import pytest
from openpyxl import Workbook, load_workbook

from chiezo.core.config import Settings
from chiezo.core.errors import InputError
from chiezo.ingest.places import (
    KIND,
    PlaceOptions,
    PlaceTables,
    address_areas,
    degrees,
    ranges,
)
from chiezo.ops import operating, reading, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest, FeaturesRequest, FilterRequest, SearchRequest

from helpers import build_source, data_file

DATA = Path(__file__).parent / "data" / "places"
AED = "docs/office/yaizu-aed_location.xlsx"
TAKAMATSU = (34.33333, 134.05)  # GeoNames 1851100, the city's point in cities15000
HELSINKI_STATION = (60.1713198, 24.9414566)  # OSM node 25389429


def haversine(a: tuple[float, float], b: tuple[float, float]) -> float:
    p1, p2 = math.radians(a[0]), math.radians(b[0])
    h = (
        math.sin((p2 - p1) / 2) ** 2
        + math.cos(p1) * math.cos(p2) * math.sin(math.radians(b[1] - a[1]) / 2) ** 2
    )
    return 2 * 6371.0088 * math.asin(math.sqrt(h))


def build(settings: Settings, name: str, paths, options: PlaceOptions | None = None):
    """(report, warnings) of building ``paths`` into source ``name``, the way the CLI does."""
    tables = PlaceTables([Path(p) for p in paths], options)
    warnings: list[str] = []
    report = build_source(
        settings, name, KIND, tables.docs(warnings.append), input_identity=tables.identity()
    )
    return report, warnings


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    """Every fixture built once, each as its own source; the warnings by source."""
    settings = Settings(data_dir=tmp_path_factory.mktemp("places") / "data", query_timeout=10)
    warned = {}
    for name, path in (
        ("aed", data_file(AED)),
        ("kagawa", DATA / "kagawa-broken.csv"),
        ("shikoku", DATA / "shikoku-swapped.tsv"),
        ("aed_cp932", DATA / "takamatsu-aed-cp932.csv"),
        ("helsinki", DATA / "helsinki.geojson"),
        ("gpx", DATA / "kagawa.gpx"),
    ):
        _, warned[name] = build(settings, name, [path])
    return Context(settings), warned


def aed_rows() -> list[dict]:
    """The AED workbook read here with openpyxl alone: what the source must hold."""
    workbook = load_workbook(data_file(AED), read_only=True)
    rows = list(workbook.worksheets[0].iter_rows(values_only=True))
    workbook.close()
    header = rows[0]
    return [dict(zip(header, row, strict=False)) for row in rows[1:] if any(row)]


# -- a real workbook: AED locations -----------------------------------------------------------


@pytest.mark.slow
def test_every_aed_is_a_document_with_its_point_and_id_key(library):
    service, warned = library
    rows = aed_rows()
    info = next(s for s in operating.sources(service) if s["name"] == "aed")
    assert info["docs"] == len(rows) == 455 and info["points"] == 455
    assert warned["aed"] == []
    first = rows[0]
    doc = reading.doc(
        service,
        DocRequest.of(
            source="aed",
            key=f"yaizu-aed_location.xlsx:Sheet1#{first['#property']}",
            fields=["title", "point", "attrs", "body", "extra"],
        ),
    )
    assert doc["title"] == first["name"]
    assert doc["point"] == {"lat": float(first["latitude"]), "lon": float(first["longitude"])}
    assert doc["attrs"]["address"] == [first["address"]]
    assert "latitude" not in doc["attrs"] and "name" not in doc["attrs"]
    assert f"address: {first['address']}" in doc["body"]
    assert doc["extra"] == {"file": "yaizu-aed_location.xlsx", "sheet": "Sheet1", "row": 2}
    # the #property column numbers the rows (1–31, 33, …): the key and an attribute, but no
    # line of the body, which reads as the place's labelled facts
    assert doc["body"].startswith(f"name: {first['name']}\n")
    assert doc["attrs"]["#property"] == [first["#property"]]


def test_a_column_that_numbers_the_rows_is_no_line_of_the_body(tmp_path):
    numbered = "No,名称,緯度,経度\n1,A館,34.3,134.0\n2,B館,34.4,134.1\n4,C館,34.5,134.2\n"
    coded = "No,名称,緯度,経度\nK-1,A館,34.3,134.0\nK-2,B館,34.4,134.1\n"
    counted_from = "No,名称,緯度,経度\n101,A館,34.3,134.0\n102,B館,34.4,134.1\n"
    bodies = {}
    for name, text in (("numbered", numbered), ("coded", coded), ("from", counted_from)):
        path = tmp_path / f"{name}.csv"
        path.write_text(text, encoding="utf-8")
        docs = list(PlaceTables([path]).docs(lambda message: None))
        bodies[name] = [d.body for d in docs]
        assert docs[1].key.startswith(f"{name}.csv#")  # an id column keys the rows all the same
    assert bodies["numbered"][0] == "名称: A館"  # 1, 2, 4: rows numbered, one taken out
    assert bodies["coded"][0] == "No: K-1\n名称: A館"  # a code is a fact to find
    assert bodies["from"][0] == "No: 101\n名称: A館"  # not counted from 1: a number of its own


def test_the_nearest_aeds_to_takamatsu_are_those_the_file_puts_nearest(library):
    service, _ = library
    rows = aed_rows()
    by_distance = sorted(
        rows, key=lambda r: haversine(TAKAMATSU, (float(r["latitude"]), float(r["longitude"])))
    )
    near = f"{TAKAMATSU[0]},{TAKAMATSU[1]}"
    result = searching.filter(
        service, FilterRequest.of(source="aed", near=near, limit=5, fields=["title", "key"])
    )
    assert [d["title"] for d in result["docs"]] == [r["name"] for r in by_distance[:5]]
    nearest = by_distance[0]
    expected_km = haversine(TAKAMATSU, (float(nearest["latitude"]), float(nearest["longitude"])))
    assert result["docs"][0]["distance_km"] == pytest.approx(expected_km, abs=0.001)
    points = [(float(r["latitude"]), float(r["longitude"])) for r in rows]
    within = [p for p in points if haversine(TAKAMATSU, p) <= 1.0]
    counted = searching.filter(
        service, FilterRequest.of(source="aed", near=near, radius_km=1.0, limit=1)
    )
    assert counted["total"] == len(within) and 0 < len(within) < len(rows)


def test_aeds_are_found_by_any_column_and_filtered_by_town(library):
    service, _ = library
    rows = aed_rows()
    # the town comes from the address: 綾歌郡綾川町… → 綾川町
    ayagawa = [r for r in rows if r["address"].startswith("綾歌郡綾川町")]
    assert (
        searching.filter(service, FilterRequest.of(source="aed", area=["綾川町"], limit=1))["total"]
        == len(ayagawa)
        > 0
    )
    takamatsu = [r for r in rows if r["address"].removeprefix("香川県").startswith("高松市")]
    assert searching.filter(service, FilterRequest.of(source="aed", area=["高松市"], limit=1))[
        "total"
    ] == len(takamatsu)
    # a value only in the installation-position column is found by keyword
    hits = searching.search(
        service, SearchRequest.of(query="ジャスコ防災センター", source="aed", limit=3)
    ).hits
    assert hits and hits[0].title == "イオン綾川ショッピングセンター"


# -- a CSV with broken rows ---------------------------------------------------------------------


def test_broken_rows_are_reported_by_number_and_kept_without_a_point(library):
    service, warned = library
    assert warned["kagawa"] == [
        "kagawa-broken.csv: rows 6–9, 13 have no usable coordinates; kept without a point "
        "(not a number: 6; missing: 7, 13; out of range: 8; 0,0 (null island): 9)"
    ]
    info = next(s for s in operating.sources(service) if s["name"] == "kagawa")
    assert info["docs"] == 13 and info["points"] == 8  # the empty record 10 is no document
    for key in ("5", "6", "7", "8", "11"):
        doc = reading.doc(
            service,
            DocRequest.of(
                source="kagawa", key=f"kagawa-broken.csv#{key}", fields=["point", "body"]
            ),
        )
        assert doc["point"] is None
    assert (
        searching.search(service, SearchRequest.of(query="多度津町", source="kagawa")).hits[0].title
        == "多度津町"
    )


def test_degrees_written_other_ways_read_as_the_same_point(library):
    service, _ = library
    sakaide = reading.doc(service, DocRequest.of(source="kagawa", title="坂出", fields=["point"]))[
        "point"
    ]  # 34°19'22"N
    assert sakaide == {
        "lat": pytest.approx(34.32278, abs=1e-4),
        "lon": pytest.approx(133.8356, abs=1e-4),
    }
    utazu = reading.doc(
        service, DocRequest.of(source="kagawa", title="宇多津町", fields=["point"])
    )["point"]  # ３４．３
    assert utazu == {"lat": 34.3, "lon": 133.81667}


def test_categories_become_features_with_their_counts(library):
    service, _ = library
    with open(DATA / "kagawa-broken.csv", encoding="utf-8", newline="") as fh:
        kinds = [r["種別"] for r in csv.DictReader(fh) if r["種別"]]
    listed = {
        f["feature"]: f["docs"]
        for f in reading.features(service, FeaturesRequest.of(source="kagawa"))["features"]
    }
    assert listed == {f"種別={k}": kinds.count(k) for k in set(kinds)}
    capitals = searching.filter(
        service,
        FilterRequest.of(source="kagawa", feature=["種別=県庁所在地"], limit=10, fields=["title"]),
    )
    assert {d["title"] for d in capitals["docs"]} == {
        "高松市",
        "松山市",
        "徳島市",
        "高知市",
        "岡山市",
    }
    # near + feature: the settlements within 30 km of Takamatsu that have a point
    near = searching.filter(
        service,
        FilterRequest.of(
            source="kagawa",
            feature=["種別=集落"],
            near=f"{TAKAMATSU[0]},{TAKAMATSU[1]}",
            radius_km=30,
            fields=["title"],
        ),
    )
    assert [d["title"] for d in near["docs"]] == ["宇多津町"]  # 多度津町, 志度: no point


def test_urls_and_areas_come_from_their_columns(library):
    service, _ = library
    doc = reading.doc(
        service,
        DocRequest.of(source="kagawa", title="宇多津町", fields=["url", "attrs", "opening"]),
    )
    assert doc["url"] == "https://www.geonames.org/1849073"
    assert doc["attrs"]["area"] == ["宇多津町", "香川県"]
    assert doc["opening"] == "宇多津町 — 集落, 香川県綾歌郡宇多津町"
    assert (
        searching.filter(service, FilterRequest.of(source="kagawa", area=["香川県"], limit=1))[
            "total"
        ]
        == 7
    )


# -- swapped columns, CP932 ---------------------------------------------------------------------


def test_swapped_columns_are_read_swapped_with_a_warning(library):
    service, warned = library
    assert warned["shikoku"] == [
        "shikoku-swapped.tsv: column 'lat' holds longitudes and 'lon' latitudes (values beyond "
        "±90 in 'lat'); read them swapped"
    ]
    kochi = reading.doc(
        service, DocRequest.of(source="shikoku", title="高知市", fields=["point", "key"])
    )
    assert (
        kochi["point"] == {"lat": 33.55, "lon": 133.53333}
        and kochi["key"] == "shikoku-swapped.tsv:3"
    )
    nearest = searching.filter(
        service, FilterRequest.of(source="shikoku", near=f"{TAKAMATSU[0]},{TAKAMATSU[1]}", limit=1)
    )
    assert nearest["docs"][0]["title"] == "丸亀市"


def test_a_cp932_csv_is_decoded_and_its_suffixed_headers_found(library):
    service, warned = library
    assert warned["aed_cp932"] == []
    raw = (DATA / "takamatsu-aed-cp932.csv").read_bytes()
    with pytest.raises(UnicodeDecodeError):
        raw.decode("utf-8")
    hit = searching.search(
        service, SearchRequest.of(query="JRホテルクレメント", source="aed_cp932")
    ).hits[0]  # ＪＲ in the file
    assert hit.title == "ＪＲホテルクレメント高松"
    doc = reading.doc(
        service, DocRequest.of(source="aed_cp932", key=hit.key, fields=["point", "attrs"])
    )
    assert doc["point"] == {"lat": 34.35215833, "lon": 134.0481344}
    assert doc["attrs"]["設置場所"] == ["１階ロビー"] and doc["attrs"]["area"] == ["高松市"]


# -- GeoJSON and GPX ----------------------------------------------------------------------------


def test_geojson_points_features_and_other_geometries(library):
    service, warned = library
    assert warned["helsinki"] == [
        "helsinki.geojson: feature 11 has no usable coordinates; kept without a point "
        "(a LineString, not a point: 11)"
    ]
    listed = {
        f["feature"]: f["docs"]
        for f in reading.features(service, FeaturesRequest.of(source="helsinki"))["features"]
    }
    assert listed["amenity=cafe"] == 3 and listed["tourism=museum"] == 2
    assert listed["amenity=pharmacy"] == 2 and listed["railway=station"] == 1
    street = reading.doc(
        service,
        DocRequest.of(source="helsinki", key="helsinki.geojson#way/28564345", fields=["point"]),
    )
    assert street["point"] is None
    mikonkatu = reading.doc(
        service, DocRequest.of(source="helsinki", title="Mikonkatu", fields=["point"])
    )  # MultiPoint: first
    assert mikonkatu["point"] == {"lat": 60.1698141, "lon": 24.9453995}
    library_doc = searching.filter(
        service, FilterRequest.of(source="helsinki", wikidata=["Q420747"], fields=["title", "url"])
    )
    assert library_doc["docs"] == [
        {"title": "Kansalliskirjasto", "url": "https://www.kansalliskirjasto.fi/"}
    ]


def test_the_nearest_cafe_to_the_station_is_the_one_the_file_puts_nearest(library):
    service, _ = library
    features = json.loads((DATA / "helsinki.geojson").read_text(encoding="utf-8"))["features"]
    cafes = [f for f in features if f["properties"].get("amenity") == "cafe"]
    distance = {
        f["properties"]["name"]: haversine(
            HELSINKI_STATION, tuple(reversed(f["geometry"]["coordinates"]))
        )
        for f in cafes
    }
    station = f"{HELSINKI_STATION[0]},{HELSINKI_STATION[1]}"
    result = searching.filter(
        service,
        FilterRequest.of(
            source="helsinki", feature=["amenity=cafe"], near=station, fields=["title"]
        ),
    )
    assert [d["title"] for d in result["docs"]] == sorted(distance, key=distance.get)
    assert result["docs"][0]["distance_km"] == pytest.approx(min(distance.values()), abs=0.001)


def test_gpx_waypoints_and_named_route_and_track_points(library):
    service, warned = library
    assert warned["gpx"] == []
    info = next(s for s in operating.sources(service) if s["name"] == "gpx")
    assert info["docs"] == 8  # 5 waypoints, 2 of 3 route points, 1 of 3 track points
    listed = {
        f["feature"]: f["docs"]
        for f in reading.features(service, FeaturesRequest.of(source="gpx"))["features"]
    }
    assert listed["type=PPL"] == 3 and listed["sym=City (Large)"] == 1
    takamatsu = reading.doc(
        service,
        DocRequest.of(source="gpx", key="kagawa.gpx:wpt:1", fields=["title", "url", "body"]),
    )
    assert takamatsu["title"] == "高松市" and takamatsu["url"] == "https://www.geonames.org/1851100"
    assert "desc: 香川県の県庁所在地" in takamatsu["body"]
    shido = reading.doc(
        service, DocRequest.of(source="gpx", key="kagawa.gpx:trkpt:3", fields=["point", "attrs"])
    )
    assert shido["point"] == {"lat": 34.32333, "lon": 134.17333}
    assert shido["attrs"]["track"] == ["志度まで"]


def test_a_semicolon_text_file_with_decimal_commas(tmp_path, settings, service):
    # as a spreadsheet with a European locale writes it (OSM nodes 60068035, 151006533)
    text = "name;lat;lon;amenity\nCafe Java;60,169967;24,937518;cafe\nCafe Ekberg;60,1647366;24,9377736;cafe\n"
    (tmp_path / "cafes.txt").write_text(text, encoding="utf-8")
    build(settings, "cafes", [tmp_path / "cafes.txt"])
    doc = reading.doc(
        service, DocRequest.of(source="cafes", title="Cafe Ekberg", fields=["point", "attrs"])
    )
    assert doc["point"] == {"lat": 60.1647366, "lon": 24.9377736}
    assert doc["attrs"]["feature"] == ["amenity=cafe"]


def test_geojson_bare_points_are_kept_and_other_systems_refused(tmp_path, settings, service):
    bare = {
        "type": "FeatureCollection",
        "features": [
            {
                "type": "Feature",
                "geometry": {"type": "Point", "coordinates": [24.9414566, 60.1713198]},
                "properties": {},
            },
            {"type": "Feature", "geometry": None, "properties": {}},  # nothing at all: no document
        ],
    }
    (tmp_path / "bare.geojson").write_text(json.dumps(bare), encoding="utf-8")
    build(settings, "bare", [tmp_path / "bare.geojson"])
    found = searching.filter(
        service, FilterRequest.of(source="bare", near="60.1713,24.9415", fields=["title", "point"])
    )
    assert found["total"] == 1 and found["docs"][0]["title"] == "bare.geojson feature 1"
    projected = {
        **bare,
        "crs": {"type": "name", "properties": {"name": "urn:ogc:def:crs:EPSG::3067"}},
    }
    (tmp_path / "tm35.geojson").write_text(json.dumps(projected), encoding="utf-8")
    with pytest.raises(
        InputError, match="declares the coordinate system urn:ogc:def:crs:EPSG::3067"
    ):
        build(settings, "tm35", [tmp_path / "tm35.geojson"])


# -- options and errors -------------------------------------------------------------------------


def test_a_file_without_coordinates_names_its_headers(tmp_path, settings):
    path = tmp_path / "shops.csv"
    path.write_text(
        "名称,住所,電話\n丸亀市役所,香川県丸亀市大手町二丁目4番21号,0877-23-2111\n",
        encoding="utf-8",
    )
    with pytest.raises(InputError) as caught:
        build(settings, "shops", [path])
    assert (
        caught.value.message
        == "no latitude/longitude columns in shops.csv (headers: 名称, 住所, 電話)"
    )
    assert caught.value.to_dict()["headers"] == ["名称", "住所", "電話"]
    assert "--lat COLUMN --lon COLUMN" in caught.value.to_dict()["hint"]
    assert not (settings.corpus_dir / "shops" / "current").exists()


def test_metres_in_x_and_y_are_no_degrees(tmp_path, settings):
    path = tmp_path / "survey.csv"  # plane rectangular coordinates (zone IV), not degrees
    path.write_text("地点,X,Y\nA,-147869.12,51205.44\nB,-148012.50,50977.10\n", encoding="utf-8")
    with pytest.raises(InputError) as caught:
        build(settings, "survey", [path])
    assert caught.value.message.startswith(
        "columns 'Y' and 'X' of survey.csv hold no usable degrees"
    )
    assert "'51205.44', '-147869.12' in row 2" in caught.value.message


def test_lat_and_lon_options_name_the_columns(tmp_path, settings, service):
    path = tmp_path / "points.csv"
    path.write_text(
        "地点,N,E\n高松市,34.33333,134.05\n丸亀市,34.28333,133.78333\n", encoding="utf-8"
    )
    with pytest.raises(InputError):
        build(settings, "points", [path])  # N and E are no coordinate headers
    with pytest.raises(InputError) as caught:
        build(settings, "points", [path], PlaceOptions(lat="north", lon="E"))
    assert "(headers: 地点, N, E)" in caught.value.message
    build(settings, "points", [path], PlaceOptions(lat="N", lon="e"))  # case-insensitive
    doc = reading.doc(
        service, DocRequest.of(source="points", title="丸亀市", fields=["point", "attrs"])
    )
    assert doc["point"] == {"lat": 34.28333, "lon": 133.78333} and "N" not in doc["attrs"]


def test_title_and_feature_options(tmp_path, settings, service):
    path = tmp_path / "aed.csv"
    path.write_text(
        "番号,設置場所,施設,緯度,経度,設置階\n1,１階ロビー,ＪＲホテルクレメント高松,34.35215833,"
        "134.0481344,1階\n2,瓦町駅改札口,ことでん瓦町駅,34.33888667,134.0525983,1階\n",
        encoding="utf-8",
    )
    build(settings, "aed", [path], PlaceOptions(title="施設", feature=("設置階",)))
    doc = reading.doc(
        service, DocRequest.of(source="aed", key="aed.csv#2", fields=["title", "attrs"])
    )
    assert doc["title"] == "ことでん瓦町駅" and doc["attrs"]["feature"] == ["設置階=1階"]
    assert reading.features(service, FeaturesRequest.of(source="aed"))["features"] == [
        {"feature": "設置階=1階", "docs": 2}
    ]


def aed_workbook(path: Path) -> list[dict]:
    """A workbook as people make them, from the real AED rows: a notes sheet without
    coordinates, a sheet with a title row above its header, and a second table."""
    rows = aed_rows()
    workbook = Workbook()
    notes = workbook.active
    notes.title = "説明"
    notes.append(["この表は高松市のAED設置場所です。"])
    notes.append(["項目", "内容"])
    notes.append(["緯度経度", "世界測地系"])
    main = workbook.create_sheet("AED")
    main.append(["AED設置場所一覧"])
    main.append([])
    main.append(["No", "名称", "住所", "緯度", "経度"])
    for row in rows[:20]:
        main.append(
            [
                int(row["#property"]),
                row["name"],
                row["address"],
                float(row["latitude"]),
                float(row["longitude"]),
            ]
        )
    more = workbook.create_sheet("追加")
    more.append(["名称", "latitude", "longitude"])
    for row in rows[20:25]:
        more.append([row["name"], row["latitude"], row["longitude"]])
    workbook.save(path)
    return rows


def test_every_sheet_but_one_without_coordinates_which_is_skipped(tmp_path, settings, service):
    rows = aed_workbook(tmp_path / "aed.xlsx")
    _, warnings = build(settings, "aed", [tmp_path / "aed.xlsx"])
    assert warnings == [
        "no latitude/longitude columns in aed.xlsx [説明] (headers: 項目, 内容); sheet skipped"
    ]
    info = next(s for s in operating.sources(service) if s["name"] == "aed")
    assert info["docs"] == 25 and info["points"] == 25
    first = reading.doc(
        service,
        DocRequest.of(
            source="aed", key=f"aed.xlsx:AED#{rows[0]['#property']}", fields=["title", "extra"]
        ),
    )
    assert first == {
        "title": rows[0]["name"],
        "extra": {"file": "aed.xlsx", "sheet": "AED", "row": 4},
    }
    assert (
        reading.doc(service, DocRequest.of(source="aed", key="aed.xlsx:追加:2", fields=["title"]))[
            "title"
        ]
        == rows[20]["name"]
    )


def test_a_sheet_chosen_by_name(tmp_path, settings, service):
    aed_workbook(tmp_path / "aed.xlsx")
    build(settings, "aed", [tmp_path / "aed.xlsx"], PlaceOptions(sheet="追加"))
    assert next(s for s in operating.sources(service) if s["name"] == "aed")["docs"] == 5
    with pytest.raises(InputError) as caught:
        build(settings, "other", [tmp_path / "aed.xlsx"], PlaceOptions(sheet="AED2"))
    assert caught.value.message == "aed.xlsx has no sheet 'AED2' (sheets: 説明, AED, 追加)"
    with pytest.raises(InputError) as caught:  # chosen, so never skipped
        build(settings, "other", [tmp_path / "aed.xlsx"], PlaceOptions(sheet="説明"))
    assert "aed.xlsx [説明] (headers: 項目, 内容)" in caught.value.message


def test_keys_stay_unique_across_files_of_one_name(tmp_path, settings, service):
    for folder in ("east", "west"):
        (tmp_path / folder).mkdir()
        shutil.copy(DATA / "shikoku-swapped.tsv", tmp_path / folder / "cities.tsv")
    build(settings, "both", [tmp_path / "east" / "cities.tsv", tmp_path / "west" / "cities.tsv"])
    found = searching.filter(
        service,
        FilterRequest.of(source="both", near="33.55,133.53333", radius_km=1, fields=["key"]),
    )
    assert sorted(d["key"] for d in found["docs"]) == ["east/cities.tsv:3", "west/cities.tsv:3"]


def test_an_id_repeated_or_missing_after_the_rows_read_falls_back_to_the_row_number(
    tmp_path, settings, service
):
    # ids are checked on the first 200 rows; rows 203 and 204 break them later
    lines = ["id,name,lat,lon"] + [f"{i},p{i},34.3,134.{i:03d}" for i in range(1, 202)]
    lines += ["3,again,34.3,134.5", ",no id,34.3,134.6"]
    (tmp_path / "ids.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _, warnings = build(settings, "ids", [tmp_path / "ids.csv"])
    assert warnings == [
        "ids.csv: rows 203–204 repeat or lack the id in column 'id'; keyed by their row number "
        "instead"
    ]
    assert (
        reading.doc(service, DocRequest.of(source="ids", key="ids.csv:203", fields=["title"]))[
            "title"
        ]
        == "again"
    )
    assert (
        reading.doc(service, DocRequest.of(source="ids", key="ids.csv#3", fields=["title"]))[
            "title"
        ]
        == "p3"
    )


def test_missing_and_unsupported_files_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        PlaceTables([tmp_path / "nothing.csv"])
    (tmp_path / "old.xls").write_bytes(b"\xd0\xcf\x11\xe0")
    with pytest.raises(InputError) as caught:
        PlaceTables([tmp_path / "old.xls"])
    assert ".xlsx" in caught.value.to_dict()["supported"]
    assert ".gpx" in caught.value.to_dict()["hint"]


def test_identity_records_the_files_and_options():
    tables = PlaceTables([DATA / "kagawa.gpx", DATA / "helsinki.geojson"], PlaceOptions(sheet="A"))
    identity = tables.identity()
    assert identity["path"] == str((DATA / "kagawa.gpx").resolve())
    assert identity["files"] == 2 and identity["options"] == {
        "lat": None,
        "lon": None,
        "title": None,
        "feature": [],
        "sheet": "A",
        "flag_key": None,
        "require_feature": None,
    }
    assert (
        identity["bytes"]
        == tables.total_bytes
        == sum((DATA / n).stat().st_size for n in ("kagawa.gpx", "helsinki.geojson"))
    )


# -- the pieces ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("35.6812", 35.6812),
        ("３５．６８１２", 35.6812),
        ("35.6812°", 35.6812),
        ("N35.68", 35.68),
        ("35.68S", -35.68),
        ("W 0.1278", -0.1278),
        ("−33.9", -33.9),
        ("35°40'52\"N", 35 + 40 / 60 + 52 / 3600),
        ("北緯35度40分52秒", 35 + 40 / 60 + 52 / 3600),
        ("１３３°５０′８″Ｅ", 133 + 50 / 60 + 8 / 3600),
        ("35,6812", 35.6812),
        ("abc", None),
        ("", None),
        ("35°70'", None),
        ("1e5", None),
        ("No", None),
    ],
)
def test_degrees(text, expected):
    assert degrees(text) == (pytest.approx(expected) if expected is not None else None)


@pytest.mark.parametrize(
    ("address", "areas"),
    [
        ("香川県高松市番町一丁目10-16", ["香川県", "高松市"]),
        ("綾歌郡綾川町萱原822-1", ["綾川町"]),
        ("三重県四日市市諏訪町1-5", ["三重県", "四日市市"]),
        ("長野県大町市大町3887", ["長野県", "大町市"]),
        ("福岡県小郡市小郡255-1", ["福岡県", "小郡市"]),
        ("佐賀県杵島郡大町町大字大町5017", ["佐賀県", "大町町"]),
        ("東京都千代田区丸の内一丁目", ["東京都", "千代田区"]),
        ("〒760-0017 高松市番町1-8-15", ["高松市"]),
        ("番町一丁目10", []),  # a street, not a town
        ("Fabianinkatu 35, Helsinki", []),
    ],
)
def test_areas_from_japanese_addresses(address, areas):
    assert address_areas(address) == areas


def test_ranges():
    assert ranges([12, 4, 13, 9, 14, 20]) == "4, 9, 12–14, 20"
    assert ranges([7]) == "7"
