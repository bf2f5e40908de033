"""What the library holds: ``chiezo sources`` (and ``sources rm``, ``sources set``), and the browsing commands
``features``, ``tags``, ``titles``, ``links`` and ``random`` — each the command-line face of the REST route
of the same name (``/v1/{source}/features``...), with its parameters, bounds and JSON.

A list that comes back empty exits 3, as a search that finds nothing does.
"""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.markup import escape

from chiezo.core.errors import EXIT_FAILURE, EXIT_NOT_FOUND, EXIT_OK, BadQuery
from chiezo.ops import building, operating
from chiezo.ops.registry import BINDINGS
from chiezo.ops.requests import (
    ConfigureRequest,
    FeaturesRequest,
    GeocodeRequest,
    LinksRequest,
    RandomRequest,
    RemoveRequest,
    TagsRequest,
    TitlesRequest,
)
from chiezo.surfaces.cli.common import emit_json, err, handles_errors, out, service_of, units_label
from chiezo.surfaces.cli.parameters import request_from, request_options

# -- sources -----------------------------------------------------------------------------------


@click.group(
    invoke_without_command=True,
    help=BINDINGS["sources"].help,
    epilog="`chiezo sources rm NAME` removes one; `chiezo sources set NAME --not-in-default` "
    "leaves one out of searches of all sources.",
)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def sources(ctx: click.Context, as_json: bool) -> None:
    if ctx.invoked_subcommand is not None:
        return
    infos = operating.sources(service_of(ctx))
    if as_json:
        emit_json(infos)
        return
    if not infos:
        err.print("no sources yet: build one with `chiezo ingest docs PATH --name NAME`")
        return
    for info in infos:
        if info.get("status") != "ok":
            out.print(f"[red]{escape(info['name'])}[/]  needs rebuild: {escape(info['error'])}")
            continue
        out.print(
            f"[bold]{escape(info['name'])}[/]  {info['kind']}  {info['docs']:,} docs  "
            f"{info['chunks']:,} chunks  built {info['built_at']}  "
            f"[dim]{(info['size_bytes'] or 0) / 2**20:,.1f} MiB, schema {info['schema_version']}[/]"
        )
        if info.get("about"):
            out.print(f"    {escape(info['about'])}")
        vectors = info.get("vectors")
        if vectors:
            out.print(
                f"    vectors: {vectors['model']} ({vectors['dim']}-d), {vectors['count']:,} for "
                f"{vectors['embedded_chunks']:,} chunks = {vectors['coverage']:.1%} coverage, "
                f"{units_label(vectors['unit_chars'])}, embedded {vectors['embedded_at']}"
            )
        elif info.get("live"):
            out.print("    [dim]searched live by its server: nothing indexed here[/]")
        elif not info.get("writable"):
            out.print(
                f"    [dim]no vectors (keyword search only; `chiezo embed "
                f"{escape(info['name'])}` adds them)[/]"
            )
        if not info.get("in_default", True):
            out.print("    [dim]not in searches of all sources (searched when named)[/]")


@sources.command("rm", help=BINDINGS["remove"].help + " Asks first, showing what goes.")
@request_options(RemoveRequest)
@click.option("--yes", "-y", is_flag=True, help="Remove without asking.")
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def sources_rm(ctx: click.Context, yes: bool, as_json: bool, **values: Any) -> None:
    service, asked = service_of(ctx), request_from(RemoveRequest, values)
    name = asked.source
    plan = building.remove(service, asked.model_copy(update={"dry_run": True}))
    if asked.dry_run or (not yes and not _confirmed(plan)):
        if as_json:
            emit_json(plan)
        err.print(f"kept {escape(name)}: nothing removed")
        sys.exit(EXIT_OK if asked.dry_run else EXIT_FAILURE)
    removed = building.remove(service, asked)
    if as_json:
        emit_json(removed)
        return
    out.print(
        f"removed {escape(name)}: {_generations(removed)}, {removed['files']} files, "
        f"{_size(removed['bytes'])} freed"
    )


@sources.command("set", help=BINDINGS["configure"].help)
@request_options(ConfigureRequest)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def sources_set(ctx: click.Context, as_json: bool, **values: Any) -> None:
    asked = request_from(ConfigureRequest, values)
    if asked.in_default is None:
        raise click.UsageError("say --in-default or --not-in-default")
    settings = BINDINGS["configure"].handle(service_of(ctx), asked)
    if as_json:
        emit_json(settings)
        return
    way = "searched with all sources" if asked.in_default else "searched only when named"
    out.print(f"{escape(asked.source)}: {way}")


def _confirmed(plan: dict[str, Any]) -> bool:
    """Ask on the terminal; with no terminal to ask on, refuse (a script says --yes)."""
    if not sys.stdin.isatty():
        raise BadQuery(
            f"removing {plan['source']!r} needs confirmation, and there is no terminal to ask on",
            source=plan["source"],
            hint="add --yes to remove it without asking",
        )
    err.print(
        f"[bold]{escape(plan['source'])}[/]: {_generations(plan)}, {plan['files']} files, "
        f"{_size(plan['bytes'])} in {escape(plan['directory'])}"
    )
    for generation in plan["generations"]:
        current = "  (current)" if generation == plan["current"] else ""
        err.print(f"  {escape(generation)}{current}")
    return click.confirm(f"remove {plan['source']} for good?", default=False, err=True)


def _generations(plan: dict[str, Any]) -> str:
    count = len(plan["generations"])
    return f"{count} generation{'' if count == 1 else 's'}"


def _size(count: int) -> str:
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:,.1f} {unit}"
    return f"{count:,} bytes"


# -- browsing: what the REST routes /v1/{source}/features, tags, titles and links give ---------


_json = click.option("--json", "as_json", is_flag=True, help="Print the route's JSON.")


@click.command(help=BINDINGS["features"].help)
@request_options(FeaturesRequest)
@_json
@click.pass_context
@handles_errors
def features(ctx: click.Context, as_json: bool, **values: Any) -> None:
    request = request_from(FeaturesRequest, values)
    found = BINDINGS["features"].handle(service_of(ctx), request)
    _print_counts(found, "features", "feature", "feature values", request.offset, as_json)


@click.command(help=BINDINGS["tags"].help)
@request_options(TagsRequest)
@_json
@click.pass_context
@handles_errors
def tags(ctx: click.Context, as_json: bool, **values: Any) -> None:
    request = request_from(TagsRequest, values)
    found = BINDINGS["tags"].handle(service_of(ctx), request)
    _print_counts(found, "tags", "tag", "tags", request.offset, as_json)


def _print_counts(
    found: dict[str, Any], listed: str, name: str, noun: str, offset: int, as_json: bool
) -> None:
    items = found[listed]
    if as_json:
        emit_json(found)
    else:
        for item in items:
            out.print(f"{item['docs']:>9,}  {escape(item[name])}")
        shown = f"{offset + 1}-{offset + len(items)} of " if items else ""
        out.print(f"[dim]{shown}{found['total']:,} {noun} in {escape(found['source'])}[/]")
    if not items:
        sys.exit(EXIT_NOT_FOUND)


@click.command(help=BINDINGS["titles"].help)
@request_options(TitlesRequest)
@_json
@click.pass_context
@handles_errors
def titles(ctx: click.Context, as_json: bool, **values: Any) -> None:
    found = BINDINGS["titles"].handle(service_of(ctx), request_from(TitlesRequest, values))
    if as_json:
        emit_json(found)
    else:
        for item in found["titles"]:
            alias = "  [dim](by an alias)[/]" if item["via_alias"] else ""
            out.print(
                f"[bold]{escape(item['title'])}[/]  [dim]doc {item['doc_id']} · "
                f"{escape(item['key'])}[/]{alias}"
            )
        if found["more"]:
            out.print("[dim]more: raise --limit or lengthen the prefix[/]")
    if not found["titles"]:
        sys.exit(EXIT_NOT_FOUND)


@click.command(help=BINDINGS["links"].help)
@request_options(LinksRequest)
@_json
@click.pass_context
@handles_errors
def links(ctx: click.Context, as_json: bool, **values: Any) -> None:
    request = request_from(LinksRequest, values)
    direction = request.direction
    found = BINDINGS["links"].handle(service_of(ctx), request)
    if as_json:
        emit_json(found)
    else:
        way = "links to" if direction == "out" else "is linked from"
        out.print(
            f"[bold]{escape(found['title'])}[/]  [dim]doc {found['doc_id']} {way} "
            f"{found['total']:,}[/]"
        )
        for link in found["links"]:
            out.print("  " + _link(link, direction))
    if not found["links"]:
        sys.exit(EXIT_NOT_FOUND)


def _link(link: dict[str, Any], direction: str) -> str:
    if direction == "in":
        return f"← {escape(link['title'])}  [dim]doc {link['doc_id']}[/]"
    where = f"doc {link['doc_id']}" if link["doc_id"] is not None else "not in this source"
    return f"→ {escape(link['target'])}  [dim]{where}[/]"


@click.command(help=BINDINGS["random"].help)
@request_options(RandomRequest)
@_json
@click.pass_context
@handles_errors
def random(ctx: click.Context, as_json: bool, **values: Any) -> None:
    found = BINDINGS["random"].handle(service_of(ctx), request_from(RandomRequest, values))
    if as_json:
        emit_json(found)
    else:
        for doc in found["docs"]:
            out.print(
                f"[bold]{escape(doc.get('title', ''))}[/]  [dim]doc {doc.get('doc_id', '')}[/]"
            )
            if doc.get("opening"):
                out.print(f"  {escape(' '.join(doc['opening'].split())[:200])}")
        out.print(f"[dim]drawn from {found['total']:,} in {escape(found['source'])}[/]")
        for note in found.get("notes", []):
            out.print(f"[dim]note: {escape(str(note))}[/]")
    if not found["docs"]:
        sys.exit(EXIT_NOT_FOUND)


@click.command(help=BINDINGS["geocode"].help)
@request_options(GeocodeRequest)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def geocode(ctx: click.Context, as_json: bool, **values: Any) -> None:
    found = BINDINGS["geocode"].handle(service_of(ctx), request_from(GeocodeRequest, values))
    if as_json:
        emit_json(found)
    else:
        for c in found["candidates"]:
            left = f"  [dim]unmatched: {escape(c['unmatched'])}[/]" if c["unmatched"] else ""
            out.print(
                f"[bold]{c['lat']:.5f}, {c['lon']:.5f}[/]  {escape(c['title'])}  "
                f"[dim]{c['level']} · {escape(c['source'])} · doc {c['doc_id']}[/]{left}"
            )
        if found["reason"]:
            out.print(f"[dim]{escape(found['reason'])}[/]")
    if not found["candidates"]:
        sys.exit(EXIT_NOT_FOUND)


# what surfaces/cli/main.py registers
COMMANDS = (sources, features, tags, titles, links, random, geocode)
