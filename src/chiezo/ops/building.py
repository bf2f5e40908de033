"""The building operations: a source built from its input (``ingest``, one per group of
inputs with ``ingest_each``), embedded (``embed``), a user's decision about it recorded
(``set_source``), or removed."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chiezo.core.errors import BadQuery, ChiezoError, InputError, Operation, UnknownSource
from chiezo.core.progress import NullProgress, Progress
from chiezo.ops.context import Context
from chiezo.ops.requests import ConfigureRequest, RemoveRequest, RollbackRequest
from chiezo.store import generations
from chiezo.store.build import BuildOptions, BuildReport
from chiezo.store.kinds import Skipped, SourceKind, kind_named
from chiezo.store.library import NOTES

if TYPE_CHECKING:
    from chiezo.store.embed import EmbedReport, Runner


def configure(ctx: Context, request: ConfigureRequest) -> dict[str, Any]:
    """Record what the user decided about a source (store/source_settings.py)."""
    name = request.source
    if request.in_default is None:
        raise BadQuery("say whether a search of all sources reads it (in_default)", source=name)
    ctx.library.set_in_default(name, request.in_default)
    return {"source": name, "in_default": ctx.library.settings_of(name).in_default}


def remove(ctx: Context, request: RemoveRequest) -> dict[str, Any]:
    """Delete a built source: every generation, its directory (generations.remove); with
    ``dry_run`` only say what that would delete. A source that no longer opens (another
    schema, a damaged file) is removable; the notes source is not built, so is not."""
    name, dry_run = request.source, request.dry_run
    if name == NOTES:
        raise BadQuery(
            "the notes source is not a built source and cannot be removed",
            source=NOTES,
            hint="forget notes one at a time: {see}",
            see=Operation("forget"),
        )
    try:
        ctx.library.get(name)  # an unknown or malformed name: UnknownSource, known ones
    except UnknownSource:
        raise
    except ChiezoError:
        pass  # there, but unreadable: removing it is the way out
    directory = generations.source_dir(ctx.settings.corpus_dir, name)
    if dry_run:
        return {"source": name, "removed": False, **generations.describe(directory)}
    removed = generations.remove(directory)
    ctx.library.forget(name)
    return {"source": name, "removed": True, **removed}


def rollback(ctx: Context, request: RollbackRequest) -> dict[str, Any]:
    """Serve the source's kept previous generation again (the one its last build or import
    replaced); the generation that was current is kept in its place, so a second rollback goes
    forward again. Refused while a build of it runs, without a previous generation, and when
    that one was written by another schema version (rebuild then)."""
    name = request.source
    directory = generations.source_dir(ctx.settings.corpus_dir, name)  # not notes
    ctx.library.info(name)  # unknown: UnknownSource; one that needs a rebuild may roll back
    done = generations.rollback(directory)
    ctx.library.forget(name)
    return done


def ingest_each(
    ctx: Context,
    kind: str,
    inputs: Sequence[str | Path],
    name: str | None = None,
    **given: Any,
) -> Iterator[tuple[str, BuildReport | Skipped | None]]:
    """Build a source of each group the kind splits ``inputs`` into (a folder of ZIM files:
    one per file), as ``ingest`` builds one; a source already built from that very input
    (``SourceKind.unchanged``) is skipped. Yields (source name, report — None when
    skipped) as each is done, after (the input, Skipped) for each group no source can be
    built from (``SourceKind.unusable``: a broken file of a Kiwix library stops none of
    the others). InputError when no group can be built, naming each and why."""
    spec = kind_named(kind)
    groups, skipped = _usable(spec, spec.each_source([Path(p) for p in inputs]))
    if name and len(groups) > 1:
        raise BadQuery(f"--name names one source; these inputs make {len(groups)}", kind=kind)
    targets = [name or spec.name_for(group) for group in groups]
    _refuse_shared_names(kind, groups, targets)
    for one in skipped:
        yield one.input, one
    for group, target in zip(groups, targets, strict=True):
        if target and target in ctx.library.names():
            recorded = ctx.library.get(target).info().input
            if spec.unchanged(recorded, group):
                yield target, None
                continue
        report = ingest(ctx, kind, group, name, **given)
        yield report.name, report


def ingest(
    ctx: Context,
    kind: str,
    inputs: str | Path | Sequence[str | Path] | None,
    name: str | None = None,
    *,
    options: Any = None,
    build: BuildOptions | None = None,
    progress: Progress | None = None,
    embed: str | bool | None = None,
) -> BuildReport:
    """Build source ``name`` of ``kind`` (store/kinds.py) from ``inputs`` with the kind's
    ``options``; without inputs, a kind that can fetch its input downloads it first. Then
    embed it with ``embed`` (a model name), or — by default — with the model its previous
    generation had (cached passages are not embedded again), so a rebuild does not silently
    lose semantic search. ``embed=False`` skips that."""
    spec = kind_named(kind)
    if not spec.ingestable:
        raise BadQuery(f"a {kind} source is not built from an input", kind=kind)
    options = spec.Options() if options is None else options
    if not isinstance(options, spec.Options):
        raise BadQuery(
            f"options of a {kind} source are {spec.Options.__name__}, not {type(options).__name__}",
            kind=kind,
        )
    paths = [Path(inputs)] if isinstance(inputs, str | Path) else [Path(p) for p in inputs or []]
    progress = progress or NullProgress()
    if not paths:
        if not spec.fetches:
            raise InputError(f"give the {spec.argument} to build a {kind} source from")
        fetched = spec.fetch(ctx.settings, options, progress)
        paths, options, name = fetched.inputs, fetched.options, name or fetched.name
    if len(paths) > 1 and not spec.many_inputs:
        raise InputError(f"a {kind} source is built from one {spec.argument}, not {len(paths)}")
    if paths:
        groups = spec.each_source(paths)
        if len(groups) > 1:
            raise BadQuery(
                f"these inputs make {len(groups)} {kind} sources: build them with ingest_each",
                kind=kind,
            )
        paths = groups[0]
    name = name or spec.default_name
    if not name and spec.needs_name():
        raise BadQuery(f"name the {kind} source (--name)", kind=kind)
    report = spec.build(ctx.settings, paths, name, options, build or BuildOptions(), progress)
    return embed_after_build(ctx, report, embed, progress=progress)


def embed_after_build(
    ctx: Context,
    report: BuildReport,
    model: str | bool | None = None,
    *,
    progress: Progress | None = None,
) -> BuildReport:
    """The embed step of ``ingest`` (also run on its own by background jobs, so that a
    build that succeeded is reported even when embedding then fails); ``model`` as
    ``ingest``'s ``embed``."""
    step = embedding_after_build(report.previous, model)
    if step is not None:
        chosen, max_chunks, unit_chars = step
        # the generation kept beside the embedded one is what served before the build,
        # not the text-only one the build switched in for the minutes embedding takes
        done = embed(
            ctx,
            report.name,
            chosen,
            max_chunks=max_chunks,
            unit_chars=unit_chars,
            progress=progress,
            keep_previous=report.previous,
        )
        report.embedding = done.to_dict()
    return report


def embed(
    ctx: Context,
    source: str,
    model: str | None = None,
    *,
    max_chunks: int | None = None,
    unit_chars: int | None = None,
    progress: Progress | None = None,
    keep_previous: Path | None | str = generations.REPLACED,
    runner: Runner | None = None,
) -> EmbedReport:
    """Vectors for a source's chunks, as a new generation (store/embed.py); ``keep_previous``:
    the generation kept beside it (default: the one it replaces); ``runner``: where the
    vectors are computed (default: here; cluster/embedding.py: on a Ray cluster)."""
    from chiezo.store.embed import embed_source

    return embed_source(
        ctx.settings,
        ctx.library,
        source,
        model,
        max_chunks=max_chunks,
        unit_chars=unit_chars,
        progress=progress,
        keep_previous=keep_previous,
        runner=runner,
    )


def embedding_after_build(
    previous: Path | None, embed: str | bool | None = None
) -> tuple[str, int | None, int | None] | None:
    """(model, max_chunks, unit_chars) of the embed step after a build whose previous
    generation is ``previous``: ``embed`` (a model name), or by default the previous
    generation's model with its coverage and unit size; None when nothing is embedded."""
    if embed is False:
        return None
    from chiezo.store.embed import previous_embedding

    carried = previous_embedding(previous)
    model = embed if isinstance(embed, str) else (carried[0] if carried else None)
    if not model:
        return None
    if carried is None or carried[0] != model:
        return model, None, None
    return model, carried[1], carried[2]


def _usable(spec: SourceKind, groups: list[list[Path]]) -> tuple[list[list[Path]], list[Skipped]]:
    """(the groups a source can be built from, the others as Skipped); InputError when none
    can be, one line per input saying why."""
    usable, skipped = [], []
    for group in groups:
        why = spec.unusable(group)
        if why is None:
            usable.append(group)
        else:
            skipped.append(Skipped(", ".join(map(str, group)), why))
    if not usable:
        raise InputError(
            f"no {spec.name} source can be built from these inputs:\n"
            + "\n".join(f"  {one.input}: {one.why}" for one in skipped),
            skipped=[one.to_dict() for one in skipped],
        )
    return usable, skipped


def _refuse_shared_names(kind: str, groups: list[list[Path]], targets: list[str | None]) -> None:
    """BadQuery before any build when inputs would make one source (two versions of one ZIM:
    the second build would replace the first): a line for each name so shared."""
    sharing: dict[str, list[str]] = {}
    for group, target in zip(groups, targets, strict=True):
        if target:
            sharing.setdefault(target, []).append(", ".join(map(str, group)))
    shared = {target: files for target, files in sorted(sharing.items()) if len(files) > 1}
    if shared:
        raise BadQuery(
            "\n".join(f"{', '.join(files)} would all be source {t}" for t, files in shared.items()),
            hint="build them one at a time, each with its own --name",
            kind=kind,
            shared_names=shared,
        )
