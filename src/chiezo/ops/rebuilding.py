"""What a rebuild runs: a source's recorded kind, input identity and options turned back into
the ingest call that built it (the same options, so a rebuild is the same build on newer
input); with ``fetch``, the input of a source that was downloaded is downloaded again.

Used by ``chiezo rebuild`` (surfaces/cli/ingest_commands.py), by background jobs to plan
(ops/jobs.py) and by a job's own process to run (ops/job_process.py).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from chiezo.core.errors import BadQuery, Operation
from chiezo.core.progress import Progress
from chiezo.ops import building
from chiezo.ops.context import Context
from chiezo.store.build import BuildOptions, BuildReport
from chiezo.store.kinds import kind_named, option_fields, recorded_options
from chiezo.store.source_info import SourceInfo

NO_REBUILD = "notes is written in place; it has no rebuild"


def source_info(ctx: Context, name: str) -> SourceInfo:
    """What is known of ``name``, also when it needs a rebuild (``Library.info``)."""
    return ctx.library.info(name)


@dataclass
class RebuildCall:
    """``building.ingest(ctx, kind, inputs, name, options=, build=)`` that rebuilds a source
    the way it was built, read back from what its build recorded."""

    kind: str
    inputs: list[Path]  # empty when the input is downloaded again (``fetch``)
    options: Any  # the kind's Options
    build: BuildOptions
    missing: list[str]  # recorded inputs that are no longer there
    fetch: dict[str, Any] | None = None  # what the source was fetched with (rebuild --fetch)
    identity: dict[str, Any] | None = None  # the input identity its build recorded

    def recorded(self) -> dict[str, Any]:
        """The options as the plan shows them (JSON), with the document language."""
        language = {"language": self.build.language} if self.build.language else {}
        return {**recorded_options(self.options), **language}


def rebuild_call(info: SourceInfo, *, fetch: bool = False) -> RebuildCall:
    """How to rebuild the source described by ``info`` — with ``fetch``, from its input
    downloaded again. BadQuery (400) for a writable source (notes), for an input that is no
    longer there, and with ``fetch`` for a source whose input was not downloaded."""
    call = _rebuild_parts(info, fetch=fetch)
    if call.missing:
        raise BadQuery(
            f"cannot rebuild {info.name!r}: its input {call.missing[0]} no longer exists",
            source=info.name,
            path=call.missing[0],
            missing=call.missing,
            hint="put it back there, or build the source anew: {see}",
            see=Operation("ingest", info.name, kind=call.kind),
        )
    return call


def rebuild_call_for(ctx: Context, name: str, *, fetch: bool = False) -> RebuildCall:
    """``rebuild_call`` of the source called ``name``."""
    return rebuild_call(source_info(ctx, name), fetch=fetch)


def _rebuild_parts(info: SourceInfo, *, fetch: bool = False) -> RebuildCall:
    call = recorded_call(info)
    return fetching_again(info, call) if fetch else call


def recorded_call(info: SourceInfo) -> RebuildCall:
    if info.writable:
        raise BadQuery(NO_REBUILD, source=info.name)
    try:
        kind = kind_named(info.kind)
    except BadQuery as exc:
        raise BadQuery(
            f"{info.name!r} is of kind {info.kind!r}, which cannot be rebuilt here",
            source=info.name,
            known_kinds=exc.extras.get("known_kinds"),
        ) from exc
    inputs = kind.inputs_from_record(info.input)
    if not inputs:
        raise BadQuery(
            f"{info.name!r} has no recorded input path",
            source=info.name,
            hint="build it anew: {see}",
            see=Operation("ingest", info.name, kind=kind.name),
        )
    options = kind.options_from_record(info.input)
    build = (
        BuildOptions(language=info.language) if "language" in kind.build_flags else BuildOptions()
    )
    needed = inputs + kind.extra_inputs(options)
    missing = kind.missing_inputs(needed)
    return RebuildCall(kind.name, inputs, options, build, missing, identity=info.input)


def fetching_again(info: SourceInfo, call: RebuildCall) -> RebuildCall:
    """``call`` made to download again what the build was fetched with (the kind's ``fetched``
    record, store/kinds.py ``Fetched``): its fetch options set again, the options the
    download filled in cleared (filled anew), and no input when the input itself is fetched.
    The record stays on the options: a kind's ``fetch`` reads it as "asked again" (GeoNames
    then asks whether the server's files changed)."""
    record = getattr(call.options, "fetched", None)
    if not isinstance(record, dict) or not record.get("options"):
        raise BadQuery(
            f"{info.name!r} was built from {call.inputs[0]}, not downloaded: there is nothing "
            "to fetch again",
            source=info.name,
            hint="rebuild it from that input: {see}",
            see=Operation("rebuild", info.name),
        )
    names = {f.name for f in option_fields(type(call.options))}
    again = {k: v for k, v in record["options"].items() if k in names}
    cleared = {k: None for k in record.get("filled", []) if k in names}
    options = replace(call.options, **{**again, **cleared})
    inputs = [] if record.get("input") else call.inputs
    kind = kind_named(call.kind)
    missing = [str(p) for p in inputs + kind.extra_inputs(options) if not p.exists()]
    return RebuildCall(
        call.kind, inputs, options, call.build, missing, fetch=record, identity=call.identity
    )


def run_rebuild(
    ctx: Context,
    call: RebuildCall,
    name: str,
    *,
    progress: Progress,
    embed: str | bool | None = None,
) -> BuildReport | None:
    """Rebuild ``name`` as ``call`` says. With ``call.fetch`` and a downloaded input, the input
    is downloaded first (verified, resumable: ingest/download.py); when what came is the file
    the source was built from (same path, size and time), nothing is rebuilt: None."""
    if call.fetch and not call.inputs:
        got = kind_named(call.kind).fetch(ctx.settings, call.options, progress)
        if _same_input(got.inputs, call.identity or {}):
            return None
        call = replace(call, inputs=got.inputs, options=got.options)
    return building.ingest(
        ctx,
        call.kind,
        call.inputs,
        name,
        options=call.options,
        build=call.build,
        progress=progress,
        embed=embed,
    )


def _same_input(paths: list[Path], identity: dict[str, Any]) -> bool:
    """Whether ``paths`` are the input ``identity`` recorded: the same file, size and time."""
    from chiezo.ingest.download import mtime

    if len(paths) != 1 or not identity.get("mtime"):
        return False
    path = paths[0].resolve()
    return (
        str(path) == identity.get("path")
        and path.stat().st_size == identity.get("bytes")
        and mtime(path) == identity["mtime"]
    )
