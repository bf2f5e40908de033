"""Facets: how the matching documents divide by source, tag, feature and area.

Like a terms aggregation, counted over the *matching* documents, not the source: "museums in
Helsinki" by area, "寺" by tag. The cost follows the matches, within bounds:

* a filter counts its matching set (search/setplan.py ``match_ids``) up to ``FACET_SCAN``
  documents, most popular first — every match when there are fewer, so the counts are exact
  exactly when they cover the whole set;
* a search counts the candidates it weighed when they are every match; otherwise the
  ``SEARCH_POOL`` most relevant of a keyword plan made for the facets (its ids only, no rows
  read): exact when those are every match, else the counts describe the most relevant ones and
  say so (``exact: false``, ``counted``);
* ``source`` is each source's total, exact where the total is.

Each count is an index seek per document (``idx_doc_tags_doc``, ``idx_doc_attrs_doc``; ``+name``
keeps SQLite from walking every feature row of the primary key instead) with
the ids passed as one JSON array, so 10,000 ids cost one statement, not 20 batches.
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
from chiezo.search.keyword import plan_keyword
from chiezo.search.setplan import match_ids
from chiezo.store.library import Source

FACETS = ("source", "tag", "feature", "area")
FACET_SCAN = 10_000  # matching documents counted per source; more → the first (most popular)
SEARCH_POOL = 1_000  # a search's candidates counted (retrieval.py weighs them anyway)
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
                "SELECT value, count(*) FROM doc_attrs WHERE +name = ? AND doc_id IN "
                "(SELECT value FROM json_each(?)) GROUP BY value"
            )
            out[name] = Counter(dict(conn.execute(sql, (_ATTRIBUTE_OF[name], as_json))))
    return out


Counted = tuple[dict[str, Counter], int, bool]  # counts, documents counted, exact


def of_filter(source: Source, filters: Filters, names: Sequence[str]) -> Counted:
    """A filter's facets: counts over its first ``FACET_SCAN`` matches, exact if that is all."""
    ids, complete = match_ids(source, filters, FACET_SCAN)
    return count(source.conn, ids, names), len(ids), complete


def of_search(
    source: Source,
    text: str,
    result: SearchResult,
    filters: Filters | None,
    names: Sequence[str],
) -> Counted:
    """A search's facets: counts over the candidates it weighed when those were every match;
    else over the first ``SEARCH_POOL`` of a keyword plan made for them (the hits' own plan is
    not widened: a wider pool would reorder what is fused), with what meaning found on top."""
    weighed = result.weighed
    if not result.total_is_lower_bound and len(weighed) >= result.total:
        return count(source.conn, weighed, names), len(weighed), True
    if result.retrieval == "semantic":  # nothing but the nearest by meaning to count
        return count(source.conn, weighed, names), len(weighed), False
    plan = plan_keyword(source, text, want=SEARCH_POOL, filters=filters)
    ids = list(dict.fromkeys([*(d for d, _ in plan.ranked), *weighed]))
    exact = not plan.lower_bound and len(plan.ranked) >= plan.total
    return count(source.conn, ids, names), len(ids), exact
