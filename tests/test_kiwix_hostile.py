"""A live kiwix-serve source against a server that is hostile, slow or behind a password
(issue #42 items 1-6), through the real service, the real HTTP server, MCP and the CLI. The
server is tests/hostile_kiwix.py on loopback; tests/test_kiwix.py has the real kiwix-serve."""

from __future__ import annotations

import io
import json
import os
import stat
import sys
import tarfile
import threading
import time
from dataclasses import replace
from urllib.parse import parse_qs, urlsplit

import anyio
import httpx
import pytest
import zstandard
from click.testing import CliRunner
from mcp import Client, StdioServerParameters

from chiezo.core.config import Settings
from chiezo.core.errors import SourceUnavailable
from chiezo.ingest import kiwix
from chiezo.ops import building, maintenance, operating, reading, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest, SearchRequest
from chiezo.ops.transfer import export_source
from chiezo.store import generations, live_cache
from chiezo.store.library import LiveSource
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app
from hostile_kiwix import SOURCE, HostileKiwix, Reply, feed, good
from llm_stub import ScriptedLLM

from helpers import RunningServer, build_docs, write_files

USER, PASSWORD = "kuser", "KSECRETPW"
FORWARDED = {"x-forwarded-for": "203.0.113.9"}


def _with_credentials(url: str) -> str:
    return url.replace("http://", f"http://{USER}:{PASSWORD}@")


def _registered(server: HostileKiwix, tmp_path, *, timeout: float = 2.0, **settings) -> Context:
    service = Context(Settings(data_dir=tmp_path / "data", query_timeout=timeout, **settings))
    building.ingest(service, "kiwix", server.url, None)
    return service


def _with_docs(service: Context, tmp_path) -> Context:
    """Beside the live source, a built one that answers the same words."""
    folder = write_files(tmp_path / "docs", {"offer.md": "# Offer\n\nAn offer of pianos.\n"})
    build_docs(service, folder, "local")
    return service


def _shows_secret(text: str) -> bool:
    return PASSWORD in text or f"{USER}:" in text


# -- 1. credentials are kept apart from the address, and never shown --------------------------


def _answer(body):
    if "search queries" in body["messages"][0]["content"]:
        return {"content": '{"queries": ["offer"]}'}
    return {"content": "The offer is good [1]."}


ROUTES = [
    "/v1/sources",
    "/admin",
    f"/v1/jobs/plan?source={SOURCE}",
    f"/v1/search?q=offer&source={SOURCE}",
    "/v1/search?q=offer",
    f"/v1/{SOURCE}/doc?title=Offer",
    f"/v1/{SOURCE}/search?q=offer",
    "/?q=offer",
    "/v1/ask?q=What+is+the+offer%3F",
    f"/v1/ask?q=What+is+the+offer%3F&source={SOURCE}",
    f"/v1/ask?q=What+is+the+offer%3F&source={SOURCE}&stream=1",
    "/v1/llm",
]


@pytest.mark.slow
def test_a_servers_user_and_password_are_used_and_never_shown(tmp_path):
    with (
        HostileKiwix(good, user=USER, password=PASSWORD) as server,
        ScriptedLLM(_answer) as llm,
    ):
        settings = Settings(
            data_dir=tmp_path / "data", query_timeout=5, llm_url=llm.url, llm_model="stub-model"
        )
        service = Context(settings)
        report = building.ingest(service, "kiwix", _with_credentials(server.url), None)
        assert report.name == SOURCE
        # used: every request carried them, and none was refused
        assert server.asked and all(said and said.startswith("Basic ") for _, said in server.asked)
        # kept apart: in a file of the user's own, not in the generation
        folder = settings.corpus_dir / SOURCE
        kept = folder / "credentials"
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600 and PASSWORD in kept.read_text()
        current = generations.current_path(folder)
        assert PASSWORD.encode() not in current.read_bytes()
        _with_docs(service, tmp_path)
        pages = {}
        with RunningServer(create_app(settings)) as api:
            hit = httpx.get(f"{api.url}/v1/search", params={"q": "offer", "source": SOURCE}).json()
            doc_page = f"/doc/{SOURCE}/{hit['hits'][0]['doc_id']}"
            for route in [*ROUTES, doc_page]:
                for who, headers in (("local", {}), ("forwarded", FORWARDED)):
                    answer = httpx.get(api.url + route, headers=headers, timeout=30)
                    assert answer.status_code == 200, (route, answer.text[:300])
                    pages[route, who] = answer.text
        listed = CliRunner().invoke(cli, ["--data", str(settings.data_dir), "logs", "--json"])
        assert listed.exit_code == 0 and SOURCE in listed.output, listed.output
        pages["chiezo logs", "cli"] = listed.output
        sources = CliRunner().invoke(cli, ["--data", str(settings.data_dir), "sources", "--json"])
        pages["chiezo sources", "cli"] = sources.output
        archive = export_source(settings, SOURCE, tmp_path / "book.tar.zst")["path"]
        pages["export", "archive"] = _unpacked(archive)
        pages["mcp", "stdio"] = _over_mcp(settings)
    assert pages["/v1/sources", "local"].count(server.url) >= 1  # the address, without them
    for (route, who), text in pages.items():
        assert not _shows_secret(text), f"{route} ({who}) shows the credentials"


def _unpacked(archive: str) -> str:
    with open(archive, "rb") as raw:
        data = zstandard.ZstdDecompressor().stream_reader(raw).read()
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        return "".join(
            tar.extractfile(m).read().decode("latin-1") for m in tar.getmembers() if m.isfile()
        )


def _over_mcp(settings: Settings) -> str:
    """What a model reads of the live source over MCP's stdio transport (which no HTTP
    middleware stands in front of)."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "chiezo", "--data", str(settings.data_dir), "mcp"]
    )

    async def go():
        async with Client(params) as client:
            listed = await client.call_tool("sources", {})
            found = await client.call_tool("search", {"query": "offer", "source": SOURCE})
            hit = found.structured_content["hits"][0]
            read = await client.call_tool("doc", {"source": SOURCE, "doc_id": hit["doc_id"]})
            return [listed, found, read]

    results = anyio.run(go)
    assert all(not r.is_error for r in results)
    return json.dumps([r.structured_content for r in results])


@pytest.mark.slow
def test_a_source_registered_with_the_password_in_its_address_keeps_working_without_showing_it(
    tmp_path,
):
    """A source registered before addresses were taken apart recorded the password in its
    address: it is moved to the source's credentials file, used, and shown nowhere."""
    with HostileKiwix(good, user=USER, password=PASSWORD) as server:
        service = _registered_as_before(server, tmp_path)
        found = searching.search(service, SearchRequest.of(query="offer", source=SOURCE))
        assert found.hits and found.hits[0].url.startswith(server.url)
        info = json.dumps(operating.sources(service))
        assert not _shows_secret(info) and server.url in info
        archive = export_source(service.settings, SOURCE, tmp_path / "old.tar.zst")["path"]
        assert not _shows_secret(_unpacked(archive))
        assert (service.settings.corpus_dir / SOURCE / "credentials").exists()


def _registered_as_before(server: HostileKiwix, tmp_path) -> Context:
    import sqlite3

    settings = Settings(data_dir=tmp_path / "data", query_timeout=3)
    building.ingest(Context(settings), "kiwix", _with_credentials(server.url), None)
    folder = settings.corpus_dir / SOURCE
    (folder / "credentials").unlink()
    current = generations.current_path(folder)
    with sqlite3.connect(current) as conn:
        (given,) = conn.execute("SELECT value FROM meta WHERE key = 'input'").fetchone()
        recorded = {**json.loads(given), "url": _with_credentials(server.url)}
        conn.execute("UPDATE meta SET value = ? WHERE key = 'input'", (json.dumps(recorded),))
    for cache in folder.glob("*.live"):
        cache.unlink()
    return Context(settings)


@pytest.mark.slow
def test_a_password_the_server_refuses_is_a_502_saying_so_without_showing_it(tmp_path):
    with HostileKiwix(good, user=USER, password=PASSWORD) as server:
        with pytest.raises(Exception, match="asks for a user and password") as raised:
            building.ingest(
                Context(Settings(data_dir=tmp_path / "data")), "kiwix", server.url, None
            )
        assert "USER:PASSWORD@" in str(raised.value.to_dict("cli").get("hint"))
        wrong = server.url.replace("http://", f"http://{USER}:wrong-password-here@")
        with pytest.raises(SourceUnavailable, match="refused the ones sent") as raised:
            building.ingest(Context(Settings(data_dir=tmp_path / "data")), "kiwix", wrong, None)
        assert "wrong-password-here" not in json.dumps(raised.value.to_dict("cli"))


@pytest.mark.slow
def test_an_llm_endpoints_credentials_go_into_requests_and_nowhere_else():
    from chiezo.answer.llm import Endpoint, LLMClient

    with ScriptedLLM(_answer, models=("m",)) as llm:
        given = llm.url.replace("http://", "http://llmuser:llm-password-1@") + "?api_key=K3Y-VALUE"
        endpoint = Endpoint(given, "m")
        checked = LLMClient([endpoint]).check(endpoint)
    assert checked["ok"], checked
    assert "llm-password-1" not in repr(endpoint) + json.dumps(checked)
    assert checked["url"].endswith("/v1?api_key=***") and "K3Y-VALUE" not in checked["url"]
    path, said = llm.sent[-1]
    assert "api_key=K3Y-VALUE" in path and said and said.startswith("Basic ")


# -- 2. one deadline for the whole exchange; a slow server blocks nothing else ----------------


def _trickling(path: str) -> Reply:
    if path.startswith("/catalog"):
        return good(path)
    return Reply(body=feed([("A/Offer", "Offer", "x")]), trickle=0.5)


@pytest.mark.slow
def test_a_server_trickling_its_headers_is_cut_off_at_the_deadline(tmp_path):
    with HostileKiwix(_trickling) as server:
        service = _with_docs(_registered(server, tmp_path, timeout=1.5), tmp_path)
        started = time.monotonic()
        with pytest.raises(SourceUnavailable, match="did not answer within 1.5 s"):
            searching.search(service, SearchRequest.of(query="offer", source=SOURCE))
        assert time.monotonic() - started < 2.5  # was ~200 s: one header line every 0.5 s
        started = time.monotonic()
        both = searching.search(service, SearchRequest.of(query="offer"))
        assert time.monotonic() - started < 2.5  # the built source answered meanwhile
        assert [h.source for h in both.hits] == ["local"]
        assert any(n.code in ("source_timeout", "source_unavailable") for n in both.notes)


@pytest.mark.slow
def test_slow_live_searches_leave_the_server_free_for_everything_else(tmp_path):
    with HostileKiwix(_trickling) as server:
        service = _with_docs(_registered(server, tmp_path, timeout=2, serve_threads=4), tmp_path)
        with RunningServer(create_app(service.settings)) as api:
            answers: list[int] = []

            def live():
                answer = httpx.get(
                    f"{api.url}/v1/search", params={"q": "offer", "source": SOURCE}, timeout=30
                )
                answers.append(answer.status_code)

            crowd = [threading.Thread(target=live) for _ in range(6)]
            for thread in crowd:
                thread.start()
            time.sleep(0.5)  # the six are waiting on the trickling server, or refused
            started = time.monotonic()
            health = httpx.get(f"{api.url}/healthz", timeout=10)
            other = httpx.get(f"{api.url}/v1/search", params={"q": "offer", "source": "local"})
            waited = time.monotonic() - started
            for thread in crowd:
                thread.join(30)
    assert health.status_code == 200 and other.status_code == 200
    assert waited < 1.0, f"what asks no live server waited {waited:.1f} s"
    assert sorted(answers) == [502] * 6  # each ends by its deadline, or is refused at once


# -- 3, 4. garbled answers are a 502 for that source alone; the title look-up is best effort --


def _answering(search: Reply, suggest: Reply | None = None):
    def reply(path: str) -> Reply:
        if path.startswith("/search"):
            return search
        if path.startswith("/suggest") and suggest is not None:
            return suggest
        return good(path)

    return reply


GARBLED_TOTALS = {
    "letters": "abc",
    "5000-digits": "9" * 5000,
    "negative": "-5",
    "fraction": "1.5",
}


@pytest.mark.slow
def test_a_garbled_count_is_a_502_alone_and_a_note_among_others(tmp_path):
    answering: list[Reply] = []
    with HostileKiwix(_answering_with(answering)) as server:
        service = _with_docs(_registered(server, tmp_path), tmp_path)
        with RunningServer(create_app(service.settings)) as api:
            for total in GARBLED_TOTALS.values():
                answering[:] = [Reply(body=feed([("A/Offer", "Offer", "x")], total=total))]
                with pytest.raises(SourceUnavailable, match="a count that is none"):
                    searching.search(service, SearchRequest.of(query="offer", source=SOURCE))
                asked = {"q": "offer", "source": SOURCE}
                alone = httpx.get(f"{api.url}/v1/search", params=asked)
                every = httpx.get(f"{api.url}/v1/search", params={"q": "offer"})
                page = httpx.get(f"{api.url}/", params={"q": "offer"})
                assert alone.status_code == 502 and "count" in alone.json()["error"], total
                assert every.status_code == 200, total
                assert [h["source"] for h in every.json()["hits"]] == ["local"], total
                assert page.status_code == 200, total


def _answering_with(search: list[Reply]):
    """A server whose searches are answered with ``search[0]``, changed as the test goes."""

    def reply(path: str) -> Reply:
        return search[0] if path.startswith("/search") else good(path)

    return reply


NOT_JSON = {
    "nested-without-end": Reply(type="application/json", body=b"[" * 1_000_000),
    "tab-unescaped": Reply(type="application/json", body=b'[{"value": "a\tb", "path": "A/x"}]'),
    "paths-not-text": Reply(type="application/json", body=b'[{"kind": "path", "path": 5}]'),
    "too-large": Reply(type="application/json", body=b"[" + b'"x",' * 200_000 + b'"x"]'),
    "slow": Reply(type="application/json", body=b"[]", delay=5),
}


@pytest.mark.slow
@pytest.mark.parametrize("suggest", NOT_JSON.values(), ids=NOT_JSON.keys())
def test_a_failing_title_look_up_leaves_the_search_its_hits(suggest, tmp_path):
    search = Reply(body=feed([("A/Offer", "Offer", "x"), ("A/Other", "Other", "y")]))
    with HostileKiwix(_answering(search, suggest)) as server:
        service = _registered(server, tmp_path, timeout=2)
        found = searching.search(service, SearchRequest.of(query="offer", source=SOURCE))
        assert [h.key for h in found.hits] == ["A/Offer", "A/Other"]  # as the server ranked them
        if suggest.delay == 0 and b"path" not in suggest.body:  # a look-up by title needs it
            with pytest.raises(SourceUnavailable, match="no JSON|more than"):
                reading.doc(service, DocRequest.of(source=SOURCE, title="Nothing by this title"))


# -- 5. reading one article is bounded in time and memory -------------------------------------


def _rss_mib() -> float:
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


def _heavy(path: str) -> Reply:
    """An article of 16 MiB: 800,000 headings, each a word."""
    if path.startswith("/raw/") and "Heavy" in path:
        body = b"<html><body>" + b"<h2>h</h2>" * 800_000 + b"</body></html>"
        return Reply(type="text/html", body=body[: kiwix.MAX_ARTICLE_BYTES - 1])
    if path.startswith("/search"):
        return Reply(body=feed([("A/Heavy", "Heavy", "x"), ("A/Offer", "Offer", "y")]))
    return good(path)


@pytest.mark.slow
def test_an_article_built_to_be_expensive_costs_its_own_process_not_the_server(tmp_path):
    with HostileKiwix(_heavy) as server:
        service = _registered(server, tmp_path, timeout=2.5)
        hits = searching.search(service, SearchRequest.of(query="offer", source=SOURCE)).hits
        heavy, offer = (next(h for h in hits if h.key == key) for key in ("A/Heavy", "A/Offer"))
        reading.doc(
            service, DocRequest.of(source=SOURCE, doc_id=offer.doc_id)
        )  # the converter started
        before = _rss_mib()
        started = time.monotonic()
        with pytest.raises(SourceUnavailable, match="could not be read"):
            reading.doc(service, DocRequest.of(source=SOURCE, doc_id=heavy.doc_id))
        took = time.monotonic() - started
        grown = _rss_mib() - before
        read = reading.doc(service, DocRequest.of(source=SOURCE, doc_id=offer.doc_id))
    assert took < 4.5, f"the article held its reader {took:.1f} s (deadline 2.5 s)"
    assert grown < 150, f"this process grew {grown:.0f} MiB reading it (was 1,290 MB)"
    assert "The offer is good." in read["body"]  # a new converting process reads the next


# -- 6. what a feed sends beyond what was asked is dropped; the cache is bounded --------------


def _flood(items: int):
    """A server answering every search with ``items`` hits, whatever was asked: their paths
    from the words and the page asked for, so that each page brings new ones."""

    def reply(path: str) -> Reply:
        if not path.startswith("/search"):
            return good(path)
        asked = parse_qs(urlsplit(path).query)
        named = asked["pattern"][0].replace(" ", "_")
        start = int(asked["start"][0])
        found = [
            (f"A/{named}_{start + i}", f"{named} {start + i}", "x" * 200) for i in range(items)
        ]
        return Reply(body=feed(found))

    return reply


def _cached_hits(service: Context) -> int:
    source = service.library.get(SOURCE)
    return source.conn.execute("SELECT count(*) FROM docs").fetchone()[0]


@pytest.mark.slow
def test_a_feed_of_thousands_answers_the_limit_and_caches_no_more(tmp_path):
    with HostileKiwix(_flood(12_000)) as server:  # 3.3 MB: under the 4 MiB an answer may be
        service = _registered(server, tmp_path, timeout=10)
        found = searching.search(service, SearchRequest.of(query="item", source=SOURCE, limit=1))
        assert len(found.hits) == 1 and found.total == 12_000
        assert _cached_hits(service) == 1  # was 43,449 of 43,449


@pytest.mark.slow
def test_the_cache_lets_go_of_the_oldest_beyond_its_bounds_and_gc_reclaims_it(
    tmp_path, monkeypatch
):
    monkeypatch.setattr(LiveSource, "bounds", live_cache.Bounds(read=5, hits=50, bytes=2**30))
    with HostileKiwix(_flood(40)) as server:
        service = _registered(server, tmp_path, timeout=10)
        for page in range(4):  # 160 hits seen
            searching.search(
                service, SearchRequest.of(query=f"item {page}", source=SOURCE, limit=40)
            )
        assert _cached_hits(service) <= 50
    settings = service.settings
    (cache,) = settings.corpus_dir.glob(f"{SOURCE}/*.live")
    plan = maintenance.survey(settings, caches=True)
    (item,) = [i for i in plan.caches if i.kind == "live"]
    assert item.action == "delete" and item.reclaim > 0
    maintenance.reclaim(settings, caches=True)
    assert _cached_hits(Context(settings)) == 0


def _on_disk(cache) -> int:
    wal = cache.with_name(cache.name + "-wal")
    return cache.stat().st_size + (wal.stat().st_size if wal.exists() else 0)


@pytest.mark.slow
def test_a_cache_over_its_bytes_is_compacted_by_gc(tmp_path, monkeypatch):
    with HostileKiwix(_flood(50)) as server:
        service = _registered(server, tmp_path, timeout=10)
        for page in range(8):  # 400 hits
            found = searching.search(
                service, SearchRequest.of(query=f"item {page}", source=SOURCE, limit=50)
            )
            assert len(found.hits) == 50
    settings = service.settings
    (cache,) = settings.corpus_dir.glob(f"{SOURCE}/*.live")
    before = _on_disk(cache)
    conn = live_cache.db.open_readonly(cache, immutable=False)
    try:
        used = live_cache.used_bytes(conn)
    finally:
        conn.close()
    bound = used - 40 * 1024  # some of the 400 hits must go (the schema alone takes ~160 KB)
    monkeypatch.setattr(LiveSource, "bounds", replace(LiveSource.bounds, bytes=bound))
    monkeypatch.setattr(maintenance, "COMPACT_MIN_BYTES", 1)  # 40 KB is under the MiB it needs
    (item,) = [i for i in maintenance.survey(settings).caches if i.kind == "live"]
    assert item.action == "compact"
    done = maintenance.reclaim(settings)
    assert done.freed > 0 and _on_disk(cache) < before
    conn = live_cache.db.open_readonly(cache, immutable=False)
    try:
        assert live_cache.used_bytes(conn) <= bound
        assert 0 < conn.execute("SELECT count(*) FROM docs").fetchone()[0] < 400  # the newest
        assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
    finally:
        conn.close()
    assert os.path.exists(cache)
