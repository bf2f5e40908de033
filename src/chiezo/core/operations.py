"""The catalogue of operations: every thing Chiezo does, and where each surface offers it.

One entry per operation names its CLI command, its REST routes and its MCP tool (or says the
surface does not offer it), whether it writes or streams, and the parameter a hint names
besides the source. Everything that spells an operation reads it from here: the hints of
errors (core/errors.py: "see `chiezo features osm`", ``GET /v1/osm/features``,
``features(source="osm")``), the operation registry that binds each entry to its request model
and handler (ops/registry.py), and tests/test_operations_contract.py, which checks that every
command, route and tool the surfaces serve is an entry here and every entry is served where it
says — so a surface cannot grow an operation the catalogue does not know.

It is plain data at the bottom of the package: errors are raised everywhere, and the hints
they carry must be spelt without importing the layers above.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal


@dataclass(frozen=True)
class Entry:
    name: str
    cli: str | None = None  # the command after "chiezo ", e.g. "notes forget"
    rest: tuple[str, ...] = ()  # "METHOD /path" of each route, the main one first
    mcp: str | None = None  # the tool's name
    # how the CLI takes the source: an argument (`tags SOURCE`), an option (`search … --source`)
    cli_source: Literal["argument", "option"] | None = None
    named: str | None = None  # the parameter a hint names besides the source, e.g. query
    rest_named: str | None = None  # its name in a query string, where it differs (q)
    writes: bool = False  # changes data: REST needs the write rules (docs/api.md)
    destructive: bool = False  # deletes what cannot be had back
    streams: bool = False  # REST can answer as server-sent events
    cli_hint: str | None = None  # the CLI's spelling where the mechanical one is wrong

    @property
    def everywhere(self) -> bool:
        """Offered on the command line, over REST and as an MCP tool."""
        return bool(self.cli and self.rest and self.mcp)


_ONE = "GET /v1/{source}/"

CATALOGUE: tuple[Entry, ...] = (
    # what the library holds
    Entry("sources", "sources", ("GET /v1/sources",), "sources"),
    Entry("remove", "sources rm", cli_source="argument", writes=True),
    Entry("configure", "sources set", cli_source="argument", writes=True),
    # finding
    Entry(
        "search",
        "search",
        (_ONE + "search", "GET /v1/search"),
        "search",
        cli_source="option",
        named="query",
        rest_named="q",
    ),
    Entry(
        "filter",
        "filter",
        (_ONE + "filter",),
        "filter",
        cli_source="argument",
    ),
    # reading one source
    Entry(
        "doc",
        "doc",
        (_ONE + "doc", _ONE + "doc/{doc_id}"),
        "doc",
        cli_source="option",
        named="title",
    ),
    Entry(
        "titles",
        "titles",
        (_ONE + "titles",),
        "titles",
        cli_source="argument",
        named="prefix",
    ),
    Entry("tags", "tags", (_ONE + "tags",), "tags", cli_source="argument"),
    Entry(
        "links",
        "links",
        (_ONE + "links",),
        "links",
        cli_source="argument",
        named="title",
    ),
    Entry(
        "features",
        "features",
        (_ONE + "features",),
        "features",
        cli_source="argument",
    ),
    Entry("random", "random", (_ONE + "random",), "random", cli_source="argument"),
    Entry("geocode", "geocode", ("GET /v1/geocode",), "geocode", cli_source="option"),
    # notes, the writable source
    Entry("remember", "notes remember", ("POST /v1/notes",), "remember", writes=True),
    Entry("recall", "notes recall", ("GET /v1/notes/recall",), "recall"),
    Entry("note", rest=("GET /v1/notes/{note_id}",)),
    Entry(
        "update",
        "notes update",
        ("PATCH /v1/notes/{note_id}",),
        "update",
        writes=True,
        named="note_id",
    ),
    Entry(
        "forget",
        "notes forget",
        ("DELETE /v1/notes/{note_id}",),
        "forget",
        writes=True,
        destructive=True,
        named="note_id",
    ),
    # answers
    Entry("ask", "ask", ("GET /v1/ask",), streams=True),
    Entry("chat", "chat", ("POST /v1/chat",), streams=True),
    Entry("llm", rest=("GET /v1/llm",)),
    # building and operating (the operator's machine; REST starts rebuild and embed as jobs)
    Entry(
        "ingest",
        "ingest",
        writes=True,
        cli_hint="ingest {kind} {path} --name {cli}",
    ),
    Entry("rebuild", "rebuild", cli_source="argument", writes=True),
    Entry("embed", "embed", cli_source="argument", writes=True),
    Entry(
        "jobs",
        rest=(
            "POST /v1/jobs",
            "GET /v1/jobs",
            "GET /v1/jobs/plan",
            "GET /v1/jobs/{job_id}",
            "POST /v1/jobs/{job_id}/cancel",
        ),
        writes=True,
    ),
    Entry(
        "rollback",
        "rollback",
        cli_source="argument",
        writes=True,
    ),
    Entry("export", "export", cli_source="argument"),
    Entry("import", "import", writes=True),
    Entry("gc", "gc", writes=True),
    # the record of what was asked and answered (ops/answers_log.py): the command line only
    Entry("logs", "logs"),
    Entry("logs-off", "logs off", writes=True),
    Entry("logs-on", "logs on", writes=True),
    Entry("logs-clear", "logs clear", writes=True, destructive=True),
    # the server and the machine
    Entry("serve", "serve"),
    Entry("mcp", "mcp"),
    Entry("mcp-config", "mcp config"),
    Entry("doctor", "doctor"),
    Entry("eval", "eval"),
    Entry("healthz", rest=("GET /healthz",)),
    Entry("metrics", rest=("GET /metrics",)),
)

BY_NAME = {entry.name: entry for entry in CATALOGUE}


def hint_spellings(entry: Entry) -> tuple[str, str, str]:
    """(CLI, REST, MCP) spellings of ``entry`` for a hint, with ``{cli}``, ``{rest}`` and
    ``{mcp}`` where the source goes: ``search QUERY --source {cli}``,
    ``GET /v1/{rest}/search?q=…``, ``search(source={mcp}, query=…)``."""
    return _cli_spelling(entry), _rest_spelling(entry), _mcp_spelling(entry)


def _metavar(name: str) -> str:
    return "ID" if name.endswith("_id") else name.upper()


def _cli_spelling(entry: Entry) -> str:
    if entry.cli_hint:
        return entry.cli_hint
    named = f" {_metavar(entry.named)}" if entry.named else ""
    if entry.cli_source == "argument":
        return f"{entry.cli} {{cli}}{named}"
    if entry.cli_source == "option":
        return f"{entry.cli}{named} --source {{cli}}"
    return f"{entry.cli}{named}"


def _rest_spelling(entry: Entry) -> str:
    if not entry.rest:
        return ""
    route = entry.rest[0].replace("{source}", "{rest}")
    route = route.replace("{note_id}", "{{note_id}}").replace("{job_id}", "{{job_id}}")
    if entry.named and "{" + entry.named + "}" not in entry.rest[0]:
        route += f"?{entry.rest_named or entry.named}=…"
    return route


def _mcp_spelling(entry: Entry) -> str:
    args = ["source={mcp}"] if entry.cli_source else []
    args += [f"{entry.named}=…"] if entry.named else []
    return f"{entry.mcp}({', '.join(args)})"
