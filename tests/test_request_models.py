"""One declaration of the search and filter parameters (ops/requests.py), and every surface
offering exactly it: read from the live surfaces (click's commands, FastAPI's /openapi.json,
the MCP server's tool schemas), so a parameter added in one place and forgotten in another
fails here. Then the parameters the CLI and MCP gained, used for real."""

import json

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from chiezo.core.errors import BadQuery
from chiezo.core.models import Doc
from chiezo.ops import searching
from chiezo.ops.requests import (
    MAX_TOP_N,
    FilterRequest,
    SearchRequest,
    params,
)
from chiezo.ops.tool_profiles import PROFILES
from chiezo.ops.tools import lean_schema
from chiezo.search.retrieval import RetrievalOptions
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.mcp.server import build_mcp
from chiezo.surfaces.rest import create_app
from chiezo.surfaces.web.search_results import SearchForm

from helpers import LOCAL, RunningServer, build_source

OPERATIONS = {  # operation → (model, REST path, CLI command, MCP tool)
    "search": (SearchRequest, "/v1/{source}/search", "search", "search"),
    "filter": (FilterRequest, "/v1/{source}/filter", "filter", "filter"),
}
CLI_PRESENTATION = {"as_json", "interactive"}  # how a command prints, not what it asks


def declared(model) -> dict:
    return {p.name: p for p in params(model)}


def offered_to_callers(model) -> dict:
    """The parameters a caller writes: not those the surface attaches (the location, from
    CHIEZO_HERE or an MCP call's _meta), which no option or tool argument takes."""
    return {name: p for name, p in declared(model).items() if not p.surface.attached}


def rest_spelling(param) -> str:
    return param.surface.rest or param.name


def comparable(schema: dict) -> dict:
    """A parameter's JSON schema without what only names or documents it."""
    return {k: v for k, v in schema.items() if k not in ("title", "description", "default")}


@pytest.fixture(scope="module")
def openapi(tmp_path_factory):
    from chiezo.core.config import Settings

    return create_app(Settings(data_dir=tmp_path_factory.mktemp("api") / "data")).openapi()


@pytest.fixture(scope="module")
def mcp_tools(tmp_path_factory):
    from chiezo.core.config import Settings
    from chiezo.ops.context import Context

    server = build_mcp(Context(Settings(data_dir=tmp_path_factory.mktemp("mcp") / "data")))
    return {tool.name: tool for tool in anyio.run(server.list_tools)}


# -- every surface offers the declared parameters, with the declared bounds ----------------------


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_rest_offers_exactly_the_declared_parameters(openapi, operation):
    model, path, _, _ = OPERATIONS[operation]
    offered = {p["name"]: p for p in openapi["paths"][path]["get"]["parameters"]}
    wanted = {rest_spelling(p): p for p in params(model)}
    assert set(offered) == set(wanted)
    properties = model.model_json_schema()["properties"]
    for name, param in wanted.items():
        got = offered[name]
        assert got["description"] == param.help, name
        assert got["required"] == (param.required or param.surface.rest_path), name
        if param.surface.rest_path:
            assert got["in"] == "path" and got["schema"]["type"] == "string"
        else:
            assert comparable(got["schema"]) == comparable(properties[param.name]), name


def test_the_all_source_search_takes_every_parameter_the_sources_in_its_query(openapi):
    parameters = openapi["paths"]["/v1/search"]["get"]["parameters"]
    offered = {p["name"] for p in parameters}
    assert offered == {rest_spelling(p) for p in params(SearchRequest)}
    assert {"keyword_weight", "fusion", "top_n", "tag", "area", "near"} <= offered
    assert next(p for p in parameters if p["name"] == "source")["in"] == "query"


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_mcp_offers_exactly_the_declared_parameters(mcp_tools, operation):
    model, _, _, tool = OPERATIONS[operation]
    schema = mcp_tools[tool].input_schema
    wanted = offered_to_callers(model)
    # every read tool takes max_chars besides (ops/tools.py), its profile's default
    assert set(schema["properties"]) == set(wanted) | {"max_chars"}
    assert schema["properties"]["max_chars"]["default"] == PROFILES["full"].max_chars
    assert set(schema.get("required", [])) == {n for n, p in wanted.items() if p.required}
    properties = model.model_json_schema()["properties"]
    for name, param in wanted.items():
        got = schema["properties"][name]
        # what a model reads: the brief where the help is for a person (ops/requests.py)
        assert got.get("description", "") == param.brief, name
        # the tool states the enforced constraints, as lean as a model needs them; the
        # stated text shapes the service checks (patterns, lengths) are left out
        stated = set(param.schema_extra or ())
        expected = {k: v for k, v in comparable(properties[name]).items() if k not in stated}
        expected = lean_schema(expected)
        if param.surface.mcp_json:  # JSON text (within) is taken as the object it spells
            expected = {"anyOf": [expected, {"type": "object"}]}
        assert lean_schema(comparable(got)) == expected, name
        assert got.get("default") == lean_schema({"default": param.default}).get("default"), name


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_the_cli_offers_exactly_the_declared_parameters(operation):
    model, _, command, _ = OPERATIONS[operation]
    offered = {p.name: p for p in cli.commands[command].params if p.name != "help"}
    wanted = offered_to_callers(model)
    assert set(offered) - CLI_PRESENTATION == set(wanted)
    for name, param in wanted.items():
        option = offered[name]
        assert option.param_type_name == ("argument" if param.surface.cli_argument else "option")
        if option.param_type_name == "option":
            assert "--" + name.replace("_", "-") in option.opts, name
            assert set(param.surface.cli_flags) <= set(option.opts + option.secondary_opts)
            assert option.help == param.help, name
            assert option.multiple == param.many, name
            assert option.is_flag == (param.kind is bool), name
            assert option.default == param.default, name
        assert _click_bounds(option.type) == _declared_bounds(param), name


def _click_bounds(kind) -> dict:
    if hasattr(kind, "choices"):
        return {"choices": tuple(kind.choices)}
    if hasattr(kind, "min"):  # IntRange, FloatRange
        found = {"ge" if not kind.min_open else "gt": kind.min, "le": kind.max}
        return {k: v for k, v in found.items() if v is not None}
    return {}


def _declared_bounds(param) -> dict:
    return {"choices": param.choices} if param.choices else dict(param.bounds)


def test_the_web_form_asks_only_declared_search_parameters():
    spelt = {rest_spelling(p) for p in params(SearchRequest)}
    assert set(SearchForm.FIELDS) <= spelt
    assert declared(SearchRequest)["mode"].choices == SearchForm.MODES


def test_the_engine_enforces_the_declared_top_n_bound():
    """search/retrieval.py checks top_n itself: its bound must be the declared one."""
    RetrievalOptions(top_n=MAX_TOP_N).checked()
    with pytest.raises(BadQuery):
        RetrievalOptions(top_n=MAX_TOP_N + 1).checked()


def test_the_service_takes_the_model_or_keywords_alike(places):
    service = places
    asked = SearchRequest(query="temple", source="places", wikidata=["Q2"], limit=5)
    by_keywords = searching.search(
        service, SearchRequest.of(query="temple", source="places", wikidata=["Q2"], limit=5)
    )
    assert searching.search(service, asked).to_dict() == by_keywords.to_dict()
    listed = searching.filter(
        service, FilterRequest(source="places", fields=["key,title"], tag=["temple"], area=[])
    )
    assert listed == searching.filter(
        service, FilterRequest.of(source="places", fields=["key", "title"], tag=["temple"])
    )
    assert set(listed["docs"][0]) == {"key", "title"}


# -- the parameters the CLI and MCP gained, used ------------------------------------------------

# Three temples: two in Kyoto (one with a Wikidata id), one in Tokyo
TEMPLES = [
    ("kinkakuji", "Kinkaku-ji", (35.0394, 135.7292), "Q2"),
    ("kiyomizu", "Kiyomizu-dera", (34.9949, 135.7850), None),
    ("sensoji", "Senso-ji", (35.7148, 139.7967), "Q3"),
]
KYOTO_BOX = "34.9,135.6,35.1,135.9"


@pytest.fixture
def places(settings, service):
    docs = [
        Doc(
            key=key,
            title=title,
            body=f"{title} is a Buddhist temple.",
            point=point,
            attrs={"wikidata": [qid]} if qid else {},
            tags=["temple"],
        )
        for key, title, point, qid in TEMPLES
    ]
    build_source(settings, "places", "test", docs)
    return service


def _cli(settings, *args):
    return CliRunner().invoke(cli, ["--data", str(settings.data_dir), *args])


def test_cli_search_takes_bbox_and_wikidata(settings, places):
    boxed = _cli(settings, "search", "temple", "-s", "places", "--bbox", KYOTO_BOX, "--json")
    assert boxed.exit_code == 0, boxed.output
    assert {h["title"] for h in json.loads(boxed.output)["hits"]} == {"Kinkaku-ji", "Kiyomizu-dera"}
    named = _cli(settings, "search", "temple", "-s", "places", "--wikidata", "Q3", "--json")
    assert [h["title"] for h in json.loads(named.output)["hits"]] == ["Senso-ji"]


def test_cli_refuses_a_value_beyond_the_declared_bounds(settings, places):
    too_many = _cli(settings, "search", "temple", "-s", "places", "--top-n", str(MAX_TOP_N + 1))
    assert too_many.exit_code == 2 and "--top-n" in too_many.output
    no_radius = _cli(settings, "filter", "places", "--near", "35,135.7", "--radius-km", "0")
    assert no_radius.exit_code == 2 and "--radius-km" in no_radius.output


def test_cli_filter_takes_fields_repeated_or_comma_separated(settings, places):
    listed = _cli(
        settings,
        "filter",
        "places",
        "--fields",
        "key,title",
        "--fields",
        "point",
        "--wikidata",
        "Q2",
        "--json",
    )
    assert listed.exit_code == 0, listed.output
    (doc,) = json.loads(listed.output)["docs"]
    assert set(doc) == {"key", "title", "point"} and doc["key"] == "kinkakuji"


@pytest.mark.slow
def test_mcp_search_takes_wikidata_bbox_and_the_hybrid_options(settings, places):
    async def go(url):
        async with Client(f"{url}/mcp") as client:
            named = await client.call_tool(
                "search",
                {
                    "query": "temple",
                    "source": "places",
                    "wikidata": ["Q2,Q3"],
                    "bbox": KYOTO_BOX,
                    "fusion": "rrf",
                    "keyword_weight": 0.3,
                },
            )
            listed = await client.call_tool(
                "filter", {"source": "places", "tag": ["temple"], "fields": ["key"]}
            )
            refused = await client.call_tool(
                "search", {"query": "temple", "source": "places", "top_n": MAX_TOP_N + 1}
            )
            return named, listed, refused

    with RunningServer(create_app(settings)) as running:
        named, listed, refused = anyio.run(go, running.url)
    assert [h["title"] for h in named.structured_content["hits"]] == ["Kinkaku-ji"]
    docs = listed.structured_content["docs"]
    assert sorted(docs, key=lambda d: d["key"]) == [{"key": t[0]} for t in sorted(TEMPLES)]
    assert refused.is_error


def test_rest_all_source_search_takes_the_hybrid_options_and_conditions(settings, places):
    from fastapi.testclient import TestClient

    with TestClient(create_app(settings), base_url=LOCAL) as client:
        found = client.get("/v1/search", params={"q": "temple", "top_n": 5, "fusion": "rrf"})
        boxed = client.get("/v1/search", params={"q": "temple", "bbox": KYOTO_BOX})
        named = client.get("/v1/search", params={"q": "temple", "source": "places,places"})
        unknown = client.get("/v1/search", params={"q": "temple", "source": "places,nosuch"})
    assert found.status_code == 200 and found.json()["total"] == 3
    inside = [h["point"] for h in boxed.json()["hits"]]
    assert boxed.status_code == 200 and inside
    assert all(34.9 <= p["lat"] <= 35.1 and 135.6 <= p["lon"] <= 135.9 for p in inside)
    assert named.status_code == 200 and named.json()["total"] == 3  # a source named twice: once
    assert unknown.status_code == 404 and "places" in unknown.json()["known_sources"]


def test_a_declared_bound_is_enforced_before_the_service_on_rest(settings, places):
    from fastapi.testclient import TestClient

    with TestClient(create_app(settings), base_url=LOCAL) as client:
        response = client.get("/v1/places/filter", params={"limit": 501})
    assert response.status_code == 400 and "limit" in response.json()["error"]
