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

import functools
import inspect
import json
import logging
import typing
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import ToolAnnotations
from pydantic import Field, PlainValidator
from pydantic_core import PydanticCustomError

from chiezo.answer.tool_calls import Toolbox, error_text
from chiezo.core.errors import ChiezoError, InternalError
from chiezo.ops.registry import BINDINGS, Binding
from chiezo.ops.requests import (
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
  name: ["京都府"] or ["Kyoto"] — a Japanese prefecture answers to either; case does not
  matter), `bbox`, `near` ("lat,lon"), or `near_doc` ("jawiki:浅草寺") for "nearest X to Y" in
  one call. Only place sources have feature/area; Wikipedia sources have tags, coordinates and
  numbers from their infoboxes (`attr` "population>=1000000", area_km2, elevation_m, founded).
- A filter on a tag or attribute the source does not have is an error that says so: switch
  source or drop the condition rather than retrying.
- A source marked `live` (a kiwix-serve book) is searched on its server: `search` and `doc`
  only, no conditions; if its server is down, a search of all sources says so in `notes`.
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


# -- building and running tools -----------------------------------------------------------------


def toolbox(service, *, writable: bool = True) -> Toolbox:
    """The tools over ``service`` with the instructions that say how to use them, as the agent
    receives them (answer/agent.py sits below this module and is handed them)."""
    return Toolbox(library_tools(service, writable=writable, browsing=False), INSTRUCTIONS)


def library_tools(service, *, writable: bool = True, browsing: bool = True) -> list[Tool]:
    """Every tool over ``service``; ``writable=False`` leaves out the note-writing tools,
    ``browsing=False`` those for browsing (``random``, ``geocode``): an agent answering a question has no
    use for them, and every tool's schema is sent to its model on every step."""
    made = _read_tools(service) + (_note_tools(service) if writable else [])
    if browsing:  # an agent reaches places through near= (an address is geocoded there)
        made.append((_bound_tool(service, BINDINGS["random"]), READ))
        made.append((_bound_tool(service, BINDINGS["geocode"]), READ))
    return [Tool.from_function(fn, annotations=hints) for fn, hints in made]


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
        many = {p.name for p in params(model) if p.many}

        @functools.wraps(fn)
        def tool(**values: Any) -> dict[str, Any]:
            return fn(model.model_validate(_as_lists(values, many)))

        tool.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [_tool_parameter(p) for p in params(model)], return_annotation=dict[str, Any]
        )
        return tool

    return decorate


ONE_OR_MANY = " (one value, or a list of them)"  # said of every list parameter a tool takes
JSON_OR_TEXT = "; JSON may be given as an object or as a string"  # of Surface(mcp_json=True)


def _as_lists(values: dict[str, Any], many: set[str]) -> dict[str, Any]:
    """A single value given where a list is asked for, as a list of it: 4B-8B models send
    ``area: "京都府"`` (and got "Input should be a valid list")."""
    return {
        k: [v] if k in many and isinstance(v, str | int | float) else v for k, v in values.items()
    }


def _tool_parameter(param: Param) -> inspect.Parameter:
    if param.required:
        default = inspect.Parameter.empty
    else:  # a model's own default where it needs another (ops/requests.py Surface)
        default = param.default if param.surface.mcp_default is None else param.surface.mcp_default
    enforced = param.enforced()
    annotation = param.annotation
    if param.many:  # a single value is taken as a list of one (``_as_lists``), and said so
        annotation = annotation | param.kind
        enforced["description"] = param.help + ONE_OR_MANY
    elif param.kind is str and param.choices is None:
        annotation = _text_as_sent(param)
        if param.surface.mcp_json:
            enforced["description"] = param.help + JSON_OR_TEXT
    return inspect.Parameter(
        param.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=default,
        # what a model reads: names, types, bounds, choices, defaults and the help. Not the
        # stated text shapes (ops/requests.py ``stated``: patterns of hundreds of Unicode
        # escapes, lengths): the service checks those and answers with its reason, and each
        # costs a small model's context on every step: the nine read tools' schemas are 13.8 KB
        # without them, 29.2 KB with them (26.1 KB when only search and filter stated theirs)
        annotation=Annotated[annotation, Field(**enforced)],
    )


def _text_as_sent(param: Param) -> Any:
    """A text parameter's type in a tool: the text reaches the service as the client sent it.

    The MCP SDK json-parses every string argument whose type is not exactly ``str``
    (``FuncMetadata.pre_parse_json``, for clients that send a list as JSON text), so a text
    declared ``str | None`` changed meaning whenever it looked like JSON: a title or query
    ``null`` arrived as no value at all, ``[1,2]`` as a list ("Input should be a valid
    string"), and within's GeoJSON failed whether sent as an object or as text. Typed as
    exactly ``str`` it is left alone; the validator takes what the declared type takes (and,
    for ``mcp_json``, an object, as its JSON text), and the schema states that."""
    nullable = type(None) in typing.get_args(param.annotation)
    as_json = param.surface.mcp_json

    def validate(value: Any) -> str | None:
        if isinstance(value, str) or (value is None and nullable):
            return value
        if as_json and isinstance(value, dict):  # the service reads the JSON text
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
        raise PydanticCustomError("string_type", "Input should be a valid string")

    offered = param.annotation | dict[str, Any] if as_json else param.annotation
    return Annotated[str, PlainValidator(validate, json_schema_input_type=offered)]


# -- the tools ----------------------------------------------------------------------------------


def _read_tools(service) -> list:
    @_reported
    def sources() -> dict[str, Any]:
        """List the sources: name, kind, language, what each holds, number of documents,
        build date, the attributes each has (a filter on an attribute a source lacks is an
        error) and whether it is searched by meaning (vectors)."""
        return {"sources": [for_a_model(info) for info in service.sources()]}

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
    @takes(FilterRequest)
    def filter(request: FilterRequest) -> dict[str, Any]:
        """List every document meeting all conditions with the exact `total` — the way to list
        or count a category's members (by tag), places of a kind (feature) in an area (e.g.
        area: ["京都府"] or ["Kyoto"]), documents by a number (attr: ["population>=1000000"])
        or in a box, or the nearest places to a point or to another source's document (with
        distance_km). A condition the source cannot have is an error naming the sources that
        have it; a value it does not have comes back with the closest ones it does."""
        return service.filter(request)

    doc, titles, tags, links, features, recall = (
        _bound_tool(service, BINDINGS[name])
        for name in ("doc", "titles", "tags", "links", "features", "recall")
    )
    return [
        (fn, READ) for fn in (sources, search, doc, titles, tags, links, filter, features, recall)
    ]


# What a model needs of a source to choose and query it. Left out: where its files are (input
# paths, generation file names — nobody's business beyond this machine, and nothing a model
# can use), sizes, schema versions: 1,849 → 728 bytes for the jawiki excerpt (design §36.2).
MODEL_FIELDS = (
    "name", "kind", "language", "about", "docs", "tags", "links", "points", "attributes",
    "built_at", "in_default", "writable", "live", "status", "error", "hint",
)  # fmt: skip


def for_a_model(info: dict[str, Any]) -> dict[str, Any]:
    """A source as ``sources`` tells a model of it (``MODEL_FIELDS``, vectors as model and
    coverage)."""
    out = {k: info[k] for k in MODEL_FIELDS if info.get(k) not in (None, "")}
    vectors = info.get("vectors")
    out["vectors"] = (
        {"model": vectors["model"], "coverage": round(vectors["coverage"], 3)} if vectors else None
    )
    return out


def _bound_tool(service, binding: Binding):
    """The tool of a bound operation (ops/registry.py): its arguments are the request model's,
    its description the binding's, its result the service's."""

    @_reported
    @takes(binding.request)
    def tool(request: Request) -> dict[str, Any]:
        return binding.handle(service, request)

    tool.__name__ = tool.__qualname__ = binding.entry.mcp or binding.name
    tool.__doc__ = binding.tool_help
    return tool


def _note_tools(service) -> list:
    return [
        (_bound_tool(service, BINDINGS[name]), _hints(BINDINGS[name].entry))
        for name in ("remember", "update", "forget")
    ]


def _hints(entry) -> ToolAnnotations:
    """What a client is told the tool does to data, from the catalogue's flags."""
    if entry.destructive:
        return DESTRUCTIVE
    return WRITE if entry.writes else READ
