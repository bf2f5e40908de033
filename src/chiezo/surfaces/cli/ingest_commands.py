"""``chiezo ingest KIND …`` and ``chiezo rebuild``: building sources from the command line.

There is one ingest command per registered source kind (store/kinds.py), made from the kind:
its input argument, ``--name``, a flag per option field, the build flags it offers, ``--watch``
where its inputs are local files, ``--embed``/``--no-embed`` and ``--json``. A kind registered
by a plugin gets its command the same way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from chiezo.core.errors import ChiezoError
from chiezo.core.progress import console_progress
from chiezo.ops import building
from chiezo.store.build import BuildOptions, BuildReport
from chiezo.store.kinds import OptionField, Skipped, SourceKind, kinds, option_fields
from chiezo.surfaces.cli.common import (
    emit_json,
    err,
    handles_errors,
    load_ray_backends,
    one_build_at_a_time,
    out,
    print_error,
    service_of,
    units_label,
)

# BuildOptions fields a kind may offer as flags (``SourceKind.build_flags``)
BUILD_FLAGS = {
    "allow_shrink": partial(
        click.Option,
        ["--allow-shrink"],
        is_flag=True,
        help="Accept a generation under half the current size.",
    ),
    "min_docs": partial(
        click.Option,
        ["--min-docs"],
        type=click.IntRange(1),
        default=1,
        show_default=True,
        help="Refuse a build with fewer documents.",
    ),
    "language": partial(
        click.Option, ["--language"], default=None, help="Main language of the documents, e.g. ja."
    ),
}
# one build at a time in a data directory, server jobs included (jobs.exclusive)
WAIT_OPTION = partial(
    click.Option,
    ["--wait"],
    is_flag=True,
    help="Wait for a running build or server job instead of refusing.",
)
COMMON = {"inputs", "name", "watch", "interval", "embed_model", "no_embed", "wait", "as_json"}


class KindCommands(click.Group):
    """``chiezo ingest``: its subcommands are the registered kinds, read when asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, kind in kinds().items() if kind.ingestable)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        kind = kinds().get(name)
        return kind_command(kind) if kind is not None and kind.ingestable else None


@click.group(cls=KindCommands)
def ingest() -> None:
    """Build a source (a new generation, switched in only when it validates)."""


def kind_command(kind: SourceKind) -> click.Command:
    fields = [f for f in option_fields(kind.Options) if f.flag.cli]  # not what a kind sets itself
    clashes = COMMON & {f.name for f in fields} | COMMON & set(kind.build_flags)
    if clashes:
        raise TypeError(f"source kind {kind.name!r}: option names {sorted(clashes)} are taken")
    params: list[click.Parameter] = [_input_argument(kind), _name_option(kind)]
    params += [_field_option(f) for f in fields]
    params += [BUILD_FLAGS[name]() for name in kind.build_flags]
    if kind.capabilities.watchable:
        params += [
            click.Option(
                ["--watch"], is_flag=True, help="Keep running; rebuild when the files change."
            ),
            click.Option(
                ["--interval"],
                type=click.FloatRange(0.2),
                default=2.0,
                show_default=True,
                help="--watch: seconds between looks.",
            ),
        ]
    params += [
        click.Option(
            ["--embed", "embed_model"],
            default=None,
            metavar="MODEL",
            help="Then add vectors with MODEL (see `chiezo embed`).",
        ),
        click.Option(
            ["--no-embed"],
            is_flag=True,
            help="Do not re-embed (by default a source that had vectors is re-embedded "
            "with its model; unchanged passages come from the cache).",
        ),
        WAIT_OPTION(),
        click.Option(["--json", "as_json"], is_flag=True, help="Print the build report as JSON."),
    ]

    @click.pass_context
    @handles_errors
    def run(ctx: click.Context, **values: Any) -> None:
        _ingest(ctx, kind, fields, values)

    return click.Command(
        kind.name,
        callback=run,
        params=params,
        help=kind.summary,
        short_help=_first_sentence(kind.summary),
    )


def _input_argument(kind: SourceKind) -> click.Argument:
    path = click.Path(path_type=Path)
    shown = f"{kind.argument}…" if kind.many_inputs else kind.argument
    metavar = f"[{shown}]" if kind.fetches else shown
    if kind.many_inputs:
        return click.Argument(
            ["inputs"], nargs=-1, required=not kind.fetches, type=path, metavar=metavar
        )
    return click.Argument(["inputs"], required=not kind.fetches, type=path, metavar=metavar)


def _name_option(kind: SourceKind) -> click.Option:
    if kind.needs_name():
        return click.Option(["--name"], required=True, help="Source name, e.g. handbook.")
    if kind.default_name:
        return click.Option(
            ["--name"], default=kind.default_name, show_default=True, help="Source name."
        )
    return click.Option(
        ["--name"], default=None, help="Source name (default: derived from the input)."
    )


def _field_option(f: OptionField) -> click.Option:
    names = list(f.flag.names) or ["--" + f.name.replace("_", "-")]
    common: dict[str, Any] = {"help": f.flag.help, "metavar": f.flag.metavar}
    if f.base is bool:
        return click.Option([*names, f.name], is_flag=True, default=bool(f.default), **common)
    if f.base is tuple:  # repeatable, and comma-separated values split
        return click.Option(
            [*names, f.name],
            multiple=True,
            default=f.default or (),
            show_default=bool(f.default),
            **common,
        )
    if f.flag.flag_value is not None:
        return click.Option(
            [*names, f.name],
            is_flag=False,
            flag_value=f.flag.flag_value,
            default=f.default,
            **common,
        )
    kind: Any = {
        Path: click.Path(path_type=Path),
        int: click.IntRange(f.flag.low, f.flag.high),
        float: float,
    }.get(f.base, str)
    return click.Option(
        [*names, f.name], type=kind, default=f.default, show_default=f.default is not None, **common
    )


def _ingest(
    ctx: click.Context, kind: SourceKind, fields: list[OptionField], values: dict[str, Any]
) -> None:
    options = kind.Options(**{f.name: _option_value(f, values[f.name]) for f in fields})
    build_options = BuildOptions(**{name: values[name] for name in kind.build_flags})
    embed = _embed_choice(values["embed_model"], values["no_embed"])
    inputs = list(values["inputs"]) if kind.many_inputs else [p for p in [values["inputs"]] if p]
    as_json = values["as_json"]
    fetching = [f for f in fields if f.flag.for_fetch and values[f.name] not in (None, False, ())]
    if inputs and fetching:
        flag = (fetching[0].flag.names or ["--" + fetching[0].name.replace("_", "-")])[0]
        raise click.UsageError(f"{flag} is for downloading the {kind.argument}; one was given")
    if values.get("ray") is not None:  # a kind's --ray (wikipedia): the cluster's backend
        load_ray_backends()

    def build() -> None:
        service = service_of(ctx)
        progress = console_progress(err, quiet=as_json)
        done: list[tuple[str, BuildReport | Skipped | None]] = []
        try:
            with one_build_at_a_time(
                service, f"`chiezo ingest {kind.name}`", values["name"], "ingest", values["wait"]
            ):
                built = building.ingest_each(
                    service,
                    kind.name,
                    inputs,
                    values["name"],
                    options=options,
                    build=build_options,
                    progress=progress,
                    embed=embed,
                )
                for name, report in built:
                    done.append((name, report))
                    if not as_json:
                        _said(name, report)
        finally:
            progress.close()
        if as_json:
            shown = [r.to_dict() if r else {"source": n, "up_to_date": True} for n, r in done]
            emit_json(shown[0] if len(shown) == 1 else shown)
        else:
            _said_skipped([r for _, r in done if isinstance(r, Skipped)], len(done))

    build()
    if values.get("watch"):
        from chiezo.ingest.watch import snapshot, watch

        err.print(f"[dim]watching {escape(', '.join(map(str, inputs)))} (Ctrl-C to stop)[/]")
        with contextlib.suppress(KeyboardInterrupt):
            watch(
                lambda: frozenset().union(*(snapshot(p) for p in inputs)),
                _keep_serving(build),
                interval=values["interval"],
            )


def _said(name: str, report: BuildReport | Skipped | None) -> None:
    if report is None:
        out.print(f"{escape(name)} is up to date: built from this very file; skipped")
    elif isinstance(report, Skipped):
        out.print(f"[yellow]skipped[/] {escape(report.input)}: {escape(report.why)}")
    else:
        print_report(report, False)


def _said_skipped(skipped: list[Skipped], inputs: int) -> None:
    """The inputs skipped, said again once the others are built (hours of build output may
    stand between their first mention and the end)."""
    if skipped:
        named = ", ".join(one.input for one in skipped)
        out.print(f"[yellow]{len(skipped)} of {inputs} inputs not built[/]: {escape(named)}")


def _option_value(f: OptionField, value: Any) -> Any:
    if f.base is tuple:
        return tuple(part.strip() for v in value for part in str(v).split(",") if part.strip())
    return value


def _first_sentence(text: str) -> str:
    return " ".join(text.split()).split(". ")[0].rstrip(".") + "."


def _keep_serving(build: Callable[[], None]) -> Callable[[], None]:
    """A rebuild that fails (a file mid-copy, a broken new file under --strict) is reported
    and the watch goes on; the previous generation keeps serving."""

    def run() -> None:
        try:
            build()
        except ChiezoError as exc:
            print_error(exc)

    return run


def _embed_choice(model: str | None, skip: bool) -> str | bool | None:
    if model and skip:
        raise click.UsageError("--embed and --no-embed contradict each other")
    return False if skip else model


def print_report(report: BuildReport, as_json: bool) -> None:
    if as_json:
        emit_json(report.to_dict())
        return
    out.print(
        f"[green]built[/] {escape(report.name)}: {report.docs:,} documents, "
        f"{report.chunks:,} chunks, {report.size_bytes / 2**20:,.1f} MiB in {report.seconds:.1f} s"
    )
    if report.warnings:
        out.print(f"[yellow]{len(report.warnings)} warning(s) while reading the input[/]")
        for warning in report.warnings[:10]:
            out.print(f"  [yellow]·[/] {escape(warning)}")
        if len(report.warnings) > 10:
            out.print(f"  [dim]… and {len(report.warnings) - 10} more (--json shows all)[/]")
    for topic, counts in report.tallies.items():
        shown = ", ".join(f"{n:,} {outcome}" for outcome, n in sorted(counts.items()))
        out.print(f"[dim]{escape(topic)}: {escape(shown)}[/]")
    if report.previous:
        out.print(f"[dim]previous generation kept: {report.previous.name}[/]")
    if report.embedding:
        e = report.embedding
        out.print(
            f"[green]embedded[/] {e['embedded_chunks']:,} of {e['chunks']:,} chunks with "
            f"{escape(e['model'])}: {e['vectors']:,} vectors, {units_label(e['unit_chars'])} "
            f"({e['embedded']:,} new, {e['reused']:,} from the cache)"
        )


@click.command()
@click.argument("source")
@click.option(
    "--fetch",
    is_flag=True,
    help="Download the input again first (a source that was fetched: the newest dump, "
    "checked against its checksum); nothing is rebuilt when it is the same file.",
)
@click.option(
    "--no-embed",
    is_flag=True,
    help="Do not re-embed (by default a source that had vectors is re-embedded with its model; "
    "unchanged passages come from the cache).",
)
@click.option(
    "--wait", is_flag=True, help="Wait for a running build or server job instead of refusing."
)
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
@click.pass_context
@handles_errors
def rebuild(
    ctx: click.Context, source: str, fetch: bool, no_embed: bool, wait: bool, as_json: bool
) -> None:
    """Rebuild SOURCE from the input it was built from, with the options recorded then (also
    a source that needs a rebuild after an upgrade); with --fetch, from its input downloaded
    anew. The current generation keeps serving until the new one is complete."""
    from chiezo.ops.rebuilding import rebuild_call_for, run_rebuild

    service = service_of(ctx)
    call = rebuild_call_for(service, source, fetch=fetch)
    progress = console_progress(err, quiet=as_json)
    try:
        with one_build_at_a_time(service, f"`chiezo rebuild {source}`", source, "rebuild", wait):
            report = run_rebuild(
                service, call, source, progress=progress, embed=False if no_embed else None
            )
    finally:
        progress.close()
    if report is None:
        said = {"source": source, "up_to_date": True, "input": (call.identity or {}).get("path")}
        if as_json:
            emit_json(said)
        else:
            out.print(
                f"{escape(source)} is up to date: the newest input is the one it was "
                f"built from ({escape(str(said['input']))}); nothing rebuilt"
            )
        return
    print_report(report, as_json)
