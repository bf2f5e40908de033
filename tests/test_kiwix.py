"""A book a running kiwix-serve serves, as a live source (ingest/kiwix.py, store/library.py
LiveSource; issue #34 item 3): the real ``kiwix-serve`` from Debian's kiwix-tools, started
here on loopback with the Ray Charles ZIM of tests/data — registered, searched through its own
index alone and with the other sources, read, cited in an answer — and, as a user would meet
them, a server that is down, slow, or answers garbage."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, InputError, NotFound, SourceUnavailable
from chiezo.ops import answering, building, operating, reading, remembering, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest, RememberRequest, SearchRequest
from chiezo.surfaces.rest import create_app
from hostile_kiwix import CATALOG, HostileKiwix, Reply
from llm_stub import ScriptedLLM

from helpers import RunningServer, data_file, free_port

RAY = "zim/libkiwix_zimfile_raycharles.zim"
BOOK = "libkiwix_zimfile_raycharles"  # kiwix-serve names a book by its file name
SOURCE = f"kiwix_{BOOK}"
KIWIX_SERVE = shutil.which("kiwix-serve")
needs_kiwix = pytest.mark.skipif(
    KIWIX_SERVE is None,
    reason="kiwix-serve is not installed (Debian's kiwix-tools; `make kiwix` installs it)",
)


class KiwixServe:
    """The real kiwix-serve on a free loopback port, serving ``files``."""

    def __init__(self, *files: Path):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [KIWIX_SERVE, "--address", "127.0.0.1", "--port", str(self.port), *map(str, files)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"kiwix-serve exited: {self.process.stderr.read()!r}")
            try:
                if httpx.get(self.url + "/catalog/v2/entries", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.1)
        self.stop()
        raise RuntimeError("kiwix-serve did not start within 20 s")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(10)


@pytest.fixture(scope="module")
def kiwix():
    if KIWIX_SERVE is None:
        pytest.skip("kiwix-serve is not installed")
    server = KiwixServe(data_file(RAY))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def library(kiwix, tmp_path_factory):
    """The book registered live, and the same ZIM re-indexed by Chiezo beside it."""
    data = tmp_path_factory.mktemp("kiwix") / "data"
    service = Context(Settings(data_dir=data, query_timeout=10))
    report = building.ingest(service, "kiwix", kiwix.url, None)
    building.ingest(service, "zim", data_file(RAY), "zim_ray", embed=False)
    return service, report


@needs_kiwix
def test_registering_a_book_reads_the_catalog_and_indexes_nothing(library, kiwix):
    service, report = library
    assert report.name == SOURCE and report.docs == 0
    (info,) = [s for s in operating.sources(service) if s["name"] == SOURCE]
    assert info["kind"] == "kiwix" and info["live"] and info["docs"] == 129
    assert info["input"]["url"] == kiwix.url and info["input"]["book"] == BOOK
    assert info["about"] == f"Ray Charles · eng · 2020-03-31 · 129 articles · live from {kiwix.url}"
    # what a generation holds of it: the registration, no text (a kiwix-serve index is not
    # copied): its file is a few pages, not the ZIM's 569 KB
    assert info["size_bytes"] < 200_000 and info["chunks"] == 0


@needs_kiwix
def test_a_search_asks_kiwix_serve_and_its_hits_open_its_pages(library, kiwix):
    service, _ = library
    result = searching.search(service, SearchRequest.of(query="piano", source=SOURCE, limit=5))
    assert result.total == 13 and len(result.hits) == 5 and result.mode == "kiwix-serve"
    first = result.hits[0]
    assert first.url == f"{kiwix.url}/{BOOK}/{first.key}" and first.key.startswith("A/")
    assert "piano" in first.snippet.lower() and "<b>" not in first.snippet
    # the next page continues where kiwix-serve's does
    more = searching.search(
        service, SearchRequest.of(query="piano", source=SOURCE, limit=5, offset=5)
    )
    assert not {h.key for h in more.hits} & {h.key for h in result.hits}


@needs_kiwix
def test_a_hit_is_read_from_kiwix_serve_as_a_document_with_passages(library):
    service, _ = library
    hit = searching.search(service, SearchRequest.of(query="Georgia", source=SOURCE)).hits[0]
    doc = reading.doc(
        service,
        DocRequest.of(source=SOURCE, doc_id=hit.doc_id, fields=["title", "body", "chunks", "url"]),
    )
    assert doc["title"] == hit.title and len(doc["body"]) > 500 and doc["chunks"]
    assert doc["url"] == hit.url
    # by title, through kiwix-serve's title suggestions: no search needed first
    ray = reading.doc(service, DocRequest.of(source=SOURCE, title="Ray Charles", fields=["body"]))
    assert ray["body"].startswith("Ray Charles Robinson")
    with pytest.raises(NotFound):
        reading.doc(service, DocRequest.of(source=SOURCE, title="No Such Article Anywhere"))


@needs_kiwix
def test_a_search_of_all_sources_merges_the_live_hits(library):
    service, _ = library
    result = searching.search(service, SearchRequest.of(query="Georgia on My Mind", limit=10))
    by_source = {h.source for h in result.hits}
    assert by_source == {SOURCE, "zim_ray"}
    # both copies of the article are title matches, ahead of the rest
    assert {(h.source, h.title) for h in result.hits[:2]} == {
        (SOURCE, "Georgia on My Mind"),
        ("zim_ray", "Georgia on My Mind"),
    }


@needs_kiwix
def test_conditions_listings_and_embedding_are_refused_with_the_reason(library):
    from chiezo.ops.requests import FilterRequest, RandomRequest, TitlesRequest

    service, _ = library
    with pytest.raises(BadQuery, match="searched live"):
        searching.search(service, SearchRequest.of(query="piano", source=SOURCE, tag=["x"]))
    with pytest.raises(BadQuery, match="nothing here to embed"):
        building.embed(service, SOURCE)
    # what the cache has seen is not the book: no listing pretends it is
    for refused in (
        lambda: reading.titles(service, TitlesRequest.of(source=SOURCE, prefix="Ray")),
        lambda: searching.random(service, RandomRequest.of(source=SOURCE)),
        lambda: searching.filter(service, FilterRequest.of(source=SOURCE, attr=["x>1"])),
    ):
        with pytest.raises(BadQuery, match="answers search and doc"):
            refused()
    # among several sources, it is left out with the reason; the others answer
    remembering.remember(
        service, RememberRequest.of(text="Ray Charles played the piano.", tags=["music"])
    )
    both = searching.filter(service, FilterRequest.of(source=f"{SOURCE},notes", tag=["music"]))
    assert both["total"] == 1 and "answers search and doc" in json.dumps(both["notes"])


@needs_kiwix
def test_an_answer_cites_the_page_on_kiwix_serve(library, kiwix):
    service, _ = library

    def reply(body):
        if "search queries" in body["messages"][0]["content"]:
            return {"content": '{"queries": ["Ray Charles"]}'}
        return {"content": "Ray Charles was an American singer and pianist [1]."}

    with ScriptedLLM(reply) as stub:
        asking = Context(
            Settings(data_dir=service.settings.data_dir, llm_url=stub.url, llm_model="stub-model")
        )
        result = answering.ask(asking, "Who was Ray Charles?", source=SOURCE)
    first = result.references[0]
    assert first["url"] == f"{kiwix.url}/{BOOK}/A/Ray_Charles"
    assert first["cite"] == f"{SOURCE}:A/Ray_Charles" and result.grounded
    # the excerpt the model read came from the article kiwix-serve gave
    prompt = json.dumps(stub.requests[-1]["messages"])
    assert "Ray Charles Robinson" in prompt


@needs_kiwix
def test_the_rest_api_searches_and_reads_the_live_source(library):
    service, _ = library
    with RunningServer(create_app(service.settings)) as server:
        found = httpx.get(f"{server.url}/v1/search", params={"q": "piano", "source": SOURCE})
        assert found.status_code == 200 and found.json()["total"] == 13
        hit = found.json()["hits"][0]
        doc = httpx.get(f"{server.url}/v1/{SOURCE}/doc/{hit['doc_id']}")
        assert doc.status_code == 200 and doc.json()["title"] == hit["title"]
        page = httpx.get(f"{server.url}/doc/{SOURCE}/{hit['doc_id']}")
        assert page.status_code == 200 and hit["title"] in page.text


# -- a server that is down, slow, or answers garbage ---------------------------------------------


def _register_then_stop(tmp_path) -> Context:
    server = KiwixServe(data_file(RAY))
    service = Context(Settings(data_dir=tmp_path / "data", query_timeout=3))
    building.ingest(service, "kiwix", server.url, None)
    building.ingest(service, "zim", data_file(RAY), "zim_ray", embed=False)
    server.stop()
    return service


@needs_kiwix
@pytest.mark.slow
def test_a_server_that_went_down_is_a_502_alone_and_a_note_among_others(tmp_path):
    service = _register_then_stop(tmp_path)
    with pytest.raises(SourceUnavailable, match="cannot be reached") as raised:
        searching.search(service, SearchRequest.of(query="piano", source=SOURCE))
    assert raised.value.status == 502
    both = searching.search(service, SearchRequest.of(query="piano"))
    assert {h.source for h in both.hits} == {"zim_ray"}
    assert any(n.code == "source_unavailable" for n in both.notes)
    with RunningServer(create_app(service.settings)) as server:
        answer = httpx.get(f"{server.url}/v1/search", params={"q": "piano", "source": SOURCE})
        assert answer.status_code == 502 and "cannot be reached" in answer.json()["error"]
        assert httpx.get(f"{server.url}/v1/search", params={"q": "piano"}).status_code == 200


def Scripted(reply):  # noqa: N802 - a server, as the class it returns
    """A server on loopback that answers every GET with ``reply(path) -> (status, type,
    body, delay[, headers])``: kiwix-serve as it should not be (tests/hostile_kiwix.py)."""

    def answer(path: str) -> Reply:
        status, kind, body, delay, *headers = reply(path)
        return Reply(status, kind, body, delay, headers=headers[0] if headers else {})

    return HostileKiwix(answer)


BOMB = (
    b'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa">'
    b'<!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><rss><channel>&b;</channel></rss>'
)


def _server_answering(search: tuple, tmp_path):
    """A registered source whose server answers its catalog and then ``search`` to searches."""

    def reply(path):
        if path.startswith("/catalog"):
            return 200, "application/atom+xml", CATALOG, 0
        if path.startswith("/suggest"):  # no entry of that title
            return 200, "application/json", b"[]", 0
        return search

    server = Scripted(reply)
    service = Context(Settings(data_dir=tmp_path / "data", query_timeout=1))
    building.ingest(service, "kiwix", server.url, None)
    return server, service


@pytest.mark.slow
@pytest.mark.parametrize(
    "search, said",
    [
        ((200, "text/html", b"<html>not a feed</html", 0), "no XML"),
        ((200, "application/rss+xml", BOMB, 0), "DTD"),
        ((200, "application/rss+xml", b"<rss><nothing/></rss>", 0), "no results feed"),
        ((500, "text/plain", b"boom", 0), "HTTP 500"),
        ((200, "application/rss+xml", b"<rss/>", 3), "did not answer within 1 s"),
    ],
    ids=["html", "entity-bomb", "no-channel", "error", "slow"],
)
def test_a_server_answering_garbage_or_too_slowly_is_a_clear_502(search, said, tmp_path):
    server, service = _server_answering(search, tmp_path)
    with server:
        started = time.monotonic()
        with pytest.raises(SourceUnavailable, match=said):
            searching.search(service, SearchRequest.of(query="offer", source="kiwix_shop"))
        assert time.monotonic() - started < 2.5  # the 1 s budget, not the server's 3 s
        with RunningServer(create_app(service.settings)) as api:
            answer = httpx.get(f"{api.url}/v1/search", params={"q": "x", "source": "kiwix_shop"})
            assert answer.status_code == 502


@pytest.mark.slow
@pytest.mark.parametrize(
    "to, said",
    [
        (lambda own: "http://169.254.169.254/latest/meta-data/", "another server"),
        (lambda own: own.replace("127.0.0.1", "localhost") + "/x", "another server"),
        (lambda own: own + "/search?again=1", "redirected more than 5 times"),
    ],
    ids=["metadata-address", "other-host-name", "loop"],
)
def test_a_redirect_is_followed_only_within_the_server(to, said, tmp_path):
    where = []

    def reply(path):
        if path.startswith("/catalog"):
            return 200, "application/atom+xml", CATALOG, 0
        return 302, "text/plain", b"", 0, {"Location": where[0]}

    with Scripted(reply) as server:
        where.append(to(server.url))
        service = Context(Settings(data_dir=tmp_path / "data", query_timeout=2))
        building.ingest(service, "kiwix", server.url, None)
        with pytest.raises(SourceUnavailable, match=said):
            searching.search(service, SearchRequest.of(query="offer", source="kiwix_shop"))


@pytest.mark.slow
def test_a_hostile_snippet_and_title_reach_a_page_as_text(tmp_path):
    feed = (
        b'<rss xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"><channel>'
        b"<opensearch:totalResults>1</opensearch:totalResults><item>"
        b"<title>&lt;img src=x onerror=alert(1)&gt;Offer</title><link>/shop/A/Offer</link>"
        b"<description>&lt;script&gt;alert(1)&lt;/script&gt;half <b>price</b></description>"
        b"</item></channel></rss>"
    )
    server, service = _server_answering((200, "application/rss+xml", feed, 0), tmp_path)
    with server:
        hit = searching.search(service, SearchRequest.of(query="price", source="kiwix_shop")).hits[
            0
        ]
        assert "<" not in hit.title + hit.snippet and "half price" in hit.snippet
        with RunningServer(create_app(service.settings)) as api:
            page = httpx.get(f"{api.url}/", params={"q": "price", "source": "kiwix_shop"})
    assert page.status_code == 200 and "half <mark>price</mark>" in page.text
    assert ">Offer</a>" in page.text and "<script>alert" not in page.text
    assert "onerror" not in page.text


def test_an_address_that_is_not_a_kiwix_serve_is_refused_before_anything_is_built(tmp_path):
    service = Context(Settings(data_dir=tmp_path / "data", query_timeout=2))
    with pytest.raises(InputError, match="not a kiwix-serve address"):
        building.ingest(service, "kiwix", "ftp://127.0.0.1/x", None)
    with socket.socket() as closed:  # a port nothing listens on
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    with pytest.raises(SourceUnavailable, match="cannot be reached"):
        building.ingest(service, "kiwix", f"http://127.0.0.1:{port}", None)
    assert operating.sources(service) == []


@needs_kiwix
def test_a_book_the_server_does_not_serve_names_those_it_does(kiwix, tmp_path):
    service = Context(Settings(data_dir=tmp_path / "data"))
    with pytest.raises(InputError, match="no book 'nope'") as raised:
        building.ingest(service, "kiwix", kiwix.url, None, options=_options(book="nope"))
    assert raised.value.extras["books"] == [BOOK]
    # by its Name metadata as well as by its file name
    report = building.ingest(
        service, "kiwix", kiwix.url, "ray", options=_options(book="wikipedia_en_ray_charles")
    )
    assert report.name == "ray"


def _options(**given):
    from chiezo.ingest.kiwix import KiwixOptions

    return KiwixOptions(**given)


@needs_kiwix
def test_the_command_line_registers_lists_rebuilds_and_removes_a_book(kiwix, tmp_path):
    from click.testing import CliRunner

    from chiezo.surfaces.cli.main import cli

    def run(*args: str):
        return CliRunner().invoke(cli, ["--data", str(tmp_path / "data"), *args])

    # the address arrives as a path (every kind's input is one): http:// must survive
    registered = run("ingest", "kiwix", kiwix.url, "--book", BOOK)
    assert registered.exit_code == 0, registered.output
    listed = run("sources")
    assert "searched live by its server" in listed.output and "embed" not in listed.output
    rebuilt = run("rebuild", SOURCE)
    assert rebuilt.exit_code == 0, rebuilt.output  # the catalog read again, no file asked for
    found = run("search", "Georgia on My Mind", "-s", SOURCE, "--json")
    assert json.loads(found.output)["hits"][0]["key"] == "A/Georgia_on_My_Mind"
    assert run("sources", "rm", SOURCE, "--yes").exit_code == 0
    assert SOURCE not in run("sources").output


@needs_kiwix
def test_an_mcp_client_is_told_the_source_is_live_and_searches_and_reads_it(library):
    import anyio
    from mcp import Client

    service, _ = library

    async def go(url):
        async with Client(f"{url}/mcp") as client:
            listed = await client.call_tool("sources", {})
            found = await client.call_tool("search", {"query": "Georgia", "source": SOURCE})
            hit = found.structured_content["hits"][0]
            doc = await client.call_tool(
                "doc", {"source": SOURCE, "doc_id": hit["doc_id"], "max_chars": 400}
            )
            refused = await client.call_tool("filter", {"source": SOURCE, "tag": "x"})
            return client.instructions, listed, hit, doc, refused

    with RunningServer(create_app(service.settings)) as server:
        instructions, listed, hit, doc, refused = anyio.run(go, server.url)
    (live,) = [s for s in listed.structured_content["sources"] if s["name"] == SOURCE]
    assert live["live"] is True and "kiwix-serve" in instructions
    assert doc.structured_content["title"] == hit["title"]
    assert len(json.dumps(doc.structured_content)) < 1200  # max_chars holds for a live source
    assert refused.is_error


@needs_kiwix
def test_an_imported_live_source_asks_no_server_the_archive_names(library, tmp_path):
    from chiezo.core.errors import Conflict
    from chiezo.ops.transfer import export_source, import_source

    service, _ = library
    archive = export_source(service.settings, SOURCE, tmp_path / "book.tar.zst")["path"]
    here = Settings(data_dir=tmp_path / "data", query_timeout=5)
    import_source(here, Path(archive))
    building.ingest(Context(here), "zim", data_file(RAY), "zim_ray", embed=False)
    # an address from an archive could name any service this machine reaches: never asked
    imported = Context(here)
    with pytest.raises(Conflict, match="imported from an archive") as raised:
        searching.search(imported, SearchRequest.of(query="piano", source=SOURCE))
    assert "chiezo ingest kiwix URL" in raised.value.to_dict("cli")["hint"]
    both = searching.search(imported, SearchRequest.of(query="piano"))
    assert {h.source for h in both.hits} == {"zim_ray"}
    assert "imported from an archive" in " ".join(both.notes)
