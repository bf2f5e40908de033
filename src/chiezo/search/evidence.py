"""How strongly a hit matches its query, on one scale for every source — the order of a
search across sources.

A source's own scores (bm25 × popularity, min-max fused with cosine) only order *its* hits:
min-max gives every source's best hit 1.0, so fusing sources by rank gave each an equal share
and rank 1 to whichever source's best hit came first (R@1 .467 on the 92 jawiki questions
against .870 in the right source alone). Two measures do compare across sources:

* **coverage** — the share of the query's content words (core/words.py) a document contains, each
  word weighted by its rarity *in that document's source* (idf), words in its title counting
  more; averaged with the same share in the passage the hit shows, because a long article
  holds most words of any question somewhere. A word no document of a source
  has weighs most there, so a Rust-book chapter that matches 生まれる but neither 夏目 nor 漱石
  covers little of 「夏目漱石はいつ生まれましたか」, however well it ranks in its own source.
* **meaning** — a hit found by meaning has a cosine; above the source's semantic floor
  (calibration.py) it is scaled to 0..1 (how far above "unrelated" it is).

A hit's relevance is their mix, weighted as its source weighs keyword against meaning.
``merge`` then orders hits: titles equal to the query first, from whichever source; then by
relevance, each source's hits kept in that source's own order (its ranking is the better one
within it: .870 R@1) — a hit never counts for more than the one its source put above it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from chiezo.core import db
from chiezo.core.models import Hit
from chiezo.core.query import phrase
from chiezo.core.words import index_text
from chiezo.search import languages
from chiezo.search.keyword import word_frequencies
from chiezo.store.library import Source

# A hit's relevance, in a source with vectors: this share is meaning, the rest coverage. Coverage
# alone favours long documents (an article holds most words of any question), meaning is
# measured on the best passage whatever the length.
MEANING_WEIGHT = 0.35  # JaQuAD train among six sources: R@1 .872 at 0.2, 0.35 and 0.5
# For a question in another script than the source's (search/languages.py) its words cannot
# be found there but for names and loans, so coverage says little and meaning leads; and
# cosines across scripts run lower than within one (use-m: オーストリア for "What is the capital
# of Austria?" 0.27 above the floor), so meaning this far above the floor counts as a full
# match: an English source's words-only match must not outrank the article a Japanese source
# found by meaning. 0.25 is the lowest at which no same-language set lost: 0.15 found most
# across languages (R@1 sum 1.77 against 1.60) but put jawiki's Beatles and Elvis articles
# above two Ray Charles ZIM answers (docs/design.md §42).
CROSS_SCRIPT_MEANING_WEIGHT = 1.0
CROSS_SCRIPT_FULL_MEANING = 0.25
# Of a hit's coverage, the share that counts only words in its title: of two documents that
# both mention "Ray Charles", the one titled "Ray Charles (album)" is about it.
TITLE_SHARE = 0.3
# A query's keyword evidence is as strong as its most informative content word: log(N/df) / log N,
# 1 for a word of one document. Below this share the keyword side's weight is scaled down
# (retrieval.keyword_weight): 「日本で最も南にある県は？」 in 189 jawiki articles has nothing rarer
# than 南 (59 articles, 0.22), so meaning leads. Chosen on the two development sets of
# docs/design.md §31.4 (0.5–0.65 within a question or six; the checks the same from 0.4 to 0.65).
SPECIFIC = 0.55
# Walking a word's whole doclist costs ~0.1 µs a posting, a seek per candidate ~15 µs: walk
# when the word has fewer postings than this many per candidate.
WALK_PER_CANDIDATE = 100


@dataclass(frozen=True)
class Weighed:
    hit: Hit
    relevance: float
    position: int  # within its source's list


def coverage(source: Source, words: Sequence[str], doc_ids: Sequence[int]) -> dict[int, float]:
    """Each document's idf-weighted share of ``words`` (the query's content words), words in
    its title or aliases counting ``TITLE_SHARE`` more; empty where the source has no word
    index to tell."""
    if not words or not doc_ids or not source.has_words:
        return {}
    conn = source.conn
    df = word_frequencies(conn, list(words))
    weight = _weights(source, words, df)
    total = sum(weight.values()) or 1.0
    anywhere = dict.fromkeys(doc_ids, 0.0)
    in_title = dict.fromkeys(doc_ids, 0.0)
    for word in (w for w in words if df.get(w)):
        walk = df[word] <= WALK_PER_CANDIDATE * len(doc_ids)
        for got, expr in (
            (anywhere, phrase(word)),
            (in_title, "{title aliases} : " + phrase(word)),
        ):
            for doc_id in _holding(conn, expr, doc_ids, walk):
                got[doc_id] += weight[word]
    return {
        d: ((1 - TITLE_SHARE) * anywhere[d] + TITLE_SHARE * in_title[d]) / total for d in doc_ids
    }


def specificity(source: Source, words: Sequence[str], light: frozenset[str] = frozenset()) -> float:
    """0..1: how specific the query's ``words`` are in ``source`` — its most informative word
    but the ``light`` ones (words.light_words), log(N/df) / log N, over ``SPECIFIC``, at most
    1. A word no document holds counts as specific (the word index does not know it; the
    trigram side may find it as written); a query of light words only says nothing (0). 1
    where there is nothing to judge by: no word index, no words, a source of one document."""
    content = [w for w in words if w not in light]
    n = source.doc_count
    if not words or not source.has_words or n < 2:
        return 1.0
    if not content:
        return 0.0
    df = word_frequencies(source.conn, content)
    rarest = min(df.get(w, 0) for w in content)
    information = 1.0 if rarest == 0 else math.log(n / rarest) / math.log(n)
    return min(1.0, information / SPECIFIC)


def covered(source: Source, words: Sequence[str], hits: Sequence[Hit]) -> dict[int, float]:
    """Each hit's coverage of the query: the mean of the whole document's and of the passage
    it shows. JaQuAD train as one source among six, R@1 (alone .896): document .836, passage
    .874, mean .872 with the best R@5 (.978) — docs/design.md §24."""
    whole = coverage(source, words, [h.doc_id for h in hits])
    shown = passage_coverage(source, words, hits)
    return {d: (c + shown.get(d, 0.0)) / 2 for d, c in whole.items()}


def passage_coverage(source: Source, words: Sequence[str], hits: Sequence[Hit]) -> dict[int, float]:
    """Each hit's idf-weighted share of ``words`` found in what it shows: its title, its
    section's headings and its snippet — the passage where the query's words are densest, or
    the one meaning matched.
    A long document holds most words of any question somewhere; a passage that holds them
    together is evidence (JaQuAD train as one source among six, docs/design.md §24)."""
    if not words or not hits or not source.has_words:
        return {}
    weight = _weights(source, words)
    total = sum(weight.values()) or 1.0
    out = {}
    for hit in hits:
        shown = set(index_text(f"{hit.title}\n{hit.section or ''}\n{hit.snippet}").split())
        out[hit.doc_id] = sum(w for word, w in weight.items() if word in shown) / total
    return out


def _weights(source: Source, words: Sequence[str], df: dict[str, int] | None = None):
    """Each word's idf in ``source``: a word no document has weighs most."""
    if df is None:
        df = word_frequencies(source.conn, list(words))
    n = max(source.doc_count, 1)
    return {w: math.log(1 + n / (df.get(w, 0) + 1)) for w in words}


def _holding(conn: db.Connection, expr: str, doc_ids: Sequence[int], walk: bool) -> list[int]:
    """Which of ``doc_ids`` match ``expr``: by walking its doclist when that is short, else by
    one seek per document (FTS5 runs ``rowid IN (…)`` as one lookup per value, ~15 µs each)."""
    if walk:
        wanted = set(doc_ids)
        return [
            d
            for (d,) in conn.execute("SELECT rowid FROM words_fts WHERE words_fts MATCH ?", (expr,))
            if d in wanted
        ]
    marks = ",".join("?" * len(doc_ids))
    return [
        d
        for (d,) in conn.execute(
            f"SELECT rowid FROM words_fts WHERE words_fts MATCH ? AND rowid IN ({marks})",
            (expr, *doc_ids),
        )
    ]


@dataclass(frozen=True)
class Weighing:
    """How one source's hits are weighed for one question (``weighing``)."""

    meaning: float = 0.0  # the share of meaning; the rest is coverage
    full_meaning: float = 1.0  # calibrated meaning that counts as a full match


def weighing(source: Source, question: str, retrieval: str) -> Weighing:
    """None of meaning where it did not search (or searched alone: its cosines then order
    the source's hits, and coverage weighs them across sources); ``MEANING_WEIGHT`` with
    hybrid; where the question's words cannot be in the source and meaning searched it,
    meaning. (A cross-script source without vectors keeps its coverage: halving it changed
    no R@1 of the cross-language sets, docs/design.md §42.)"""
    if retrieval in ("hybrid", "semantic") and languages.crosses(source, question):
        return Weighing(CROSS_SCRIPT_MEANING_WEIGHT, CROSS_SCRIPT_FULL_MEANING)
    return Weighing(MEANING_WEIGHT if retrieval == "hybrid" else 0.0)


def relevance(hit: Hit, covered: float | None, weighed: Weighing) -> float:
    """0..1: the hit's coverage and, in a source with vectors (``weighed.meaning`` > 0), its
    meaning — 0 when meaning did not find it. A source without a word index (notes, or built
    before it) is judged by its own normalised score, halved: it cannot show that it holds the
    query's words."""
    if covered is None:
        covered = 0.5 * min(max(hit.score, 0.0), 1.0) if hit.score > 0 else 0.25
    meaning = min((hit.semantic or 0.0) / weighed.full_meaning, 1.0)
    return (1 - weighed.meaning) * covered + weighed.meaning * meaning


def merge(per_source: Sequence[Sequence[Weighed]]) -> list[Hit]:
    """One list from each source's weighed hits (each in its source's order)."""
    leading: list[Weighed] = []
    rest: list[tuple[float, int, int, Weighed]] = []
    for index, weighed in enumerate(per_source):
        ceiling = math.inf
        for item in weighed:
            if item.hit.title_match:
                leading.append(item)
                continue
            ceiling = min(ceiling, item.relevance)
            rest.append((-ceiling, item.position, index, item))
    leading.sort(key=lambda w: (-w.relevance, w.position))
    rest.sort(key=lambda t: t[:3])
    return [w.hit for w in leading] + [t[3].hit for t in rest]
