"""The library's tools for AI agents: names, descriptions, parameter schemas, and the call that
runs one over a service.

Two surfaces offer these tools and both take them from here: surfaces/mcp/server.py serves them to MCP
clients, answer/agent.py offers them to the model in agent mode — so a model answering inside
Chiezo is told exactly what an MCP client is told, and reads the same results and errors.
Tool descriptions and the instructions are part of the product: a model uses the library well
only if they tell it how (the design notes measured tool-description gaps turning directly
into failed questions).

This module knows the service only as the object handed to :func:`library_tools`; it imports
nothing above it (not the service, not the MCP server, not the answer layer), so the service
can run the agent and the agent can run the tools without an import cycle.

Errors come back as tool errors whose text is the REST API's JSON body (reason, candidates,
known sources...) — :func:`error_text` renders it — so a model can correct itself on the next
step; a bug comes back in the same shape (status 500), never as a bare "Error executing tool".
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import logging
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import Field

from chiezo.core.errors import ChiezoError, InternalError
from chiezo.ops.requests import (
    MAX_LIMIT,
    MAX_LIST_LIMIT,
    FilterRequest,
    Param,
    Request,
    SearchRequest,
    params,
)

log = logging.getLogger("chiezo.tools")

INSTRUCTIONS = """\
Chiezo is an offline library of sources (encyclopedias, place databases, the user's own
documents) plus `notes`, a memory you can write. Look facts up here instead of guessing dates,
places, names or numbers, and cite the source and title you used.

How to use it well:
- Call `sources` once to see what exists: each source's kind, size and which attributes
  (tags, attribute names) it has.
- `search` first, then `doc` only for the documents you need (use `max_chars` to keep it short;
  give `question` to read the parts of a long document that answer it, not its beginning).
  A document whose title equals your query is listed first: searching an exact name is cheap.
- Sources with vectors (see `sources`) are searched by words *and* meaning (hybrid): a
  question phrased differently from the article still finds it. `mode="keyword"` asks for
  words only.
- Keyword queries are words separated by spaces; every word must occur. Words under 3 characters
  (e.g. 京都) cannot use the full-text index: a query made only of them matches titles
  starting with them (then documents containing them). A question typed as a sentence still
  works (mode `trigram_or`), but distinctive words work better.
- To list or count the members of a category, use `filter` with `tag` — not a full-text
  search for the category name (that misses members and has no exact total). Check the exact
  tag name with `tags` first.
- Places (osm_*, geonames): `filter` with `feature` as "key=value" (tourism=museum,
  railway=station, amenity=restaurant; find values with `features`), `area` (an admin area
  name: ["Kyoto"], or ["京都府"] where the source has Japanese area names; case does not
  matter), `bbox`, `near` ("lat,lon"), or `near_doc` ("jawiki:浅草寺") for "nearest X to Y" in
  one call. Only place sources have feature/area; Wikipedia sources have tags and coordinates.
- A filter on a tag or attribute the source does not have is an error that says so: switch
  source or drop the condition rather than retrying.
- `remember` stores the content itself — names, numbers, dates, the items of a list — as
  sentences that make sense later without this conversation; never a label like "looked up X".
  Use `recall` with `since` alone for vague references ("what we discussed last week").
"""

READ = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)

Limit = Annotated[int, Field(ge=1, le=MAX_LIMIT, description=f"results per page (1-{MAX_LIMIT})")]
ListLimit = Annotated[int, Field(ge=1, le=MAX_LIST_LIMIT)]
Offset = Annotated[int, Field(ge=0, description="results to skip, for paging")]
SourceName = Annotated[str, Field(description="a source name from `sources`")]


# -- building and running tools -----------------------------------------------------------------


def library_tools(service, *, writable: bool = True) -> list[Tool]:
    """Every tool over ``service``; ``writable=False`` leaves out the note-writing tools."""
    made = _read_tools(service) + (_note_tools(service) if writable else [])
    return [Tool.from_function(fn, annotations=hints) for fn, hints in made]


@dataclass(frozen=True)
class Outcome:
    """One tool call as an MCP client sees it: ``text`` (the result as JSON, or the error's
    text), ``data`` (the structured result; None for an error) and whether it ``failed``."""

    text: str
    data: Any
    failed: bool


def call_tool(tool: Tool, arguments: dict[str, Any]) -> Outcome:
    """Run ``tool`` in this process, its arguments validated against its schema and its
    result converted as the MCP server does both (agent mode calls tools this way)."""
    try:
        result = asyncio.run(tool.run(arguments, None, convert_result=True))  # type: ignore[arg-type]
    except ToolError as exc:  # a 400/404 reason or bad arguments: material for the next step
        return Outcome(str(exc), None, True)
    text = "".join(getattr(c, "text", "") for c in result.content)
    return Outcome(text, None if result.is_error else result.structured_content, result.is_error)


def error_text(error: ChiezoError, source: str | None = None) -> str:
    """What a tool's caller reads for ``error``: the REST API's JSON body, with hints naming
    tool calls (``features(source="osm")``) rather than routes. (The MCP SDK puts "Error
    executing tool NAME: " in front of it.)"""
    return json.dumps(error.to_dict("mcp", source=source), ensure_ascii=False)


def _reported(fn):
    """Turn a ChiezoError into a tool error carrying :func:`error_text`, and a bug into the
    same shape (status 500), logged with its traceback."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ChiezoError as exc:
            raise ToolError(error_text(exc, kwargs.get("source"))) from exc
        except Exception as exc:
            log.exception("tool %s failed", fn.__name__)
            raise ToolError(error_text(InternalError.wrapping(exc))) from exc

    wrapper.__doc__ = inspect.cleandoc(fn.__doc__ or "")
    return wrapper


def takes(model: type[Request]):
    """A tool whose arguments are ``model``'s parameters (ops/requests.py), with their
    descriptions and bounds in its input schema; the function receives the model."""

    def decorate(fn):
        @functools.wraps(fn)
        def tool(**values: Any) -> dict[str, Any]:
            return fn(model.model_validate(values))

        tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [_tool_parameter(p) for p in params(model)], return_annotation=dict[str, Any]
        )
        return tool

    return decorate


def _tool_parameter(param: Param) -> inspect.Parameter:
    default = inspect.Parameter.empty if param.required else param.default
    return inspect.Parameter(
        param.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        annotation=Annotated[param.annotation, Field(**param.constraints())],
    )


# -- the tools ----------------------------------------------------------------------------------


def _read_tools(service) -> list:
    @_reported
    def sources() -> dict[str, Any]:
        """List the sources: name, kind, language, number of documents, build date, and the
        attributes each has (a filter on an attribute a source lacks is an error)."""
        return {"sources": service.sources()}

    @_reported
    @takes(SearchRequest)
    def search(request: SearchRequest) -> dict[str, Any]:
        """Search by words and by meaning. Titles equal to the query come first, then
        relevance (hybrid: full text and meaning fused). Returns hits (source, doc_id, title,
        snippet; `section`: the heading path of the passage the snippet quotes, e.g.
        `歴史 > 近代` or `p. 12`; `point` {lat, lon} when the document has coordinates;
        `distance_km` with near/near_doc), `total` (exact unless `total_is_lower_bound`),
        `retrieval` (keyword, semantic, hybrid, or keyword-fallback when meaning search ran out
        of time) and `order`. Follow up with `doc` for the hits you need."""
        return service.search(request).to_dict()

    @_reported
    def doc(
        source: SourceName,
        title: Annotated[str | None, Field(description="exact title (or alias)")] = None,
        doc_id: Annotated[int | None, Field(description="doc_id from a search hit")] = None,
        key: Annotated[str | None, Field(description="the source's own key")] = None,
        fields: Annotated[
            list[str] | None,
            Field(
                description="subset of: title url aliases opening body tags links attrs "
                "point chunks extra key rank_score source doc_id"
            ),
        ] = None,
        max_chars: Annotated[
            int | None, Field(ge=0, description="cut the body to this many characters")
        ] = 4000,
        question: Annotated[
            str | None,
            Field(
                description="the question you are answering: the body is then the passages of the "
                "document that best answer it, not its beginning"
            ),
        ] = None,
    ) -> dict[str, Any]:
        """Read one document by title, doc_id or key — with `question`, the parts of it that
        answer the question. A missing title returns an error with the closest titles as
        `candidates`; several documents sharing a title come back as `alternatives`."""
        return service.doc(
            source,
            title=title,
            doc_id=doc_id,
            key=key,
            fields=fields,
            max_chars=max_chars,
            question=question,
        )

    @_reported
    def titles(
        source: SourceName,
        prefix: Annotated[str, Field(description="the start of a title")],
        limit: ListLimit = 20,
    ) -> dict[str, Any]:
        """Titles starting with `prefix` (case- and width-insensitive, aliases included): for
        finding the exact name of a document."""
        return service.titles(source, prefix, limit=limit)

    @_reported
    def tags(
        source: SourceName,
        prefix: Annotated[str | None, Field(description="tags starting with this")] = None,
        contains: Annotated[str | None, Field(description="tags containing this")] = None,
        limit: ListLimit = 50,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """Tag (category) names with document counts, most used first. Use it to find the exact
        tag before `filter`."""
        return service.tags(source, prefix=prefix, contains=contains, limit=limit, offset=offset)

    @_reported
    def links(
        source: SourceName,
        title: str | None = None,
        doc_id: int | None = None,
        direction: Annotated[
            str, Field(description="'out': what it links to; 'in': what links to it")
        ] = "out",
        limit: ListLimit = 50,
        offset: Offset = 0,
    ) -> dict[str, Any]:
        """Links of a document (by title or doc_id), to follow related documents."""
        return service.links(
            source, title=title, doc_id=doc_id, direction=direction, limit=limit, offset=offset
        )

    @_reported
    @takes(FilterRequest)
    def filter(request: FilterRequest) -> dict[str, Any]:
        """List every document meeting all conditions with the exact `total` — the way to list
        or count a category's members (by tag), places of a kind (feature) in an area (e.g.
        area: ["Kyoto"], or ["京都府"] where areas have Japanese names) or a box, or the nearest
        places to a point or to another source's document (with distance_km). A condition the
        source cannot have is an error naming the sources that have it; a value it does not
        have comes back with the closest ones it does."""
        return service.filter(request)

    @_reported
    def features(
        source: SourceName,
        contains: Annotated[str | None, Field(description="e.g. museum, station")] = None,
        limit: ListLimit = 50,
    ) -> dict[str, Any]:
        """Feature values ("key=value") of a place source with counts — look up the exact value
        (tourism=museum) before filtering instead of guessing (feature=博物館 matches nothing)."""
        return service.features(source, contains=contains, limit=limit)

    @_reported
    def recall(
        q: Annotated[str | None, Field(description="words the note contains")] = None,
        since: Annotated[
            str | None, Field(description="ISO date/time: changed at or after (e.g. 2026-11-01)")
        ] = None,
        until: Annotated[str | None, Field(description="ISO date/time: changed up to")] = None,
        tag: str | None = None,
        limit: Limit = 10,
        offset: Offset = 0,
        max_chars: Annotated[int | None, Field(ge=0)] = 2000,
    ) -> dict[str, Any]:
        """Read notes, newest first. For a vague reference ("last week's plan") pass only
        `since`: notes rarely share words with how they are later asked about."""
        return service.recall(
            q=q,
            since=since,
            until=until,
            tag=tag,
            limit=limit,
            offset=offset,
            max_chars=max_chars,
        )

    return [
        (fn, READ) for fn in (sources, search, doc, titles, tags, links, filter, features, recall)
    ]


def _note_tools(service) -> list:
    @_reported
    def remember(
        text: Annotated[
            str,
            Field(
                description="the content itself: names, numbers, dates, list items, written "
                "so it makes sense later without this conversation — never a summary label"
            ),
        ],
        title: Annotated[
            str | None, Field(description="a short title; default: first line")
        ] = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        """Store a note for later conversations. Write out what should be remembered in full
        (e.g. "浅草寺の最寄り駅は浅草駅（銀座線・浅草線）、雷門から徒歩1分"), not "looked up 浅草寺"."""
        return service.remember(text, title=title, tags=tags)

    @_reported
    def update(
        note_id: int,
        text: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
    ) -> dict[str, Any]:
        """Change a note; only the fields given change."""
        return service.update_note(note_id, text=text, title=title, tags=tags)

    @_reported
    def forget(note_id: int) -> dict[str, Any]:
        """Delete a note for good."""
        return service.forget(note_id)

    return [(remember, WRITE), (update, WRITE), (forget, DESTRUCTIVE)]
