import pytest

from chiezo.core.errors import BadQuery
from chiezo.core.query import (
    MAX_QUERY_CHARS,
    like_pattern,
    match_all,
    parse_query,
    phrase,
    text_grams,
)


def test_terms_split_on_any_whitespace_including_ideographic_space():
    q = parse_query("浅草寺\u3000雷門  東京")
    assert q.terms == ("浅草寺", "雷門", "東京")
    assert q.long_terms == ("浅草寺",)
    assert q.short_terms == ("雷門", "東京")


def test_repeated_terms_count_once():
    assert parse_query("rust rust book").terms == ("rust", "book")


def test_every_term_is_a_quoted_phrase_with_quotes_doubled():
    assert phrase('say "hi"') == '"say ""hi"""'
    assert match_all(["NEAR(a", "b)", "-x*"]) == '"NEAR(a" "b)" "-x*"'


@pytest.mark.parametrize("text", ["", "   ", "\u3000", "\x00\x01"])
def test_empty_queries_are_bad_requests(text):
    with pytest.raises(BadQuery):
        parse_query(text)


def test_overlong_queries_are_refused_with_the_limit():
    with pytest.raises(BadQuery, match=str(MAX_QUERY_CHARS)):
        parse_query("あ" * (MAX_QUERY_CHARS + 1))


def test_like_patterns_escape_wildcards():
    assert like_pattern("a%b_c\\") == "%a\\%b\\_c\\\\%"


def test_grams_never_span_punctuation_or_spaces():
    assert text_grams("日本で梅雨がないのは？") == [
        "日本で",
        "本で梅",
        "で梅雨",
        "梅雨が",
        "雨がな",
        "がない",
        "ないの",
        "いのは",
    ]
    assert "a b" not in text_grams("ab cd")
    assert text_grams("Rust book") == ["rus", "ust", "boo", "ook"]


def test_grams_are_distinct_and_in_order():
    assert text_grams("ababab") == ["aba", "bab"]
