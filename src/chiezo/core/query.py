"""User text → safe FTS5 expressions. Pure functions, no database.

Nothing a user types is FTS5 syntax: every whitespace-separated term becomes a quoted phrase, so
quotes, ``NEAR``, ``*``, ``-``, ``^``, parentheses, ``AND``/``OR`` and SQL-looking text are all
searched for as plain text. The trigram tokenizer indexes every 3-character window, so a phrase
of 3 or more characters is a substring search; shorter terms produce no trigram at all and are
handled by the planner in fts.py.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from chiezo.core.errors import BadQuery
from chiezo.core.textnorm import normalise_title, split_terms
from chiezo.core.words import fold

MIN_FTS_CHARS = 3  # the trigram tokenizer cannot index anything shorter
MAX_QUERY_CHARS = 1000

_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


@dataclass(frozen=True)
class ParsedQuery:
    text: str  # the query as given, control characters removed
    terms: tuple[str, ...]
    long_terms: tuple[str, ...]  # usable by the trigram index, in the index's form
    short_terms: tuple[str, ...]  # 1-2 characters: checked another way (as typed)
    norm: str  # normalise_title(text): what an exact title must equal
    folded: bool = False  # the index holds folded text (words.fold): so do long_terms

    def index_form(self, text: str) -> str:
        """``text`` as the source's trigram index holds text."""
        return fold(text) if self.folded else text


def parse_query(text: str, *, folded: bool = False) -> ParsedQuery:
    if text is None:
        raise BadQuery("the query is empty", hint="pass some text to search for")
    cleaned = _CONTROL.sub(" ", str(text))
    if len(cleaned) > MAX_QUERY_CHARS:
        raise BadQuery(
            f"the query is {len(cleaned)} characters long; the limit is {MAX_QUERY_CHARS}",
            hint="search for the distinctive words, not a whole passage",
        )
    terms = tuple(dict.fromkeys(split_terms(cleaned)))  # de-duplicated, order kept
    if not terms:
        raise BadQuery("the query is empty", hint="pass some text to search for")
    long_terms = tuple(
        dict.fromkeys(fold(t) if folded else t for t in terms if len(t) >= MIN_FTS_CHARS)
    )
    short_terms = tuple(t for t in terms if len(t) < MIN_FTS_CHARS)
    return ParsedQuery(
        cleaned.strip(), terms, long_terms, short_terms, normalise_title(cleaned), folded
    )


def has_terms(text: str) -> bool:
    """Whether ``text`` holds anything to search for (parse_query would not call it empty)."""
    return bool(split_terms(_CONTROL.sub(" ", text)))


def phrase(term: str) -> str:
    """A term as an FTS5 string literal: the only escape inside is a doubled quote. Control
    characters become spaces: FTS5 reads a NUL as the end of the expression ("unterminated
    string"), whichever caller built the term."""
    return '"' + _CONTROL.sub(" ", term).replace('"', '""') + '"'


def match_all(terms: tuple[str, ...] | list[str]) -> str:
    """Every term must occur (FTS5's implicit AND between phrases)."""
    return " ".join(phrase(t) for t in terms)


def match_any(terms: tuple[str, ...] | list[str]) -> str:
    return " OR ".join(phrase(t) for t in terms)


def match_in_columns(columns: tuple[str, ...], expr: str) -> str:
    """Restrict an expression to some columns, e.g. ``{title aliases} : ("a" "b")``."""
    return "{" + " ".join(columns) + "} : (" + expr + ")"


def like_pattern(term: str) -> str:
    """A LIKE pattern matching ``term`` anywhere; use with ``ESCAPE '\\'``."""
    escaped = term.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _is_gram_break(char: str) -> bool:
    # Punctuation, symbols and spaces separate grams: 「どこか？」 should not produce 「こか？」.
    return unicodedata.category(char)[0] in "PZC" or char.isspace()


def text_segments(text: str) -> list[str]:
    """Runs of text between spaces and punctuation, folded like the FTS index folds."""
    segments: list[str] = []
    current: list[str] = []
    for char in text:
        if _is_gram_break(char):
            if current:
                segments.append("".join(current))
                current = []
        else:
            current.append(char)
    if current:
        segments.append("".join(current))
    return [s.lower() for s in segments]


def text_grams(text: str) -> list[str]:
    """The distinct character trigrams of ``text``, in order of first appearance, never spanning
    a space or a punctuation mark. A sentence typed without spaces (Japanese) becomes the grams
    an index lookup can use: 「梅雨がない」 → 梅雨が, 雨がな, がない."""
    grams: dict[str, None] = {}
    for segment in text_segments(text):
        for i in range(len(segment) - MIN_FTS_CHARS + 1):
            grams.setdefault(segment[i : i + MIN_FTS_CHARS])
    return list(grams)
