"""The library's tools for AI agents: names, descriptions, parameter schemas, and the call that
runs one over a context (ops/context.py).

Two surfaces offer these tools and both take them from here: surfaces/mcp/server.py serves them to MCP
clients, answer/agent.py offers them to the model in agent mode — so a model answering inside
Chiezo is told exactly what an MCP client is told, and reads the same results and errors.
Tool descriptions and the instructions are part of the product: a model uses the library well
only if they tell it how (the design notes measured tool-description gaps turning directly
into failed questions).

This module runs the tools over the context handed to :func:`library_tools`; it imports
nothing above it (not the MCP server, not answering), so answering (ops/answering.py) can run
the agent and the agent can run the tools without an import cycle.

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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field, PlainValidator
from pydantic_core import PydanticCustomError

from chiezo.answer.tool_calls import Toolbox, error_text
from chiezo.core import here
from chiezo.core.errors import BadQuery, ChiezoError, InternalError
from chiezo.core.models import SearchResult
from chiezo.core.operations import Entry
from chiezo.ops import operating, web
from chiezo.ops.context import Context
from chiezo.ops.library_bindings import LIBRARY_BINDINGS
from chiezo.ops.requests import Param, Request, SourcesRequest, WebSearchRequest, params
from chiezo.ops.tool_answers import MAX_CHARS, MIN_CHARS, fitted, for_a_model
from chiezo.ops.tool_profiles import Profile, profile_named

log = logging.getLogger("chiezo.tools")

# A read-only tool says only that (and that it stays in the library): the destructive and
# idempotent hints mean something only for a tool that writes (MCP spec), and each costs every
# step of a model 40 bytes per tool.
READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
# reads, but beyond the library: the one tool that asks a server on the web (ops/web.py)
OPEN_WORLD = ToolAnnotations(read_only_hint=True, open_world_hint=True)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)


def _hints(entry: Entry) -> ToolAnnotations:
    """What a client is told the tool does to data, from the catalogue's flags."""
    if entry.destructive:
        return DESTRUCTIVE
    return WRITE if entry.writes else READ


# -- the tools ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One tool: the request model of its arguments (None: only ``max_chars``), what answers
    it, what a model reads about it, what it does to data, and the list its ``offset`` pages."""

    name: str
    request: type[Request] | None
    handle: Callable[[Context, Any], Any]  # (ctx, request) → a JSON-ready result
    description: str
    hints: ToolAnnotations
    pages: str | None = None


def _sources(ctx: Context, _request: SourcesRequest) -> dict[str, Any]:
    return {"sources": [source_for_a_model(info) for info in operating.sources(ctx)]}


def _bound(name: str, pages: str | None = None, hints: ToolAnnotations | None = None) -> Spec:
    """The tool of a bound operation (ops/library_bindings.py): its arguments are the request model's,
    its description the binding's, its result the handler's."""
    binding = LIBRARY_BINDINGS[name]
    return Spec(
        binding.entry.mcp or name,
        binding.request,
        binding.handle,
        binding.tool_help,
        hints or _hints(binding.entry),
        pages,
    )


SPECS: dict[str, Spec] = {
    spec.name: spec
    for spec in (
        Spec(
            "sources",
            SourcesRequest,
            _sources,  # each source as a model reads it (ops/tool_answers.py)
            LIBRARY_BINDINGS["sources"].tool_help,
            READ,
        ),
        _bound("search", pages="hits"),
        _bound("doc"),
        _bound("titles"),
        _bound("tags", pages="tags"),
        _bound("links", pages="links"),
        _bound("filter", pages="docs"),
        _bound("features", pages="features"),
        _bound("recall", pages="notes"),
        _bound("remember"),
        _bound("update"),
        _bound("forget"),
        _bound("random"),
        _bound("geocode"),
        Spec(
            "web_search",
            WebSearchRequest,
            web.search,
            "The web, not the library (offered only where the owner set up a web search): "
            "titles, snippets and URLs of pages. Only when the library has nothing; cite a "
            "result as from the web.",
            OPEN_WORLD,
            pages=None,
        ),
    )
}
WRITE_TOOLS = ("remember", "update", "forget")
BROWSING_TOOLS = ("random", "geocode")  # an agent reaches places through near= instead
WEB_TOOL = "web_search"


# -- building and running tools -----------------------------------------------------------------


def toolbox(ctx: Context, *, writable: bool = True, profile: str | None = None) -> Toolbox:
    """The tools over ``ctx`` with the instructions that say how to use them, as the agent
    receives them (answer/agent.py sits below this module and is handed them)."""
    chosen = profile_named(profile)
    tools = library_tools(ctx, writable=writable, browsing=False, profile=chosen.name)
    return Toolbox(tools, chosen.instructions)


def library_tools(
    ctx: Context, *, writable: bool = True, browsing: bool = True, profile: str | None = None
) -> list[Tool]:
    """The tools of ``profile`` over ``ctx``; ``writable=False`` leaves out the
    note-writing tools, ``browsing=False`` those for browsing (``random``, ``geocode``): an
    agent answering a question has no use for them, and every tool's schema is sent to its
    model on every step."""
    chosen = profile_named(profile)
    left_out = (() if writable else WRITE_TOOLS) + (() if browsing else BROWSING_TOOLS)
    if web.configured(ctx.settings) is None:  # off: not even offered
        left_out += (WEB_TOOL,)
    return [
        _tool(ctx, SPECS[name], chosen)
        for name in chosen.names(list(SPECS))
        if name not in left_out
    ]


class LibraryTool(Tool):
    """A tool that refuses an argument it does not take, naming those it does — as the REST
    API refuses an unknown parameter (the MCP SDK ignored one silently: ``search`` with a
    ``max_chars`` it did not have answered 5,457 characters whatever it said)."""

    async def run(self, arguments: dict[str, Any], context: Any, convert_result: bool = False):
        known = self.parameters.get("properties", {})
        unknown = sorted(set(arguments or {}) - set(known))
        if unknown:
            plural = "s" if len(unknown) > 1 else ""
            raise ToolError(
                error_text(
                    BadQuery(
                        f"{self.name} takes no argument{plural} {', '.join(unknown)}",
                        field=unknown[0],
                        allowed_parameters=sorted(known),
                    )
                )
            )
        location = _meta_location(context)
        if location is None:
            return await super().run(arguments, context, convert_result)
        with here.attached(location):
            return await super().run(arguments, context, convert_result)


# where an MCP client attaches the person's location to a tool call: the request's _meta,
# which a client sets and a model never writes
META_LOCATION = "chiezo/location"


def _meta_location(context: Any) -> here.Here | None:
    """The location an MCP client attached to this call (checked; its age is checked where
    ``near=here`` is used), or None."""
    try:
        meta = context.request_context.meta if context is not None else None
    except ValueError:  # no request (a call made in this process)
        return None
    if meta is None:
        return None
    given = (
        meta.get(META_LOCATION)
        if isinstance(meta, dict)
        else getattr(meta, "model_extra", {}).get(META_LOCATION)
    )
    if given is None:
        return None
    try:
        return here.Here.of(given)
    except BadQuery as exc:
        raise ToolError(error_text(exc)) from exc


def _tool(ctx: Context, spec: Spec, profile: Profile) -> Tool:
    declared = params(spec.request) if spec.request else []
    # what the conversation attaches (the location) is no argument a model may write
    attached = [p.name for p in declared if p.surface.attached]
    offered = [
        p
        for p in declared
        if profile.offers(spec.name, p.name) and p.name != "max_chars" and not p.surface.attached
    ]
    many = {p.name for p in offered if p.many}
    takes_budget = spec.request is not None and "max_chars" in spec.request.model_fields

    def answer(**values: Any) -> CallToolResult:
        budget = values.pop("max_chars", MAX_CHARS)
        if takes_budget:  # doc and recall cut their texts to it themselves
            values["max_chars"] = budget
        for name in attached:  # read again at every call: its age is checked at its use
            values[name] = here.attached_text()
        request = spec.request.model_validate(_as_lists(values, many)) if spec.request else None
        result = spec.handle(ctx, request)
        if isinstance(result, SearchResult):
            result = result.to_dict()
        if not isinstance(result, dict):
            result = {"result": result}
        paged = getattr(request, "offset", None) if spec.pages else None
        shown = for_a_model(result, getattr(request, "fields", None) or (), spec.pages)
        return _result(fitted(shown, budget, pages=spec.pages, offset=paged))

    budget = [_budget(profile)] if spec.hints.read_only_hint else []  # a write answers briefly
    answer.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [_tool_parameter(p) for p in offered] + budget, return_annotation=CallToolResult
    )
    answer.__name__ = answer.__qualname__ = spec.name
    answer.__doc__ = spec.description
    tool = LibraryTool.from_function(
        _reported(answer), annotations=spec.hints, structured_output=False
    )
    tool.parameters = lean_schema(tool.parameters)
    return tool


def _result(text: str) -> CallToolResult:
    """The answer as a model reads it (``text``), and the same as structured content for a
    program. No output schema is declared: the result's shape is the tool's description's,
    and a schema on each tool cost every step of a model 50 bytes for nothing it can use."""
    return CallToolResult(
        content=[TextContent(type="text", text=text)], structured_content=json.loads(text)
    )


def _budget(profile: Profile) -> inspect.Parameter:
    """``max_chars``, the same on every read tool: the answer's whole length as a model reads
    it. Its name says what it is (and the instructions say how a cut answer reads on): a
    description on each of eleven tools cost 0.3 KB of every step."""
    return inspect.Parameter(
        "max_chars",
        inspect.Parameter.KEYWORD_ONLY,
        default=profile.max_chars,
        annotation=Annotated[
            int,
            Field(ge=MIN_CHARS, le=MAX_CHARS),
        ],
    )


def _reported(fn: Callable[..., CallToolResult]) -> Callable[..., CallToolResult]:
    """Turn a ChiezoError into a tool error carrying :func:`error_text`, and a bug into the
    same shape (status 500), logged with its traceback."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> CallToolResult:
        try:
            return fn(*args, **kwargs)
        except ChiezoError as exc:
            raise ToolError(error_text(exc, kwargs.get("source"))) from exc
        except Exception as exc:
            log.exception("tool %s failed", fn.__name__)
            raise ToolError(error_text(InternalError.wrapping(exc))) from exc

    wrapper.__doc__ = inspect.cleandoc(fn.__doc__ or "")
    return wrapper


def lean_schema(schema: Any) -> Any:
    """A tool's input schema as a model needs to read it: no generated ``title`` per field,
    an optional value as its type rather than ``anyOf [X, null]`` with ``default: null``, a
    value-or-list as the list. The arguments are still validated as declared (a null or a
    single value is still taken); what changes is only what every step of a model reads:
    these took 4.3 of the full profile's 18 KB (design §39)."""
    if isinstance(schema, list):
        return [lean_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {
        k: {p: lean_schema(v) for p, v in v.items()} if k == "properties" else lean_schema(v)
        for k, v in schema.items()
        if k != "title" and not _goes_without_saying(k, v)
    }
    options = [o for o in out.get("anyOf", []) if o != {"type": "null"}]
    if options:
        lists = [o for o in options if o.get("type") == "array"]
        if len(lists) == 1 or len(options) == 1:
            del out["anyOf"]
            out = {**(lists or options)[0], **out}
        else:
            out["anyOf"] = options
    return out


# what a schema need not say: no default, a count's default or floor of 0 or 1, false, and
# that an object may have any properties
OBVIOUS = {"default": (None, 0, False), "minimum": (0, 1), "additionalProperties": (True,)}


def _goes_without_saying(name: str, value: Any) -> bool:
    return any(value is said or (value == said and type(value) is type(said))
               for said in OBVIOUS.get(name, ()))  # fmt: skip


def _as_lists(values: dict[str, Any], many: set[str]) -> dict[str, Any]:
    """A single value given where a list is asked for, as a list of it: 4B-8B models send
    ``area: "京都府"`` (and got "Input should be a valid list")."""
    return {
        k: [v] if k in many and isinstance(v, str | int | float) else v for k, v in values.items()
    }


def _tool_parameter(param: Param) -> inspect.Parameter:
    default = inspect.Parameter.empty if param.required else param.default
    enforced = {**param.enforced(), "description": param.brief or None}
    annotation = param.annotation
    if param.many:  # a single value is taken as a list of one (``_as_lists``)
        annotation = annotation | param.kind
    elif param.kind is str and param.choices is None:
        annotation = _text_as_sent(param)
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


# What a model needs of a source to choose and query it. Left out: where its files are (input
# paths, generation file names — nobody's business beyond this machine, and nothing a model
# can use), sizes, schema versions: 1,849 → 728 bytes for the jawiki excerpt (design §36.2).
MODEL_FIELDS = (
    "name", "kind", "language", "about", "docs", "tags", "links", "points", "attributes",
    "built_at", "in_default", "writable", "live", "status", "error", "hint",
)  # fmt: skip


def source_for_a_model(info: dict[str, Any]) -> dict[str, Any]:
    """A source as ``sources`` tells a model of it (``MODEL_FIELDS``, vectors as model and
    coverage)."""
    out = {k: info[k] for k in MODEL_FIELDS if info.get(k) not in (None, "")}
    vectors = info.get("vectors")
    out["vectors"] = (
        {"model": vectors["model"], "coverage": round(vectors["coverage"], 3)} if vectors else None
    )
    return out
