"""Facets: how the matching documents divide by source, tag, feature and area.

Like a terms aggregation, counted over the *matching* documents, not the source: "museums in
Helsinki" by area, "寺" by tag. The cost follows the matches, within bounds:

* a filter counts its matching set (search/setplan.py ``match_ids``) up to ``FACET_SCAN``
  documents, most popular first — every match when there are fewer, so the counts are exact
  exactly when they cover the whole set;
* a search counts what its plan walked anyway — the candidates it ranked and every other match
  it saw (the trigram walk's 2,000 most popular matches, the word side's), ``SEARCH_POOL`` at
  most: exact when that was every match, else the counts describe those and say so
  (``exact: false``, ``counted``). A second plan made for the facets would cost a second search
  (at 100k documents facets then took 1.4–5.2× the search, bench/search_scale.py); widening
  the hits' own plan would change their order;
* ``source`` is each source's total, exact where the total is.

Each count is an index seek per document (``idx_doc_tags_doc``, ``idx_doc_attrs_doc``) with the
ids passed as one JSON array, so 10,000 ids cost one statement, not 20 batches: ~6 ms a facet
at 1M places, plus ~2 ms to read the ids when the filter's plan did not keep them.
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from chiezo.core import db
from chiezo.core.errors import BadQuery, Option
from chiezo.core.models import SearchResult
from chiezo.search.filters import Filters
from chiezo.search.setplan import match_ids
from chiezo.store.library import Source

FACETS = ("source", "tag", "feature", "area")
FACET_SCAN = 10_000  # matching documents counted per source; more → the first (most popular)
SEARCH_POOL = 2_000  # a search's walked matches counted: the trigram walk (fts.CANDIDATE_WALK)
FACET_VALUES = 20  # values listed per facet, the most frequent first
_ATTRIBUTE_OF = {"feature": "feature", "area": "area"}


def check_facets(names: Sequence[str] | None) -> tuple[str, ...]:
    """The facets asked for, each once; an unknown one is a 400 naming the known ones."""
    asked = tuple(dict.fromkeys(n.strip() for n in names or () if n.strip()))
    for name in asked:
        if name not in FACETS:
            raise BadQuery(
                f"there is no facet {name!r}; facets are {', '.join(FACETS)}",
                candidates=difflib.get_close_matches(name, FACETS, n=3) or list(FACETS),
                hint="e.g. {see}",
                see=Option("facets", "tag,area"),
            )
    return asked


@dataclass
class Facets:
    """Counts per facet over ``counted`` documents (the whole matching set when ``exact``)."""

    names: tuple[str, ...]
    counts: dict[str, Counter] = field(default_factory=dict)
    counted: int = 0
    exact: bool = True
    source_totals: dict[str, tuple[int, bool]] = field(default_factory=dict)  # n, lower bound

    def add(self, counts: dict[str, Counter], counted: int, exact: bool) -> None:
        for name, counter in counts.items():
            self.counts.setdefault(name, Counter()).update(counter)
        self.counted += counted
        self.exact = self.exact and exact

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.names:
            if name == "source":
                out[name] = self._sources()
                continue
            counter = self.counts.get(name, Counter())
            top = sorted(counter.items(), key=lambda item: (-item[1], item[0]))
            out[name] = {
                "values": [{"value": v, "n": n} for v, n in top[:FACET_VALUES]],
                "more": max(len(top) - FACET_VALUES, 0),  # values left out of the list
                "counted": self.counted,
                "exact": self.exact,
            }
        return out

    def _sources(self) -> dict[str, Any]:
        ordered = sorted(self.source_totals.items(), key=lambda item: (-item[1][0], item[0]))
        return {
            "values": [{"value": s, "n": n} for s, (n, _) in ordered],
            "more": 0,
            "counted": sum(n for n, _ in self.source_totals.values()),
            "exact": not any(lower for _, lower in self.source_totals.values()),
        }


def count(conn: db.Connection, ids: Iterable[int], names: Sequence[str]) -> dict[str, Counter]:
    """Each facet's value → how many of ``ids`` carry it (``source`` aside)."""
    as_json = json.dumps(list(ids))
    out: dict[str, Counter] = {}
    for name in names:
        if name == "tag":
            sql = (
                "SELECT tag, count(*) FROM doc_tags WHERE doc_id IN "
                "(SELECT value FROM json_each(?)) GROUP BY tag"
            )
            out[name] = Counter(dict(conn.execute(sql, (as_json,))))
        elif name in _ATTRIBUTE_OF:
            sql = (
                "SELECT value, count(*) FROM doc_attrs WHERE name = ? AND doc_id IN "
                "(SELECT value FROM json_each(?)) GROUP BY value"
            )
            out[name] = Counter(dict(conn.execute(sql, (_ATTRIBUTE_OF[name], as_json))))
    return out


Counted = tuple[dict[str, Counter], int, bool]  # counts, documents counted, exact


def of_filter(
    source: Source, filters: Filters, names: Sequence[str], matched: list[int] | None = None
) -> Counted:
    """A filter's facets: counts over its first ``FACET_SCAN`` matches, exact if that is all.
    ``matched``: every match in doc_id order, when the filter's plan has them already."""
    if matched is not None:
        ids, complete = matched[:FACET_SCAN], len(matched) <= FACET_SCAN
    else:
        ids, complete = match_ids(source, filters, FACET_SCAN)
    return count(source.conn, ids, names), len(ids), complete


def of_search(source: Source, result: SearchResult, names: Sequence[str]) -> Counted:
    """A search's facets: counts over what its plan walked (the ranked candidates and every
    other match it saw, ``SEARCH_POOL`` at most), exact when that was every match."""
    ids = result.weighed[:SEARCH_POOL]
    exact = not result.total_is_lower_bound and len(ids) >= result.total
    return count(source.conn, ids, names), len(ids), exact
