"""The MCP server: the library's tools (ops/tools.py) for AI agents.

Served over Streamable HTTP at ``/mcp`` inside ``chiezo serve`` (``/mcp?profile=compact`` for
the compact tool set) and over stdio by ``chiezo mcp [--profile compact]``. The tools, their
descriptions and the instructions of each profile live in ops/tools.py, shared with agent mode
(answer/agent.py); this module only puts them on an MCP server. Errors come back as MCP tool
errors carrying the same JSON the REST API returns (tools.error_text).
"""

from __future__ import annotations

from urllib.parse import parse_qs

from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.responses import JSONResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from chiezo import __version__
from chiezo.core.errors import ChiezoError
from chiezo.ops.context import Context
from chiezo.ops.tool_profiles import PROFILES, profile_named
from chiezo.ops.tools import library_tools


def build_mcp(service: Context, *, writable: bool = True, profile: str | None = None) -> MCPServer:
    """The MCP server over ``service`` offering ``profile``'s tools; ``writable=False`` leaves
    out the note-writing tools (used when serving beyond loopback without a token)."""
    chosen = profile_named(profile)
    return MCPServer(
        "chiezo",
        instructions=chosen.instructions,
        version=__version__,
        log_level="WARNING",
        tools=library_tools(service, writable=writable, profile=chosen.name),
    )


class ByProfile:
    """The ``/mcp`` endpoint of ``chiezo serve``: each request goes to the MCP server of the
    profile its query names (``/mcp?profile=compact``; none: the default). A profile that does
    not exist is a 400 naming those that do, as a REST error is."""

    def __init__(self, endpoints: dict[str, ASGIApp]):
        self.endpoints = endpoints

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        asked = parse_qs(scope.get("query_string", b"").decode("latin-1")).get("profile")
        try:
            endpoint = self.endpoints[profile_named(asked[-1] if asked else None).name]
        except ChiezoError as exc:
            await JSONResponse(exc.to_dict("rest"), status_code=exc.status)(scope, receive, send)
            return
        await endpoint(scope, receive, send)


def http_endpoint(
    service: Context, *, writable: bool, transport_security: TransportSecuritySettings | None
) -> tuple[ByProfile, list[MCPServer]]:
    """The ``/mcp`` endpoint over ``service`` (one stateless MCP server per profile: a request
    carries its profile, so no session needs remembering), and the servers, whose session
    managers the app runs for its lifetime."""
    servers = {name: build_mcp(service, writable=writable, profile=name) for name in PROFILES}
    endpoints: dict[str, ASGIApp] = {}
    for name, server in servers.items():
        app = server.streamable_http_app(
            streamable_http_path="/mcp",
            stateless_http=True,
            json_response=True,
            transport_security=transport_security,
        )
        (route,) = [r for r in app.routes if isinstance(r, Route) and r.path == "/mcp"]
        endpoints[name] = route.app
    return ByProfile(endpoints), list(servers.values())
