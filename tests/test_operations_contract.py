"""Every operation on every surface: the catalogue (core/operations.py) and the registry
(ops/registry.py) against what the CLI, the REST API and the MCP server actually offer.

* every command, route and tool the surfaces serve is a catalogued operation, and every
  catalogued operation is served where the catalogue says (nothing grows on one surface alone);
* for each operation bound to a request model, each surface takes exactly the model's
  parameters, with its bounds and defaults (MCP may carry a default of its own, declared in
  the model);
* the hints of errors spell each operation as the surfaces do.
"""

from __future__ import annotations

import asyncio
import json

import click
import pytest
from fastapi.testclient import TestClient

from chiezo.core.errors import Operation
from chiezo.core.operations import CATALOGUE, hint_spellings
from chiezo.ops.context import Context
from chiezo.ops.registry import BINDINGS
from chiezo.ops.requests import params
from chiezo.ops.tool_answers import for_a_model
from chiezo.ops.tools import library_tools
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app
from chiezo.surfaces.rest.params import rest_name

from helpers import ON_THIS_MACHINE


@pytest.fixture(scope="module")
def surfaces(tmp_path_factory):
    from chiezo.core.config import Settings

    settings = Settings(data_dir=tmp_path_factory.mktemp("contract"))
    app = create_app(settings)
    with TestClient(app, client=ON_THIS_MACHINE, base_url="http://127.0.0.1") as rest:
        openapi = rest.get("/openapi.json").json()
    tools = {t.name: t for t in library_tools(Context(settings))}
    return _commands(cli), openapi, tools


def _commands(group: click.Group, prefix: str = "") -> dict[str, click.Command]:
    found: dict[str, click.Command] = {}
    for name, command in group.commands.items():
        path = f"{prefix} {name}".strip()
        found[path] = command
        if isinstance(command, click.Group) and command.commands:
            found |= _commands(command, path)
    return found


def _routes(openapi: dict) -> set[str]:
    return {
        f"{method.upper()} {path}" for path, item in openapi["paths"].items() for method in item
    }


def test_every_command_route_and_tool_is_a_catalogued_operation(surfaces):
    commands, openapi, tools = surfaces
    groups = {"ingest", "notes"}  # groups that only hold commands (sources and mcp also run)
    offered_cli = {path for path in commands if path not in groups}
    # `ingest KIND` commands are the kinds' (store/kinds.py), one operation
    offered_cli = {p for p in offered_cli if not p.startswith("ingest ")} | {"ingest"}
    assert offered_cli == {e.cli for e in CATALOGUE if e.cli}
    assert _routes(openapi) == {r for e in CATALOGUE for r in e.rest}
    assert set(tools) == {e.mcp for e in CATALOGUE if e.mcp}


def test_writes_are_flagged_where_the_surfaces_treat_them_as_writes(surfaces):
    _, _, tools = surfaces
    for entry in CATALOGUE:
        if entry.mcp:
            hints = tools[entry.mcp].annotations
            assert bool(hints.read_only_hint) is (not entry.writes), entry.name


def test_writes_and_streams_are_what_the_routes_document(surfaces):
    """A writing operation's main route states the write rules' answers (401, 403; a reading
    route may too, /metrics is guarded); a streaming one answers as server-sent events too,
    and no other does."""
    _, openapi, _ = surfaces
    for entry in CATALOGUE:
        if not entry.rest:
            continue
        method, path = entry.rest[0].split(" ", 1)
        operation = openapi["paths"][path][method.lower()]
        refused = {"401", "403"} <= set(operation["responses"])
        assert refused or not entry.writes, entry.name
        ok = next(v for k, v in operation["responses"].items() if k.startswith("2"))
        content = ok.get("content", {})
        assert ("text/event-stream" in content) is entry.streams, entry.name


# the CLI's chat reads its messages line by line, a conversation typed at the prompt
CLI_TAKES_OTHERWISE = {"chat": {"messages"}}
# how the terminal shows or confirms, not what is asked: --json, --interactive, and --yes (the
# answer to the question `sources rm` asks before it deletes)
CLI_ONLY = ("as_json", "interactive", "yes")


# ``stream`` (REST: server-sent events) and ``--json`` (CLI) are how an answer comes back, not
# what is asked
@pytest.mark.parametrize("name", sorted(BINDINGS))
def test_each_surface_takes_the_request_models_parameters(surfaces, name):
    commands, openapi, tools = surfaces
    binding = BINDINGS[name]
    declared = {p.name: p for p in params(binding.request)}
    # CLI: an argument or an option per parameter, with the declared bounds and defaults
    command = commands[binding.entry.cli]
    offered = {p.name: p for p in command.params if p.name not in CLI_ONLY}
    # what the surface attaches (the location: CHIEZO_HERE, an MCP call's _meta) is no option
    # and no tool argument
    attached = {p.name for p in declared.values() if p.surface.attached}
    assert not set(offered) & attached, name
    taken_otherwise = CLI_TAKES_OTHERWISE.get(name, set()) | attached
    assert set(offered) | taken_otherwise == set(declared), name
    for pname, option in offered.items():
        param = declared[pname]
        if isinstance(option, click.Option) and not param.many:
            assert option.default == param.default, (name, pname)
        if "le" in param.bounds:
            assert option.type.max == param.bounds["le"], (name, pname)
        if param.choices:
            assert tuple(option.type.choices) == param.choices, (name, pname)
    # REST: the parameters of the operation's routes together (doc takes doc_id in its own
    # route's path), by their REST names, with bounds and defaults
    rest: dict[str, dict] = {}
    for route in binding.entry.rest:
        method, path = route.split(" ", 1)
        operation = openapi["paths"][path][method.lower()]
        for p in operation.get("parameters", []):
            rest.setdefault(p["name"], p)
        body = operation.get("requestBody", {}).get("content", {}).get("application/json")
        if body:  # a body's fields count as the route's parameters
            schema = _resolved(openapi, body["schema"])
            for field, field_schema in schema["properties"].items():
                rest.setdefault(field, {"in": "body", "schema": field_schema})
    if binding.entry.rest:  # the operator's commands are the CLI's (jobs start them over REST)
        assert set(rest) - {"stream"} == {rest_name(p) for p in declared.values()}, name
    for param in declared.values() if binding.entry.rest else ():
        schema = _plain(rest[rest_name(param)]["schema"])
        if "le" in param.bounds:
            assert schema.get("maximum") == param.bounds["le"], (name, param.name)
        if not param.required and rest[rest_name(param)]["in"] == "query":
            assert schema.get("default") == param.default, (name, param.name)
    # MCP: the tool's input schema
    if binding.entry.mcp:
        tool = tools[binding.entry.mcp]
        schema = tool.parameters
        # a read tool takes max_chars besides: its answer's length, the profile's default
        budget = {"max_chars"} if tool.annotations.read_only_hint else set()
        assert set(schema["properties"]) == set(declared) - attached | budget, name
        for param in (p for p in declared.values() if not p.surface.attached):
            field = _plain(schema["properties"][param.name])
            if "le" in param.bounds and param.name not in budget:
                assert field.get("maximum") == param.bounds["le"], (name, param.name)
            if not param.required and param.name not in budget:
                # a schema leaves out a default of none, 0 or false (ops/tools.py lean_schema)
                assert field.get("default") == (param.default or None), (name, param.name)
        assert set(schema.get("required", [])) == {p.name for p in declared.values() if p.required}


def _resolved(openapi: dict, schema: dict) -> dict:
    ref = schema.get("$ref")
    return openapi["components"]["schemas"][ref.rsplit("/", 1)[1]] if ref else schema


def _plain(schema: dict) -> dict:
    """A schema with ``anyOf: [X, null]`` (an optional value) read as X, keeping the default."""
    for option in schema.get("anyOf", []):
        if option.get("type") != "null":
            return {**option, **{k: v for k, v in schema.items() if k != "anyOf"}}
    return schema


def test_hints_spell_each_operation_as_the_surfaces_serve_it(surfaces):
    commands, openapi, tools = surfaces
    routes = _routes(openapi)
    for name, (on_cli, on_rest, on_mcp) in Operation.EVERYWHERE.items():
        words = on_cli.split()
        command = " ".join(
            w
            for w in words[
                : next(
                    (i for i, w in enumerate(words) if not w.islower() or w[0] in "-{"),
                    len(words),
                )
            ]
        )
        assert command in commands, name
        route = on_rest.split("?")[0].format(rest="{source}").replace("{{", "{")
        assert route.replace("}}", "}") in routes, name
        assert on_mcp.split("(")[0] in tools, name
    assert Operation("features", "osm").render("cli") == "chiezo features osm"
    assert Operation("features", "osm").render("rest") == "GET /v1/osm/features"
    assert Operation("search", "a b").render("mcp") == 'search(source="a b", query=…)'
    assert hint_spellings(next(e for e in CATALOGUE if e.name == "forget"))[0] == (
        "notes forget ID"
    )


def test_a_bound_operation_answers_the_same_on_every_surface(tmp_path):
    """One call through the CLI, REST and MCP for bound browsing operations on a real source
    gives the same JSON (the handler is the one binding's)."""
    from click.testing import CliRunner

    from chiezo.core.config import Settings

    from helpers import build_docs, write_files

    settings = Settings(data_dir=tmp_path / "data")
    service = Context(settings)
    folder = write_files(
        tmp_path / "notes",
        {"garden.md": "---\ntags: [plants]\n---\n# ガーデン\n\nTomatoes and basil.\n"},
    )
    build_docs(service, folder, "guide")
    tools = {t.name: t for t in library_tools(service)}
    with TestClient(
        create_app(settings), client=ON_THIS_MACHINE, base_url="http://127.0.0.1"
    ) as rest:
        for name, query in (("tags", {}), ("titles", {"prefix": "ガ"})):
            args = ["guide", *query.values()]
            shown = CliRunner().invoke(
                cli, ["--data", str(settings.data_dir), name, *args, "--json"]
            )
            served = rest.get(f"/v1/guide/{name}", params=query).json()
            called = asyncio.run(
                tools[name].run({"source": "guide", **query}, None, convert_result=True)
            )
            assert json.loads(shown.stdout) == served
            # a model reads it without the fields only programs use (ops/tool_answers.py)
            assert called.structured_content == for_a_model(served)
            assert served[name if name == "tags" else "titles"], served


def test_the_answer_choices_are_the_same_on_every_surface(surfaces):
    """ask and chat take AnswerRequest's choices (their bounds are answer/options.py's) on the
    command line, in /v1/ask's query and in /v1/chat's body."""
    from chiezo.answer.options import BOUNDS
    from chiezo.ops.requests import AnswerRequest

    commands, openapi, _ = surfaces
    declared = {p.name: p for p in params(AnswerRequest)}
    attached = {p.name for p in declared.values() if p.surface.attached}  # CHIEZO_HERE
    for name in ("ask", "chat"):
        offered = {p.name: p for p in commands[name].params}
        assert set(declared) - attached <= set(offered) and not attached & set(offered), name
        for param in (p for p in declared.values() if p.name not in attached):
            if param.name in BOUNDS:
                low, high = BOUNDS[param.name]
                assert (offered[param.name].type.min, offered[param.name].type.max) == (low, high)
            if param.choices:
                assert tuple(offered[param.name].type.choices) == param.choices
    query = {
        p["name"]: _plain(p["schema"]) for p in openapi["paths"]["/v1/ask"]["get"]["parameters"]
    }
    body = openapi["components"]["schemas"]["ChatIn"]["properties"]
    for param in declared.values():
        for schema in (query[param.name], _plain(body[param.name])):
            if param.name in BOUNDS:
                assert (schema["minimum"], schema["maximum"]) == BOUNDS[param.name], param.name
