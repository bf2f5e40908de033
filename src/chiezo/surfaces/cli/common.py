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

from chiezo.core.config import RAY_DEFAULT_ADDRESS
from chiezo.core.errors import CLI, ChiezoError
from chiezo.ops.service import Service

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
            # the command's source completes a hint naming an operation on it
            source = kwargs.get("source")
            if kwargs.get("as_json"):
                emit_json(exc.to_dict(CLI, source=source))
            else:
                print_error(exc, source=source)
            sys.exit(exc.exit_code)

    return wrapper


def print_error(exc: ChiezoError, *, source: str | None = None) -> None:
    """The error on stderr, its hint naming commands (``chiezo features osm``), not routes."""
    err.print(f"[bold red]error:[/] {escape(exc.message)}")
    shown = exc.to_dict(CLI, source=source)
    if shown.get("candidates"):
        err.print("did you mean: " + escape(", ".join(shown["candidates"])))
    known = shown.get("known_sources")
    if known is not None:
        err.print(f"known sources: {escape(', '.join(known) or '(none yet)')}")
    if shown.get("allowed_fields"):
        err.print("allowed fields: " + ", ".join(shown["allowed_fields"]))
    hint = shown.get("hint")
    if hint and not known:  # an unknown source's hint only repeats the known ones
        err.print(f"[dim]hint: {escape(hint)}[/]")


def units_label(unit_chars: int) -> str:
    return f"units of ≤ {unit_chars} chars" if unit_chars else "whole chunks"


def one_build_at_a_time(service, what: str, source: str | None, action: str, wait: bool):
    """The data directory's jobs lock for this build (jobs.exclusive): no server job runs
    meanwhile; refused naming what runs, or with --wait waited for."""
    from chiezo.ops.jobs import exclusive

    def waiting(holder: str) -> None:
        err.print(f"[dim]waiting for {escape(holder)} to finish…[/]")

    return exclusive(
        service.settings, what, source=source, action=action, wait=wait, waiting=waiting
    )


def ray_option(what: str):
    """``--ray [ADDRESS]``: ``what`` on a Ray cluster; alone, the cluster RAY_ADDRESS names,
    else the one `ray start` runs on this machine, else a new local one (cluster/__init__.py)."""
    return click.option(
        "--ray",
        "ray",
        is_flag=False,
        flag_value=RAY_DEFAULT_ADDRESS,
        default=None,
        metavar="[ADDRESS]",
        help=f"{what}; alone: this machine's cluster.",
    )


def load_ray_backends() -> None:
    """``--ray`` given to a build: the cluster extra registers its backends with the seams
    they plug into (cluster/wiki.py: the Wikipedia rendering, ingest/wikipedia.py). Imported
    here, only when asked for, so the default path never loads it; Ray itself is imported
    when the backend runs (a missing Ray: the extra's error, exit 2)."""
    import chiezo.cluster.wiki  # noqa: F401 - registers on import
