"""Beyond the library only when asked: rag's no-basis answer from a web search, the agent's and
MCP's ``web_search`` tool, ``chiezo doctor`` — against a scripted SearXNG on loopback (the real
client path) and a scripted model. A web search that is off is never asked: the engine here
fails the test if it is."""

from __future__ import annotations

import json

import httpx
import pytest
from click.testing import CliRunner

from chiezo.answer.web_answers import SAID, WEB_PROMPT
from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, WebSearchOff
from chiezo.ops import answering, doctor, tools
from chiezo.ops.context import Context
from chiezo.surfaces.cli.main import cli
from llm_stub import ScriptedLLM, in_turns, tool_call
from web_engines import Reply, answer

from helpers import wiki_library

PAGES = [
    (1, "浅草寺", "'''浅草寺'''は東京都台東区浅草にある寺。628年に創建されたと伝わる。"),
    (2, "東京タワー", "'''東京タワー'''は東京都港区にある電波塔。1958年に完成した。"),
]
NOWHERE = "When was the qzxvbnm plorkwidget first made?"
RESULTS = {
    "results": [
        {
            "title": "The <b>plorkwidget</b> story",
            "url": "https://example.org/plorkwidget",
            "content": "The qzxvbnm plorkwidget was first made in 1911 by Anna Fnarg.",
        },
        {"title": "Widgets", "url": "https://example.com/widgets", "content": "All widgets."},
    ]
}
PASSWORD = "pwNEVERshown5150"


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return wiki_library(tmp_path_factory.mktemp("web"), PAGES)


@pytest.fixture
def tripwire(web_engine):
    """An engine no test may reach: asked, it answers 500 and the test checks ``asked``."""
    return web_engine(lambda path: Reply(500, b"must not be asked"))


def service(root, llm_url: str | None, engine_url: str | None = None, **more) -> Context:
    settings = Settings(
        data_dir=root / "data",
        llm_url=llm_url,
        llm_model="stub-model",
        llm_timeout=5,
        web_search=f"searxng:{engine_url}" if engine_url else None,
        web_search_interval=0.0,
        **more,
    )
    return Context(settings)


def model_answering(text: str):
    return lambda body: {"content": text}


def test_with_web_an_answer_with_no_basis_rests_on_the_web_said_so(library, web_engine):
    engine = web_engine(answer(RESULTS))
    with ScriptedLLM(model_answering("It was first made in 1911 [1].")) as stub:
        result = answering.ask(service(library, stub.url, engine.url), NOWHERE, web=True)
    assert result.basis == "web" and not result.no_basis and result.cited == [1]
    first = result.references[0]
    assert first == {"n": 1, "source": "web", "title": "The plorkwidget story",
                     "url": "https://example.org/plorkwidget",
                     "cite": "https://example.org/plorkwidget", "kind": "web"}  # fmt: skip
    assert result.answer.endswith(SAID["en"])
    assert any("rests on 2 web search results" in w for w in result.warnings)
    shown = result.to_dict()
    assert shown["grounded"] is False and shown["web_supported"] is True  # a weaker kind
    system, user = stub.requests[0]["messages"][0], stub.requests[0]["messages"][-1]
    assert system["content"] == WEB_PROMPT
    assert "[1] The plorkwidget story (web page https://example.org/plorkwidget)" in user["content"]
    assert [a.query["q"] for a in engine.asked] == [[NOWHERE]]
    assert any(s["stage"] == "web" for s in result.stages)


def test_off_unless_asked_the_web_is_never_asked(library, tripwire):
    with ScriptedLLM(model_answering("invented [1]")) as stub:
        nothing = answering.ask(service(library, stub.url, tripwire.url), NOWHERE)
        found = answering.ask(service(library, stub.url, tripwire.url), "浅草寺はいつ？", web=True)
    assert nothing.no_basis and nothing.basis == "library" and nothing.references == []
    assert found.basis == "library" and found.references[0]["title"] == "浅草寺"
    assert tripwire.asked == []  # neither without --web nor with a basis in the library


def test_web_asked_for_with_no_web_search_set_up_is_a_usage_error(library):
    with pytest.raises(WebSearchOff, match="needs a web search"):
        answering.ask(service(library, "http://127.0.0.1:9/v1"), NOWHERE, web=True)
    ran = CliRunner().invoke(
        cli,
        ["--data", str(library / "data"), "ask", "--web", NOWHERE],
        env={"CHIEZO_LLM_URL": "http://127.0.0.1:9/v1", "CHIEZO_WEB_SEARCH": ""},
    )
    assert ran.exit_code == 2 and "CHIEZO_WEB_SEARCH" in ran.stderr


def test_rest_web_without_a_web_search_is_a_409_not_a_500(server):
    """Valid, but this server is not set up for it: a 409 naming the setting (a 400 would say
    the request itself is wrong: the API fuzzer calls that a valid request rejected)."""
    refused = httpx.get(f"{server.url}/v1/ask", params={"q": NOWHERE, "web": "1"})
    assert refused.status_code == 409
    assert refused.json()["field"] == "web" and "CHIEZO_WEB_SEARCH" in refused.json()["hint"]


@pytest.mark.parametrize(
    "reply",
    [
        lambda path: Reply(200, b"<html>not json</html>"),
        lambda path: Reply(200, b'{"results": []}' + b" " * 400, trickle=0.05),
        lambda path: Reply(302, headers={"Location": "http://elsewhere.example/search"}),
    ],
    ids=["garbage", "slow", "elsewhere"],
)
def test_a_web_search_that_fails_leaves_the_fixed_reply_with_its_reason(library, web_engine, reply):
    engine = web_engine(reply)
    with ScriptedLLM(model_answering("invented [1]")) as stub:
        ctx = service(library, stub.url, engine.url, query_timeout=1.0)
        result = answering.ask(ctx, NOWHERE, web=True)
    assert result.no_basis and result.references == [] and stub.requests == []
    assert any(w.startswith("the web search failed") for w in result.warnings)


def test_the_cli_says_the_basis_and_strict_refuses_it(library, web_engine):
    engine = web_engine(answer(RESULTS))
    with ScriptedLLM(model_answering("It was first made in 1911 [1].")) as stub:
        env = {"CHIEZO_LLM_URL": stub.url, "CHIEZO_LLM_MODEL": "stub-model",
               "CHIEZO_WEB_SEARCH": f"searxng:{engine.url}",
               "CHIEZO_WEB_SEARCH_INTERVAL": "0"}  # fmt: skip
        data = ["--data", str(library / "data"), "ask"]
        plain = CliRunner().invoke(cli, [*data, "--web", NOWHERE], env=env)
        strict = CliRunner().invoke(cli, [*data, "--web", "--strict", NOWHERE], env=env)
        by_setting = CliRunner().invoke(
            cli, [*data, NOWHERE], env={**env, "CHIEZO_ANSWER_WEB": "1"}
        )
    assert plain.exit_code == 0, plain.output
    assert SAID["en"] in plain.stdout and "https://example.org/plorkwidget" in plain.stdout
    assert strict.exit_code == 4  # grounded means the library's documents
    assert by_setting.exit_code == 0 and SAID["en"] in by_setting.stdout


def test_the_agent_gets_web_search_only_where_it_is_set_up_and_cites_urls(library, web_engine):
    engine = web_engine(answer(RESULTS))
    script = in_turns(
        {"tool_calls": [tool_call("web_search", {"query": "plorkwidget first made"})]},
        {"content": "First made in 1911 [1]."},
    )
    with ScriptedLLM(script) as stub:
        result = answering.ask(service(library, stub.url, engine.url), NOWHERE, mode="agent")
    offered = {t["function"]["name"] for t in stub.requests[0]["tools"]}
    assert "web_search" in offered and result.cited == [1]
    assert result.references[0]["source"] == "web" and result.references[0]["kind"] == "web"
    assert result.references[0]["url"] == "https://example.org/plorkwidget"
    told = [m for m in stub.requests[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert "from the web, not the library" in told
    with ScriptedLLM(in_turns({"content": "nothing"})) as stub:
        answering.ask(service(library, stub.url), NOWHERE, mode="agent")
    assert "web_search" not in {t["function"]["name"] for t in stub.requests[0]["tools"]}


def test_mcp_tools_offer_web_search_open_world_only_when_set_up(library, tripwire):
    on = {t.name: t for t in tools.library_tools(service(library, None, tripwire.url))}
    off = {t.name for t in tools.library_tools(service(library, None))}
    assert "web_search" not in off
    assert on["web_search"].annotations.open_world_hint is True
    assert set(on["web_search"].parameters["properties"]) == {"query", "limit", "max_chars"}
    assert tripwire.asked == []  # listing the tools asks nothing


def test_doctor_shows_the_web_search_never_its_password(library, tripwire):
    def row(ctx: Context) -> dict:
        return next(r for r in doctor.check(ctx) if r["check"] == "web search")

    assert row(service(library, None))["detail"].startswith("off")
    with_password = tripwire.url.replace("http://", f"http://me:{PASSWORD}@")
    shown = row(service(library, None, with_password))
    assert shown["ok"] and f"searxng at {tripwire.url}" in shown["detail"]
    assert PASSWORD not in json.dumps(shown)
    broken = row(Context(Settings(data_dir=library / "data", web_search="bing:")))
    assert not broken["ok"] and "searxng" in broken["hint"]
    assert tripwire.asked == []  # the doctor sends nothing beyond this machine


def test_a_tool_query_that_is_not_valid_unicode_is_refused_before_it_is_sent(library, tripwire):
    from chiezo.ops import web
    from chiezo.ops.requests import WebSearchRequest

    with pytest.raises(BadQuery, match="query"):
        web.search(service(library, None, tripwire.url), WebSearchRequest.of(query="a\ud800b"))
    assert tripwire.asked == []
