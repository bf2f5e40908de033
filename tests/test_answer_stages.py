"""Where the time of an answer goes: each answer's ``stages`` — the plan, each search, the
excerpts, each tool call (agent), each model call, in the order they began, seconds each and
the tokens the endpoint reported — in the Answer, in a stream's ``done`` event, in a failure's
error and in the record of answers (``chiezo logs`` shows them). Against the scripted
OpenAI-compatible server, made to report ``usage`` as llama.cpp and vLLM do."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from click.testing import CliRunner

from chiezo.core.config import Settings
from chiezo.core.errors import LLMUnavailable
from chiezo.ops import answering
from chiezo.ops.context import Context
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app
from llm_stub import ScriptedLLM, in_turns, tool_call

from helpers import RunningServer, wiki_library

PAGES = [
    (
        1,
        "浅草寺",
        "'''浅草寺'''は東京都台東区浅草にある寺。山号は金龍山。628年に創建されたと伝わる。",
    ),
    (
        2,
        "東京タワー",
        "'''東京タワー'''は東京都港区芝公園にある電波塔。高さは333メートル。",
    ),
]
QUESTION = "浅草寺はどこにある？"
KEYS = {"stage", "name", "seconds", "tokens_in", "tokens_out"}


def usage_of(n: int) -> dict[str, int]:
    """What the stub reports for its ``n``-th request (1-based): each call its own counts."""
    return {"prompt_tokens": 1000 * n + 7, "completion_tokens": 10 * n + 3}


class Reporting(ScriptedLLM):
    """The scripted server, its replies carrying ``usage``: a plain reply in its body, a
    stream in a last chunk with no choices (``stream_options.include_usage``)."""

    def __init__(self, reply: Callable[[dict], dict]) -> None:
        super().__init__(reply)
        stub, base = self, self.server.RequestHandlerClass

        class Handler(base):  # type: ignore[misc, valid-type]
            def _json(self, status: int, data: dict) -> None:
                if status == 200 and "choices" in data:
                    data = {**data, "usage": usage_of(len(stub.requests))}
                super()._json(status, data)

            def _stream(self, text: str, chunk_delay: float = 0.0, drop_after: Any = None) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                chunks = [
                    {"choices": [{"index": 0, "delta": {"content": text[i : i + 4]}}]}
                    for i in range(0, len(text), 4)
                ]
                chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
                chunks.append({"choices": [], "usage": usage_of(len(stub.requests))})
                for chunk in chunks:
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                self.wfile.write(b"data: [DONE]\n\n")

        self.server.RequestHandlerClass = Handler


def planned(answer: dict) -> Callable[[dict], dict]:
    """The model's plan (its system prompt asks for search queries) names 浅草寺; the
    streamed answer is ``answer``."""

    def reply(body: dict) -> dict:
        if "search queries" in body["messages"][0]["content"]:
            return {"content": '{"queries": ["浅草寺"]}'}
        return answer

    return reply


ONE_TOOL_CALL = (
    {"tool_calls": [tool_call("search", {"query": "浅草寺", "source": "jawiki"})]},
    {"content": "浅草寺は東京都台東区にある [1]。"},
)


@pytest.fixture
def library(tmp_path: Path) -> Path:
    return wiki_library(tmp_path, PAGES)


def context(root: Path, url: str) -> Context:
    return Context(
        Settings(data_dir=root / "data", llm_url=url, llm_model="stub-model", llm_timeout=5)
    )


def kept(root: Path) -> list[dict[str, Any]]:
    run = CliRunner().invoke(cli, ["--data", str(root / "data"), "logs", "--json"])
    assert run.exit_code == 0, run.output
    return json.loads(run.stdout)["entries"]


def model_tokens(stages: list[dict]) -> list[tuple[int | None, int | None]]:
    return [(s["tokens_in"], s["tokens_out"]) for s in stages if s["stage"] == "model"]


def reported(*ns: int) -> list[tuple[int, int]]:
    return [(usage_of(n)["prompt_tokens"], usage_of(n)["completion_tokens"]) for n in ns]


def well_formed(stages: list[dict]) -> None:
    for stage in stages:
        assert set(stage) == KEYS and isinstance(stage["name"], str)
        assert isinstance(stage["seconds"], float) and stage["seconds"] >= 0
        assert stage["seconds"] == round(stage["seconds"], 3)


def test_a_rag_answer_times_its_plan_searches_excerpts_and_model_calls(library: Path) -> None:
    with Reporting(planned({"content": "浅草寺は東京都台東区にある [1]。"})) as stub:
        ctx = context(library, stub.url)
        result = answering.ask(ctx, QUESTION, plan="model", log_as="cli")
    stages = result.stages
    well_formed(stages)
    assert [s["stage"] for s in stages] == ["plan", "model", "search", "excerpts", "model"]
    assert stages[0]["name"] == "model" and stages[2]["name"] == "浅草寺"
    assert [s["name"] for s in stages if s["stage"] == "model"] == ["planning", "the answer"]
    assert stages[3]["name"].startswith("1 of ")  # one excerpt, of the documents found
    assert model_tokens(stages) == reported(1, 2)  # the endpoint's counts, each its own call
    # the model calls are derived from the calls recorded, not timed a second time
    calls = [c["seconds"] for c in result.to_dict()["calls"]]
    assert [s["seconds"] for s in stages if s["stage"] == "model"] == calls
    assert result.to_dict()["stages"] == stages
    (entry,) = kept(library)
    assert entry["stages"] == stages and entry["mode"] == "rag"
    shown = CliRunner().invoke(cli, ["--data", str(library / "data"), "logs"]).stdout
    assert "stages: plan model" in shown and "search 浅草寺" in shown
    assert "model the answer" in shown and "2,007 → 23 tokens" in shown


def test_nothing_found_still_has_its_stages_and_no_model_stage(library: Path) -> None:
    with Reporting(planned({"content": "unused"})) as stub:
        result = answering.ask(context(library, stub.url), "火星の衛星は何個？")
    assert result.no_basis and stub.requests == []
    assert [s["stage"] for s in result.stages][0] == "plan"
    assert "model" not in {s["stage"] for s in result.stages}
    assert result.stages[-1]["stage"] == "excerpts"


def test_an_agent_answer_times_its_tool_call_between_its_model_calls(library: Path) -> None:
    with Reporting(in_turns(*ONE_TOOL_CALL)) as stub:
        result = answering.ask(context(library, stub.url), QUESTION, mode="agent", log_as="cli")
    stages = result.stages
    well_formed(stages)
    assert [s["stage"] for s in stages] == ["model", "tool", "model"]
    tool = stages[1]
    assert tool["name"] == "search" and tool["seconds"] >= 0
    assert tool["tokens_in"] is None and tool["tokens_out"] is None
    assert tool["seconds"] == pytest.approx(result.steps[0]["ms"] / 1000, abs=1e-3)
    assert model_tokens(stages) == reported(1, 2)
    assert result.calls and len(result.calls) == 2  # the agent's calls are kept too now
    (entry,) = kept(library)
    assert entry["stages"] == stages and entry["mode"] == "agent"


def serving(root: Path, stub: ScriptedLLM) -> RunningServer:
    """The REST API over ``root``'s library, answering with ``stub``."""
    return RunningServer(create_app(context(root, stub.url).settings))


def done_event(url: str, params: dict[str, Any]) -> dict[str, Any]:
    with httpx.stream("GET", f"{url}/v1/ask", params=params, timeout=30) as response:
        assert response.status_code == 200
        lines = list(response.iter_lines())
    names = [line[7:] for line in lines if line.startswith("event: ")]
    assert names[-1] == "done", names
    return json.loads([line for line in lines if line.startswith("data: ")][-1][6:])


@pytest.mark.slow
def test_a_streamed_answer_ends_with_its_stages_and_keeps_them(library: Path) -> None:
    reply = planned({"content": "浅草寺は東京都台東区にある [1]。"})
    with Reporting(reply) as stub, serving(library, stub) as server:
        done = done_event(server.url, {"q": QUESTION, "stream": 1, "plan": "model"})
    well_formed(done["stages"])
    assert [s["stage"] for s in done["stages"]] == ["plan", "model", "search", "excerpts", "model"]
    assert model_tokens(done["stages"]) == reported(1, 2)
    (entry,) = kept(library)
    assert entry["stages"] == done["stages"]
    with Reporting(in_turns(*ONE_TOOL_CALL)) as stub, serving(library, stub) as server:
        done = done_event(server.url, {"q": QUESTION, "stream": 1, "mode": "agent"})
    assert [(s["stage"], s["name"]) for s in done["stages"]][1] == ("tool", "search")
    assert model_tokens(done["stages"]) == reported(1, 2)
    assert kept(library)[0]["stages"] == done["stages"]


def test_a_failed_answer_carries_the_stages_before_it(library: Path) -> None:
    with Reporting(planned({"status": 500})) as stub, pytest.raises(LLMUnavailable) as caught:
        answering.ask(context(library, stub.url), QUESTION, plan="model", log_as="cli")
    stages = caught.value.extras["stages"]
    assert [s["stage"] for s in stages] == ["plan", "model", "search", "excerpts", "model"]
    assert model_tokens(stages)[0] == reported(1)[0]  # the plan was answered and counted
    assert stages[-1]["name"] == "the answer" and stages[-1]["tokens_out"] is None  # refused
    assert caught.value.extras["calls"][-1]["finish"] == "HTTP 500"
    (entry,) = kept(library)
    assert entry["failed"] and entry["stages"] == stages
