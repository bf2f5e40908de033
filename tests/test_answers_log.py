"""The record of what was asked and answered (ops/answers_log.py, issue #34 item 5): the CLI,
the API (JSON and streamed) and so the web chat write to it; `chiezo logs` lists and searches
it, `off`/`on`/`clear`; a request from beyond this machine is kept only when the server has a
token — tried as such a client would (a forwarded request), against the scripted endpoint."""

import json
import stat

import httpx
import pytest
from click.testing import CliRunner

from chiezo.core.config import Settings
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app
from llm_stub import ScriptedLLM

from helpers import RunningServer, wiki_library

PAGES = [
    (
        1,
        "夏目漱石",
        "'''夏目漱石'''は日本の小説家。1867年2月9日に江戸の牛込で生まれた。"
        "代表作に『坊っちゃん』がある。",
    ),
]
QUESTION = "夏目漱石はいつ生まれましたか？"


def reply(body):
    if "search queries" in body["messages"][0]["content"]:
        return {"content": '{"queries": ["夏目漱石"]}'}
    return {"content": "夏目漱石は1867年2月9日に生まれた [1]。"}


@pytest.fixture
def library(tmp_path):
    return wiki_library(tmp_path, PAGES)


def logs(root, *args):
    run = CliRunner().invoke(cli, ["--data", str(root / "data"), "logs", *args])
    assert run.exit_code == 0, run.output
    return run


def kept(root, words: str | None = None) -> dict:
    return json.loads(logs(root, *(["--search", words] if words else []), "--json").stdout)


@pytest.mark.slow
def test_a_cli_answer_is_kept_listed_and_searched_and_the_record_can_stop(library):
    with ScriptedLLM(reply) as llm:
        env = {"CHIEZO_LLM_URL": llm.url, "CHIEZO_LLM_MODEL": "stub-model"}

        def ask():
            run = CliRunner().invoke(cli, ["--data", str(library / "data"), "ask", QUESTION],
                                     env=env)  # fmt: skip
            assert run.exit_code == 0, run.output

        ask()
        (entry,) = kept(library)["entries"]
        assert entry["question"] == QUESTION and entry["surface"] == "cli"
        assert entry["mode"] == "rag" and entry["model"] == "stub-model"
        assert entry["answer"] == "夏目漱石は1867年2月9日に生まれた [1]。"
        assert [c["title"] for c in entry["cited"]] == ["夏目漱石"]
        assert entry["grounded"] and entry["claims"]["supported"] == 1 and entry["seconds"] > 0
        assert kept(library, "1867年")["total"] == 1 and kept(library, "芥川")["total"] == 0
        assert "夏目漱石" in logs(library).stdout
        logs(library, "off")
        ask()
        assert kept(library)["total"] == 1 and kept(library)["enabled"] is False
        logs(library, "on")
        ask()
        assert kept(library)["total"] == 2
    folder = library / "data" / "logs"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "answers.db").stat().st_mode) == 0o600
    assert "deleted 2" in logs(library, "clear", "--yes").stdout
    assert kept(library)["total"] == 0
    assert "夏目漱石".encode() not in (folder / "answers.db").read_bytes()  # gone from the file


@pytest.mark.slow
@pytest.mark.parametrize("token", [None, "s3cret-token-for-tests"])
def test_the_api_keeps_what_this_machine_asks_and_others_only_with_a_token(library, token):
    with ScriptedLLM(reply) as llm:
        settings = Settings(
            data_dir=library / "data", llm_url=llm.url, llm_model="stub-model", token=token
        )
        with RunningServer(create_app(settings)) as server:
            asked = httpx.get(f"{server.url}/v1/ask", params={"q": QUESTION}, timeout=30)
            assert asked.status_code == 200, asked.text
            chat = {"messages": [{"role": "user", "content": QUESTION}], "stream": True}
            streamed = httpx.post(f"{server.url}/v1/chat", json=chat, timeout=30)
            assert "event: done" in streamed.text
            # the same, forwarded by a proxy: a client elsewhere
            elsewhere = {"X-Forwarded-For": "203.0.113.9"}
            remote = httpx.get(f"{server.url}/v1/ask", params={"q": QUESTION}, headers=elsewhere,
                               timeout=30)  # fmt: skip
            assert remote.status_code == 200, remote.text
    entries = kept(library)["entries"]
    assert [e["surface"] for e in entries] == ["api"] * (3 if token else 2)
    assert all(e["question"] == QUESTION and e["cited"] for e in entries)
