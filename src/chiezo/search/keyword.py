"""Keyword search: the word index and the trigram index of one source, fused.

The trigram planner (fts.py) finds any substring and keeps title-exact first; the word index
(core/words.py, ``words_fts``) ranks by content words. Each side ranks its own candidates
(bm25 × popularity, rank.py); each list is divided by its best score and the two are summed
with the word side weighted ``WORD_WEIGHT`` (docs/design.md §24, JaQuAD train: R@1 .887
against .886 with min-max; on dev, words alone .842, trigrams .795, fused .861). A source
built before the word index, or a query with no content words ("the", "は"), is searched by
trigrams alone.

Word plans, like the trigram ones, read a bounded number of postings:

``words``     a query of at most ``AND_MAX_WORDS`` words, every one occurring: matches walked
              in popularity order (doc_id), at most ``CANDIDATE_WALK``, bm25 over the words
              cheap enough to weigh (scoring.py).
``words_or``  a longer query (a question), or no document has them all: the rarest words
              within a postings budget, OR-ed, best bm25 first.
"""

from __future__ import annotations

import concurrent.futures
from dataclasses import dataclass, field, replace

from chiezo.core import db
from chiezo.core.models import SearchResult
from chiezo.core.query import match_all, match_any
from chiezo.core.words import marked_words, query_words
from chiezo.search.filters import Filters, filter_ids
from chiezo.search.fts import (
    CANDIDATE_WALK,
    Planned,
    check_window,
    page_result,
    plan_search,
    read_hits,
)
from chiezo.search.hybrid import fuse
from chiezo.search.names import leading_documents
from chiezo.search.notices import Notice
from chiezo.search.rank import Candidate, rank_page
from chiezo.store.library import Source

WORD_WEIGHT = 0.7
WORDS_BM25 = "bm25(words_fts, 8.0, 4.0, 1.0)"  # title, aliases, body — as the trigram index
PHRASE_POSTINGS_BUDGET = 50_000  # as scoring.py: a word's IDF walks its whole doclist
# postings an OR of words may walk, whatever the corpus size: at 100k documents, question p99
# 55 ms with 60,000 (and a count), 38 ms with 30,000 and no count, recall@5 .88 either way;
# 20,000 lost recall (.855) — docs/design.md §24
OR_POSTINGS_BUDGET = 30_000
OR_MAX_WORDS = 16
NOISE_SHARE = 0.2  # a word in more than this share of documents does not help an OR
# A query of more words than this is a question or a description: requiring all of them finds
# the long article that happens to hold every word (鳥山明 for a question about 桂正和), so its
# words are OR-ed and bm25 ranks by how many and how rare (§24).
AND_MAX_WORDS = 3
FUSION_POOL = 50  # candidates fused from each side (retrieval.DEFAULT_TOP_N)
_word_pool = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="words")


@dataclass
class WordMatches:
    """The word side's ranked candidates (best first) and how many documents match."""

    candidates: list[Candidate]
    total: int
    plan: str
    lower_bound: bool = False
    words: list[str] = field(default_factory=list)  # the words searched for
    seen: list[int] = field(default_factory=list)  # every document walked (fts.Planned.seen)


@dataclass
class KeywordPlan:
    """The keyword side of one source, before any row is read: ``ranked`` (doc_id, score) best
    first, higher better, title-exact documents (``first``) leading, then the documents the
    question names (``named``: search/names.py)."""

    ranked: list[tuple[int, float]]
    first: list[int]
    total: int
    lower_bound: bool
    plan: str  # the result's ``mode``: the word plan and the trigram plan, e.g. words+fts
    notes: list[str]
    needles: list[str]
    query: str
    scaled: bool = False  # ranked holds 0..1 scores scaled by coverage (retrieval.py)
    seen: list[int] = field(default_factory=list)  # every document either side walked
    named: list[int] = field(default_factory=list)  # the question names them: they lead too

    @property
    def lead(self) -> list[int]:
        """The documents ranked first whatever else is fused with this side."""
        return [*self.first, *self.named]

    @property
    def weighed(self) -> list[int]:
        """The ranked documents, then the others the plan walked: what facets count."""
        return list(dict.fromkeys([*(d for d, _ in self.ranked), *self.seen]))

    def result(self, source: Source, offset: int, limit: int) -> SearchResult:
        page = self.ranked[offset : offset + limit]
        first = set(self.first)
        hits = read_hits(
            source,
            [Candidate(d, 0.0, source.rank_of(d), d in first) for d, _ in page],
            self.needles,
        )
        scores = dict(page)
        hits = [replace(h, score=round(scores[h.doc_id], 6)) for h in hits]
        result = page_result(source, self.query, hits, self, offset, limit)
        result.weighed = self.weighed
        return result


def keyword_search(
    source: Source,
    text: str,
    *,
    limit: int,
    offset: int,
    timeout: float | None,
    filters: Filters | None = None,
) -> SearchResult:
    check_window(limit, offset)
    with db.deadline(source.conn, timeout, what=f"search in {source.name!r}"):
        plan = plan_keyword(source, text, want=offset + limit, filters=filters)
        return plan.result(source, offset, limit)


def plan_keyword(
    source: Source,
    text: str,
    *,
    want: int,
    filters: Filters | None = None,
) -> KeywordPlan:
    """Words and trigrams fused where the source has words; trigrams alone elsewhere. At least
    ``FUSION_POOL`` candidates of each side are fused, so that the first ``want`` are right.
    The caller holds the deadline."""
    filters = filters or Filters()
    pool = max(want, FUSION_POOL)
    words = query_words(text) if source.has_words else []
    pending = _start_word_side(source, words, pool, filters) if words else None
    trigrams = plan_search(source, text, want=pool, filters=filters)
    matches = pending.result() if pending is not None else None
    if trigrams.plan == "filter":  # no text to match: the filters' own order
        matches = None
    first = [c.doc_id for c in trigrams.ordered if c.title_match]
    named = [] if first or trigrams.plan == "filter" else _named(source, text, filters)
    if not source.has_words and source.immutable:  # built before the word index
        trigrams.notes.append(Notice("no_word_index", sources=[source.name]))
    if matches is None or not matches.candidates:
        led, named = _named_first([(c.doc_id, -c.score) for c in trigrams.ordered], named)
        return KeywordPlan(
            led,
            first,
            _with_named(trigrams.total, trigrams.lower_bound, trigrams.seen, named),
            trigrams.lower_bound,
            trigrams.plan,
            trigrams.notes,
            trigrams.needles,
            trigrams.query.text,
            seen=list(dict.fromkeys([*trigrams.seen, *named])),
            named=named,
        )
    fused = fuse(
        [(c.doc_id, -c.score) for c in matches.candidates],
        [(c.doc_id, -c.score) for c in trigrams.ordered],
        keyword_weight=WORD_WEIGHT,
        method="max",
        first=first,
    )
    total, lower = _union_total(trigrams, matches, len(fused))
    led, named = _named_first([(f.doc_id, f.score) for f in fused], named)
    seen = [*trigrams.seen, *matches.seen]
    stems, pieces = marked_words(text)  # as written in documents, for the snippets
    return KeywordPlan(
        led,
        first,
        _with_named(total, lower, seen, named),
        lower,
        f"{matches.plan}+{trigrams.plan}",
        trigrams.notes,
        [*trigrams.needles, *pieces, *stems],
        trigrams.query.text,
        seen=list(dict.fromkeys([*seen, *named])),
        named=named,
    )


def _named(source: Source, text: str, filters: Filters) -> list[int]:
    """The documents the question asks about by name (names.py), that meet ``filters``; none
    when the whole query is a title — those documents lead already."""
    ids = leading_documents(source.conn, text)
    return filter_ids(source.conn, filters, ids) if ids and filters else ids


def _named_first(
    ranked: list[tuple[int, float]], named: list[int]
) -> tuple[list[tuple[int, float]], list[int]]:
    """``ranked`` with the named documents first, scored as the best — as a title equal to
    the query leads (fts.py), whether or not the plan matched them: "Tell me about Ray
    Charles" matched three songs whose text holds "tell", not the article — and the named
    documents in the plan's order (a question may name two)."""
    if not named:
        return ranked, named
    top = max((score for _, score in ranked), default=1.0)
    place = {d: i for i, (d, _) in enumerate(ranked)}
    lead = sorted(named, key=lambda d: place.get(d, len(place)))
    chosen = set(lead)
    return [(d, top) for d in lead] + [p for p in ranked if p[0] not in chosen], lead


def _with_named(total: int, lower: bool, seen: list[int], named: list[int]) -> int:
    """The total counting the named documents the plan did not match, when it is exact (an
    exact total walked every match: ``seen``)."""
    if lower:
        return total
    return total + len(set(named) - set(seen))


def _start_word_side(
    source: Source, words: list[str], pool: int, filters: Filters
) -> concurrent.futures.Future[WordMatches]:
    """The word side, started in a helper thread on its own connection while this one plans
    the trigram side: a question at 1M documents spends ~15 ms on each (p99 56 → docs/design.md
    §24.6). The helper stops at this request's deadline."""
    inherited = db.current_deadline()

    def run() -> WordMatches:
        with db.deadline(source.conn, None, inherit=inherited):
            return word_matches(source, words, pool, filters)

    return _word_pool.submit(run)


def _union_total(trigrams: Planned, matches: WordMatches, fused: int) -> tuple[int, bool]:
    """How many documents either side matches: exact when each side saw every match of its
    own — ranked (the fused list) or only walked (``seen``: 76 matches of a rare word are all
    walked, though the word side ranks 50) — else the larger total, as a lower bound."""
    ranked_all = (
        not trigrams.lower_bound
        and trigrams.total == len(trigrams.ordered)
        and not matches.lower_bound
        and matches.total == len(matches.candidates)
    )
    if ranked_all:
        return fused, False
    walked_all = (
        not trigrams.lower_bound
        and trigrams.total <= len(set(trigrams.seen))
        and not matches.lower_bound
        and matches.total <= len(set(matches.seen))
    )
    if walked_all:
        return len(set(trigrams.seen) | set(matches.seen)), False
    return max(trigrams.total, matches.total, fused), True


def word_matches(source: Source, words: list[str], pool: int, filters: Filters) -> WordMatches:
    conn = source.conn
    df = word_frequencies(conn, words)
    present = [w for w in words if df.get(w, 0) > 0]
    if not present:
        return WordMatches([], 0, "words", words=words)
    extra, extra_params = filters.where()
    if len(present) == len(words) and len(words) <= AND_MAX_WORDS:
        found = _all_words(source, present, df, pool, extra, extra_params)
        if found.candidates:
            return found
    if len(present) < 2 and len(words) > 1:  # one word of several: the trigram side knows more
        return WordMatches([], 0, "words_or", words=words)
    return _any_words(source, present, df, pool, extra, extra_params)


def word_frequencies(conn: db.Connection, words: list[str]) -> dict[str, int]:
    marks = ",".join("?" * len(words))
    return dict(conn.execute(f"SELECT word, df FROM word_df WHERE word IN ({marks})", words))


def _all_words(
    source: Source,
    words: list[str],
    df: dict[str, int],
    pool: int,
    extra: str,
    extra_params: tuple,
) -> WordMatches:
    conn = source.conn
    where, params = "words_fts MATCH ?" + extra, (match_all(words), *extra_params)
    walk = max(CANDIDATE_WALK, pool)
    cheap = _cheap(words, df)
    if len(cheap) == len(words):
        rows = conn.execute(
            f"SELECT rowid, {WORDS_BM25} FROM words_fts WHERE {where} ORDER BY rowid LIMIT ?",
            (*params, walk),
        ).fetchall()
    else:  # some word is too common to weigh: walk by popularity, weigh the rare ones
        ids = [
            r[0]
            for r in conn.execute(
                f"SELECT rowid FROM words_fts WHERE {where} ORDER BY rowid LIMIT ?", (*params, walk)
            )
        ]
        rows = _weigh(conn, ids, cheap)
    # more than the walk: the trigram side counts its matches; the union takes the larger
    total, lower = len(rows), len(rows) >= walk
    candidates = rank_page(rows, source.ranks, (), pool)
    return WordMatches(candidates, total, "words", lower, words, [d for d, _ in rows])


def _cheap(words: list[str], df: dict[str, int]) -> list[str]:
    """The words bm25 can weigh within PHRASE_POSTINGS_BUDGET postings *in all* (rarest first):
    each word's IDF walks its doclist, so three words of 50,000 postings cost three budgets."""
    cheap, postings = [], 0
    for word in sorted(words, key=lambda w: df[w]):
        if postings + df[word] > PHRASE_POSTINGS_BUDGET:
            break
        cheap.append(word)
        postings += df[word]
    return cheap


def _weigh(conn: db.Connection, ids: list[int], cheap: list[str]) -> list[tuple[int, float]]:
    """(doc_id, bm25 over the ``cheap`` words), in walk order; 0 when there are none."""
    if not cheap or not ids:
        return [(i, 0.0) for i in ids]
    marks = ",".join("?" * len(ids))
    scored = dict(
        conn.execute(
            f"SELECT rowid, {WORDS_BM25} FROM words_fts WHERE words_fts MATCH ? "
            f"AND +rowid IN ({marks})",
            (match_any(cheap), *ids),
        )
    )
    return [(i, scored.get(i, 0.0)) for i in ids]


def _any_words(
    source: Source,
    present: list[str],
    df: dict[str, int],
    pool: int,
    extra: str,
    extra_params: tuple,
) -> WordMatches:
    chosen = choose_words(present, df, source.doc_count)
    if not chosen:
        return WordMatches([], 0, "words_or", words=present)
    conn = source.conn
    where, params = "words_fts MATCH ?" + extra, (match_any(chosen), *extra_params)
    rows = conn.execute(
        f"SELECT rowid, {WORDS_BM25} FROM words_fts WHERE {where} ORDER BY {WORDS_BM25} LIMIT ?",
        (*params, pool),
    ).fetchall()
    # counting an OR walks every posting again: its largest document frequency is a bound
    total = max(max(df[w] for w in chosen), len(rows))
    ranked = rank_page(rows, source.ranks, (), pool)
    return WordMatches(ranked, total, "words_or", True, chosen, [d for d, _ in rows])


def choose_words(words: list[str], df: dict[str, int], doc_count: int) -> list[str]:
    """The words worth OR-ing: not noise, rarest first, within the postings budget. None when
    even the rarest is over the budget: at 1M documents "20" (140,000 postings) ranked alone
    took 120 ms, and the trigram side finds the query's text itself (docs/design.md §24.6)."""
    noise = max(NOISE_SHARE * doc_count, 1)
    usable = sorted((w for w in words if df[w] <= noise), key=lambda w: df[w])
    chosen, postings = [], 0
    for word in usable[:OR_MAX_WORDS]:
        if postings + df[word] > OR_POSTINGS_BUDGET:
            break
        chosen.append(word)
        postings += df[word]
    return chosen
