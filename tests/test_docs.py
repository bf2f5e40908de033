"""Documentation keeps up with the code: every CLI command, option and setting is described."""

import re
from pathlib import Path

import click

from chiezo.surfaces.cli.main import cli

ROOT = Path(__file__).resolve().parents[1]


def _commands(group: click.Group, prefix: str = ""):
    for name, command in group.commands.items():
        path = f"{prefix}{name}"
        if isinstance(command, click.Group):
            yield from _commands(command, path + " ")
        else:
            yield path, command


def test_every_cli_command_and_option_is_documented():
    text = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    for path, command in _commands(cli):
        assert f"`chiezo {path}" in text, f"docs/cli.md does not describe `chiezo {path}`"
        for param in command.params:
            for opt in getattr(param, "opts", []):
                if opt.startswith("--") and opt != "--help":
                    assert opt in text, f"docs/cli.md does not mention {opt} of `chiezo {path}`"


def test_every_setting_is_documented():
    used = set()
    for path in (ROOT / "src" / "chiezo").rglob("*.py"):
        used |= set(re.findall(r"\"(CHIEZO_[A-Z_]+)\"", path.read_text(encoding="utf-8")))
    documented = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert used, "no settings found: the scan is broken"
    for name in sorted(used):
        assert name in documented, f"docs/configuration.md does not describe {name}"


def test_the_readme_quick_start_is_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```(?:sh|bash)?\n(.*?)```", section, re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip() and not line.startswith("#")]
    assert len(commands) == 2, commands
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    for command in commands:
        target = command.split("#")[0].split()[-1]
        assert re.search(rf"^{target}:", makefile, re.M), f"Makefile has no target {target}"
    assert "make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_every_endpoint_and_mcp_tool_is_documented(settings):
    import anyio
    from fastapi.routing import APIRoute

    from chiezo.ops.context import Context
    from chiezo.surfaces.mcp.server import build_mcp
    from chiezo.surfaces.rest import create_app

    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    for route in create_app(settings).routes:
        if isinstance(route, APIRoute) and route.include_in_schema:
            path = route.path.replace(":int}", "}").replace("{note_id}", "{id}")
            for method in route.methods - {"HEAD"}:
                assert f"`{method} {path}" in text, f"docs/api.md does not describe {method} {path}"

    async def tool_names():
        return [t.name for t in await build_mcp(Context(settings)).list_tools()]

    for name in anyio.run(tool_names):
        assert f"`{name}`" in text, f"docs/api.md does not describe the MCP tool {name}"
