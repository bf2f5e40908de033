"""The operation registry: each catalogued operation (core/operations.py) bound to its request
model (ops/requests.py: parameters, bounds, defaults, help) and the service method that handles
it.

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

from dataclasses import dataclass
from typing import Any

from chiezo.core.operations import BY_NAME, Entry
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
    method: str  # the Service method taking the request's arguments
    # what a model reads about the tool (MCP and agent mode): the tool descriptions are part of
    # the product, written for a small model rather than derived from the help of a flag
    tool_help: str
    # the service method takes the request itself (where its parameters are many, or its
    # defaults would repeat the model's); else the request's fields as keyword arguments
    whole: bool = False

    @property
    def name(self) -> str:
        return self.entry.name

    def handle(self, service: Any, request: Request) -> Any:
        if self.whole:
            return getattr(service, self.method)(request)
        return getattr(service, self.method)(**request.arguments())


def _bind(name: str, request: type[Request], method: str, tool_help: str) -> Binding:
    whole = request in _WHOLE
    return Binding(BY_NAME[name], request, method, tool_help, whole)


# the operations whose service method takes the request model itself
_WHOLE = (
    SearchRequest,
    FilterRequest,
    TitlesRequest,
    TagsRequest,
    LinksRequest,
    FeaturesRequest,
    RandomRequest,
    GeocodeRequest,
)


BINDINGS: dict[str, Binding] = {
    b.name: b
    for b in (
        _bind("search", SearchRequest, "search", ""),  # its tool is written in ops/tools.py
        _bind("filter", FilterRequest, "filter", ""),
        _bind(
            "doc",
            DocRequest,
            "doc",
            "Read one document by title, doc_id or key — with `question`, the parts of it that "
            "answer the question. `max_chars` bounds the whole answer: long lists are cut, "
            "with their `<name>_total` and `more` saying how to read on. A missing title "
            "returns an error with the closest titles as `candidates`; several documents "
            "sharing a title come back as `alternatives`.",
        ),
        _bind(
            "titles",
            TitlesRequest,
            "titles",
            "Titles starting with `prefix` (case- and width-insensitive, aliases included): for "
            "finding the exact name of a document.",
        ),
        _bind(
            "tags",
            TagsRequest,
            "tags",
            "Tag (category) names with document counts, most used first. Use it to find the "
            "exact tag before `filter`.",
        ),
        _bind(
            "links",
            LinksRequest,
            "links",
            "Links of a document (by title, doc_id or key), to follow related documents.",
        ),
        _bind(
            "recall",
            RecallRequest,
            "recall",
            'Read notes, newest first. For a vague reference ("last week\'s plan") pass only '
            "`since`: notes rarely share words with how they are later asked about.",
        ),
        _bind(
            "remember",
            RememberRequest,
            "remember",
            "Store a note for later conversations. Write out what should be remembered in full "
            '(e.g. "浅草寺の最寄り駅は浅草駅（銀座線・浅草線）、雷門から徒歩1分"), not '
            '"looked up 浅草寺".',
        ),
        _bind(
            "update", UpdateRequest, "update_note", "Change a note; only the fields given change."
        ),
        _bind("forget", ForgetRequest, "forget", "Delete a note for good."),
        _bind(
            "features",
            FeaturesRequest,
            "features",
            'Feature values ("key=value") of a place source with counts — look up the exact '
            "value (tourism=museum) before filtering instead of guessing (feature=博物館 "
            "matches nothing).",
        ),
        _bind(
            "random",
            RandomRequest,
            "random",
            "Documents drawn at random (no repeats), from the whole source or from those "
            "meeting conditions (a tag, an area, a number, a box, near with radius_km): for "
            "browsing, or a sample of a category. `total` is the size of the set drawn from.",
        ),
        _bind(
            "geocode",
            GeocodeRequest,
            "geocode",
            "An address or place name (香川県高松市番町一丁目10-16, 京都市, Kamppi, Helsinki) → "
            "points from the library's place sources, best first, each with the `level` "
            "matched (prefecture, municipality, district, exact), the `source`, the document "
            "and the part of the input left `unmatched`. The same resolution `near=` does.",
        ),
    )
}
