"""Security defaults: loopback is open; beyond it writes need the token; /mcp checks Host; a
name the server does not answer to is refused on every route (DNS rebinding, issue #14), and
the originals of documents are served in a sandbox."""

import socket
from dataclasses import replace

import anyio
import httpx
import pytest
from mcp import Client

from chiezo.core.config import is_loopback
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, error_body

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


@pytest.mark.slow
def test_on_loopback_everything_is_open(settings):
    with RunningServer(create_app(settings)) as server:
        created = httpx.post(f"{server.url}/v1/notes", json={"text": "open"})
        assert created.status_code == 201
        assert "remember" in _tool_names(server.url)


@pytest.mark.slow
def test_beyond_loopback_without_a_token_writes_are_refused(settings):
    with RunningServer(create_app(settings, bind_host="0.0.0.0")) as server:
        refused = httpx.post(f"{server.url}/v1/notes", json={"text": "x"})
        assert refused.status_code == 403
        assert "CHIEZO_TOKEN" in refused.json()["hint"]
        assert httpx.get(f"{server.url}/v1/notes/recall").status_code == 200  # reads still work
        names = _tool_names(server.url)
        assert "search" in names and not names & {"remember", "update", "forget"}


@pytest.mark.slow
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


@pytest.mark.slow
def test_the_mcp_endpoint_refuses_foreign_host_headers(settings):
    with RunningServer(create_app(settings)) as server:
        mcp = f"{server.url}/mcp"
        rebinding = httpx.post(
            mcp, json=INITIALIZE, headers={**MCP_HEADERS, "host": "evil.example"}
        )
        assert rebinding.status_code == 421
        local = httpx.post(mcp, json=INITIALIZE, headers=MCP_HEADERS)
        assert local.status_code == 200


@pytest.mark.slow
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


# -- DNS rebinding -----------------------------------------------------------------------------


REBINDING = {"host": "evil.example:8080", "origin": "http://evil.example:8080"}


@pytest.mark.slow
@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/v1/notes", {"text": "x"}),
        ("POST", "/v1/jobs", {"source": "book", "action": "rebuild"}),
        ("GET", "/v1/notes/recall", None),
        ("GET", "/v1/book/search?q=chiezo", None),
        ("GET", "/admin", None),
        ("GET", "/", None),
        ("POST", "/mcp", {}),
    ],
)
def test_a_rebound_host_name_is_refused_on_every_route(server, method, path, body):
    response = httpx.request(method, server.url + path, json=body, headers=REBINDING)
    assert error_body(response, 421)["hint"].startswith("a page under another name")
    assert httpx.get(f"{server.url}/v1/notes/recall").json()["total"] == 0  # nothing written
    assert httpx.get(f"{server.url}/v1/jobs").json()["jobs"] == []  # nothing started


@pytest.mark.slow
@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8080",
        "localhost:8080",
        "[::1]:8080",
        "localhost.",
        "app.localhost:8080",
        "192.168.1.20",
    ],
)
def test_loopback_names_and_addresses_are_answered(server, host):
    assert httpx.get(f"{server.url}/v1/sources", headers={"host": host}).status_code == 200


@pytest.mark.slow
def test_allowed_hosts_and_the_bound_name_are_answered(settings):
    from dataclasses import replace

    from chiezo.surfaces.rest.security import Security

    configured = Security("127.0.0.1", None, ("kb.lan:*", "proxy.example:8443"))
    assert configured.host_allowed("kb.lan:9999") and configured.host_allowed("KB.LAN")
    assert configured.host_allowed("proxy.example:8443")
    assert not configured.host_allowed("proxy.example:8444")
    assert not configured.host_allowed("kb.lan.evil.example")
    assert Security("kb.example.com", "t").host_allowed("kb.example.com:8080")
    lan = Security("0.0.0.0", "t")
    assert lan.host_allowed(f"{socket.gethostname()}:8080") and lan.host_allowed("10.0.0.5:80")
    assert not lan.host_allowed("evil.example")
    with RunningServer(create_app(replace(settings, allowed_hosts=("kb.lan",)))) as running:
        assert httpx.get(f"{running.url}/healthz", headers={"host": "kb.lan:1"}).status_code == 200


@pytest.mark.slow
def test_mcp_refuses_a_request_from_another_sites_page(server):
    response = httpx.post(f"{server.url}/mcp", json={}, headers={"origin": "https://evil.example"})
    error_body(response, 403)


# -- originals are sandboxed -------------------------------------------------------------------


def _doc_id(server, title: str) -> int:
    return httpx.get(f"{server.url}/v1/book/doc", params={"title": title}).json()["doc_id"]


@pytest.mark.slow
def test_an_html_original_is_served_in_a_sandbox(server):
    response = httpx.get(f"{server.url}/doc/book/{_doc_id(server, 'Special offer')}/original")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert policy.startswith("sandbox") and "default-src 'none'" in policy
    assert "allow-scripts" not in policy and "allow-same-origin" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"


@pytest.mark.slow
def test_text_originals_are_plain_text_and_pages_may_not_be_framed(server):
    prices = _doc_id(server, "Getting started")  # guide.md
    response = httpx.get(f"{server.url}/doc/book/{prices}/original")
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert "sandbox" in response.headers["content-security-policy"]
    page = httpx.get(f"{server.url}/doc/book/{prices}")
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["referrer-policy"] == "no-referrer"
