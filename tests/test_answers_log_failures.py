"""The record of answers keeps the asks that failed too (issue #43: "`chiezo logs` kept 1 of
8 asks: failed ones leave no record"): each with its cause, its message, the text written
before it failed and the timings of each model call; an answers.db made before these columns
gains them. The errors recorded are the real client's, against the scripted endpoint."""

import contextlib
import json
import sqlite3

import pytest
from click.testing import CliRunner

from chiezo.answer.llm import Endpoint, LLMClient, Stage
from chiezo.core.config import Settings
from chiezo.core.errors import LLMNotConfigured, LLMTimeout
from chiezo.ops import answering
from chiezo.ops.answers_log import AnswersLog, failure_of
from chiezo.ops.context import Context
from chiezo.surfaces.cli.main import cli
from llm_stub import ScriptedLLM

from helpers import wiki_library

QUESTION = "夏目漱石はいつ生まれましたか？"
CALLS = [
    {"stage": "planning", "seconds": 0.8, "first_token_s": None, "tokens_in": 212,
     "tokens_out": 14, "finish": "stop"},
    {"stage": "the answer", "seconds": 30.0, "first_token_s": 1.25, "tokens_in": 1412,
     "tokens_out": 96, "finish": "length"},
]  # fmt: skip


def timed_out() -> LLMTimeout:
    """What the real client raises when the model takes longer than the stage may."""
    with ScriptedLLM(lambda body: {"content": "late", "delay": 1.5}) as stub:
        client = LLMClient([Endpoint(stub.url, "stub-model")], timeout=0.3)
        with pytest.raises(LLMTimeout) as caught:
            client.chat([{"role": "user", "content": QUESTION}], stage=Stage("the answer", 0.3,
                        "CHIEZO_LLM_TIMEOUT"))  # fmt: skip
    return caught.value


def logs(data, *args):
    run = CliRunner().invoke(cli, ["--data", str(data), "logs", *args])
    assert run.exit_code == 0, run.output
    return run.stdout


def test_a_failed_ask_is_kept_with_its_cause_and_calls_and_logs_shows_it(tmp_path):
    data = tmp_path / "data"
    record = AnswersLog(data)
    error = timed_out()
    record.record_error(QUESTION, error, mode="rag", seconds=0.31, surface="cli",
                        model="stub-model", answer="夏目漱石は")  # fmt: skip
    record.record_failure("東京タワーの高さは？", mode="agent", seconds=31.2, surface="api",
                          cause="timeout", message="the model did not finish", calls=CALLS)  # fmt: skip
    found = json.loads(logs(data, "--json"))
    assert found["total"] == 2 and found["failures"] == 2
    second, first = found["entries"]
    assert first["failed"] and first["cause"] == "timeout" and first["model"] == "stub-model"
    assert first["error"] == error.message and "0.3 s" in first["error"]
    assert first["answer"] == "夏目漱石は" and first["cited"] == [] and not first["grounded"]
    assert second["calls"] == CALLS and second["mode"] == "agent"
    shown = logs(data)
    assert shown.count("FAILED: timeout") == 2 and "2 of 2 asks, 2 failed or stopped" in shown
    assert f"error: {error.message}" in shown and "A (before it failed): 夏目漱石は" in shown
    assert "model call: the answer 30.0 s, first token 1.2 s, 1,412 → 96 tokens, length" in shown
    assert "model call: planning 0.8 s, 212 → 14 tokens, stop" in shown
    # its message is searched too, and the failures can be listed alone
    assert json.loads(logs(data, "--search", "finish", "--json"))["total"] == 2
    assert json.loads(logs(data, "--search", "東京タワー", "--json"))["total"] == 1


def test_an_answer_keeps_its_calls_and_the_failures_are_listed_alone(tmp_path):
    library = wiki_library(tmp_path, [(1, "夏目漱石", "'''夏目漱石'''は1867年に生まれた。")])
    with ScriptedLLM(lambda body: {"content": "1867年 [1]"}) as stub:
        settings = Settings(data_dir=library / "data", llm_url=stub.url, llm_model="stub-model")
        answer = answering.ask(Context(settings), QUESTION).to_dict()
    record = AnswersLog(settings.data_dir)
    record.record({**answer, "calls": CALLS[1:]}, mode="rag", seconds=1.5, surface="cli")
    record.record_error(QUESTION, LLMNotConfigured("no endpoint"), mode="rag", seconds=0.0,
                        surface="cli")  # fmt: skip
    found = json.loads(logs(settings.data_dir, "--json"))
    failure, answered = found["entries"]
    assert not answered["failed"] and answered["cause"] is None and answered["calls"] == CALLS[1:]
    assert answered["answer"] == "1867年 [1]" and answered["cited"]
    assert failure["cause"] == "llm_not_configured"  # an error without a cause: by its kind
    only = json.loads(logs(settings.data_dir, "--failed", "--json"))
    assert only["total"] == 1 and only["entries"][0]["id"] == failure["id"]
    shown = logs(settings.data_dir)
    assert "FAILED: llm_not_configured" in shown and "A: 1867年 [1]" in shown
    assert "model call: the answer 30.0 s" in shown


def test_an_answer_the_model_did_not_finish_is_kept_with_why(tmp_path):
    library = wiki_library(tmp_path, [(1, "夏目漱石", "'''夏目漱石'''は1867年に生まれた。")])
    with ScriptedLLM(lambda body: {"content": "1867年 [1]"}) as stub:
        settings = Settings(data_dir=library / "data", llm_url=stub.url, llm_model="stub-model")
        answer = answering.ask(Context(settings), QUESTION).to_dict()
    # what the answering code says of an answer it stopped (answer/rag.py: loop, timeout…)
    stopped = {**answer, "stopped": "loop", "calls": CALLS[1:]}
    AnswersLog(settings.data_dir).record(stopped, mode="rag", seconds=1.2, surface="cli")
    (entry,) = json.loads(logs(settings.data_dir, "--failed", "--json"))["entries"]
    assert entry["cause"] == "loop" and entry["error"] is None and entry["failed"]
    assert entry["answer"] == "1867年 [1]" and entry["calls"] == CALLS[1:]
    shown = logs(settings.data_dir)
    assert "STOPPED: loop" in shown and "FAILED" not in shown and "A: 1867年 [1]" in shown


def test_what_a_failure_is_read_from_an_error_its_stream_event_or_a_bug():
    error = timed_out()
    assert failure_of(error) == {"cause": "timeout", "message": error.message, "calls": None,
                                 "model": None}  # fmt: skip
    event = {**error.to_dict(), "calls": CALLS}  # a stream's `error` event, with its calls
    assert failure_of(event) == {"cause": "timeout", "message": error.message, "calls": CALLS,
                                 "model": None}  # fmt: skip
    with pytest.raises(LLMNotConfigured) as caught:
        LLMClient([])
    assert failure_of(caught.value)["cause"] == "llm_not_configured"
    bug = failure_of(KeyError("secret"))
    assert bug["cause"] == "internal_error" and "secret" not in bug["message"]


# the table as the first record of answers made it (issue #34 item 5)
OLD_SCHEMA = """
CREATE TABLE answers (
    id INTEGER PRIMARY KEY, at TEXT NOT NULL, surface TEXT NOT NULL, question TEXT NOT NULL,
    mode TEXT NOT NULL, model TEXT, answer TEXT NOT NULL, cited TEXT NOT NULL,
    grounded INTEGER NOT NULL, no_basis INTEGER NOT NULL, claims TEXT NOT NULL,
    seconds REAL NOT NULL
);
INSERT INTO answers VALUES (1, '2025-01-01T00:00:00+00:00', 'cli', 'old question', 'rag',
    'm', 'old answer', '[]', 1, 0, '{"supported": 1, "unsupported": 0, "uncited": 0}', 2.0);
"""


def test_an_answers_db_made_before_the_new_columns_gains_them(tmp_path):
    data = tmp_path / "data"
    (data / "logs").mkdir(parents=True)
    with contextlib.closing(sqlite3.connect(data / "logs" / "answers.db")) as conn, conn:
        conn.executescript(OLD_SCHEMA)
    record = AnswersLog(data)
    (old,) = record.entries()["entries"]
    assert old["answer"] == "old answer" and old["cause"] is None and old["calls"] == []
    record.record_failure("new question", mode="rag", seconds=1.0, surface="cli",
                          cause="unreachable", message="no endpoint answered")  # fmt: skip
    found = record.entries()
    assert found["total"] == 2 and found["failures"] == 1
    assert found["entries"][0]["cause"] == "unreachable"
    with contextlib.closing(sqlite3.connect(data / "logs" / "answers.db")) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(answers)")}
    assert {"cause", "error", "calls"} <= columns


def test_a_failure_is_not_kept_while_the_record_is_off(tmp_path):
    record = AnswersLog(tmp_path / "data")
    record.turn(False)
    record.record_failure(QUESTION, mode="rag", seconds=1.0, surface="cli", cause="timeout",
                          message="late")  # fmt: skip
    record.turn(True)
    assert record.entries()["total"] == 0
