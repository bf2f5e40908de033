"""What every ``chiezo`` command shares: the consoles, the service of the invocation, JSON
output and the one way errors are shown (a message on stderr, or the error's JSON with --json,
then its exit code)."""

from __future__ import annotations

import functools
import json
import sys
from typing import Any

import click
from rich.console import Console
from rich.markup import escape

from .errors import ChiezoError
from .service import Service

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


def service_of(ctx: click.Context) -> Service:
    return ctx.find_root().obj["service"]


def emit_json(data: Any) -> None:
    click.echo(json.dumps(data, ensure_ascii=False, indent=2, default=str))


def handles_errors(command):
    """Turn ChiezoError into a message on stderr (JSON on stdout with --json) and its exit
    code; everything else is a bug and keeps its traceback."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except ChiezoError as exc:
            if kwargs.get("as_json"):
                emit_json(exc.to_dict())
            else:
                print_error(exc)
            sys.exit(exc.exit_code)

    return wrapper


def print_error(exc: ChiezoError) -> None:
    err.print(f"[bold red]error:[/] {escape(exc.message)}")
    extras = exc.extras
    if extras.get("candidates"):
        err.print("did you mean: " + escape(", ".join(extras["candidates"])))
    if "known_sources" in extras:
        known = ", ".join(extras["known_sources"]) or "(none yet)"
        err.print(f"known sources: {escape(known)}")
    if extras.get("allowed_fields"):
        err.print("allowed fields: " + ", ".join(extras["allowed_fields"]))
    hint = extras.get("hint")
    if hint and "known_sources" not in extras:
        err.print(f"[dim]hint: {escape(hint)}[/]")


def units_label(unit_chars: int) -> str:
    return f"units of ≤ {unit_chars} chars" if unit_chars else "whole chunks"
