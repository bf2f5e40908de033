"""Japanese names in GeoNames sources (issues 17, 31): titles in Japanese forms rather than the
Chinese ones GeoNames also lists, areas in either language — Japan's prefectures in Japanese
with or without the alternate-names file — the closest values for one that does not exist, a
country's alternate names fetched and checked — on the GeoNames files in
tests/data (excerpts of cities15000/cities5000, admin1CodesASCII.txt) and a small
alternate-names sample built from their rows (tests/data/README.md)."""

import hashlib
import json
import re
import shutil
import zipfile
from pathlib import Path

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from chiezo.core.config import Settings
from chiezo.core.errors import InputError
from chiezo.ingest.geonames import (
    GeoNamesOptions,
    Lookups,
    display_name,
    jp_prefectures,
    read_places,
)
from chiezo.ops import building, reading, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest, FilterRequest, SearchRequest
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.mcp.server import build_mcp

from helpers import DumpSite, data_file

CITIES = "geonames/cities15000.zip"
ADMIN1 = "geonames/admin1CodesASCII.txt"
SAMPLE = Path(__file__).parent / "data" / "geonames" / "alternateNames-JP-sample.txt"
KOBE, KASHIMA_IBARAKI, SAITAMA = "1859171", "1860748", "6940394"


@pytest.fixture(scope="module")
def english(tmp_path_factory):
    """cities15000 + admin1: Japanese titles from the rows, Japanese prefectures from the
    package's table, English areas elsewhere."""
    service = Context(Settings(data_dir=tmp_path_factory.mktemp("en") / "data"))
    building.ingest(
        service,
        "geonames",
        data_file(CITIES),
        "geonames",
        options=GeoNamesOptions(data_file(ADMIN1)),
    )
    return service


def japan_rows(folder: Path) -> Path:
    """The Japanese rows of cities15000, as a country export (JP.txt) holds them."""
    with zipfile.ZipFile(data_file(CITIES)) as archive:
        rows = archive.read("cities15000.txt").decode().splitlines()
    export = folder / "JP.txt"
    export.write_text("\n".join(r for r in rows if r.split("\t")[8] == "JP") + "\n")
    return export


@pytest.fixture(scope="module")
def japanese(tmp_path_factory):
    """Japan's 761 cities + admin1 + Japanese alternate names: Japanese areas as well."""
    folder = tmp_path_factory.mktemp("ja")
    service = Context(Settings(data_dir=folder / "data"))
    geo = GeoNamesOptions(data_file(ADMIN1), SAMPLE)
    building.ingest(service, "geonames", japan_rows(folder), "geonames", options=geo)
    return service


def japan_titles(export: str, tmp_path) -> dict[str, str]:
    """geonameid → title of every Japanese row, without an alternate-names file."""
    lookups = Lookups(tmp_path / f"{export}.db")
    try:
        rows = read_places(data_file(f"geonames/{export}"), print)
        return {str(p.geonameid): display_name(p, lookups) for p in rows if p.country == "JP"}
    finally:
        lookups.close()


def total(service, **conditions) -> int:
    return searching.filter(service, FilterRequest.of(source="geonames", **conditions))["total"]


def keys(service, **conditions) -> set[str]:
    found = searching.filter(
        service, FilterRequest.of(source="geonames", fields=["key"], limit=500, **conditions)
    )
    return {d["key"] for d in found["docs"]}


# -- titles -----------------------------------------------------------------------------------


@pytest.mark.parametrize("export", ["cities15000.zip", "cities5000.zip"])
def test_every_japanese_title_is_written_in_jis(export, tmp_path):
    """The Chinese forms GeoNames lists beside the Japanese ones (神户市) do not encode in
    JIS X 0208; no title of a Japanese row is one of them."""
    titles = japan_titles(export, tmp_path)
    cjk = [t for t in titles.values() if re.search(r"[\u3040-\u9fff]", t)]
    assert len(cjk) > 0.9 * len(titles)
    for title in cjk:
        title.encode("iso2022_jp")  # raises on a Chinese form


def test_the_japanese_form_is_the_title(tmp_path):
    titles = japan_titles("cities15000.zip", tmp_path)
    assert titles[KOBE] == "神戸市"  # not 神户市
    assert titles["1860827"] == "鹿児島市"  # not 鹿儿岛市
    assert titles["1857553"] == "松戸市" and titles["1852663"] == "瀬戸市"  # not 松戶市, 瀨戶市
    assert titles[SAITAMA] == "さいたま"  # kana only: still Japanese, not "Saitama"
    assert titles["1854093"] == "大村市"  # 大村 + 大村市: the city, not the bare name
    assert titles["1847963"] == "厚木市"  # 厚木市 before the older 厚木町
    assert titles["1863905"] == "本町"  # Honchō in Funabashi: not 船橋市


@pytest.mark.slow
def test_other_forms_still_find_the_place(english):
    chinese = searching.search(english, SearchRequest.of(query="神户市", source="geonames")).hits[0]
    assert chinese.key == KOBE and chinese.title == "神戸市"
    assert (
        searching.search(english, SearchRequest.of(query="Kobe", source="geonames")).hits[0].key
        == KOBE
    )


# -- areas without alternate names ------------------------------------------------------------


@pytest.mark.slow
def test_english_areas_match_whatever_the_case_width_or_accents(english):
    kyoto = total(english, area=["Kyoto"])
    assert kyoto > 5
    assert total(english, area=["kyoto"]) == total(english, area=["ＫＹＯＴＯ"]) == kyoto
    osaka = reading.doc(
        english, DocRequest.of(source="geonames", title="大阪市", fields=["attrs"])
    )["attrs"]
    assert osaka["area"] == ["大阪府"] and {"Ōsaka", "Osaka"} <= set(osaka["area_alias"])
    assert keys(english, area=["osaka"]) == keys(english, area=["Ōsaka"])
    assert total(english, area=["California"]) == total(english, area=["california"]) > 0
    result = searching.filter(english, FilterRequest.of(source="geonames", area=["kyoto"], limit=1))
    assert result["plan"] == "range"  # resolved to the stored value: one index range


@pytest.mark.slow
def test_a_missing_area_lists_the_closest_names_not_the_commonest(english):
    tokio = searching.filter(english, FilterRequest.of(source="geonames", area=["Tokio"]))
    assert tokio["total"] == 0
    assert tokio["notes"][0].params["similar"][0] == "Tokyo"
    typo = searching.filter(english, FilterRequest.of(source="geonames", area=["Caliphornia"]))
    assert typo["notes"][0].params["similar"][0] == "California"
    japanese_name = searching.filter(
        english, FilterRequest.of(source="geonames", area=["カリフォルニア州"])
    )  # areas outside Japan are English only
    assert japanese_name["total"] == 0
    assert "England" not in japanese_name["notes"][0].params["similar"]
    assert searching.filter(english, FilterRequest.of(source="geonames", area=["Tokyo-to"]))[
        "notes"
    ][0].params["similar"][0] in ("Tokyo", "東京都")
    feature = searching.filter(english, FilterRequest.of(source="geonames", feature=["P=PPLAA"]))
    assert feature["notes"][0].params["similar"][0] == "P=PPLA"


# -- Japan's prefectures without alternate names (issue 31) ----------------------------------


def japan_admin1() -> dict[str, tuple[str, str]]:
    """admin1CodesASCII's rows for Japan: code → (ASCII name, geonameid)."""
    rows = {}
    for line in data_file(ADMIN1).read_text(encoding="utf-8").splitlines():
        code, _, ascii_name, geonameid = line.split("\t")
        if code.startswith("JP."):
            rows[code] = (ascii_name, geonameid)
    return rows


def test_the_prefecture_table_has_every_japanese_code_of_geonames():
    """GeoNames numbers prefectures by romanised name (JP.01 Aichi, JP.40 Tokyo), not in JIS
    order: each row of the table names the prefecture admin1CodesASCII gives that code."""
    table = jp_prefectures()
    japan = {code: ascii_name for code, (ascii_name, _) in japan_admin1().items()}
    assert len(table) == 47 and set(table) == set(japan)
    assert {c: p.english for c, p in table.items()} == japan
    assert table["JP.40"].japanese == "東京都" and table["JP.01"].japanese == "愛知県"
    assert table["JP.12"].japanese == "北海道" and table["JP.12"].short == ""
    assert len({p.japanese for p in table.values()}) == 47
    for prefecture in table.values():
        assert prefecture.japanese[-1] in "都道府県"
        assert prefecture.short in ("", prefecture.japanese[:-1])


def test_the_prefecture_table_agrees_with_the_alternate_names_file():
    """The preferred Japanese name the alternate-names file gives each admin1 area it lists."""
    geonameid = {geonameid: code for code, (_, geonameid) in japan_admin1().items()}
    preferred = {}
    for line in SAMPLE.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        if fields[1] in geonameid and fields[2] == "ja" and fields[4] == "1":
            preferred[geonameid[fields[1]]] = fields[3]
    assert len(preferred) >= 7  # 東京都, 京都府, 大阪府, 兵庫県, 茨城県, 埼玉県, 北海道
    assert all(jp_prefectures()[code].japanese == name for code, name in preferred.items())


@pytest.mark.slow
def test_japanese_areas_without_the_alternate_names_file(english):
    tokyo = keys(english, area=["Tokyo"])
    assert len(tokyo) > 10
    assert keys(english, area=["東京都"]) == keys(english, area=["東京"]) == tokyo
    assert keys(english, area=["大阪府"]) == keys(english, area=["Osaka"])
    assert total(english, area=["大阪府"]) > 10 and total(english, area=["北海道"]) > 10
    tokyo_doc = reading.doc(
        english, DocRequest.of(source="geonames", key="1850147", fields=["attrs"])
    )["attrs"]
    assert tokyo_doc["area"] == ["東京都"] and set(tokyo_doc["area_alias"]) == {"Tokyo", "東京"}


@pytest.mark.slow
def test_the_table_gives_the_areas_the_alternate_names_file_gives(english, japanese):
    """The same area and other names for a place in Japan with or without the file: a filter
    or a title reads the same either way."""
    for key in ("1850147", KOBE, KASHIMA_IBARAKI, SAITAMA, "1857910"):
        without = reading.doc(english, DocRequest.of(source="geonames", key=key, fields=["attrs"]))[
            "attrs"
        ]
        with_file = reading.doc(
            japanese, DocRequest.of(source="geonames", key=key, fields=["attrs"])
        )["attrs"]
        assert without["area"] == with_file["area"]
        assert set(without["area_alias"]) == set(with_file["area_alias"]), key


def test_a_renumbered_code_keeps_its_english_name(tmp_path):
    """The table is used only where admin1CodesASCII names the code as the table does: were
    GeoNames to renumber, a place would keep its English area, not another prefecture's."""
    export = tmp_path / "JP.txt"
    export.write_text(
        "1\tKyoto\tKyoto\t\t35.0\t135.7\tP\tPPLA\tJP\t\t22\t\t\t\t1459640\t\t50"
        "\tAsia/Tokyo\t2022-01-01\n"
        "2\tUji\tUji\t\t34.9\t135.8\tP\tPPL\tJP\t\t40\t\t\t\t180000\t\t50"
        "\tAsia/Tokyo\t2022-01-01\n"
    )
    admin1 = tmp_path / "admin1.txt"
    admin1.write_text("JP.22\tKyoto\tKyoto\t1857907\nJP.40\tSomewhere\tSomewhere\t9\n")
    service = Context(Settings(data_dir=tmp_path / "data"))
    building.ingest(service, "geonames", export, "geonames", options=GeoNamesOptions(admin1))
    kyoto = reading.doc(service, DocRequest.of(source="geonames", key="1", fields=["attrs"]))[
        "attrs"
    ]
    assert kyoto["area"] == ["京都府"] and set(kyoto["area_alias"]) == {"Kyoto", "京都"}
    assert reading.doc(service, DocRequest.of(source="geonames", key="2", fields=["attrs"]))[
        "attrs"
    ]["area"] == ["Somewhere"]


# -- with alternate names ---------------------------------------------------------------------


@pytest.mark.slow
def test_alternate_names_give_the_title_and_japanese_areas(japanese):
    kashima = reading.doc(
        japanese,
        DocRequest.of(source="geonames", key=KASHIMA_IBARAKI, fields=["title", "attrs", "aliases"]),
    )
    assert kashima["title"] == "鹿嶋市"  # the file's preferred name; the row alone says 鹿島市
    assert kashima["attrs"]["area"] == ["茨城県"]
    assert set(kashima["attrs"]["area_alias"]) == {"Ibaraki", "茨城"}
    assert "鹿島市" in kashima["aliases"]
    assert (
        reading.doc(japanese, DocRequest.of(source="geonames", key=SAITAMA, fields=["title"]))[
            "title"
        ]
        == "さいたま市"
    )
    kyoto = reading.doc(
        japanese,
        DocRequest.of(source="geonames", key="1857910", fields=["title", "attrs", "aliases"]),
    )
    assert kyoto["title"] == "京都市" and kyoto["attrs"]["wikidata"] == ["Q34600"]
    assert not {"平安京", "みやこ"} & set(kyoto["aliases"])  # historic, colloquial: skipped


@pytest.mark.slow
def test_an_area_is_found_by_either_language(japanese):
    tokyo = keys(japanese, area=["東京都"])
    assert len(tokyo) > 10
    assert keys(japanese, area=["Tokyo"]) == keys(japanese, area=["tokyo"]) == tokyo
    assert keys(japanese, area=["東京"]) == tokyo  # the file's short name
    assert keys(japanese, area=["京都府"]) == keys(japanese, area=["Kyoto"])
    both = searching.filter(japanese, FilterRequest.of(source="geonames", area=["東京都,Kyoto"]))
    assert both["total"] == len(tokyo) + total(japanese, area=["京都府"])
    assert (
        searching.search(
            japanese, SearchRequest.of(query="市", source="geonames", area=["tokyo"])
        ).total
        > 0
    )  # search filters too


def mcp_area_examples(service) -> tuple[set[str], dict]:
    """The area examples of the MCP instructions and filter tool, each run by that tool."""

    async def go():
        async with Client(build_mcp(service, writable=False)) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            described = client.instructions + tools["filter"].description
            # an area's own examples, written as a list (area: ["京都府"]) or in words
            # (`area` (京都府 or Kyoto)), not another parameter's that follows them
            examples = {
                name
                for m in re.finditer(r"area`?:? ?(\[[^\]]*\]|\([^)]*\))", described)
                for name in re.findall(r'"([^"]+)"|([^\s"(),\[\]]+)', m.group(1))
                for name in [name[0] or name[1]]
                if name != "or"
            }
            results = {}
            for example in examples:
                call = await client.call_tool("filter", {"source": "geonames", "area": [example]})
                results[example] = call.structured_content["total"]
            return examples, results

    return anyio.run(go)


@pytest.mark.slow
def test_the_area_examples_in_the_mcp_descriptions_work(english, japanese):
    """Every area example the MCP instructions and filter tool give returns places: all of
    them where areas have Japanese names, the English ones on any GeoNames build."""
    examples, totals = mcp_area_examples(japanese)
    assert {"Kyoto", "京都府"} <= examples
    assert all(n > 5 for n in totals.values()), totals
    _, totals = mcp_area_examples(english)
    assert all(n > 5 for n in totals.values()), totals  # 京都府 from the package's table


def test_a_file_that_is_not_alternate_names_is_a_clear_error(tmp_path):
    service = Context(Settings(data_dir=tmp_path / "data"))
    with pytest.raises(InputError, match="not an alternate-names file"):
        building.ingest(
            service,
            "geonames",
            data_file(CITIES),
            "geonames",
            options=GeoNamesOptions(data_file(ADMIN1), data_file(CITIES)),
        )


# -- fetching a country's alternate names -----------------------------------------------------


@pytest.fixture
def site(tmp_path):
    """download.geonames.org's layout: alternatenames/JP.zip holding JP.txt."""
    folder = tmp_path / "site" / "export" / "dump" / "alternatenames"
    folder.mkdir(parents=True)
    with zipfile.ZipFile(folder / "JP.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.write(SAMPLE, "JP.txt")
    served = DumpSite(tmp_path / "site")
    yield served, folder / "JP.zip"
    served.close()


@pytest.mark.slow
def test_a_fetched_zip_is_checked_and_its_sha256_recorded(site, tmp_path):
    from chiezo.ingest.placefetch import fetch_alternate_names

    served, original = site
    settings = Settings(data_dir=tmp_path / "data")
    mirror = f"{served.url}/export/dump"
    fetched = fetch_alternate_names(settings, "jp", mirror=mirror)
    assert fetched.read_bytes() == original.read_bytes()
    record = fetched.with_name("JP.zip.sha256").read_text()
    assert record.split()[0] == hashlib.sha256(original.read_bytes()).hexdigest()
    asked = len(served.requests)
    assert fetch_alternate_names(settings, "JP", mirror=mirror) == fetched
    assert len(served.requests) == asked  # verified against the record: not fetched again
    fetched.write_bytes(original.read_bytes()[:100])  # cut short on disk
    again = fetch_alternate_names(settings, "JP", mirror=mirror)
    assert again.read_bytes() == original.read_bytes()
    assert len(served.requests) == asked + 1
    with pytest.raises(InputError, match="not a country code"):
        fetch_alternate_names(settings, "JPN", mirror=mirror)
    original.write_bytes(b"<html>not found</html>")
    shutil.rmtree(settings.data_dir / "downloads")
    with pytest.raises(InputError, match="not a valid zip"):
        fetch_alternate_names(settings, "JP", mirror=mirror)


@pytest.mark.slow
def test_ingest_fetches_japans_alternate_names(site, tmp_path):
    served, _ = site
    export = japan_rows(tmp_path)
    data = str(tmp_path / "data")
    args = [
        "--data",
        data,
        "ingest",
        "geonames",
        str(export),
        "--admin1",
        str(data_file(ADMIN1)),
        "--fetch-alternate-names",
        "JP",
        "--mirror",
        f"{served.url}/export/dump",
        "--json",
    ]
    built = CliRunner().invoke(cli, args)
    assert built.exit_code == 0, built.output
    found = CliRunner().invoke(
        cli, ["--data", data, "filter", "geonames", "--area", "京都府", "--json"]
    )
    assert found.exit_code == 0, found.output
    assert json.loads(found.stdout)["total"] > 5
    both = CliRunner().invoke(cli, [*args[:-1], "--alternate-names", str(SAMPLE)])
    assert both.exit_code == 2 and "--fetch-alternate-names" in both.output
