"""near=here: the person's current location, attached to a request, refused once old, never
stated in a result (core/here.py, search/where.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from chiezo.core.errors import BadQuery
from chiezo.core.here import Here, NeedsAnswer
from chiezo.ingest.places import PlaceOptions
from chiezo.ops import building, searching
from chiezo.ops.requests import FilterRequest, SearchRequest

# a few places around 川口駅, written for the test
PLACES = """名称,種別,住所,緯度,経度
川口駅前公園,公園,埼玉県川口市栄町3丁目,35.80180,139.71930
芝川緑地,公園,埼玉県川口市本町4丁目,35.79640,139.72530
鳩ヶ谷公園,公園,埼玉県川口市桜町2丁目,35.83100,139.74000
青木町公園,公園,埼玉県川口市西青木4丁目,35.81300,139.71000
大宮公園,公園,埼玉県さいたま市大宮区高鼻町4丁目,35.91800,139.63300
"""
# where the person stands: by 川口駅 — a point no document has, so its digits in any output
# can only be the location leaking
LAT, LON = 35.801234, 139.720987


def taken(seconds_ago: float = 5, accuracy: float | None = 20) -> str:
    at = (datetime.now(UTC) - timedelta(seconds=seconds_ago)).isoformat()
    return Here(LAT, LON, datetime.fromisoformat(at), accuracy).text()


@pytest.fixture
def parks(service, tmp_path):
    table = tmp_path / "parks.csv"
    table.write_text(PLACES, encoding="utf-8")
    building.ingest(service, "places", [table], "parks", options=PlaceOptions())
    return service


def leaks(result: object) -> bool:
    text = json.dumps(result, ensure_ascii=False, default=str)
    return "35.8012" in text or "139.7209" in text


def test_filter_near_here_orders_by_distance_and_never_states_the_point(parks):
    result = searching.filter(
        parks, FilterRequest.of(source="parks", near="here", location=taken(), radius_km=3)
    )
    titles = [d["title"] for d in result["docs"]]
    assert titles[:2] == ["川口駅前公園", "芝川緑地"]
    assert "大宮公園" not in titles  # 15 km away
    assert result["near"]["from"] == "here" and "lat" not in result["near"]
    assert "straight line" in result["near"]["distance"]
    assert any("straight-line" in n for n in result["notes"])
    assert not leaks(result)


def test_search_near_here(parks):
    result = searching.search(
        parks, SearchRequest.of(query="公園", source="parks", near="here", location=taken())
    ).to_dict()
    assert result["hits"][0]["title"] == "川口駅前公園"
    assert result["hits"][0]["distance_km"] < 0.2
    assert not leaks(result)


def test_an_empty_radius_says_none_registered_not_none_exist(parks):
    result = searching.filter(
        parks,
        FilterRequest.of(
            source="parks", near="here", location=taken(), radius_km=0.05, feature=["種別=公園"]
        ),
    )
    assert result["total"] == 0
    assert any("none registered in this library within 0.05 km" in n for n in result["notes"])


def test_no_location_asks_for_one(parks):
    with pytest.raises(NeedsAnswer) as caught:
        searching.filter(parks, FilterRequest.of(source="parks", near="here"))
    body = caught.value.to_dict()
    assert body["status"] == 400 and body["needs"][0]["what"] == "location"
    assert "use my location" in body["needs"][0]["ask"]


def test_an_expired_location_is_refused_and_says_to_press_again(parks):
    old = taken(seconds_ago=parks.settings.location_ttl + 5)
    with pytest.raises(NeedsAnswer) as caught:
        searching.filter(parks, FilterRequest.of(source="parks", near="here", location=old))
    body = caught.value.to_dict()
    assert body["cause"] == "location_expired" and body["needs"][0]["what"] == "location"
    assert "press" in body["error"] and not leaks(body)


def now_iso(delta: float = 0) -> str:
    return (datetime.now(UTC) + timedelta(seconds=delta)).isoformat()


@pytest.mark.parametrize(
    ("location", "reason"),
    [
        (f"91.5,{LON},{now_iso()}", "outside"),
        (f"{LAT},181,{now_iso()}", "outside"),
        (f"nan,{LON},{now_iso()}", "finite"),
        (f"{LAT},inf,{now_iso()}", "finite"),
        (f"{LAT},{LON},{now_iso(3600)}", "future"),
        (f"{LAT},{LON},yesterday", "ISO 8601"),
        (f"{LAT},{LON},2026-12-07T10:00:00", "time zone"),
        (f"{LAT},{LON},{now_iso()},100000", "accuracy"),
        (f"{LAT},{LON}", "LAT,LON,TAKEN_AT"),
    ],
)
def test_a_bad_location_is_refused_without_repeating_it(parks, location, reason):
    with pytest.raises(BadQuery) as caught:
        searching.filter(parks, FilterRequest.of(source="parks", near="here", location=location))
    body = caught.value.to_dict()
    assert reason in body["error"] and body["field"] == "location"
    assert str(LAT) not in json.dumps(body) and "139.720" not in json.dumps(body)


def test_a_location_object_and_its_text_are_the_same():
    at = datetime(2026, 12, 7, 8, 0, tzinfo=UTC)
    given = {"lat": LAT, "lon": LON, "taken_at": "2026-12-07T17:00:00+09:00", "accuracy_m": 15}
    assert Here.of(given) == Here(LAT, LON, at, 15.0) == Here.of(Here(LAT, LON, at, 15).text())
    assert "35.8" not in repr(Here.of(given)) and "35.8" not in str(Here.of(given))


def test_the_cli_reads_here_from_the_environment_never_from_an_option(parks):
    from click.testing import CliRunner

    from chiezo.surfaces.cli.main import cli

    runner = CliRunner()
    data = ["--data", str(parks.settings.data_dir)]
    asked = [*data, "filter", "parks", "--near", "here", "--radius-km", "3", "--json"]
    done = runner.invoke(cli, asked, env={"CHIEZO_HERE": taken()})
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["docs"][0]["title"] == "川口駅前公園" and not leaks(done.output)
    missing = runner.invoke(cli, asked, env={"CHIEZO_HERE": ""})
    assert missing.exit_code == 2 and "use my location" in missing.output
    old = runner.invoke(cli, asked, env={"CHIEZO_HERE": taken(seconds_ago=3600)})
    assert old.exit_code == 2 and "past its 420 s limit" in old.output and not leaks(old.output)
    typed = runner.invoke(cli, [*asked, "--location", taken()])
    assert typed.exit_code == 2 and "No such option" in typed.output
    question = runner.invoke(cli, [*data, "ask", "一番近い公園は？"], env={"CHIEZO_HERE": ""})
    assert question.exit_code == 2 and "現在地を使う" in question.output


def test_a_json_true_is_no_degree():
    given = {"lat": True, "lon": LON, "taken_at": now_iso()}
    with pytest.raises(BadQuery, match="latitude is not a number"):
        Here.of(given)
