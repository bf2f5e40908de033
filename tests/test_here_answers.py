"""Questions about where the person is, answered with their attached location: asked back
before anything is guessed, the location used by the tools and never by the model, distances
said to be straight lines, the location refused once old and kept in no file."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from chiezo.answer import here_answers
from chiezo.core.config import Settings
from chiezo.core.here import Here
from chiezo.ingest.places import PlaceOptions
from chiezo.ops import answering, building
from chiezo.ops.context import Context
from chiezo.surfaces.rest import create_app
from chiezo.surfaces.rest.security import Security
from llm_stub import ScriptedLLM, in_turns, tool_call

from helpers import RunningServer

PARKS = """名称,種別,住所,緯度,経度,説明
川口駅前公園,公園,埼玉県川口市栄町3丁目,35.80180,139.71930,駅前の小さな公園。噴水がある。
芝川緑地,公園,埼玉県川口市本町4丁目,35.79640,139.72530,芝川沿いの緑地。桜並木が続く。
鳩ヶ谷公園,公園,埼玉県川口市桜町2丁目,35.83100,139.74000,丘の上の公園。
大宮公園,公園,埼玉県さいたま市大宮区高鼻町4丁目,35.91800,139.63300,大きな公園。
"""
# the person's place: a point no document has, so its digits anywhere are the location leaking
LAT, LON = 35.801234, 139.720987
DIGITS = ("35.801234", "139.720987", "35.8012", "139.7209")


def located(seconds_ago: float = 5) -> Here:
    return Here(LAT, LON, datetime.now(UTC) - timedelta(seconds=seconds_ago), 20.0)


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("here")
    table = folder / "parks.csv"
    table.write_text(PARKS, encoding="utf-8")
    ctx = Context(Settings(data_dir=folder / "data"))
    building.ingest(ctx, "places", [table], "parks", options=PlaceOptions())
    return folder


def context(root: Path, url: str | None, **settings: object) -> Context:
    return Context(
        Settings(data_dir=root / "data", llm_url=url, llm_model="stub-model", llm_timeout=5,
                 **settings)  # type: ignore[arg-type]
    )  # fmt: skip


def no_digits(text: str) -> bool:
    return not any(d in text for d in DIGITS)


# -- reading the question -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("question", "here", "nearest", "radius"),
    [
        ("一番近い公園を教えて", True, True, None),
        ("2km以内の洪水の避難場所は？", True, False, 2.0),
        ("現在地から５００ｍ以内のコンビニ", True, False, 0.5),
        ("近くの避難場所はどこ？", True, False, None),
        ("What is the nearest shelter?", True, True, None),
        ("shelters within 1.5 km", True, False, 1.5),
        ("Any parks nearby?", True, False, None),
        ("東京駅の近くの寺は？", False, False, None),
        ("浅草寺から一番近い駅は？", False, True, None),
        ("the nearest station to Tokyo Tower", False, True, None),
        ("夏目漱石はいつ生まれましたか？", False, False, None),
        ("What is the capital of Austria?", False, False, None),
        ("100m走の世界記録は？", False, False, 0.1),
        ("3日以内に届きますか", False, False, None),
        ("What happened around 1900?", False, False, None),
        ("Which countries are within the EU?", False, False, None),
        ("東京駅周辺のホテル", False, False, None),
        ("1000人近くが集まった祭りは？", False, False, None),
    ],
)
def test_a_question_about_here_is_told_from_one_about_a_named_place(
    question, here, nearest, radius
):
    asked = here_answers.read(question)
    assert (asked.about_here, asked.nearest, asked.radius_km) == (here, nearest, radius)


def test_the_nearest_needs_no_radius_but_around_does():
    fresh, ttl = located(), 420.0
    assert here_answers.needs("一番近い公園は？", fresh, ttl) == []
    assert [n.what for n in here_answers.needs("近くの公園は？", fresh, ttl)] == ["radius"]
    assert here_answers.needs("1km以内の公園は？", fresh, ttl) == []
    no_location = here_answers.needs("一番近い公園は？", None, ttl)
    assert [n.what for n in no_location] == ["location"] and "現在地を使う" in no_location[0].ask
    old = here_answers.needs("nearest park?", located(500), ttl)
    assert old[0].what == "location" and "press" in old[0].ask


# -- the answer layer ---------------------------------------------------------------------------


def test_no_location_is_asked_for_before_any_search_or_model_call(root):
    with ScriptedLLM() as stub:
        for mode in ("rag", "agent"):
            result = answering.ask(context(root, stub.url), "一番近い公園は？", mode=mode)
            assert result.needs[0]["what"] == "location" and "現在地を使う" in result.answer
    assert stub.requests == []


def test_the_agent_uses_here_without_the_model_seeing_a_number(root):
    script = in_turns(
        {"tool_calls": [tool_call("filter", {"source": "parks", "near": "here", "limit": 3})]},
        {"content": "一番近いのは川口駅前公園です [1]。"},
    )
    with ScriptedLLM(script) as stub:
        result = answering.ask(
            context(root, stub.url), "一番近い公園は？", mode="agent", location=located()
        )
    sent = json.dumps(stub.requests, ensure_ascii=False)
    assert no_digits(sent)  # the model never held the location
    schema = {t["function"]["name"]: t["function"]["parameters"] for t in stub.requests[0]["tools"]}
    assert "location" not in schema["filter"]["properties"]
    assert "here" in json.dumps(schema["filter"], ensure_ascii=False)
    assert result.cited == [1] and result.references[0]["title"] == "川口駅前公園"
    # the answer ends with the places, nearest first, straight-line, the first match quoted
    tail = result.answer.split("\n\n", 1)[1]
    assert tail.index("川口駅前公園") < tail.index("芝川緑地")
    assert "直線" in tail and "直線距離" in tail and "駅前の小さな公園" in tail
    assert "開設状況" in tail and "存在しない" in tail
    assert no_digits(json.dumps(result.to_dict(), ensure_ascii=False))


def test_a_location_that_expires_during_the_run_is_refused_at_the_next_call(root):
    call = tool_call("filter", {"source": "parks", "near": "here"})
    script = in_turns({"tool_calls": [call], "delay": 1.5}, {"content": "川口駅前公園 [1]"})
    with ScriptedLLM(script) as stub:
        result = answering.ask(
            context(root, stub.url, location_ttl=1.0),
            "一番近い公園は？",
            mode="agent",
            location=located(0.2),  # fresh when asked, 1.7 s old at the tool call
        )
    assert result.needs and result.needs[0]["what"] == "location"
    assert "もう一度" in result.answer and len(stub.requests) == 1  # no answer made up after it


# -- REST, the token rule and the files -----------------------------------------------------------


def test_a_location_beyond_this_machine_needs_the_token():
    beyond = {"client": ("192.0.2.7", 50000), "headers": [(b"host", b"192.0.2.1:8000")]}
    with_token = [*beyond["headers"], (b"authorization", b"Bearer s3cret")]
    assert Security("0.0.0.0", None).location_refusal(beyond).status_code == 403  # type: ignore[union-attr]
    assert Security("0.0.0.0", "s3cret").location_refusal(beyond).status_code == 401  # type: ignore[union-attr]
    assert Security("0.0.0.0", "s3cret").location_refusal({**beyond, "headers": with_token}) is None
    here_ = {"client": ("127.0.0.1", 50000), "headers": [(b"host", b"127.0.0.1:8000")]}
    assert Security("127.0.0.1", None).location_refusal(here_) is None
    foreign = [*here_["headers"], (b"origin", b"https://evil.example")]
    assert (
        Security("127.0.0.1", None).location_refusal({**here_, "headers": foreign}).status_code
        == 403
    )  # type: ignore[union-attr]


def test_a_conversation_with_a_location_leaves_it_in_no_file(root, tmp_path):
    script = in_turns(
        {"tool_calls": [tool_call("filter", {"source": "parks", "near": "here", "radius_km": 2})]},
        {"content": "川口駅前公園があります [1]。"},
    )
    where = located()
    with ScriptedLLM(script) as stub:
        settings = Settings(data_dir=root / "data", llm_url=stub.url, llm_model="stub-model",
                            llm_timeout=5)  # fmt: skip
        with RunningServer(create_app(settings)) as server:
            chat = {
                "messages": [{"role": "user", "content": "2km以内の公園は？"}],
                "mode": "agent",
                "location": {"lat": LAT, "lon": LON, "accuracy_m": 20,
                             "taken_at": where.taken_at.isoformat()},
            }  # fmt: skip
            answered = httpx.post(f"{server.url}/v1/chat", json=chat, timeout=30).json()
            assert answered["cited"] == [1] and "直線" in answered["answer"]
            query = {"near": "here", "location": where.text(), "radius_km": 2}
            found = httpx.get(f"{server.url}/v1/parks/filter", params=query, timeout=30)
            assert found.status_code == 200 and found.json()["near"]["from"] == "here"
            page = httpx.get(f"{server.url}/", params={"source": "parks", **query}, timeout=30)
            assert page.status_code == 200 and "map-here" in page.text and no_digits(page.text)
            expired = {**query, "location": located(1000).text()}
            refused = httpx.get(f"{server.url}/v1/parks/filter", params=expired, timeout=30)
            assert refused.status_code == 400 and refused.json()["needs"][0]["what"] == "location"
            for body in (answered, found.json(), refused.json()):
                assert no_digits(json.dumps(body, ensure_ascii=False))
            time.sleep(0.2)  # the record of answers is written after the response
    assert no_digits(json.dumps(stub.requests, ensure_ascii=False))
    written = [p for p in (root / "data").rglob("*") if p.is_file()]
    assert any(p.name == "answers.db" for p in written)  # the record was kept — without it
    for path in written:
        data = path.read_bytes()
        assert not any(d.encode() in data for d in DIGITS), path


def test_rag_searches_around_the_person_and_says_each_distance_is_straight(root):
    with ScriptedLLM(in_turns({"content": "一番近いのは川口駅前公園です [1]。"})) as stub:
        ctx = context(root, stub.url)
        result = answering.ask(ctx, "一番近い公園は？", location=located())
        events = list(answering.answer_events(ctx, "一番近い公園は？", location=located()))
    prompt = stub.requests[0]["messages"][-1]["content"]
    assert "[1] 川口駅前公園 (0.165 km from the asker, straight-line)" in prompt
    assert no_digits(json.dumps(stub.requests, ensure_ascii=False))
    assert result.cited == [1] and result.references[0]["distance_km"] == 0.165
    assert "直線距離" in result.answer and "「駅前の小さな公園。噴水がある。」" in result.answer
    streamed = "".join(d["text"] for name, d in events if name == "delta")
    assert streamed.endswith(events[-1][1]["answer"].split("\n\n", 1)[1])  # the footer streamed


def test_rag_within_a_radius_with_nothing_there_says_none_registered(root):
    with ScriptedLLM() as stub:
        result = answering.ask(context(root, stub.url), "100m以内の公園は？", location=located())
    assert result.no_basis and stub.requests == []
    assert any("none registered in this library within 0.1 km" in w for w in result.warnings)


def _lan_address() -> str | None:
    """This machine's address on its network, if it has one (a request from it is not from
    loopback)."""
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("203.0.113.1", 9))  # no packet is sent: the route names the address
        except OSError:
            return None
        address = probe.getsockname()[0]
    return None if address.startswith("127.") else address


@pytest.mark.slow
def test_a_location_from_the_network_is_refused_without_the_token(root):
    lan = _lan_address()
    if lan is None:
        pytest.skip("this machine has no address beyond loopback to send from")
    query = {"near": "here", "location": located().text()}
    settings = Settings(data_dir=root / "data", token="s3cret")
    app = create_app(settings, bind_host="0.0.0.0")
    with RunningServer(app, host="0.0.0.0") as server:
        url = f"http://{lan}:{server.port}/v1/parks/filter"
        refused = httpx.get(url, params=query, timeout=30)
        assert refused.status_code == 401 and no_digits(refused.text)
        wrong = httpx.get(url, params=query, headers={"authorization": "Bearer no"}, timeout=30)
        assert wrong.status_code == 401
        good = httpx.get(url, params=query, headers={"authorization": "Bearer s3cret"}, timeout=30)
        assert good.status_code == 200 and good.json()["near"]["from"] == "here"
        chat = {"messages": [{"role": "user", "content": "一番近い公園は？"}],
                "location": {"lat": LAT, "lon": LON, "taken_at": located().taken_at.isoformat()}}  # fmt: skip
        refused_chat = httpx.post(f"http://{lan}:{server.port}/v1/chat", json=chat, timeout=30)
        assert refused_chat.status_code == 401
        assert httpx.get(url, params={"near": "here"}, timeout=30).status_code == 400  # no location
    open_app = create_app(Settings(data_dir=root / "data"), bind_host="0.0.0.0")
    with RunningServer(open_app, host="0.0.0.0") as server:
        url = f"http://{lan}:{server.port}/v1/parks/filter"
        assert httpx.get(url, params=query, timeout=30).status_code == 403  # no token set at all
        local = httpx.get(f"{server.url}/v1/parks/filter", params=query, timeout=30)
        assert local.status_code == 200  # from this machine it is taken
