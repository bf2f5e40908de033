r"""What every ``chiezo`` command shares: the consoles, the service of the invocation, JSON
output and the one way errors are shown (a message on stderr, or the error's JSON with --json,
then its exit code).

What a command prints goes through here, and none of it may act on the terminal: stored text
(a question in the answers log, a note's title, a document) and a request's words come from
whoever could write to the library or call the API, and ``ESC[2J`` or an OSC title in them
would run in the owner's terminal. :func:`visible` spells each such character as an escape
(``\x1b``, ``\r``, ``\u202e``); the consoles apply it to all they print, JSON output escapes
it as JSON does (``\u009b``), and warnings logged in this process pass through it. Only
click's own usage errors print elsewhere: they quote the command line, which its user typed.
"""

from __future__ import annotations

import functools
import json
import logging
import re
import sys
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any, ParamSpec, TypeVar

import click
from rich import console as rich_console
from rich.markup import escape
from rich.segment import Segment
from rich.text import Text

from chiezo.core.config import RAY_DEFAULT_ADDRESS
from chiezo.core.errors import CLI, ChiezoError
from chiezo.ops.context import Context

# What a terminal obeys rather than shows: the C0 controls but tab and newline (\r too: it
# returns to the line's start and the rest overwrites it), DEL, the C1 controls (U+009B is a
# CSI on its own in an 8-bit terminal, U+009D an OSC), and the bidi embeddings, overrides and
# isolates, which reorder what follows them so that a title or URL reads as another ("Trojan
# Source"). Japanese, Arabic or Hebrew text needs none of these to display, and the marks
# (U+200E/U+200F) and joiners (U+200D, in emoji) move nothing, so they pass.
UNSEEN = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    r"""``text`` with each character a terminal would obey (``UNSEEN``) spelt as Python spells
    it in a string: ``\r``, ``\x1b``, ``\x9b``, ``\u202e``."""
    return UNSEEN.sub(_spelt, text)


def _spelt(found: re.Match[str]) -> str:
    code = ord(found.group())
    if code == 0x0D:
        return "\\r"
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


class VisibleConsole(rich_console.Console):
    """A rich console that prints every character of its text visibly (:func:`visible`)."""

    def render_str(self, text: str, **options: Any) -> Text:
        # before markup and layout: rich would drop \r and BEL unseen but keep ESC, and an
        # escape widened after layout would push a table's columns out of line
        return super().render_str(visible(text), **options)

    def render(self, renderable: Any, options: Any = None) -> Iterable[Segment]:
        # and on the way out, what rich built without render_str (a progress bar's phase, an
        # archive member's name, a Text made directly); rich's own control codes pass
        for segment in super().render(renderable, options):
            if segment.control is None and UNSEEN.search(segment.text):
                segment = Segment(visible(segment.text), segment.style)
            yield segment


out = VisibleConsole(highlight=False, soft_wrap=True)
err = VisibleConsole(stderr=True, highlight=False, soft_wrap=True)


class VisibleLog(logging.StreamHandler):
    """The last-resort handler (warnings of a process with no logging set up) of this command,
    its lines spelt visibly: a traceback or a warning may quote a request's text. Like
    logging's own, it writes to whatever ``sys.stderr`` is at the time."""

    def __init__(self) -> None:
        logging.Handler.__init__(self, logging.WARNING)

    @property
    def stream(self):  # type: ignore[override]  # read-only, as logging's own last resort
        return sys.stderr

    def format(self, record: logging.LogRecord) -> str:
        return visible(super().format(record))


def service_of(ctx: click.Context) -> Context:
    return ctx.find_root().obj["service"]


def echo(text: str) -> None:
    """Plain text on stdout (a snippet to paste), spelt visibly."""
    click.echo(visible(text))


def emit_json(data: Any) -> None:
    """``data`` as JSON on stdout. ``json.dumps`` escapes the C0 controls but, with
    ``ensure_ascii=False`` (Japanese stays readable), not DEL, C1 or bidi: those are escaped
    here as JSON escapes them, so the document still parses to the very same data."""
    text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
    click.echo(UNSEEN.sub(lambda found: f"\\u{ord(found.group()):04x}", text))


_P = ParamSpec("_P")
_R = TypeVar("_R")
_F = TypeVar("_F", bound=Callable[..., Any])


def handles_errors(command: Callable[_P, _R]) -> Callable[_P, _R]:
    """Turn ChiezoError into a message on stderr (JSON on stdout with --json) and its exit
    code; everything else is a bug and keeps its traceback."""

    @functools.wraps(command)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return command(*args, **kwargs)
        except ChiezoError as exc:
            # the command's source completes a hint naming an operation on it
            named = kwargs.get("source")
            source = named if isinstance(named, str) else None
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


def one_build_at_a_time(
    service: Context, what: str, source: str | None, action: str, wait: bool
) -> AbstractContextManager[None]:
    """The data directory's jobs lock for this build (jobs.exclusive): no server job runs
    meanwhile; refused naming what runs, or with --wait waited for."""
    from chiezo.ops.jobs import exclusive

    def waiting(holder: str) -> None:
        err.print(f"[dim]waiting for {escape(holder)} to finish…[/]")

    return exclusive(
        service.settings, what, source=source, action=action, wait=wait, waiting=waiting
    )


def ray_option(what: str) -> Callable[[_F], _F]:
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
