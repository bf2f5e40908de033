"""Registration snippets for common MCP clients (``chiezo mcp config``): one paste connects an
agent, over stdio (the client starts ``chiezo mcp``) or over HTTP (a running ``chiezo serve``)."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from chiezo.ops.tool_profiles import DEFAULT_PROFILE

MCP_CLIENTS = {
    "claude-desktop": "claude_desktop_config.json → mcpServers",
    "claude-code": "the `claude mcp add` command",
    "cursor": "~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
    "vscode": ".vscode/mcp.json",
    "codex": "~/.codex/config.toml",
    "generic": "plain JSON: command/args/env, or url",
}


def chiezo_command() -> str:
    """The absolute path of this installation's ``chiezo`` executable."""
    found = shutil.which("chiezo")
    if found:
        return str(Path(found).resolve())
    candidate = Path(sys.executable).with_name("chiezo")
    return str(candidate) if candidate.exists() else "chiezo"


def snippet(
    client: str, *, data_dir: Path, url: str | None = None, profile: str = DEFAULT_PROFILE
) -> str:
    """The registration for ``client``: over stdio (the client starts ``chiezo mcp``), or the
    HTTP endpoint ``url``; a ``profile`` other than the default travels as ``--profile`` or
    as the endpoint's ``?profile=``."""
    command, env = chiezo_command(), {"CHIEZO_DATA": str(data_dir)}
    args = ["mcp"] if profile == DEFAULT_PROFILE else ["mcp", "--profile", profile]
    if url and profile != DEFAULT_PROFILE:
        url = _with_query(url, profile=profile)
    stdio = {"command": command, "args": args, "env": env}
    if client == "claude-code":
        if url:
            return f"claude mcp add --transport http chiezo {shlex.quote(url)}"
        return (
            f"claude mcp add chiezo --env CHIEZO_DATA={shlex.quote(str(data_dir))} "
            f"-- {shlex.join([command, *args])}"
        )
    if client == "codex":
        if url:
            return f'[mcp_servers.chiezo]\nurl = "{url}"\n'
        return (
            f'[mcp_servers.chiezo]\ncommand = "{command}"\nargs = {json.dumps(args)}\n'
            f'env = {{ CHIEZO_DATA = "{data_dir}" }}\n'
        )
    if client == "vscode":
        entry = {"type": "http", "url": url} if url else {"type": "stdio", **stdio}
        return json.dumps({"servers": {"chiezo": entry}}, indent=2)
    if client == "generic":
        return json.dumps({"url": url} if url else stdio, indent=2)
    entry = {"url": url} if url else stdio  # claude-desktop, cursor
    return json.dumps({"mcpServers": {"chiezo": entry}}, indent=2)


def _with_query(url: str, **values: str) -> str:
    """``url`` with ``values`` in its query (replacing the same names)."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query)) | values
    return urlunsplit(parts._replace(query=urlencode(query)))
