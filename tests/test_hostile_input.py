"""Hostile input, tried the way an attacker or a fuzzer would (issue #14): integers beyond 64
bits, NUL in a title, lone surrogates and invalid UTF-8, titles past their limit — through REST,
the pages, MCP, the service and the CLI, each refused with its reason (a 4xx, a usage error)
where it was once a 500 or a traceback. The fuzzed run of the same is test_hostile_input_fuzzed.py."""

import json
import os
import subprocess
import sys

import anyio
import httpx
import pytest
from click.testing import CliRunner
from mcp import Client

from chiezo.core.errors import BadQuery
from chiezo.ops import reading, remembering, searching
from chiezo.ops.requests import DocRequest, RecallRequest, RememberRequest, SearchRequest
from chiezo.surfaces.cli.main import cli

from helpers import BOOK_FILES, build_docs, error_body, write_files

HUGE = "99999999999999999999"  # beyond SQLite's 64-bit integers


# -- integers beyond 2**63 - 1 -----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", f"/v1/notes/{HUGE}"),
        ("PATCH", f"/v1/notes/{HUGE}"),
        ("DELETE", f"/v1/notes/{HUGE}"),
        ("GET", f"/v1/book/doc/{HUGE}"),
        ("GET", f"/v1/book/links?doc_id={HUGE}"),
        ("GET", f"/v1/book/tags?offset={HUGE}"),
        ("GET", f"/v1/book/features?offset={HUGE}"),
        ("GET", f"/v1/notes/recall?offset={HUGE}"),
        ("GET", f"/v1/jobs/{HUGE}"),
        ("GET", f"/v1/jobs/1?log_from={HUGE}"),
    ],
)
def test_huge_integers_are_refused_not_a_500(server, method, path):
    response = httpx.request(
        method, server.url + path, json={"text": "x"} if method == "PATCH" else None
    )
    error_body(response, 400, 404)


@pytest.mark.slow
@pytest.mark.parametrize("path", [f"/doc/book/{HUGE}", f"/doc/book/{HUGE}/original"])
def test_huge_document_ids_on_pages_are_a_404_page(server, path):
    response = httpx.get(server.url + path)
    assert response.status_code == 404 and "<html" in response.text


@pytest.mark.slow
def test_a_huge_notes_offset_on_the_admin_page_shows_the_page(server):
    assert httpx.get(f"{server.url}/admin", params={"notes_offset": HUGE}).status_code == 200


def test_huge_ids_in_the_cli_are_errors_not_tracebacks(settings, service, tmp_path):
    build_docs(service, write_files(tmp_path / "book", BOOK_FILES), "book")
    data = str(settings.data_dir)
    for args in (["doc", "--id", HUGE, "-s", "book"], ["notes", "forget", HUGE]):
        result = CliRunner().invoke(cli, ["--data", data, *args])
        assert result.exit_code == 3, (args, result.output)
        assert "Traceback" not in result.output and "there is no" in result.output


# -- NUL in a title lookup ---------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/v1/book/doc", "/v1/book/links"])
def test_a_nul_in_a_title_lookup_is_a_404_with_candidates(server, path):
    body = error_body(httpx.get(server.url + path, params={"title": "Getting\x00"}), 404)
    assert body["candidates"] == ["Getting started"]


@pytest.mark.slow
def test_a_nul_in_a_title_on_the_doc_page_is_a_404_page(server):
    assert httpx.get(f"{server.url}/doc/book", params={"title": "abc\x00"}).status_code == 404


@pytest.mark.slow
def test_mcp_tools_answer_hostile_input_with_the_error_json(server):
    async def go():
        async with Client(f"{server.url}/mcp") as client:
            return await client.call_tool("doc", {"source": "book", "title": "abc\x00"})

    result = anyio.run(go)
    assert result.is_error
    payload = json.loads(result.content[0].text.split(": ", 1)[1])
    assert payload["status"] == 404 and "candidates" in payload


# -- lone surrogates and invalid UTF-8 ---------------------------------------------------------


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/v1/notes", '{"text": "a \\ud800"}'),
        ("POST", "/v1/notes", '{"text": "a", "tags": ["\\udfff"]}'),
        ("PATCH", "/v1/notes/1", '{"text": "b \\ud800"}'),
        ("POST", "/v1/chat", '{"messages": [{"role": "user", "content": "x \\ud800"}]}'),
    ],
)
def test_lone_surrogates_in_json_are_a_400(server, method, path, body):
    httpx.post(f"{server.url}/v1/notes", json={"text": "a note to patch"})
    response = httpx.request(
        method, server.url + path, content=body, headers={"content-type": "application/json"}
    )
    error_body(response, 400)


def test_the_service_refuses_surrogates_from_any_surface(service, settings, tmp_path):
    build_docs(service, write_files(tmp_path / "book", BOOK_FILES), "book")
    for call in (
        lambda: searching.search(service, SearchRequest.of(query="a\udcff", source="book")),
        lambda: reading.doc(service, DocRequest.of(source="book", title="\ud800")),
        lambda: remembering.remember(service, RememberRequest.of(text="text", tags=["\udc80"])),
        lambda: remembering.recall(service, RecallRequest.of(q="\ud800")),
    ):
        with pytest.raises(BadQuery, match="not valid Unicode"):
            call()


def test_invalid_utf8_in_argv_is_a_usage_error_not_a_traceback(settings, service, tmp_path):
    build_docs(service, write_files(tmp_path / "book", BOOK_FILES), "book")
    env = {**os.environ, "CHIEZO_DATA": str(settings.data_dir), "LC_ALL": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-m", "chiezo", "search", b"caf\xe9 \xff"],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert b"Traceback" not in done.stderr and b"not valid Unicode" in done.stderr


# -- limits ------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("path", ["/v1/book/doc", "/v1/book/links"])
def test_a_long_title_lookup_is_refused(server, path):
    body = error_body(httpx.get(server.url + path, params={"title": "x" * 50_000}), 400)
    assert body["error"] == "title is 50,000 characters long; the limit is 1,000"
