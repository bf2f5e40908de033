"""The MCP server: the library's tools (ops/tools.py) for AI agents.

Served over Streamable HTTP at ``/mcp`` inside ``chiezo serve`` and over stdio by
``chiezo mcp``. The tools, their descriptions and the server instructions live in ops/tools.py,
shared with agent mode (answer/agent.py); this module only puts them on an MCP server. Errors
come back as MCP tool errors carrying the same JSON the REST API returns (tools.error_text).
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

from chiezo import __version__
from chiezo.ops.service import Service
from chiezo.ops.tools import INSTRUCTIONS, library_tools


def build_mcp(service: Service, *, writable: bool = True) -> MCPServer:
    """The MCP server over ``service``; ``writable=False`` leaves out the note-writing tools
    (used when serving beyond loopback without a token)."""
    return MCPServer(
        "chiezo",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
        tools=library_tools(service, writable=writable),
    )
