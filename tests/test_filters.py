"""The filter planner against brute force on a generated source: every plan must return exactly
the documents and totals that checking every document would."""

import json
import random

import pytest
from click.testing import CliRunner

from chiezo.core.errors import BadQuery
from chiezo.core.models import Doc
from chiezo.ops import searching
from chiezo.ops.requests import FilterRequest
from chiezo.search import setplan
from chiezo.search.filters import haversine_km
from chiezo.surfaces.cli.main import cli

from helpers import build_source

N = 3000


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from chiezo.core.config import Settings
    from chiezo.ops.context import Context

    rng = random.Random(5)
    docs, truth = [], []
    for i in range(N):
        lat, lon = rng.uniform(34, 36), rng.uniform(135, 140)
        tags = [
            t
            for t in ("common", "half", "rare")
            if rng.random() < {"common": 0.6, "half": 0.3, "rare": 0.01}[t]
        ]
        kind = rng.choice(["amenity=cafe", "amenity=bank", "shop=bakery", "tourism=museum"])
        rank, area = rng.random(), rng.choice(["東", "西"])
        docs.append(
            Doc(
                key=f"k{i}",
                title=f"場所{i}",
                body="x",
                rank_score=rank,
                tags=tags,
                attrs={"feature": [kind], "area": [area]},
                point=(lat, lon),
            )
        )
        truth.append(
            {
                "key": f"k{i}",
                "rank": rank,
                "tags": set(tags),
                "feature": kind,
                "area": area,
                "lat": lat,
                "lon": lon,
            }
        )
    settings = Settings(data_dir=tmp_path_factory.mktemp("world") / "data")
    build_source(settings, "world", "test", docs)
    return Context(settings), truth


def keys(result):
    return [d["key"] for d in result["docs"]]


def by_rank(items):
    return [t["key"] for t in sorted(items, key=lambda t: -t["rank"])]


@pytest.mark.slow
def test_one_tag_reads_one_range(world):
    service, truth = world
    result = searching.filter(
        service,
        FilterRequest.of(source="world", tag=["half"], limit=20, offset=100, fields=["key"]),
    )
    expected = by_rank(t for t in truth if "half" in t["tags"])
    assert result["plan"] == "range" and result["total"] == len(expected)
    assert keys(result) == expected[100:120]


def test_conditions_intersect_exactly(world):
    service, truth = world
    result = searching.filter(
        service,
        FilterRequest.of(
            source="world",
            tag=["common"],
            feature=["amenity=cafe,shop=bakery"],
            area=["東"],
            limit=500,
            fields=["key"],
        ),
    )
    expected = by_rank(
        t
        for t in truth
        if "common" in t["tags"]
        and t["area"] == "東"
        and t["feature"] in ("amenity=cafe", "shop=bakery")
    )
    assert result["plan"] == "driven"
    assert result["total"] == len(expected) and keys(result) == expected


def test_deep_pages_of_a_driven_plan(world):
    service, truth = world
    expected = by_rank(
        t for t in truth if "common" in t["tags"] and t["feature"] == "tourism=museum"
    )
    pages = []
    for offset in range(0, len(expected), 50):
        pages += keys(
            searching.filter(
                service,
                FilterRequest.of(
                    source="world",
                    tag=["common"],
                    feature=["tourism=museum"],
                    limit=50,
                    offset=offset,
                    fields=["key"],
                ),
            )
        )
    assert pages == expected


def test_a_box_returns_exactly_the_points_inside(world):
    service, truth = world
    result = searching.filter(
        service,
        FilterRequest.of(source="world", bbox="34.5,136,35.0,137.5", limit=500, fields=["key"]),
    )
    expected = by_rank(t for t in truth if 34.5 <= t["lat"] <= 35 and 136 <= t["lon"] <= 137.5)
    assert result["total"] == len(expected) and keys(result) == expected[:500]


def test_nearest_matches_brute_force(world):
    service, truth = world
    lat, lon = 35.2, 137.3
    result = searching.filter(
        service,
        FilterRequest.of(
            source="world",
            near=f"{lat},{lon}",
            feature=["tourism=museum"],
            limit=25,
            offset=5,
            fields=["key"],
        ),
    )
    museums = [t for t in truth if t["feature"] == "tourism=museum"]
    expected = sorted(museums, key=lambda t: haversine_km(lat, lon, t["lat"], t["lon"]))
    assert keys(result) == [t["key"] for t in expected[5:30]]
    assert result["total"] == len(museums)
    alone = searching.filter(
        service, FilterRequest.of(source="world", near=f"{lat},{lon}", limit=10, fields=["key"])
    )
    everyone = sorted(truth, key=lambda t: haversine_km(lat, lon, t["lat"], t["lon"]))
    assert alone["plan"] == "nearest" and keys(alone) == [t["key"] for t in everyone[:10]]
    assert alone["total"] == N


def test_a_radius_keeps_the_circle_not_the_box(world):
    service, truth = world
    lat, lon, km = 35.0, 137.0, 40.0
    result = searching.filter(
        service,
        FilterRequest.of(
            source="world", near=f"{lat},{lon}", radius_km=km, limit=500, fields=["key"]
        ),
    )
    inside = [t for t in truth if haversine_km(lat, lon, t["lat"], t["lon"]) <= km]
    assert result["total"] == len(inside) > 10
    assert set(keys(result)) == {t["key"] for t in inside}
    assert all(d["distance_km"] <= km for d in result["docs"])


def test_large_driven_sets_count_a_lower_bound(world, monkeypatch):
    service, truth = world
    monkeypatch.setattr(setplan, "COUNT_SCAN", 100)
    monkeypatch.setattr(setplan, "MATERIALIZE", 100)
    result = searching.filter(
        service, FilterRequest.of(source="world", tag=["common"], feature=["amenity=bank"], limit=5)
    )
    assert result["total_is_lower_bound"] and result["total"] <= 100
    assert any("at least" in n for n in result["notes"])


@pytest.mark.parametrize(
    "params, message",
    [
        ({}, "at least one condition"),
        ({"bbox": "1,2,3"}, "south,west,north,east"),
        ({"bbox": "36,135,35,136"}, "south ≤ north"),
        ({"near": "35"}, "lat,lon"),
        ({"near": "35,135", "radius_km": -1}, "greater than 0"),
        ({"radius_km": 5}, "needs near"),
        ({"feature": ["museum"]}, "key=value"),
        ({"near_doc": "nosep"}, "source:title"),
        ({"attr": "colour=red"}, None),
    ],
)
def test_bad_filters_are_400_with_a_reason(world, params, message):
    service, _ = world
    args = {k: [v] if k == "attr" else v for k, v in params.items()}
    with pytest.raises(BadQuery) as info:
        searching.filter(service, FilterRequest.of(source="world", **args))
    if message:
        assert message in info.value.message
    else:
        assert "has no attribute 'colour'" in info.value.message


def test_unknown_values_return_zero_with_similar_ones(world):
    service, _ = world
    result = searching.filter(service, FilterRequest.of(source="world", feature=["amenity=caffe"]))
    assert result["total"] == 0 and "amenity=cafe" in result["notes"][0]
    result = searching.filter(service, FilterRequest.of(source="world", tag=["comon"]))
    assert result["total"] == 0 and "common" in result["notes"][0]


def test_the_cli_filter_command(world):
    service, _ = world
    data = str(service.settings.data_dir)
    result = CliRunner().invoke(
        cli,
        [
            "--data",
            data,
            "filter",
            "world",
            "--tag",
            "rare",
            "--near",
            "35,137",
            "-n",
            "3",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    found = json.loads(result.stdout)
    assert found["order"] == "distance" and len(found["docs"]) == 3
    nothing = CliRunner().invoke(cli, ["--data", data, "filter", "world", "--tag", "nope"])
    assert nothing.exit_code == 3


@pytest.fixture(scope="module")
def one_language(tmp_path_factory):
    """Two place sources whose areas are in one language only: ``en`` as a GeoNames build
    before areas had Japanese names (Tokyo; Ōsaka with its ASCII Osaka), ``ja`` with Japanese
    areas and no other names."""
    from chiezo.core.config import Settings
    from chiezo.ops.context import Context

    english = [("Tokyo", None), ("Ōsaka", "Osaka"), ("Hokkaido", None), ("California", None)]
    english += [("England", None)] * 20  # the commonest: never a hint for an unrelated name
    settings = Settings(data_dir=tmp_path_factory.mktemp("areas") / "data")

    def docs(areas):
        for i, (area, alias) in enumerate(areas):
            attrs = {"area": [area], **({"area_alias": [alias]} if alias else {})}
            yield Doc(key=f"p{i}", title=f"場所{i}", body="x", attrs=attrs, point=(35.0, 139.0))

    build_source(settings, "en", "test", docs(english))
    build_source(settings, "ja", "test", docs([("東京都", None), ("大阪府", None)]))
    return Context(settings)


@pytest.mark.parametrize(
    "source, asked, named",
    [
        ("en", "東京都", ["Tokyo"]),  # another language: no spelling is close
        ("en", "東京", ["Tokyo"]),  # the short form people type
        ("en", "大阪府", ["Ōsaka", "Osaka"]),  # the area and its other name
        ("en", "北海道", ["Hokkaido"]),
        ("en", "tokio", ["Tokyo"]),  # spelling
        ("en", "Tokyo-to", ["Tokyo"]),
        ("ja", "Tokyo", ["東京都"]),  # and the other way
        ("ja", "osaka", ["大阪府"]),
    ],
)
def test_an_unknown_area_names_the_stored_value_that_means_it(one_language, source, asked, named):
    result = searching.filter(one_language, FilterRequest.of(source=source, area=[asked]))
    assert result["total"] == 0
    note = result["notes"][0]
    assert note.params["similar"][: len(named)] == named
    assert "similar: " + ", ".join(named) in note
    assert "England" not in note.params["similar"]


def test_an_area_unknown_in_every_language_gets_no_commonest_values(one_language):
    result = searching.filter(
        one_language, FilterRequest.of(source="en", area=["カリフォルニア州"])
    )
    assert result["total"] == 0 and result["notes"][0].params["similar"] == []
