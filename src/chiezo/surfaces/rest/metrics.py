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
  (REST, web UI, MCP, the retrieval of answers): the service tells it of every search (``Context.search_observers``).
* ``chiezo_job_duration_seconds{source,action,state}``: rebuild and embed jobs finished since
  this process (with several workers: the first of them) started, read from the job records at
  scrape time (ops/jobs.py is not touched; a job finished by another worker is counted too: the
  records are shared); ``chiezo_jobs_running``.
* ``chiezo_source_generation_age_seconds{source}`` (now − ``built_at``), ``…_documents``,
  ``…_vectors``, ``…_needs_rebuild`` and ``…_warm_seconds`` (the last warm of a switched-in
  generation, store/library.py), read at scrape time.
* ``process_resident_memory_bytes``, ``chiezo_process_private_memory_bytes`` (Private_Clean +
  Private_Dirty of smaps_rollup: what no other process shares), ``process_cpu_seconds_total``,
  ``process_open_fds``, ``process_start_time_seconds``: each process from /proc at scrape time
  (worker_snapshots.py; left out where there is no /proc), and
  ``chiezo_process_start_time_seconds`` (when the app was built).

Written here rather than with ``prometheus_client``: two counters and two histograms need
about a hundred lines, and that library's multiprocess mode sums the workers into one series
(so a worker's own rate, memory or CPU cannot be told apart), has no process metrics in that
mode, and reads whatever files its directory holds.

**Several workers** (``serve --workers N``): every series a worker counts has a ``worker``
label (its process id), so that each stays monotonic and ``sum without (worker) (rate(...))``
adds them up, and each scrape answers for every live worker, whichever accepts it. Each worker
publishes a snapshot of its counts (``Sample``) in a directory private to the server, within
``PUBLISH_SECONDS`` of a change, and again, if it changed, when it answers a scrape; the worker
that answers reads the others' files (worker_snapshots.py says which it trusts;
``Sample.decode`` takes only the families, labels and numbers a worker writes) and their /proc.
A worker reports itself from the very snapshot it writes, so the next scrape, answered by
another, reads no less of it. A worker that died is left out at once (its replacement has a
pid of its own and starts from nothing: Prometheus sees a new series). The other workers'
counts are up to ``PUBLISH_SECONDS`` old. What every worker reads alike (the source gauges,
``chiezo_jobs_running``, the job durations) is said once, with no ``worker``; each worker warms
its own copy of a generation, so ``chiezo_source_warm_seconds`` has one per worker. With one
process (``--workers 1``, a test's app, a Ray replica: each replica is scraped on its own)
nothing is shared and no file written, and only a Ray replica's series have a ``worker``.

Who may scrape (``check_scrape``): on loopback with no token, anyone who can reach the port;
with ``CHIEZO_TOKEN`` set, only with ``Authorization: Bearer <token>``; beyond loopback with no
token, nobody (403). The counts tell when and how the library is used, which readers of the
library do not need to know; a scraper sends a token easily.
"""

from __future__ import annotations

import atexit
import bisect
import datetime as dt
import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chiezo.core.errors import Forbidden, Unauthorized
from chiezo.core.models import SearchResult
from chiezo.ops import operating
from chiezo.ops.context import Context
from chiezo.search.notices import Notice
from chiezo.surfaces.rest.openapi import errors as documented
from chiezo.surfaces.rest.security import Security
from chiezo.surfaces.rest.supervision import SUPERVISOR_ENV
from chiezo.surfaces.rest.worker_snapshots import Snapshots, process_stats

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
JOB_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 1800.0, 3600.0, 7200.0, 21600.0)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
FINISHED = ("done", "failed", "cancelled")
PUBLISH_SECONDS = 1.0  # how often a worker of several looks whether its snapshot changed
# the labels of what a worker shares, in their order (its ``worker`` label follows)
REQUEST_LABELS = ("route", "method", "status", "source")
LATENCY_LABELS = ("route", "method", "source")
FALLBACK_LABELS = ("source",)
JOB_LABELS = ("source", "action", "state")
MAX_SERIES = 50_000  # of one family in another worker's snapshot
MAX_LABEL = 1024  # characters of one label value there
Labels = tuple[tuple[str, str], ...]
T = TypeVar("T")
log = logging.getLogger("chiezo.api")


class Counter:
    def __init__(self, name: str, help_text: str) -> None:
        self.name, self.help = name, help_text
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, labels: Labels, amount: float = 1.0) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + amount

    def values(self) -> dict[Labels, float]:
        with self._lock:
            return dict(self._values)

    def lines(self) -> Iterator[str]:
        return _counter_lines(self.name, self.help, self.values())


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

    def series(self) -> dict[Labels, list[float]]:
        with self._lock:
            return {labels: list(counts) for labels, counts in self._series.items()}

    def lines(self) -> Iterator[str]:
        return _histogram_lines(self.name, self.help, self.buckets, self.series())


@dataclass
class Sample:
    """One worker's counts at one moment: this process's own, or another worker's read from
    the snapshot it shared (worker_snapshots.py)."""

    worker: str | None
    pid: int
    started: float
    requests: dict[Labels, float]
    latency: dict[Labels, list[float]]
    fallbacks: dict[Labels, float]
    warmed: dict[str, tuple[str, float]]  # source → (generation, seconds its warm took)
    jobs: dict[int, tuple[Labels, float]]  # job id → (labels, elapsed), shared ones only

    def labels(self) -> Labels:
        return (("worker", self.worker),) if self.worker else ()

    def encode(self) -> bytes:
        def bare(labels: Labels) -> list[str]:  # the worker is the file's own pid
            return [value for name, value in labels if name != "worker"]

        data = {
            "v": 1,
            "started": self.started,
            "requests": [[bare(labels), value] for labels, value in self.requests.items()],
            "latency": [[bare(labels), counts] for labels, counts in self.latency.items()],
            "fallbacks": [[bare(labels), value] for labels, value in self.fallbacks.items()],
            "warmed": {name: list(warm) for name, warm in self.warmed.items()},
            "jobs": {
                str(i): [*bare(labels), elapsed] for i, (labels, elapsed) in self.jobs.items()
            },
        }
        return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()

    @classmethod
    def decode(cls, pid: int, raw: bytes) -> Sample | None:
        """The snapshot of worker ``pid``, or None when ``raw`` is not one. Every label and
        number is checked, and the label names and the ``worker`` label are not read from it:
        a planted file can add no family, label or line of its own."""
        own = (("worker", str(pid)),)
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("v") != 1:
                return None
            return cls(
                worker=str(pid),
                pid=pid,
                started=_amount(data["started"]),
                requests={
                    _label_values(k, REQUEST_LABELS) + own: _amount(v)
                    for k, v in _entries(data["requests"])
                },
                latency={
                    _label_values(k, LATENCY_LABELS) + own: _counts(v)
                    for k, v in _entries(data["latency"])
                },
                fallbacks={
                    _label_values(k, FALLBACK_LABELS) + own: _amount(v)
                    for k, v in _entries(data["fallbacks"])
                },
                warmed={_text(name): _warm(warm) for name, warm in _entries(data["warmed"])},
                jobs=dict(_job(k, v) for k, v in _entries(data["jobs"])),
            )
        except (KeyError, TypeError, ValueError, OverflowError, RecursionError):
            return None


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
            "Rebuild and embed jobs finished since this server started",
            JOB_BUCKETS,
        )
        self._jobs_counted: dict[int, tuple[Labels, float]] = {}
        self._jobs_lock = threading.Lock()
        self.snapshots: Snapshots | None = None  # shared with the other workers (``share``)
        self._warmed: Callable[[], dict[str, dict[str, Any]]] = dict
        self._published = b""
        self._publish_lock = threading.Lock()

    def _with_worker(self, *labels: tuple[str, str]) -> Labels:
        return (*labels, ("worker", self.worker)) if self.worker else labels

    def _server_wide(self, *labels: tuple[str, str]) -> Labels:
        """The labels of what every worker reads alike (the library, the job records): with no
        worker where each scrape answers for all of them, so the series stays one."""
        return labels if self.snapshots else self._with_worker(*labels)

    def share(self, warmed: Callable[[], dict[str, dict[str, Any]]]) -> None:
        """In a worker of ``serve --workers N`` whose supervisor made the shared directory:
        publish this worker's counts for the others (within ``PUBLISH_SECONDS`` of a change)
        and answer each scrape for all of them. ``warmed``: the library's warm records."""
        self._warmed = warmed
        if self.worker is None or self.worker != worker_label():
            return
        self.snapshots = Snapshots.from_env()
        if self.snapshots is not None:
            atexit.register(self.snapshots.remove)
            threading.Thread(
                target=self._publish_every_second,
                args=(self.snapshots,),
                name="chiezo-metrics-share",
                daemon=True,
            ).start()

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

    # -- shared with the other workers -------------------------------------------------------

    def _sample(self, warmed: dict[str, dict[str, Any]]) -> Sample:
        with self._jobs_lock:
            jobs = dict(self._jobs_counted) if self.snapshots else {}
        return Sample(
            worker=self.worker,
            pid=os.getpid(),
            started=self.started,
            requests=self.requests.values(),
            latency=self.latency.series(),
            fallbacks=self.fallbacks.values(),
            warmed={
                name: (str(warm["generation"]), float(warm["seconds"]))
                for name, warm in dict(warmed).items()
                if "seconds" in warm
            },
            jobs=jobs,
        )

    def _publish(self, snapshots: Snapshots, warmed: dict[str, dict[str, Any]]) -> Sample:
        """This worker's sample, written for the others when it changed (or its file went).
        Taken and written under one lock, and what a scrape answered here reports: the others
        never read less of this worker than it last reported itself (each series monotonic)."""
        with self._publish_lock:
            sample = self._sample(warmed)
            data = sample.encode()
            if (data != self._published or snapshots.missing()) and snapshots.write(data):
                self._published = data
            return sample

    def _publish_every_second(self, snapshots: Snapshots) -> None:
        while True:
            try:
                self._publish(snapshots, self._warmed())
            except Exception:  # a bug here must not stop the sharing for good
                log.exception("sharing this worker's metrics failed")
            time.sleep(PUBLISH_SECONDS)

    # -- read at scrape time -----------------------------------------------------------------

    def exposition(self, service: Context, jobs: Iterable[dict[str, Any]]) -> str:
        jobs = list(jobs)
        warmed = service.library.warmed
        if self.snapshots is None:
            self._observe_jobs(jobs)
            samples = [self._sample(warmed)]
        else:
            others = [
                sample
                for pid, raw in self.snapshots.others()
                if (sample := Sample.decode(pid, raw)) is not None
            ]
            self._adopt_jobs(others)
            self._observe_jobs(jobs)
            samples = [self._publish(self.snapshots, warmed), *others]
        lines = [
            *_gauge_lines(
                "chiezo_process_start_time_seconds",
                "When this process started",
                [(s.labels(), round(s.started, 3)) for s in samples],
            ),
            *_process_lines(samples),
            *_counter_lines(
                self.requests.name, self.requests.help, _merged(s.requests for s in samples)
            ),
            *_histogram_lines(
                self.latency.name,
                self.latency.help,
                self.latency.buckets,
                _merged(s.latency for s in samples),
            ),
            *_counter_lines(
                self.fallbacks.name, self.fallbacks.help, _merged(s.fallbacks for s in samples)
            ),
            *self.jobs.lines(),
            *self._running_jobs(jobs),
            *self._sources(service, samples),
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
                    or job["id"] in self._jobs_counted
                ):
                    continue
                if finished < int(self.started):  # whole seconds: finished_at has no fraction
                    continue
                labels = self._server_wide(
                    ("source", str(job.get("source", ""))),
                    ("action", str(job.get("action", ""))),
                    ("state", str(job["state"])),
                )
                self._count_job(job["id"], labels, float(job.get("elapsed_s") or 0.0))

    def _adopt_jobs(self, others: list[Sample]) -> None:
        """The jobs the other workers counted (a worker started later than them included): so
        whichever worker answers counts every job since the first of them started, and the
        histogram does not go back when the next scrape reaches another worker."""
        with self._jobs_lock:
            for sample in others:
                for job_id, (labels, elapsed) in sample.jobs.items():
                    if job_id not in self._jobs_counted:
                        self._count_job(job_id, labels, elapsed)

    def _count_job(self, job_id: int, labels: Labels, elapsed: float) -> None:
        self._jobs_counted[job_id] = (labels, elapsed)
        self.jobs.observe(labels, elapsed)

    def _running_jobs(self, jobs: Iterable[dict[str, Any]]) -> list[str]:
        running = sum(1 for job in jobs if job.get("state") == "running")
        return [
            *_header("chiezo_jobs_running", "Jobs running (any worker)", "gauge"),
            f"chiezo_jobs_running{_labels(self._server_wide())} {running}",
        ]

    def _sources(self, service: Context, samples: list[Sample]) -> list[str]:
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
        for info in operating.sources(service):
            labels = _labels(self._server_wide(("source", info["name"])))

            def add(family: str, value: float, labels: str = labels) -> None:
                families[family][1].append(f"{family}{labels} {_number(value)}")

            built = _timestamp(info.get("built_at"))
            if built is not None:
                add("chiezo_source_generation_age_seconds", round(now - built, 3))
            add("chiezo_source_documents", info.get("docs") or 0)
            add("chiezo_source_vectors", (info.get("vectors") or {}).get("count", 0))
            add("chiezo_source_needs_rebuild", 0 if info.get("status") == "ok" else 1)
            for sample in samples:  # each worker warms in its own process
                warm = sample.warmed.get(info["name"])
                if warm and warm[0] == info.get("generation"):
                    each = _labels((("source", info["name"]), *sample.labels()))
                    add("chiezo_source_warm_seconds", warm[1], each)
        out: list[str] = []
        for family, (help_text, samples_of) in families.items():
            out += [*_header(family, help_text, "gauge"), *samples_of]
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
        self,
        app: ASGIApp,
        metrics: Metrics,
        is_source: Callable[[str], bool],
        routes: Callable[[], list],
    ) -> None:
        self.app, self.metrics, self.is_source = app, metrics, is_source
        self._routes = routes
        self._mounted: dict[int, str] | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def sending(message: Message) -> None:
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

    def _template(self, scope: Scope) -> str:
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


def _counter_lines(name: str, help_text: str, values: dict[Labels, float]) -> Iterator[str]:
    yield from _header(name, help_text, "counter")
    for labels, value in sorted(values.items()):
        yield f"{name}{_labels(labels)} {_number(value)}"


def _histogram_lines(
    name: str, help_text: str, buckets: tuple[float, ...], series: dict[Labels, list[float]]
) -> Iterator[str]:
    yield from _header(name, help_text, "histogram")
    bounds: tuple[float | str, ...] = (*buckets, "+Inf")
    for labels, counts in sorted(series.items()):
        running = 0.0
        for bound, count in zip(bounds, counts[:-1], strict=True):
            running += count
            le = bound if isinstance(bound, str) else _number(bound)
            yield f"{name}_bucket{_labels((*labels, ('le', le)))} {_number(running)}"
        yield f"{name}_sum{_labels(labels)} {_number(counts[-1])}"
        yield f"{name}_count{_labels(labels)} {_number(running)}"


def _gauge_lines(
    name: str, help_text: str, values: list[tuple[Labels, float]], kind: str = "gauge"
) -> list[str]:
    """A family of one value per worker; nothing at all when there is none."""
    if not values:
        return []
    return [
        *_header(name, help_text, kind),
        *(f"{name}{_labels(labels)} {_number(value)}" for labels, value in values),
    ]


def _process_lines(samples: list[Sample]) -> list[str]:
    """Each worker's memory, CPU time and open files, from /proc at scrape time (none
    without /proc)."""
    stats = [(s.labels(), found) for s in samples if (found := process_stats(s.pid)) is not None]
    private = [(labels, st.private_bytes) for labels, st in stats if st.private_bytes is not None]
    return [
        *_gauge_lines(
            "process_resident_memory_bytes",
            "Resident memory of the process, shared pages included",
            [(labels, st.resident_bytes) for labels, st in stats],
        ),
        *_gauge_lines(
            "chiezo_process_private_memory_bytes",
            "Memory of the process that no other process shares (Private_Clean + Private_Dirty)",
            [(labels, float(size)) for labels, size in private],
        ),
        *_gauge_lines(
            "process_cpu_seconds_total",
            "CPU time of the process, user and system",
            [(labels, round(st.cpu_seconds, 2)) for labels, st in stats],
            "counter",
        ),
        *_gauge_lines(
            "process_open_fds",
            "Open file descriptors of the process",
            [(labels, st.open_fds) for labels, st in stats],
        ),
        *_gauge_lines(
            "process_start_time_seconds",
            "When the process started (Unix seconds)",
            [(labels, round(st.start_time, 2)) for labels, st in stats],
        ),
    ]


def _merged(parts: Iterable[dict[Labels, T]]) -> dict[Labels, T]:
    """The series of every worker in one family (each has its own ``worker`` label)."""
    merged: dict[Labels, T] = {}
    for part in parts:
        merged.update(part)
    return merged


# -- what another worker's snapshot may hold -----------------------------------------------------


def _entries(raw: Any) -> list[Any]:
    """The pairs of a list of pairs, or of an object."""
    items = list(raw.items()) if isinstance(raw, dict) else raw
    if not isinstance(items, list) or len(items) > MAX_SERIES:
        raise ValueError("not a list of series")
    if not all(isinstance(item, list | tuple) and len(item) == 2 for item in items):
        raise ValueError("not pairs")
    return items


def _text(raw: Any) -> str:
    if not isinstance(raw, str) or len(raw) > MAX_LABEL or not raw.isprintable():
        raise ValueError("not a label value")
    return raw


def _label_values(raw: Any, names: tuple[str, ...]) -> Labels:
    if not isinstance(raw, list) or len(raw) != len(names):
        raise ValueError("not the labels of the family")
    return tuple(zip(names, map(_text, raw), strict=True))


def _amount(raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        raise ValueError("not a number")
    value = float(raw)
    if not math.isfinite(value) or value < 0:
        raise ValueError("not a count")
    return value


def _counts(raw: Any) -> list[float]:
    if not isinstance(raw, list) or len(raw) != len(HTTP_BUCKETS) + 2:
        raise ValueError("not a histogram")
    return [_amount(count) for count in raw]


def _warm(raw: Any) -> tuple[str, float]:
    if not isinstance(raw, list) or len(raw) != 2:
        raise ValueError("not a warm")
    return _text(raw[0]), _amount(raw[1])


def _job(key: Any, raw: Any) -> tuple[int, tuple[Labels, float]]:
    if not isinstance(key, str) or not key.isdigit() or len(key) > 18:
        raise ValueError("not a job id")
    if not isinstance(raw, list) or len(raw) != len(JOB_LABELS) + 1 or raw[2] not in FINISHED:
        raise ValueError("not a finished job")
    return int(key), (_label_values(raw[:-1], JOB_LABELS), _amount(raw[-1]))


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


def install(app: FastAPI, service: Context, metrics: Metrics, security: Security) -> None:
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

    metrics.share(lambda: service.library.warmed)
    app.add_middleware(
        RequestMetrics,
        metrics=metrics,
        is_source=service.library.is_open,
        routes=lambda: app.routes,
    )
