"""Across languages: the script of a question and of each source (search/languages.py), how a
search across sources weighs a source the question's words cannot be in (evidence.weighing,
retrieval.keyword_weight), and the same article in two Wikipedias named by its Wikidata id
(search/counterparts.py) — on real sources built from real-format dumps."""

from __future__ import annotations

import contextlib
import gzip

import pytest

from chiezo.core.config import Settings
from chiezo.ingest.wikipedia import WikiOptions, ingest_wikipedia
from chiezo.ops import building, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest
from chiezo.search import evidence, languages, retrieval
from chiezo.search.retrieval import RetrievalOptions

from helpers import data_file, wiki_dump

JA_PAGES = [
    (1, "オーストリア", "'''オーストリア'''は中央ヨーロッパの国。首都はウィーン。"),
    (2, "ウィーン", "'''ウィーン'''はオーストリアの首都。"),
    (3, "浅草寺", "'''浅草寺'''は東京都台東区にある寺。"),
]
EN_PAGES = [
    (11, "Austria", "'''Austria''' is a country in Central Europe. Its capital is Vienna."),
    (12, "Vienna", "'''Vienna''' is the capital of Austria."),
    (13, "Ankara", "'''Ankara''' is the capital of Turkey."),
]
JA_PROPS = b"(1,'wikibase_item','Q40',NULL),(2,'wikibase_item','Q1741',NULL)"
EN_PROPS = b"(11,'wikibase_item','Q40',NULL),(12,'wikibase_item','Q1741',NULL)"


def build_wiki(root, name: str, lang: str, pages, props: bytes) -> None:
    dump = root / f"{name}.xml"
    dump.write_text(wiki_dump(pages).replace('xml:lang="ja"', f'xml:lang="{lang}"'))
    page_props = root / f"{name}-page_props.sql.gz"
    page_props.write_bytes(gzip.compress(b"INSERT INTO `page_props` VALUES " + props + b";\n"))
    settings = Settings(data_dir=root / "data")
    ingest_wikipedia(settings, dump, name, wiki=WikiOptions(page_props=page_props))


@pytest.fixture(scope="module")
def two_wikis(tmp_path_factory):
    root = tmp_path_factory.mktemp("two_wikis")
    build_wiki(root, "jawiki", "ja", JA_PAGES, JA_PROPS)
    build_wiki(root, "enwiki", "en", EN_PAGES, EN_PROPS)
    return Context(Settings(data_dir=root / "data"))


@pytest.mark.parametrize(
    "code, normal, script",
    [
        ("ja", "ja", "cjk"), ("jpn", "ja", "cjk"), ("ja-JP", "ja", "cjk"), ("eng", "en", "latin"),
        ("EN", "en", "latin"), ("eng,fra", "en", "latin"), ("rus", "ru", "cyrillic"),
        ("mul", None, None), ("", None, None), (None, None, None), ("xx", "xx", None),
    ],
)  # fmt: skip
def test_language_codes_and_their_scripts(code, normal, script):
    assert languages.language_code(code) == normal
    assert languages.script_of_language(code) == script


@pytest.mark.parametrize(
    "text, script",
    [
        ("What is the capital of Austria?", "latin"),
        ("オーストリアの首都は？", "cjk"),
        ("Who is 夏目漱石?", "cjk"),  # a Japanese name makes it a Japanese reader's question
        ("ＲＵＳＴ", "latin"),  # full-width letters are letters
        ("Какая столица Австрии?", "cyrillic"),
        ("1867", "other"),
    ],
)
def test_the_script_of_a_question(text, script):
    assert languages.script_of_text(text) == script


def test_a_source_is_judged_by_its_recorded_language_else_its_titles(two_wikis, tmp_path):
    ja, en = two_wikis.library.get("jawiki"), two_wikis.library.get("enwiki")
    assert languages.crosses(ja, "What is the capital of Austria?")
    assert not languages.crosses(en, "What is the capital of Austria?")
    assert languages.crosses(en, "オーストリアの首都は？")
    assert not languages.crosses(ja, "1867")  # digits say nothing
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in (
        ("a.md", "# 就業規則\n\n第1条"),
        ("b.md", "# 雛形\n\n本文"),
        ("c.md", "# API\n\nx"),
    ):
        (docs / name).write_text(text)
    ctx = Context(Settings(data_dir=tmp_path / "data"))
    building.ingest(ctx, "docs", docs, "rules", embed=False)
    rules = ctx.library.get("rules")
    assert rules.meta.get("language") in (None, "")  # nothing recorded: judged by titles
    assert languages.script_of_source(rules) == "cjk"
    assert languages.crosses(rules, "working hours rules")


def test_places_are_named_in_every_language_and_never_cross(tmp_path):
    ctx = Context(Settings(data_dir=tmp_path / "data"))
    building.ingest(ctx, "geonames", data_file("geonames/cities15000.zip"), "places")
    places = ctx.library.get("places")
    assert languages.script_of_source(places) is None
    assert not languages.crosses(places, "東京") and not languages.crosses(places, "Tokyo")


def test_a_cross_script_source_is_weighed_by_meaning(two_wikis):
    ja = two_wikis.library.get("jawiki")
    english = "What is the capital of Austria?"
    crossing = evidence.weighing(ja, english, "hybrid")
    assert crossing.meaning == evidence.CROSS_SCRIPT_MEANING_WEIGHT == 1.0
    assert crossing.full_meaning == evidence.CROSS_SCRIPT_FULL_MEANING
    assert evidence.weighing(ja, "オーストリアの首都", "hybrid").meaning == evidence.MEANING_WEIGHT
    assert evidence.weighing(ja, english, "keyword").meaning == 0.0  # no meaning to lean on
    weight = retrieval.keyword_weight(ja, RetrievalOptions(), english)
    assert weight == retrieval.CROSS_SCRIPT_KEYWORD_WEIGHT
    asked = retrieval.keyword_weight(ja, RetrievalOptions(keyword_weight=0.9), english)
    assert asked == 0.9  # a weight asked for is kept


def test_a_hit_names_its_counterpart_in_the_other_wikipedia(two_wikis):
    found = searching.search(two_wikis, SearchRequest.of(query="Austria", source="enwiki"))
    first = found.hits[0]
    assert first.title == "Austria"
    assert first.counterparts == [
        {"source": "jawiki", "key": "1", "title": "オーストリア", "wikidata": "Q40"}
    ]
    assert first.to_dict()["counterparts"][0]["title"] == "オーストリア"
    both = searching.search(two_wikis, SearchRequest.of(query="ウィーン"))
    vienna = next(h for h in both.hits if h.title == "ウィーン")
    assert [c["title"] for c in vienna.counterparts] == ["Vienna"]
    ankara = searching.search(two_wikis, SearchRequest.of(query="Ankara", source="enwiki")).hits[0]
    assert ankara.counterparts is None and "counterparts" not in ankara.to_dict()


def test_the_planner_lists_languages_and_asks_for_theirs_only_across_scripts(two_wikis):
    from chiezo.answer import rag
    from chiezo.answer.llm import LLMClient, endpoints_from
    from chiezo.answer.plan import ACROSS_LANGUAGES
    from llm_stub import ScriptedLLM

    languages_ = {"jawiki": "ja", "enwiki": "en", "notes": None}
    listed, across = rag._listed("Who painted it?", ["jawiki", "notes"], languages_)
    assert listed == "jawiki (ja), notes" and across
    assert rag._listed("誰が描いた？", ["jawiki", "notes"], languages_)[1] is False
    reply = {"content": '{"queries": ["Austria", "オーストリア"], "source": null}'}
    with ScriptedLLM(lambda body: reply) as stub:
        llm = LLMClient(endpoints_from(stub.url, "stub-model", None), timeout=5)
        english = rag.plan_queries("capital of Austria?", llm, ["jawiki"], planner="model",
                                   languages=languages_)  # fmt: skip
        rag.plan_queries("オーストリアの首都は？", llm, ["jawiki"], planner="model",
                         languages=languages_)  # fmt: skip
    first, second = (r["messages"] for r in stub.requests)
    assert first[0]["content"].endswith(ACROSS_LANGUAGES) and "jawiki (ja)" in first[1]["content"]
    assert ACROSS_LANGUAGES not in second[0]["content"]
    assert english.queries == ["Austria", "オーストリア"] and english.planner == "model"


def test_the_planner_without_a_model_looks_a_title_up_through_wikidata(two_wikis):
    from chiezo.answer import rag
    from chiezo.answer.options import AnswerOptions
    from chiezo.ops.lookups import LibraryLookups

    lookups = LibraryLookups(two_wikis)
    options = AnswerOptions(source="jawiki").resolved(two_wikis.settings)
    prepared = rag.prepare(lookups, "What is the capital of Austria?", options)
    assert "オーストリア" in prepared.plan.queries and prepared.plan.planner == "keywords"
    assert "looked up through Wikidata: オーストリア" in prepared.warnings
    assert prepared.excerpts[0].title == "オーストリア" and prepared.excerpts[0].source == "jawiki"
    everywhere = rag.prepare(lookups, "Tell me about Vienna", AnswerOptions().resolved(
        two_wikis.settings))  # fmt: skip
    assert "ウィーン" in everywhere.plan.queries
    plain = rag.prepare(lookups, "浅草寺はどこ？", options)  # no id, nothing added
    assert not any("Wikidata" in w for w in plain.warnings)


@pytest.fixture(scope="module")
def japanese_by_meaning(tmp_path_factory):
    """jawiki with use-m vectors beside English documents without: an English question's
    words can find only the English ones."""
    root = tmp_path_factory.mktemp("by_meaning")
    build_wiki(root, "jawiki", "ja", JA_PAGES, JA_PROPS)
    ctx = Context(Settings(data_dir=root / "data"))
    building.embed(ctx, "jawiki", "use-m")
    docs = root / "capitals"
    docs.mkdir()
    (docs / "quiz.md").write_text(
        "# Pub quiz night\n\nRound one asks what the capital of each country is: Austria, "
        "Peru, Turkey. Bring a pen."
    )
    (docs / "peru.md").write_text("# Peru\n\nLima is the capital of Peru.")
    building.ingest(ctx, "docs", docs, "capitals", embed=False)
    return ctx


def test_an_english_question_finds_the_japanese_article_by_meaning(japanese_by_meaning):
    from chiezo.answer import rag
    from chiezo.answer.options import AnswerOptions
    from chiezo.answer.plan import keyword_queries
    from chiezo.ops.lookups import LibraryLookups

    ctx, question = japanese_by_meaning, "What is the capital of Austria?"
    alone = searching.search(ctx, SearchRequest.of(query=question, source="jawiki"))
    assert alone.hits[0].title == "オーストリア"
    every = searching.search(ctx, SearchRequest.of(query=question))
    assert every.hits[0].title == "オーストリア"  # not the English words-only match
    with _scripts_ignored():
        before = searching.search(ctx, SearchRequest.of(query=question))
    assert before.hits[0].source == "capitals"  # what the search did before
    lookups = LibraryLookups(ctx)
    assert lookups.by_meaning_only(question, None)
    assert not lookups.by_meaning_only("オーストリアの首都は？", None)
    prepared = rag.prepare(lookups, question, AnswerOptions().resolved(ctx.settings))
    assert keyword_queries(question)[0] != question
    assert prepared.plan.queries[0] == question  # the whole question carries the meaning
    japanese = rag.prepare(
        lookups, "オーストリアの首都は？", AnswerOptions().resolved(ctx.settings)
    )
    assert japanese.plan.queries == keyword_queries("オーストリアの首都は？")  # as planned


@contextlib.contextmanager
def _scripts_ignored():
    saved = languages.crosses
    languages.crosses = lambda source, text: False
    try:
        yield
    finally:
        languages.crosses = saved


def test_a_subject_is_not_called_missing_where_no_title_could_name_it():
    from chiezo.answer import rag
    from chiezo.answer.excerpt import Excerpt

    def excerpt(title: str, meaning: float | None) -> Excerpt:
        return Excerpt(1, "jawiki", 1, title, None, "本文", meaning=meaning)

    question = "What is the capital of Austria?"
    strong = rag.ACROSS_SCRIPTS_ABOUT
    assert rag._about_across_scripts(question, [excerpt("オーストリア", strong)])
    assert not rag._about_across_scripts(question, [excerpt("オーストリア", strong / 2)])
    assert not rag._about_across_scripts(question, [excerpt("Vienna", 0.9)])  # same script
    assert not rag._about_across_scripts(question, [excerpt("1867", 0.9)])  # no script
    assert not rag._about_across_scripts(question, [excerpt("オーストリア", None)])  # by words
