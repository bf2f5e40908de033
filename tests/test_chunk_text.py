"""A passage is stored once: as spans of its document's body where it is made of them
(store/chunk_text.py) — and every reader gets the very text the chunker cut."""

from __future__ import annotations

import shutil
import sqlite3

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chiezo.core.config import Settings
from chiezo.ops import building, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest
from chiezo.store import chunk_text, generations
from chiezo.store.chunk_text import from_spans, spans_of, stored_rows

from helpers import data_file

LONG = "これは十分に長い段落の文です。" * 10  # over SPANS_FROM


def test_paragraphs_joined_by_one_newline_where_the_body_has_a_blank_line():
    first, second, third = LONG + "一", LONG + "二", LONG + "三"
    body = f"{first}\n\n{second}\n{third}\n\n後の段落。"
    chunk = f"{first}\n{second}\n{third}"
    spans, end = spans_of(body, chunk)
    assert from_spans(body, spans) == chunk
    assert spans.count(",") == 1  # "second\nthird" is one span across the body's own newline
    assert body[end:].startswith("\n\n後の段落")


def test_a_long_line_cut_at_a_sentence_end_is_two_spans_of_one_line():
    body = LONG + "前半の文。" + LONG + "後半の文。"
    chunk = LONG + "前半の文。\n" + LONG + "後半の文。"
    spans, _ = spans_of(body, chunk)
    assert from_spans(body, spans) == chunk


def test_text_not_made_of_the_body_or_too_short_keeps_its_text():
    body = LONG + "\n\n" + LONG
    assert spans_of(body, "町の紹介: " + LONG) is None  # a generated passage
    assert spans_of(body, LONG[: chunk_text.SPANS_FROM - 1]) is None  # not worth a span list
    assert spans_of("", LONG) is None


def test_chunks_are_looked_for_in_order_so_a_repeated_paragraph_maps_to_its_own_place():
    body = f"{LONG}\n\n{LONG}"
    rows = stored_rows(body, [("A", LONG), ("B", LONG)])
    assert [r[2] for r in rows] == [f"0:{len(LONG)}", f"{len(LONG) + 2}:{2 * len(LONG) + 2}"]
    assert all(r[1] == "" for r in rows)


@given(
    st.lists(st.text(alphabet="あいう。\n ", min_size=0, max_size=80), min_size=1, max_size=8),
    st.text(alphabet="あいう。\n ", max_size=400),
)
def test_spans_always_give_back_exactly_the_text(pieces, body_noise):
    body = body_noise + "\n\n".join(pieces)
    chunk = "\n".join(pieces)
    found = spans_of(body, chunk)
    if found is not None:
        assert from_spans(body, found[0]) == chunk
        assert chunk_text.text_length("", found[0]) == len(chunk)
    assert spans_of(body_noise, chunk + "え") is None or "え" in body_noise


@pytest.fixture(scope="module")
def two_builds(tmp_path_factory):
    """The jawiki test excerpt built twice: as now, and with every passage's text stored."""
    root = tmp_path_factory.mktemp("chunk_text")
    dump = data_file("wikipedia/jawiki-20230501-excerpt.xml.bz2")
    spans = Context(Settings(data_dir=root / "spans"))
    building.ingest(spans, "wikipedia", dump, "jawiki", embed=False)
    keep = chunk_text.SPANS_FROM
    chunk_text.SPANS_FROM = 10**9
    try:
        texts = Context(Settings(data_dir=root / "texts"))
        building.ingest(texts, "wikipedia", dump, "jawiki", embed=False)
    finally:
        chunk_text.SPANS_FROM = keep
    return spans, texts


def _all_chunks(service: Context) -> list[tuple]:
    conn = service.library.get("jawiki").conn
    ids = [r[0] for r in conn.execute("SELECT doc_id FROM docs ORDER BY doc_id")]
    return [(d, *c[1:]) for d in ids for c in chunk_text.document_chunks(conn, d)]


@pytest.mark.slow
def test_a_wikipedia_build_keeps_most_passages_as_spans_and_reads_back_the_same(two_builds):
    spans, texts = two_builds
    assert _all_chunks(spans) == _all_chunks(texts)  # every passage, character for character
    conn = spans.library.get("jawiki").conn
    kept, total = conn.execute(
        "SELECT count(*) FILTER (WHERE spans IS NOT NULL), count(*) FROM chunks"
    ).fetchone()
    assert kept > 0.7 * total, (kept, total)
    size = {
        name: generations.current_path(s.settings.corpus_dir / "jawiki").stat().st_size
        for name, s in (("spans", spans), ("texts", texts))
    }
    assert size["spans"] < 0.92 * size["texts"], size
    # what a user sees: a search's snippets and sections, a document's passages
    for query in ("日本語の特徴", "北海道の地形", "東京"):
        request = SearchRequest.of(query=query, source="jawiki", mode="keyword")
        assert [(h.title, h.snippet, h.section) for h in searching.search(spans, request).hits] == [
            (h.title, h.snippet, h.section) for h in searching.search(texts, request).hits
        ]


@pytest.mark.slow
def test_a_generation_built_before_spans_is_still_read(two_builds, tmp_path):
    """A version-1 file: no ``spans`` column, every passage's text in ``text``."""
    _, texts = two_builds
    data = tmp_path / "old"
    shutil.copytree(texts.settings.data_dir, data, symlinks=True)
    path = generations.current_path(data / "corpus" / "jawiki")
    with sqlite3.connect(path) as conn:
        conn.execute("ALTER TABLE chunks DROP COLUMN spans")
        conn.execute("UPDATE meta SET value = '1' WHERE key = 'schema_version'")
    conn.close()
    old = Context(Settings(data_dir=data))
    assert old.library.get("jawiki").meta["schema_version"] == "1"
    assert _all_chunks(old) == _all_chunks(texts)
    request = SearchRequest.of(query="日本語の特徴", source="jawiki", mode="keyword")
    assert [h.snippet for h in searching.search(old, request).hits] == [
        h.snippet for h in searching.search(texts, request).hits
    ]


def test_covers_says_whether_a_body_offset_is_inside_a_passages_spans():
    assert chunk_text.covers("0:10,12:20", 0) and chunk_text.covers("0:10,12:20", 19)
    assert not chunk_text.covers("0:10,12:20", 10)  # the blank line between two pieces
    assert not chunk_text.covers("0:10,12:20", 20)
