"""The optional web search (answer/websearch.py) against scripted engines on loopback: a
SearXNG and a Brave API as they should be, and as they should not (slow, huge, deep, garbled,
redirecting elsewhere); the setting's forms; the key and password never shown; calls spaced
across threads and processes."""

from __future__ import annotations

import base64
import fcntl
import json
import logging
import subprocess
import sys
import threading
import time
from urllib.parse import urlsplit

import pytest

from chiezo.answer import websearch
from chiezo.answer.websearch import WebResult, WebSearch, WebSearchError
from chiezo.core.errors import BadQuery, ConfigError
from web_engines import Engine, Reply, answer

KEY = "BSAkeyTHATmustNEVERshow42"
USER, PASSWORD = "searchuser", "pwTHATmustNEVERshow77"


def searxng(engine: Engine, **options) -> WebSearch:
    found = WebSearch.parse(f"searxng:{engine.url}", None, **{"interval": 0.0, **options})
    assert found is not None
    return found


def brave(engine: Engine, **options) -> WebSearch:
    setting = f"brave:{engine.url}/res/v1/web/search"
    found = WebSearch.parse(setting, KEY, **{"interval": 0.0, **options})
    assert found is not None
    return found


SEARXNG_ANSWER = {
    "query": "kyoto",
    "results": [
        {
            "title": "Kyoto - <b>Wikipedia</b>",
            "url": "https://en.wikipedia.org/wiki/Kyoto",
            "content": "<strong>Kyoto</strong> is a city &amp; capital of   Kyoto Prefecture",
            "engine": "wikipedia",
        },
        {"title": "Again", "url": "https://en.wikipedia.org/wiki/Kyoto#History", "content": "dup"},
        {"title": "Script", "url": "javascript:alert(1)", "content": "x"},
        {"title": "File", "url": "file:///etc/passwd", "content": "x"},
        {"title": 42, "url": "https://example.org/number-title", "content": "x"},
        {"title": "No address", "url": None},
        "not an object",
        {"title": "Visit Kyoto", "url": "https://kyoto.travel/en/", "content": 7},
        {"title": "Third", "url": "http://example.com/3", "content": "three"},
    ],
}

BRAVE_ANSWER = {
    "type": "search",
    "query": {"original": "kyoto"},
    "web": {
        "type": "search",
        "results": [
            {
                "title": "Kyoto City Official Travel Guide",
                "url": "https://kyoto.travel/en/",
                "description": "Things to do in <strong>Kyoto</strong>: temples &#38; shrines.",
                "profile": {"name": "kyoto.travel"},
            },
            {"title": "Kyoto", "url": "https://en.wikipedia.org/wiki/Kyoto", "description": ""},
        ],
    },
}


# -- answers as they should be ----------------------------------------------------------------


def test_searxng_results(web_engine, tmp_path):
    engine = web_engine(answer(SEARXNG_ANSWER))
    results = searxng(engine).search("kyoto  temples", limit=10, state_dir=tmp_path)
    assert results == [
        WebResult(
            "Kyoto - Wikipedia",
            "https://en.wikipedia.org/wiki/Kyoto",
            "Kyoto is a city & capital of Kyoto Prefecture",
        ),
        WebResult("Visit Kyoto", "https://kyoto.travel/en/", ""),
        WebResult("Third", "http://example.com/3", "three"),
    ]
    assert results[0].to_dict() == {
        "title": "Kyoto - Wikipedia",
        "url": "https://en.wikipedia.org/wiki/Kyoto",
        "snippet": "Kyoto is a city & capital of Kyoto Prefecture",
    }
    (asked,) = engine.asked
    assert urlsplit(asked.path).path == "/search"
    assert asked.query == {"q": ["kyoto temples"], "format": ["json"]}
    assert asked.headers["User-Agent"] == "chiezo"
    assert "X-Subscription-Token" not in asked.headers


def test_searxng_limit(web_engine, tmp_path):
    engine = web_engine(answer(SEARXNG_ANSWER))
    results = searxng(engine).search("kyoto", limit=2, state_dir=tmp_path)
    assert [r.title for r in results] == ["Kyoto - Wikipedia", "Visit Kyoto"]
    assert len(searxng(engine).search("kyoto", limit=0, state_dir=tmp_path)) == 1


def test_brave_results_with_its_key(web_engine, tmp_path):
    engine = web_engine(answer(BRAVE_ANSWER))
    results = brave(engine).search("kyoto", limit=3, state_dir=tmp_path)
    assert results == [
        WebResult(
            "Kyoto City Official Travel Guide",
            "https://kyoto.travel/en/",
            "Things to do in Kyoto: temples & shrines.",
        ),
        WebResult("Kyoto", "https://en.wikipedia.org/wiki/Kyoto", ""),
    ]
    (asked,) = engine.asked
    assert urlsplit(asked.path).path == "/res/v1/web/search"
    assert asked.query == {"q": ["kyoto"], "count": ["3"]}
    assert asked.headers["X-Subscription-Token"] == KEY
    assert asked.headers["Accept"] == "application/json"
    assert asked.headers["User-Agent"] == "chiezo"


def test_brave_finding_nothing(web_engine, tmp_path):
    engine = web_engine(answer({"type": "search", "query": {"original": "zzqx"}}))
    assert brave(engine).search("zzqx", state_dir=tmp_path) == []


def test_markup_stripped_and_clipped(web_engine, tmp_path):
    long_title = "<em>T</em>" * 300
    engine = web_engine(
        answer(
            {
                "results": [
                    {
                        "title": long_title,
                        "url": "https://a.example/",
                        "content": "<script>x</script>&lt;b&gt; said\u202e\x07 " + "word " * 200,
                    }
                ]
            }
        )
    )
    (result,) = searxng(engine).search("t", state_dir=tmp_path)
    assert result.title == "T" * 199 + "…"
    assert len(result.snippet) == 500 and result.snippet.endswith("…")
    assert result.snippet.startswith("x<b> said word word")
    assert "\u202e" not in result.snippet and "\x07" not in result.snippet


def test_an_empty_query_is_refused(web_engine, tmp_path):
    engine = web_engine(answer(SEARXNG_ANSWER))
    with pytest.raises(BadQuery):
        searxng(engine).search("  \n ", state_dir=tmp_path)
    assert engine.asked == []


# -- answers as they should not be -------------------------------------------------------------


def test_garbage_is_no_json(web_engine, tmp_path):
    engine = web_engine(lambda path: Reply(200, b"<html>welcome</html>"))
    with pytest.raises(WebSearchError, match="no JSON"):
        searxng(engine).search("kyoto", state_dir=tmp_path)
    engine.reply = lambda path: Reply(200, b"\xff\xfe[1]")
    with pytest.raises(WebSearchError, match="no JSON"):
        searxng(engine).search("kyoto", state_dir=tmp_path)


@pytest.mark.parametrize(
    "data", [[], {"results": {"a": 1}}, {"results": None}, {"web": []}, {"web": {"results": 3}}]
)
def test_another_shape(web_engine, tmp_path, data):
    engine = web_engine(answer(data))
    for make in (searxng, brave):
        with pytest.raises(WebSearchError, match="no list of results"):
            make(engine).search("kyoto", state_dir=tmp_path)


def test_a_trickling_engine_ends_by_the_deadline(web_engine, tmp_path):
    engine = web_engine(lambda path: Reply(200, b'{"results": []}' + b" " * 1000, trickle=0.1))
    started = time.monotonic()
    with pytest.raises(WebSearchError, match=r"did not answer within 1\.5 s") as caught:
        searxng(engine).search("kyoto", deadline=1.5, state_dir=tmp_path)
    assert time.monotonic() - started < 1.5 + 1
    assert caught.value.extras["timed_out"] is True


def test_a_hundred_thousand_results(web_engine, tmp_path):
    """Under the byte cap: only the first 2,000 are looked at, quickly."""
    items = [b'{"url":0}'] * 100_000
    items[5] = b'{"title":"early","url":"https://a.example/5"}'
    items[50_000] = b'{"title":"late","url":"https://a.example/50000"}'
    body = b'{"results":[' + b",".join(items) + b"]}"
    assert len(body) < websearch.MAX_BYTES
    engine = web_engine(lambda path: Reply(200, body))
    started = time.monotonic()
    results = searxng(engine).search("kyoto", limit=20, state_dir=tmp_path)
    assert [r.title for r in results] == ["early"]
    assert time.monotonic() - started < 1.5


def test_an_answer_past_the_byte_cap(web_engine, tmp_path):
    item = b'{"title":"t","url":"https://a.example/","content":"snippet"}'
    body = b'{"results":[' + b",".join([item] * 100_000) + b"]}"
    assert len(body) > websearch.MAX_BYTES
    engine = web_engine(lambda path: Reply(200, body))
    started = time.monotonic()
    with pytest.raises(WebSearchError, match="more than 2,097,152 bytes"):
        searxng(engine).search("kyoto", state_dir=tmp_path)
    assert time.monotonic() - started < 1.5


@pytest.mark.parametrize("depth", [25, 1000, 1_000_000])
def test_deep_nesting_is_refused_unparsed(web_engine, tmp_path, depth):
    body = b'{"results":' + b"[" * depth + b"]" * depth + b"}"
    engine = web_engine(lambda path: Reply(200, body))
    started = time.monotonic()
    with pytest.raises(WebSearchError, match="nested deeper than 20"):
        searxng(engine).search("kyoto", state_dir=tmp_path)
    assert time.monotonic() - started < 1.5


def test_brackets_inside_strings_are_no_nesting(web_engine, tmp_path):
    text = '[{"' * 50 + '\\"' + "]" * 50
    engine = web_engine(answer({"results": [{"title": text, "url": "https://a.example/"}]}))
    (result,) = searxng(engine).search("kyoto", state_dir=tmp_path)
    assert result.title.startswith('[{"[{"')


def test_a_redirect_on_the_same_server_is_followed(web_engine, tmp_path):
    body = json.dumps(BRAVE_ANSWER).encode()

    def reply(path):
        if path.startswith("/res/"):
            return Reply(302, headers={"Location": "/v2" + path})
        return Reply(200, body)

    engine = web_engine(reply)
    assert len(brave(engine).search("kyoto", state_dir=tmp_path)) == 2
    first, second = engine.asked
    assert second.path == "/v2" + first.path
    assert second.headers["X-Subscription-Token"] == KEY


def test_a_redirect_to_another_server_is_refused(web_engine, tmp_path):
    elsewhere = web_engine(answer(BRAVE_ANSWER))
    for location in (
        elsewhere.url + "/res/v1/web/search",  # another port
        "http://localhost:{port}/res/v1/web/search",  # another name
        "https://127.0.0.1:{port}/res/v1/web/search",  # another scheme
    ):
        engine = web_engine(lambda path: Reply(404))
        there = location.format(port=engine.port)
        engine.reply = lambda path, there=there: Reply(301, headers={"Location": there})
        with pytest.raises(WebSearchError, match="redirected to another server; refused"):
            brave(engine).search("kyoto", state_dir=tmp_path)
        assert len(engine.asked) == 1
    assert elsewhere.asked == []


def test_redirects_end(web_engine, tmp_path):
    engine = web_engine(lambda path: Reply(302, headers={"Location": path + "x"}))
    with pytest.raises(WebSearchError, match="redirected more than 3 times"):
        searxng(engine).search("kyoto", state_dir=tmp_path)
    assert len(engine.asked) == 4


def test_searxng_without_its_json_format(web_engine, tmp_path):
    engine = web_engine(lambda path: Reply(403, b"<html>Forbidden</html>"))
    with pytest.raises(WebSearchError, match="HTTP 403: its JSON format") as caught:
        searxng(engine).search("kyoto", state_dir=tmp_path)
    assert "search: formats: [html, json]" in caught.value.extras["hint"]


@pytest.mark.parametrize(
    ("status", "said"),
    [(401, "refused the credentials"), (429, "too many searches"), (500, "HTTP 500")],
)
def test_brave_refusing(web_engine, tmp_path, status, said):
    engine = web_engine(answer({"type": "ErrorResponse"}, status))
    with pytest.raises(WebSearchError, match=said):
        brave(engine).search("kyoto", state_dir=tmp_path)


def test_an_engine_not_there(web_engine, tmp_path):
    engine = web_engine(answer(SEARXNG_ANSWER))
    engine.close()
    with pytest.raises(WebSearchError, match="cannot be reached") as caught:
        searxng(engine).search("kyoto", state_dir=tmp_path)
    assert caught.value.status == 502


# -- the setting -----------------------------------------------------------------------------


@pytest.mark.parametrize("setting", [None, "", "  "])
def test_off(setting):
    assert WebSearch.parse(setting, KEY) is None


def test_the_forms_accepted():
    found = WebSearch.parse("SearXNG:http://127.0.0.1:8888/", None)
    assert found == WebSearch("searxng", "http://127.0.0.1:8888", None, 1.0)
    assert found.shown() == "searxng at http://127.0.0.1:8888"
    found = WebSearch.parse("brave:", f" {KEY} ", 2.5)
    assert found == WebSearch("brave", websearch.BRAVE_API, KEY, 2.5)
    assert found.shown() == "brave (key set)"
    found = WebSearch.parse("brave:https://proxy.example/search", KEY)
    assert found is not None and found.shown() == "brave at https://proxy.example/search (key set)"


@pytest.mark.parametrize(
    ("setting", "key", "said"),
    [
        ("bing:https://api.bing.microsoft.com", KEY, "no web search this program knows"),
        ("http://127.0.0.1:8888", None, "no web search this program knows"),
        ("searxng", None, "needs SearXNG's address"),
        ("searxng:", None, "needs SearXNG's address"),
        ("searxng:127.0.0.1:8888", None, "http:// or https://"),
        ("searxng:ftp://127.0.0.1/", None, "http:// or https://"),
        ("searxng:http://", None, "http:// or https://"),
        ("searxng:http://127.0.0.1:88x88", None, "http:// or https://"),
        ("searxng:http://127.0.0.1:8888/?format=json", None, "without a query or fragment"),
        ("searxng:http://127.0.0.1:8888/#top", None, "without a query or fragment"),
        ("brave:", None, "needs the API's key in CHIEZO_WEB_SEARCH_KEY"),
        ("brave:", "  ", "needs the API's key"),
    ],
)
def test_settings_refused(setting, key, said):
    with pytest.raises(ConfigError, match=said) as caught:
        WebSearch.parse(setting, key)
    shown = json.dumps(caught.value.to_dict())
    if "knows" in said or "http://" in said:
        assert "searxng:http://HOST:PORT" in shown and "brave:" in shown


@pytest.mark.parametrize("interval", [-1.0, float("nan"), 1e9])
def test_intervals_refused(interval):
    with pytest.raises(ConfigError, match=websearch.INTERVAL_ENVIRONMENT):
        WebSearch.parse("searxng:http://127.0.0.1:8888", None, interval)


# -- credentials never shown --------------------------------------------------------------------


def secrets_in(text: str) -> list[str]:
    return [s for s in (KEY, PASSWORD, f"{USER}:") if s in text]


def said(raised: BaseException) -> str:
    """Everything an error says, its causes' included."""
    texts = []
    error: BaseException | None = raised
    while error is not None:
        texts.append(repr(error) + str(error))
        if hasattr(error, "to_dict"):
            texts.append(json.dumps(error.to_dict()))
        error = error.__cause__ or error.__context__
    return "\n".join(texts)


def test_the_password_is_sent_and_never_shown(web_engine, tmp_path):
    engine = web_engine(answer(SEARXNG_ANSWER))
    setting = f"searxng:http://{USER}:{PASSWORD}@127.0.0.1:{engine.port}"
    found = WebSearch.parse(setting, None, 0.0)
    assert found is not None
    assert found.url == engine.url
    assert len(found.search("kyoto", state_dir=tmp_path)) == 3
    expected = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    assert engine.asked[0].headers["Authorization"] == f"Basic {expected}"
    assert secrets_in(repr(found) + str(found) + found.shown()) == []


def test_secrets_never_in_errors_or_logs(web_engine, tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    replies = [
        lambda path: Reply(401, b"bad key"),
        lambda path: Reply(403, b"no"),
        lambda path: Reply(200, b"nope"),
        lambda path: Reply(200, b"[" * 100 + b"]" * 100),
        lambda path: Reply(200, b"{}"),
        lambda path: Reply(302, headers={"Location": "http://localhost:1/"}),
        lambda path: Reply(200, b"{" + b" " * 100, trickle=0.05),
    ]
    texts = []
    for reply in replies:
        engine = web_engine(reply)
        for make in (brave_with_password, searxng_with_password):
            engine_search = make(engine)
            texts.append(repr(engine_search) + engine_search.shown())
            with pytest.raises(WebSearchError) as caught:
                engine_search.search("kyoto", deadline=0.5, state_dir=tmp_path)
            texts.append(said(caught.value))
    engine = web_engine(answer(BRAVE_ANSWER))
    engine_search = brave_with_password(engine, interval=30.0)
    engine_search.search("kyoto", state_dir=tmp_path)
    with pytest.raises(WebSearchError, match="rate limited") as caught:
        engine_search.search("kyoto", state_dir=tmp_path)
    texts.append(said(caught.value))
    for setting in (
        f"searxng:ftp://{USER}:{PASSWORD}@127.0.0.1/",
        f"searxng:http://{USER}:{PASSWORD}@[::1/",
        f"searxng:http://{USER}:{PASSWORD}@127.0.0.1/?q=1",
        f"bing:http://{USER}:{PASSWORD}@127.0.0.1/",
    ):
        with pytest.raises(ConfigError) as refused:
            WebSearch.parse(setting, KEY)
        texts.append(said(refused.value))
    texts.extend(record.getMessage() for record in caplog.records)
    assert any("web search at brave" in record.getMessage() for record in caplog.records)
    assert secrets_in("\n".join(texts)) == []


def brave_with_password(engine: Engine, interval: float = 0.0) -> WebSearch:
    found = WebSearch.parse(f"brave:http://{USER}:{PASSWORD}@127.0.0.1:{engine.port}/", KEY)
    assert found is not None
    return WebSearch(found.provider, found.url, found.key, interval, found.credentials)


def searxng_with_password(engine: Engine) -> WebSearch:
    found = WebSearch.parse(f"searxng:http://{USER}:{PASSWORD}@127.0.0.1:{engine.port}", KEY, 0)
    assert found is not None
    return found


# -- calls spaced ------------------------------------------------------------------------------


def test_two_calls_in_a_row_are_spaced(web_engine, tmp_path):
    engine = web_engine(answer(SEARXNG_ANSWER))
    search = searxng(engine, interval=0.6)
    search.search("one", state_dir=tmp_path)
    started = time.monotonic()
    search.search("two", state_dir=tmp_path)
    assert time.monotonic() - started >= 0.5
    first, second = engine.asked
    assert second.at - first.at >= 0.6 - 0.05


def test_a_wait_past_the_deadline_is_refused_at_once(web_engine, tmp_path):
    engine = web_engine(answer(SEARXNG_ANSWER))
    search = searxng(engine, interval=5.0)
    search.search("one", state_dir=tmp_path)
    started = time.monotonic()
    with pytest.raises(WebSearchError, match="rate limited") as caught:
        search.search("two", deadline=1.0, state_dir=tmp_path)
    assert time.monotonic() - started < 0.5
    assert caught.value.extras["rate_limited"] is True
    assert len(engine.asked) == 1


def test_threads_queue_one_interval_apart(web_engine, tmp_path):
    engine = web_engine(answer(SEARXNG_ANSWER))
    search = searxng(engine, interval=0.3)
    threads = [
        threading.Thread(target=search.search, args=(f"q{i}",), kwargs={"state_dir": tmp_path})
        for i in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    times = sorted(asked.at for asked in engine.asked)
    assert len(times) == 4
    assert all(b - a >= 0.3 - 0.05 for a, b in zip(times, times[1:], strict=False))


def test_another_process_waits_its_turn(web_engine, tmp_path):
    engine = web_engine(answer(SEARXNG_ANSWER))
    searxng(engine, interval=2.0).search("one", state_dir=tmp_path)
    script = (
        "import sys, time; from pathlib import Path; "
        "from chiezo.answer.websearch import WebSearch; "
        "s = WebSearch.parse(sys.argv[1], None, 2.0); "
        "s.search('two', state_dir=Path(sys.argv[2]))"
    )
    subprocess.run(
        [sys.executable, "-c", script, f"searxng:{engine.url}", str(tmp_path)],
        check=True,
        timeout=10,
    )
    first, second = engine.asked
    assert second.at - first.at >= 2.0 - 0.05


def test_a_locked_record_ends_by_the_deadline(web_engine, tmp_path):
    engine = web_engine(answer(SEARXNG_ANSWER))
    with open(tmp_path / websearch.STATE_FILE, "a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # another open file: as another process holds it
        started = time.monotonic()
        with pytest.raises(WebSearchError, match="stayed locked"):
            searxng(engine, interval=1.0).search("kyoto", deadline=0.3, state_dir=tmp_path)
        assert time.monotonic() - started < 0.8
    assert engine.asked == []


def test_a_record_from_a_clock_set_back_is_ignored(web_engine, tmp_path):
    engine = web_engine(answer(SEARXNG_ANSWER))
    (tmp_path / websearch.STATE_FILE).write_text(f"{time.time() + 10**6}\n")
    searxng(engine, interval=1.0).search("kyoto", deadline=1.0, state_dir=tmp_path)
    (tmp_path / websearch.STATE_FILE).write_text("garbage")
    searxng(engine, interval=1.0).search("kyoto", deadline=1.0, state_dir=tmp_path)
    assert len(engine.asked) == 2
