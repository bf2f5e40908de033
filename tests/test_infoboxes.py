"""Infoboxes as labelled facts (ingest/infoboxes.py): labels the template shows, no layout,
placeholders or weather-box spam, and the numbers kept as typed attributes."""

from __future__ import annotations

import pytest

from chiezo.ingest.infoboxes import first_number, humanised, read_infobox
from chiezo.ingest.wikitext import Namespaces, parse_article

JA = Namespaces.for_wiki({}, "ja")
EN = Namespaces.for_wiki({}, "en")


def infobox_of(text: str, ns=JA) -> tuple[str, dict]:
    article = parse_article(text, ns, "X")
    return article.text.partition("## Infobox")[2].strip(), article.attrs


def test_parameters_read_as_the_labels_the_template_shows():
    facts, attrs = infobox_of(
        "{{Communefra|nomcommune=パリ Paris|maire=アンヌ・イダルゴ|sans=市：2,148,271人|"
        "km2=105.4|alt moy=33 m|x=140|y=65|人口の時点=年月日|date-sans=2020年1月}}"
        "'''X'''は都市。"
    )
    assert facts.splitlines() == [
        "市長: アンヌ・イダルゴ",
        "人口: 市：2,148,271人",
        "面積（km²）: 105.4",
        "標高（m）: 33 m",
        "人口の時点: 2020年1月",
    ]
    assert attrs == {"population": "2148271", "area_km2": "105.4", "elevation_m": "33"}


def test_pairs_numbered_lists_and_english_names():
    facts, _ = infobox_of(
        "{{Infobox country|leader_title1=[[President]]|leader_name1=A. Person|"
        "established_event1=Independence|established_date1=5 July 1962|"
        "ancestor=Old|ancestor2=Middle|LargestCity=Huntsville|area_land_sq_mi=50,744|"
        "image_flag=Flag.svg|map_caption=a map}}'''X''' is a country.",
        EN,
    )
    assert facts.splitlines() == [
        "President: A. Person",
        "Independence: 5 July 1962",
        "Early forms: Old, Middle",
        "Largest city: Huntsville",
        "Area land (sq mi): 50,744",
    ]


def test_untranslated_parameter_names_are_not_shown_on_a_japanese_page():
    facts, _ = infobox_of(
        "{{Communefra|nomhab=Parisiens|zzcode=75|mandat=2014年 -|cp=75001|insee=75056|"
        "intercomm=Grand Paris}}'''X'''"
    )
    assert "zzcode" not in facts and "住民の呼称: Parisiens" in facts


def test_a_weather_box_is_one_line_per_measure():
    months = "|".join(
        f"{m} high C={v}|{m} high F={v * 2}"
        for m, v in (("Jan", 7), ("Feb", 9), ("Mar", 13), ("Apr", 17), ("May", 21), ("Jun", 24))
    )
    article = parse_article(
        f"'''X'''は都市。\n== 気候 ==\n{{{{Weather box|location=X|{months}|year high C=17}}}}", JA
    )
    assert "\nXの気候:\n" in article.text
    assert (
        "- 平均最高気温 (°C): 1月 7, 2月 9, 3月 13, 4月 17, 5月 21, 6月 24, 年 17" in article.text
    )
    assert "°F" not in article.text and "Jan high" not in article.text


@pytest.mark.parametrize(
    "broken",
    [
        "{{基礎情報 国|人口値=|面積値={{#expr: 1+}}|首都=[[東京",  # unclosed
        "{{Infobox settlement|population_total={{Infobox settlement|x=1}}|name=}}",  # nested
        "{{基礎情報 国|首都={|\n| a || b\n|}|通貨=円}}",  # a table as a value
    ],
)
def test_broken_infoboxes_degrade_to_prose_never_debris(broken):
    article = parse_article(f"{broken}\n'''X'''は国。本文です。", JA, "X")
    assert "本文です" in article.text
    for debris in ("{{", "}}", "|", "人口値", "面積値", "population_total"):
        assert debris not in article.text, debris


@pytest.mark.parametrize(
    ("text", "year", "number"),
    [
        ("市：2,148,271人 都市圏：12,532,901", False, "2148271"),
        ("約1億2,500万人", False, "125000000"),
        ("54万7800", False, "547800"),
        ("105.4 km2", False, "105.4"),
        ("1889年4月1日", True, "1889"),
        ("5 July 1962", True, "1962"),
        ("不明", False, None),
    ],
)
def test_first_number(text, year, number):
    assert first_number(text, year=year) == number


def test_humanised_names():
    assert humanised("timezone1_DST") == "Timezone DST"
    assert humanised("OfficialLang") == "Official lang"
    assert humanised("area_water_percent") == "Area water (%)"


def test_read_infobox_keeps_the_first_typed_value():
    facts = read_infobox([("人口値", "1,000人"), ("総人口", "2,000人")], "ja")
    assert facts.attrs == {"population": "1000"}


def test_a_rank_is_not_an_amount():
    assert first_number("Europe (Year; 3位)") is None
    assert first_number("24th, 5,039,877") == "5039877"
