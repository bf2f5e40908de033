"""Answers with citations (rag mode) against a scripted OpenAI-compatible server on loopback:
planning and its fallbacks, grounded refusal without a model call, citations mapping to the
right documents, endpoint fallback and the errors that name what is wrong."""

import json

import pytest

from chiezo.answer.excerpt import window
from chiezo.answer.plan import keyword_queries, parse_plan_reply, strip_reasoning
from chiezo.answer.rag import NO_BASIS, STOPPED
from chiezo.answer.support import cited_numbers
from chiezo.core.config import Settings
from chiezo.core.errors import LLMNotConfigured, LLMUnavailable, ModelMissing
from chiezo.ops import answering, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest
from llm_stub import ScriptedLLM, in_turns, tool_call

from helpers import free_port, wiki_library

PAGES = [
    (
        1,
        "浅草寺",
        "'''浅草寺'''は東京都台東区浅草にある寺。山号は金龍山。本尊は聖観音。"
        "628年に創建されたと伝わる。雷門が有名である。",
    ),
    (
        2,
        "夏目漱石",
        "'''夏目漱石'''は日本の小説家。1867年2月9日に江戸の牛込で生まれた。"
        "代表作に『吾輩は猫である』『坊っちゃん』がある。1916年に没した。",
    ),
    (3, "夏目 (曖昧さ回避)", "'''夏目'''は次のものを指す。\n* [[夏目漱石]]\n* 夏目 (姓)"),
    (
        4,
        "東京タワー",
        "'''東京タワー'''は東京都港区芝公園にある電波塔。高さは333メートル。1958年に完成した。",
    ),
]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return wiki_library(tmp_path_factory.mktemp("answer"), PAGES)


def service_with(root, url: str | None, model: str | None = "stub-model") -> Context:
    return Context(Settings(data_dir=root / "data", llm_url=url, llm_model=model, llm_timeout=5))


def scripted(plan: str, answer: str):
    """Plan requests (their system prompt asks for JSON queries) get ``plan``; the rest
    ``answer``."""

    def reply(body):
        system = body["messages"][0]["content"]
        return {"content": plan if "search queries" in system else answer}

    return reply


def answer_requests(stub: ScriptedLLM) -> list[dict]:
    return [r for r in stub.requests if "search queries" not in r["messages"][0]["content"]]


# -- planning ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "question, first",
    [
        ("夏目漱石はいつ生まれましたか？", "夏目漱石"),
        ("浅草寺はどこにある？", "浅草寺"),
        ("「吾輩は猫である」の作者は誰ですか", "吾輩は猫である"),
        ("When was Natsume Soseki born?", "Natsume Soseki"),
        ("What is the Great Fire of London?", "Great Fire of London"),
    ],
)
def test_keyword_plans_need_no_model(question, first):
    queries = keyword_queries(question)
    assert first in queries and len(queries) <= 3
    assert question in queries  # as typed, too: the sentence fallback ranks it well
    if any(mark in question for mark in '「"') or question.isascii():
        assert queries[0] == first  # quoted and capitalised phrases are tried first


@pytest.mark.parametrize(
    "reply",
    [
        '{"queries": ["浅草寺"], "source": "jawiki"}',
        '```json\n{"queries": ["浅草寺"], "source": "jawiki"}\n```',
        'Sure! Here is the plan: {"queries": ["浅草寺"], "source": "jawiki"} Hope this helps.',
        '<think>the user wants {"queries": ["x"]}</think>{"queries": ["浅草寺"], "source": "jawiki"}',
        '{"queries": ["浅草寺"], "source": "jawiki", "note": "cut off mid-obj',
    ],
)
def test_model_plans_are_read_leniently(reply):
    assert parse_plan_reply(reply, ["jawiki"]) == (["浅草寺"], "jawiki")


def test_an_unusable_plan_gives_nothing_and_unknown_sources_are_dropped():
    assert parse_plan_reply("I cannot help with that.") == ([], None)
    assert parse_plan_reply('{"queries": ["a"], "source": "nope"}', ["jawiki"]) == (["a"], None)


def test_reasoning_residue_is_stripped():
    assert strip_reasoning("<think>hmm</think>答え [1]") == "答え [1]"
    assert strip_reasoning("leftover reasoning</think>答え [1]") == "答え [1]"


def test_citations_are_the_numbers_that_exist_in_first_cited_order():
    assert cited_numbers("A [2] and B [1][2], and [3, 7]") == [2, 1, 3, 7]


def test_a_passage_too_long_for_what_is_left_keeps_the_window_where_its_words_are():
    text = (
        "東京タワーは電波塔である。"
        + "周辺には公園や寺院がある。" * 80
        + "展望台の高さは150メートル。"
    )
    cut = window(text, {"展望台", "メートル"}, 200)
    assert "展望台の高さは150メートル" in cut and len(cut) <= 200
    assert cut.startswith("周辺には") or cut.startswith("展望台")  # at a sentence start


# -- answering -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_answer_cites_the_documents_it_came_from(library):
    plan = '```json\n{"queries": ["夏目漱石"], "source": "jawiki"}\n```'
    with ScriptedLLM(scripted(plan, "<think>考え中</think>1867年2月9日に生まれた [1]。")) as stub:
        result = answering.ask(
            service_with(library, stub.url), "夏目漱石はいつ生まれましたか？", plan="model"
        )
    assert result.answer == "1867年2月9日に生まれた [1]。"
    assert result.references[0]["title"] == "夏目漱石" and result.cited == [1]
    assert result.queries == ["夏目漱石"] and result.planner == "model"
    (request,) = answer_requests(stub)
    prompt = request["messages"][-1]["content"]
    assert "[1] 夏目漱石" in prompt and "1867年2月9日" in prompt


@pytest.mark.slow
def test_an_unusable_plan_falls_back_to_keywords_visibly(library):
    with ScriptedLLM(scripted("I think you should search the web.", "港区にある [1]")) as stub:
        result = answering.ask(
            service_with(library, stub.url), "東京タワーはどこにある？", plan="model"
        )
    assert result.planner == "keywords" and "東京タワー" in result.queries
    assert result.references[0]["title"] == "東京タワー"
    assert any("unusable" in w for w in result.warnings)


@pytest.mark.slow
def test_nothing_found_is_the_fixed_reply_without_asking_the_model(library):
    with ScriptedLLM(scripted('{"queries": ["qzxvbnm plorkwidget"]}', "invented!")) as stub:
        result = answering.ask(service_with(library, stub.url), "qzxvbnm plorkwidget はいつ？")
    assert result.answer == NO_BASIS["ja"] and result.references == []
    assert answer_requests(stub) == []  # the answering model was never called


@pytest.mark.slow
def test_disambiguation_pages_are_skipped_and_said_so(library):
    plan = '{"queries": ["夏目"]}'
    with ScriptedLLM(scripted(plan, "小説家 [1]")) as stub:
        result = answering.ask(service_with(library, stub.url), "夏目とは？")
    assert all("曖昧さ回避" not in r["title"] for r in result.references)
    assert any("skipped disambiguation page 夏目 (曖昧さ回避)" in w for w in result.warnings)


@pytest.mark.slow
def test_the_next_endpoint_answers_when_the_first_is_down(library):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with ScriptedLLM(scripted('{"queries": ["浅草寺"]}', "台東区にある [1]")) as stub:
        result = answering.ask(service_with(library, f"{dead},{stub.url}"), "浅草寺はどこ？")
    assert result.cited == [1] and result.references[0]["title"] == "浅草寺"


@pytest.mark.slow
def test_no_endpoint_reachable_still_hands_over_the_excerpts(library):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMUnavailable) as caught:
        answering.ask(service_with(library, dead), "浅草寺はどこにある？")
    body = caught.value.to_dict()
    assert caught.value.exit_code == 5 and body["excerpts"][0]["title"] == "浅草寺"
    assert "台東区" in body["excerpts"][0]["text"]


@pytest.mark.slow
def test_a_missing_model_is_named_as_such(library):
    with (
        ScriptedLLM(scripted("{}", "x"), models=("smollm2",)) as stub,
        pytest.raises(ModelMissing) as caught,
    ):
        answering.ask(service_with(library, stub.url, model="qwen3"), "浅草寺はどこにある？")
    assert "qwen3" in caught.value.message and caught.value.to_dict()["models"] == ["smollm2"]


def test_without_a_configured_model_the_layer_is_off_but_says_what_it_found(library):
    service = service_with(library, None)
    with pytest.raises(LLMNotConfigured) as caught:
        answering.ask(service, "浅草寺はどこにある？")
    assert caught.value.to_dict()["excerpts"][0]["title"] == "浅草寺"
    assert answering.ask(service, "qzxvbnm plorkwidget").answer == NO_BASIS["en"]
    assert (
        searching.search(service, SearchRequest.of(query="浅草寺", source="jawiki")).hits[0].title
        == "浅草寺"
    )  # everything else works


# -- the CLI contract ----------------------------------------------------------------------------


def run_ask(root, url, *args, model="stub-model"):
    from click.testing import CliRunner

    from chiezo.surfaces.cli.main import cli

    env = {"CHIEZO_LLM_URL": url or "", "CHIEZO_LLM_MODEL": model or ""}
    return CliRunner().invoke(cli, ["--data", str(root / "data"), "ask", *args], env=env)


@pytest.mark.slow
def test_cli_prints_the_answer_then_numbered_citations(library):
    with ScriptedLLM(scripted('{"queries": ["夏目漱石"]}', "1867年に生まれた [1]")) as stub:
        result = run_ask(library, stub.url, "夏目漱石はいつ生まれましたか？")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0] == "1867年に生まれた [1]" and lines[1].startswith("[1] 夏目漱石 — http")


@pytest.mark.slow
def test_cli_exit_codes(library):
    with ScriptedLLM(scripted('{"queries": ["夏目"]}', "夏目漱石は小説家である。")) as stub:
        uncited = run_ask(library, stub.url, "夏目とは？", "--strict")
    with ScriptedLLM(scripted('{"queries": ["夏目"]}', "わかりません")) as stub:
        unknown = run_ask(library, stub.url, "夏目とは？", "--strict")
    with ScriptedLLM(scripted('{"queries": ["qzxvbnm"]}', "invented")) as stub:
        nothing = run_ask(library, stub.url, "qzxvbnm plorkwidget fnargle")
    assert uncited.exit_code == 4 and "1 sentence(s) uncited" in uncited.stderr
    assert "uncited: “夏目漱石は小説家である。”" in uncited.stderr
    assert unknown.exit_code == 3  # the model says the sources do not answer it
    assert "warning: skipped disambiguation page" in uncited.stderr
    assert nothing.exit_code == 3 and "simpler keywords" in nothing.stderr
    dead = run_ask(library, f"http://127.0.0.1:{free_port()}/v1", "浅草寺はどこにある？")
    assert dead.exit_code == 5 and "[1] 浅草寺" in dead.stdout and "台東区" in dead.stdout
    unset = run_ask(library, None, "浅草寺はどこにある？")
    assert unset.exit_code == 2 and "CHIEZO_LLM_URL" in unset.stderr


# -- REST ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_rest_ask_chat_strict_and_streaming(library):
    import httpx

    from chiezo.surfaces.rest import create_app

    from helpers import RunningServer

    with ScriptedLLM(scripted('{"queries": ["浅草寺"]}', "浅草寺は台東区にある [1]。")) as stub:
        settings = service_with(library, stub.url).settings
        with (
            RunningServer(create_app(settings)) as server,
            httpx.Client(base_url=server.url, timeout=30) as client,
        ):
            body = client.get("/v1/ask", params={"q": "浅草寺はどこにある？"}).json()
            assert body["cited"] == [1] and body["references"][0]["title"] == "浅草寺"
            assert "浅草寺" in body["queries"] and body["grounded"] is True
            turn = client.post(
                "/v1/chat",
                json={
                    "messages": [
                        {"role": "user", "content": "浅草寺について"},
                        {"role": "assistant", "content": "浅草寺は寺です [1]。"},
                        {"role": "user", "content": "どこにある？"},
                    ]
                },
            ).json()
            assert turn["references"][0]["title"] == "浅草寺"
            assert "浅草寺について" in json.dumps(stub.requests[-1]["messages"], ensure_ascii=False)
            with client.stream("GET", "/v1/ask", params={"q": "浅草寺はどこ？", "stream": 1}) as r:
                events = [line[7:] for line in r.iter_lines() if line.startswith("event: ")]
            assert events[0] == "references" and events[-1] == "done"
            assert set(events[1:-1]) == {"delta"}
            missing = client.get("/v1/ask", params={"q": "浅草寺", "source": "nope"})
            assert missing.status_code == 404
            bad = client.post("/v1/chat", json={"messages": [], "extra": 1})
            assert bad.status_code in (400, 422)
    with ScriptedLLM(scripted('{"queries": ["浅草寺"]}', "知りません")) as stub:
        settings = service_with(library, stub.url).settings
        with RunningServer(create_app(settings)) as server:
            strict = httpx.get(f"{server.url}/v1/ask", params={"q": "浅草寺は？", "strict": 1})
            assert strict.status_code == 422 and strict.json()["answer"] == "知りません"


# -- agent mode ----------------------------------------------------------------------------------


def test_agent_calls_read_only_tools_and_cites_what_it_saw(library):
    script = in_turns(
        {"tool_calls": [tool_call("search", {"query": "夏目漱石", "source": "jawiki"})]},
        {"tool_calls": [tool_call("doc", {"source": "jawiki", "title": "夏目漱石"}, "c2")]},
        {"content": "1867年2月9日生まれ [1]。"},
    )
    events = []
    with ScriptedLLM(script) as stub:
        result = answering.ask(
            service_with(library, stub.url),
            "夏目漱石はいつ生まれた？",
            mode="agent",
            on_event=lambda n, d: events.append(d["tool"]),
        )
    assert result.answer == "1867年2月9日生まれ [1]。" and result.cited == [1]
    assert result.references[0]["title"] == "夏目漱石" and result.planner == "agent"
    assert events == ["search", "doc"]
    offered = {t["function"]["name"] for t in stub.requests[0]["tools"]}
    assert "search" in offered and "remember" not in offered and "forget" not in offered
    assert all(t["function"]["description"] for t in stub.requests[0]["tools"])
    tool_results = [m for m in stub.requests[1]["messages"] if m["role"] == "tool"]
    assert "cite as: [1] 夏目漱石" in tool_results[0]["content"]


@pytest.mark.slow
def test_agent_repeats_errors_and_budgets(library):
    same = tool_call("search", {"query": "浅草寺", "source": "jawiki"})
    script = in_turns(
        {"tool_calls": [tool_call("search", {"query": "x", "source": "nope"})]},
        {"tool_calls": [same]},
        {"tool_calls": [same]},
        {"tool_calls": [tool_call("remember", {"text": "x"})]},
        lambda body: {"content": "台東区 [1]"} if "tools" not in body else {"tool_calls": [same]},
    )
    with ScriptedLLM(script) as stub:
        result = answering.ask(
            service_with(library, stub.url),
            "浅草寺はどこ？",
            mode="agent",
            steps=4,
            result_chars=300,
        )
    tool_texts = [m["content"] for m in stub.requests[-1]["messages"] if m["role"] == "tool"]
    assert "unknown source" in tool_texts[0] and "jawiki" in tool_texts[0]  # material, not a crash
    assert tool_texts[2].startswith("(a repeat of an earlier call")
    assert "unknown tool 'remember'" in tool_texts[3]
    assert all(len(t) < 300 + 200 for t in tool_texts)
    assert "tools" not in stub.requests[-1]  # the final answer was asked without tools
    assert result.answer == "台東区 [1]" and any("step budget" in w for w in result.warnings)


@pytest.mark.parametrize(
    "final, stopped",
    [
        # a small model repeating one sentence to max_tokens (SmolLM2-135M, bench/answer_e2e.py)
        ("浅草寺は台東区にある [1]。" + "雷門が有名な寺である [1]。" * 12, "loop"),
        ("浅草寺はどこ？", "echo"),  # the question said back
        ("  ", "empty"),
    ],
)
def test_an_agent_answer_that_loops_is_cut_and_one_that_is_no_answer_stood_in_for(
    library, final, stopped
):
    script = in_turns(
        {"tool_calls": [tool_call("search", {"query": "浅草寺", "source": "jawiki"})]},
        {"content": final},
    )
    with ScriptedLLM(script) as stub:
        result = answering.ask(service_with(library, stub.url), "浅草寺はどこ？", mode="agent")
    assert result.stopped == stopped and result.references[0]["title"] == "浅草寺"
    assert any(STOPPED[stopped] in w for w in result.warnings)
    assert result.answer.count("雷門が有名な寺である") <= 1
    if stopped == "loop":  # the model's answer up to the loop, one copy of what repeated
        assert result.answer.startswith("浅草寺は台東区にある [1]。") and result.cited == [1]
        assert result.model is not None and len(stub.requests) == 2
    else:  # the library's own sentences, citing what the search found
        assert "台東区" in result.answer and "[1]" in result.answer and result.model is None
        assert len(stub.requests) == 2  # not asked again for citations: it answered nothing


def test_doctor_names_a_missing_model_and_an_unreachable_endpoint(library):
    from click.testing import CliRunner

    from chiezo.surfaces.cli.main import cli

    dead = f"http://127.0.0.1:{free_port()}/v1"
    with ScriptedLLM(models=("smollm2",)) as stub:
        env = {"CHIEZO_LLM_URL": f"{stub.url},{dead}", "CHIEZO_LLM_MODEL": "qwen3"}
        result = CliRunner().invoke(cli, ["--data", str(library / "data"), "doctor"], env=env)
        env["CHIEZO_LLM_MODEL"] = "smollm2"
        healthy = CliRunner().invoke(
            cli,
            ["--data", str(library / "data"), "doctor", "--json"],
            env={**env, "CHIEZO_LLM_URL": stub.url},
        )
    assert result.exit_code == 1
    assert "no model named 'qwen3'" in result.stdout and "models there: smollm2" in result.stdout
    assert "unreachable" in result.stdout and "source jawiki" in result.stdout
    assert healthy.exit_code == 0 and json.loads(healthy.stdout)["ok"] is True


@pytest.mark.slow
def test_cli_agent_mode_and_chat(library):
    from click.testing import CliRunner

    from chiezo.surfaces.cli.main import cli

    script = in_turns(
        {"tool_calls": [tool_call("search", {"query": "東京タワー", "source": "jawiki"})]},
        {"content": "333メートル [1]"},
    )
    with ScriptedLLM(script) as stub:
        env = {"CHIEZO_LLM_URL": stub.url, "CHIEZO_LLM_MODEL": "stub-model"}
        agent = CliRunner().invoke(
            cli,
            ["--data", str(library / "data"), "ask", "--mode", "agent", "東京タワーの高さは？"],
            env=env,
        )
    assert agent.exit_code == 0 and agent.stdout.startswith("333メートル [1]")
    assert "step 1: search" in agent.stderr
    with ScriptedLLM(scripted('{"queries": ["浅草寺"]}', "台東区です [1]")) as stub:
        env = {"CHIEZO_LLM_URL": stub.url, "CHIEZO_LLM_MODEL": "stub-model"}
        chat = CliRunner().invoke(
            cli,
            ["--data", str(library / "data"), "chat"],
            env=env,
            input="浅草寺はどこ？\nいつ建てられた？\n\n",
        )
    assert chat.exit_code == 0 and chat.stdout.count("台東区です [1]") == 2
    second = answer_requests(stub)[-1]["messages"]
    assert any(m["content"] == "浅草寺はどこ？" for m in second)  # the earlier turn is there


@pytest.mark.slow
def test_ungrounded_asks_the_model_even_without_sources(library):
    with ScriptedLLM(scripted('{"queries": ["qzxvbnm"]}', "(not from the library) 42")) as stub:
        result = answering.ask(service_with(library, stub.url), "qzxvbnm とは？", grounded=False)
    assert result.answer == "(not from the library) 42" and result.grounded is False
    (request,) = answer_requests(stub)
    assert "not from the library" in request["messages"][0]["content"]


@pytest.mark.slow
def test_a_slow_endpoint_times_out_and_the_next_one_answers(library):
    slow = ScriptedLLM(lambda body: {"delay": 3, "content": "too late"})
    with slow, ScriptedLLM(scripted('{"queries": ["浅草寺"]}', "台東区 [1]")) as fast:
        settings = Settings(
            data_dir=library / "data",
            llm_url=f"{slow.url},{fast.url}",
            llm_model="stub-model",
            llm_timeout=1,
        )
        result = answering.ask(Context(settings), "浅草寺はどこ？", plan="model")
    assert result.answer == "台東区 [1]" and result.planner == "model"


@pytest.mark.slow
def test_rest_agent_mode_streams_one_event_per_step(library):
    import httpx

    from chiezo.surfaces.rest import create_app

    from helpers import RunningServer

    script = in_turns(
        {"tool_calls": [tool_call("search", {"query": "浅草寺", "source": "jawiki"})]},
        {"tool_calls": [tool_call("doc", {"source": "jawiki", "title": "浅草寺"}, "c2")]},
        {"content": "台東区にある [1]。"},
    )
    with ScriptedLLM(script) as stub:
        settings = service_with(library, stub.url).settings
        with (
            RunningServer(create_app(settings)) as server,
            httpx.stream(
                "GET",
                f"{server.url}/v1/ask",
                timeout=30,
                params={"q": "浅草寺はどこ？", "mode": "agent", "stream": 1},
            ) as response,
        ):
            lines = list(response.iter_lines())
    events = [line[7:] for line in lines if line.startswith("event: ")]
    assert events == ["step", "step", "done"]
    done = json.loads([line for line in lines if line.startswith("data: ")][-1][6:])
    assert done["answer"] == "台東区にある [1]。" and done["references"][0]["title"] == "浅草寺"


# -- failures inside a stream: the one error shape, as the last event ------------------------------


def _events(url: str, method: str, path: str, **kwargs) -> list[tuple[str, dict]]:
    """The server-sent events of one streamed answer, as (name, data)."""
    import httpx

    with httpx.stream(method, f"{url}{path}", timeout=30, **kwargs) as response:
        assert response.status_code == 200  # the failure comes after the first byte
        lines = list(response.iter_lines())
    names = [line[7:] for line in lines if line.startswith("event: ")]
    data = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    return list(zip(names, data, strict=True))


def plan_then(streamed: dict):
    """Planning (not streamed) gets a plan for 浅草寺; the streamed answer gets ``streamed``."""
    return lambda body: streamed if body.get("stream") else {"content": '{"queries": ["浅草寺"]}'}


def _serving(library, stub):
    from chiezo.surfaces.rest import create_app

    from helpers import RunningServer

    return RunningServer(create_app(service_with(library, stub.url).settings))


@pytest.mark.slow
@pytest.mark.parametrize(
    "failure, deltas, said",
    [
        ({"status": 500}, 0, "no language model endpoint answered"),
        (
            {"content": "浅草寺は東京都台東区にある [1]。", "drop_after": 2},
            2,
            "stopped in the middle",
        ),
    ],
    ids=["http-500", "connection-dropped"],
)
def test_a_model_failing_mid_stream_ends_it_with_an_error_event(library, failure, deltas, said):
    with ScriptedLLM(plan_then(failure)) as stub, _serving(library, stub) as server:
        events = _events(server.url, "GET", "/v1/ask", params={"q": "浅草寺はどこ？", "stream": 1})
    names = [name for name, _ in events]
    assert names == ["references", *["delta"] * deltas, "error"]
    error = events[-1][1]
    assert said in error["error"] and error["status"] == 503 and error["hint"]
    assert error["excerpts"][0]["title"] == "浅草寺"  # what was found is handed over still


@pytest.mark.slow
def test_an_agent_whose_model_fails_after_a_step_ends_with_an_error_event(library):
    script = in_turns({"tool_calls": [tool_call("search", {"query": "浅草寺"})]}, {"status": 500})
    with ScriptedLLM(script) as stub, _serving(library, stub) as server:
        events = _events(
            server.url,
            "POST",
            "/v1/chat",
            json={
                "messages": [{"role": "user", "content": "浅草寺はどこ？"}],
                "mode": "agent",
                "stream": True,
            },
        )
    assert [name for name, _ in events] == ["step", "error"]
    assert events[-1][1]["status"] == 503 and "no language model" in events[-1][1]["error"]


@pytest.mark.slow
def test_a_bug_mid_stream_ends_it_with_a_500_error_event_and_a_logged_traceback(
    library, monkeypatch, caplog
):
    from chiezo.answer import agent, rag

    def broken(*args, **kwargs):
        raise RuntimeError("the claim check broke")

    monkeypatch.setattr(rag.Prepared, "result", broken)
    monkeypatch.setattr(agent, "_finish", broken)
    expected = {
        "error": "internal error (RuntimeError)",
        "status": 500,
        "hint": "this is a bug; the server log has the details",
    }
    answer = scripted('{"queries": ["浅草寺"]}', "台東区にある [1]。")
    with ScriptedLLM(answer) as stub, _serving(library, stub) as server:
        rag_events = _events(server.url, "GET", "/v1/ask", params={"q": "浅草寺は？", "stream": 1})
    steps = in_turns(
        {"tool_calls": [tool_call("search", {"query": "浅草寺"})]}, {"content": "x [1]"}
    )
    with ScriptedLLM(steps) as stub, _serving(library, stub) as server:
        agent_events = _events(
            server.url, "GET", "/v1/ask", params={"q": "浅草寺は？", "mode": "agent", "stream": 1}
        )
    assert rag_events[0][0] == "references" and rag_events[-1] == ("error", expected)
    assert [name for name, _ in agent_events] == ["step", "error"]
    assert agent_events[-1][1] == expected
    logged = [r for r in caplog.records if r.exc_info and "claim check" in str(r.exc_info[1])]
    assert len(logged) == 2  # each with its traceback, for whoever reads the server log


@pytest.mark.slow
def test_cli_reports_a_model_that_stopped_mid_answer_and_exits_5(library):
    cut = {"content": "浅草寺は東京都台東区 [1]", "drop_after": 3}
    with ScriptedLLM(plan_then(cut)) as stub:
        result = run_ask(library, stub.url, "浅草寺はどこ？")
    assert result.exit_code == 5  # EXIT_NO_MODEL, from the error event's status 503
    assert result.stdout.startswith("浅草寺は東京都台東")  # what arrived stays on screen
    assert "stopped in the middle of the answer" in result.stderr


@pytest.mark.slow
def test_an_answer_cut_mid_stream_is_not_started_again_by_the_next_endpoint(library):
    cut = {"content": "浅草寺は東京都台東区にある [1]。", "drop_after": 2}
    with (
        ScriptedLLM(plan_then(cut)) as first,
        ScriptedLLM(plan_then({"content": "x [1]"})) as second,
    ):
        service = service_with(library, f"{first.url},{second.url}")
        events = list(answering.answer_events(service, "浅草寺はどこ？"))
    assert [name for name, _ in events] == ["references", "delta", "delta", "error"]
    assert not any(r.get("stream") for r in second.requests)  # the text sent is not sent twice
