"""Search a chosen set of sources, and conditions across sources (issue 32 item 1): a list of
sources is searched in the one order of evidence; a condition applies to every source that can
meet it, and one that cannot is named in a note — a 400 only when none can."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, UnknownSource
from chiezo.ops import building, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import RemoveRequest, SearchRequest
from chiezo.surfaces.cli.main import cli

from helpers import TEMPLE_PAGES, wiki_library

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    data = wiki_library(tmp_path_factory.mktemp("chosen"), TEMPLE_PAGES) / "data"
    building.ingest(Context(Settings(data_dir=data)), "docs", ROOT / "sample", "guide", embed=False)
    return data


@pytest.fixture(scope="module")
def service(data) -> Context:
    return Context(Settings(data_dir=data))


def search(service, **values):
    return searching.search(service, SearchRequest.of(limit=20, **values))


def test_a_list_of_sources_is_searched_in_one_order(service):
    both = search(service, query="浅草寺 Chiezo", source="jawiki,guide")
    assert set(both.sources) == {"jawiki", "guide"}
    only = search(service, query="浅草寺", source="jawiki, jawiki")  # named twice: once
    assert {h.source for h in only.hits} == {"jawiki"}
    with pytest.raises(UnknownSource) as raised:
        search(service, query="浅草寺", source="jawiki,nosuch")
    assert "guide" in raised.value.extras["known_sources"]


def test_near_applies_to_the_sources_with_points_and_names_the_others(service):
    result = search(service, query="寺", near_doc="jawiki:雷門")
    assert [h.title for h in result.hits] == ["雷門", "浅草寺"]  # nearest first
    assert [h.distance_km for h in result.hits] == sorted(h.distance_km for h in result.hits)
    assert any("guide: not searched, has no coordinates" in n for n in result.notes)
    within = search(service, query="寺", near_doc="jawiki:雷門", radius_km=0.2)
    assert [h.title for h in within.hits] == ["雷門"]


def test_a_condition_no_source_can_meet_is_a_400_with_the_reason(service):
    with pytest.raises(BadQuery, match="area"):
        search(service, query="寺", area=["東京都"])
    tagged = search(service, query="寺", tag=["東京都の寺"])
    assert {h.source for h in tagged.hits} == {"jawiki"}
    wrong = search(service, query="寺", tag=["東京の寺"], source="jawiki")
    assert wrong.hits == [] and any("東京都の寺" in n for n in wrong.notes)


def test_the_command_line_takes_a_list_and_conditions_without_a_source(data):
    def run(*args):
        return CliRunner().invoke(cli, ["--data", str(data), "search", *args])

    near = run("寺", "--near-doc", "jawiki:浅草寺")
    assert near.exit_code == 0, near.output
    assert near.output.index("浅草寺") < near.output.index("雷門")
    assert "not searched, has no coordinates" in near.output
    assert run("浅草寺", "--source", "jawiki,guide").exit_code == 0
    assert run("寺", "--area", "東京都").exit_code == 2


def test_filter_over_several_sources_is_one_list_nearest_first(service, tmp_path):
    from chiezo.ops.requests import FilterRequest

    places = tmp_path / "shops.csv"
    places.write_text("name,lat,lon\n仲見世,35.7115,139.7966\n上野駅,35.7138,139.7773\n")
    building.ingest(service, "places", places, "shops", embed=False)
    try:
        near = searching.filter(
            service,
            FilterRequest.of(source="jawiki,shops", near_doc="jawiki:雷門", fields=["title"]),
        )
        titles = [d["title"] for d in near["docs"]]
        assert titles[:2] == ["雷門", "仲見世"] and "上野駅" in titles
        distances = [d["distance_km"] for d in near["docs"]]
        assert distances == sorted(distances) and near["total"] == 4
        assert {d["source"] for d in near["docs"]} == {"jawiki", "shops"}
        tagged = searching.filter(
            service, FilterRequest.of(source="jawiki,shops", tag=["東京都の寺"])
        )
        assert tagged["total"] == 2 and any("shops: not searched" in n for n in tagged["notes"])
        with pytest.raises(BadQuery, match="area"):
            searching.filter(service, FilterRequest.of(source="jawiki,shops", area=["東京都"]))
        with pytest.raises(BadQuery, match="several sources"):
            searching.filter(
                service, FilterRequest.of(source="jawiki,shops", tag=["x"], offset=9_999)
            )
    finally:
        building.remove(service, RemoveRequest.of(source="shops"))


def test_a_list_of_500_sources_is_refused_before_any_work(tmp_path):
    from chiezo.ops.searching import MAX_NAMED_SOURCES, source_names

    names = ",".join(f"s{i}" for i in range(500))
    with pytest.raises(BadQuery, match=f"500 sources named; at most {MAX_NAMED_SOURCES}"):
        source_names(names)
    assert source_names("a, b,a,,") == ["a", "b"]
