"""The operation registry: each catalogued operation (core/operations.py) bound to its request
model (ops/requests.py: parameters, bounds, defaults, help) and its handler
``op(ctx, request)`` (ops/searching.py, reading.py, remembering.py).

The surfaces derive what they offer from a binding rather than declaring it again: the MCP tool
(ops/tools.py: its arguments, schema and description), the REST route's query parameters
(surfaces/rest/params.py ``query_parameters``) and the CLI command's arguments and options
(surfaces/cli/parameters.py ``request_options``). tests/test_operations_contract.py reads the
live surfaces and checks each bound operation there: names, bounds and defaults.

Operations not bound here yet (ask/chat take the answer choices of answer/options.py; notes,
jobs and the operator's commands take their own bodies) are still in the catalogue, so the
contract test knows where each surface offers them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chiezo.core.operations import BY_NAME, Entry
from chiezo.ops import reading, remembering, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import (
    DocRequest,
    FeaturesRequest,
    FilterRequest,
    ForgetRequest,
    GeocodeRequest,
    LinksRequest,
    RandomRequest,
    RecallRequest,
    RememberRequest,
    Request,
    SearchRequest,
    TagsRequest,
    TitlesRequest,
    UpdateRequest,
)


@dataclass(frozen=True)
class Binding:
    entry: Entry
    request: type[Request]
    handler: Callable[[Context, Any], Any]  # the operation: ``handler(ctx, request)``
    # what a model reads about the tool (MCP and agent mode): the tool descriptions are part of
    # the product, written for a small model rather than derived from the help of a flag
    tool_help: str

    @property
    def name(self) -> str:
        return self.entry.name

    def handle(self, ctx: Context, request: Request) -> Any:
        return self.handler(ctx, request)


def _bind(
    name: str, request: type[Request], handler: Callable[[Context, Any], Any], tool_help: str
) -> Binding:
    return Binding(BY_NAME[name], request, handler, tool_help)


BINDINGS: dict[str, Binding] = {
    b.name: b
    for b in (
        _bind("search", SearchRequest, searching.search, ""),  # its tool is written in ops/tools.py
        _bind(
            "filter",
            FilterRequest,
            searching.filter,
            "Every document meeting all conditions, exact `total`: a category (tag), places of "
            "a kind (feature) in an area, a number (attr), nearest to a point. Then `doc`.",
        ),
        _bind(
            "doc",
            DocRequest,
            reading.doc,
            "Read a document by title, doc_id or key; with `question`, the passages answering "
            "it, to cite with its url. A title not found lists the closest as `candidates`.",
        ),
        _bind(
            "titles",
            TitlesRequest,
            reading.titles,
            "Titles (and aliases) starting with `prefix`: the exact name for `doc`.",
        ),
        _bind(
            "tags",
            TagsRequest,
            reading.tags,
            "Tags (categories) with document counts, most used first: the exact tag for `filter`.",
        ),
        _bind(
            "links",
            LinksRequest,
            reading.links,
            "Links of a document (out: to others; in: from others), to follow with `doc`.",
        ),
        _bind(
            "recall",
            RecallRequest,
            remembering.recall,
            "Read notes, newest first; for a vague reference (last week's plan) pass only "
            "`since`. `remember` stores one.",
        ),
        _bind(
            "remember",
            RememberRequest,
            remembering.remember,
            "Store a note for later conversations: what to remember in full (浅草寺の最寄り駅は"
            '浅草駅、雷門から徒歩1分), not "looked up 浅草寺".',
        ),
        _bind("update", UpdateRequest, remembering.update, "Change the fields of a note given."),
        _bind("forget", ForgetRequest, remembering.forget, "Delete a note for good."),
        _bind(
            "features",
            FeaturesRequest,
            reading.features,
            "A place source's feature values (key=value) with counts: the exact value "
            "(tourism=museum, not 博物館) for `filter`.",
        ),
        _bind(
            "random",
            RandomRequest,
            searching.random,
            "Documents drawn at random, from a source or those meeting the conditions "
            "(as `filter`); `total` is the size of the set drawn from.",
        ),
        _bind(
            "geocode",
            GeocodeRequest,
            searching.geocode,
            "An address or place name → points from the place sources, best first, with the "
            "`level` matched and what is `unmatched`; `filter` takes it as near.",
        ),
    )
}
