"""Citations that open, on every surface (issue #44 item 3): every hit, document and answer
citation carries a ``url`` a person can open — the source's public page where it has one, else
a page of the running server that answers 200 (a PDF at its page, a ZIM article as its archive
shows it, a document's page) — from REST, MCP (over HTTP and over stdio beside a server on the
same data), the CLI beside such a server, and in a CLI with no server the ``chiezo doc``
command that shows the document, which works.

Built from real files in tests/data: the Ray Charles ZIM, a PDF of slides, a GPX of Kagawa's
towns (a place with a GeoNames page, others with none), a Markdown file and a Wikipedia dump.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from urllib.parse import unquote, urldefrag

import anyio
import httpx
import pytest
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from chiezo.core.config import Settings
from chiezo.ops import building, links
from chiezo.ops.context import Context
from chiezo.store import model_host
from chiezo.surfaces.cli.answer_printer import doc_command
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app
from llm_stub import ScriptedLLM, tool_call

from helpers import RunningServer, build_docs, data_file, free_port, wiki_dump, write_files

pytestmark = pytest.mark.slow  # a ZIM, a PDF and a dump built, a server, model-host processes

PAGES = [
    (
        1,
        "夏目漱石",
        "'''夏目漱石'''は日本の小説家。1867年2月9日に江戸の牛込で生まれた。代表作に『坊っちゃん』がある。",
    ),
]
# (source, query) whose hits between them have every kind of stored url: a public page
# (Wikipedia, GeoNames), a PDF at its page, a Markdown file, an archive entry, none at all
QUERIES = [
    ("zim", "Ray Charles"),
    ("jawiki", "夏目漱石"),
    ("files", "字句的な知識を構築する方法"),
    ("files", "年次休暇"),
    ("towns", "高松市"),
    ("towns", "丸亀市"),
]


def build(root):
    settings = Settings(data_dir=root / "data", query_timeout=10)
    service = Context(settings)
    building.ingest(
        service, "zim", data_file("zim/libkiwix_zimfile_raycharles.zim"), "zim", embed=False
    )
    dump = root / "wiki.xml"
    dump.write_text(wiki_dump(PAGES))
    building.ingest(service, "wikipedia", dump, "jawiki", embed=False)
    folder = write_files(root / "files", {"leave.md": "# 休暇\n\n年次休暇は20日。\n"})
    shutil.copy(data_file("docs/pdf/nlp2004slides.pdf"), folder / "slides.pdf")
    build_docs(service, folder, "files")
    building.ingest(service, "places", [data_file("places/kagawa.gpx")], "towns")
    return settings


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return build(tmp_path_factory.mktemp("citations"))


def answering(body):
    """The scripted model: a plan of the question itself; in agent mode one search, then an
    answer citing the first document found; otherwise an answer citing [1]."""
    question = next(m["content"] for m in reversed(body["messages"]) if m["role"] == "user")
    if "search queries" in body["messages"][0]["content"]:
        return {"content": json.dumps({"queries": [question]})}
    if "tools" in body and not any(m["role"] == "tool" for m in body["messages"]):
        return {"tool_calls": [tool_call("search", {"query": question})]}
    return {"content": f"{question} [1]."}


@pytest.fixture(scope="module")
def served(library):
    """The server as ``chiezo serve`` runs it: its own address as ``public_url``."""
    port = free_port()
    with ScriptedLLM(answering) as stub:
        settings = Settings(
            data_dir=library.data_dir,
            query_timeout=10,
            llm_url=stub.url,
            llm_model="stub-model",
            public_url=f"http://127.0.0.1:{port}",
        )
        with RunningServer(create_app(settings), port=port) as server:
            yield server, stub


def stored_public(source: str, doc_id: int, settings: Settings) -> str | None:
    """The document's public page as its source stores it (the oracle: read from the store's
    table, not through the code under test)."""
    service = Context(settings)  # held: its connections close with it
    conn = service.library.get(source).conn
    (stored,) = conn.execute("SELECT url FROM docs WHERE doc_id = ?", (doc_id,)).fetchone()
    return stored if stored and stored.startswith(("https://", "http://")) else None


def assert_opens(url, source: str, doc_id: int, server_url: str, settings: Settings) -> None:
    """``url`` is the document's public page, or a page of the server that answers 200."""
    assert url, f"{source} document {doc_id} has no url"
    public = stored_public(source, doc_id, settings)
    if public is not None:  # a tool answer writes it as a browser shows it (…/wiki/浅草寺)
        assert unquote(url) == unquote(public)
        return
    assert url.startswith(server_url + "/"), url
    answer = httpx.get(urldefrag(url).url, timeout=30)  # a fragment is the browser's
    assert answer.status_code == 200, (url, answer.status_code)


def test_every_url_of_rest_opens(library, served):
    server, _ = served
    opened: list[str] = []

    def check(url, source, doc_id):
        assert_opens(url, source, doc_id, server.url, library)
        opened.append(url)

    with httpx.Client(base_url=server.url, timeout=30) as client:
        for source, query in QUERIES:
            found = client.get(f"/v1/{source}/search", params={"q": query}).json()
            assert found["hits"], (source, query)
            for hit in found["hits"]:
                check(hit["url"], source, hit["doc_id"])
                doc = client.get(f"/v1/{source}/doc/{hit['doc_id']}").json()
                check(doc["url"], source, hit["doc_id"])
                stored = hit["source_url"] and hit["source_url"].partition("#page=")[0]
                assert doc["source_url"] == stored  # what the source stores, kept apart
            drawn = client.get(f"/v1/{source}/random", params={"count": 3})
            for row in drawn.json()["docs"]:
                check(row["url"], source, row["doc_id"])
        near = {"near": "34.3,134.0", "radius_km": 50}  # Kagawa: the towns, with and without
        listed = client.get("/v1/towns/filter", params={**near, "limit": 20}).json()
        assert listed["docs"]
        for row in listed["docs"]:
            check(row["url"], "towns", row["doc_id"])
        for source, query in QUERIES:
            for mode in ("rag", "agent"):
                asked = client.get("/v1/ask", params={"q": query, "source": source, "mode": mode})
                refs = asked.json()["references"]
                assert refs, (source, mode)
                for ref in refs:
                    check(ref["url"], ref["source"], ref["doc_id"])
    # every kind of link was among them: public pages, a PDF page, an archive entry, a doc page
    assert any(u.startswith("https://ja.wikipedia.org/") for u in opened)
    assert any(u.startswith("https://www.geonames.org/") for u in opened)
    assert any(re.search(r"/doc/files/\d+/original#page=\d+$", u) for u in opened)
    assert any("/doc/zim/archive/A/" in u for u in opened)
    assert any(re.search(r"/doc/towns/\d+$", u) for u in opened)


def test_every_url_of_mcp_opens(library, served):
    server, _ = served

    async def go():
        async with Client(f"{server.url}/mcp") as client:
            calls = [("search", {"query": q, "source": s}) for s, q in QUERIES]
            calls += [("filter", {"source": "towns", "near": "34.3,134.0", "radius_km": 50})]
            calls += [("random", {"source": s, "count": 2}) for s in ("zim", "files", "towns")]
            calls += [("doc", {"source": "zim", "title": "Ray Charles"})]
            return [(await client.call_tool(name, args)).structured_content for name, args in calls]

    for result in anyio.run(go):
        rows = result.get("hits") or result.get("docs") or [result]
        for row in rows:
            source = row.get("source") or result["source"]
            assert_opens(row["url"], source, row["doc_id"], server.url, library)


# -- beside a server on the same data, and with none ---------------------------------------------


@pytest.fixture
def host_telling(served, library, monkeypatch):
    """The server's model host as ``chiezo serve`` starts it, telling callers the server's
    address: what a CLI command (and ``chiezo mcp``) on the same data directory finds."""
    server, _ = served
    base = tempfile.mkdtemp()  # short: a socket's path is at most ~100 bytes
    monkeypatch.setenv("TMPDIR", base)
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.delenv(model_host.HOST_ENV, raising=False)
    path = model_host.socket_path(library.data_dir)
    assert path is not None
    host = subprocess.Popen(
        [sys.executable, "-m", "chiezo.store.model_host", str(path), str(os.getpid()), server.url]
    )
    deadline = time.monotonic() + 30
    while not path.exists():
        assert time.monotonic() < deadline, "the host did not start"
        time.sleep(0.05)
    links.forget_servers()
    yield server
    host.terminate()
    host.wait(10)
    links.forget_servers()
    shutil.rmtree(base, ignore_errors=True)


def cli_in(settings: Settings, *args, env=None):
    environment = {"CHIEZO_LLM_URL": None, "CHIEZO_PUBLIC_URL": None, **(env or {})}
    return CliRunner().invoke(cli, ["--data", str(settings.data_dir), *args], env=environment)


def test_the_cli_beside_a_server_links_its_pages_and_so_does_mcp_over_stdio(
    library, served, host_telling
):
    server, stub = served
    env = {"CHIEZO_LLM_URL": stub.url, "CHIEZO_LLM_MODEL": "stub-model"}
    for source, query in QUERIES:
        found = cli_in(library, "search", query, "-s", source, "--json")
        for hit in json.loads(found.stdout)["hits"]:
            assert_opens(hit["url"], source, hit["doc_id"], server.url, library)
        asked = cli_in(library, "ask", query, "-s", source, "--json", env=env)
        for ref in json.loads(asked.stdout)["references"]:  # answered here, linked there
            assert_opens(ref["url"], ref["source"], ref["doc_id"], server.url, library)
    shown = cli_in(library, "ask", "Ray Charles", "-s", "zim", env=env).stdout
    assert re.search(rf"\[1\] Ray Charles — {re.escape(server.url)}/doc/zim/archive/A/", shown)
    params = StdioServerParameters(  # the SDK passes on only a few variables: TMPDIR too
        command=sys.executable,
        args=["-m", "chiezo", "--data", str(library.data_dir), "mcp"],
        env={**os.environ},
    )

    async def go():
        async with Client(params) as client:
            return (await client.call_tool("search", {"query": "Ray Charles"})).structured_content

    for hit in anyio.run(go)["hits"]:
        assert_opens(hit["url"], hit["source"], hit["doc_id"], server.url, library)


def test_with_no_server_the_cli_shows_the_command_that_opens_the_document(library):
    links.forget_servers()
    with ScriptedLLM(answering) as stub:
        env = {"CHIEZO_LLM_URL": stub.url, "CHIEZO_LLM_MODEL": "stub-model"}
        asked = cli_in(library, "ask", "Ray Charles", "-s", "zim", env=env)
        found = cli_in(library, "search", "字句的な知識を構築する方法", "-s", "files")
        as_json = cli_in(library, "search", "Ray Charles", "-s", "zim", "--json")
    assert asked.exit_code == 0, asked.output
    cited = re.search(r"^\[1\] Ray Charles — (chiezo .+?)  \(zim\)$", asked.stdout, re.M)
    assert cited, asked.stdout
    listed = re.findall(r"^ +(chiezo .*doc -s files --id \d+)$", found.stdout, re.M)
    assert listed, found.stdout
    assert json.loads(as_json.stdout)["hits"][0]["url"] is None  # no link is made up
    for command in (cited.group(1), listed[0]):
        words = shlex.split(command)
        # another data directory than this shell's default is named; the command shows it
        assert words[1:3] == ["--data", str(library.data_dir.resolve())]
        shown = CliRunner().invoke(cli, words[1:], env={"CHIEZO_PUBLIC_URL": None})
        assert shown.exit_code == 0, shown.output
        assert words[-1] in shown.stdout.splitlines()[0]  # "title  source · doc N"
    assert "Ray Charles" in CliRunner().invoke(cli, shlex.split(cited.group(1))[1:]).stdout


def test_the_data_directory_is_named_only_when_the_shell_would_not_find_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CHIEZO_DATA", raising=False)
    assert doc_command("zim", 3, tmp_path / "data") == "chiezo doc -s zim --id 3"
    assert doc_command("my books", 3, tmp_path / "other") == (
        f"chiezo --data {tmp_path / 'other'} doc -s 'my books' --id 3"
    )
    monkeypatch.setenv("CHIEZO_DATA", str(tmp_path / "other"))
    assert doc_command("zim", 3, tmp_path / "other") == "chiezo doc -s zim --id 3"
