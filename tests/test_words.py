"""The word index beside the trigram index, and one order of evidence across sources."""

import sqlite3

import pytest

from chiezo.core.models import Doc
from chiezo.core.schema import WRITABLE_TEXT_INDEX
from chiezo.core.words import fold, index_text, marked_words, query_words
from chiezo.ops import searching
from chiezo.ops.requests import SearchRequest
from chiezo.search.notices import Notice
from chiezo.store.build import BuildOptions
from chiezo.store.generations import current_path, source_dir

from helpers import build_source, titles, trigram_side

ARTICLES = [
    Doc(
        key="soseki",
        title="夏目漱石",
        rank_score=0.5,
        body="夏目漱石は日本の小説家。1867年2月9日、江戸の牛込に生まれた。代表作は『吾輩は猫である』。",
    ),
    Doc(
        key="ogai",
        title="森鴎外",
        rank_score=0.6,
        body="森鴎外は明治の小説家で軍医。石見国津和野に生まれた。",
    ),
    Doc(
        key="hotel",
        title="ＪＲホテルクレメント高松",
        rank_score=0.1,
        body="香川県高松市にあるホテル。高松駅に隣接する。",
    ),
    Doc(key="ice", title="アイスクリーム", rank_score=0.2, body="牛乳を凍らせた菓子。"),
    Doc(
        key="trip",
        title="修学旅行",
        rank_score=0.3,
        body="多くの中学校では三年生の秋に京都と奈良を訪れる。古い寺を見学する。",
    ),
    Doc(key="tokyo", title="東京都", rank_score=0.9, body="日本の首都。"),
]
# a book whose chapters share a question's grammar (生まれました, 含まれます) but not its content
CHAPTERS = [
    Doc(
        key=f"ch{i}",
        title=f"第{i}章 所有権とライフタイム",
        rank_score=0.5,
        body="値が生まれるとき所有者が決まります。スコープに含まれます。生まれた値は破棄されます。"
        * 3,
    )
    for i in range(1, 6)
] + [
    Doc(key=f"other{i}", title=f"付録{i}", body=f"コンパイラの警告{i}とテストの書き方。")
    for i in range(60)
]


def build(settings, name, docs, **options):
    return build_source(settings, name, "test", docs, options=BuildOptions(**options))


def test_japanese_is_split_into_content_words_and_folded():
    assert query_words("夏目漱石はいつ生まれましたか？") == ["夏目", "漱石", "生まれる"]
    assert query_words("ＪＲホテル") == query_words("JRホテル") == ["jr", "ホテル"]
    assert query_words("ｱｲｽ") == ["アイス"]
    assert query_words("What is the capital of Alabama?") == ["capit", "alabama"]
    assert query_words("the は") == []  # nothing but stop words and particles
    assert query_words("ภาษาไทย Thai") == ["thai"]  # no word splitter for Thai: trigrams only
    assert fold("ＡＢＣ　ｶﾞ") == "abc ガ"


@pytest.mark.slow
def test_text_sudachi_cannot_take_is_cleaned_or_split_never_an_error():
    long_line = "日本語の文" * 40_000  # 200,000 characters, one line, no 。 to cut at
    assert len(index_text(long_line).split()) > 50_000
    assert index_text("壊れた\ud800文字\x00と制御\x07文字") == "壊れる 文字 制御 文字"
    assert index_text("") == ""


def test_words_find_width_variants_in_both_indexes(settings, service):
    build(settings, "w", ARTICLES)
    source = service.library.get("w")
    assert source.info().text_index == "words+trigrams"
    for query, title in (
        ("JRホテルクレメント", "ＪＲホテルクレメント高松"),
        ("ｱｲｽ", "アイスクリーム"),
    ):
        assert (
            titles(searching.search(service, SearchRequest.of(query=query, source="w")))[0] == title
        )
        assert trigram_side(source, query)[1][0].title == title  # the trigram index alone


def test_two_character_words_match_in_the_body(settings, service):
    build(settings, "w", ARTICLES)
    result = searching.search(service, SearchRequest.of(query="京都", source="w"))
    assert titles(result) == ["修学旅行"] and result.mode.startswith("words")


def test_a_query_without_content_words_falls_back_to_trigrams(settings, service):
    build(settings, "w", ARTICLES)
    result = searching.search(
        service, SearchRequest.of(query="生まれた", source="w")
    )  # one word: found by both
    assert result.mode.startswith("words")
    assert not searching.search(service, SearchRequest.of(query="は", source="w")).mode.startswith(
        "words"
    )  # a particle only


def test_a_question_ranks_by_its_content_words(settings, service):
    build(settings, "w", ARTICLES + CHAPTERS)
    result = searching.search(
        service, SearchRequest.of(query="夏目漱石はいつ生まれましたか", source="w")
    )
    assert titles(result)[0] == "夏目漱石" and "生まれ" in result.hits[0].snippet


def test_across_sources_a_grammar_only_match_does_not_crowd_out_the_content(settings, service):
    build(settings, "articles", ARTICLES)
    build(settings, "a-book", CHAPTERS)  # listed first: rank fusion would put it first
    result = searching.search(service, SearchRequest.of(query="夏目漱石はいつ生まれましたか"))
    ranked = [(h.source, h.title) for h in result.hits]
    assert ranked[0] == ("articles", "夏目漱石")
    assert any(source == "a-book" for source, _ in ranked)  # found, but after: 生まれる only
    # and a title equal to the query comes first, from whichever source has it
    assert (
        titles(searching.search(service, SearchRequest.of(query="第3章 所有権とライフタイム")))[0]
        == "第3章 所有権とライフタイム"
    )


def test_a_source_built_before_the_word_index_still_serves_and_says_so(settings, service):
    build(settings, "old", ARTICLES, word_index=False)
    _downgrade(current_path(source_dir(settings.corpus_dir, "old")))
    source = service.library.get("old")
    assert not source.has_words and source.info().text_index == "trigrams"
    result = searching.search(service, SearchRequest.of(query="夏目漱石", source="old"))
    assert titles(result)[0] == "夏目漱石" and not result.mode.startswith("words")
    notice = next(n for n in result.notes if getattr(n, "code", "") == "no_word_index")
    assert "rebuild" in notice and "old" in notice
    assert notice.text("ja").startswith("oldは単語索引より前")
    body = result.to_dict()
    assert {"code": "no_word_index", "params": {"sources": ["old"]}, "text": str(notice)} in body[
        "notices"
    ]


def _downgrade(path) -> None:
    """Make a generation look like one built before the word index: no word tables, and the
    trigram index over the text as written (external content)."""
    with sqlite3.connect(path) as conn:
        conn.executescript(
            "DROP TABLE docs_fts; DROP TABLE words_fts; DROP TABLE word_df;"
            + WRITABLE_TEXT_INDEX
            + "INSERT INTO docs_fts (docs_fts) VALUES ('rebuild');"
            "DELETE FROM meta WHERE key = 'text_index';"
        )


def test_notes_across_sources_are_one_line_per_kind(settings, service):
    build(settings, "a", ARTICLES)
    build(settings, "b", CHAPTERS)
    result = searching.search(
        service, SearchRequest.of(query="小説家", mode="hybrid")
    )  # neither has vectors
    assert len(result.notes) == 1
    (note,) = result.notes
    assert note.code == "no_vectors" and note.params["sources"] == ["a", "b"]
    assert note == "a, b: no vectors, searched by keyword"
    assert note.text("ja") == "a、bにはベクトルがないため、キーワードで検索しました"


def test_an_empty_result_never_says_documents_are_shown(settings, service):
    build(settings, "w", ARTICLES)
    result = searching.search(service, SearchRequest.of(query="存在しない言葉の並び", source="w"))
    assert result.hits == [] and not any("shown" in n for n in result.notes)


def test_marked_words_skip_particles_and_stop_words():
    assert marked_words("夏目漱石はいつ生まれましたか") == ([], ["夏目", "漱石", "生まれ"])
    assert marked_words("what is the capital") == (["capit"], [])


def test_notices_survive_copies_and_pickles():
    import copy
    import pickle

    notice = Notice("many_matches", n=2000)
    assert notice == "more than 2,000 documents match: the 2,000 most popular were ranked"
    for clone in (copy.deepcopy(notice), pickle.loads(pickle.dumps(notice))):
        assert clone.code == "many_matches" and clone.params == {"n": 2000}


@pytest.mark.slow
def test_a_large_source_is_split_into_words_by_processes_in_doc_id_ranges(
    settings, service, monkeypatch
):
    from chiezo.store import wordindex

    monkeypatch.setattr(wordindex, "PROCESS_MIN_DOCS", 1)  # as for a source of 20,000+
    monkeypatch.setattr(wordindex, "splitter_processes", lambda: 3)
    build(settings, "w", ARTICLES + CHAPTERS)
    source = service.library.get("w")
    assert (
        titles(
            searching.search(
                service, SearchRequest.of(query="夏目漱石はいつ生まれましたか", source="w")
            )
        )[0]
        == "夏目漱石"
    )
    # every document's words are indexed under its own doc_id, whichever process split it
    indexed = source.conn.execute("SELECT count(*) FROM words_fts_docsize").fetchone()[0]
    assert indexed == source.doc_count == len(ARTICLES + CHAPTERS)
    for doc_id, title in source.conn.execute("SELECT doc_id, title FROM docs"):
        word = index_text(title).split()[0]
        found = source.conn.execute(
            "SELECT 1 FROM words_fts WHERE words_fts MATCH ? AND rowid = ?", (f'"{word}"', doc_id)
        ).fetchone()
        assert found, title
    leftovers = [p.name for p in source.path.parent.iterdir() if ".words" in p.name]
    assert leftovers == []


@pytest.mark.slow
def test_the_word_side_stops_at_the_requests_deadline(settings, service, monkeypatch):
    """The word side runs in a helper thread on its own connection; a statement there is
    interrupted at the request's deadline like one on the request's own thread (a 504, not
    a helper left running)."""
    import threading

    from chiezo.core.errors import QueryTimeout
    from chiezo.search import keyword

    build(settings, "w", ARTICLES)
    source = service.library.get("w")
    threads = []

    def endless_word_side(src, words, pool, filters):
        threads.append(threading.current_thread().name)
        src.conn.execute(  # counts for minutes unless interrupted
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) SELECT count(*) FROM n"
        ).fetchone()

    monkeypatch.setattr(keyword, "word_matches", endless_word_side)
    raised = []

    def search():
        try:
            keyword.keyword_search(source, "夏目漱石", limit=10, offset=0, timeout=0.3)
        except QueryTimeout as exc:
            raised.append(exc)

    request = threading.Thread(target=search, daemon=True)  # a hang fails the test, not CI
    request.start()
    request.join(timeout=10)
    assert not request.is_alive(), "the word side ran past the request's deadline"
    assert raised and "took longer than 0.3 s" in str(raised[0])
    assert threads and threads[0] != request.name
