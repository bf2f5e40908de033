"""An answer without a model (issue #43 item 5): the few sentences of the excerpts `ask` chose
that most likely answer the question, each with the excerpt it is from. Real excerpts: a source
built from articles of the jawiki and enwiki excerpts in tests/data (rendered by the real
wikitext renderer, stored as Markdown documents), asked through rag.prepare without a model."""

from __future__ import annotations

import json

import pytest

from chiezo.answer import rag
from chiezo.answer.options import AnswerOptions
from chiezo.answer.sentences import MAX_CHARS, AnswerSentence, answer_sentences
from chiezo.core.config import Settings
from chiezo.core.words import fold
from chiezo.ingest.wikidump import WikiDump
from chiezo.ingest.wikitext import Namespaces, parse_article
from chiezo.ops.context import Context
from chiezo.ops.lookups import LibraryLookups

from helpers import build_docs, data_file, write_files

JA = ("wikipedia/jawiki-20230501-excerpt.xml.bz2", {"両国国技館", "寺沢武一", "ゴーダチーズ"})
EN = ("wikipedia/enwiki-202207-excerpt.xml.bz2", {"Allan Dwan", "Actrius"})


def _articles(dump: str, titles: set[str]) -> dict[str, str]:
    reader = WikiDump(data_file(dump))
    namespaces = Namespaces.for_wiki(reader.siteinfo.namespaces, reader.siteinfo.language)
    try:
        return {
            p.title: parse_article(p.text, namespaces).text
            for p in reader.pages()
            if p.ns == 0 and p.title in titles
        }
    finally:
        reader.close()


@pytest.fixture(scope="module")
def wiki(tmp_path_factory) -> Context:
    root = tmp_path_factory.mktemp("sentences")
    articles = {**_articles(*JA), **_articles(*EN)}
    files = {
        f"{i}.md": f'---\ntitle: "{title}"\n---\n\n{text}\n'
        for i, (title, text) in enumerate(sorted(articles.items()))
    }
    service = Context(Settings(data_dir=root / "data"))
    build_docs(service, write_files(root / "docs", files), "wiki")
    return service


def excerpts(service: Context, question: str) -> list:
    options = AnswerOptions(source="wiki").resolved(service.settings)
    return rag.prepare(LibraryLookups(service), question, options).excerpts


def first(service: Context, question: str) -> AnswerSentence:
    found = answer_sentences(question, excerpts(service, question))
    assert found, question
    return found[0]


def test_a_when_question_gets_the_sentence_with_the_date_first(wiki):
    assert "1909年" in first(wiki, "旧国技館はいつ建設された？").text
    assert "1955年" in first(wiki, "寺沢武一はいつ生まれた？").text


def test_a_where_question_gets_the_sentence_with_the_place(wiki):
    assert "墨田区" in first(wiki, "両国国技館はどこにある？").text
    assert "オランダ" in first(wiki, "ゴーダチーズはどこの国のチーズ？").text


def test_a_how_many_question_gets_the_figure(wiki):
    assert "13,000人" in first(wiki, "旧国技館は何人収容できた？").text
    # ranked by shared character pairs, the sentence about the new 国技館's roof came first
    assert "308本" in first(wiki, "旧国技館の大屋根は何本の鉄柱で作られた？").text


def test_a_rare_word_of_the_question_outweighs_the_documents_name(wiki):
    """ゴーダチーズ is in most of the article's sentences; 重さ in one."""
    assert "12 kg" in first(wiki, "ゴーダチーズの重さは？").text


def test_an_english_question_works(wiki):
    born = first(wiki, "When was Allan Dwan born?")
    assert "1885" in born.text and born.ref == 1
    # ranked by shared pairs of letters, a 761-character run of the bibliography came first
    where = first(wiki, "Where was Allan Dwan born?")
    assert "Toronto" in where.text and len(where.text) <= MAX_CHARS + 2
    assert "Ventura Pons" in " ".join(
        s.text for s in answer_sentences("Who directed Actrius?", excerpts(wiki, "Actrius"))
    )


def test_each_sentence_cites_the_excerpt_it_is_from(wiki):
    question = "国技館の歴史"
    found = excerpts(wiki, question)
    said = answer_sentences(question, found, limit=5)
    assert said
    by_number = {e.n: fold(" ".join(e.text.split())) for e in found}
    for sentence in said:
        for piece in sentence.text.split("…"):
            assert fold(piece.strip()) in by_number[sentence.ref], sentence
    assert json.loads(json.dumps([s.to_dict() for s in said])) == [
        {"text": s.text, "ref": s.ref} for s in said
    ]


def test_the_limit_is_kept_and_nothing_in_gives_nothing(wiki):
    question = "両国国技館はどこにある？"
    found = excerpts(wiki, question)
    assert len(answer_sentences(question, found, limit=1)) == 1
    assert len(answer_sentences(question, found)) == 3
    assert answer_sentences(question, found, limit=0) == []
    assert answer_sentences(question, []) == []
    assert answer_sentences(" ", found) == []


def test_sentences_are_cut_to_size_and_lists_come_apart(wiki):
    """A long sentence is cut around the question's words; a list's items (one line of
    "- a - b" in a passage) are sentences of their own, without their marks."""
    question = "両国国技館の収容人数と総工費は？"
    said = answer_sentences(question, excerpts(wiki, question), limit=10)
    assert said
    assert all(len(s.text) <= MAX_CHARS + 2 for s in said)
    assert not any(s.text.startswith("- ") or " - - " in s.text for s in said)
    assert any("収容" in s.text for s in said)
