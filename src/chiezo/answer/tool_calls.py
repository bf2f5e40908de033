"""Calling a library tool in this process, as an MCP client would: the agent's side of the tools.

The tools themselves (ops/tools.py) sit above the answer layer; the agent is handed a
:class:`Toolbox` by the service and runs the tools through :func:`call_tool`, reading results
and errors exactly as an MCP client does (:func:`error_text` is the text of an error, the
REST API's JSON body).
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, NamedTuple

from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.tools import Tool

from chiezo.core.errors import ChiezoError


class Toolbox(NamedTuple):
    """The tools a model may call, and the instructions that tell it how to use them."""

    tools: list[Tool]
    instructions: str


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
