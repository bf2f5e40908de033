"""An article's own point (ingest/wikicoords.py): the one shown at its title, its infobox's,
or its office's — never a point of another place the article mentions."""

from __future__ import annotations

import pytest

from chiezo.ingest.wikitext import Namespaces, parse_article

NS = Namespaces.for_wiki({}, "ja")


def located(wikitext: str, title: str = "島根県"):
    article = parse_article(wikitext, NS, title)
    return article.point, article.point_source


EXTREMITIES = """
{| class="wikitable"
! 地点 !! 座標
|-
| 最北端 || {{ウィキ座標度分秒|37|14|43|N|131|52|5|E|type:landmark_region:JP|name=島根県最北端}}
|-
| 重心 || {{ウィキ座標度分秒|35|4|34|N|132|33|25|E|type:landmark_region:JP|name=島根県重心}}
|}
"""


def test_an_extremity_table_is_not_the_articles_point():
    text = (
        "{{基礎情報 都道府県|都道府県名=島根県|所在地=松江市殿町1番<br />"
        "{{Coord|format=dms|type:adm1st_region:JP-32|display=inline,title}}}}\n"
        "'''島根県'''は県。\n== 地理 ==\n" + EXTREMITIES
    )
    assert located(text) == (None, "wikidata")  # the title point lives in Wikidata only


def test_the_title_coordinate_wins_over_earlier_ones():
    text = (
        "{{Infobox country|capital=[[Algiers]]|coordinates={{Coord|36|42|N|3|13|E}}}}\n"
        "'''Algeria''' is a country. {{coord|28|N|2|E|display=title}}"
    )
    assert located(text, "Algeria") == ((28.0, 2.0), "title")


def test_the_infobox_point_when_no_title_point():
    text = (
        "{{基礎情報 市区町村|緯度度=35|緯度分=28|緯度秒=7|経度度=133|経度分=3|経度秒=2}}\n"
        "'''松江市'''は市。 {{Coord|34|0|N|131|0|E|name=どこか別の場所}}"
    )
    point, how = located(text, "松江市")
    assert how == "infobox" and point == pytest.approx((35.468611, 133.050556), abs=1e-5)


def test_a_coordinate_named_after_the_office_is_the_areas_point():
    text = "'''岩手県'''は県。\n== 地理 ==\n" + (
        "* 最北端 {{ウィキ座標度分秒|40|27|02|N|141|40|57|E|name=岩手県最北端}}\n"
        "* 県庁 {{ウィキ座標度分秒|39|42|13|N|141|09|09|E|name=岩手県庁}}\n"
    )
    point, how = located(text, "岩手県")
    assert how == "office" and point == pytest.approx((39.703611, 141.1525), abs=1e-5)


def test_points_of_other_places_and_map_frames_are_never_taken():
    text = (
        "'''蝦夷'''は人々。\n{{Maplink2|zoom=6|frame=yes|frame-latitude=25.35|"
        "frame-longitude=126.40}}\n* {{Coord|37|46|3.7|N|138|51|57.5|E|name=菖蒲塚古墳}}\n"
        "* 柵跡 {{Coord|38|0|N|140|0|E}}\n"  # listed, unnamed: still a listed place's
        "== 政治 ==\n大統領宮殿は{{ウィキ座標度分秒|33|17|03|N|044|15|22|E|}}に位置する。"
    )
    assert located(text, "蝦夷") == (None, "none")


@pytest.mark.parametrize(
    "text",
    [
        "{{Coord|60|10|17|N|24|56|29|E}}'''ヘルシンキ中央駅'''は駅。",
        "'''ヘルシンキ中央駅'''は駅。{{Coord|60|10|17|N|24|56|29|E}}\n== 歴史 ==\n古い。",
    ],
)
def test_an_unnamed_coordinate_of_the_lead_is_the_articles(text):
    point, how = located(text, "ヘルシンキ中央駅")
    assert how == "lead" and point == pytest.approx((60.171389, 24.941389), abs=1e-5)


@pytest.mark.parametrize(
    "coord",
    [
        "{{coord|123|45|N|10|0|E|display=title}}",  # latitude out of range
        "{{coord|35|75|N|139|0|E|display=title}}",  # 75 minutes
        "{{coord|139|E|35|N|display=title}}",  # longitude first
        "{{coord|N|E|display=title}}",  # the parts are missing
        "{{coord|abc|def|display=title}}",
    ],
)
def test_an_unreadable_title_coordinate_leaves_no_point(coord):
    point, how = located(f"{coord}'''X'''は場所。", "X")
    assert point is None and how == "unreadable"


def test_odd_infobox_formats_read_or_refuse():
    dms = "{{Infobox settlement|latitude=35°41′22″N|longitude=139°41′30″E}}'''X'''は街。"
    point, how = located(dms, "X")
    assert how == "infobox" and point == pytest.approx((35.689444, 139.691667), abs=1e-5)
    west = "{{Infobox settlement|latitude=41.88|longitude=87.63 W}}'''X'''は街。"
    assert located(west, "X")[0] == pytest.approx((41.88, -87.63))
    a_range = "{{Infobox U.S. state|Latitude=30°11′ N to 35° N|Longitude=84°53′ W to 88°28′ W}}"
    assert located(a_range + "'''X'''は州。", "X") == (None, "unreadable")
