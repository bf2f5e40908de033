"""``chiezo ingest KIND …`` and ``chiezo rebuild``: building sources from the command line."""

from __future__ import annotations

import contextlib
from pathlib import Path

import click
from rich.markup import escape

from .build import BuildOptions
from .cli_common import emit_json, err, handles_errors, out, print_error, service_of, units_label
from .errors import ChiezoError
from .progress import NullProgress, RichProgress

# -- ingest ------------------------------------------------------------------------------------


def embed_options(command):
    """``--embed MODEL`` / ``--no-embed``, shared by every ingest command."""
    command = click.option(
        "--no-embed",
        is_flag=True,
        help="Do not re-embed (by default a source that had vectors is re-embedded with its "
        "model; unchanged passages come from the cache).",
    )(command)
    return click.option(
        "--embed",
        "embed_model",
        default=None,
        metavar="MODEL",
        help="Then add vectors with MODEL (see `chiezo embed`).",
    )(command)


@click.group()
def ingest() -> None:
    """Build a source (a new generation, switched in only when it validates)."""


@ingest.command("docs")
@click.argument("path", type=click.Path(path_type=Path))
@click.option("--name", required=True, help="Source name, e.g. handbook.")
@click.option("--strict", is_flag=True, help="Fail the build on any unusable file.")
@click.option(
    "--allow-shrink", is_flag=True, help="Accept a generation under half the current size."
)
@click.option("--min-docs", type=int, default=1, show_default=True)
@click.option("--language", default=None, help="Main language of the documents, e.g. ja.")
@click.option("--watch", is_flag=True, help="Keep running; rebuild when files change.")
@click.option("--interval", type=click.FloatRange(0.2), default=2.0, show_default=True,
              help="--watch: seconds between looks at the folder.")  # fmt: skip
@embed_options
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
@click.pass_context
@handles_errors
def ingest_docs(ctx, path, name, strict, allow_shrink, min_docs, language, watch, interval,
                embed_model, no_embed, as_json) -> None:  # fmt: skip
    """Build source NAME from a folder of documents — Markdown, text, PDF, Word, Excel,
    PowerPoint, HTML, CSV (one file = one document, chunked along its structure). A rebuild
    converts only changed files; --watch keeps rebuilding as files change."""
    options = BuildOptions(min_docs=min_docs, allow_shrink=allow_shrink, language=language)

    def build() -> None:
        progress = NullProgress() if as_json else RichProgress(err)
        try:
            report = service_of(ctx).ingest(
                "docs", path, name, strict=strict, options=options, progress=progress,
                embed=_embed_choice(embed_model, no_embed),
            )  # fmt: skip
        finally:
            progress.close()
        _print_report(report, as_json)

    build()
    if watch:
        from .sources.watch import snapshot
        from .sources.watch import watch as watch_folder

        err.print(f"[dim]watching {escape(str(path))} (Ctrl-C to stop)[/]")
        with contextlib.suppress(KeyboardInterrupt):
            watch_folder(lambda: snapshot(path), _keep_serving(build), interval=interval)


def _keep_serving(build):
    """A rebuild that fails (a file mid-copy, a broken new file under --strict) is reported
    and the watch goes on; the previous generation keeps serving."""

    def run() -> None:
        try:
            build()
        except ChiezoError as exc:
            print_error(exc)

    return run


@ingest.command("zim")
@click.argument("file", type=click.Path(path_type=Path))
@click.option("--name", default=None, help="Source name (default: zim_<the file's Name>).")
@click.option(
    "--allow-shrink", is_flag=True, help="Accept a generation under half the current size."
)
@embed_options
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
@click.pass_context
@handles_errors
def ingest_zim(ctx, file, name, allow_shrink, embed_model, no_embed, as_json) -> None:
    """Build a source from a Kiwix ZIM file: every article a document, redirects as aliases,
    old and new namespace schemes."""
    progress = NullProgress() if as_json else RichProgress(err)
    try:
        report = service_of(ctx).ingest(
            "zim", file, name, options=BuildOptions(allow_shrink=allow_shrink),
            progress=progress, embed=_embed_choice(embed_model, no_embed),
        )  # fmt: skip
    finally:
        progress.close()
    _print_report(report, as_json)


def _embed_choice(model: str | None, skip: bool) -> str | bool | None:
    if model and skip:
        raise click.UsageError("--embed and --no-embed contradict each other")
    return False if skip else model


def _print_report(report, as_json: bool) -> None:
    if as_json:
        emit_json(report.to_dict())
        return
    out.print(
        f"[green]built[/] {escape(report.name)}: {report.docs:,} documents, "
        f"{report.chunks:,} chunks, {report.size_bytes / 2**20:,.1f} MiB in {report.seconds:.1f} s"
    )
    if report.warnings:
        out.print(f"[yellow]{len(report.warnings)} warning(s) while reading the input[/]")
    if report.previous:
        out.print(f"[dim]previous generation kept: {report.previous.name}[/]")
    if report.embedding:
        e = report.embedding
        out.print(f"[green]embedded[/] {e['embedded_chunks']:,} of {e['chunks']:,} chunks with "
                  f"{escape(e['model'])}: {e['vectors']:,} vectors, {units_label(e['unit_chars'])} "
                  f"({e['embedded']:,} new, {e['reused']:,} from the cache)")  # fmt: skip


@ingest.command("wikipedia")
@click.argument("dump", required=False, type=click.Path(path_type=Path))
@click.option("--name", default=None, help="Source name (default: the dump's, e.g. jawiki).")
@click.option("--lang", "language", default=None, help="Wiki language (default: the dump's).")
@click.option(
    "--pageviews",
    type=click.Path(path_type=Path),
    default=None,
    help="Wikimedia pageviews file: popularity from page views.",
)
@click.option(
    "--page-props",
    type=click.Path(path_type=Path),
    default=None,
    help="page_props SQL dump: Wikidata ids as the attribute 'wikidata'.",
)
@click.option(
    "--allow-truncated", is_flag=True, help="Build from the complete pages of a cut-off dump."
)
@click.option("--workers", type=click.IntRange(1, 64), default=None, help="Parser processes.")
@click.option(
    "--chunk-chars",
    type=click.IntRange(100, 5000),
    default=500,
    show_default=True,
    help="Target passage size in characters (at most twice that) for snippets and vectors.",
)
@click.option("--date", default=None, help="Without DUMP: the dump date to fetch (YYYYMMDD).")
@click.option("--mirror", default=None, help="Without DUMP: the dumps site or mirror URL.")
@click.option(
    "--with-extras",
    is_flag=True,
    help="Without DUMP: also fetch page views and page_props for popularity and Wikidata ids.",
)
@click.option("--allow-shrink", is_flag=True)
@embed_options
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def ingest_wikipedia(ctx, dump, name, language, pageviews, page_props, allow_truncated, workers,
                     chunk_chars, date, mirror, with_extras, allow_shrink, embed_model, no_embed,
                     as_json) -> None:  # fmt: skip
    """Build a <lang>wiki source from a pages-articles XML dump (.xml, .xml.bz2, .xml.xz).
    Without DUMP, the dump of --lang (default ja) is downloaded first — resumable, checked
    against the published checksums — from the Wikimedia dumps site or --mirror."""
    from .sources.wikipedia import WikiOptions

    service = service_of(ctx)
    progress = NullProgress() if as_json else RichProgress(err)
    try:
        if dump is None:
            from .sources.wikifetch import fetch_dump

            fetched = fetch_dump(
                service.settings,
                language or "ja",
                date=date,
                mirror=mirror,
                extras=with_extras,
                progress=progress,
            )
            dump = fetched.dump
            pageviews = pageviews or fetched.pageviews
            page_props = page_props or fetched.page_props
        wiki = WikiOptions(
            language=language,
            pageviews=pageviews,
            page_props=page_props,
            allow_truncated=allow_truncated,
            workers=workers,
            chunk_chars=chunk_chars,
        )
        options = BuildOptions(allow_shrink=allow_shrink)
        report = service.ingest(
            "wikipedia", dump, name, wiki=wiki, options=options, progress=progress,
            embed=_embed_choice(embed_model, no_embed),
        )  # fmt: skip
    finally:
        progress.close()
    _print_report(report, as_json)


@ingest.command("geonames")
@click.argument("export", required=False, type=click.Path(path_type=Path))
@click.option("--name", default="geonames", show_default=True)
@click.option(
    "--admin1",
    type=click.Path(path_type=Path),
    default=None,
    help="admin1CodesASCII.txt: names of first-level areas.",
)
@click.option(
    "--alternate-names",
    type=click.Path(path_type=Path),
    default=None,
    help="alternateNamesV2 or a country's alternatenames/XX (zip/txt): Japanese names of "
    "places and areas, Wikidata ids.",
)
@click.option(
    "--fetch",
    "fetch_name",
    default=None,
    help="Without EXPORT: the export to fetch, e.g. cities15000 or JP.",
)
@click.option(
    "--fetch-alternate-names",
    "fetch_names",
    default=None,
    metavar="CC",
    help="Fetch a country's alternate names (e.g. JP: Japanese areas and titles for Japan).",
)
@click.option("--mirror", default=None, help="GeoNames download URL (default: geonames.org).")
@click.option("--allow-shrink", is_flag=True)
@embed_options
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def ingest_geonames(ctx, export, name, admin1, alternate_names, fetch_name, fetch_names, mirror,
                    allow_shrink, embed_model, no_embed, as_json) -> None:  # fmt: skip
    """Build a place source from a GeoNames export (allCountries, XX, citiesNNNN; .zip or
    .txt). Without EXPORT, --fetch NAME downloads it (with admin1 names);
    --fetch-alternate-names JP downloads Japan's alternate names."""
    from .sources.geonames import GeoNamesOptions

    service = service_of(ctx)
    progress = NullProgress() if as_json else RichProgress(err)
    try:
        if export is None:
            if not fetch_name:
                raise click.UsageError("give an EXPORT file or --fetch NAME (e.g. cities15000)")
            from .sources.placefetch import fetch_geonames

            export, fetched_admin1 = fetch_geonames(service.settings, fetch_name, mirror=mirror,
                                                    progress=progress)  # fmt: skip
            admin1 = admin1 or fetched_admin1
        if fetch_names:
            if alternate_names:
                raise click.UsageError("give --alternate-names FILE or --fetch-alternate-names")
            from .sources.placefetch import fetch_alternate_names

            alternate_names = fetch_alternate_names(service.settings, fetch_names, mirror=mirror,
                                                    progress=progress)  # fmt: skip
        geo = GeoNamesOptions(admin1=admin1, alternate_names=alternate_names)
        report = service.ingest(
            "geonames",
            export,
            name,
            geo=geo,
            options=BuildOptions(allow_shrink=allow_shrink),
            progress=progress,
            embed=_embed_choice(embed_model, no_embed),
        )
    finally:
        progress.close()
    _print_report(report, as_json)


@ingest.command("osm")
@click.argument("extract", required=False, type=click.Path(path_type=Path))
@click.option("--name", default=None, help="Source name (default: osm_<file name>).")
@click.option(
    "--admin-levels",
    default="4",
    show_default=True,
    help="Admin levels whose boundaries give 'area', comma-separated (e.g. 4,7).",
)
@click.option(
    "--fetch",
    "fetch_region",
    default=None,
    help="Without EXTRACT: a region of the extract server, e.g. asia/japan/kanto.",
)
@click.option("--mirror", default=None, help="Extract server URL (default: Geofabrik).")
@click.option("--allow-shrink", is_flag=True)
@embed_options
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def ingest_osm(ctx, extract, name, admin_levels, fetch_region, mirror, allow_shrink,
               embed_model, no_embed, as_json) -> None:  # fmt: skip
    """Build an osm_<region> source from an OpenStreetMap extract (.osm.pbf). Without EXTRACT,
    --fetch REGION downloads it from the extract server (checked against its .md5)."""
    from .sources.osm import OsmOptions

    service = service_of(ctx)
    progress = NullProgress() if as_json else RichProgress(err)
    levels = tuple(v.strip() for v in admin_levels.split(",") if v.strip())
    try:
        if extract is None:
            if not fetch_region:
                raise click.UsageError("give an EXTRACT file or --fetch REGION (e.g. asia/japan)")
            from .sources.placefetch import fetch_osm

            extract = fetch_osm(service.settings, fetch_region, mirror=mirror, progress=progress)
            name = name or "osm_" + fetch_region.rstrip("/").rsplit("/", 1)[-1].replace("-", "_")
        report = service.ingest(
            "osm",
            extract,
            name,
            osm=OsmOptions(admin_levels=levels),
            options=BuildOptions(allow_shrink=allow_shrink),
            progress=progress,
            embed=_embed_choice(embed_model, no_embed),
        )
    finally:
        progress.close()
    _print_report(report, as_json)


@click.command()
@click.argument("source")
@click.option(
    "--no-embed",
    is_flag=True,
    help="Do not re-embed (by default a source that had vectors is re-embedded with its model; "
    "unchanged passages come from the cache).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the build report as JSON.")
@click.pass_context
@handles_errors
def rebuild(ctx, source, no_embed, as_json) -> None:
    """Rebuild SOURCE from the input it was built from, with the options recorded then (also
    a source that needs a rebuild after an upgrade). The current generation keeps serving
    until the new one is complete."""
    from .jobs import rebuild_call_for

    service = service_of(ctx)
    kind, path, kwargs = rebuild_call_for(service, source)
    progress = NullProgress() if as_json else RichProgress(err)
    try:
        report = service.ingest(kind, path, source, progress=progress,
                                embed=False if no_embed else None, **kwargs)  # fmt: skip
    finally:
        progress.close()
    _print_report(report, as_json)
