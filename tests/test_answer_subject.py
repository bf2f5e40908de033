"""No basis means no basis (issue #43, item 4): the subject a question names, and whether the
excerpts ``ask`` found are about it — over real articles (the jawiki fixture's 愛媛県, which
mentions 夏目漱石 in passing; 寺沢武一 under a disambiguated title; 液晶 with its redirect
スメクティック相), built into a real source and read with ``prepare_answer`` without a model."""

from __future__ import annotations

import bz2
import re

import pytest

from chiezo.answer.subject import (
    Missing,
    missing_subject,
    no_basis_reply,
    stands_for,
    subject_of,
)
from chiezo.core.config import Settings
from chiezo.ingest.wikipedia import WikiOptions
from chiezo.ops import answering, building
from chiezo.ops.context import Context

from helpers import data_file

PAGES = {
    "愛媛県": "愛媛県",
    "寺沢武一": "寺沢武一 (漫画家)",
    "液晶": "液晶",
    "スメクティック相": "スメクティック相",
}


def _dump(pages: dict[str, str]) -> str:
    """The fixture dump's header and these of its pages (renamed as given), in dump format."""
    with bz2.open(data_file("wikipedia/jawiki-20230501-excerpt.xml.bz2"), "rt") as fh:
        whole = fh.read()
    out = [whole[: whole.index("<page>")]]
    for title, shown in pages.items():
        page = re.search(rf"<page>\s*<title>{re.escape(title)}</title>.*?</page>", whole, re.S)
        assert page, title
        out.append(page.group(0).replace(f"<title>{title}</title>", f"<title>{shown}</title>"))
    return "".join(out) + "</mediawiki>"


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    root = tmp_path_factory.mktemp("subject")
    (root / "wiki.xml").write_text(_dump(PAGES), encoding="utf-8")
    service = Context(Settings(data_dir=root / "data"))
    building.ingest(service, "wikipedia", root / "wiki.xml", "jawiki", embed=False,
                   options=WikiOptions(workers=1))  # fmt: skip
    assert service.llm() is None
    return service


def found(service, question: str):
    return answering.prepare_answer(service, question).excerpts


def test_a_subject_only_mentioned_in_passing_is_missing_and_where_it_is_said(service):
    question = "夏目漱石はいつ生まれましたか？"
    excerpts = found(service, question)
    assert [e.title for e in excerpts] == ["愛媛県"]  # what was answered "from [1] 愛媛県"
    missing = missing_subject(question, excerpts)
    assert missing == Missing("夏目漱石", ["愛媛県"])
    assert no_basis_reply(missing, "ja") == (
        "ライブラリには「夏目漱石」についての記事がありません（「愛媛県」で触れられています）。"
    )


def test_a_subject_nowhere_in_the_excerpts_is_missing_with_no_mention(service):
    question = "正岡子規の出身地は？"
    missing = missing_subject(question, found(service, question))
    assert missing == Missing("正岡子規", [])
    assert no_basis_reply(missing, "ja") == "ライブラリには「正岡子規」についての記事がありません。"


def test_a_title_with_a_disambiguator_stands_for_its_subject(service):
    question = "寺沢武一の代表作は何ですか？"
    excerpts = found(service, question)
    assert [e.title for e in excerpts] == ["寺沢武一 (漫画家)"]
    assert subject_of(question) == "寺沢武一"
    assert missing_subject(question, excerpts) is None


def test_an_alias_stands_for_its_subject(service):
    question = "スメクティック相とは何ですか？"
    excerpts = found(service, question)
    assert [(e.title, e.aliases) for e in excerpts] == [("液晶", ["スメクティック相"])]
    assert subject_of(question) == "スメクティック相"
    assert missing_subject(question, excerpts) is None


def test_a_subject_the_excerpt_treats_at_length_is_not_missing(service):
    # no article on コブラ, but 寺沢武一's excerpt is about it: many mentions, its 連載
    question = "『コブラ』の連載はいつ始まりましたか？"
    excerpts = found(service, question)
    assert subject_of(question) == "コブラ"
    assert not any(stands_for("コブラ", e.title) for e in excerpts)
    assert missing_subject(question, excerpts) is None


def test_a_question_naming_no_subject_is_never_declared(service):
    question = "人口が一番多いのはどこですか？"
    assert subject_of(question) is None
    assert missing_subject(question, found(service, question)) is None


def test_a_library_article_the_search_missed_is_no_missing_subject(service):
    question = "正岡子規の出身地は？"
    excerpts = found(service, question)
    assert missing_subject(question, excerpts, has_article=lambda name: name == "正岡子規") is None


@pytest.mark.parametrize(
    ("question", "subject"),
    [
        ("夏目漱石はいつ生まれましたか？", "夏目漱石"),
        ("「ウイングマン」はヒーロー物とどのような要素を入れた作品ですか?", "ウイングマン"),
        ("鳥嶋和彦が桂以外に才能を見出した漫画家は誰?", "鳥嶋和彦"),  # the topic first
        ("日本語の敬語とは？", "日本語"),  # the name, not the general noun
        ("エルヴィス・プレスリーはいつ生まれた？", "エルヴィス・プレスリー"),
        ("When was Aldous Huxley born?", "Aldous Huxley"),
        ("What did Abraham Lincoln's father do?", "Abraham Lincoln"),
        ("Who wrote Brave New World?", "Brave New World"),
        ("敬語とは？", None),  # a general noun is no subject
        ("「言う」に対応する尊敬語は何ですか?", None),  # a word quoted, not a name
        ("Cは誰に殺されたの?", None),  # one letter standing for a person
        ("who got the first nobel prize in physics", None),  # nothing capitalised
    ],
)
def test_the_subject_a_question_names(question, subject):
    assert subject_of(question) == subject


@pytest.mark.parametrize(
    ("subject", "title", "same"),
    [
        ("夏目漱石", "夏目漱石 (作家)", True),
        ("ＮＡＴＳＵＭＥ", "natsume", True),
        ("桂", "桂正和", True),  # a surname
        ("沖縄", "沖縄県", True),
        ("プレスリー", "エルヴィス・プレスリー", True),
        ("A310", "エアバスA310", True),
        ("Huxley", "Aldous Huxley", True),
        ("Paris", "Parisian", False),
        ("夏目漱石", "愛媛県", False),
        ("日本語", "英語", False),
    ],
)
def test_a_title_stands_for_a_subject(subject, title, same):
    assert stands_for(subject, title) is same


def test_the_english_reply_names_the_subject_and_where_it_is_mentioned():
    missing = Missing("Natsume Sōseki", ["Ehime Prefecture", "Matsuyama"])
    assert no_basis_reply(missing, "en") == (
        "The library has no article about “Natsume Sōseki” "
        "(it is mentioned in: Ehime Prefecture, Matsuyama)."
    )
    assert no_basis_reply(Missing("X"), "en") == "The library has no article about “X”."
