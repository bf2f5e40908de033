"""``GET /metrics``: what the server did, in the Prometheus text format (version 0.0.4).

* ``chiezo_http_requests_total{route,method,status,source}`` and
  ``chiezo_http_request_duration_seconds{route,method,source}`` (a histogram, to the end of
  the response — a streamed answer included): ``route`` is the route's template
  (``/v1/{source}/search``), never the raw path, so a client cannot make new series by asking
  for new paths; ``source`` is the path's source only when it is a source this process has
  opened (an unknown name is a 404 and counts with ``source=""``). 4xx and 5xx are the
  ``status`` label: ``sum(rate(chiezo_http_requests_total{status=~"5.."}[5m]))``.
* ``chiezo_search_semantic_fallbacks_total{source}``: searches whose meaning side ran out of
  its time and answered by keyword only (``retrieval`` "keyword-fallback"), on every surface
  (REST, web UI, MCP, the retrieval of answers): the service tells it of every search (``Service.search_observers``).
* ``chiezo_job_duration_seconds{source,action,state}``: rebuild and embed jobs finished since
  this process started, read from the job records at scrape time (ops/jobs.py is not touched; a
  job finished by another worker is counted too: the records are shared); ``chiezo_jobs_running``.
* ``chiezo_source_generation_age_seconds{source}`` (now − ``built_at``), ``…_documents``,
  ``…_vectors``, ``…_needs_rebuild`` and ``…_warm_seconds`` (the last warm of a switched-in
  generation, store/library.py), read at scrape time.

Written here rather than with ``prometheus_client``: two counters and two histograms need
about a hundred lines, and that library's one advantage, adding up worker processes, needs its
directory set up by the process that starts them. With ``serve --workers N`` each scrape is
answered by one worker, about itself: every series then has a ``worker`` label (the process
id) so that each stays monotonic and ``sum by (route) (rate(...))`` adds the workers up.

Who may scrape (``check_scrape``): on loopback with no token, anyone who can reach the port;
with ``CHIEZO_TOKEN`` set, only with ``Authorization: Bearer <token>``; beyond loopback with no
token, nobody (403). The counts tell when and how the library is used, which readers of the
library do not need to know; a scraper sends a token easily.
"""

from __future__ import annotations

import bisect
import datetime as dt
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from fastapi import Request
from fastapi.responses import PlainTextResponse

from chiezo.core.errors import Forbidden, Unauthorized
from chiezo.core.models import SearchResult
from chiezo.ops.service import Service
from chiezo.search.notices import Notice
from chiezo.surfaces.rest.openapi import errors as documented
from chiezo.surfaces.rest.security import Security
from chiezo.surfaces.rest.supervision import SUPERVISOR_ENV

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
JOB_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
FINISHED = ("done", "failed", "cancelled")
Labels = tuple[tuple[str, str], ...]


class Counter:
    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def lines(self) -> Iterator[str]:
        yield from _header(self.name, self.help, "counter")
        with self._lock:
            values = sorted(self._values.items())
        for labels, value in values:
            yield f"{self.name}{_labels(labels)} {_number(value)}"


class Histogram:
    def __init__(self, name: str, help_text: str, buckets: tuple[float, ...]) -> None:
        self.name, self.help, self.buckets = name, help_text, buckets
        self._series: dict[Labels, list[float]] = {}  # counts per bucket (+Inf last), then sum
        self._lock = threading.Lock()

    def observe(self, labels: Labels, value: float) -> None:
        with self._lock:
            series = self._series.setdefault(labels, [0.0] * (len(self.buckets) + 2))
            series[bisect.bisect_left(self.buckets, value)] += 1  # le is inclusive
            series[-1] += value

    def lines(self) -> Iterator[str]:
        yield from _header(self.name, self.help, "histogram")
        with self._lock:
            series = sorted((labels, list(counts)) for labels, counts in self._series.items())
        bounds: tuple[float | str, ...] = (*self.buckets, "+Inf")
        for labels, counts in series:
            running = 0.0
            for bound, count in zip(bounds, counts[:-1], strict=True):
                running += count
                le = bound if isinstance(bound, str) else _number(bound)
                yield f"{self.name}_bucket{_labels((*labels, ('le', le)))} {_number(running)}"
            yield f"{self.name}_sum{_labels(labels)} {_number(counts[-1])}"
            yield f"{self.name}_count{_labels(labels)} {_number(running)}"


class Metrics:
    """The counters of one server process and what is read at scrape time."""

    def __init__(self, worker: str | None = None) -> None:
        self.worker = worker  # the process id under ``serve --workers N``, a Ray replica's host:pid
        self.started = time.time()
        self.requests = Counter(
            "chiezo_http_requests_total",
            "HTTP requests answered, by route template, method, status and source",
        )
        self.latency = Histogram(
            "chiezo_http_request_duration_seconds",
            "Time from the request to the end of its response",
            HTTP_BUCKETS,
        )
        self.fallbacks = Counter(
            "chiezo_search_semantic_fallbacks_total",
            "Searches whose meaning side ran out of time and answered by keyword only",
        )
        self.jobs = Histogram(
            "chiezo_job_duration_seconds",
            "Rebuild and embed jobs finished since this process started",
            JOB_BUCKETS,
        )
        self._jobs_seen: set[int] = set()
        self._jobs_lock = threading.Lock()

    def _with_worker(self, *labels: tuple[str, str]) -> Labels:
        return (*labels, ("worker", self.worker)) if self.worker else labels

    # -- recorded as it happens --------------------------------------------------------------

    def request(self, route: str, method: str, status: int, source: str, seconds: float) -> None:
        method = method if method in METHODS else "other"
        self.requests.inc(
            self._with_worker(
                ("route", route), ("method", method), ("status", str(status)), ("source", source)
            )
        )
        self.latency.observe(
            self._with_worker(("route", route), ("method", method), ("source", source)), seconds
        )

    def searched(self, result: SearchResult) -> None:
        """Count the sources whose meaning side fell back to keyword in ``result`` (one source,
        or several in a search across sources: its notice names them)."""
        for name in fallback_sources(result):
            self.fallbacks.inc(self._with_worker(("source", name)))

    # -- read at scrape time -----------------------------------------------------------------

    def exposition(self, service: Service, jobs: Iterable[dict[str, Any]]) -> str:
        self._observe_jobs(jobs)
        lines = [
            *_header("chiezo_process_start_time_seconds", "When this process started", "gauge"),
            f"chiezo_process_start_time_seconds{_labels(self._with_worker())} "
            f"{_number(round(self.started, 3))}",
            *self.requests.lines(),
            *self.latency.lines(),
            *self.fallbacks.lines(),
            *self.jobs.lines(),
            *self._running_jobs(jobs),
            *self._sources(service),
        ]
        return "\n".join(lines) + "\n"

    def _observe_jobs(self, jobs: Iterable[dict[str, Any]]) -> None:
        """Each job that finished after this process started, once (a restart does not count
        the kept records again)."""
        with self._jobs_lock:
            for job in jobs:
                finished = _timestamp(job.get("finished_at"))
                if (
                    job.get("state") not in FINISHED
                    or finished is None
                    or job["id"] in self._jobs_seen
                ):
                    continue
                if finished < int(self.started):  # whole seconds: finished_at has no fraction
                    continue
                self._jobs_seen.add(job["id"])
                labels = self._with_worker(
                    ("source", str(job.get("source", ""))),
                    ("action", str(job.get("action", ""))),
                    ("state", str(job["state"])),
                )
                self.jobs.observe(labels, float(job.get("elapsed_s") or 0.0))

    def _running_jobs(self, jobs: Iterable[dict[str, Any]]) -> list[str]:
        running = sum(1 for job in jobs if job.get("state") == "running")
        return [
            *_header("chiezo_jobs_running", "Jobs running (any worker)", "gauge"),
            f"chiezo_jobs_running{_labels(self._with_worker())} {running}",
        ]

    def _sources(self, service: Service) -> list[str]:
        now = time.time()
        families: dict[str, tuple[str, list[str]]] = {
            "chiezo_source_generation_age_seconds": (
                "Seconds since the current generation was built (notes: created)",
                [],
            ),
            "chiezo_source_documents": ("Documents in the current generation", []),
            "chiezo_source_vectors": ("Vectors of the current generation (0: none)", []),
            "chiezo_source_needs_rebuild": (
                "1 when the source does not open with this version and needs a rebuild",
                [],
            ),
            "chiezo_source_warm_seconds": (
                "Seconds the last switched-in generation took to warm in the background",
                [],
            ),
        }
        warmed = service.library.warmed
        for info in service.sources():
            labels = _labels(self._with_worker(("source", info["name"])))

            def add(family: str, value: float, labels: str = labels) -> None:
                families[family][1].append(f"{family}{labels} {_number(value)}")

            built = _timestamp(info.get("built_at"))
            if built is not None:
                add("chiezo_source_generation_age_seconds", round(now - built, 3))
            add("chiezo_source_documents", info.get("docs") or 0)
            add("chiezo_source_vectors", (info.get("vectors") or {}).get("count", 0))
            add("chiezo_source_needs_rebuild", 0 if info.get("status") == "ok" else 1)
            warm = warmed.get(info["name"])
            if warm and "seconds" in warm and warm["generation"] == info.get("generation"):
                add("chiezo_source_warm_seconds", warm["seconds"])
        out: list[str] = []
        for family, (help_text, samples) in families.items():
            out += [*_header(family, help_text, "gauge"), *samples]
        return out


def fallback_sources(result: SearchResult) -> list[str]:
    """The sources of ``result`` whose meaning side ran out of time: the ``semantic_timeout``
    notice names them in a search across sources; one source's own notice names none."""
    names: list[str] = []
    for note in result.notes:
        if isinstance(note, Notice) and note.code == "semantic_timeout":
            names += note.params.get("sources") or result.sources
    return sorted(set(names))


class RequestMetrics:
    """ASGI middleware, outermost: every HTTP request with its route template, status, source
    and time to the end of the response (refusals by the inner guards included)."""

    def __init__(
        self, app, metrics: Metrics, is_source: Callable[[str], bool], routes: Callable[[], list]
    ) -> None:
        self.app, self.metrics, self.is_source = app, metrics, is_source
        self._routes = routes
        self._mounted: dict[int, str] | None = None

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def sending(message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = self._template(scope)
            name = (scope.get("path_params") or {}).get("source")
            source = name if isinstance(name, str) and self.is_source(name) else ""
            self.metrics.request(
                route, scope.get("method", ""), status, source, time.perf_counter() - started
            )

    def _template(self, scope) -> str:
        """The template of the route that answered: FastAPI names its own routes in the scope;
        a mount (``/static``) or a plain route (``/mcp``) is known by the endpoint it set."""
        path = getattr(scope.get("route"), "path", None)
        if path:
            return path
        if self._mounted is None:  # every route exists by the first request
            self._mounted = {
                id(getattr(r, "endpoint", None) or getattr(r, "app", None)): r.path
                for r in self._routes()
                if getattr(r, "path", None)
            }
        return self._mounted.get(id(scope.get("endpoint")), "unrouted")


def check_scrape(security: Security, request: Request) -> None:
    """Who may read /metrics (see the module's last paragraph)."""
    if security.token_required:
        if not security.authorized(request.headers.get("authorization")):
            raise Unauthorized(
                "/metrics needs Authorization: Bearer <CHIEZO_TOKEN>",
                hint="configure the scraper with the token",
            )
        return
    if not security.loopback:
        raise Forbidden(
            "/metrics is off beyond loopback without a token",
            hint="set CHIEZO_TOKEN and scrape with Authorization: Bearer <token>",
        )


def worker_label() -> str | None:
    """The process id when this process is one of ``serve --workers N`` (started by the CLI's
    supervisor, which is not this process), else None."""
    supervisor = os.environ.get(SUPERVISOR_ENV, "")
    if supervisor.isdigit() and int(supervisor) == os.getppid() != os.getpid():
        return str(os.getpid())
    return None


def _header(name: str, help_text: str, kind: str) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    inner = ",".join(f'{key}="{_escaped(value)}"' for key, value in labels)
    return "{" + inner + "}"


def _escaped(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _timestamp(iso: str | None) -> float | None:
    """``2026-11-30T18:35:12Z`` (and other ISO 8601 forms with a zone) → Unix seconds."""
    if not iso:
        return None
    try:
        when = dt.datetime.fromisoformat(iso)
    except ValueError:
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.timestamp()


def install(app, service: Service, metrics: Metrics, security: Security) -> None:
    """``GET /metrics``, and the middleware that counts requests (added last: outermost)."""
    responses = documented(401, 403)
    responses[401]["description"] = "/metrics without the bearer token CHIEZO_TOKEN requires"
    responses[403]["description"] = "beyond loopback with no CHIEZO_TOKEN set: /metrics is off"

    @app.get("/metrics", tags=["meta"], response_class=PlainTextResponse, responses=responses)
    def scrape(request: Request) -> PlainTextResponse:
        """Counters, histograms and gauges in the Prometheus text format: requests by route
        template, status and source, their latency, semantic fallbacks, job durations and
        each source's generation age. Open on loopback; needs the token when one is set, and
        is refused beyond loopback without one."""
        check_scrape(security, request)
        jobs = [job.to_dict(with_log=False) for job in request.app.state.jobs.list()]
        return PlainTextResponse(metrics.exposition(service, jobs), media_type=CONTENT_TYPE)

    app.add_middleware(
        RequestMetrics,
        metrics=metrics,
        is_source=service.library.is_open,
        routes=lambda: app.routes,
    )
