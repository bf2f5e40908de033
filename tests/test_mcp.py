"""The MCP server, driven by the official SDK's real clients: Streamable HTTP against a running
server on loopback, and stdio against ``python -m chiezo mcp``."""

import json
import sys

import anyio
import httpx
import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from chiezo.ops import building
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.mcp.clients import snippet
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, build_docs, data_file, write_files

FILES = {
    "sensoji.md": "---\ntitle: 浅草寺\ntags: [寺院]\n---\n東京都台東区にある寺。\n",
    "kiyomizu.md": "---\ntitle: 清水寺\ntags: [寺院]\n---\n京都市東山区の寺。\n",
}
READ_TOOLS = {
    "sources",
    "search",
    "doc",
    "titles",
    "tags",
    "links",
    "filter",
    "features",
    "recall",
    "random",
    "geocode",
}
WRITE_TOOLS = {"remember", "update", "forget"}


@pytest.fixture
def server(settings, service, tmp_path):
    build_docs(service, write_files(tmp_path / "docs", FILES), "temples")
    with RunningServer(create_app(settings)) as running:
        yield running


def run(coroutine_fn):
    return anyio.run(coroutine_fn)


@pytest.mark.slow
def test_tools_are_listed_with_read_only_hints_and_instructions(server):
    async def go():
        async with Client(f"{server.url}/mcp") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            return client.instructions, tools

    instructions, tools = run(go)
    assert set(tools) == READ_TOOLS | WRITE_TOOLS
    for name in READ_TOOLS:
        assert tools[name].annotations.read_only_hint is True, name
    for name in WRITE_TOOLS:
        assert tools[name].annotations.read_only_hint is False, name
    assert tools["forget"].annotations.destructive_hint is True
    assert "`filter` with `tag`" in instructions and "never a label" in instructions
    text_param = tools["remember"].input_schema["properties"]["text"]["description"]
    assert "never a label" in text_param
    assert "\n        " not in tools["search"].description  # docstrings are dedented


@pytest.mark.slow
def test_search_doc_and_filter_over_http(server):
    async def go():
        async with Client(f"{server.url}/mcp") as client:
            found = await client.call_tool("search", {"query": "浅草寺", "source": "temples"})
            doc = await client.call_tool("doc", {"source": "temples", "title": "清水寺"})
            members = await client.call_tool("filter", {"source": "temples", "tag": ["寺院"]})
            return found, doc, members

    found, doc, members = run(go)
    assert not found.is_error
    assert found.structured_content["hits"][0]["title"] == "浅草寺"
    assert doc.structured_content["body"].startswith("京都市")
    assert members.structured_content["total"] == 2


@pytest.mark.slow
def test_a_single_value_where_a_list_is_asked_for_is_taken_as_a_list(server):
    # 4B-8B models send area: "京都府" where a list is declared (issue #34)
    async def go():
        async with Client(f"{server.url}/mcp") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            one = await client.call_tool("filter", {"source": "temples", "tag": "寺院"})
            listed = await client.call_tool("filter", {"source": "temples", "tag": ["寺院"]})
            found = await client.call_tool("search", {"query": "寺", "tag": "寺院,神社"})
            return tools, one, listed, found

    tools, one, listed, found = run(go)
    assert "京都府" in tools["filter"].input_schema["properties"]["area"]["description"]
    assert not one.is_error and one.structured_content == listed.structured_content
    assert one.structured_content["total"] == 2
    assert found.structured_content["total"] == 2  # a comma inside the one value still means OR
    # the schema states the list (issue #44: "anyOf [list, one value, null]" on every list
    # parameter cost a small model's context); a single value is still taken, as above
    assert tools["filter"].input_schema["properties"]["tag"]["type"] == "array"


@pytest.mark.slow
def test_sources_tells_a_model_what_it_needs_and_nothing_of_the_machine(server):
    async def go():
        async with Client(f"{server.url}/mcp") as client:
            return await client.call_tool("sources", {})

    (temples,) = [s for s in run(go).structured_content["sources"] if s["name"] == "temples"]
    assert temples["kind"] == "docs" and temples["docs"] == 2 and temples["vectors"] is None
    assert not {"input", "generation", "size_bytes", "schema_version"} & set(temples)
    assert "/" not in json.dumps(temples, ensure_ascii=False)  # no path of this machine


@pytest.mark.slow
def test_tool_errors_carry_the_same_reason_as_the_rest_api(server):
    async def go():
        async with Client(f"{server.url}/mcp") as client:
            unknown = await client.call_tool("search", {"query": "x", "source": "wikipedia"})
            missing = await client.call_tool("doc", {"source": "temples", "title": "浅草"})
            bad_field = await client.call_tool(
                "doc", {"source": "temples", "title": "浅草寺", "fields": ["colour"]}
            )
            return unknown, missing, bad_field

    unknown, missing, bad_field = run(go)
    for result in (unknown, missing, bad_field):
        assert result.is_error
    rest = httpx.get(f"{server.url}/v1/wikipedia/search", params={"q": "x"}).json()
    payload = json.loads(unknown.content[0].text.split(": ", 1)[1])
    assert payload == rest and payload["known_sources"] == ["temples"]
    assert "浅草寺" in missing.content[0].text  # the candidates
    assert "allowed_fields" in bad_field.content[0].text


@pytest.mark.slow
def test_notes_through_mcp(server):
    async def go():
        async with Client(f"{server.url}/mcp") as client:
            stored = await client.call_tool(
                "remember", {"text": "清水寺の舞台は高さ約13メートル。", "tags": ["京都"]}
            )
            note_id = stored.structured_content["id"]
            recalled = await client.call_tool("recall", {"since": "2000-01-01"})
            updated = await client.call_tool("update", {"note_id": note_id, "tags": ["京都", "寺"]})
            gone = await client.call_tool("forget", {"note_id": note_id})
            again = await client.call_tool("forget", {"note_id": note_id})
            return stored, recalled, updated, gone, again

    stored, recalled, updated, gone, again = run(go)
    assert recalled.structured_content["notes"][0]["text"] == "清水寺の舞台は高さ約13メートル。"
    assert updated.structured_content["tags"] == ["京都", "寺"]
    assert gone.structured_content == {"deleted": stored.structured_content["id"]}
    assert again.is_error and "no note" in again.content[0].text


@pytest.mark.slow
def test_stdio_server(settings, service, tmp_path):
    build_docs(service, write_files(tmp_path / "docs", FILES), "temples")
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "chiezo", "--data", str(settings.data_dir), "mcp"],
    )

    async def go():
        async with Client(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            found = await client.call_tool("search", {"query": "清水寺"})
            return names, found

    names, found = run(go)
    assert names == READ_TOOLS | WRITE_TOOLS
    assert found.structured_content["hits"][0]["title"] == "清水寺"
    # the compact tool set, as `chiezo mcp config --profile compact` registers it
    registered = json.loads(snippet("generic", data_dir=settings.data_dir, profile="compact"))
    params = StdioServerParameters(command=sys.executable, args=["-m", "chiezo", "--data",
                                   str(settings.data_dir), *registered["args"]])  # fmt: skip
    names, found = run(go)
    assert names == {"sources", "search", "doc", "filter", "recall", "remember"}
    assert found.structured_content["hits"][0]["title"] == "清水寺"


@pytest.mark.parametrize("client", ["claude-desktop", "cursor", "vscode", "generic"])
def test_mcp_config_snippets_are_valid_json(client, tmp_path):
    stdio = json.loads(snippet(client, data_dir=tmp_path))
    text = json.dumps(stdio)
    assert '"mcp"' in text and str(tmp_path) in text
    http = json.loads(snippet(client, data_dir=tmp_path, url="http://127.0.0.1:8080/mcp"))
    assert "http://127.0.0.1:8080/mcp" in json.dumps(http)


def test_mcp_config_for_command_line_clients(tmp_path):
    assert snippet("claude-code", data_dir=tmp_path).startswith("claude mcp add chiezo")
    assert "--transport http" in snippet("claude-code", data_dir=tmp_path, url="http://x/mcp")
    assert snippet("codex", data_dir=tmp_path).startswith("[mcp_servers.chiezo]")


def test_mcp_config_registers_the_profile_asked_for(tmp_path):
    data = ["--data", str(tmp_path / "data")]
    for args in (["mcp", "config", "--profile", "compact"], ["mcp", "--profile", "compact",
                                                              "config"]):  # fmt: skip
        shown = CliRunner().invoke(cli, [*data, *args, "--client", "claude-code"])
        assert shown.exit_code == 0 and shown.stdout.rstrip().endswith("mcp --profile compact")
    url = "http://127.0.0.1:8080/mcp"
    shown = CliRunner().invoke(cli, [*data, "mcp", "config", "--profile", "compact", "--http",
                                     url, "--client", "generic"])  # fmt: skip
    assert json.loads(shown.stdout) == {"url": url + "?profile=compact"}
    refused = CliRunner().invoke(cli, [*data, "mcp", "config", "--profile", "tiny"])
    assert refused.exit_code == 2 and "compact" in refused.output and "full" in refused.output


# -- arguments as the client sent them (issue #42 item 8) --------------------------------------

# A triangle in central Helsinki (lon,lat): its inside holds three of the places in
# tests/data/places/helsinki.geojson; its bounding box also holds Helsinki station and
# Apteekki Eliel, so a result equal to INSIDE is the polygon's, not its box's.
TRIANGLE = {
    "type": "Polygon",
    "coordinates": [[[24.935, 60.169], [24.945, 60.169], [24.935, 60.174], [24.935, 60.169]]],
}
INSIDE = {"Cafe Java", "Cafè Sanomakahvila", "Yliopiston apteekki"}
# documents whose titles are JSON: a client's text that looks like JSON must stay text
JSONISH = {
    "null.md": '---\ntitle: "null"\n---\nThe word null, as a title.\n',
    "list.md": '---\ntitle: "[1,2]"\n---\nA list, as a title.\n',
}


@pytest.fixture
def places_server(settings, service, tmp_path):
    building.ingest(service, "places", data_file("places/helsinki.geojson"), "helsinki")
    build_docs(service, write_files(tmp_path / "jsonish", JSONISH), "jsonish")
    with RunningServer(create_app(settings)) as running:
        yield running


def _titles(result) -> set[str]:
    assert not result.is_error, result.content[0].text
    found = result.structured_content
    return {d["title"] for d in found.get("docs", found.get("hits", []))}


@pytest.mark.slow
def test_within_is_taken_as_a_geojson_object_and_as_its_text(places_server, settings):
    text = json.dumps(TRIANGLE)

    async def go():
        async with Client(f"{places_server.url}/mcp") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            calls = {}
            for form, within in (("object", TRIANGLE), ("text", text)):
                filtered = {"source": "helsinki", "within": within, "fields": ["title"]}
                calls["filter", form] = await client.call_tool("filter", filtered)
                searched = {"query": "apteekki", "within": within}
                calls["search", form] = await client.call_tool("search", searched)
            return tools, calls

    tools, calls = run(go)
    assert _titles(calls["filter", "object"]) == _titles(calls["filter", "text"]) == INSIDE
    # Apteekki Eliel lies in the triangle's box, not in the triangle
    assert _titles(calls["search", "object"]) == _titles(calls["search", "text"])
    assert _titles(calls["search", "text"]) == {"Yliopiston apteekki"}
    # REST and the CLI take the same shape as text, as before
    rest = httpx.get(f"{places_server.url}/v1/helsinki/filter", params={"within": text})
    assert {d["title"] for d in rest.json()["docs"]} == INSIDE
    data = ["--data", str(settings.data_dir)]
    printed = CliRunner().invoke(cli, [*data, "filter", "helsinki", "--within", text, "--json"])
    assert {d["title"] for d in json.loads(printed.output)["docs"]} == INSIDE
    for name in ("search", "filter", "random"):  # a model is told it may send either
        within = tools[name].input_schema["properties"]["within"]
        assert {t["type"] for t in within["anyOf"]} == {"string", "object"}
        assert "GeoJSON" in within["description"]


@pytest.mark.slow
def test_text_that_looks_like_json_stays_text(places_server):
    async def go():
        async with Client(f"{places_server.url}/mcp") as client:
            await client.call_tool("remember", {"text": "null is not zero"})
            await client.call_tool("remember", {"text": "a note about something else"})
            return {
                "doc null": await client.call_tool("doc", {"source": "jsonish", "title": "null"}),
                "doc list": await client.call_tool("doc", {"source": "jsonish", "title": "[1,2]"}),
                "search": await client.call_tool("search", {"query": "null", "source": "jsonish"}),
                "source null": await client.call_tool("search", {"query": "x", "source": "null"}),
                "recall": await client.call_tool("recall", {"q": "null"}),
                "recall list": await client.call_tool("recall", {"q": "[1,2]"}),
            }

    got = run(go)
    assert got["doc null"].structured_content["body"] == "The word null, as a title."
    assert got["doc list"].structured_content["body"] == "A list, as a title."
    assert got["search"].structured_content["hits"][0]["title"] == "null"
    # "null" names a source that does not exist, not "every source"
    assert (
        got["source null"].is_error
        and "unknown source: 'null'" in got["source null"].content[0].text
    )
    # the words of a query, not a recall of every note by time
    assert [n["text"] for n in got["recall"].structured_content["notes"]] == ["null is not zero"]
    assert not got["recall list"].is_error, got["recall list"].content[0].text
    assert got["recall list"].structured_content["notes"] == []


@pytest.mark.slow
def test_a_location_rides_in_the_calls_meta_and_no_tool_takes_it_as_an_argument(places_server):
    from datetime import UTC, datetime

    lat, lon = 60.171234, 24.941111  # by Helsinki station: in no row, so its digits mean a leak
    meta = {"chiezo/location": {"lat": lat, "lon": lon, "accuracy_m": 30,
                                "taken_at": datetime.now(UTC).isoformat()}}  # fmt: skip
    near_here = {"source": "helsinki", "near": "here", "limit": 2, "fields": ["title"]}

    async def go():
        async with Client(f"{places_server.url}/mcp") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            attached = await client.call_tool("filter", near_here, meta=meta)
            bare = await client.call_tool("filter", near_here)
            typed = await client.call_tool("filter", {**near_here, "location": f"{lat},{lon}"})
            return tools, attached, bare, typed

    tools, attached, bare, typed = run(go)
    for name in ("search", "filter", "random"):
        assert "location" not in tools[name].input_schema["properties"]
    assert not attached.is_error and attached.structured_content["near"]["from"] == "here"
    assert "60.1712" not in attached.content[0].text and "24.9411" not in attached.content[0].text
    assert bare.is_error and '"what": "location"' in bare.content[0].text
    assert typed.is_error and "takes no argument location" in typed.content[0].text


@pytest.mark.slow
def test_chiezo_mcp_over_stdio_takes_here_from_the_environment_it_started_with(
    places_server, settings
):
    import os
    from datetime import UTC, datetime

    here = f"60.171234,24.941111,{datetime.now(UTC).isoformat()},30"
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "chiezo", "--data", str(settings.data_dir), "mcp"],
        env={**os.environ, "CHIEZO_HERE": here},
    )

    async def go():
        async with Client(params) as client:
            near = {"source": "helsinki", "near": "here", "limit": 1, "fields": ["title"]}
            return await client.call_tool("filter", near)

    found = run(go)
    assert not found.is_error and found.structured_content["near"]["from"] == "here"
    assert found.structured_content["docs"] and "60.1712" not in found.content[0].text
