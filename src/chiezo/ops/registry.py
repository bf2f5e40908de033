"""The operation registry: each catalogued operation (core/operations.py) bound to its request
model (ops/requests.py: parameters, bounds, defaults, help) and its handler
``op(ctx, request)`` (ops/searching.py, reading.py, remembering.py).

The surfaces derive what they offer from a binding rather than declaring it again: the MCP tool
(ops/tools.py: its arguments, schema and description), the REST route's query parameters
(surfaces/rest/params.py ``query_parameters``) and the CLI command's arguments and options
(surfaces/cli/parameters.py ``request_options``). tests/test_operations_contract.py reads the
live surfaces and checks each bound operation there: names, bounds and defaults.

The table is two: the library's operations (ops/library_bindings.py, which the tools read)
and the answering ones here (their agent mode reads the tools, so they cannot sit beside them
without a cycle), and the operator's commands on a source as a whole. Operations not bound yet
(jobs, ingest, rebuild, embed, export, import, gc, doctor, eval, serve) are still in the catalogue, so the contract
test knows where each surface offers them.
"""

from __future__ import annotations

from chiezo.ops import answering, building
from chiezo.ops.library_bindings import LIBRARY_BINDINGS, Binding, bind
from chiezo.ops.requests import (
    AskRequest,
    ChatRequest,
    ConfigureRequest,
    RemoveRequest,
    RollbackRequest,
)

__all__ = ["BINDINGS", "Binding"]

BINDINGS: dict[str, Binding] = {
    **LIBRARY_BINDINGS,
    "ask": bind(
        "ask",
        AskRequest,
        answering.ask_question,
        "Answer a question only from what the library holds, citing numbered sources; each "
        "sentence is checked against what it cites (claims, unsupported, uncited). Nothing "
        "found: a fixed no-basis reply, the model not called. Needs an OpenAI-compatible "
        "endpoint (CHIEZO_LLM_URL, CHIEZO_LLM_MODEL).",
    ),
    "chat": bind(
        "chat",
        ChatRequest,
        answering.chat_turn,
        "A conversation with citations: follow-up questions see the recent turns and what "
        "they cited (not their text: an assistant turn's cited titles tell a follow-up what "
        "'he' or 「その」 refers to); in agent mode the model may remember notes where the "
        "caller could write them itself.",
    ),
    "remove": bind(
        "remove",
        RemoveRequest,
        building.remove,
        "Remove a source for good: every generation of it and its folder; a build of it "
        "running meanwhile refuses the removal.",
    ),
    "configure": bind(
        "configure",
        ConfigureRequest,
        building.configure,
        "Change what you decided about a source (kept across rebuilds): whether a search of "
        "all sources reads it.",
    ),
    "rollback": bind(
        "rollback",
        RollbackRequest,
        building.rollback,
        "Serve a source's kept previous generation again (the one its last build or import "
        "replaced). The generation that was current is kept in its place, so a second "
        "rollback goes forward again. Refused while a build of it runs, without a previous "
        "generation, and when that one was written by another schema version (rebuild then).",
    ),
}
