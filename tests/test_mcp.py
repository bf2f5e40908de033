"""The MCP server, driven by the official SDK's real clients: Streamable HTTP against a running
server on loopback, and stdio against ``python -m chiezo mcp``."""

import json
import sys

import anyio
import httpx
import pytest
from mcp import Client, StdioServerParameters

from chiezo.surfaces.mcp.clients import snippet
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, build_docs, write_files

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
    assert "never a summary label" in text_param
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
    tag = tools["filter"].input_schema["properties"]["tag"]
    assert {t.get("type") for t in tag["anyOf"]} >= {"array", "string"}
    assert "one value, or a list of them" in tag["description"]


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
