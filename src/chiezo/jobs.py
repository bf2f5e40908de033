"""Background build jobs: rebuild a source from the input it was built from, or re-embed it, in
a thread of the server process, with live progress and a log a client polls.

* ``rebuild_call(info)`` turns a source's recorded kind and input identity back into the ingest
  call that built it (the same options, so a rebuild is the same build on newer input);
* ``JobProgress`` is a Progress (progress.py) that keeps the current phase and a capped log;
* ``JobRunner`` plans (what will happen, as facts a UI can phrase) and runs one job at a time.

A job that fails loses nothing: the builder switches a generation in only once it is complete
and validated, so the current generation keeps serving (docs/design.md §21).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import os
import threading
import time
from collections import OrderedDict, deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import generations
from .build import BuildOptions
from .errors import (
    BadQuery,
    ChiezoError,
    Conflict,
    InternalError,
    ModelUnavailable,
    NotFound,
    Operation,
)
from .source_info import SourceInfo
from .sources.kinds import kind_named, recorded_options

ACTIONS = ("rebuild", "embed")
SERVING_DURING = "the current generation keeps serving until the new one is complete"
NO_REBUILD = "notes is written in place; it has no rebuild"
NO_EMBED = "the notes source is not embedded (it changes with every write)"
MAX_LOG_LINES = 500
KEEP_JOBS = 50
SAVE_EVERY_S = 0.5  # how often a running job's record is refreshed on disk
STALE_S = 30.0  # a "running" record older than this was left by a process that is gone

log = logging.getLogger("chiezo.jobs")


# -- what a rebuild runs ------------------------------------------------------------------------


def source_info(service, name: str) -> SourceInfo:
    """What is known of ``name``, also when it needs a rebuild (``Library.info``)."""
    return service.library.info(name)


@dataclass
class RebuildCall:
    """``Service.ingest(kind, inputs, name, options=, build=)`` that rebuilds a source the way
    it was built, read back from what its build recorded."""

    kind: str
    inputs: list[Path]
    options: Any  # the kind's Options
    build: BuildOptions
    missing: list[str]  # recorded inputs that are no longer there

    def recorded(self) -> dict[str, Any]:
        """The options as the plan shows them (JSON), with the document language."""
        language = {"language": self.build.language} if self.build.language else {}
        return {**recorded_options(self.options), **language}


def rebuild_call(info: SourceInfo) -> RebuildCall:
    """How to rebuild the source described by ``info``. BadQuery (400) for a writable source
    (notes) and for an input that is no longer there."""
    call = _rebuild_parts(info)
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


def rebuild_call_for(service, name: str) -> RebuildCall:
    """``rebuild_call`` of the source called ``name``."""
    return rebuild_call(source_info(service, name))


def _rebuild_parts(info: SourceInfo) -> RebuildCall:
    if info.writable:
        raise BadQuery(NO_REBUILD, source=info.name)
    try:
        kind = kind_named(info.kind)
    except BadQuery as exc:
        raise BadQuery(f"{info.name!r} is of kind {info.kind!r}, which cannot be rebuilt here",
                       source=info.name, known_kinds=exc.extras.get("known_kinds")) from exc  # fmt: skip
    inputs = kind.inputs_from_record(info.input)
    if not inputs:
        raise BadQuery(
            f"{info.name!r} has no recorded input path",
            source=info.name,
            hint="build it anew: {see}",
            see=Operation("ingest", info.name, kind=kind.name),
        )
    options = kind.options_from_record(info.input)
    build = BuildOptions(language=info.language) if "language" in kind.build_flags else BuildOptions()
    needed = inputs + kind.extra_inputs(options)
    missing = [str(p) for p in needed if not p.exists()]
    return RebuildCall(kind.name, inputs, options, build, missing)


# -- progress -----------------------------------------------------------------------------------


class JobProgress:
    """A Progress that records, for pollers: the current phase ``{name, done, total, unit}``
    and a log of phase starts, warnings and the outcome, each ``{t, level, text}`` (t: seconds
    since the start). The log keeps the newest ``max_lines``; line numbers count every line
    ever written, so ``lines(log_from)`` stays correct after old lines are dropped."""

    def __init__(self, max_lines: int = MAX_LOG_LINES) -> None:
        self._lock = threading.Lock()
        self._started = time.monotonic()
        self._lines: deque[dict[str, Any]] = deque(maxlen=max_lines)
        self._written = 0
        self._current: dict[str, Any] | None = None
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
            self.phases.append(name)
            self._append("info", name if total is None else f"{name} ({total:,} {unit})")

    def advance(self, n: int = 1) -> None:
        with self._lock:
            if self._current is not None:
                self._current["done"] += n

    def retotal(self, total: int) -> None:
        with self._lock:
            if self._current is not None:
                self._current["total"] = max(total, self._current["done"])

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
                "phase": dict(self._current) if self._current else None,
                "log_from": start,
                "log_next": self._written,
                "log_dropped": dropped,
                "warnings": len(self.warnings),
            }
            if with_log:
                out["log"] = lines
            return out


def log_window(kept: list, dropped: int, written: int, log_from: int) -> tuple[int, list]:
    """(first line number returned, the lines from ``log_from`` on) of a log that has
    ``written`` lines in all, of which the first ``dropped`` are no longer kept."""
    start = min(max(log_from, dropped), written)
    return start, kept[start - dropped :]


# -- jobs ---------------------------------------------------------------------------------------


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


class Job:
    """One rebuild or embed run. ``state``: running, then done or failed."""

    def __init__(self, job_id: int, source: str, action: str, model: str | None) -> None:
        self.id = job_id
        self.source = source
        self.action = action
        self.model = model
        self.state = "running"
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
        """True once the job has finished (done or failed)."""
        return self._finished.wait(timeout)

    def to_dict(self, log_from: int = 0, *, with_log: bool = True) -> dict[str, Any]:
        """The job as JSON: its log from line ``log_from`` on (``log_next`` is the number to
        pass next time, so a poller fetches only new lines)."""
        return {
            "id": self.id,
            "source": self.source,
            "action": self.action,
            "model": self.model,
            "state": self.state,
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
            self.data = {**data, "state": "failed", "error": {
                "error": "the server process running this job stopped before it finished",
                "status": 500,
                "hint": "the current generation keeps serving; start the job again"}}  # fmt: skip

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
    """One job at a time across the server's worker processes too (``serve --workers N``)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fd: int | None = None

    def acquire(self) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


class JobRunner:
    """Plans and runs rebuild and embed jobs in a daemon thread, one at a time; remembers the
    last ``keep`` jobs (in memory: a restart forgets them, the sources do not)."""

    def __init__(self, service, *, keep: int = KEEP_JOBS) -> None:
        self.service = service
        self.keep = keep
        self._lock = threading.Lock()
        self._jobs: OrderedDict[int, Job] = OrderedDict()
        self._next_id = 1
        self._running: Job | None = None
        self._process_lock = _ProcessLock(service.settings.data_dir / "jobs.lock")
        # every worker process reads the records here, whichever process runs the job
        self._dir = service.settings.data_dir / "jobs"

    # -- looking -------------------------------------------------------------------------------

    def get(self, job_id: int) -> Job | SavedJob:
        with self._lock:
            job = self._jobs.get(job_id)
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

    def _record_paths(self) -> list[Path]:
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
        """Refresh the running job's record until it ends (then _run saves it once more)."""
        while not job.wait(SAVE_EVERY_S):
            with contextlib.suppress(OSError):
                self._save(job)

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

    # -- planning ------------------------------------------------------------------------------

    def plan(self, source: str, action: str = "rebuild", model: str | None = None) -> dict:
        """What ``start`` would do, as facts: the input and whether it is there, the current
        generation, the model that embeds, and whether a job is running. Requests that can
        never run are errors (unknown source 404; notes, unknown action or model 400)."""
        plan, _, _ = self._prepare(source, action, model)
        running = self.running()
        plan["running_job"] = (
            {"id": running.id, "source": running.source, "action": running.action}
            if running
            else None
        )
        plan["ready"] = plan["problem"] is None and running is None
        return plan

    def models(self) -> list[str]:
        """The embedding models a job may name: the built-in ones, those the sources already
        use (chosen by whoever ran ``chiezo embed`` on this machine) and CHIEZO_JOB_MODELS.
        A client never names a path: ``model=onnx:/etc`` once told whether a server folder
        exists, and would have loaded a model from anywhere on the disk."""
        from .embedders import BUILT_IN

        in_use = {
            info["vectors"]["model"] for info in self.service.sources() if info.get("vectors")
        }
        return sorted(set(BUILT_IN) | in_use | set(self.service.settings.job_models))

    def _check_model(self, model: str) -> None:
        offered = self.models()
        if model not in offered:
            raise ModelUnavailable(
                f"{model!r} is not one of this server's embedding models",
                known_models=offered,
                hint="name one of known_models; an operator adds others with CHIEZO_JOB_MODELS",
            )

    def _prepare(self, source: str, action: str, model: str | None):
        """(plan, what _run needs, the error that stops it or None)."""
        if action not in ACTIONS:
            raise BadQuery(f"action must be rebuild or embed, got {action!r}", actions=ACTIONS)
        info = source_info(self.service, source)
        if info.writable:
            raise BadQuery(NO_REBUILD if action == "rebuild" else NO_EMBED, source=source)
        if model is not None:
            self._check_model(model)
        current = generations.current_path(self.service.settings.corpus_dir / source)
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
            return self._prepare_rebuild(plan, info, current, model)
        return self._prepare_embed(plan, info, current, model)

    def _prepare_rebuild(self, plan, info, current, model):
        from .service import embedding_after_build

        call = _rebuild_parts(info)
        recorded = info.input
        plan["input"] = {
            "path": str(call.inputs[0]),
            "paths": [str(p) for p in call.inputs],
            "exists": not call.missing,
            "bytes": recorded.get("bytes"),
            "files": recorded.get("files"),
            "options": call.recorded(),
        }
        step = embedding_after_build(current, model)
        plan["embed_model"] = step[0] if step else None
        plan["problem"] = refusal = None
        if call.missing:
            try:
                rebuild_call(info)
            except BadQuery as exc:
                plan["problem"], refusal = _error(exc), exc
        return plan, (call, model), refusal

    def _prepare_embed(self, plan, info, current, model):
        from .embed import choose_unit_chars
        from .service import embedding_after_build

        vectors = info.vectors
        meta = self.service.library.get(plan["source"]).meta  # needs_rebuild: the library's 409
        if model is None and not vectors:
            raise BadQuery(
                f"{plan['source']!r} has no vectors yet: name the model to embed it with",
                known_models=self.models(),
                hint="e.g. model=use-m (fast) or e5-small (best for Japanese, slow)",
            )
        model_, max_chunks, unit_chars = embedding_after_build(current, model)
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

    def start(self, source: str, action: str, model: str | None = None) -> Job:
        """Start a job in a daemon thread and return it at once. 409 while another runs."""
        with self._lock:
            if self._running is not None:
                r = self._running
                raise Conflict(
                    f"job {r.id} ({r.action} {r.source}) is running; one job runs at a time",
                    running_job=r.id,
                    hint=f"wait for it: GET /v1/jobs/{r.id}",
                )
            plan, call, refusal = self._prepare(source, action, model)
            if refusal is not None:
                raise refusal
            if not self._process_lock.acquire():
                raise Conflict(
                    "a job is running in another server process; one job runs at a time",
                    hint="wait for it to finish (GET /v1/jobs on that process lists it)",
                )
            job = Job(self._new_id(), source, action,
                      plan["embed_model"] if action == "rebuild" else plan["model"])  # fmt: skip
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

    def _run(self, job: Job, call) -> None:
        progress = job.progress
        state, error = "failed", None
        try:
            progress.log("info", f"{job.action} {job.source} started")
            if job.action == "rebuild":
                self._rebuild(job, call)
            else:
                self._embed(job, call)
            state = "done"
        except Exception as exc:  # noqa: BLE001 - a job reports, the server goes on
            error = _failure(job, exc)
        finally:
            if error is not None:
                if job.result is not None:  # rebuilt and switched in; the embed step failed
                    error["error"] = f"built, but embedding failed: {error['error']}"
                    error["hint"] = ("the new generation serves, searchable by keyword; "
                                     "start an embed job to add its vectors")  # fmt: skip
                progress.log("error", error["error"])
                if job.result is None:
                    progress.log("info", "nothing was switched in: the current generation "
                                 "keeps serving")  # fmt: skip
            progress.close()
            with self._lock:  # a poller that sees the end may start the next job at once
                job._end(state, error)
                with contextlib.suppress(OSError):
                    self._save(job)
                self._process_lock.release()
                self._running = None
            job._finished.set()  # after the record is saved: other workers see the end too

    def _rebuild(self, job: Job, call) -> None:
        rebuild, model = call
        progress = job.progress
        report = self.service.ingest(rebuild.kind, rebuild.inputs, job.source, options=rebuild.options,
                                     build=rebuild.build, embed=False, progress=progress)  # fmt: skip
        job.result = report.to_dict()  # the build stands even if embedding then fails
        progress.log("info", f"built {report.docs:,} documents, {report.chunks:,} chunks, "
                     f"{report.size_bytes / 2**20:,.1f} MiB in {report.seconds:.1f} s; "
                     "the new generation is serving")  # fmt: skip
        self.service.embed_after_build(report, model, progress=progress)
        if report.embedding:
            job.result = report.to_dict()
            progress.log("info", _embedded(report.embedding))

    def _embed(self, job: Job, call) -> None:
        model, max_chunks, unit_chars = call
        report = self.service.embed(job.source, model, max_chunks=max_chunks,
                                    unit_chars=unit_chars, progress=job.progress)  # fmt: skip
        job.result = report.to_dict()
        job.progress.log("info", _embedded(job.result))


def _embedded(e: dict[str, Any]) -> str:
    return (f"embedded {e['embedded_chunks']:,} of {e['chunks']:,} chunks with {e['model']}: "
            f"{e['vectors']:,} vectors ({e['embedded']:,} new, {e['reused']:,} from the cache)")  # fmt: skip


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
