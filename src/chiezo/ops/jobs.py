"""Background build jobs: rebuild a source from the input it was built from, or re-embed it,
with live progress and a log a client polls.

* what a rebuild runs is read back from the source's record (ops/rebuilding.py); the job itself
  runs in a process of its own (ops/job_process.py), watched from a thread of the server;
* ``JobProgress`` is a Progress (core/progress.py) that keeps the current phase and a capped log;
* ``JobRunner`` plans (what will happen, as facts a UI can phrase) and runs one job at a time,
  which can be cancelled (checked at its next progress update: ``Cancelled``);
* ``exclusive()``: the same one-at-a-time lock for ``chiezo rebuild``/``ingest``/``import`` from
  the command line, so a build there and a server job never run together.

A job that fails loses nothing: the builder switches a generation in only once it is complete
and validated, so the current generation keeps serving (docs/design.md §21).
"""

from __future__ import annotations

import builtins
import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from chiezo.core.config import Settings
from chiezo.core.errors import (
    BadQuery,
    ChiezoError,
    Conflict,
    InternalError,
    ModelUnavailable,
    NotFound,
)
from chiezo.core.progress import STEP_UNITS
from chiezo.ops import operating
from chiezo.ops.context import Context
from chiezo.ops.rebuilding import (
    NO_REBUILD,
    RebuildCall,
    fetching_again,
    rebuild_call,
    recorded_call,
    source_info,
)
from chiezo.store import generations
from chiezo.store.kinds import kind_named
from chiezo.store.source_info import SourceInfo

ACTIONS = ("rebuild", "embed")
SERVING_DURING = "the current generation keeps serving until the new one is complete"
NO_EMBED = "the notes source is not embedded (it changes with every write)"
MAX_LOG_LINES = 500
KEEP_JOBS = 50
SAVE_EVERY_S = 0.5  # how often a running job's record is refreshed on disk
STALE_S = 30.0  # a "running" record older than this was left by a process that is gone
LOCK_FILE = "jobs.lock"  # in the data directory: one build at a time, server or command line

log = logging.getLogger("chiezo.jobs")

# What a planned job runs: a rebuild's call with the model asked for (None: the one the
# source had); an embed's model, max_chunks and unit_chars.
RebuildWork = tuple[RebuildCall, str | None]
EmbedWork = tuple[str, int | None, int | None]


# -- progress -----------------------------------------------------------------------------------


class JobProgress:
    """A Progress that records, for pollers: the current phase ``{name, done, total, unit,
    elapsed_s, rate, eta_s}`` — elapsed time, rate (units/s) and ETA worked out when polled,
    so they move between the work's updates — and a log of phase starts, warnings and the
    outcome, each ``{t, level, text}`` (t: seconds since the start). The log keeps the newest
    ``max_lines``; line numbers count every line ever written, so ``lines(log_from)`` stays
    correct after old lines are dropped."""

    def __init__(self, max_lines: int = MAX_LOG_LINES) -> None:
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._lines: deque[dict[str, Any]] = deque(maxlen=max_lines)
        self._written = 0
        self._current: dict[str, Any] | None = None
        self._phase_started = self._started
        self.phases: list[str] = []
        self.warnings: list[str] = []

    def log(self, level: str, text: str) -> None:
        with self._lock:
            self._append(level, text)

    def _append(self, level: str, text: str) -> None:
        t = round(time.monotonic() - self._started, 3)
        self._lines.append({"t": t, "level": level, "text": text})
        self._written += 1

    # the Progress protocol

    def phase(self, name: str, total: int | None = None, unit: str = "docs") -> None:
        with self._lock:
            self._current = {"name": name, "done": 0, "total": total, "unit": unit}
            self._phase_started = time.monotonic()
            self.phases.append(name)
            counted = total is not None and unit not in STEP_UNITS  # "validating", not "(4 checks)"
            self._append("info", f"{name} ({total:,} {unit})" if counted else name)

    def advance(self, n: int = 1) -> None:
        with self._lock:
            if self._current is not None:
                self._current["done"] += n

    def retotal(self, total: int) -> None:
        with self._lock:
            if self._current is not None:
                self._current["total"] = total

    def warn(self, message: str) -> None:
        with self._lock:
            self.warnings.append(message)
            self._append("warning", message)

    def close(self) -> None:
        pass

    # what pollers read

    def snapshot(self, log_from: int = 0, *, with_log: bool = True) -> dict[str, Any]:
        with self._lock:
            dropped = self._written - len(self._lines)
            start, lines = log_window(list(self._lines), dropped, self._written, log_from)
            out: dict[str, Any] = {
                "phase": self._phase_now(),
                "log_from": start,
                "log_next": self._written,
                "log_dropped": dropped,
                "warnings": len(self.warnings),
            }
            if with_log:
                out["log"] = lines
            return out

    def _phase_now(self) -> dict[str, Any] | None:
        """The current phase as of now; a total the count has passed (an estimate) is shown
        as the count, so a poller never sees more done than there is."""
        if self._current is None:
            return None
        phase = dict(self._current)
        done, total = phase["done"], phase["total"]
        if total is not None:
            phase["total"] = total = max(total, done)
        elapsed = time.monotonic() - self._phase_started
        rate = done / elapsed if done and elapsed > 0 else None
        phase["elapsed_s"] = round(elapsed, 1)
        phase["rate"] = None if rate is None else round(rate, 2)
        phase["eta_s"] = None if rate is None or total is None else round((total - done) / rate, 1)
        return phase


def log_window(kept: list, dropped: int, written: int, log_from: int) -> tuple[int, list]:
    """(first line number returned, the lines from ``log_from`` on) of a log that has
    ``written`` lines in all, of which the first ``dropped`` are no longer kept."""
    start = min(max(log_from, dropped), written)
    return start, kept[start - dropped :]


# -- jobs ---------------------------------------------------------------------------------------


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class Job:
    """One rebuild or embed run. ``state``: running, then done, failed or cancelled."""

    def __init__(
        self, job_id: int, source: str, action: str, model: str | None, fetch: bool = False
    ) -> None:
        self.id = job_id
        self.source = source
        self.action = action
        self.model = model
        self.fetch = fetch  # a rebuild that downloads its input again
        self.state = "running"
        self.cancel_requested = threading.Event()
        self.started_at = _now()
        self.finished_at: str | None = None
        self.result: dict[str, Any] | None = None
        self.error: dict[str, Any] | None = None
        self.progress = JobProgress()
        self._started = time.monotonic()
        self._elapsed: float | None = None
        self._finished = threading.Event()

    @property
    def elapsed_s(self) -> float:
        if self._elapsed is not None:
            return self._elapsed
        return round(time.monotonic() - self._started, 3)

    def _end(self, state: str, error: dict[str, Any] | None = None) -> None:
        self.error = error
        self._elapsed = round(time.monotonic() - self._started, 3)
        self.finished_at = _now()
        self.state = state

    def wait(self, timeout: float | None = None) -> bool:
        """True once the job has finished (done, failed or cancelled)."""
        return self._finished.wait(timeout)

    def cancel(self) -> None:
        """Ask the job to stop: it does at its next progress update (``CancellableProgress``);
        the unfinished generation is removed and the current one keeps serving."""
        self.cancel_requested.set()

    def to_dict(self, log_from: int = 0, *, with_log: bool = True) -> dict[str, Any]:
        """The job as JSON: its log from line ``log_from`` on (``log_next`` is the number to
        pass next time, so a poller fetches only new lines)."""
        return {
            "id": self.id,
            "source": self.source,
            "action": self.action,
            "model": self.model,
            "fetch": self.fetch,
            "state": self.state,
            "cancel_requested": self.cancel_requested.is_set(),
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "elapsed_s": self.elapsed_s,
            **self.progress.snapshot(log_from, with_log=with_log),
            "result": self.result,
            "error": self.error,
        }


class SavedJob:
    """A job as another worker process saved it (``serve --workers N``: a poll may reach any
    worker). Reads like a Job; a "running" record nobody has refreshed for STALE_S seconds
    belongs to a process that is gone, and says so."""

    def __init__(self, data: dict[str, Any], age_s: float) -> None:
        self.id = data["id"]
        self.data = data
        if data["state"] == "running" and age_s > STALE_S:
            self.data = {
                **data,
                "state": "failed",
                "error": {
                    "error": "the server process running this job stopped before it finished",
                    "status": 500,
                    "hint": "the current generation keeps serving; start the job again",
                },
            }

    def to_dict(self, log_from: int = 0, *, with_log: bool = True) -> dict[str, Any]:
        out = dict(self.data)
        kept = out.pop("log", [])
        dropped = out.get("log_dropped", 0)
        start, lines = log_window(kept, dropped, out.get("log_next", len(kept)), log_from)
        out["log_from"] = start
        if with_log:
            out["log"] = lines
        return out


class _ProcessLock:
    """One build at a time across the server's worker processes (``serve --workers N``) and
    the command line (``exclusive``): an exclusive ``flock`` on a file in the data directory.
    The holder writes what it runs into the file, so a refusal can name it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self, holder: dict[str, Any] | None = None, *, block: bool = False) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if block else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        except BaseException:  # Ctrl-C while waiting
            os.close(fd)
            raise
        self._fd = fd
        self.describe(holder or {})
        return True

    def describe(self, holder: dict[str, Any]) -> None:
        """Say what the holder runs (in the file, for whoever is refused meanwhile)."""
        if self._fd is not None:
            record = {**holder, "pid": os.getpid(), "since": _now()}
            data = json.dumps(record, ensure_ascii=False).encode("utf-8")
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, data, 0)

    def holder(self) -> dict[str, Any] | None:
        """What the process holding the lock runs, as it wrote it; None when nobody holds it."""
        probe = _ProcessLock(self.path)
        if probe.acquire():
            probe.release()
            return None
        try:
            found = json.loads(self.path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            found = {}
        return found if isinstance(found, dict) else {}

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, 0)
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def holder_text(holder: dict[str, Any] | None) -> str:
    """``job 3 (rebuild kb) in the server (process 812)``, ```chiezo rebuild kb` (process
    900)``: who holds the lock, in a sentence."""
    holder = holder or {}
    what = holder.get("what") or "another build"
    pid = f" (process {holder['pid']})" if holder.get("pid") else ""
    return f"{what}{pid}"


@contextlib.contextmanager
def exclusive(
    settings: Settings,
    what: str,
    *,
    source: str | None = None,
    action: str | None = None,
    wait: bool = False,
    waiting: Callable[[str], None] | None = None,
) -> Iterator[None]:
    """Hold the data directory's jobs lock for a build from the command line: the server runs
    no job meanwhile, and the block does not start while a job (or another command's build)
    runs — Conflict naming it, or with ``wait`` a wait for it (``waiting(text)`` is told
    whom it waits for first)."""
    lock = _ProcessLock(settings.data_dir / LOCK_FILE)
    holder = {"what": what, "by": "cli", "source": source, "action": action}
    if not lock.acquire(holder):
        running = lock.holder()
        if not wait:
            raise Conflict(
                f"{holder_text(running)} is running; one build runs at a time",
                running=running,
                hint="wait for it to finish, or add --wait to start once it has",
            )
        if waiting is not None:
            waiting(holder_text(running))
        lock.acquire(holder, block=True)
    try:
        yield
    finally:
        lock.release()


class JobRunner:
    """Plans and runs rebuild and embed jobs in a daemon thread, one at a time; remembers the
    last ``keep`` jobs (in memory: a restart forgets them, the sources do not)."""

    def __init__(self, ctx: Context, *, keep: int = KEEP_JOBS) -> None:
        self.ctx = ctx
        self.keep = keep
        self._lock = threading.Lock()
        self._jobs: OrderedDict[int, Job] = OrderedDict()
        self._next_id = 1
        self._running: Job | None = None
        self._process_lock = _ProcessLock(ctx.settings.data_dir / LOCK_FILE)
        # every worker process reads the records here, whichever process runs the job
        self._dir = ctx.settings.data_dir / "jobs"

    # -- looking -------------------------------------------------------------------------------

    def get(self, job_id: int) -> Job | SavedJob:
        with self._lock:
            job: Job | SavedJob | None = self._jobs.get(job_id)
        if job is None:
            job = self._load(self._dir / f"{job_id}.json")
        if job is None:
            raise NotFound(
                f"there is no job {job_id}",
                hint=f"the last {self.keep} jobs are kept; /v1/jobs lists them",
            )
        return job

    def list(self) -> list[Job | SavedJob]:
        with self._lock:
            jobs: dict[int, Job | SavedJob] = dict(self._jobs)
        for path in self._record_paths()[: self.keep]:
            job_id = int(path.stem)
            if job_id not in jobs and (saved := self._load(path)) is not None:
                jobs[job_id] = saved
        return sorted(jobs.values(), key=lambda j: j.id, reverse=True)[: self.keep]

    # -- the records on disk -------------------------------------------------------------------

    def _record_paths(self) -> builtins.list[Path]:  # `list` is the method above
        """Job records, newest (highest id) first."""
        if not self._dir.is_dir():
            return []
        paths = [p for p in self._dir.glob("*.json") if p.stem.isdigit()]
        return sorted(paths, key=lambda p: int(p.stem), reverse=True)

    def _load(self, path: Path) -> SavedJob | None:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            age = time.time() - path.stat().st_mtime
        except (OSError, ValueError):
            return None
        return SavedJob(data, age)

    def _save(self, job: Job) -> None:
        self._dir.mkdir(parents=True, exist_ok=True)
        temporary = self._dir / f".{job.id}.{threading.get_ident()}.tmp"  # one per writer
        temporary.write_text(json.dumps(job.to_dict(), ensure_ascii=False), encoding="utf-8")
        os.replace(temporary, self._dir / f"{job.id}.json")

    def _keep_saved(self, job: Job) -> None:
        """Refresh the running job's record until it ends (then _run saves it once more), and
        pass on a cancellation asked of another worker process (its marker file)."""
        marker = self._cancel_marker(job.id)
        while not job.wait(SAVE_EVERY_S):
            if marker.exists():
                job.cancel()
            with contextlib.suppress(OSError):
                self._save(job)

    def _cancel_marker(self, job_id: int) -> Path:
        return self._dir / f"{job_id}.cancel"

    def _new_id(self) -> int:
        """Called holding the process lock, so no other worker allocates at the same time."""
        on_disk = self._record_paths()
        for old in on_disk[self.keep :]:
            with contextlib.suppress(OSError):
                old.unlink()
        latest = int(on_disk[0].stem) if on_disk else 0
        return max(latest, self._next_id - 1) + 1

    def running(self) -> Job | None:
        with self._lock:
            return self._running

    def cancel(self, job_id: int) -> Job | SavedJob:
        """Ask job ``job_id`` to stop (404 unknown, 409 when it has ended). A job of this
        process is told at once; one of another worker process through a marker file its
        process looks for twice a second. It stops at its next progress update."""
        job = self.get(job_id)
        state = job.state if isinstance(job, Job) else job.data["state"]
        if state != "running":
            raise Conflict(
                f"job {job_id} has already ended ({state}); there is nothing to cancel",
                job=job_id,
                state=state,
            )
        if isinstance(job, Job):
            job.cancel()
            return job
        self._dir.mkdir(parents=True, exist_ok=True)
        self._cancel_marker(job_id).touch()
        job.data = {**job.data, "cancel_requested": True}
        return job

    # -- planning ------------------------------------------------------------------------------

    def plan(
        self, source: str, action: str = "rebuild", model: str | None = None, fetch: bool = False
    ) -> dict:
        """What ``start`` would do, as facts: the input and whether it is there (or, with
        ``fetch``, where it is downloaded again from), the current generation, the model that
        embeds, and whether a job — or a build from the command line — is running. Requests
        that can never run are errors (unknown source 404; notes, unknown action or model, a
        fetch for a source that was not downloaded 400)."""
        plan, _, _ = self._prepare(source, action, model, fetch)
        running = self._running_anywhere()
        plan["running_job"] = running
        plan["ready"] = plan["problem"] is None and running is None
        return plan

    def _running_anywhere(self) -> dict[str, Any] | None:
        """The job running here, or what holds the jobs lock elsewhere (another worker's job,
        ``chiezo rebuild`` on the command line)."""
        running = self.running()
        if running is not None:
            return {"id": running.id, "source": running.source, "action": running.action}
        holder = self._process_lock.holder()
        if holder is None:
            return None
        return {
            "id": holder.get("job"),
            "source": holder.get("source"),
            "action": holder.get("action"),
            "by": holder.get("by"),
            "what": holder_text(holder),
        }

    def models(self) -> builtins.list[str]:
        """The embedding models a job may name: the built-in ones, those the sources already
        use (chosen by whoever ran ``chiezo embed`` on this machine) and CHIEZO_JOB_MODELS.
        A client never names a path: ``model=onnx:/etc`` once told whether a server folder
        exists, and would have loaded a model from anywhere on the disk."""
        from chiezo.store.embedders import BUILT_IN

        in_use = {
            info["vectors"]["model"] for info in operating.sources(self.ctx) if info.get("vectors")
        }
        return sorted(set(BUILT_IN) | in_use | set(self.ctx.settings.job_models))

    def _check_model(self, model: str) -> None:
        offered = self.models()
        if model not in offered:
            raise ModelUnavailable(
                f"{model!r} is not one of this server's embedding models",
                known_models=offered,
                hint="name one of known_models; an operator adds others with CHIEZO_JOB_MODELS",
            )

    def _prepare(
        self, source: str, action: str, model: str | None, fetch: bool = False
    ) -> tuple[dict[str, Any], RebuildWork | EmbedWork, BadQuery | None]:
        """(plan, what _run needs, the error that stops it or None)."""
        if action not in ACTIONS:
            raise BadQuery(f"action must be rebuild or embed, got {action!r}", actions=ACTIONS)
        info = source_info(self.ctx, source)
        if info.writable:
            raise BadQuery(NO_REBUILD if action == "rebuild" else NO_EMBED, source=source)
        if model is not None:
            self._check_model(model)
        current = generations.current_path(self.ctx.settings.corpus_dir / source)
        plan: dict[str, Any] = {
            "action": action,
            "source": source,
            "kind": info.kind,
            "status": info.status,
            "generation": info.generation,
            "built_at": info.built_at,
            "docs": info.docs,
            "serving_during": SERVING_DURING,
        }
        if action == "rebuild":
            return self._prepare_rebuild(plan, info, current, model, fetch)
        if fetch:
            raise BadQuery(
                "fetch is for a rebuild: an embed reads the source it has", source=source
            )
        return self._prepare_embed(plan, info, current, model)

    def _prepare_rebuild(
        self,
        plan: dict[str, Any],
        info: SourceInfo,
        current: Path | None,
        model: str | None,
        fetch: bool = False,
    ) -> tuple[dict[str, Any], RebuildWork, BadQuery | None]:
        from chiezo.ops.building import embedding_after_build

        as_built = recorded_call(info)
        call = fetching_again(info, as_built) if fetch else as_built
        recorded = info.input
        plan["input"] = {
            "path": str(as_built.inputs[0]),
            "paths": [str(p) for p in as_built.inputs],
            "exists": not as_built.missing,
            "bytes": recorded.get("bytes"),
            "files": recorded.get("files"),
            "options": call.recorded(),
        }
        plan["fetch"] = _fetch_plan(call.fetch, call.options) if fetch else None
        step = embedding_after_build(current, model)
        plan["embed_model"] = step[0] if step else None
        plan["problem"] = refusal = None
        if call.missing:
            try:
                rebuild_call(info, fetch=fetch)
            except BadQuery as exc:
                plan["problem"], refusal = _error(exc), exc
        return plan, (call, model), refusal

    def _prepare_embed(
        self, plan: dict[str, Any], info: SourceInfo, current: Path | None, model: str | None
    ) -> tuple[dict[str, Any], EmbedWork, None]:
        from chiezo.ops.building import embedding_after_build
        from chiezo.store.embed import choose_unit_chars

        vectors = info.vectors
        meta = self.ctx.library.get(plan["source"]).meta  # needs_rebuild: the library's 409
        if model is None and not vectors:
            raise BadQuery(
                f"{plan['source']!r} has no vectors yet: name the model to embed it with",
                known_models=self.models(),
                hint="e.g. model=use-m (fast) or e5-small (best for Japanese, slow)",
            )
        embedding = embedding_after_build(current, model)
        assert embedding is not None  # a model named, else the vectors' own (checked above)
        model_, max_chunks, unit_chars = embedding
        plan.update(
            chunks=info.chunks,
            model=model_,
            current_model=vectors["model"] if vectors else None,
            vectors=vectors,
            max_chunks=max_chunks,
            unit_chars=choose_unit_chars(unit_chars, meta, info.chunks or 0),
            problem=None,
        )
        return plan, (model_, max_chunks, unit_chars), None

    # -- running -------------------------------------------------------------------------------

    def start(self, source: str, action: str, model: str | None = None, fetch: bool = False) -> Job:
        """Start a job in a daemon thread and return it at once. 409 while another runs —
        here, in another worker process, or a build from the command line."""
        with self._lock:
            if self._running is not None:
                r = self._running
                raise Conflict(
                    f"job {r.id} ({r.action} {r.source}) is running; one job runs at a time",
                    running_job=r.id,
                    hint=f"wait for it: GET /v1/jobs/{r.id}",
                )
            plan, call, refusal = self._prepare(source, action, model, fetch)
            if refusal is not None:
                raise refusal
            if not self._process_lock.acquire({"by": "server", "source": source, "action": action}):
                holder = self._process_lock.holder()
                raise Conflict(
                    f"{holder_text(holder)} is running; one job runs at a time",
                    running=holder,
                    hint="wait for it to finish; it keeps the lock until it ends",
                )
            job = Job(
                self._new_id(),
                source,
                action,
                plan["embed_model"] if action == "rebuild" else plan["model"],
                fetch=fetch,
            )
            self._process_lock.describe(
                {
                    "what": f"job {job.id} ({action} {source})",
                    "by": "server",
                    "job": job.id,
                    "source": source,
                    "action": action,
                }
            )
            self._next_id = job.id + 1
            self._running = job
            self._jobs[job.id] = job
            while len(self._jobs) > self.keep:
                oldest = next(iter(self._jobs))
                if oldest == job.id:
                    break
                del self._jobs[oldest]
            self._save(job)
        threading.Thread(
            target=self._run, args=(job, call), name=f"chiezo-job-{job.id}", daemon=True
        ).start()
        threading.Thread(target=self._keep_saved, args=(job,), daemon=True).start()
        return job

    def _run(self, job: Job, call: RebuildWork | EmbedWork) -> None:
        """The job in a process of its own (ops/job_process.py), watched from this thread."""
        from chiezo.ops.job_process import JobProcess, Work

        progress = job.progress
        state, error = "failed", None
        try:
            progress.log("info", f"{job.action} {job.source} started")
            model, kind = None, None
            todo: RebuildCall | EmbedWork
            if len(call) == 2:  # a rebuild: (the RebuildCall, the model asked for or None)
                todo, model = call
                kind = kind_named(todo.kind)
            else:
                todo = call
            work = Work(
                self.ctx.settings, job.id, job.action, job.source, todo, model=model, kind=kind
            )
            outcome = JobProcess(work).watch(job)
            state, error = outcome.state, outcome.error
        except Exception as exc:  # noqa: BLE001 - a job reports, the server goes on
            error = _failure(job, exc)
        finally:
            if error is not None:
                _explain(job, state, error)
            progress.close()
            with self._lock:  # a poller that sees the end may start the next job at once
                job._end(state, error)
                with contextlib.suppress(OSError):
                    self._save(job)
                    self._cancel_marker(job.id).unlink(missing_ok=True)
                self._process_lock.release()
                self._running = None
            job._finished.set()  # after the record is saved: other workers see the end too


def _explain(job: Job, state: str, error: dict[str, Any]) -> None:
    """Say in the job's log how it ended, and what serves now."""
    progress = job.progress
    built = job.result is not None and not job.result.get("up_to_date")
    if built:  # rebuilt and switched in; the embed step failed or was cancelled
        step = "cancelled" if state == "cancelled" else "failed"
        error["error"] = f"built, but embedding {step}: {error['error']}"
        error["hint"] = (
            "the new generation serves, searchable by keyword; "
            "start an embed job to add its vectors"
        )
    progress.log("error" if state == "failed" else "warning", error["error"])
    if not built:
        progress.log("info", "nothing was switched in: the current generation keeps serving")


def _fetch_plan(record: dict[str, Any] | None, options: Any) -> dict[str, Any]:
    """What a rebuild with ``fetch`` downloads again, for the plan: from where, with which
    options, and what it was fetched as last time (a dump's date)."""
    record = record or {}
    again = record.get("options") or {}
    return {
        "from": again.get("mirror"),
        "input": bool(record.get("input")),
        "options": {k: v for k, v in again.items() if k != "mirror"},
        "last": record.get("date"),
    }


def _error(exc: ChiezoError) -> dict[str, Any]:
    """A failure as a job record or a plan states it: the one error shape, made plain JSON (the
    record is saved as JSON, and a job whose record cannot be saved would never end)."""
    return json.loads(json.dumps(exc.to_dict(), ensure_ascii=False, default=str))


def _failure(job: Job, exc: Exception) -> dict[str, Any]:
    """Why ``job`` failed; a bug is logged with its traceback and told with its message (the
    job's record is read by whoever may run jobs, not by every client)."""
    if isinstance(exc, ChiezoError):
        return _error(exc)
    log.exception("job %s (%s %s) failed", job.id, job.action, job.source)
    return _error(InternalError.wrapping(exc, detail=True))
