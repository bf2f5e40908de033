"""The operations on the library a model may also call as tools (search, doc, filter, the
lists, notes): each catalogued entry (core/operations.py) bound to its request model and its
handler ``op(ctx, request)``. ops/tools.py builds the MCP tools from these; ops/registry.py adds
the answering operations, whose agent mode uses those tools."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from chiezo.core.operations import BY_NAME, Entry
from chiezo.ops import operating, reading, remembering, searching
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
    SourcesRequest,
    TagsRequest,
    TitlesRequest,
    UpdateRequest,
)


@dataclass(frozen=True)
class Binding:
    """An operation: its catalogue entry, its request model, its handler, and what each reader
    is told of it — declared here once, read by every surface."""

    entry: Entry
    request: type[Request]
    handler: Callable[[Context, Any], Any]  # the operation: ``handler(ctx, request)``
    # what a person reads: the CLI command's --help and the REST route's description
    help: str
    # what a model reads about the tool (MCP and agent mode): the tool descriptions are part of
    # the product, written for a small model's context rather than for a person
    tool_help: str = ""

    @property
    def name(self) -> str:
        return self.entry.name

    def handle(self, ctx: Context, request: Request) -> Any:
        return self.handler(ctx, request)


def bind(
    name: str,
    request: type[Request],
    handler: Callable[[Context, Any], Any],
    help: str,
    tool_help: str = "",
) -> Binding:
    return Binding(BY_NAME[name], request, handler, help, tool_help)


LIBRARY_BINDINGS: dict[str, Binding] = {
    b.name: b
    for b in (
        bind(
            "sources",
            SourcesRequest,
            operating.sources,
            "The sources and what they hold: kind, language, documents, build time, schema "
            "version, attributes, vectors, input identity; sources built or removed while the "
            "server runs appear at once.",
            "The sources: kind, language, size, attributes, vectors (by meaning). Then `search`.",
        ),
        bind(
            "search",
            SearchRequest,
            searching.search,
            "Search one source, several (source=a,b) or every source searched by default, by "
            "words and by meaning: titles equal to the query first, then full text and meaning "
            "fused where a source has vectors (hybrid), else bm25 × popularity; across sources "
            "in one order of evidence. A question typed as one sentence still finds its "
            "documents. Conditions (tag, attr, feature, area, bbox, within) apply to every "
            "source that can meet them; the others are left out and named in the notes. With "
            "near/near_doc the first top_n by relevance are ordered by distance.",
            "Search by words and meaning, exact titles first. Hits: source, doc_id, title, "
            "snippet, its `section`, url (cite it), `distance_km` with near. Then `doc`.",
        ),
        bind(
            "filter",
            FilterRequest,
            searching.filter,
            "Every document of a source meeting all conditions, with the exact total: a "
            "category (tag), places of a kind (feature) in an area or a box, a number (attr), "
            "or nearest to near/near_doc (a comma inside one value means OR); most popular "
            "first, or nearest first with distance_km.",
            "Every document meeting all conditions, exact `total`: a category (tag), places of "
            "a kind (feature) in an area, a number (attr), nearest to a point. Then `doc`.",
        ),
        bind(
            "doc",
            DocRequest,
            reading.doc,
            "One document, by exact title (through aliases), doc_id or key; a title not found "
            "lists the closest ones. With a question, its body is the passages that answer it.",
            "Read a document by title, doc_id or key; with `question`, the passages answering "
            "it, to cite with its url. A title not found lists the closest as `candidates`.",
        ),
        bind(
            "titles",
            TitlesRequest,
            reading.titles,
            "Titles of a source starting with a prefix (case- and width-insensitive, aliases "
            "included), in order: for finding a document's exact title.",
            "Titles (and aliases) starting with `prefix`: the exact name for `doc`.",
        ),
        bind(
            "tags",
            TagsRequest,
            reading.tags,
            "Tag (category) names of a source with their document counts, most used first: "
            "what the tag condition of search and filter takes.",
            "Tags (categories) with document counts, most used first: the exact tag for `filter`.",
        ),
        bind(
            "links",
            LinksRequest,
            reading.links,
            "Links of one document (by title, doc_id or key): what it links to, or with "
            "direction=in, what links to it.",
            "Links of a document (out: to others; in: from others), to follow with `doc`.",
        ),
        bind(
            "recall",
            RecallRequest,
            remembering.recall,
            "Notes newest first, narrowed by words, time (since alone works for vague "
            "references) and tag.",
            "Read notes, newest first; for a vague reference (last week's plan) pass only "
            "`since`. `remember` stores one.",
        ),
        bind(
            "remember",
            RememberRequest,
            remembering.remember,
            "Store a note (write the content itself, not a label); the answer is the note as "
            "stored, durable once acknowledged.",
            "Store a note for later conversations: what to remember in full (浅草寺の最寄り駅は"
            '浅草駅、雷門から徒歩1分), not "looked up 浅草寺".',
        ),
        bind(
            "update",
            UpdateRequest,
            remembering.update,
            "Change a note: only the fields given change.",
            "Change the fields of a note given.",
        ),
        bind(
            "forget",
            ForgetRequest,
            remembering.forget,
            "Delete a note for good.",
            "Delete a note for good.",
        ),
        bind(
            "features",
            FeaturesRequest,
            reading.features,
            "Feature values (key=value) of a place source with their document counts, most "
            "common first: what the feature condition of search and filter takes.",
            "A place source's feature values (key=value) with counts: the exact value "
            "(tourism=museum, not 博物館) for `filter`.",
        ),
        bind(
            "random",
            RandomRequest,
            searching.random,
            "Documents of a source drawn at random (count of them, no repeats), from all of it "
            "or from those meeting conditions (as filter); seed draws the same ones again.",
            "Documents drawn at random, from a source or those meeting the conditions "
            "(as `filter`); `total` is the size of the set drawn from.",
        ),
        bind(
            "geocode",
            GeocodeRequest,
            searching.geocode,
            "Where an address or place name is, from the library's own places (GeoNames, OSM, "
            "place tables): the most precise points found, with the level matched and the "
            "source.",
            "An address or place name → points from the place sources, best first, with the "
            "`level` matched and what is `unmatched`; `filter` takes it as near.",
        ),
    )
}
