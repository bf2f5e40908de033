"""Search on generic words (issue #29, item 7): a question whose words are all common in a
source — 一番, 多い, 日本, 県 — is not told apart by them, so meaning leads; a question with a
specific word or a title keeps the keyword side first. The real jawiki excerpt of tests/data,
embedded with the built-in model (docs/design.md §31.4)."""

from __future__ import annotations

import pytest

from chiezo.core.config import Settings
from chiezo.core.words import evidence_words, light_words, query_words
from chiezo.ingest.wikipedia import ingest_wikipedia
from chiezo.ops import building, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest
from chiezo.search import evidence, retrieval

from helpers import data_file, titles

# the jawiki excerpt embedded with the built-in model, about a minute: left out of `make test-fast`
pytestmark = pytest.mark.slow

JA = "wikipedia/jawiki-20230501-excerpt.xml.bz2"


@pytest.fixture(scope="module")
def jawiki(tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("generic") / "data")
    ingest_wikipedia(settings, data_file(JA))
    service = Context(settings)
    building.embed(service, "jawiki", "use-m")
    return service


def weight_noted(result) -> float:
    """The keyword weight the search used (explain's fusion notice)."""
    (note,) = [n for n in result.notes if getattr(n, "code", None) == "fusion"]
    return note.params["weight"]


def test_light_words_are_those_that_say_nothing_of_what_is_asked():
    assert light_words("世界で一番広い国は？") == {"一番"}
    assert light_words("日本で最も南にある県は？") == {"最も", "有る"}
    assert light_words("阿波おどりで知られる県は？") == frozenset()
    assert light_words("Which is the largest country?") == frozenset()  # no parts of speech
    # what coverage counts, within a source and across sources: the others, in their order
    assert evidence_words("世界で一番広い国は？") == ["世界", "広い", "国"]
    assert evidence_words("日本で最も南にある県は？") == ["日本", "南", "県"]


def test_specificity_is_the_information_of_the_rarest_content_word(jawiki):
    source = jawiki.library.get("jawiki")

    def specific(q: str) -> float:
        return evidence.specificity(source, query_words(q), light_words(q))

    assert specific("阿波おどりで知られる県は？") == 1.0  # 阿波: two articles of 71
    generic = specific("日本でいちばん人口が少ない県は？")  # 一番 left out: 日本, 人口, 少ない, 県
    assert 0.0 < generic < 0.6
    assert specific("一番") == 0.0  # light words only: nothing to tell documents apart
    assert specific("qzxvbnm") == 1.0  # unknown to the word index: the trigrams may know it


def test_meaning_leads_when_the_question_has_only_common_words(jawiki):
    """Its words are in most prefecture articles and in パリ, 哲学 and シカゴ as well: the
    keyword side alone ranks those, and with its usual weight they came into the first five
    (鳥取県, 岩手県, 香川県, パリ, 哲学). Meaning tells the prefectures apart."""
    q = "日本でいちばん人口が少ない県は？"
    keyword = titles(
        searching.search(jawiki, SearchRequest.of(query=q, source="jawiki", mode="keyword"))
    )
    assert {"哲学", "パリ"} <= set(keyword[:5])  # what the words alone find
    hybrid = searching.search(
        jawiki, SearchRequest.of(query=q, source="jawiki", explain=True, limit=5)
    )
    assert titles(hybrid)[0] == "鳥取県"  # the least populous prefecture
    assert all(t.endswith("県") for t in titles(hybrid))
    assert weight_noted(hybrid) <= retrieval.KEYWORD_WEIGHT["use-m"] / 2


def test_a_specific_word_or_a_title_keeps_the_keyword_side_first(jawiki):
    specific = searching.search(
        jawiki, SearchRequest.of(query="阿波おどりで知られる県は？", source="jawiki", explain=True)
    )
    assert titles(specific)[0] == "徳島県"
    assert weight_noted(specific) == retrieval.KEYWORD_WEIGHT["use-m"]
    title = searching.search(jawiki, SearchRequest.of(query="パリ", source="jawiki"))
    assert title.hits[0].title == "パリ" and title.hits[0].title_match
    # a weight asked for is used as it is, whatever the words
    asked = searching.search(
        jawiki,
        SearchRequest.of(
            query="日本でいちばん人口が少ない県は？",
            source="jawiki",
            explain=True,
            keyword_weight=0.9,
        ),
    )
    assert weight_noted(asked) == 0.9
