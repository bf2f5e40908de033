"""The ``chiezo`` command line: a thin layer over the operations (chiezo.ops).

Exit codes are part of the interface (scripts rely on them): 0 ok, 1 failure, 2 usage or
configuration error (including an unknown source), 3 nothing found.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click
from rich.markup import escape

from chiezo import __version__
from chiezo.core.config import Settings, is_loopback
from chiezo.core.errors import EXIT_NOT_FOUND, ChiezoError
from chiezo.core.models import SearchResult
from chiezo.core.progress import console_progress
from chiezo.ops import answering, building, operating, searching
from chiezo.ops.context import Context
from chiezo.ops.registry import BINDINGS
from chiezo.ops.requests import (
    AnswerRequest,
    AskRequest,
    DocRequest,
    FilterRequest,
    ForgetRequest,
    RecallRequest,
    RememberRequest,
    Request,
    SearchRequest,
    UpdateRequest,
)
from chiezo.ops.tool_profiles import DEFAULT_PROFILE, PROFILES
from chiezo.store import model_host
from chiezo.surfaces.cli import via_server
from chiezo.surfaces.cli.answer_printer import Turn, where_to_open
from chiezo.surfaces.cli.common import (
    VisibleLog,
    echo,
    emit_json,
    err,
    handles_errors,
    one_build_at_a_time,
    out,
    print_error,
    ray_option,
    service_of,
    units_label,
)
from chiezo.surfaces.cli.ingest_commands import ingest, rebuild
from chiezo.surfaces.cli.library_commands import COMMANDS
from chiezo.surfaces.cli.operator_commands import COMMANDS as OPS_COMMANDS
from chiezo.surfaces.cli.parameters import request_from, request_options
from chiezo.surfaces.mcp.clients import MCP_CLIENTS

_F = TypeVar("_F", bound=Callable[..., Any])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--data",
    type=click.Path(file_okay=False, path_type=Path),
    envvar="CHIEZO_DATA",
    default="./data",
    show_default=True,
    help="Data directory (sources live in DATA/corpus). Env: CHIEZO_DATA.",
)
@click.version_option(__version__, prog_name="chiezo")
@click.pass_context
def cli(ctx: click.Context, data: Path) -> None:
    """Chiezo: an offline knowledge base for AI. Build sources, then search them."""
    # a warning or traceback of this process may quote a request's text (common.py)
    logging.lastResort = VisibleLog()
    settings = Settings.from_env(data_dir=data)
    # a server on the same data directory embeds this command's queries (store/model_host.py)
    model_host.look_for_host(settings.data_dir)
    ctx.obj = {"service": Context(settings)}


for command in (ingest, rebuild, *COMMANDS, *OPS_COMMANDS):
    cli.add_command(command)


# -- search ------------------------------------------------------------------------------------


@cli.command(help=BINDINGS["search"].help)
@request_options(SearchRequest)
@click.option("--json", "as_json", is_flag=True)
@click.option("--interactive", "-i", is_flag=True, help="Read queries from the terminal.")
@click.pass_context
@handles_errors
def search(ctx: click.Context, as_json: bool, interactive: bool, **values: Any) -> None:
    service = service_of(ctx)
    request = request_from(SearchRequest, values)
    if interactive:
        _interactive(service, request)
        return
    if not request.query.strip():
        raise click.UsageError("give a query, or --interactive")
    served = via_server.search(service.settings, request)  # a server on this data answers
    result, as_dict = served or (searching.search(service, request), None)
    if as_json:
        emit_json(as_dict or result.to_dict())
    else:
        _print_result(result, explain=request.explain, data_dir=service.settings.data_dir)
    if not result.hits:
        sys.exit(EXIT_NOT_FOUND)


# how a search was made, in words (the web UI says the same through its i18n catalogue)
_HOW = {
    "keyword": "by keyword",
    "semantic": "by meaning",
    "hybrid": "by keyword and meaning",
    "keyword-fallback": "by keyword (meaning ran out of time)",
}


def _print_result(
    result: SearchResult, *, explain: bool = False, data_dir: Path | None = None
) -> None:
    for i, hit in enumerate(result.hits, start=result.offset + 1):
        marker = " [green]= title[/]" if hit.title_match else ""
        out.print(
            f"[bold]{i:>2}. {escape(hit.title)}[/]  [dim]{escape(hit.source)} · doc {hit.doc_id}"
            f" · {escape(hit.key)}[/]{marker}"
        )
        if hit.section:
            out.print(f"    [dim]{escape(hit.section)}[/]")
        place = [f"{hit.distance_km:.2f} km"] if hit.distance_km is not None else []
        if hit.point:
            place.append(f"{hit.point.lat:.5f}, {hit.point.lon:.5f}")
        if place:
            out.print("    [dim]" + " · ".join(place) + "[/]")
        if hit.snippet:
            out.print(f"    {escape(hit.snippet)}")
        if hit.explain:
            out.print("    [dim]" + escape(_explained(hit.explain)) + "[/]")
        # where to open it: its link, else (no public page, no server) the command to show it
        shown = {"url": hit.url, "source": hit.source, "doc_id": hit.doc_id}
        out.print(f"    [dim]{escape(where_to_open(shown, data_dir))}[/]")
    bound = "at least " if result.total_is_lower_bound else ""
    how = " + ".join(
        dict.fromkeys(_HOW.get(p, p) for p in (result.retrieval or "keyword").split("+"))
    )
    if explain:
        how += f" (match mode {result.mode})"
    summary = f"{bound}{result.total:,} {'match' if result.total == 1 else 'matches'}, {how}"
    if result.order and result.order != "relevance":
        summary += f", order: {result.order}"
    if not result.hits:
        summary = f"nothing found for {result.query!r} ({how})"
    out.print(f"[dim]{escape(summary)}[/]")
    _print_facets(result.facets)
    for note in result.notes:
        out.print(f"[dim]note: {escape(note)}[/]")


def _print_facets(facets: dict[str, Any] | None) -> None:
    """One line per facet: its values with their counts, most frequent first, and whether the
    counts cover every match (search/facets.py)."""
    for name, facet in (facets or {}).items():
        values = ", ".join(f"{escape(v['value'])} {v['n']:,}" for v in facet["values"]) or "-"
        more = f", {facet['more']:,} more" if facet.get("more") else ""
        exact = "" if facet["exact"] else f" [dim](of the first {facet['counted']:,})[/]"
        out.print(f"[bold]{name}[/]: {values}{more}{exact}")


def _explained(explain: dict[str, Any]) -> str:
    def show(value: object) -> str:
        return (
            "-" if value is None else (f"{value:.4g}" if isinstance(value, float) else str(value))
        )

    return "  ".join(f"{k}={show(v)}" for k, v in explain.items())


def _interactive(service: Context, request: SearchRequest) -> None:
    source = request.source
    names = [s["name"] for s in operating.sources(service) if s.get("status") == "ok"]
    err.print(
        f"Chiezo search — sources: {', '.join(names) or '(none)'}. Type a query; "
        "':source NAME' to pick one, ':all' for all, an empty line or Ctrl-D to quit."
    )
    while True:
        try:
            line = input(f"search{'@' + source if source else ''}> ").strip()
        except (EOFError, KeyboardInterrupt):
            err.print()
            return
        if not line:
            return
        if line.startswith(":source"):
            source = line.split(maxsplit=1)[1] if " " in line else None
            continue
        if line == ":all":
            source = None
            continue
        try:
            asked = request.model_copy(update={"query": line, "source": source})
            _print_result(searching.search(service, asked), data_dir=service.settings.data_dir)
        except ChiezoError as exc:
            print_error(exc)


@cli.command("filter", help=BINDINGS["filter"].help)
@request_options(FilterRequest)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def filter_command(ctx: click.Context, as_json: bool, **values: Any) -> None:
    request = request_from(FilterRequest, values)
    offset = request.offset
    result = searching.filter(service_of(ctx), request)
    if as_json:
        emit_json(result)
    else:
        several = len(result.get("sources") or ()) > 1
        for i, doc in enumerate(result["docs"], start=offset + 1):
            distance = f"  {doc['distance_km']:.2f} km" if "distance_km" in doc else ""
            where = f"{escape(doc.get('source', ''))} · " if several else ""
            out.print(
                f"{i:>3}. [bold]{escape(doc.get('title', ''))}[/]{distance}  "
                f"[dim]{where}doc {doc.get('doc_id', '')}[/]"
            )
        bound = "≥ " if result.get("total_is_lower_bound") else ""
        out.print(f"[dim]{bound}{result['total']:,} match(es), by {result['order']}[/]")
        _print_facets(result.get("facets"))
        for note in result.get("notes", []):
            out.print(f"[dim]note: {escape(note)}[/]")
    if not result["docs"]:
        sys.exit(EXIT_NOT_FOUND)


# -- answers ---------------------------------------------------------------------------------


@cli.command(
    help=BINDINGS["ask"].help,
    epilog="Exit codes: 0 answered, 2 usage/config, 3 nothing found, 4 an uncited or "
    "unsupported sentence with --strict, 5 no model reachable (the excerpts found are "
    "printed anyway).",
)
@request_options(AskRequest)
@click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON, at the end.")
@click.pass_context
@handles_errors
def ask(ctx: click.Context, as_json: bool, **values: Any) -> None:
    asked = request_from(AskRequest, values)
    turn = _answer_turn(service_of(ctx), asked.question, [], asked, as_json=as_json)
    sys.exit(turn.code)


@cli.command(help=BINDINGS["chat"].help)
@request_options(AnswerRequest)
@click.pass_context
@handles_errors
def chat(ctx: click.Context, **values: Any) -> None:
    service = service_of(ctx)
    chosen = request_from(AnswerRequest, values)
    history: list[dict[str, Any]] = []
    while True:
        try:
            line = click.prompt("?", prompt_suffix=" ", default="", show_default=False, err=True)
        except (EOFError, click.Abort):
            break
        if not line.strip():
            break
        history += _answer_turn(service, line, history, chosen, writable=True).history(line)


def _answer_turn(
    service: Context,
    text: str,
    history: list[dict[str, Any]],
    chosen: AnswerRequest,
    *,
    as_json: bool = False,
    writable: bool = False,
) -> Turn:
    """One question answered as ``chosen`` says and printed (streamed unless ``as_json``):
    its Turn. ``writable``: the model may remember (chat)."""
    from chiezo.core.errors import LLMNotConfigured, LLMUnavailable
    from chiezo.surfaces.cli.answer_printer import Printer

    options = chosen.options(writable=writable)
    printer = Printer(out, err, strict=chosen.strict, data_dir=service.settings.data_dir)
    try:
        if not as_json:
            return printer.play(
                answering.answer_events(service, text, options, history=history, log_as="cli")
            )
        result = answering.ask(service, text, options, history=history, log_as="cli").to_dict()
    except (LLMUnavailable, LLMNotConfigured) as exc:
        if as_json:
            emit_json(exc.to_dict())
        else:
            printer.failed(exc.to_dict())
        return Turn(exc.exit_code)
    emit_json(result)
    printer.warn(result)
    return Turn(printer.code(result), result["answer"])


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the checks as JSON.")
@click.pass_context
@handles_errors
def doctor(ctx: click.Context, as_json: bool) -> None:
    """Check the data directory, sources, model endpoints, memory and disk; exit 1 on a
    problem."""
    from chiezo.ops.doctor import check

    rows = check(service_of(ctx))
    if as_json:
        emit_json({"ok": all(r["ok"] for r in rows), "checks": rows})
    else:
        for row in rows:
            mark = "[green]ok[/]  " if row["ok"] else "[bold red]FAIL[/]"
            out.print(f"{mark} {escape(row['check'])}: {escape(row['detail'])}")
            if row.get("hint"):
                out.print(f"      [dim]{escape(row['hint'])}[/]")
    if not all(r["ok"] for r in rows):
        sys.exit(1)


# -- vectors and evaluation --------------------------------------------------------------------


@cli.command()
@click.argument("source")
@click.option(
    "--model",
    default=None,
    help="e5-small, use-m, onnx:/dir or st:/dir (default: the source's, else use-m).",
)
@click.option(
    "--max-chunks",
    type=click.IntRange(1),
    default=None,
    help="Embed only the first N chunks (most popular documents first).",
)
@click.option(
    "--unit-chars",
    type=click.IntRange(0),
    default=None,
    help="Embed sentences grouped up to N characters (0: whole chunks). Default: as before, "
    "else 60 — or whole chunks for sources over 200,000 chunks.",
)
@ray_option("Compute the vectors on a Ray cluster (docs/cluster.md)")
@click.option(
    "--actors",
    type=click.IntRange(1, 4096),
    default=None,
    help="--ray: embedding actors (default: one per CPU of the cluster).",
)
@click.option("--wait", is_flag=True, help="If a build or job runs, wait for it, then start.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.pass_context
@handles_errors
def embed(
    ctx: click.Context,
    source: str,
    model: str | None,
    max_chunks: int | None,
    unit_chars: int | None,
    ray: str | None,
    actors: int | None,
    wait: bool,
    as_json: bool,
) -> None:
    """Add vectors to SOURCE for semantic and hybrid search (a new generation). Resumable and
    incremental: vectors are cached by chunk text, so an interrupted run or a rebuild only
    embeds what is new. The source stays searchable by text meanwhile."""
    service = service_of(ctx)
    if actors is not None and ray is None:
        raise click.UsageError("--actors goes with --ray")
    runner = None
    if ray is not None:
        from chiezo.cluster.embedding import RayEmbedding

        runner = RayEmbedding(ray, actors=actors)
    progress = console_progress(err, quiet=as_json)
    try:
        with one_build_at_a_time(service, f"`chiezo embed {source}`", source, "embed", wait):
            report = building.embed(
                service,
                source,
                model,
                max_chunks=max_chunks,
                unit_chars=unit_chars,
                progress=progress,
                runner=runner,
            )
    finally:
        progress.close()
    data = report.to_dict()
    if as_json:
        emit_json(data)
        return
    out.print(
        f"[bold]{escape(source)}[/]: {data['embedded_chunks']:,} of {data['chunks']:,} chunks "
        f"have {escape(data['model'])} vectors — {data['vectors']:,} vectors, "
        f"{units_label(data['unit_chars'])} ({data['embedded']:,} embedded now at "
        f"{data['passages_per_s']:,} passages/s, {data['reused']:,} reused) in {data['seconds']} s"
        + (f", computed on {escape(data['computed_by'])}" if ray is not None else "")
    )


@cli.command("eval")
@click.argument("source")
@click.argument("questions", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--config",
    "configs",
    multiple=True,
    help="A configuration to measure, e.g. mode=hybrid,keyword_weight=0.7; repeatable "
    "(default: keyword, semantic, hybrid).",
)
@click.option(
    "--ab",
    nargs=2,
    default=None,
    metavar="A B",
    help="Compare two configurations question by question (e.g. source=a source=b).",
)
@click.option(
    "--show",
    type=click.IntRange(0),
    default=10,
    show_default=True,
    help="With --ab: questions shown where the two differ.",
)
@click.option("--max-questions", type=click.IntRange(1), default=None)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def eval_command(
    ctx: click.Context,
    source: str,
    questions: Path,
    configs: tuple[str, ...],
    ab: tuple[str, str] | None,
    show: int,
    max_questions: int | None,
    as_json: bool,
) -> None:
    """Measure retrieval on QUESTIONS (JSON Lines: question + relevant_keys/relevant_titles):
    recall@1/5/10, MRR and nDCG@10 per configuration."""
    from chiezo.ops import evaluate

    service = service_of(ctx)
    asked = evaluate.load_questions(questions, max_questions)
    notes: list[str] = []
    if ab:
        chosen = [evaluate.parse_config(c) for c in ab]
    elif configs:
        chosen = [evaluate.parse_config(c) for c in configs]
    else:
        chosen, notes = evaluate.default_configs(service, source)
    runs = [evaluate.run(service, source, asked, c) for c in chosen]
    report = {
        "source": source,
        "questions": len(asked),
        "notes": notes,
        "results": [r.summary() for r in runs],
    }
    if ab:
        report["differences"] = evaluate.differing(runs[0], runs[1], asked, show)
    if as_json:
        emit_json(report)
        return
    _print_eval(report)


def _print_eval(report: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"{report['questions']:,} questions · {report['source']}")
    columns = ("config", "R@1", "R@5", "R@10", "MRR", "nDCG@10", "ms_per_query")
    for column in columns:
        table.add_column(column, justify="left" if column == "config" else "right")
    for row in report["results"]:
        table.add_row(*(escape(str(row[c])) for c in columns))
    out.print(table)
    for note in report["notes"]:
        out.print(f"[dim]note: {escape(note)}[/]")
    for diff in report.get("differences", []):
        out.print(
            f"\n[bold]{escape(diff['question'])}[/]  A: rank {diff['a_rank'] or '-'}  "
            f"B: rank {diff['b_rank'] or '-'}"
        )
        for side in ("a", "b"):
            out.print(f"  [bold]{side.upper()}[/]")
            for i, hit in enumerate(diff[f"{side}_hits"], start=1):
                mark = "✓" if hit["relevant"] else " "
                where = f" [dim]{escape(hit['section'])}[/]" if hit["section"] else ""
                out.print(
                    f"  {i:>2}. {mark} {escape(hit['title'][:36])}  {hit['score']:.3f}{where}"
                )
                if hit["passage"]:
                    out.print(f"        [dim]{escape(hit['passage'])}[/]")


# -- doc ---------------------------------------------------------------------------------------


@cli.command(help=BINDINGS["doc"].help)
@request_options(DocRequest)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def doc(ctx: click.Context, as_json: bool, **values: Any) -> None:
    request = request_from(DocRequest, values)
    if request.title is None and request.doc_id is None and request.key is None:
        raise click.UsageError("give a TITLE, --id or --key")
    source = request.source
    data = BINDINGS["doc"].handle(service_of(ctx), request)
    if as_json:
        emit_json(data)
        return
    if "title" in data:
        out.print(
            f"[bold]{escape(data['title'])}[/]  [dim]{source} · doc {data.get('doc_id', '')}[/]"
        )
    for name in ("key", "url", "source_url", "aliases", "tags", "attrs", "point"):
        if data.get(name) and not (name == "source_url" and data[name] == data.get("url")):
            value = data[name]
            shown = ", ".join(value) if isinstance(value, list) else value
            out.print(f"[dim]{name}:[/] {escape(str(shown))}")
    if data.get("body"):
        out.print()
        out.print(escape(data["body"]))
        if data.get("truncated"):
            out.print(f"[dim]… ({data['body_chars']:,} characters in all)[/]")
    for alt in data.get("alternatives", []):
        out.print(f"[dim]also titled so: doc {alt['doc_id']} ({escape(alt['key'])})[/]")


# -- serve and MCP ------------------------------------------------------------------------------


@cli.command()
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on. Beyond loopback, writes need CHIEZO_TOKEN.",
)
@click.option("--port", default=8080, show_default=True, type=int)
@click.option(
    "--workers",
    default=min(2, os.cpu_count() or 1),
    show_default=True,
    type=click.IntRange(1, 64),
    help="Server processes; one per core serves more clients at once. Each holds ~80 MB of "
    "its own (~85 MB with use-m vectors: one model host process holds the model, ~180 MB, "
    "for all of them); resident ~235-360 MB each, mostly shared file pages "
    "(docs/operations.md).",
)
@ray_option("Serve as a Ray Serve deployment on a cluster (docs/cluster.md)")
@click.option(
    "--replicas",
    type=click.IntRange(1, 1024),
    default=None,
    help="--ray: copies of the server on the cluster (default 2).",
)
@click.pass_context
@handles_errors
def serve(
    ctx: click.Context, host: str, port: int, workers: int, ray: str | None, replicas: int | None
) -> None:
    """Serve the REST API (/v1, docs at /docs) and the MCP endpoint (/mcp) over HTTP."""
    from chiezo.surfaces.rest import http_server
    from chiezo.surfaces.rest.worker_snapshots import shared_directory

    if replicas is not None and ray is None:
        raise click.UsageError("--replicas goes with --ray")
    if (
        ray is not None
        and ctx.get_parameter_source("workers") is click.core.ParameterSource.COMMANDLINE
    ):
        raise click.UsageError("--workers is for one machine; on a cluster give --replicas")
    settings = service_of(ctx).settings
    if not is_loopback(host):
        if settings.token:
            err.print(f"[yellow]listening on {host}: writes and /mcp need the bearer token[/]")
        else:
            err.print(
                f"[yellow]listening on {host} without CHIEZO_TOKEN: writes are disabled "
                "and /mcp offers read-only tools[/]"
            )
    if ray is not None:
        _serve_on_ray(settings, host, port, ray, replicas or 2)
        return
    # Worker processes rebuild the app from the environment: hand the settings over there.
    os.environ["CHIEZO_DATA"] = str(settings.data_dir)
    os.environ["CHIEZO_BIND_HOST"] = host
    os.environ["CHIEZO_SUPERVISOR_PID"] = str(os.getpid())  # workers stop when this process dies
    # citations of documents without a web address link to this server's pages
    os.environ.setdefault("CHIEZO_PUBLIC_URL", _own_address(host, port))
    # said once every worker answers (scripts wait for this line), not while the app is built
    shown = f"[{host}]" if ":" in host else host  # an IPv6 address, as a URL has it
    line = f"Chiezo on http://{shown}:{port}  (API docs /docs, MCP /mcp)"
    with (
        # one copy of each query model; a CLI command on this data asks this server instead
        model_host.hosting(settings.data_dir, _loopback_address(host, port)) as socket,
        shared_directory(workers),  # where each worker leaves its metrics for the others
    ):
        if socket is not None:
            os.environ[model_host.HOST_ENV] = str(socket)
        http_server.serve(
            "chiezo.surfaces.rest.app:app_from_env",
            host=host,
            port=port,
            workers=workers,
            on_ready=lambda: err.print(escape(line)),
        )


def _serve_on_ray(settings: Settings, host: str, port: int, address: str, replicas: int) -> None:
    from chiezo.cluster.serving import ServeOptions, serve_until_stopped

    options = ServeOptions(host=host, port=port, replicas=replicas, address=address)
    err.print(
        f"Chiezo on the Ray cluster, http://{host}:{port} on every node "
        f"({replicas} replicas; Ctrl-C takes the deployment down)"
    )
    serve_until_stopped(
        settings,
        options,
        os.environ.get("CHIEZO_PUBLIC_URL") or _own_address(host, port),
        say=lambda line: err.print(escape(line)),
    )


def _loopback_address(host: str, port: int) -> str | None:
    """Where a command on this machine reaches this server as a loopback client, or None when
    it listens on no loopback address (a command would then be a remote client)."""
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    if not is_loopback(host) or port == 0:
        return None
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


def _own_address(host: str, port: int) -> str:
    """The address this server is reached at: its host, or this machine's name when it
    listens on every interface."""
    import socket

    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    return f"http://{f'[{host}]' if ':' in host else host}:{port}"


PROFILE_OPTION = click.option(
    "--profile",
    type=click.Choice(sorted(PROFILES)),
    default=DEFAULT_PROFILE,
    show_default=True,
    help="The tool set: " + "; ".join(f"{p.name}: {p.about}" for p in PROFILES.values()) + ".",
)


@cli.group(invoke_without_command=True)
@PROFILE_OPTION
@click.pass_context
def mcp(ctx: click.Context, profile: str) -> None:
    """Run the MCP server over stdio (for desktop MCP clients); see `chiezo mcp config`."""
    ctx.obj["mcp_profile"] = profile
    if ctx.invoked_subcommand is None:
        from chiezo.core import here
        from chiezo.surfaces.mcp.server import build_mcp

        # one person's process: near=here is the CHIEZO_HERE it was started with
        with here.attached(os.environ.get(here.ENVIRONMENT) or None):
            build_mcp(service_of(ctx), profile=profile).run("stdio")


@mcp.command("config")
@click.option(
    "--client", type=click.Choice(sorted(MCP_CLIENTS)), default="claude-desktop", show_default=True
)
@click.option(
    "--http",
    "url",
    default=None,
    help="Register the HTTP endpoint (e.g. http://127.0.0.1:8080/mcp) instead of stdio.",
)
@PROFILE_OPTION
@click.pass_context
def mcp_config(ctx: click.Context, client: str, url: str | None, profile: str) -> None:
    """Print the snippet that registers Chiezo with an MCP client (`--profile compact` for a
    model of a small context: the same option works before or after `config`)."""
    from chiezo.surfaces.mcp.clients import snippet

    if profile == DEFAULT_PROFILE:
        profile = ctx.obj.get("mcp_profile", DEFAULT_PROFILE)
    data_dir = service_of(ctx).settings.data_dir.resolve()
    echo(snippet(client, data_dir=data_dir, url=url, profile=profile))


# -- notes ---------------------------------------------------------------------------------------


@cli.group()
def notes() -> None:
    """The writable notes source: remember, recall, update, forget."""


@notes.command("remember", help=BINDINGS["remember"].help)
@request_options(RememberRequest)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def notes_remember(ctx: click.Context, as_json: bool, **values: Any) -> None:
    _print_note(_noted("remember", RememberRequest, ctx, values), as_json)


@notes.command("recall", help=BINDINGS["recall"].help)
@request_options(RecallRequest)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def notes_recall(ctx: click.Context, as_json: bool, **values: Any) -> None:
    found = _noted("recall", RecallRequest, ctx, values)
    if as_json:
        emit_json(found)
    else:
        for note in found["notes"]:
            _print_note(note, False)
        out.print(f"[dim]{found['total']} note(s), mode {found['mode']}[/]")
    if not found["notes"]:
        sys.exit(EXIT_NOT_FOUND)


@notes.command("update", help=BINDINGS["update"].help)
@request_options(UpdateRequest)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def notes_update(ctx: click.Context, as_json: bool, **values: Any) -> None:
    _print_note(_noted("update", UpdateRequest, ctx, values), as_json)


@notes.command("forget", help=BINDINGS["forget"].help)
@request_options(ForgetRequest)
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
@handles_errors
def notes_forget(ctx: click.Context, as_json: bool, **values: Any) -> None:
    result = _noted("forget", ForgetRequest, ctx, values)
    if as_json:
        emit_json(result)
    else:
        out.print(f"deleted note {values['note_id']}")


def _noted(
    name: str, model: type[Request], ctx: click.Context, values: dict[str, Any]
) -> dict[str, Any]:
    """A notes operation run through its binding (ops/registry.py)."""
    return BINDINGS[name].handle(service_of(ctx), request_from(model, values))


def _print_note(note: dict[str, Any], as_json: bool) -> None:
    if as_json:
        emit_json(note)
        return
    tags = f"  [dim]#{' #'.join(note['tags'])}[/]" if note["tags"] else ""
    out.print(f"[bold]{note['id']}. {escape(note['title'])}[/]  [dim]{note['updated_at']}[/]{tags}")
    out.print(f"    {escape(note['text'])}")


def main() -> None:
    cli(prog_name="chiezo")


if __name__ == "__main__":
    main()
