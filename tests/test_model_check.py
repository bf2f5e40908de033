"""What `chiezo doctor`, /v1/llm and the web chat header say of a model endpoint (issue #43
item 7): "FAIL … no model named 'smollm2' here" while answers streamed from that very endpoint.
llama.cpp's server lists its model under the GGUF path or its --alias and answers a request
naming any model with the one it serves; Ollama and vLLM refuse an unknown name with a 404.
So a name that is not listed is tried with a real 1-token request before it is called missing.

Both kinds are the scripted OpenAI-compatible server on loopback (tests/llm_stub.py): as it
is, it refuses an unknown name (Ollama); given ``AnyName`` it answers every name with the
one it lists (llama.cpp, whose reply names the model it served, as the real one does —
tests/test_answer_e2e.py checks that against llama.cpp itself)."""

import json

import pytest
from click.testing import CliRunner

from chiezo.answer.llm import Endpoint, LLMClient, answering_model
from chiezo.core.config import Settings
from chiezo.ops import operating
from chiezo.ops.context import Context
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest.app import labelled_models
from llm_stub import ScriptedLLM

from helpers import wiki_library

PAGES = [(1, "浅草寺", "'''浅草寺'''は東京都台東区浅草にある寺院。")]
GGUF = "/srv/models/SmolLM2-135M-Instruct-Q4_K_M.gguf"


class AnyName(list):
    """The models a llama.cpp server lists, and what it accepts: every name."""

    def __contains__(self, name) -> bool:
        return True


def llama_like(*listed: str) -> ScriptedLLM:
    stub = ScriptedLLM(models=listed)
    stub.models = AnyName(listed)
    return stub


def checked(url: str, model: str) -> dict:
    return LLMClient([Endpoint(url, model)]).check(Endpoint(url, model))


def test_a_name_llama_cpp_does_not_list_but_answers_is_usable_and_says_with_what():
    with llama_like("local") as stub:
        found = checked(stub.url, "smollm2")
        again = checked(stub.url, "smollm2")
    assert found["ok"] and found["models"] == ["local"] and found["model"] == "local"
    assert found["note"] == "'smollm2' is not listed; this endpoint answers it with 'local'"
    (tried,) = stub.requests  # one real request, of one token, under the configured name
    assert tried["model"] == "smollm2" and tried["max_tokens"] == 1 and not tried["stream"]
    assert again == found  # the status asked again (each chat page load) sends no second one


def test_a_name_ollama_refuses_is_a_failure_naming_the_models_there_are():
    with ScriptedLLM(models=("qwen3:8b", "llama3.2")) as stub:
        found = checked(stub.url, "smollm2")
    assert not found["ok"] and found["models"] == ["qwen3:8b", "llama3.2"]
    assert found["problem"].startswith("no model named 'smollm2' here")
    assert "model" not in found and len(stub.requests) == 1


def test_a_listed_name_is_not_tried_and_a_failing_try_is_no_pass():
    with ScriptedLLM(models=("smollm2",)) as stub:
        listed = checked(stub.url, "smollm2")
    assert listed["ok"] and listed["model"] == "smollm2" and "note" not in listed
    assert stub.requests == []  # listed: nothing to try
    with llama_like("local") as broken:
        broken.reply = lambda body: {"status": 500}
        found = checked(broken.url, "smollm2")
    assert not found["ok"] and "a 1-token request naming it answered HTTP 500" in found["problem"]


def test_the_model_that_answered_is_the_listed_one_the_reply_names_else_the_only_one():
    assert answering_model("local", ["other", "local"], "smollm2") == "local"
    # an older llama.cpp echoes the name asked for: its one model answered
    assert answering_model("smollm2", [GGUF], "smollm2") == GGUF
    # several listed, the reply names none of them: it cannot be told which
    assert answering_model("smollm2", ["a", "b"], "smollm2") == "smollm2"


@pytest.fixture
def library(tmp_path):
    return wiki_library(tmp_path, PAGES)


def doctor(library, url: str, model: str):
    env = {"CHIEZO_LLM_URL": url, "CHIEZO_LLM_MODEL": model}
    text = CliRunner().invoke(cli, ["--data", str(library / "data"), "doctor"], env=env)
    rows = CliRunner().invoke(cli, ["--data", str(library / "data"), "doctor", "--json"], env=env)
    endpoint = next(
        r for r in json.loads(rows.stdout)["checks"] if r["check"].startswith("model endpoint")
    )
    return text, endpoint


def test_doctor_passes_what_answers_the_name_and_fails_what_refuses_it(library):
    with llama_like("local") as llama, ScriptedLLM(models=("qwen3:8b",)) as ollama:
        passed, row = doctor(library, llama.url, "smollm2")
        failed, refused = doctor(library, ollama.url, "smollm2")
    assert passed.exit_code == 0 and "FAIL" not in passed.stdout, passed.stdout
    assert row["ok"] and row["detail"].startswith("model 'local' answers (listed: local)")
    assert "'smollm2' is not listed; this endpoint answers it with 'local'" in row["detail"]
    assert row["hint"] == "to name it as the endpoint does, set CHIEZO_LLM_MODEL=local"
    assert failed.exit_code == 1 and "FAIL" in failed.stdout
    assert not refused["ok"] and "no model named 'smollm2' here" in refused["detail"]
    assert refused["hint"] == "models there: qwen3:8b"


def test_the_status_beyond_loopback_names_the_answering_model_in_the_note_too(tmp_path):
    with llama_like(GGUF) as stub:
        settings = Settings(data_dir=tmp_path / "data", llm_url=stub.url, llm_model="smollm2")
        status = operating.llm_status(Context(settings))
    assert status["model"] == GGUF  # the model that answers, not the name it was asked by
    shown = labelled_models(status)
    assert "/srv" not in json.dumps(shown)
    assert shown["model"] == "SmolLM2-135M-Instruct (Q4_K_M)"
    assert shown["endpoints"][0]["note"] == (
        "'smollm2' is not listed; this endpoint answers it with 'SmolLM2-135M-Instruct (Q4_K_M)'"
    )


@pytest.mark.slow
def test_the_web_chat_header_shows_the_model_used_and_the_models_listed(library):
    from chiezo.surfaces.rest import create_app

    from helpers import RunningServer, browser_page, chromium

    lines = {}
    with llama_like(GGUF, "other") as llama, ScriptedLLM(models=("qwen3:8b",)) as ollama:
        for name, stub in (("llama", llama), ("ollama", ollama)):
            settings = Settings(data_dir=library / "data", llm_url=stub.url, llm_model="smollm2")
            with RunningServer(create_app(settings)) as server, chromium() as browser:
                page = browser_page(browser, server.url)
                page.goto(server.url + "/chat")
                page.wait_for_function(
                    "() => document.querySelector('#chat-model-line').textContent"
                )
                lines[name] = page.locator("#chat-model-line").inner_text()
                assert not page.errors
                page.context.close()
    # the answering model (the reply names the first listed), the note, then what is listed
    used, note, listed = lines["llama"].split(" · ")
    assert used == "SmolLM2-135M-Instruct (Q4_K_M)" and GGUF not in lines["llama"]
    assert note == (
        "'smollm2' is not listed; this endpoint answers it with 'SmolLM2-135M-Instruct (Q4_K_M)'"
    )
    assert listed.endswith("SmolLM2-135M-Instruct (Q4_K_M), other")
    assert "no model named 'smollm2' here" in lines["ollama"] and "qwen3:8b" in lines["ollama"]
