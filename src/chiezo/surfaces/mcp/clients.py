"""Registration snippets for common MCP clients (``chiezo mcp config``): one paste connects an
agent, over stdio (the client starts ``chiezo mcp``) or over HTTP (a running ``chiezo serve``)."""

from __future__ import annotations

import json
import shlex
import shutil
import sys
from pathlib import Path

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


def snippet(client: str, *, data_dir: Path, url: str | None = None) -> str:
    command, env = chiezo_command(), {"CHIEZO_DATA": str(data_dir)}
    stdio = {"command": command, "args": ["mcp"], "env": env}
    if client == "claude-code":
        if url:
            return f"claude mcp add --transport http chiezo {shlex.quote(url)}"
        return (
            f"claude mcp add chiezo --env CHIEZO_DATA={shlex.quote(str(data_dir))} "
            f"-- {shlex.quote(command)} mcp"
        )
    if client == "codex":
        if url:
            return f'[mcp_servers.chiezo]\nurl = "{url}"\n'
        return (
            f'[mcp_servers.chiezo]\ncommand = "{command}"\nargs = ["mcp"]\n'
            f'env = {{ CHIEZO_DATA = "{data_dir}" }}\n'
        )
    if client == "vscode":
        entry = {"type": "http", "url": url} if url else {"type": "stdio", **stdio}
        return json.dumps({"servers": {"chiezo": entry}}, indent=2)
    if client == "generic":
        return json.dumps({"url": url} if url else stdio, indent=2)
    entry = {"url": url} if url else stdio  # claude-desktop, cursor
    return json.dumps({"mcpServers": {"chiezo": entry}}, indent=2)
