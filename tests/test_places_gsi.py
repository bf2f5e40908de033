"""GSI's disaster datasets (国土地理院) through ``chiezo ingest places``, in their published
formats (tests/data/gsi/README.md): 指定緊急避難場所 CSV, whose disaster columns (洪水, 津波…,
``1`` or empty) become one feature key (``--flag-key 災害種別``) and whose owner declares with
``--require-feature`` that a search around a point must name the disaster; 自然災害伝承碑
GeoJSON and CSV, whose 災害種別 cell may list several types. Built through the real command
line and read back through the service."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery
from chiezo.ingest.places import PlaceOptions, PlaceTables, split_list
from chiezo.ops.context import Context
from chiezo.search.filters import haversine_km
from chiezo.store.kinds import kind_named
from chiezo.store.requirements import required_feature
from chiezo.surfaces.cli.main import cli

DATA = Path(__file__).parent / "data" / "gsi"
SHELTERS = DATA / "shelters.csv"
LORE = DATA / "lore.geojson"
KAWAGUCHI_STATION = (35.8017, 139.7172)  # JR 川口駅
FLOOD_SHELTERS = {
    "川口市立栄町小学校",
    "川口市立領家中学校",
    "越谷市立大袋中学校",
    "春日部市立武里中学校",
    "春日部市庄和総合支所",
}
# the columns of GSI's 自然災害伝承碑 CSV, as published
LORE_CSV_HEADER = (
    "ID,碑名,建立年,所在地,災害名,災害種別,伝承内容,緯度,経度,公開日,修正等公開日,制限事項"
)


def run(settings: Settings, *args: object) -> Result:
    return CliRunner().invoke(cli, ["--data", str(settings.data_dir), *map(str, args)])


def ok_json(result: Result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


@pytest.fixture(scope="module")
def library(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return Settings(data_dir=tmp_path_factory.mktemp("gsi") / "data", query_timeout=10)


@pytest.fixture(scope="module")
def settings(library: Settings) -> Settings:
    """Shelters built as another engineer's end-to-end tests build them."""
    shelters = [
        *("ingest", "places", SHELTERS, "--name", "shelters"),
        *("--flag-key", "災害種別", "--require-feature", "災害種別", "--json"),
    ]
    assert ok_json(run(library, *shelters))["docs"] == 8
    return library


@pytest.fixture(scope="module")
def lore(library: Settings) -> Settings:
    """Lore monuments built as another engineer's end-to-end tests build them."""
    assert ok_json(run(library, "ingest", "places", LORE, "--name", "lore", "--json"))["docs"] == 6
    return library


def feature_counts(settings: Settings, source: str) -> dict[str, int]:
    listed = ok_json(run(settings, "features", source, "--json"))["features"]
    return {f["feature"]: f["docs"] for f in listed}


def test_disaster_columns_are_one_feature_key(settings: Settings) -> None:
    counts = feature_counts(settings, "shelters")
    assert counts["災害種別=洪水"] == 5 and counts["災害種別=地震"] == 8
    assert counts["災害種別=崖崩れ、土石流及び地滑り"] == 1  # the header's 、 is no list
    assert counts["災害種別=内水氾濫"] == 3 and counts["災害種別=大規模な火事"] == 3
    assert not any(f.endswith(("=津波", "=高潮", "=火山現象")) for f in counts)  # none marked
    info = Context(settings).library.get("shelters").info()
    # a marked cell is the feature, not an attribute 洪水=1 besides it
    assert {"洪水", "地震", "津波"}.isdisjoint(info.attributes)
    assert {"共通ID", "住所", "備考"} <= set(info.attributes)


def test_a_shelter_says_its_disasters_in_one_line(settings: Settings) -> None:
    found = ok_json(
        run(
            settings,
            "filter",
            "shelters",
            "--attr",
            "共通ID=E1120300000102",
            "--fields",
            "title,body,opening",
            "--json",
        )
    )
    (doc,) = found["docs"]
    assert doc["title"] == "川口市立領家中学校"
    assert "災害種別: 洪水 / 地震 / 内水氾濫 / 指定避難所との住所同一" in doc["body"]
    assert "洪水: 1" not in doc["body"] and "備考: 洪水時は3階以上に避難" in doc["body"]
    assert doc["opening"].startswith("川口市立領家中学校 — 洪水, 地震, 内水氾濫")


def test_flood_shelters_near_a_point_nearest_first(settings: Settings) -> None:
    found = ok_json(
        run(
            settings,
            "filter",
            "shelters",
            "--near",
            "35.8017,139.7172",
            "--radius-km",
            "30",
            "--feature",
            "災害種別=洪水",
            "--fields",
            "title,point",
            "--json",
        )
    )
    titles = [d["title"] for d in found["docs"]]
    assert set(titles) == FLOOD_SHELTERS and found["total"] == 5
    assert titles[0] == "川口市立栄町小学校"
    distances = [
        haversine_km(*KAWAGUCHI_STATION, d["point"]["lat"], d["point"]["lon"])
        for d in found["docs"]
    ]
    assert distances == sorted(distances)


def test_required_feature_is_recorded_and_read_back(settings: Settings, lore: Settings) -> None:
    library = Context(settings).library
    shelters, monuments = library.get("shelters"), library.get("lore")
    assert required_feature(shelters) == "災害種別"
    assert required_feature(monuments) is None
    recorded = shelters.info().input
    assert recorded["options"]["require_feature"] == "災害種別"
    assert recorded["options"]["flag_key"] == "災害種別"
    again = kind_named("places").options_from_record(recorded)  # a rebuild builds it the same
    assert (again.flag_key, again.require_feature) == ("災害種別", "災害種別")


def test_a_required_key_no_place_has_is_refused(settings: Settings) -> None:
    result = run(
        settings,
        "ingest",
        "places",
        SHELTERS,
        "--name",
        "bad",
        "--flag-key",
        "災害種別",
        "--require-feature",
        "対応災害",
    )
    assert result.exit_code != 0
    assert "対応災害" in result.output and "災害種別" in result.output  # the keys it has
    # without --flag-key the disaster columns are under the key "flag": 災害種別 is refused
    result = run(
        settings, "ingest", "places", SHELTERS, "--name", "bad", "--require-feature", "災害種別"
    )
    assert result.exit_code != 0 and "--flag-key" in result.output
    assert "bad" not in {s.name for s in Context(settings).library.infos()}


def test_lore_types_listed_in_one_cell_are_one_feature_each(lore: Settings) -> None:
    counts = feature_counts(lore, "lore")
    assert counts["災害種別=洪水"] == 4  # 洪水, 洪水・土砂災害, 洪水/高潮, 洪水
    assert counts["災害種別=土砂災害"] == 1 and counts["災害種別=高潮"] == 1
    assert counts["災害種別=地震"] == 2
    assert not any("・" in f or "/" in f for f in counts)
    # 伝承内容 is a body line: found by keyword, near a point too
    hits = ok_json(run(lore, "search", "堤防のかさ上げ", "--source", "lore", "--json"))["hits"]
    assert hits and hits[0]["title"] == "明治四十三年水害記念碑"
    near = ok_json(
        run(
            lore,
            "search",
            "舟で行き来",
            "--source",
            "lore",
            "--near",
            "35.9753,139.7524",
            "--json",
        )
    )["hits"]
    assert near[0]["title"] == "庄和水害の碑" and near[0]["distance_km"] < 10


def test_lore_csv_in_shift_jis(tmp_path: Path) -> None:
    """The CSV form of the lore data (its published columns), as Windows writes it."""
    rows = [
        LORE_CSV_HEADER,
        "11203-001,明治四十三年水害記念碑,1912,埼玉県川口市領家4丁目,明治43年関東大水害（1910年8月）,"
        "洪水,荒川の堤防が切れ、領家一帯は軒下まで水に浸かった。,35.8112,139.7391,2021/3/3,,",
        "11222-001,カスリーン台風洪水記念碑,1950,埼玉県越谷市大字大吉,カスリーン台風（1947年9月）,"
        "洪水・土砂災害,利根川の決壊で越ヶ谷の町まで水に浸かった。,35.9093,139.8141,2022/6/23,,",
    ]
    path = tmp_path / "lore.csv"
    path.write_bytes(("\r\n".join(rows) + "\r\n").encode("cp932"))
    docs = list(PlaceTables([path]).docs(lambda message: None))
    assert [d.key for d in docs] == ["lore.csv#11203-001", "lore.csv#11222-001"]
    assert docs[1].title == "カスリーン台風洪水記念碑" and docs[1].point == (35.9093, 139.8141)
    assert docs[1].attrs["feature"] == ["災害種別=洪水", "災害種別=土砂災害"]
    assert docs[1].attrs["area"] == ["埼玉県", "越谷市"]
    assert "伝承内容: 利根川の決壊" in docs[1].body


def test_shelters_in_shift_jis_with_an_unmarked_row(tmp_path: Path) -> None:
    """The default key is ``flag``; a row with no mark has no flag feature."""
    text = SHELTERS.read_text(encoding="utf-8-sig")
    text += (
        "9,E1121400000103,春日部市立豊春小学校,埼玉県春日部市上蛭田,,,,,,,,,,35.9671,139.7287,\r\n"
    )
    path = tmp_path / "shelters-sjis.csv"
    path.write_bytes(text.encode("cp932"))
    warnings: list[str] = []
    docs = {d.title: d for d in PlaceTables([path]).docs(warnings.append)}
    assert not warnings
    assert docs["春日部市庄和総合支所"].attrs["feature"] == [
        "flag=洪水",
        "flag=崖崩れ、土石流及び地滑り",
        "flag=地震",
    ]
    unmarked = docs["春日部市立豊春小学校"]
    assert "feature" not in unmarked.attrs and "flag" not in unmarked.body
    assert unmarked.point == (35.9671, 139.7287)


def test_what_is_not_a_set_of_flags_stays_attributes(tmp_path: Path) -> None:
    one = tmp_path / "aed.csv"  # one yes/no column is an attribute, as before
    one.write_text("名称,緯度,経度,24時間\nA,35.80,139.72,○\nB,35.81,139.73,\n", encoding="utf-8")
    (doc, _) = PlaceTables([one]).docs(lambda message: None)
    assert doc.attrs["24時間"] == ["○"] and "feature" not in doc.attrs
    # two columns of 1 in every row: as likely counts as marks, unless --flag-key says
    full = tmp_path / "full.csv"
    full.write_text(
        "名称,緯度,経度,設置台数,一般開放\nA,35.80,139.72,1,1\nB,35.81,139.73,1,1\n",
        encoding="utf-8",
    )
    (doc, _) = PlaceTables([full]).docs(lambda message: None)
    assert doc.attrs["設置台数"] == ["1"] and "feature" not in doc.attrs
    (doc, _) = PlaceTables([full], PlaceOptions(flag_key="設備")).docs(lambda message: None)
    assert doc.attrs["feature"] == ["設備=設置台数", "設備=一般開放"]


def test_a_flag_key_the_filter_cannot_name_is_refused() -> None:
    for key in ("災害=種別", "洪水,津波", " "):
        with pytest.raises(BadQuery):
            PlaceTables([SHELTERS], PlaceOptions(flag_key=key))
    with pytest.raises(BadQuery):
        PlaceTables([SHELTERS], PlaceOptions(require_feature="a=b"))


def test_list_cells_split_between_items_only() -> None:
    assert split_list("洪水・土砂災害") == ["洪水", "土砂災害"]
    assert split_list("洪水／高潮、地震") == ["洪水", "高潮", "地震"]
    assert split_list("土砂災害（土石流・がけ崩れ）、洪水") == [
        "土砂災害（土石流・がけ崩れ）",
        "洪水",
    ]
    assert split_list("ショッピング・センター") == ["ショッピング・センター"]  # one name
    assert split_list("ホテル・旅館") == ["ホテル", "旅館"]
