"""``chiezo sources``: what the library holds."""

from __future__ import annotations

import click
from rich.markup import escape

from .cli_common import emit_json, err, handles_errors, out, service_of, units_label

# -- sources -----------------------------------------------------------------------------------


@click.command()
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def sources(ctx, as_json) -> None:
    """List the sources and what they hold."""
    infos = service_of(ctx).sources()
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
        vectors = info.get("vectors")
        if vectors:
            out.print(
                f"    vectors: {vectors['model']} ({vectors['dim']}-d), {vectors['count']:,} for "
                f"{vectors['embedded_chunks']:,} chunks = {vectors['coverage']:.1%} coverage, "
                f"{units_label(vectors['unit_chars'])}, embedded {vectors['embedded_at']}"
            )
        elif info.get("name") != "notes":
            out.print(f"    [dim]no vectors (keyword search only; `chiezo embed "
                      f"{escape(info['name'])}` adds them)[/]")  # fmt: skip
