"""Operating a library over months: ``chiezo gc`` (disk); ``rollback`` (back to the kept
previous generation), ``export`` and ``import`` (a source moved to another machine,
ops/transfer.py). ``COMMANDS`` (at the end) lists them for surfaces/cli/main.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from chiezo.core.errors import EXIT_FAILURE, BadQuery
from chiezo.core.progress import console_progress
from chiezo.ops.maintenance import Item, Survey, reclaim, survey
from chiezo.ops.registry import BINDINGS
from chiezo.ops.requests import RollbackRequest
from chiezo.surfaces.cli.common import (
    emit_json,
    err,
    handles_errors,
    one_build_at_a_time,
    out,
    service_of,
)
from chiezo.surfaces.cli.parameters import request_from, request_options

# -- gc ----------------------------------------------------------------------------------------


@click.command("gc")
@click.option(
    "--caches",
    is_flag=True,
    help="Also delete vector caches of models no source uses, document-cache "
    "entries unused for 90 days and what live sources' caches hold (making them again costs "
    "time).",
)
@click.option("--dry-run", is_flag=True, help="Show what would be reclaimed; delete nothing.")
@click.option("--yes", "-y", is_flag=True, help="Reclaim without asking.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def gc(ctx: click.Context, caches: bool, dry_run: bool, yes: bool, as_json: bool) -> None:
    """Show what the data directory holds and reclaim what is not needed: generations older
    than the kept previous one, files of builds that stopped, old-layout vector caches
    (converted) — never a current generation or the kept previous one; a source whose build
    is running is skipped. Asks first."""
    settings = service_of(ctx).settings
    plan = survey(settings, caches=caches)
    if not as_json:
        _show(plan)
    if dry_run or not plan.reclaimable:
        if as_json:
            emit_json(plan.to_dict())
        elif not plan.reclaimable:
            err.print("nothing to reclaim")
        return
    if not yes and not _confirmed(plan):
        err.print("nothing deleted")
        sys.exit(EXIT_FAILURE)
    done = reclaim(settings, caches=caches)  # surveyed again, under each source's build lock
    if as_json:
        emit_json({**plan.to_dict(), "reclaimed": done.to_dict()})
        return
    out.print(
        f"reclaimed {_size(done.freed)}: {len(done.deleted)} deleted, "
        f"{len(done.converted)} converted"
    )
    for skipped in done.skipped:
        err.print(f"[yellow]skipped[/] {escape(skipped['path'])}: {escape(skipped['why'])}")


def _show(plan: Survey) -> None:
    for source in plan.sources:
        busy = "  [yellow](a build is running: skipped)[/]" if source.busy else ""
        previous = source.total("previous")
        out.print(
            f"[bold]{escape(source.name)}[/]  current {_size(source.total('current'))}, "
            f"previous {_size(previous) if previous else '—'}{busy}"
        )
        for item in source.items:
            if item.kind not in ("current", "previous"):
                _line(item)
    if plan.leftovers:
        out.print("[bold]not sources[/] [dim](left by builds, imports and removals)[/]")
        for item in plan.leftovers:
            _line(item)
    if plan.caches:
        out.print("[bold]caches[/]")
        for item in plan.caches:
            _line(item)
    if plan.downloads:
        out.print("[bold]downloads[/] [dim](only shown; delete by hand)[/]")
        for item in plan.downloads:
            _line(item)
    out.print(
        f"reclaimable: [bold]{_size(plan.reclaimable)}[/]"
        + ("" if plan.caches_included else " [dim](--caches: unused caches too)[/]")
    )


def _line(item: Item) -> None:
    verbs = {
        "delete": "[red]delete[/]",
        "convert": "[cyan]convert[/]",
        "compact": "[cyan]compact[/]",
    }
    verb = verbs.get(item.action, "keep  ")
    out.print(f"  {verb} {escape(item.path)}  {_size(item.bytes)}  [dim]{escape(item.why)}[/]")


def _confirmed(plan: Survey) -> bool:
    """Ask on the terminal; with no terminal to ask on, refuse (a script says --yes)."""
    if not sys.stdin.isatty():
        raise BadQuery(
            "reclaiming space needs confirmation, and there is no terminal to ask on",
            hint="add --yes to reclaim without asking, or --dry-run to only look",
        )
    return click.confirm(f"reclaim {_size(plan.reclaimable)}?", default=False, err=True)


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:,.1f} {unit}"
    return f"{count:,} bytes"


# -- rollback, export, import -----------------------------------------------------------------


@click.command(help=BINDINGS["rollback"].help)
@request_options(RollbackRequest)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def rollback(ctx: click.Context, as_json: bool, **values: Any) -> None:
    asked = request_from(RollbackRequest, values)
    done = BINDINGS["rollback"].handle(service_of(ctx), asked)
    _switched("rolled back", asked.source, done, f"built {done['built_at']}", as_json)


@click.command("export")
@click.argument("source")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Overwrite FILE if it exists.")
@click.option("--json", "as_json", is_flag=True, help="Print the manifest as JSON.")
@click.pass_context
@handles_errors
def export_command(ctx: click.Context, source: str, file: Path, force: bool, as_json: bool) -> None:
    """Write SOURCE's current generation to FILE (a zstd-compressed tar holding manifest.json,
    then the generation with its sha256), for `chiezo import` on another machine."""
    from chiezo.ops.transfer import export_source

    progress = console_progress(err, quiet=as_json)
    try:
        done = export_source(
            service_of(ctx).settings, source, file, overwrite=force, progress=progress
        )
    finally:
        progress.close()
    if as_json:
        emit_json(done)
        return
    out.print(
        f"[green]exported[/] {escape(source)} ({escape(done['generation'])}, "
        f"{done['docs']:,} documents) to {escape(str(file))}: "
        f"{_size(done['archive_bytes'])}, sha256 {done['file']['sha256'][:16]}…"
    )


@click.command("import")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--name", default=None, help="Import under this name (default: the exported one).")
@click.option(
    "--replace",
    is_flag=True,
    help="Replace a source of that name (its generation is kept for rollback).",
)
@click.option(
    "--input",
    "input_path",
    default=None,
    metavar="PATH",
    type=click.Path(exists=True, path_type=Path),
    help="This source's input on this machine (its documents' folder, its dump): "
    "original files are served from there and `chiezo rebuild` reads it. Without "
    "it the source serves no original files and is rebuilt only by a new ingest.",
)
@click.option("--wait", is_flag=True, help="Wait for a running build or job instead of refusing.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def import_command(
    ctx: click.Context,
    file: Path,
    name: str | None,
    replace: bool,
    input_path: Path | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Switch in the source FILE holds (made by `chiezo export`), like a build: checked
    (manifest, sha256, schema version, SQLite), then `current` is repointed; the previous
    generation is kept. A damaged, cut or altered FILE is refused and nothing changes. The
    paths FILE records are another machine's: only --input is used here."""
    from chiezo.ops.transfer import import_source

    service = service_of(ctx)
    progress = console_progress(err, quiet=as_json)
    try:
        with one_build_at_a_time(service, f"`chiezo import {file.name}`", None, "import", wait):
            done = import_source(
                service.settings,
                file,
                name=name,
                replace=replace,
                input_path=input_path,
                progress=progress,
            )
    finally:
        progress.close()
    _switched(
        "imported", done["source"], done, f"exported as {escape(done['generation'])}", as_json
    )


def _switched(what: str, source: str, done: dict[str, Any], how: str, as_json: bool) -> None:
    """What a rollback or an import switched in, and the generation kept to return to."""
    if as_json:
        emit_json(done)
        return
    out.print(
        f"[green]{what}[/] {escape(source)}: now serving {escape(done['current'])} "
        f"({done['docs']:,} documents, {how})"
    )
    if done["previous"]:
        out.print(
            f"[dim]kept {escape(done['previous'])}: `chiezo rollback {escape(source)}` "
            "returns to it[/]"
        )


# -- the record of answers ----------------------------------------------------------------------


@click.group("logs", invoke_without_command=True)
@click.option("-q", "--search", "words", default=None, help="Only answers holding these words.")
@click.option("-n", "--limit", type=click.IntRange(1, 200), default=20, show_default=True)
@click.option("--offset", type=click.IntRange(0), default=0)
@click.option(
    "--failed", is_flag=True, help="Only the asks that failed or whose answer was cut short."
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def logs(
    ctx: click.Context, words: str | None, limit: int, offset: int, failed: bool, as_json: bool
) -> None:
    """What was asked and answered (ask, chat, the API and the web chat), newest first, the
    asks that failed with their cause, and each model call's time; --search: only those
    whose question, answer or error holds each word. `chiezo logs off` stops the record,
    `on` starts it again, `clear` deletes it (ops/answers_log.py)."""
    if ctx.invoked_subcommand is not None:
        return
    found = service_of(ctx).answers_log.entries(words, limit, offset, failed=failed)
    if as_json:
        emit_json(found)
        return
    if not found["enabled"]:
        err.print("[yellow]the record of answers is off (`chiezo logs on` starts it)[/]")
    for entry in found["entries"]:
        _show_entry(entry)
    shown = offset + len(found["entries"])
    failures = f", {found['failures']:,} failed or stopped" if found["failures"] else ""
    out.print(f"[dim]{shown if found['entries'] else 0} of {found['total']:,} asks{failures}[/]")


def _show_entry(entry: dict[str, Any]) -> None:
    """One ask: what answered and how it went (a failure in red with its cause; an answer the
    model did not finish in yellow with why), the question, the answer (for a failure, the
    text written before it), the sources cited, each model call's timings and the stages the
    time went to, in order."""
    failed = entry.get("failed") and entry.get("error") is not None
    if failed:
        check = f"[/][bold red]FAILED: {escape(str(entry['cause']))}[/][dim]"
    elif entry.get("failed"):
        check = f"[/][yellow]STOPPED: {escape(str(entry['cause']))}[/][dim]"
    elif entry["no_basis"]:
        check = "no basis"
    else:
        check = "grounded" if entry["grounded"] else (
            f"{entry['claims']['unsupported']} unsupported, {entry['claims']['uncited']} uncited"
        )  # fmt: skip
    out.print(
        f"[bold]#{entry['id']}[/] [dim]{entry['at']} · {entry['surface']} · {entry['mode']}"
        f" · {escape(str(entry['model']))} · {entry['seconds']:.1f} s · {check}[/]"
    )
    out.print(f"  Q: {escape(entry['question'])}")
    if failed:
        out.print(f"  [red]error: {escape(str(entry['error']))}[/]")
    if entry["answer"] or not failed:
        said = "A (before it failed)" if failed else "A"
        out.print(f"  {said}: {escape(entry['answer'])}")
    for ref in entry["cited"]:
        where = ref.get("url") or ref.get("cite")  # no link: none was known when it was asked
        out.print(f"  [dim][{ref['n']}] {escape(str(ref['title']))} — {escape(str(where))}[/]")
    for call in entry.get("calls") or []:
        out.print(f"  [dim]{escape(_call_line(call))}[/]")
    if entry.get("stages"):
        out.print(f"  [dim]{escape(_stages_line(entry['stages']))}[/]")


def _call_line(call: dict[str, Any]) -> str:
    """``model call: the answer 3.2 s, first token 0.8 s, 1,412 → 96 tokens, stop``: what the
    record holds of one call (a field the endpoint did not report is left out)."""

    def number(key: str, unit: str = "") -> str | None:
        value = call.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return f"{value:,.1f} s" if unit == "s" else f"{value:,}"
        return None

    parts = [f"model call: {call.get('stage') or '?'} {number('seconds', 's') or '? s'}"]
    if number("first_token_s", "s"):
        parts.append(f"first token {number('first_token_s', 's')}")
    tokens_in, tokens_out = number("tokens_in"), number("tokens_out")
    if tokens_in or tokens_out:
        parts.append(f"{tokens_in or '?'} → {tokens_out or '?'} tokens")
    if call.get("finish"):
        parts.append(str(call["finish"]))
    return ", ".join(parts)


def _stages_line(stages: list[dict[str, Any]]) -> str:
    """``stages: plan keywords 0.00 s · search 夏目漱石 0.01 s · … · model the answer 3.20 s
    (1,412 → 96 tokens)``: where the answer's time went, in order (answer/rag.py timeline)."""
    shown = []
    for stage in stages:
        seconds = stage.get("seconds")
        took = f"{seconds:,.2f} s" if isinstance(seconds, int | float) else "? s"
        part = f"{stage.get('stage') or '?'} {stage.get('name') or ''} {took}"
        tokens_in, tokens_out = stage.get("tokens_in"), stage.get("tokens_out")
        if tokens_in is not None or tokens_out is not None:
            counted = [f"{n:,}" if isinstance(n, int) else "?" for n in (tokens_in, tokens_out)]
            part += f" ({counted[0]} → {counted[1]} tokens)"
        shown.append(part)
    return "stages: " + " · ".join(shown)


@logs.command("off")
@click.pass_context
def logs_off(ctx: click.Context) -> None:
    """Stop keeping answers (what is kept stays, until `chiezo logs clear`)."""
    service_of(ctx).answers_log.turn(False)
    out.print("the record of answers is off")


@logs.command("on")
@click.pass_context
def logs_on(ctx: click.Context) -> None:
    """Keep answers again."""
    service_of(ctx).answers_log.turn(True)
    out.print("the record of answers is on")


@logs.command("clear")
@click.option("--yes", "-y", is_flag=True, help="Delete without asking.")
@click.pass_context
def logs_clear(ctx: click.Context, yes: bool) -> None:
    """Delete every kept answer (the file is compacted, so their text is gone from it)."""
    if not yes and not click.confirm("delete every kept question and answer?", err=True):
        err.print("nothing deleted")
        sys.exit(EXIT_FAILURE)
    gone = service_of(ctx).answers_log.clear()
    out.print(f"deleted {gone:,} kept answers")


COMMANDS = (gc, rollback, export_command, import_command, logs)
