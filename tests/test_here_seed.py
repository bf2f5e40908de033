"""The GeoAI seed's three questions, end to end: GSI's shelter table and disaster-lore points in
their published formats (tests/data/gsi) built through ``chiezo ingest places``, answered from
the person's attached location by the agent with a scripted model — the nearest monument with no
radius asked, flood shelters within 2 km, and a monument found by the person's own words whose
disaster type then chooses the shelters (carried over from the library, not guessed)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from chiezo.answer.tool_calls import call_tool
from chiezo.core.config import Settings
from chiezo.core.here import Here
from chiezo.ops import answering
from chiezo.ops.context import Context
from chiezo.surfaces.cli.main import cli
from llm_stub import ScriptedLLM, in_turns, tool_call

from helpers import data_file

# by 川口市立栄町小学校 (tests/data/gsi/shelters.csv) — a point of no row, so its digits in
# anything written are the location leaking
LAT, LON = 35.80337, 139.72071


def located() -> Here:
    return Here(LAT, LON, datetime.now(UTC) - timedelta(seconds=3), 15.0)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("seed")
    runner = CliRunner()
    env = {"CHIEZO_DATA": str(folder / "data")}
    for args in (
        ["ingest", "places", str(data_file("gsi/shelters.csv")), "--name", "shelters",
         "--flag-key", "災害種別", "--require-feature", "災害種別"],
        ["ingest", "places", str(data_file("gsi/lore.geojson")), "--name", "lore"],
    ):  # fmt: skip
        done = runner.invoke(cli, args, env=env)
        assert done.exit_code == 0, done.output
    return folder


def ask(root: Path, url: str, question: str) -> object:
    ctx = Context(Settings(data_dir=root / "data", llm_url=url, llm_model="stub-model",
                           llm_timeout=5))  # fmt: skip
    return answering.ask(ctx, question, mode="agent", location=located())


def tool_texts(stub: ScriptedLLM) -> list[str]:
    return [m["content"] for m in stub.requests[-1]["messages"] if m["role"] == "tool"]


def test_the_nearest_monument_needs_no_radius(root):
    script = in_turns(
        {"tool_calls": [tool_call("filter", {"source": "lore", "near": "here", "limit": 5})]},
        {"content": "最も近いのは関東大震災殉難者供養塔です [1]。"},
    )
    with ScriptedLLM(script) as stub:
        result = ask(root, stub.url, "最も近い自然災害伝承碑を教えて")
    assert not result.needs and result.cited == [1]
    assert result.references[0]["title"] == "関東大震災殉難者供養塔"
    found = json.loads(tool_texts(stub)[0].split("\ncite as:")[0])
    distances = [d["distance_km"] for d in found["docs"]]
    assert distances == sorted(distances) and "straight line" in found["near"]["distance"]
    # the first match quoted in its own words, the places nearest first, the plain words
    assert "「大正12年の大地震で" in result.answer and "直線距離" in result.answer
    assert "LAT" not in result.answer and str(LAT) not in json.dumps(stub.requests)


def test_flood_shelters_within_two_km(root):
    args = {"source": "shelters", "near": "here", "radius_km": 2, "feature": ["災害種別=洪水"]}
    script = in_turns(
        {"tool_calls": [tool_call("filter", args)]},
        {"content": "洪水のときは川口市立栄町小学校へ [1]。"},
    )
    with ScriptedLLM(script) as stub:
        result = ask(root, stub.url, "2km以内で、洪水のときの避難場所は？")
    found = json.loads(tool_texts(stub)[0].split("\ncite as:")[0])
    # the flood-designated rows of shelters.csv within 2 km, nearest first
    assert [d["title"] for d in found["docs"]] == ["川口市立栄町小学校", "川口市立領家中学校"]
    assert all(d["distance_km"] <= 2 for d in found["docs"])
    assert result.references[0]["title"] == "川口市立栄町小学校" and result.cited == [1]
    assert "開設状況" in result.answer  # a shelter's opening and room are not known


def test_shelters_without_a_disaster_type_are_asked_back(root):
    script = in_turns(
        {
            "tool_calls": [
                tool_call("filter", {"source": "shelters", "near": "here", "radius_km": 2})
            ]
        },
        {"content": "避難場所は芝小学校です [1]。"},
    )
    with ScriptedLLM(script) as stub:
        result = ask(root, stub.url, "2km以内の避難場所は？")
    assert result.needs[0]["what"] == "feature" and result.needs[0]["key"] == "災害種別"
    assert "洪水" in result.needs[0]["choices"] and "どの種類" in result.answer
    assert len(stub.requests) == 1  # asked the person, not the model, and guessed nothing


def test_a_radius_is_asked_back_for_what_lies_around(root):
    with ScriptedLLM() as stub:
        result = ask(root, stub.url, "近くの避難場所を教えて")
    assert [n["what"] for n in result.needs] == ["radius"] and stub.requests == []


def test_the_chained_question_carries_the_disaster_type_over_from_the_monument(root):
    words = "川の堤防が切れて町が水につかった記録"
    script = in_turns(
        {
            "tool_calls": [
                tool_call(
                    "search", {"query": words, "source": "lore", "near": "here", "radius_km": 10}
                )
            ]
        },  # fmt: skip
        # the model forgets the type at first: refused with the choices, not asked back —
        # the monument it found says 洪水
        {
            "tool_calls": [
                tool_call("filter", {"source": "shelters", "near": "here", "radius_km": 10}, "c2")
            ]
        },  # fmt: skip
        {
            "tool_calls": [
                tool_call(
                    "filter",
                    {
                        "source": "shelters",
                        "near": "here",
                        "radius_km": 10,
                        "feature": ["災害種別=洪水"],
                    },
                    "c3",
                )
            ]
        },  # fmt: skip
        {
            "content": "明治四十三年水害記念碑は荒川の決壊を伝えています [1]。洪水のときは栄町小学校へ [2]。"
        },
    )
    question = f"{words}の碑を10km以内で探して、その災害のときの避難場所も教えて"
    with ScriptedLLM(script) as stub:
        result = ask(root, stub.url, question)
    texts = tool_texts(stub)
    assert (
        "明治四十三年水害記念碑" in texts[0].split("\n")[0] or "明治四十三年水害記念碑" in texts[0]
    )
    assert '"needs"' in texts[1] and "洪水" in texts[1]  # the refusal went to the model
    assert not result.needs and result.cited == [1, 2]
    titles = [r["title"] for r in result.references]
    assert titles[0] == "明治四十三年水害記念碑" and "川口市立栄町小学校" in titles
    assert str(LAT) not in json.dumps(stub.requests)


def ask_rag(root: Path, url: str, question: str) -> object:
    ctx = Context(Settings(data_dir=root / "data", llm_url=url, llm_model="stub-model",
                           llm_timeout=5))  # fmt: skip
    return answering.ask(ctx, question, mode="rag", location=located())


def test_rag_asks_the_disaster_type_when_the_shelters_match_and_none_is_named(root):
    with ScriptedLLM() as stub:
        result = ask_rag(root, stub.url, "2km以内の避難場所は？")
    assert [n["what"] for n in result.needs] == ["feature"] and "どの種類" in result.answer
    assert "洪水" in result.needs[0]["choices"] and stub.requests == []


def test_rag_takes_the_disaster_type_the_question_names(root):
    with ScriptedLLM(in_turns({"content": "栄町小学校です [1]。"})) as stub:
        result = ask_rag(root, stub.url, "2km以内で、洪水のときの避難場所は？")
    titles = [r["title"] for r in result.references]
    assert titles and set(titles) <= {"川口市立栄町小学校", "川口市立領家中学校"}  # flood ones
    assert "直線" in result.answer and not result.needs


def test_the_agents_own_search_looks_around_the_person(root):
    # the model answers before looking anything up: Chiezo searches, around the person
    script = in_turns({"content": "わかりません。"}, {"content": "栄町小学校です [1]。"})
    with ScriptedLLM(script) as stub:
        result = ask(root, stub.url, "2km以内で、洪水のときの避難場所は？")
    first, *again = [s for s in result.steps if s.get("by") == "chiezo"]
    assert first["arguments"]["near"] == "here" and first["arguments"]["radius_km"] == 2.0
    assert "2km" not in first["arguments"]["query"]
    # the shelters matched and want a kind: that source filtered for the one the question names
    (narrowed,) = [s for s in again if s["tool"] == "filter"]
    assert narrowed["arguments"]["source"] == "shelters"
    assert narrowed["arguments"]["feature"] == ["災害種別=洪水"]
    titles = {r["title"] for r in result.references}
    assert titles and titles <= {"川口市立栄町小学校", "川口市立領家中学校"}
    assert all(r["distance_km"] <= 2 for r in result.references)


def test_the_agents_own_search_asks_the_type_a_matching_source_requires(root):
    with ScriptedLLM(in_turns({"content": "わかりません。"})) as stub:
        result = ask(root, stub.url, "2km以内の避難場所は？")
    assert [n["what"] for n in result.needs] == ["feature"] and "洪水" in result.answer
    assert len(stub.requests) == 1  # the person is asked; the model is not asked again


def test_a_refusal_cut_to_a_small_context_still_asks_back(root):
    # a small model's context cuts each tool result the model reads (here to 200 characters,
    # shorter than the refusal): what the person is asked is read from the whole refusal
    call = tool_call("filter", {"source": "shelters", "near": "here", "radius_km": 2})
    with ScriptedLLM(in_turns({"tool_calls": [call]})) as stub:
        ctx = Context(Settings(data_dir=root / "data", llm_url=stub.url, llm_model="stub-model",
                               llm_timeout=5))  # fmt: skip
        result = answering.ask(
            ctx, "2km以内の避難場所は？", mode="agent", location=located(), result_chars=200
        )
    assert [n["what"] for n in result.needs] == ["feature"] and "洪水" in result.needs[0]["choices"]


def test_a_small_contexts_share_keeps_a_place_before_the_echo_of_the_request(root):
    from chiezo.core.here import attached
    from chiezo.ops.tools import toolbox

    ctx = Context(Settings(data_dir=root / "data"))
    tools = {t.name: t for t in toolbox(ctx, writable=False, profile="compact").tools}
    asked = {"near": "here", "radius_km": 2.0, "source": "shelters",
             "feature": ["災害種別=洪水"], "max_chars": 200}  # fmt: skip
    with attached(located()):
        outcome = call_tool(tools["filter"], asked)
    assert len(outcome.text) <= 200 and outcome.data["docs"][0]["title"] == "川口市立栄町小学校"
    assert outcome.data["docs"][0]["distance_km"] < 0.1  # how far, kept with its name
