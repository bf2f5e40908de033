"""Security defaults: loopback is open; beyond it writes need the token; /mcp checks Host."""

from dataclasses import replace

import anyio
import httpx
import pytest
from mcp import Client

from chiezo.core.config import is_loopback
from chiezo.surfaces.rest import create_app

from helpers import RunningServer

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _tool_names(url: str) -> set[str]:
    async def go():
        async with Client(f"{url}/mcp") as client:
            return {t.name for t in (await client.list_tools()).tools}

    return anyio.run(go)


@pytest.mark.parametrize(
    "host, expected",
    [
        ("127.0.0.1", True),
        ("localhost", True),
        ("::1", True),
        ("0.0.0.0", False),
        ("192.168.1.5", False),
        ("kb.example.com", False),
    ],
)
def test_loopback_detection(host, expected):
    assert is_loopback(host) is expected


def test_on_loopback_everything_is_open(settings):
    with RunningServer(create_app(settings)) as server:
        created = httpx.post(f"{server.url}/v1/notes", json={"text": "open"})
        assert created.status_code == 201
        assert "remember" in _tool_names(server.url)


def test_beyond_loopback_without_a_token_writes_are_refused(settings):
    with RunningServer(create_app(settings, bind_host="0.0.0.0")) as server:
        refused = httpx.post(f"{server.url}/v1/notes", json={"text": "x"})
        assert refused.status_code == 403
        assert "CHIEZO_TOKEN" in refused.json()["hint"]
        assert httpx.get(f"{server.url}/v1/notes/recall").status_code == 200  # reads still work
        names = _tool_names(server.url)
        assert "search" in names and not names & {"remember", "update", "forget"}


def test_beyond_loopback_with_a_token_writes_need_it(settings):
    settings = replace(settings, token="s3cret")
    with RunningServer(create_app(settings, bind_host="0.0.0.0")) as server:
        url = f"{server.url}/v1/notes"
        assert httpx.post(url, json={"text": "x"}).status_code == 401
        wrong = {"authorization": "Bearer nope"}
        assert httpx.post(url, json={"text": "x"}, headers=wrong).status_code == 401
        good = {"authorization": "Bearer s3cret"}
        assert httpx.post(url, json={"text": "x"}, headers=good).status_code == 201
        mcp = f"{server.url}/mcp"
        assert httpx.post(mcp, json=INITIALIZE, headers=MCP_HEADERS).status_code == 401
        ok = httpx.post(mcp, json=INITIALIZE, headers={**MCP_HEADERS, **good})
        assert ok.status_code == 200 and ok.json()["result"]["serverInfo"]["name"] == "chiezo"


def test_the_mcp_endpoint_refuses_foreign_host_headers(settings):
    with RunningServer(create_app(settings)) as server:
        mcp = f"{server.url}/mcp"
        rebinding = httpx.post(
            mcp, json=INITIALIZE, headers={**MCP_HEADERS, "host": "evil.example"}
        )
        assert rebinding.status_code == 421
        local = httpx.post(mcp, json=INITIALIZE, headers=MCP_HEADERS)
        assert local.status_code == 200


def test_allowed_hosts_extend_the_host_check(settings):
    settings = replace(settings, allowed_hosts=("kb.example.com",))
    with RunningServer(create_app(settings)) as server:
        headers = {**MCP_HEADERS, "host": "kb.example.com"}
        assert httpx.post(f"{server.url}/mcp", json=INITIALIZE, headers=headers).status_code == 200


@pytest.mark.parametrize(
    "origin, host, allowed, same",
    [
        ("http://127.0.0.1:8080", "127.0.0.1:8080", (), True),
        ("https://evil.example", "127.0.0.1:8080", (), False),
        ("null", "127.0.0.1:8080", (), False),
        ("http://kb.lan:8080", "10.0.0.2:8080", ("kb.lan:*",), True),
        ("http://kb.lan.evil:8080", "10.0.0.2:8080", ("kb.lan:*",), False),
    ],
)
def test_a_write_from_a_browser_must_come_from_this_site(origin, host, allowed, same):
    from chiezo.surfaces.rest.security import Security

    assert Security("0.0.0.0", "t", allowed).same_site(origin, host) is same
