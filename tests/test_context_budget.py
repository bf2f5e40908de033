"""Budgets in tokens fitted to the model's context, and errors that name the cause (issue #29,
items 3–4), against a scripted endpoint with a context window: what it says about itself
(``/props``, honest, lying or garbage), its ``/tokenize``, and the replies llama.cpp, OpenAI
and vLLM give a request that does not fit. In this stub a character is a token, so every
size can be checked exactly. The real llama.cpp at ``-c 2048`` and ``-c 4096`` is in
test_context_e2e.py."""

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from chiezo.answer.context import (
    estimate_tokens,
    from_models,
    from_ollama_show,
    from_props,
    overflow_of,
)
from chiezo.answer.options import AnswerOptions
from chiezo.core.config import Settings
from chiezo.core.errors import ConfigError, ContextExceeded, LLMTimeout, LLMUnavailable
from chiezo.ops import answering
from chiezo.ops.context import Context
from llm_stub import tool_call

from helpers import RunningServer, free_port, wiki_library

# a long Japanese article and a long English one: their excerpts fill any small context
_JA_LEAD = (
    "'''夏目漱石'''は日本の小説家、評論家、英文学者。1867年2月9日に江戸の牛込で生まれた。"
    "本名は金之助。代表作に『吾輩は猫である』『坊っちゃん』『こころ』がある。"
)
_JA_BODY = "".join(  # every section holds the question's words: every passage is evidence
    f"\n== 第{n}期 ==\n夏目漱石は{1890 + n}年に東京で作品を書き、生まれた牛込を訪ねた。"
    f"この時期の作品は{n}編あり、新聞に連載された。講演も各地で行った。" * 3
    for n in range(1, 16)
)
_EN_LEAD = (
    "'''Alabama''' is a state in the Southeastern region of the United States, bordered "
    "by Tennessee to the north and Georgia to the east. Its capital is Montgomery."
)
_EN_BODY = "".join(
    f"\n== Period {n} ==\nIn {1800 + n * 10} Alabama grew its farms and towns, and its "
    "rivers carried cotton to the Gulf of Mexico. " * 3
    for n in range(1, 16)
)
PAGES = [(1, "夏目漱石", _JA_LEAD + _JA_BODY), (2, "Alabama", _EN_LEAD + _EN_BODY)]
PLAN = '{"queries": ["夏目漱石"]}'
ANSWER = "夏目漱石は1867年に生まれた [1]。"


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return wiki_library(tmp_path_factory.mktemp("context"), PAGES)


def prompt_tokens(body: dict) -> int:
    """The stub's count: a character a token, five for each message's markup (what the tools'
    schemas take where its template renders them)."""
    tokens = 0
    for m in body["messages"]:
        tokens += len(m.get("content") or "") + 5
        tokens += sum(len(json.dumps(c.get("function", {}))) for c in m.get("tool_calls") or [])
    return tokens


def overflow_body(style: str, prompt: int, context: int) -> dict:
    """What each server answers (HTTP 400) to a prompt longer than its context."""
    if style == "llama.cpp":
        return {
            "error": {
                "code": 400,
                "type": "exceed_context_size_error",
                "message": f"request ({prompt} tokens) exceeds the available context "
                f"size ({context} tokens), try increasing it",
                "n_prompt_tokens": prompt,
                "n_ctx": context,
            }
        }
    if style == "openai":
        return {
            "error": {
                "message": f"This model's maximum context length is {context} tokens. "
                f"However, your messages resulted in {prompt} tokens. Please reduce "
                "the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    assert style == "vllm"
    return {
        "object": "error",
        "type": "BadRequestError",
        "param": None,
        "code": 400,
        "message": f"This model's maximum context length is {context} tokens. However, you "
        f"requested {prompt + 200} tokens ({prompt} in the messages, 200 in the "
        "completion). Please reduce the length of the messages or completion.",
    }


def default_reply(body: dict) -> dict:
    system = body["messages"][0]["content"]
    return {"content": PLAN if "search queries" in system else ANSWER}


class ContextStub:
    """An OpenAI-compatible endpoint with a real ``context`` (None: unlimited) that refuses a
    longer prompt as ``style`` does; ``says``: what ``GET /props`` answers (an int: llama.cpp's
    shape with that ``n_ctx``; a dict or a string: that body; None: 404); ``tokenize``: whether
    ``POST /tokenize`` counts. ``shrinking``: every refusal claims a context a little below the
    prompt it refuses (no cut is ever enough). ``reply(body)`` as llm_stub's: ``content``,
    ``tool_calls``, ``status``, ``raw`` (a body that is no chat completion), ``delay``,
    ``chunk_delay``, ``drop_after``."""

    def __init__(
        self,
        context=None,
        says=None,
        *,
        tokenize=True,
        style="llama.cpp",
        reply=None,
        shrinking=False,
        models=("stub-model",),
    ):
        self.context, self.says, self.style, self.shrinking = context, says, style, shrinking
        self.reply = reply or default_reply
        self.chats: list[dict] = []  # every chat request, with "tokens": the stub's count
        self.refused = 0
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                path = self.path.rstrip("/")
                if path.endswith("/v1/models"):
                    self._json(200, {"data": [{"id": m, "object": "model"} for m in models]})
                elif path == "/props" and stub.says is not None:
                    says = stub.says
                    if isinstance(says, int):
                        says = {
                            "default_generation_settings": {"n_ctx": says},
                            "total_slots": 1,
                            "chat_template_caps": {"supports_tools": False},
                        }
                    if isinstance(says, str):
                        self._raw(200, says)
                    else:
                        self._json(200, says)
                else:
                    self._json(404, {"error": {"message": "not found"}})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                if self.path == "/tokenize":
                    if tokenize:
                        self._json(200, {"tokens": list(range(len(body.get("content", ""))))})
                    else:
                        self._json(404, {"error": "not found"})
                    return
                tokens = prompt_tokens(body)
                stub.chats.append({**body, "tokens": tokens})
                limit = tokens - 50 if stub.shrinking else stub.context
                if limit is not None and tokens > limit:
                    stub.refused += 1
                    self._json(400, overflow_body(stub.style, tokens, limit))
                    return
                answer = stub.reply(body)
                time.sleep(answer.get("delay", 0))
                if "raw" in answer:
                    self._raw(200, answer["raw"])
                elif answer.get("status", 200) != 200:
                    self._json(answer["status"], {"error": {"message": "scripted failure"}})
                elif body.get("stream"):
                    self._stream(answer)
                else:
                    message = {"role": "assistant", "content": answer.get("content")}
                    if answer.get("tool_calls"):
                        message["tool_calls"] = answer["tool_calls"]
                    self._json(
                        200,
                        {
                            "model": models[0],
                            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                        },
                    )

            def _stream(self, answer):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                text = answer.get("content", "")
                for n, i in enumerate(range(0, len(text), 4)):
                    if n == answer.get("drop_after"):
                        return
                    chunk = {"choices": [{"index": 0, "delta": {"content": text[i : i + 4]}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(answer.get("chunk_delay", 0))
                self.wfile.write(b"data: [DONE]\n\n")

            def _json(self, status, data):
                self._raw(status, json.dumps(data), "application/json")

            def _raw(self, status, text, kind="text/html"):
                payload = text.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answers(self) -> list[dict]:
        """The chat requests that were not planning."""
        return [c for c in self.chats if "search queries" not in c["messages"][0]["content"]]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


def service(root, stub, **settings) -> Context:
    values = {"llm_timeout": 10, **settings}
    return Context(
        Settings(
            data_dir=root / "data",
            llm_url=stub.url if stub else None,
            llm_model="stub-model",
            **values,
        )
    )


def sse(url: str, method: str, path: str, **kwargs) -> tuple[int, list[tuple[str, dict]]]:
    with httpx.stream(method, f"{url}{path}", timeout=60, **kwargs) as response:
        lines = list(response.iter_lines())
        status = response.status_code
    if status != 200:
        return status, [("http", json.loads("".join(lines)))]
    names = [line[7:] for line in lines if line.startswith("event: ")]
    data = [json.loads(line[6:]) for line in lines if line.startswith("data: ")]
    return status, list(zip(names, data, strict=True))


def run_cli(root, url, *args, **env):
    from click.testing import CliRunner

    from chiezo.surfaces.cli.main import cli

    env = {"CHIEZO_LLM_URL": url or "", "CHIEZO_LLM_MODEL": "stub-model", **env}
    return CliRunner().invoke(cli, ["--data", str(root / "data"), *args], env=env)


# -- what an endpoint says, read leniently; what it refuses, recognised precisely ---------------


@pytest.mark.parametrize("style", ["llama.cpp", "openai", "vllm"])
def test_each_servers_overflow_reply_is_recognised_with_both_sizes(style):
    found = overflow_of(400, json.dumps(overflow_body(style, 4269, 4096)))
    assert (found.prompt_tokens, found.context_tokens) == (4269, 4096)


@pytest.mark.parametrize(
    "status, body",
    [
        (400, '{"error": {"message": "invalid value for \'context\': must be a string"}}'),
        (400, '{"error": {"message": "the context of this tool call is not valid JSON"}}'),
        (500, json.dumps(overflow_body("llama.cpp", 4269, 4096))),  # a 500 is no refusal to fit
        (404, '{"error": "model not found"}'),
        (400, "<html>Bad Request</html>"),
    ],
)
def test_a_reply_that_merely_mentions_context_is_not_an_overflow(status, body):
    assert overflow_of(status, body) is None


def test_llama_cpps_newer_wording_and_lm_studios_are_overflows_too():
    newer = {
        "error": {
            "code": 400,
            "message": "the request exceeds the available context size, try increasing it",
            "type": "exceed_context_size_error",
            "n_prompt_tokens": 5000,
            "n_ctx": 4096,
        }
    }
    assert overflow_of(400, json.dumps(newer)).context_tokens == 4096
    lm = {
        "error": "Trying to keep the first 5000 tokens when context the overflows. However, the "
        "model is loaded with context length of only 4096 tokens, which is not enough."
    }
    assert overflow_of(400, json.dumps(lm)).context_tokens == 4096


def test_what_an_endpoint_says_about_its_context_is_read_and_garbage_is_no_figure():
    # llama.cpp: default_generation_settings.n_ctx is one slot's share already (measured)
    assert from_props({"default_generation_settings": {"n_ctx": 2048}, "total_slots": 2}) == (
        2048,
        2,
    )
    assert from_props({"n_ctx": 8192, "total_slots": 4}) == (2048, 4)  # the whole, divided
    for garbage in (
        "<html>",
        None,
        [],
        {"default_generation_settings": {"n_ctx": "lots"}},
        {"default_generation_settings": {"n_ctx": -1}},
        {"n_ctx": True},
        {"default_generation_settings": {"n_ctx": 10**12}},
        {"n_ctx": 12},
    ):
        assert from_props(garbage) is None, garbage
    llama = {"data": [{"id": "local", "meta": {"n_ctx": 2048, "n_ctx_train": 8192}}]}
    assert (
        from_models(llama, "local") == 2048
    )  # what the server gives, not what it was trained with
    vllm = {"data": [{"id": "a", "max_model_len": 8192}, {"id": "b", "max_model_len": 32768}]}
    assert from_models(vllm, "b") == 32768 and from_models({"data": "x"}, None) is None
    assert from_ollama_show({"parameters": "temperature 0.7\nnum_ctx 8192"}) == 8192
    assert from_ollama_show({"model_info": {"qwen2.context_length": 2048}}) == 2048
    assert from_ollama_show({"model_info": {"llama.context_length": 131072}}) == 4096  # default


def test_the_estimate_per_script_is_what_smollm2s_tokenizer_measured():
    # "夏目漱石は日本の小説家である。": 29 tokens through llama.cpp's /tokenize (design.md §31.2)
    assert 29 <= estimate_tokens("夏目漱石は日本の小説家である。") <= 32
    english = "The capital of Alabama is Montgomery, and Birmingham is the largest city."
    assert 14 <= estimate_tokens(english) <= 20  # 14 measured
    assert estimate_tokens("") == 0


def test_the_new_settings_are_read_from_the_environment_and_checked(monkeypatch):
    monkeypatch.setenv("CHIEZO_LLM_CONTEXT", "4096")
    monkeypatch.setenv("CHIEZO_PLAN_TIMEOUT", "15")
    monkeypatch.setenv("CHIEZO_AGENT_DEADLINE", "90")
    settings = Settings.from_env()
    assert (settings.llm_context, settings.plan_timeout, settings.agent_deadline) == (4096, 15, 90)
    assert AnswerOptions().resolved(settings).deadline == 90  # the agent's deadline is a setting
    for name, value in (
        ("CHIEZO_LLM_CONTEXT", "4k"),
        ("CHIEZO_LLM_CONTEXT", "-1"),
        ("CHIEZO_PLAN_TIMEOUT", "0"),
        ("CHIEZO_AGENT_DEADLINE", "99999"),
    ):
        monkeypatch.setenv(name, value)
        with pytest.raises(ConfigError, match=name):
            Settings.from_env()
        monkeypatch.delenv(name)


# -- rag: fitted before asking, cut once on an overflow reply ------------------------------------


@pytest.mark.slow
def test_a_known_context_fits_the_excerpts_before_the_model_is_asked_and_says_so(library):
    with ContextStub(context=1200, says=1200) as stub:
        result = answering.ask(
            service(library, stub), "夏目漱石はいつ生まれましたか？", max_tokens=200
        )
    assert result.answer == ANSWER and stub.refused == 0
    (asked,) = stub.answers()
    assert asked["tokens"] <= 1200 - 200  # room left for the whole answer
    fitted = [w for w in result.warnings if w.startswith("excerpts fitted")]
    assert fitted and "1,200 tokens per request (llama.cpp /props)" in fitted[0]


@pytest.mark.slow
def test_without_a_figure_the_configured_budget_is_used_and_nothing_is_said(library):
    for says in (None, "<html>props</html>", {"default_generation_settings": {"n_ctx": "lots"}}):
        with ContextStub(says=says) as stub:
            result = answering.ask(service(library, stub), "夏目漱石はいつ生まれましたか？")
        assert result.answer == ANSWER and not any("fitted" in w for w in result.warnings)
        assert sum(len(m["content"]) for m in stub.answers()[0]["messages"]) > 2000


@pytest.mark.slow
def test_chiezo_llm_context_is_the_figure_where_the_endpoint_gives_none(library):
    with ContextStub(context=1500, says=None, tokenize=False) as stub:
        result = answering.ask(
            service(library, stub, llm_context=1500),
            "夏目漱石はいつ生まれましたか？",
            max_tokens=200,
        )
    assert stub.refused == 0 and stub.answers()[0]["tokens"] <= 1500 - 200
    assert any("1,500 tokens per request (CHIEZO_LLM_CONTEXT)" in w for w in result.warnings)


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True], ids=["ask", "stream"])
@pytest.mark.parametrize("style", ["llama.cpp", "openai", "vllm"])
def test_a_props_that_lies_is_corrected_by_the_overflow_reply_once_and_said(library, style, stream):
    question = "夏目漱石はいつ生まれましたか？"
    with ContextStub(context=1200, says=32768, style=style) as stub:
        svc = service(library, stub)
        if stream:
            events = list(answering.answer_events(svc, question, max_tokens=200))
            assert events[-1][0] == "done", events[-1]
            result = events[-1][1]
            assert "".join(d["text"] for n, d in events if n == "delta") == ANSWER
        else:
            result = answering.ask(svc, question, max_tokens=200).to_dict()
    first, again = stub.answers()  # asked exactly twice
    assert first["tokens"] > 1200 >= again["tokens"] and stub.refused == 1
    said = [w for w in result["warnings"] if "smaller than expected" in w]
    assert said and f"the request took {first['tokens']:,} tokens of its 1,200" in said[0]
    assert result["answer"] == ANSWER and result["references"][0]["title"] == "夏目漱石"


@pytest.mark.slow
@pytest.mark.parametrize("style", ["llama.cpp", "openai", "vllm"])
def test_a_second_overflow_is_a_413_naming_both_sizes_on_every_surface(library, style):
    from chiezo.surfaces.rest import create_app

    question = "夏目漱石はいつ生まれましたか？"
    with ContextStub(shrinking=True, style=style) as stub:
        with pytest.raises(ContextExceeded) as caught:
            answering.ask(service(library, stub), question)
        assert len(stub.answers()) == 2  # cut once, asked once more, then the error
        error = caught.value.to_dict()
        assert error["status"] == 413 and error["cause"] == "context_exceeded"
        assert error["prompt_tokens"] > error["context_tokens"] > 0
        assert f"{error['prompt_tokens']:,}" in error["error"] and error["hint"]
        assert error["excerpts"][0]["title"] == "夏目漱石"  # what was found is handed over
        with RunningServer(create_app(service(library, stub).settings)) as server:
            rest = httpx.get(f"{server.url}/v1/ask", params={"q": question}, timeout=60)
            status, events = sse(server.url, "GET", "/v1/ask", params={"q": question, "stream": 1})
        assert rest.status_code == 413 and rest.json()["context_tokens"] > 0
        assert status == 200 and events[0][0] == "references" and events[-1][0] == "error"
        assert events[-1][1]["status"] == 413 and events[-1][1]["cause"] == "context_exceeded"
        cli = run_cli(library, stub.url, "ask", question)
    assert cli.exit_code == 1 and "does not fit the context" in cli.stderr


@pytest.mark.slow
@pytest.mark.parametrize("says", [1200, None], ids=["context-known", "context-unknown"])
def test_a_question_longer_than_the_context_is_a_clear_413_never_a_500(library, says):
    from chiezo.surfaces.rest import create_app

    question = "夏目漱石について" + "詳しく教えてください。" * 150  # 1,658 characters
    with ContextStub(context=1200, says=says) as stub:
        with pytest.raises(ContextExceeded) as caught:
            answering.ask(service(library, stub), question)
        if says:  # known: refused before any model is asked
            assert stub.chats == []
            assert (
                "the question take" in caught.value.message
                and "1,200 tokens" in caught.value.message
            )
        with RunningServer(create_app(service(library, stub).settings)) as server:
            rest = httpx.get(f"{server.url}/v1/ask", params={"q": question}, timeout=60)
            status, events = sse(
                server.url,
                "POST",
                "/v1/chat",
                json={"messages": [{"role": "user", "content": question}], "stream": True},
            )
        cli = run_cli(library, stub.url, "ask", question)
    assert rest.status_code == 413 and rest.json()["cause"] == "context_exceeded"
    if says:  # refused before the stream: a real HTTP error
        assert status == 413 and events[0][1]["context_tokens"] == 1200
    else:
        assert events[-1][1]["status"] == 413
    assert cli.exit_code == 1 and "error:" in cli.stderr and "Traceback" not in cli.output


@pytest.mark.slow
def test_a_long_conversation_loses_its_oldest_turns_to_fit_and_says_so(library):
    history = []
    for n in range(2):
        history += [
            {"role": "user", "content": f"質問{n}: " + "漱石の作品について。" * 20},
            {"role": "assistant", "content": f"回答{n}: " + "多くの作品がある [1]。" * 20},
        ]
    with ContextStub(context=2000, says=2000) as stub:
        result = answering.ask(
            service(library, stub), "生まれた年は？", history=history, max_tokens=200
        )
    (asked,) = stub.answers()
    assert asked["tokens"] <= 2000 - 200 and stub.refused == 0  # the planner's request fitted too
    assert any("oldest messages were left out" in w for w in result.warnings)
    sent = json.dumps(asked["messages"], ensure_ascii=False)
    assert "質問1" in sent and "質問0" not in sent  # the latest turn stays, the oldest went


# -- agent: tool results fitted, the conversation compacted ---------------------------------------


def agent_script(body: dict) -> dict:
    if body.get("tools") and not any(m["role"] == "tool" for m in body["messages"]):
        return {"tool_calls": [tool_call("doc", {"source": "jawiki", "title": "夏目漱石"})]}
    return {"content": ANSWER}


@pytest.mark.slow
def test_agent_tool_results_are_fitted_to_a_known_context(library):
    # the agent's instructions alone are ~2,600 characters: a 4,000-token context leaves ~1,200
    with ContextStub(context=4000, says=4000, reply=agent_script) as stub:
        result = answering.ask(
            service(library, stub), "夏目漱石はいつ生まれましたか？", mode="agent", max_tokens=200
        )
    assert stub.refused == 0 and all(c["tokens"] <= 4000 - 200 for c in stub.chats)
    assert result.answer == ANSWER and result.steps[0]["tool"] == "doc"
    assert any(w.startswith("tool results fitted") for w in result.warnings)


@pytest.mark.slow
def test_a_small_context_gets_the_compact_tools_and_results_within_its_budget(library):
    """Issue #44: the full tool set's schemas and instructions took most of a 4k context; the
    agent offers the compact profile there by itself, and each tool answers within the
    result budget as JSON (cut lists saying how to read on), not cut text."""
    from chiezo.ops.tool_profiles import PROFILES

    offered = {}
    for context in (4000, 65536):  # this stub counts a token a character
        with ContextStub(context=context, says=context, reply=agent_script) as stub:
            result = answering.ask(
                service(library, stub),
                "夏目漱石はいつ生まれましたか？",
                mode="agent",
                max_tokens=200,
            )
        with_tools = [b for b in stub.chats if b.get("tools")]
        offered[context] = {t["function"]["name"] for t in with_tools[0]["tools"]}
        assert result.answer == ANSWER, context
        answered = next(m for m in stub.chats[-1]["messages"] if m["role"] == "tool")
        body = answered["content"].split("\ncite as: ")[0]
        assert len(body) <= result.steps[0]["result_chars"] + 1 and json.loads(body)["title"]
    assert offered[4000] <= set(PROFILES["compact"].tools)
    assert offered[4000] < offered[65536]


@pytest.mark.slow
def test_agent_overflow_reply_cuts_the_tool_results_and_asks_once_more(library):
    with ContextStub(context=4000, says=32768, reply=agent_script) as stub:
        result = answering.ask(
            service(library, stub), "夏目漱石はいつ生まれましたか？", mode="agent", max_tokens=200
        )
    assert stub.refused == 1 and result.answer == ANSWER
    assert any("tool results were cut and the model asked again" in w for w in result.warnings)


@pytest.mark.slow
def test_agent_second_overflow_is_the_error(library):
    with ContextStub(shrinking=True, reply=agent_script) as stub, pytest.raises(ContextExceeded):
        answering.ask(service(library, stub), "夏目漱石はいつ生まれましたか？", mode="agent")


# -- deadlines: which stage, after how long, which setting ----------------------------------------


@pytest.mark.slow
def test_a_slow_planner_gives_way_to_keywords_after_chiezo_plan_timeout(library):
    def slow_plan(body):
        planning = "search queries" in body["messages"][0]["content"]
        return {"content": PLAN, "delay": 3} if planning else {"content": ANSWER}

    with ContextStub(reply=slow_plan) as stub:
        result = answering.ask(
            service(library, stub, plan_timeout=1), "夏目漱石はいつ生まれましたか？", plan="model"
        )
    assert result.planner == "keywords" and result.answer == ANSWER
    assert any("planning within 1 s (CHIEZO_PLAN_TIMEOUT)" in w for w in result.warnings)


@pytest.mark.slow
def test_an_answer_past_its_deadline_is_a_504_naming_the_stage_and_setting(library):
    from chiezo.surfaces.rest import create_app

    def slow(body):
        planning = "search queries" in body["messages"][0]["content"]
        return {"content": PLAN} if planning else {"content": ANSWER, "delay": 3}

    with ContextStub(reply=slow) as stub:
        with pytest.raises(LLMTimeout) as caught:
            answering.ask(service(library, stub, llm_timeout=1), "夏目漱石はいつ生まれましたか？")
        with RunningServer(create_app(service(library, stub, llm_timeout=1).settings)) as server:
            rest = httpx.get(f"{server.url}/v1/ask", params={"q": "夏目漱石は？"}, timeout=60)
    error = caught.value.to_dict()
    assert error["status"] == 504 and error["cause"] == "timeout"
    assert (error["stage"], error["seconds"], error["setting"]) == (
        "the answer",
        1,
        "CHIEZO_LLM_TIMEOUT",
    )
    assert "did not finish the answer within 1 s (CHIEZO_LLM_TIMEOUT)" in error["error"]
    assert rest.status_code == 504 and rest.json()["setting"] == "CHIEZO_LLM_TIMEOUT"


@pytest.mark.slow
def test_a_stream_that_trickles_past_the_deadline_is_stopped(library):
    trickle = {"content": "夏目漱石は1867年に生まれた。" * 10, "chunk_delay": 0.25}
    reply = lambda body: trickle if body.get("stream") else {"content": PLAN}  # noqa: E731
    with ContextStub(reply=reply) as stub:
        started = time.monotonic()
        events = list(
            answering.answer_events(service(library, stub, llm_timeout=1), "夏目漱石は？")
        )
    assert time.monotonic() - started < 8  # not the 18 s the whole would take
    assert events[-1][0] == "error" and events[-1][1]["status"] == 504
    assert "had not finished the answer within 1 s" in events[-1][1]["error"]


@pytest.mark.slow
def test_the_agents_deadline_is_a_setting_named_when_it_runs_out(library):
    slow = lambda body: {"content": ANSWER, "delay": 7}  # noqa: E731
    with ContextStub(reply=slow) as stub:
        result = answering.ask(
            service(library, stub, agent_deadline=1), "夏目漱石は？", mode="agent"
        )
    # the run out of time answers from what Chiezo looked up itself, saying why (issue #43)
    assert result.stopped == "timeout" and result.model is None and result.references
    said = " ".join(result.warnings)
    assert "the agent's run within" in said and "CHIEZO_AGENT_DEADLINE" in said


# -- endpoints that are down, or answer garbage ---------------------------------------------------


@pytest.mark.slow
def test_an_unreachable_endpoint_is_named_as_such(library):
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(LLMUnavailable) as caught:
        answering.ask(Context(Settings(data_dir=library / "data", llm_url=dead)), "夏目漱石は？")
    error = caught.value.to_dict()
    assert error["cause"] == "unreachable" and dead in error["error"] and error["status"] == 503
    assert "connection refused" in error["error"]


@pytest.mark.slow
@pytest.mark.parametrize("stream", [False, True], ids=["ask", "stream"])
def test_an_endpoint_answering_garbage_is_said_to_and_is_no_500(library, stream):
    garbage = lambda body: {"raw": "<html><body>It works!</body></html>"}  # noqa: E731
    with ContextStub(reply=garbage) as stub:
        svc = service(library, stub)
        if stream:
            events = list(answering.answer_events(svc, "夏目漱石は？"))
            error = events[-1][1]
            assert events[-1][0] == "error"
        else:
            with pytest.raises(LLMUnavailable) as caught:
                answering.ask(svc, "夏目漱石は？")
            error = caught.value.to_dict()
    assert error["status"] == 503
    assert (
        "not a chat completion" in error["error"]
        or "not a stream of chat completion" in error["error"]
    )


@pytest.mark.slow
def test_a_stream_closed_midway_is_said_to_be_cut_short(library):
    cut = {"content": "夏目漱石は1867年に生まれた [1]。", "drop_after": 2}
    reply = lambda body: cut if body.get("stream") else {"content": PLAN}  # noqa: E731
    with ContextStub(reply=reply) as stub:
        events = list(answering.answer_events(service(library, stub), "夏目漱石は？"))
    assert events[-1][0] == "error" and events[-1][1]["cause"] == "cut_short"


# -- chiezo doctor and the web chat ----------------------------------------------------------------


@pytest.mark.slow
def test_doctor_shows_the_context_and_whether_the_default_budget_fits_it(library):
    from chiezo.ops.doctor import check

    with ContextStub(says=1200) as small, ContextStub(says=32768) as large, ContextStub() as mute:
        rows = {
            n: {r["check"]: r for r in check(service(library, s))}
            for n, s in (("small", small), ("large", large), ("mute", mute))
        }
    small_row = rows["small"]["model context"]
    assert small_row["ok"] and not small_row["fits"] and "does not fit" in small_row["detail"]
    assert (
        "1,200 tokens per request (llama.cpp /props)" in small_row["detail"] and small_row["hint"]
    )
    assert (
        rows["large"]["model context"]["fits"]
        and "fits" in rows["large"]["model context"]["detail"]
    )
    endpoint = next(r for name, r in rows["small"].items() if name.startswith("model endpoint"))
    assert "1,200 tokens of context" in endpoint["detail"]
    assert "CHIEZO_LLM_CONTEXT" in rows["mute"]["model context"]["hint"]
    with ContextStub(says=600) as tiny:  # no room for excerpts at all: a failure
        row = {r["check"]: r for r in check(service(library, tiny))}["model context"]
    assert not row["ok"] and "no room" in row["detail"]


@pytest.mark.slow
def test_the_web_chat_names_the_cause_of_a_failed_answer(library):
    from chiezo.surfaces.rest import create_app

    from helpers import browser_page, chromium

    with (
        ContextStub(shrinking=True) as stub,
        RunningServer(create_app(service(library, stub).settings)) as server,
        chromium() as browser,
    ):
        page = browser_page(browser, server.url)
        page.goto(server.url + "/chat")
        page.fill("#chat-input", "夏目漱石はいつ生まれましたか？")
        page.press("#chat-input", "Enter")
        page.wait_for_selector("li.message.assistant[data-state=done]")
        alert = page.locator("li.message.assistant p.error")
        said, cause = alert.inner_text(), alert.get_attribute("data-cause")
        shown = page.locator("li.message.assistant").inner_text()
        page.context.close()
    assert cause == "context_exceeded" and "文脈長" in said  # the cause, in the page's language
    assert "トークン" in shown and "CHIEZO_ANSWER_BUDGET" in shown  # the sizes and what to change
    assert not page.errors


@pytest.mark.slow
def test_the_chat_and_admin_pages_show_the_context_the_endpoint_says(library):
    from chiezo.surfaces.rest import create_app

    from helpers import browser_page, chromium

    with (
        ContextStub(says=3072) as stub,
        RunningServer(create_app(service(library, stub).settings)) as server,
        chromium() as browser,
    ):
        page = browser_page(browser, server.url)
        page.goto(server.url + "/chat")
        page.wait_for_function(
            "() => /3,072/.test(document.querySelector('#chat-model-line').textContent)"
        )
        page.goto(server.url + "/admin")
        page.wait_for_function(
            "() => /3,072/.test(document.querySelector('#llm-status').textContent)"
        )
        status = page.locator("#llm-status").inner_text()
        page.context.close()
    assert "3,072" in status and "llama.cpp /props" in status and "トークン" in status
    assert not page.errors
