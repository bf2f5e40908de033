"""A small model's answer, guarded (issue #43): one model call per first question, a stream
that loops stopped where it begins, deadlines for the first piece and the whole answer, and
every failure still returning what the library found — against a scripted OpenAI-compatible
server on loopback that misbehaves as real small models and servers do."""

import time

import pytest
from click.testing import CliRunner

from chiezo.core.config import Settings
from chiezo.core.errors import LLMTimeout
from chiezo.ops import answering
from chiezo.ops.context import Context
from chiezo.surfaces.cli.main import cli
from llm_stub import ScriptedLLM

from helpers import wiki_library

# a scripted model server and a built library each: left out of `make test-fast`
# (the guards themselves are tested fast in test_repetition.py)
pytestmark = pytest.mark.slow

PAGES = [
    (
        1,
        "島根県",
        "'''島根県'''は日本の中国地方に位置する県。県庁所在地は松江市である。"
        "人口は約65万人。出雲大社がある。",
    ),
    (
        2,
        "パリ",
        "'''パリ'''はフランスの首都。セーヌ川が流れる。2011年現在、人口は約225万人である。"
        "墓地にはペール・ラシェーズ墓地がある。",
    ),
    (
        3,
        "愛媛県",
        "'''愛媛県'''は四国の県。県庁所在地は松山市。夏目漱石の小説『坊っちゃん』の舞台である。",
    ),
]
QUESTION = "島根県の県庁所在地は？"


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    return wiki_library(tmp_path_factory.mktemp("guards"), PAGES)


def service(root, url, **settings) -> Context:
    values = {"llm_timeout": 10, **settings}
    return Context(Settings(data_dir=root / "data", llm_url=url, llm_model="stub-model", **values))


def planning(body) -> bool:
    return "search queries" in body["messages"][0]["content"]


# -- one call per answer ------------------------------------------------------------------------


def test_a_first_question_costs_one_model_call(library):
    with ScriptedLLM(lambda body: {"content": "松江市です [1]。"}) as stub:
        result = answering.ask(service(library, stub.url), QUESTION)
    assert result.planner == "keywords" and len(stub.requests) == 1
    assert not planning(stub.requests[0]) and result.answer == "松江市です [1]。"
    assert [c["stage"] for c in result.to_dict()["calls"]] == ["the answer"]


def test_the_model_plans_when_asked_and_for_a_follow_up_that_leans_on_the_chat(library):
    def reply(body):
        return {"content": '{"queries": ["島根県"]}' if planning(body) else "松江市 [1]。"}

    with ScriptedLLM(reply) as stub:
        asked = answering.ask(service(library, stub.url), QUESTION, plan="model")
        history = [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "x"}]
        follow_up = answering.ask(service(library, stub.url), "その人口は？", history=history)
        named = answering.ask(service(library, stub.url), "パリの人口は？", history=history)
    assert asked.planner == "model" and follow_up.planner == "model"
    assert named.planner == "keywords"  # it names its own subject: no planning call
    assert sum(planning(b) for b in stub.requests) == 2


def test_an_unknown_planner_is_a_usage_error(library):
    result = CliRunner().invoke(cli, ["--data", str(library / "data"), "ask", "x", "--plan", "llm"])
    assert result.exit_code == 2 and "llm" in result.output


# -- no basis -------------------------------------------------------------------------------------


def test_a_subject_the_library_has_no_article_about_gets_the_named_reply_without_a_model(library):
    question = "夏目漱石はいつ生まれましたか？"
    with ScriptedLLM(lambda body: {"content": "1867年です [1]。"}) as stub:
        result = answering.ask(service(library, stub.url), question)
    assert stub.requests == [] and result.no_basis
    assert "「夏目漱石」" in result.answer and "「愛媛県」" in result.answer
    offline = CliRunner().invoke(cli, ["--data", str(library / "data"), "ask", question])
    assert offline.exit_code == 3 and "夏目漱石" in offline.output


def test_a_subject_the_library_has_is_answered(library):
    with ScriptedLLM(lambda body: {"content": "松山市です [1]。"}) as stub:
        result = answering.ask(service(library, stub.url), "愛媛県の県庁所在地はどこですか？")
    assert not result.no_basis and len(stub.requests) == 1


# -- loops ----------------------------------------------------------------------------------------


def test_a_stream_that_loops_is_stopped_where_the_loop_begins(library):
    looping = "県庁所在地は松江市です [1]。" + "ハワイ州では、" * 3000
    with ScriptedLLM(lambda body: {"content": looping, "chunk_delay": 0.002}) as stub:
        events = list(answering.answer_events(service(library, stub.url), QUESTION))
    done = dict(events)["done"]
    assert done["answer"] == "県庁所在地は松江市です [1]。" and done["stopped"] == "loop"
    assert any("repeating" in w for w in done["warnings"])
    # read no further than the loop's third copy: of ~5,000 pieces, a few dozen
    assert sum(name == "delta" for name, _ in events) < 60


def test_the_answer_request_carries_the_sampling_guards(library):
    with ScriptedLLM(lambda body: {"content": "松江市 [1]。"}) as stub:
        answering.ask(service(library, stub.url), QUESTION)
    (body,) = stub.requests
    assert body["frequency_penalty"] > 0 and body["stream_options"] == {"include_usage": True}


# -- unusable replies: the library's sentences stand in -----------------------------------------


@pytest.mark.parametrize("reply, why", [("   \n\n ", "empty"), ("</think>", "empty"),
                                        (QUESTION, "echo"), ("The answer is: " + QUESTION, "echo"),
                                        ("Answer the question using ONLY the numbered sources "
                                         "below. Cite every fact with its source number.", "echo")])  # fmt: skip
def test_an_unusable_reply_has_the_librarys_sentences_stand_in(library, reply, why):
    with ScriptedLLM(lambda body: {"content": reply}) as stub:
        result = answering.ask(service(library, stub.url), QUESTION).to_dict()
    assert result["stopped"] == why and result["model"] is None
    first = result["answer_sentences"][0]
    assert "松江市" in first["text"] and first["ref"] == 1
    assert "松江市" in result["answer"] and "[1]" in result["answer"]


def test_an_unusable_reply_exits_1_with_the_librarys_sentences_printed(library):
    with ScriptedLLM(lambda body: {"content": QUESTION}) as stub:
        result = CliRunner().invoke(
            cli,
            ["--data", str(library / "data"), "ask", QUESTION],
            env={"CHIEZO_LLM_URL": stub.url, "CHIEZO_LLM_MODEL": "stub-model"},
        )
    assert result.exit_code == 1
    assert "said the question back" in result.output and "松江市" in result.output


def test_no_first_token_in_time_is_a_bounded_error_that_carries_the_findings(library):
    with ScriptedLLM(lambda body: {"content": "late", "delay": 10}) as stub:
        started = time.monotonic()
        with pytest.raises(LLMTimeout) as caught:
            answering.ask(service(library, stub.url, first_token_timeout=1), QUESTION)
        assert time.monotonic() - started < 8  # bounded well before the reply would come
    error = caught.value.to_dict()
    assert error["cause"] == "first_token" and "CHIEZO_LLM_FIRST_TOKEN_TIMEOUT" in error["hint"]
    assert "松江市" in error["answer_sentences"][0]["text"] and error["excerpts"]


def test_a_stream_that_never_ends_stops_at_the_deadline_with_the_findings(library):
    slow = "県庁所在地は松江市です [1]。" + "".join(f"{n}番目の話" for n in range(400))
    with ScriptedLLM(lambda body: {"content": slow, "chunk_delay": 0.05}) as stub:
        started = time.monotonic()
        events = list(answering.answer_events(service(library, stub.url, llm_timeout=2), QUESTION))
        assert time.monotonic() - started < 12  # the whole stream would take ~30 s
    name, error = events[-1]
    assert name == "error" and error["cause"] == "timeout" and error["status"] == 504
    assert "松江市" in error["answer_sentences"][0]["text"] and error["excerpts"]


def test_a_failed_answer_prints_the_librarys_sentences_first(library):
    with ScriptedLLM(lambda body: {"status": 500}) as stub:
        result = CliRunner().invoke(
            cli,
            ["--data", str(library / "data"), "ask", "パリの人口は？"],
            env={"CHIEZO_LLM_URL": stub.url, "CHIEZO_LLM_MODEL": "stub-model"},
        )
    assert result.exit_code == 5
    says = result.output.index("What the library says:")
    assert result.output.index("225万人", says) < result.output.index("Found in the library")


def test_without_a_model_ask_prints_the_answering_sentence_first(library):
    result = CliRunner().invoke(cli, ["--data", str(library / "data"), "ask", "パリの人口は？"])
    assert result.exit_code == 2
    lines = result.output.split("What the library says:")[1].strip().splitlines()
    assert "225万人" in lines[0] and "[" in lines[0]


# -- agent mode ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_an_agent_out_of_time_still_returns_what_its_tools_found(library):
    from llm_stub import in_turns, tool_call

    slow = {"content": "too late", "delay": 8}
    script = in_turns({"tool_calls": [tool_call("search", {"query": "島根県"})]}, slow)
    with ScriptedLLM(script) as stub:
        result = answering.ask(
            service(library, stub.url), QUESTION, mode="agent", deadline=9
        ).to_dict()
    assert result["stopped"] == "timeout" and result["model"] is None
    assert result["references"][0]["title"] == "島根県"
    assert "松江市" in result["answer_sentences"][0]["text"] and "[1]" in result["answer"]
    assert any("ran out of time" in w for w in result["warnings"])
    assert len(stub.requests) == 3  # the step, the step that ran late, the final answer


def test_every_ask_is_recorded_even_one_whose_reader_left(library):
    with ScriptedLLM(lambda body: {"content": "松江市です [1]。", "chunk_delay": 0.05}) as stub:
        svc = service(library, stub.url)
        before = svc.answers_log.entries()["total"]
        events = answering.answer_events(svc, QUESTION, log_as="web")
        assert next(events)[0] == "references"
        events.close()  # the page was closed
    late = ScriptedLLM(lambda body: {"content": "late", "delay": 3})
    with late, pytest.raises(LLMTimeout):
        answering.ask(service(library, late.url, first_token_timeout=0.5), QUESTION, log_as="cli")
    entries = svc.answers_log.entries()["entries"][: svc.answers_log.entries()["total"] - before]
    assert [e["cause"] for e in entries] == ["first_token", "abandoned"]


def test_an_answer_in_another_language_and_unsupported_shows_what_the_library_says(library):
    invented = "The capital is Osaka, a large city [1]."
    with ScriptedLLM(lambda body: {"content": invented}) as stub:
        result = CliRunner().invoke(
            cli,
            ["--data", str(library / "data"), "ask", QUESTION],
            env={"CHIEZO_LLM_URL": stub.url, "CHIEZO_LLM_MODEL": "stub-model"},
        )
    assert result.exit_code == 0  # not --strict: the doubts are warnings
    assert "answered in English a question asked in Japanese" in result.output
    says = result.output.index("What the library says:")
    assert result.output.index("松江市", says) > says
