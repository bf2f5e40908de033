"""Answers you can trust (issue 16), against the scripted endpoint on loopback: grounding in
agent mode as in rag, every sentence checked against what it cites, plans that never search for
a field name, follow-ups that keep their subject, streaming, usable citations, settings."""

import json
import os
import subprocess
import sys
import time

import httpx
import pytest
from click.testing import CliRunner

from chiezo.answer.plan import ReasoningFilter, keyword_queries, parse_plan_reply
from chiezo.answer.rag import NO_BASIS
from chiezo.answer.support import check_claims, split_sentences
from chiezo.core.config import Settings
from chiezo.ops import answering, building
from chiezo.ops.context import Context
from chiezo.surfaces.cli.main import cli
from llm_stub import ScriptedLLM, in_turns, tool_call

from helpers import RunningServer, build_docs, wiki_library, write_files

PAGES = [
    (
        1,
        "浅草寺",
        "'''浅草寺'''は東京都台東区浅草にある寺。628年に創建されたと伝わる。雷門が有名である。",
    ),
    (
        2,
        "夏目漱石",
        "'''夏目漱石'''は日本の小説家。1867年2月9日に江戸の牛込で生まれた。"
        "代表作に『坊っちゃん』がある。1916年12月9日に東京で没した。",
    ),
    (
        3,
        "Ray Charles",
        "'''Ray Charles''' (September 23, 1930 – June 10, 2004) was an American "
        "singer and pianist. He was born in Albany, Georgia, and died in Beverly Hills.",
    ),
]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return wiki_library(tmp_path_factory.mktemp("grounding"), PAGES)


def service_with(root, url, **settings) -> Context:
    return Context(
        Settings(
            data_dir=root / "data", llm_url=url, llm_model="stub-model", llm_timeout=5, **settings
        )
    )


def planned(plan: str, answer):
    """Plan requests get ``plan``; answer requests ``answer`` (a reply dict or text)."""

    def reply(body):
        if "search queries" in body["messages"][0]["content"]:
            return {"content": plan}
        if isinstance(answer, dict):
            return answer
        return answer(body) if callable(answer) else {"content": answer}

    return reply


def cli_run(root, url, *args, env=None, **kwargs):
    environment = {"CHIEZO_LLM_URL": url, "CHIEZO_LLM_MODEL": "stub-model", **(env or {})}
    return CliRunner().invoke(cli, ["--data", str(root / "data"), *args], env=environment, **kwargs)


# -- agent mode: grounding is enforced, not requested ------------------------------------------


@pytest.mark.slow
def test_an_agent_answer_before_any_lookup_is_not_returned_chiezo_searches_first(library):
    seen = []

    def answer(body):
        seen.append([m["role"] for m in body["messages"]])
        tools = [m for m in body["messages"] if m["role"] == "tool"]
        return {
            "content": "Ray Charles was born in 1930 [1]."
            if tools
            else "The capital of Alabama is Baton Rouge."
        }

    with ScriptedLLM(answer) as stub:
        result = answering.ask(
            service_with(library, stub.url), "When was Ray Charles born?", mode="agent"
        )
    assert result.answer == "Ray Charles was born in 1930 [1]." and result.grounded
    assert result.steps[0]["tool"] == "search" and result.steps[0]["by"] == "chiezo"
    assert result.queries == ["Ray Charles"]  # the question's named thing, not the sentence
    assert result.references[0]["title"] == "Ray Charles"
    assert "tool" in seen[1]  # the second request carried the search Chiezo made


@pytest.mark.slow
def test_an_agent_that_finds_nothing_gives_the_fixed_reply_and_exit_3(library):
    replies = in_turns(
        {"tool_calls": [tool_call("search", {"query": "qzxvbnm plorkwidget"})]},
        {"content": "The capital of Alabama is Baton Rouge."},
    )
    with ScriptedLLM(replies) as stub:
        result = answering.ask(
            service_with(library, stub.url), "qzxvbnm plorkwidget?", mode="agent"
        )
    assert result.answer == NO_BASIS["en"] and result.no_basis and not result.grounded
    with ScriptedLLM(in_turns({"content": "Baton Rouge."})) as stub:
        run = cli_run(
            library, stub.url, "ask", "--mode", "agent", "--json", "What is the capital of Alabama?"
        )
    body = json.loads(run.stdout)
    assert run.exit_code == 3 and body["no_basis"] and body["grounded"] is False
    assert body["answer"] == NO_BASIS["en"] and body["steps"][0]["by"] == "chiezo"


@pytest.mark.slow
def test_an_agent_answer_citing_nothing_is_asked_again_and_never_labelled_grounded(library):
    search = {"tool_calls": [tool_call("search", {"query": "Ray Charles"})]}
    with ScriptedLLM(in_turns(search, {"content": "He was born in 1930."})) as stub:
        result = answering.ask(
            service_with(library, stub.url), "When was Ray Charles born?", mode="agent"
        )
        asked_again = "cites no source" in json.dumps(stub.requests[-1]["messages"])
    assert asked_again and result.cited == [] and result.grounded is False
    assert result.to_dict()["uncited"] == ["He was born in 1930."]
    with ScriptedLLM(in_turns(search, {"content": "He was born in 1930."})) as stub:
        strict = cli_run(
            library, stub.url, "ask", "--mode", "agent", "--strict", "When was Ray Charles born?"
        )
    assert strict.exit_code == 4 and "uncited: “He was born in 1930.”" in strict.stderr


@pytest.mark.slow
def test_an_agent_keeps_to_the_source_it_was_given(library):
    replies = in_turns(
        {"tool_calls": [tool_call("search", {"query": "浅草寺", "source": "other"})]},
        {"tool_calls": [tool_call("search", {"query": "浅草寺"}, "c2")]},
        {"content": "浅草寺は台東区にある [1]。"},
    )
    with ScriptedLLM(replies) as stub:
        result = answering.ask(
            service_with(library, stub.url), "浅草寺はどこ？", mode="agent", source="jawiki"
        )
    tools = [m["content"] for m in stub.requests[-1]["messages"] if m["role"] == "tool"]
    assert "from the source 'jawiki' only" in tools[0]
    assert result.steps[1]["arguments"]["source"] == "jawiki"  # filled in, not "everywhere"
    offered = {t["function"]["name"] for t in stub.requests[0]["tools"]}
    assert "recall" not in offered and "search" in offered  # recall has no source to keep to
    assert "'jawiki' only" in stub.requests[0]["messages"][0]["content"]
    assert result.grounded


@pytest.mark.slow
def test_the_agent_is_told_how_to_use_the_library_and_steps_are_timed(library):
    from chiezo.ops.tool_profiles import INSTRUCTIONS

    replies = in_turns(
        {"tool_calls": [tool_call("search", {"query": "夏目漱石"})]},
        {"tool_calls": [tool_call("search", {"query": "浅草寺"}, "c2")]},
        {"content": "漱石は1867年2月9日に生まれた [1]。"},
    )
    with ScriptedLLM(replies) as stub:
        result = answering.ask(
            service_with(library, stub.url), "夏目漱石の誕生日は？", mode="agent"
        )
    system = stub.requests[0]["messages"][0]["content"]
    assert INSTRUCTIONS.strip().splitlines()[0] in system and "`filter`" in system
    assert all(isinstance(s["ms"], float) for s in result.steps)
    titles = [r["title"] for r in result.references]
    assert titles.index("夏目漱石") < titles.index("浅草寺")  # the order they were first seen


@pytest.mark.slow
def test_remember_is_offered_in_a_chat_that_may_write_never_in_ask(library):
    from chiezo.surfaces.rest import create_app

    agent = in_turns(
        {"tool_calls": [tool_call("search", {"query": "浅草寺"})]}, {"content": "台東区 [1]"}
    )
    with ScriptedLLM(agent) as stub:
        settings = service_with(library, stub.url).settings
        with RunningServer(create_app(settings)) as server:
            httpx.post(
                f"{server.url}/v1/chat",
                timeout=30,
                json={"mode": "agent", "messages": [{"role": "user", "content": "浅草寺はどこ？"}]},
            )
            chat_tools = {t["function"]["name"] for t in stub.requests[0]["tools"]}
            stub.requests.clear()
            httpx.get(
                f"{server.url}/v1/ask", params={"q": "浅草寺はどこ？", "mode": "agent"}, timeout=30
            )
            ask_tools = {t["function"]["name"] for t in stub.requests[0]["tools"]}
            stub.requests.clear()
            # a page of another site cannot make the model write on its behalf
            httpx.post(
                f"{server.url}/v1/chat",
                timeout=30,
                headers={"Origin": "http://evil.example"},
                json={"mode": "agent", "messages": [{"role": "user", "content": "浅草寺は？"}]},
            )
            foreign_tools = {t["function"]["name"] for t in stub.requests[0]["tools"]}
    assert "remember" in chat_tools and "forget" not in chat_tools and "update" not in chat_tools
    assert "remember" not in ask_tools and "remember" not in foreign_tools


# -- claims checked against their citations ---------------------------------------------------


EXCERPTS = {
    1: "Ray Charles Robinson (September 23, 1930 – June 10, 2004) was an American singer. "
    "He was born in Albany, Georgia.",
    2: "夏目漱石は日本の小説家。1867年2月9日に江戸の牛込で生まれた。1916年に没した。",
}


@pytest.mark.parametrize(
    ("answer", "status", "reason"),
    [
        ("Ray Charles was born on September 23, 1930 [1].", "supported", None),
        ("Ray Charles was born on September 24, 1930 [1].", "unsupported", "number 24"),
        ("Ray Charles was born in October 1930 [1].", "unsupported", "'October'"),
        ("Ray Charles was born in Atlanta, Georgia [1].", "unsupported", "'Atlanta'"),
        ("Ray Charles was born in 1930 [2].", "unsupported", "number 1930"),
        ("Ray Charles was born in 1930 [5].", "unsupported", "[5], which no source has"),
        ("Ray Charles was born in 1930.", "uncited", "[1] would support it"),
        ("夏目漱石は1867年2月9日に生まれました[2]。", "supported", None),
        ("夏目漱石は1868年2月9日に生まれました[2]。", "unsupported", "number 1868"),
        ("夏目漱石は京都で生まれました[2]。", "unsupported", "'京都'"),
        ("資料には記載がありません。", "no_claim", None),
        ("The sources do not say.", "no_claim", None),
    ],
)
def test_each_sentence_is_checked_against_the_excerpts_it_cites(answer, status, reason):
    (claim,) = check_claims(answer, EXCERPTS)
    assert claim.status == status, claim.reasons
    if reason:
        assert any(reason in r for r in claim.reasons), claim.reasons


def test_sentences_keep_their_trailing_citations_and_abbreviations_do_not_split():
    text = (
        "He was born in 1930. [1] The U.S. Army drafted him [1].\n- 江戸で生まれた[2]。"
        "没年は1916年[2]。『よつばと!』を描いた [3]。\n1. Arabic [1]\n2. Algeria [2]"
    )
    assert split_sentences(text) == [
        "He was born in 1930. [1]",
        "The U.S. Army drafted him [1].",
        "- 江戸で生まれた[2]。",
        "没年は1916年[2]。",
        "『よつばと!』を描いた [3]。",
        "1. Arabic [1]",
        "2. Algeria [2]",
    ]


@pytest.mark.slow
def test_rag_reports_unsupported_and_uncited_sentences_and_strict_fails(library):
    from chiezo.surfaces.rest import create_app

    answer = "夏目漱石は1868年に生まれた [1]。代表作は『坊っちゃん』である。"
    with ScriptedLLM(planned('{"queries": ["夏目漱石"]}', answer)) as stub:
        run = cli_run(library, stub.url, "ask", "夏目漱石はいつ生まれた？")
        strict = cli_run(library, stub.url, "ask", "--strict", "夏目漱石はいつ生まれた？")
        settings = service_with(library, stub.url).settings
        with RunningServer(create_app(settings)) as server:
            body = httpx.get(
                f"{server.url}/v1/ask", params={"q": "夏目漱石は？"}, timeout=30
            ).json()
            refused = httpx.get(
                f"{server.url}/v1/ask", timeout=30, params={"q": "夏目漱石は？", "strict": 1}
            )
    assert run.exit_code == 0 and run.stdout.startswith(answer)
    assert "unsupported: “夏目漱石は1868年に生まれた [1]。”" in run.stderr
    assert "the number 1868 is in none of the cited excerpts" in run.stderr
    assert "uncited: “代表作は『坊っちゃん』である。”" in run.stderr
    assert strict.exit_code == 4 and "2 sentence(s) uncited or unsupported" in strict.stderr
    assert body["grounded"] is False and body["cited"] == [1]
    assert body["unsupported"] == ["夏目漱石は1868年に生まれた [1]。"]
    assert body["uncited"] == ["代表作は『坊っちゃん』である。"]
    assert [c["status"] for c in body["claims"]] == ["unsupported", "uncited"]
    assert refused.status_code == 422 and refused.json()["unsupported"] == body["unsupported"]


# -- plans and follow-ups -----------------------------------------------------------------------


def test_the_lenient_plan_reader_never_takes_a_field_name_for_a_query():
    broken = '{"queries": ["query": "when was ray chris born?", "source": null}'
    assert parse_plan_reply(broken) == (["when was ray chris born?"], None)
    assert parse_plan_reply('{"queries": ["Ray Charles", "source": "enwiki"', ["enwiki"]) == (
        ["Ray Charles"],
        "enwiki",
    )


def test_a_follow_up_without_a_subject_carries_the_conversations():
    history = [
        {"role": "user", "content": "When was Ray Charles born?"},
        {"role": "assistant", "content": "In 1930 [1]."},
    ]
    assert keyword_queries("When did he die?", history)[:2] == ["Ray Charles die", "Ray Charles"]
    assert keyword_queries("What about Quincy Jones?", history)[0] == "Quincy Jones"
    cited = [
        {"role": "user", "content": "浅草寺はどこ？"},
        {"role": "assistant", "content": "台東区 [1]", "cited_titles": ["浅草寺"]},
    ]
    assert keyword_queries("いつ創建された？", cited)[1] == "浅草寺"
    assert "浅草寺" not in " ".join(keyword_queries("東京タワーの高さは？", cited))


@pytest.mark.slow
def test_chat_follow_ups_search_the_subject_when_the_plan_is_unusable(library):
    def answer(body):
        sources = body["messages"][-1]["content"]
        return {"content": "1916年に没した [1]。" if "1916" in sources else "わかりません"}

    with ScriptedLLM(planned("no idea", answer)) as stub:
        chat = cli_run(
            library, stub.url, "chat", input="夏目漱石はいつ生まれた？\nいつ亡くなった？\n\n"
        )
    assert chat.exit_code == 0 and "1916年に没した [1]。" in chat.stdout
    last = [r for r in stub.requests if "search queries" not in r["messages"][0]["content"]][-1]
    assert "[1] 夏目漱石" in last["messages"][-1]["content"]


# -- streaming ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_ask_streams_the_answer_as_it_is_written(library, tmp_path):
    """A real process against a stub that pauses between pieces: the first words are on
    stdout well before the last piece is sent."""
    text = "浅草寺は東京都台東区浅草にある寺です [1]。山号は金龍山 [1]。雷門が有名である [1]。"
    with ScriptedLLM(
        planned('{"queries": ["浅草寺"]}', {"content": text, "chunk_delay": 0.15})
    ) as stub:
        env = {
            "CHIEZO_LLM_URL": stub.url,
            "CHIEZO_LLM_MODEL": "stub-model",
            "PYTHONUNBUFFERED": "1",
        }
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "chiezo",
                "--data",
                str(library / "data"),
                "ask",
                "浅草寺はどこ？",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={**os.environ, **env},
            bufsize=0,
        )
        first = process.stdout.read(3)
        first_at = time.monotonic()
        rest, errors = process.communicate(timeout=60)
        ended_at = time.monotonic()
    output = (first + rest).decode()
    assert process.returncode == 0 and output.startswith(text)
    assert ended_at - first_at > 1.0  # ~17 pieces × 0.15 s were still to come
    assert "answering from [1] 浅草寺" in errors.decode()


def test_reasoning_is_not_shown_while_streaming():
    visible = ReasoningFilter()  # what the terminal prints of a streamed answer (terminal.py)
    pieces = ["<th", "ink>let me think", " more</thi", "nk>Answer", " [1]. <", "b>"]
    assert "".join(visible.feed(p) for p in pieces) + visible.flush() == "Answer [1]. <b>"


# -- citations a person can open -----------------------------------------------------------------


@pytest.mark.slow
def test_zim_answers_skip_the_main_page_read_an_article_once_and_link_to_this_server(tmp_path):
    from helpers import data_file

    zim = data_file("zim/libkiwix_zimfile_raycharles.zim")
    settings = Settings(data_dir=tmp_path / "data")
    building.ingest(Context(settings), "zim", zim, "zim_ray", embed=False)
    with ScriptedLLM(
        planned('{"queries": ["Ray Charles", "Main Page"]}', "Ray Charles was a musician [1].")
    ) as stub:
        service = Context(
            Settings(
                data_dir=tmp_path / "data",
                llm_url=stub.url,
                llm_model="stub-model",
                public_url="http://127.0.0.1:8080",
            )
        )
        result = answering.ask(service, "Who was Ray Charles?", source="zim_ray", plan="model")
        offline = answering.ask(
            Context(Settings(data_dir=tmp_path / "data", llm_url=stub.url, llm_model="stub-model")),
            "Who was Ray Charles?",
            plan="model",
        )
    titles = [r["title"] for r in result.references]
    assert "Main Page" not in titles and titles.count("Ray Charles") == 1
    assert any("skipped main page Main Page" in w for w in result.warnings)
    first = result.references[0]
    entry = first["cite"].removeprefix("zim_ray:")  # the article's path in the ZIM
    assert first["cite"].startswith("zim_ray:A/")
    # the article as the ZIM shows it (issue #34); without a server, no link (issue #44: a
    # file and an entry were no link either; the CLI shows the command that opens it)
    assert first["url"] == f"http://127.0.0.1:8080/doc/zim_ray/archive/{entry}"
    assert offline.references[0]["url"] is None


@pytest.mark.slow
def test_a_cited_document_never_shows_its_local_path(tmp_path):
    folder = write_files(tmp_path / "handbook", {"leave.md": "# 休暇\n\n年次休暇は20日。\n"})
    build_docs(Context(Settings(data_dir=tmp_path / "data")), folder, "handbook")
    with ScriptedLLM(planned('{"queries": ["休暇"]}', "年次休暇は20日 [1]。")) as stub:
        local = answering.ask(
            Context(Settings(data_dir=tmp_path / "data", llm_url=stub.url, llm_model="stub-model")),
            "休暇は何日？",
        )
        served = answering.ask(
            Context(
                Settings(
                    data_dir=tmp_path / "data",
                    llm_url=stub.url,
                    llm_model="stub-model",
                    public_url="http://kb.lan:8080/",
                )
            ),
            "休暇は何日？",
        )
    assert local.references[0]["url"] is None and local.grounded  # no server to link to
    assert served.references[0]["url"].startswith("http://kb.lan:8080/doc/handbook/")
    assert "file:" not in json.dumps(local.to_dict() | served.to_dict())


# -- settings a small machine needs ---------------------------------------------------------------


@pytest.mark.slow
def test_excerpts_and_token_cap_reach_the_model_from_flags_api_and_environment(library):
    from chiezo.surfaces.rest import create_app

    plan = '{"queries": ["浅草寺", "夏目漱石", "Ray Charles"]}'
    # a question each of the three documents answers a part of: each gives a passage
    QUESTION = "浅草寺と夏目漱石とRay Charlesについて教えて"  # noqa: N806
    with ScriptedLLM(planned(plan, "台東区 [1]")) as stub:
        service = service_with(library, stub.url, answer_excerpts=2, answer_max_tokens=64)
        configured = answering.ask(service, QUESTION)
        flagged = cli_run(
            library, stub.url, "ask", "--json", "--excerpts", "1", "--max-tokens", "32", QUESTION
        )
        cli_request = stub.requests[-1]
        with RunningServer(create_app(service.settings)) as server:
            api = httpx.get(
                f"{server.url}/v1/ask",
                timeout=30,
                params={"q": QUESTION, "excerpts": 3, "max_tokens": 100},
            ).json()
            api_request = stub.requests[-1]
            bad = httpx.get(f"{server.url}/v1/ask", params={"q": "x", "excerpts": 99}, timeout=30)
    assert len(configured.references) == 2 and stub.requests[0]["max_tokens"] == 64
    assert len(json.loads(flagged.stdout)["references"]) == 1 and cli_request["max_tokens"] == 32
    assert len(api["references"]) == 3 and api_request["max_tokens"] == 100
    assert bad.status_code == 400


@pytest.mark.slow
def test_mode_and_grounding_defaults_come_from_the_environment(library, monkeypatch):
    from chiezo.core.errors import ConfigError

    replies = in_turns(
        {"tool_calls": [tool_call("search", {"query": "浅草寺"})]}, {"content": "台東区 [1]"}
    )
    with ScriptedLLM(replies) as stub:
        run = cli_run(
            library,
            stub.url,
            "ask",
            "--json",
            "浅草寺は？",
            env={"CHIEZO_ANSWER_MODE": "agent", "CHIEZO_ANSWER_GROUNDED": "0"},
        )
    body = json.loads(run.stdout)
    assert body["planner"] == "agent" and body["only_from_sources"] is False
    monkeypatch.setenv("CHIEZO_ANSWER_MODE", "oracle")
    with pytest.raises(ConfigError, match="CHIEZO_ANSWER_MODE must be one of rag, agent"):
        Settings.from_env()


def test_an_answer_that_only_echoes_the_list_of_sources_states_nothing():
    # SmolLM2-135M in agent mode answered "What is the capital of Alabama?" with the
    # "cite as: [1] Alabama, [2] …" line of its tool result
    titles = {1: "Alabama", 2: "Appellate court", 3: "Ada"}
    (claim,) = check_claims("Alabama, [2] Appellate court, [3] Ada", EXCERPTS, titles=titles)
    assert claim.status == "unsupported" and "states nothing" in claim.reasons[0]
    (real,) = check_claims(
        "Ray Charles was an American singer [1].", EXCERPTS, titles={1: "Ray Charles"}
    )
    assert real.status == "supported"
