"""A random document (issue 32 item 5), as kiwix-serve and the reference design offer it: from a
whole source or from the documents meeting conditions, on every surface — CLI, REST, MCP (not the
answering agent's tools) and the web page that opens one."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery
from chiezo.ops import searching
from chiezo.ops.context import Context
from chiezo.ops.requests import RandomRequest
from chiezo.ops.tools import library_tools, toolbox
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app

from helpers import LOCAL, ON_THIS_MACHINE, wiki_library

TEMPLES = [(10 + i, f"寺{i}", f"'''寺{i}'''は寺。\n[[Category:寺院]]") for i in range(6)]
SHRINES = [(30 + i, f"神社{i}", f"'''神社{i}'''は神社。\n[[Category:神社]]") for i in range(4)]
PLACES = [
    (50, "浅草寺", "'''浅草寺'''は寺。{{Coord|35|42|53|N|139|47|48|E}}\n[[Category:寺院]]"),
    (51, "金閣寺", "'''金閣寺'''は寺。{{Coord|35|2|22|N|135|43|45|E}}\n[[Category:寺院]]"),
]


@pytest.fixture(scope="module")
def data(tmp_path_factory) -> Path:
    return wiki_library(tmp_path_factory.mktemp("random"), TEMPLES + SHRINES + PLACES) / "data"


@pytest.fixture(scope="module")
def service(data) -> Context:
    return Context(Settings(data_dir=data))


def drawn(service, **values) -> list[str]:
    result = searching.random(service, RandomRequest.of(source="jawiki", **values))
    return [d["title"] for d in result["docs"]]


def test_a_draw_is_repeatable_with_a_seed_and_never_repeats_a_document(service):
    assert drawn(service, seed=7, count=5) == drawn(service, seed=7, count=5)
    assert len(set(drawn(service, seed=7, count=12))) == 12  # the whole source, each once
    assert len(drawn(service, count=20)) == 12  # no more than there are


def test_every_document_is_as_likely(service):
    counts = Counter(t for seed in range(1200) for t in drawn(service, seed=seed))
    assert len(counts) == 12 and max(counts.values()) < 2 * min(counts.values())
    within = Counter(t for seed in range(400) for t in drawn(service, seed=seed, tag=["神社"]))
    assert set(within) == {f"神社{i}" for i in range(4)}
    assert max(within.values()) < 2 * min(within.values())


def test_conditions_make_the_set_drawn_from(service):
    result = searching.random(
        service, RandomRequest.of(source="jawiki", tag=["寺院"], count=3, seed=1)
    )
    assert result["total"] == 8 and len(result["docs"]) == 3
    assert all(d["title"].endswith("寺") or d["title"].startswith("寺") for d in result["docs"])
    near = drawn(service, near="35.71,139.79", radius_km=5, count=5)
    assert near == ["浅草寺"]
    assert set(result["docs"][0]) >= {"doc_id", "title", "url", "opening"}


def test_what_cannot_be_drawn_says_why(service):
    with pytest.raises(BadQuery, match="radius_km"):
        searching.random(service, RandomRequest.of(source="jawiki", near="35.71,139.79"))
    none = searching.random(service, RandomRequest.of(source="jawiki", tag=["存在しない"]))
    assert none["total"] == 0 and none["docs"] == [] and none["notes"]
    for count in (0, 21):
        with pytest.raises(BadQuery, match="count"):
            RandomRequest.of(source="jawiki", count=count)
    with pytest.raises(BadQuery, match="no attribute"):
        searching.random(service, RandomRequest.of(source="jawiki", attr=["population>5"]))


def test_the_command_line(data):
    def run(*args):
        return CliRunner().invoke(cli, ["--data", str(data), "random", "jawiki", *args])

    one = run("--seed", "3", "--json")
    assert one.exit_code == 0, one.output
    assert json.loads(one.output) == json.loads(run("--seed", "3", "--json").output)
    three = run("-n", "3", "--tag", "神社")
    assert three.exit_code == 0 and three.output.count("神社") >= 3
    assert run("--tag", "存在しない").exit_code == 3
    assert run("--near", "35,135").exit_code == 2
    assert run("-n", "0").exit_code == 2


def test_the_api_route_and_its_errors(data):
    client = TestClient(create_app(Settings(data_dir=data)), base_url=LOCAL)
    ok = client.get("/v1/jawiki/random", params={"count": 2, "tag": "寺院", "seed": 5})
    assert ok.status_code == 200 and ok.json()["total"] == 8 and len(ok.json()["docs"]) == 2
    assert client.get("/v1/jawiki/random", params={"count": 99}).status_code == 400
    assert client.get("/v1/jawiki/random", params={"seed": -1}).status_code == 400
    assert client.get("/v1/nosuch/random").status_code == 404
    schema = client.get("/openapi.json").json()
    assert "/v1/{source}/random" in schema["paths"]


def test_mcp_clients_get_the_tool_but_the_answering_agent_does_not(service):
    assert "random" in {t.name for t in library_tools(service)}
    assert "random" not in {t.name for t in toolbox(service).tools}


def test_the_web_page_opens_a_random_document(data):
    client = TestClient(create_app(Settings(data_dir=data)), client=ON_THIS_MACHINE, base_url=LOCAL)
    moved = client.get("/random/jawiki", params={"tag": "神社"}, follow_redirects=False)
    assert moved.status_code == 303 and moved.headers["location"].startswith("/doc/jawiki/")
    page = client.get(moved.headers["location"])
    assert page.status_code == 200 and "神社" in page.text
    assert client.get("/random/nosuch").status_code == 404
    empty = client.get("/random/jawiki", params={"tag": "存在しない"})
    assert empty.status_code == 404
    home = client.get("/", params={"source": "jawiki"}).text
    assert 'href="/random/jawiki"' in home
