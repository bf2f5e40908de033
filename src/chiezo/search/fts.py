"""Full-text search plans over one source. Every plan reads a bounded number of rows.

Plans (the ``mode`` reported with every result):

``fts``           every term of 3+ characters must occur (AND of phrases). Candidates come from
                  the FTS index alone, walking matches in doc_id order — doc_id is the popularity
                  ordinal — and stopping after ``CANDIDATE_WALK``. Fewer matches than that: all
                  are scored and the total is exact. More: the most popular ``CANDIDATE_WALK``
                  matches are scored, and the total is counted up to ``COUNT_CAP``.
``fts+short``     as ``fts``, keeping only candidates that also contain the 1-2 character terms
                  (read from their text; beyond ``BODY_CHECK_MAX`` long-term matches a
                  2-character term is found through the indexed trigrams that begin with it).
``title_prefix``  only 1-2 character terms, which the trigram index cannot see: titles that
                  start with the first term (and contain the others); ``title_prefix+fts``
                  when documents containing 2-character terms anywhere follow them (found
                  through the indexed trigrams that begin with each term).
``trigram_or``    the AND found nothing — typically a question typed as one unspaced sentence:
                  OR over the text's character trigrams, rarest first, dropping trigrams so
                  common they are noise, ranked by bm25.

In every plan, documents whose title or alias equals the whole query come first.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Protocol

from chiezo.core import db
from chiezo.core.errors import BadQuery
from chiezo.core.models import Hit, SearchResult
from chiezo.core.query import (
    MIN_FTS_CHARS,
    ParsedQuery,
    like_pattern,
    match_all,
    match_any,
    parse_query,
    text_grams,
    text_segments,
)
from chiezo.core.textnorm import normalise_title
from chiezo.search.filters import Filters, check_filters, filter_ids
from chiezo.search.notices import Notice
from chiezo.search.pdf_pages import is_pdf_url, page_of_heading, page_with_words, with_page
from chiezo.search.rank import Candidate, rank_page
from chiezo.search.scoring import BM25, score_candidates, split_by_cost
from chiezo.search.sections import points_of, section_of, sections_at
from chiezo.search.snippet import anchored_snippet, make_snippet
from chiezo.store.library import Source

CANDIDATE_WALK = 2000  # matches scored at most, most popular first (see docs/design.md)
COUNT_CAP = 100_000  # exact totals up to this many matches, a lower bound beyond
COSTLY_COUNT_CAP = 20_000  # the same when a term is very common: counting phrases costs more
MIN_POOL = 200  # candidates ranked for the sentence fallback, at least
MAX_WINDOW = 10_000  # offset + limit; deeper pages are refused with a reason
TITLE_SCAN_CAP = 20_000
TITLE_EXACT_MAX = 50
SHORT_EXPANSION_MAX = 64  # trigrams OR-ed for one 2-character term, most frequent first
# Long-term matches in whose text short terms are looked for by reading (_with_short_terms)
BODY_CHECK_MAX = 500
NARROW_EXPANSION_MAX = 256  # trigrams OR-ed for one 2-character term ANDed with long terms
SHORT_COUNT_CAP = 20_000  # an OR of 64 doclists counts slower; its total is a bound anyway
# Sentence fallback: which trigrams of the question to OR together.
SENTENCE_MAX_GRAMS = 24
SENTENCE_NOISE_SHARE = 0.1  # a trigram in more than this share of documents is noise
SENTENCE_POSTINGS_BUDGET = 10_000  # doclist entries scored at most, whatever the corpus size


@dataclass
class Planned:
    """A plan's outcome before any row is read: the first candidates in display order."""

    query: ParsedQuery
    ordered: list[Candidate]
    total: int
    plan: str  # which plan found them (the result's ``mode``): fts, title_prefix, trigram_or…
    lower_bound: bool
    notes: list[str]
    needles: list[str]  # what snippets look for
    # every document the plan walked (all matches when the total is exact), not only the
    # ranked first ones: what facets count (search/facets.py)
    seen: list[int] = field(default_factory=list)


class PlanOutcome(Protocol):
    """What a page reports of the plan that found it: fts.Planned and keyword.KeywordPlan."""

    total: int
    lower_bound: bool
    plan: str
    notes: list[str]


def page_result(
    source: Source,
    query: str,
    hits: list[Hit],
    planned: PlanOutcome,
    offset: int,
    limit: int,
) -> SearchResult:
    """One source's page of ``hits``, with how ``planned`` (total, lower_bound, plan, notes)
    found them."""
    return SearchResult(
        query=query,
        hits=hits,
        total=planned.total,
        mode=planned.plan,
        offset=offset,
        limit=limit,
        total_is_lower_bound=planned.lower_bound,
        notes=planned.notes,
        sources=[source.name],
    )


def plan_search(
    source: Source,
    text: str,
    *,
    want: int,
    filters: Filters | None = None,
) -> Planned:
    """The first ``want`` candidates of the trigram planner, unread (the caller holds the
    deadline)."""
    query = parse_query(text, folded=source.has_words)
    filters = filters or Filters()
    check = check_filters(source, filters)
    if check.impossible:
        return Planned(query, [], 0, "filter", False, check.notes, [])
    if not query.long_terms:
        return _short_only(source, query, want, 0, filters)
    planned = _fulltext(source, query, want, 0, filters)
    if planned.total == 0:
        planned = _sentence(source, query, want, 0, filters) or planned
    return planned


def check_window(limit: int, offset: int) -> None:
    if limit < 1:
        raise BadQuery(f"limit must be at least 1, got {limit}")
    if offset < 0:
        raise BadQuery(f"offset must not be negative, got {offset}")
    if offset + limit > MAX_WINDOW:
        raise BadQuery(
            f"offset + limit may not exceed {MAX_WINDOW:,} (got {offset + limit:,})",
            hint="refine the query instead of paging this deep",
        )


# -- plans -------------------------------------------------------------------------------------


def _fulltext(
    source: Source, query: ParsedQuery, limit: int, offset: int, filters: Filters
) -> Planned:
    conn = source.conn
    groups, read_for = _with_short_terms(conn, query, filters)
    expr = " AND ".join([f"({match_all(query.long_terms)})", *(groups or [])])
    where, params = _where(expr, read_for, filters)
    walk = max(CANDIDATE_WALK, 2 * (offset + limit))
    notes: list[str] = []
    known_total = None if filters else _lone_gram_df(conn, query)
    cheap, costly = split_by_cost(conn, query.long_terms)
    rows = [] if groups is None else _walk(conn, where, params, walk, query, cheap, bool(groups))
    if costly:
        notes.append(Notice("common_terms", terms=costly))
    title_ids = filter_ids(conn, filters, title_exact(conn, query.norm))
    ordered = rank_page(rows, source.ranks, title_ids, offset + limit)
    if len(rows) < walk:  # every match was scored: the total is exact
        total, lower_bound = len({d for d, _ in rows} | set(title_ids)), False
    else:
        if known_total is not None:
            matched, lower_bound = known_total, False
        else:  # count on from where the walk stopped, never walking a posting twice
            cap = COSTLY_COUNT_CAP if costly else COUNT_CAP
            after, lower_bound = _count(
                conn, where + " AND rowid > ?", (*params, max(d for d, _ in rows)), cap - walk
            )
            matched = walk + after
        outside = [i for i in title_ids if not _matches(conn, where, params, i)]
        total = matched + len(outside)
        notes.append(Notice("many_matches", n=walk))
    plan = "fts+short" if query.short_terms else "fts"
    needles = [*query.long_terms, *query.short_terms]
    seen = [d for d, _ in rows] + title_ids
    return _page(
        source, query, ordered, total, plan, limit, offset, needles, lower_bound, notes, seen
    )


def _walk(
    conn: db.Connection,
    where: str,
    params: tuple,
    walk: int,
    query: ParsedQuery,
    cheap: list[str],
    narrowed: bool,
) -> list[tuple[int, float]]:
    """The first ``walk`` matches in popularity order, scored on the long terms: by FTS5's
    bm25 while walking when every long term is cheap and the MATCH holds nothing else, else
    walked unscored and scored after (scoring.py)."""
    if len(cheap) == len(query.long_terms) and not narrowed:
        return conn.execute(
            f"SELECT rowid, {BM25} FROM docs_fts WHERE {where} ORDER BY rowid LIMIT ?",
            (*params, walk),
        ).fetchall()
    ids = [
        r[0]
        for r in conn.execute(
            f"SELECT rowid FROM docs_fts WHERE {where} ORDER BY rowid LIMIT ?", (*params, walk)
        )
    ]
    return score_candidates(conn, ids, cheap, query.long_terms)


def _sentence(
    source: Source, query: ParsedQuery, limit: int, offset: int, filters: Filters
) -> Planned | None:
    conn = source.conn
    grams = choose_grams(conn, query.index_form(query.text), source.doc_count)
    if not grams:
        return None
    expr = match_any(grams)
    extra, extra_params = filters.where()
    where, params = "docs_fts MATCH ?" + extra, (expr, *extra_params)
    pool = max(MIN_POOL, 2 * (offset + limit))
    rows = conn.execute(
        f"SELECT rowid, {BM25} FROM docs_fts WHERE {where} ORDER BY {BM25} LIMIT ?",
        (*params, pool),
    ).fetchall()
    ordered = rank_page(rows, source.ranks, (), offset + limit)
    total, lower_bound = _count(conn, where, params)
    notes: list[str] = [Notice("partial_match")] if rows else []
    seen = [d for d, _ in rows]
    return _page(
        source, query, ordered, total, "trigram_or", limit, offset, grams, lower_bound, notes, seen
    )


def choose_grams(conn: db.Connection, text: str, doc_count: int) -> list[str]:
    """The pieces of ``text`` worth OR-ing: present in the index, not noise, rarest first,
    within a postings budget so the cost stays bounded at any corpus size.

    A run of CJK text (a question typed without spaces) gives its trigrams. A word of a spaced
    script stays whole: OR-ing its trigrams would match any word sharing three letters, so
    "qzxvbnm plorkwidget fnargle" found every page with "widget" or "large" in it."""
    pieces: dict[str, list[str]] = {}  # piece → its trigrams
    for segment in text_segments(text):
        if _spaced_word(segment):
            if len(segment) >= MIN_FTS_CHARS:
                pieces[segment] = text_grams(segment)
        else:
            for gram in text_grams(segment):
                pieces[gram] = [gram]
    grams = list(dict.fromkeys(g for gs in pieces.values() for g in gs))
    if not grams:
        return []
    df: dict[str, int] = {}
    for start in range(0, len(grams), 500):
        part = grams[start : start + 500]
        marks = ",".join("?" * len(part))
        df.update(conn.execute(f"SELECT gram, df FROM gram_df WHERE gram IN ({marks})", part))
    # a word occurs in at most as many documents as its rarest trigram; finding it walks all
    docs = {p: min(df.get(g, 0) for g in gs) for p, gs in pieces.items()}
    cost = {p: sum(df.get(g, 0) for g in gs) for p, gs in pieces.items()}
    noise = max(SENTENCE_NOISE_SHARE * doc_count, 1)
    usable = sorted((p for p in pieces if 0 < docs[p] <= noise), key=lambda p: docs[p])
    chosen: list[str] = []
    postings = 0
    for piece in usable:
        if len(chosen) >= SENTENCE_MAX_GRAMS:
            break
        if chosen and postings + cost[piece] > SENTENCE_POSTINGS_BUDGET:
            break
        chosen.append(piece)
        postings += cost[piece]
    return chosen


def _spaced_word(segment: str) -> bool:
    """Letters of scripts written with spaces between words (no Han, kana or Hangul)."""
    return not any(_unspaced_char(c) for c in segment)


def _unspaced_char(char: str) -> bool:
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF  # hiragana, katakana
        or 0x3400 <= code <= 0x9FFF  # CJK ideographs
        or 0xAC00 <= code <= 0xD7AF  # Hangul syllables
        or 0xF900 <= code <= 0xFAFF
        or 0xFF66 <= code <= 0xFF9F  # half-width katakana
        or 0x20000 <= code <= 0x2FFFF
        or 0x0E00 <= code <= 0x0EFF  # Thai, Lao: no spaces between words either
    )


def _short_only(
    source: Source, query: ParsedQuery, limit: int, offset: int, filters: Filters
) -> Planned:
    """Only 1-2 character terms. Titles starting with the first term (exact title first) come
    first; then, for 2-character terms, documents containing them anywhere, found through the
    index's trigrams that begin with each term (京都 → 京都市, 京都府, 京都の, ...)."""
    conn = source.conn
    want = offset + limit
    ordered, total, lower_bound = _title_prefix_candidates(
        source, query, TITLE_SCAN_CAP if filters else want
    )
    if filters:
        keep = set(filter_ids(conn, filters, [c.doc_id for c in ordered]))
        ordered = [c for c in ordered if c.doc_id in keep]
        total = len(ordered)
    notes: list[str] = [Notice("short_terms", term=query.terms[0])]
    plan = "title_prefix"
    body_ids: list[int] = []
    expr, expansion_complete = _expand_short_terms(
        conn, tuple(query.index_form(t) for t in query.terms)
    )
    if expr is not None:
        walk = max(CANDIDATE_WALK, 2 * (offset + limit))
        extra, extra_params = filters.where()
        where, params = "docs_fts MATCH ?" + extra, (expr, *extra_params)
        # No bm25 here: over an OR of up to 64 trigrams it would cost 64 phrase scores per
        # row, and it says little about a 2-character word. Popularity (the walk order) ranks.
        rows = conn.execute(
            f"SELECT rowid FROM docs_fts WHERE {where} ORDER BY rowid LIMIT ?",
            (*params, walk),
        ).fetchall()
        in_titles = {c.doc_id for c in ordered}
        body_ids = [d for (d,) in rows if d not in in_titles]
        if body_ids:
            plan = "title_prefix+fts"
        titles_total = total
        need = max(want - len(ordered), 0)
        ordered = ordered + [Candidate(d, 0.0, source.rank_of(d)) for d in body_ids[:need]]
        if len(rows) < walk and expansion_complete and titles_total <= want:
            total = titles_total + len(body_ids)  # every match seen: exact
        else:
            matched, _ = _count(conn, where, params, SHORT_COUNT_CAP)
            total, lower_bound = max(matched, titles_total, len(ordered)), True
    seen = [c.doc_id for c in ordered] + body_ids
    return _page(
        source,
        query,
        ordered,
        total,
        plan,
        limit,
        offset,
        list(query.terms),
        lower_bound,
        notes,
        seen,
    )


def _title_prefix_candidates(
    source: Source, query: ParsedQuery, upto: int
) -> tuple[list[Candidate], int, bool]:
    """Titles (and aliases) starting with the first term and containing the others: the exact
    title first, then by popularity (= doc_id, a top-N sort inside SQLite). Returns
    (the first ``upto`` candidates, total, whether the total is only a bound)."""
    conn = source.conn
    first = normalise_title(query.terms[0])
    others = tuple(normalise_title(t) for t in query.terms[1:])
    where = "norm >= ? AND norm < ?" + " AND instr(norm, ?) > 0" * len(others)
    params = (first, first + "\U0010ffff", *others)
    entries = conn.execute(
        f"SELECT count(*) FROM (SELECT 1 FROM titles WHERE {where} LIMIT ?)",
        (*params, TITLE_SCAN_CAP + 1),
    ).fetchone()[0]
    if entries <= 5000:  # small enough to count documents, not title entries (aliases)
        total = conn.execute(
            f"SELECT count(DISTINCT doc_id) FROM titles WHERE {where}", params
        ).fetchone()[0]
    else:
        total = entries
    exact = title_exact(conn, query.norm)
    ids = list(exact)
    fetch = upto + len(exact) + 8
    while len(ids) < upto:
        rows = conn.execute(
            f"SELECT doc_id FROM titles WHERE {where} ORDER BY doc_id LIMIT ?", (*params, fetch)
        ).fetchall()
        ids = list(dict.fromkeys([*exact, *(r[0] for r in rows)]))
        if len(rows) < fetch:
            break
        fetch *= 2
    exact_set = set(exact)
    ordered = [Candidate(d, 0.0, source.rank_of(d), title_match=d in exact_set) for d in ids[:upto]]
    return ordered, total, entries > TITLE_SCAN_CAP


def _expand_short_terms(conn: db.Connection, terms: tuple[str, ...]) -> tuple[str | None, bool]:
    """An FTS expression equivalent to "every 2-character term occurs" (``_gram_group``);
    (None, False) when a term cannot be expanded. Returns (expression, whether every term's
    trigrams fitted in SHORT_EXPANSION_MAX)."""
    groups, complete = [], True
    for term in terms:
        group, fitted = _gram_group(conn, term)
        if group is None:
            return None, False
        groups.append(group)
        complete &= fitted
    return " AND ".join(groups), complete


def _gram_group(
    conn: db.Connection, term: str, most: int = SHORT_EXPANSION_MAX
) -> tuple[str | None, bool]:
    """ "``term`` occurs" for a 2-character term in the index's form: the OR of the indexed
    trigrams that start with it, the ``most`` most frequent (an occurrence at the very end of
    a text has no such trigram and is missed). 1-character terms have too many, and a term no
    trigram starts with has none: (None, False). Returns (group, whether all its trigrams
    fitted)."""
    grams = _grams_from(conn, term, most + 1)
    if not grams:
        return None, False
    return "(" + match_any(grams[:most]) + ")", len(grams) <= most


def _grams_from(conn: db.Connection, term: str, most: int) -> list[str]:
    """The indexed trigrams that start with the 2-character ``term``, most frequent first."""
    if len(term) != 2:
        return []
    folded = term.lower()
    return [
        r[0]
        for r in conn.execute(
            "SELECT gram FROM gram_df WHERE gram >= ? AND gram < ? ORDER BY df DESC LIMIT ?",
            (folded, folded + "\U0010ffff", most),
        )
    ]


def _with_short_terms(
    conn: db.Connection, query: ParsedQuery, filters: Filters
) -> tuple[list[str] | None, tuple[str, ...]]:
    """What finds the short terms: groups to AND into the long terms' MATCH (None: the index
    says no document has them all), and the terms left to find by reading each candidate's
    text (``_where``).

    Reading costs what the bodies weigh: 0.11 ms a jawiki body, so a rare 2-character term
    beside a common long one (生まれ 桜野: 8,344 bodies read for 194 matches) took 936 ms at
    20,000 articles and would end in a 504 at 1.4M (docs/design.md §35.12). So while the long
    terms match at most ``BODY_CHECK_MAX`` documents the short terms are read for (exact);
    beyond, each 2-character term whose trigrams all fit joins the MATCH as its
    ``_gram_group`` — the index answers, at the cost of missing an occurrence that ends a
    text, as the ``title_prefix+fts`` plan does. Other short terms are still read for, among
    the fewer candidates left."""
    if not query.short_terms:
        return [], ()
    extra, extra_params = filters.where()
    long_terms = (match_all(query.long_terms), *extra_params)
    _, many = _count(conn, "docs_fts MATCH ?" + extra, long_terms, BODY_CHECK_MAX)
    if not many:
        return [], query.short_terms
    groups, read_for = [], []
    for term in query.short_terms:
        form = query.index_form(term)
        group, fitted = _gram_group(conn, form, NARROW_EXPANSION_MAX)
        if group is None and len(form) == 2:
            return None, ()  # no indexed text has it but at its very end
        if group is not None and fitted:
            groups.append(group)
        else:
            read_for.append(term)
    return groups, tuple(read_for)


# -- helpers -----------------------------------------------------------------------------------


def _where(expr: str, short_terms: tuple[str, ...], filters: Filters) -> tuple[str, tuple]:
    """The MATCH plus, for each short term, "it occurs in title, aliases or body" (read from
    docs: the index of a built source holds no text), plus the filter conditions."""
    clauses, params = ["docs_fts MATCH ?"], [expr]
    for term in short_terms:
        pattern = like_pattern(term)
        clauses.append(
            "EXISTS (SELECT 1 FROM docs d WHERE d.doc_id = docs_fts.rowid AND (d.title LIKE ? "
            "ESCAPE '\\' OR d.aliases LIKE ? ESCAPE '\\' OR d.body LIKE ? ESCAPE '\\'))"
        )
        params += [pattern, pattern, pattern]
    extra, extra_params = filters.where()
    return " AND ".join(clauses) + extra, (*params, *extra_params)


def title_exact(conn: db.Connection, norm: str) -> list[int]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT doc_id FROM titles WHERE norm = ? ORDER BY doc_id LIMIT ?",
            (norm, TITLE_EXACT_MAX),
        )
    ]


def _lone_gram_df(conn: db.Connection, query: ParsedQuery) -> int | None:
    """A query that is one 3-character term: its exact document count, from the vocabulary."""
    if query.short_terms or len(query.long_terms) != 1 or len(query.long_terms[0]) != 3:
        return None
    row = conn.execute(
        "SELECT df FROM gram_df WHERE gram = ?", (query.long_terms[0].lower(),)
    ).fetchone()
    return row[0] if row else 0


def _count(
    conn: db.Connection, where: str, params: tuple, cap: int | None = None
) -> tuple[int, bool]:
    """Matches counted from the index, up to ``cap`` (COUNT_CAP); (count, is_lower_bound)."""
    cap = COUNT_CAP if cap is None else cap
    n = conn.execute(
        f"SELECT count(*) FROM (SELECT rowid FROM docs_fts WHERE {where} LIMIT ?)",
        (*params, cap + 1),
    ).fetchone()[0]
    return (cap, True) if n > cap else (n, False)


def _matches(conn: db.Connection, where: str, params: tuple, doc_id: int) -> bool:
    return (
        conn.execute(
            f"SELECT 1 FROM docs_fts WHERE {where} AND rowid = ?", (*params, doc_id)
        ).fetchone()
        is not None
    )


def _page(
    source: Source,
    query: ParsedQuery,
    ordered: list[Candidate],
    total: int,
    plan: str,
    limit: int,
    offset: int,
    needles: list[str],
    lower_bound: bool,
    notes: list[str],
    seen: list[int],
) -> Planned:
    kept = ordered[: offset + limit]
    return Planned(query, kept, total, plan, lower_bound, notes, needles, seen)


def read_hits(
    source: Source, page: list[Candidate], needles: list[str], from_chunks: Collection[int] = ()
) -> list[Hit]:
    """Stage two: read only the rows that are shown, with each document's point and the
    section its snippet quotes (search/sections.py). ``from_chunks``: documents whose snippet
    (and so section and PDF page) the caller takes from the chunk meaning matched."""
    if not page:
        return []
    marks = ",".join("?" * len(page))
    rows = {
        r[0]: r
        for r in source.conn.execute(
            f"SELECT doc_id, key, title, url, opening, body FROM docs WHERE doc_id IN ({marks})",
            [c.doc_id for c in page],
        )
    }
    points = points_of(source, rows)
    hits, anchors = [], {}
    for cand in page:
        row = rows.get(cand.doc_id)
        if row is None:
            continue
        _, key, title, url, opening, body = row
        quote = _quote(source, row, needles, cand.doc_id in from_chunks)
        if quote.anchor is not None:
            anchors[cand.doc_id] = (body, quote.anchor, title)
        hits.append(
            Hit(
                source=source.name,
                doc_id=cand.doc_id,
                key=key,
                title=title,
                snippet=quote.snippet,
                score=round(cand.score, 6),
                rank_score=round(cand.rank_score, 6),
                url=quote.url,
                title_match=cand.title_match,
                point=points.get(cand.doc_id),
                section=quote.section,
            )
        )
    sections = sections_at(source, anchors)
    for hit in hits:
        hit.section = sections.get(hit.doc_id, hit.section)
    return hits


@dataclass
class _Quote:
    snippet: str
    url: str | None
    section: str | None = None
    anchor: int | None = None  # where in the body the snippet is: its section is still to find


def _quote(source: Source, row: tuple, needles: list[str], by_meaning: bool) -> _Quote:
    """What a hit quotes. A PDF quotes, and links to, its page with the most of the words
    (search/pdf_pages.py), named by that page's breadcrumb; any other document the densest stretch
    of its body, whose section sections_at finds from the anchor."""
    doc_id, _, title, url, opening, body = row
    if is_pdf_url(url) and not by_meaning:
        found = page_with_words(source.conn, doc_id, needles)
        if found is not None:
            heading, text = found
            return _Quote(
                make_snippet(text, needles),
                with_page(url, page_of_heading(heading)),
                section_of(heading, title),
            )
    snippet, anchor = anchored_snippet(body or opening, needles)
    # an opening is no chunk's text; a passage found by meaning brings its own section
    return _Quote(snippet, url, anchor=anchor if body and not by_meaning else None)
