"""A background job runs in a process of its own; the server's worker starts it, passes on its
progress and its cancellation, and ends it by force when it does not stop.

Why a process, not a thread of the serving worker:

* **Memory.** What a build or an embedding allocates stays with the process that ran it: a
  worker's private memory grew 249 → 322–344 MB across two in-process rebuilds. A job's process
  gives all of it back when it exits.
* **Hostile files.** A document that expands without limit, or a parser that spins, costs the
  job's process, not the worker answering searches.
* **Every job can end.** A cancelled job run in a thread that is stuck in a process pool's
  join cannot be stopped: it stayed "running" for 19+ minutes and every later build got 409.
  Here cancel is asked first (SIGTERM: the work raises ``Cancelled`` at its next progress
  update and removes what it wrote); a job that has not ended ``CANCEL_GRACE_S`` later is
  killed with its whole process group (its parser and word-splitter processes too). A job's
  process that dies on its own — killed, out of memory — ends the job as failed, saying how.
  Either way the job ends and the one-build lock is free.

The work itself is the same code a command-line build runs (``building.ingest`` through
``rebuilding.run_rebuild``, ``building.embed``); only its progress travels, as JSON lines on a
pipe: ``{"e": "phase" | "advance" | "retotal" | "warn" | "log" | "result" | "end", ...}``.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import pickle
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from chiezo.core.config import Settings
from chiezo.core.errors import Cancelled, ChiezoError, InternalError
from chiezo.core.processes import die_with_parent, kill_group
from chiezo.core.progress import Progress
from chiezo.ops import building
from chiezo.ops.context import Context
from chiezo.store.model_host import HOST_ENV

if TYPE_CHECKING:
    from chiezo.store.kinds import SourceKind

CANCEL_GRACE_S = 10.0  # from cancel to kill: a build's abort path removes its files in < 1 s
KILL_WAIT_S = 5.0  # after SIGKILL: a process that is still there is reported, not waited for
POLL_S = 0.2
ADVANCE_EVERY_S = 0.2  # counts are passed on at most this often (a build counts every doc)

log = logging.getLogger("chiezo.jobs")


@dataclass
class Work:
    """What a job's process runs; sent to it pickled (the parent is the only writer)."""

    settings: Settings
    job_id: int
    action: str  # "rebuild" or "embed"
    source: str
    call: Any  # rebuild.RebuildCall, or (model, max_chunks, unit_chars) for an embed
    model: str | None = None  # rebuild: the model it embeds with after building
    kind: SourceKind | None = None  # a plugin's (or a test's) kind is registered there too


class LoggedProgress(Progress, Protocol):
    """A job's Progress, which keeps a log too: ops/jobs.py's JobProgress in the server,
    ``PipeProgress`` in the job's process."""

    def log(self, level: str, text: str) -> None: ...


class WatchedJob(Protocol):
    """What watching a job reads and writes of it (ops/jobs.py ``Job``, which starts this
    module's process: it is named here by what it has, not imported)."""

    id: int
    action: str
    source: str
    cancel_requested: threading.Event
    result: dict[str, Any] | None

    @property
    def progress(self) -> LoggedProgress: ...


@dataclass
class Outcome:
    """How a job's process ended: ``state`` done, failed or cancelled, with the error."""

    state: str
    error: dict[str, Any] | None = None


# -- the parent's side ------------------------------------------------------------------------


class JobProcess:
    """A started job process. ``watch(job)`` forwards its events into ``job.progress`` and
    ``job.result`` until it ends, and returns its Outcome."""

    def __init__(self, work: Work) -> None:
        payload = pickle.dumps(sys.path) + pickle.dumps(work)
        read, write = os.pipe()
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "chiezo.ops.job_process", str(write), str(os.getpid())],
                stdin=subprocess.PIPE,
                pass_fds=(write,),
                start_new_session=True,
            )
        except BaseException:
            os.close(read)
            raise
        finally:
            os.close(write)
        self.events = os.fdopen(read, "rb")
        self._buffer = b""
        self.killed_at: float | None = None
        threading.Thread(target=self._send, args=(payload,), daemon=True).start()

    def _send(self, payload: bytes) -> None:
        stdin = self.process.stdin
        assert stdin is not None  # started with stdin=PIPE
        with contextlib.suppress(OSError):  # a process that died at once: reported by watch
            stdin.write(payload)
            stdin.close()

    def watch(self, job: WatchedJob) -> Outcome:
        try:
            return self._watch(job)
        finally:
            self.events.close()

    def _watch(self, job: WatchedJob) -> Outcome:
        cancel_asked_at: float | None = None
        end: Outcome | None = None
        while True:
            if job.cancel_requested.is_set() and cancel_asked_at is None:
                cancel_asked_at = time.monotonic()
                self._signal(signal.SIGTERM)
            if (
                cancel_asked_at is not None
                and self.killed_at is None
                and time.monotonic() - cancel_asked_at > CANCEL_GRACE_S
            ):
                job.progress.log(
                    "warning",
                    f"the job did not stop within {CANCEL_GRACE_S:g} s "
                    "of its cancellation: its processes were killed",
                )
                self.kill()
            for event in self._read(POLL_S):
                end = self._apply(event, job) or end
            if self._ended():
                for event in self._read(0):
                    end = self._apply(event, job) or end
                break
            if self.killed_at is not None and time.monotonic() - self.killed_at > KILL_WAIT_S:
                return self._abandoned(job)
        self.kill()  # its pools' processes, should any be left
        return self._outcome(end, cancel_asked_at is not None)

    def kill(self) -> None:
        """SIGKILL to the job's process and every process it started (its own group)."""
        if self.killed_at is None:
            self.killed_at = time.monotonic()
        kill_group(self.process.pid)

    def _signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signum)

    def _ended(self) -> bool:
        return self.process.poll() is not None

    def _read(self, timeout: float) -> list[dict[str, Any]]:
        ready, _, _ = select.select([self.events], [], [], timeout)
        if not ready:
            return []
        data = os.read(self.events.fileno(), 1 << 16)
        if not data:
            if not self._ended():
                time.sleep(timeout)  # the pipe closed first; the exit status follows
            return []
        self._buffer += data
        *lines, self._buffer = self._buffer.split(b"\n")
        return [json.loads(line) for line in lines if line.strip()]

    def _apply(self, event: dict[str, Any], job: WatchedJob) -> Outcome | None:
        kind, progress = event.pop("e"), job.progress
        if kind == "phase":
            progress.phase(event["name"], event["total"], event["unit"])
        elif kind == "advance":
            progress.advance(event["n"])
        elif kind == "retotal":
            progress.retotal(event["total"])
        elif kind == "warn":
            progress.warn(event["message"])
        elif kind == "log":
            progress.log(event["level"], event["text"])
        elif kind == "result":
            job.result = event["result"]
        elif kind == "end":
            if event.get("traceback"):  # a bug: the server's log gets the details
                log.error(
                    "job %s (%s %s) failed:\n%s", job.id, job.action, job.source, event["traceback"]
                )
            return Outcome(event["state"], event.get("error"))
        return None

    def _outcome(self, end: Outcome | None, cancelled: bool) -> Outcome:
        if end is not None:
            return end
        code = self.process.returncode
        if cancelled:
            return Outcome(
                "cancelled",
                {"error": "the job was cancelled and its processes stopped", "status": 409},
            )
        how = f"was killed by signal {-code}" if code and code < 0 else f"exited with code {code}"
        return Outcome(
            "failed",
            {
                "error": f"the job's process {how} before it finished (out of memory?)",
                "status": 500,
                "hint": "the current generation keeps serving; see the server's "
                "log and the system log (dmesg), then start the job again",
            },
        )

    def _abandoned(self, job: WatchedJob) -> Outcome:
        """A process that outlived SIGKILL (stuck in the kernel): said, not waited for."""
        pid = self.process.pid
        log.error("job %s: process %s did not end after SIGKILL; abandoned", job.id, pid)
        return Outcome(
            "failed",
            {
                "error": f"the job's process {pid} did not end even when killed; it was abandoned",
                "status": 500,
                "hint": "later jobs may start; check the process (ps) and the system log (dmesg)",
            },
        )


# -- the job's own process -------------------------------------------------------------------


class EventPipe:
    """The child's end: one JSON line per event. Counts are gathered — a build counts every
    document — and passed on at a phase's first count, then at most every
    ``ADVANCE_EVERY_S``, at every other event and at each heartbeat (``advance(0)``), so a
    poller sees a phase move (its rate and ETA) however short it is."""

    def __init__(self, fd: int) -> None:
        self.out = os.fdopen(fd, "wb", buffering=0)
        self.lock = threading.Lock()  # the progress heartbeat writes from another thread
        self.pending = 0
        self.counted_at = 0.0  # when a count was last passed on; 0: not yet in this phase

    def send(self, event: str, **fields: Any) -> None:
        with self.lock:
            if event == "advance":
                self.pending += fields["n"]
                if time.monotonic() - self.counted_at >= ADVANCE_EVERY_S or not fields["n"]:
                    self.flush()
                return
            self.flush()
            if event == "phase":
                self.counted_at = 0.0
            self._write(event, fields)

    def flush(self) -> None:
        """Pass on the counts gathered (the lock held)."""
        if self.pending:
            self._write("advance", {"n": self.pending})
            self.pending = 0
            self.counted_at = time.monotonic()

    def _write(self, event: str, fields: dict[str, Any]) -> None:
        line = json.dumps({"e": event, **fields}, ensure_ascii=False, default=str)
        self.out.write(line.encode("utf-8") + b"\n")


class CancellableProgress:
    """A job's Progress that raises ``Cancelled`` in the work's own calls once ``cancelled()``
    says the job is asked to stop — the builder's and the embedder's abort paths then remove
    what they wrote. A heartbeat's ``advance(0)`` (progress.Ticking, from another thread)
    never raises. ``what``: the job, as the error names it."""

    def __init__(self, inner: LoggedProgress, cancelled: Callable[[], bool], what: str) -> None:
        self.inner, self.cancelled, self.what = inner, cancelled, what

    def __getattr__(self, name: str):
        return getattr(self.__dict__["inner"], name)

    def _check(self) -> None:
        if self.cancelled():
            raise Cancelled(f"{self.what} was cancelled")

    def phase(self, name: str, total: int | None = None, unit: str = "docs") -> None:
        self._check()
        self.inner.phase(name, total, unit)

    def advance(self, n: int = 1) -> None:
        if n:
            self._check()
        self.inner.advance(n)

    def retotal(self, total: int) -> None:
        self.inner.retotal(total)

    def warn(self, message: str) -> None:
        self.inner.warn(message)

    def close(self) -> None:
        self.inner.close()


class PipeProgress:
    """A Progress (core/progress.py) whose calls travel to the parent's JobProgress."""

    def __init__(self, pipe: EventPipe) -> None:
        self.pipe = pipe

    def phase(self, name: str, total: int | None = None, unit: str = "docs") -> None:
        self.pipe.send("phase", name=name, total=total, unit=unit)

    def advance(self, n: int = 1) -> None:
        self.pipe.send("advance", n=n)  # 0, the heartbeat: counts gathered are passed on

    def retotal(self, total: int) -> None:
        self.pipe.send("retotal", total=total)

    def warn(self, message: str) -> None:
        self.pipe.send("warn", message=message)

    def log(self, level: str, text: str) -> None:
        self.pipe.send("log", level=level, text=text)

    def close(self) -> None:
        pass


def child_main(events_fd: int, parent_pid: int) -> None:
    """``python -m chiezo.ops.job_process FD PID``: read the Work from stdin, run it, report on FD;
    end with the server (process PID) — its job thread, which started this, lives as long as
    the job, so only the server's own end ends it."""
    die_with_parent(parent_pid)
    # a job embeds with a model of its own, at full speed (store/model_host.py says why)
    os.environ.pop(HOST_ENV, None)
    logging.basicConfig(level=logging.WARNING, format="chiezo job: %(levelname)s %(message)s")
    work = _read_work()
    pipe = EventPipe(events_fd)
    cancelled = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: cancelled.set())
    state, error, trace = "failed", None, None
    try:
        run(work, pipe, cancelled)
        state = "done"
    except BaseException as exc:  # noqa: BLE001 - everything is reported to the parent
        state, error, trace = _failure(exc)
    pipe.send("end", state=state, error=error, traceback=trace)  # counts gathered go first


def _read_work() -> Work:
    """The parent's import path first (a kind's module, a plugin's or a test's, must import
    here too), then the Work."""
    stream = io.BytesIO(sys.stdin.buffer.read())
    for entry in reversed(pickle.load(stream)):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    return pickle.load(stream)


def run(work: Work, pipe: EventPipe, cancelled: threading.Event) -> None:
    """The job itself: the calls a command-line build makes, on a context of its own."""
    from chiezo.store.kinds import register

    if work.kind is not None:
        register(work.kind)  # a kind registered at run time in the server (a plugin, a test)
    ctx = Context(work.settings)
    progress = CancellableProgress(
        PipeProgress(pipe), cancelled.is_set, f"job {work.job_id} ({work.action} {work.source})"
    )
    if work.action == "rebuild":
        _rebuild(ctx, work, progress, pipe)
    else:
        _embed(ctx, work, progress, pipe)


def _rebuild(ctx: Context, work: Work, progress: CancellableProgress, pipe: EventPipe) -> None:
    from chiezo.ops.rebuilding import run_rebuild

    call = work.call
    report = run_rebuild(ctx, call, work.source, progress=progress, embed=False)
    if report is None:
        pipe.send("result", result={"up_to_date": True, "input": (call.identity or {}).get("path")})
        progress.log(
            "info", "the newest input is the one the source was built from: nothing rebuilt"
        )
        return
    pipe.send("result", result=report.to_dict())  # the build stands even if embedding fails
    progress.log(
        "info",
        f"built {report.docs:,} documents, {report.chunks:,} chunks, "
        f"{report.size_bytes / 2**20:,.1f} MiB in {report.seconds:.1f} s; "
        "the new generation is serving",
    )
    building.embed_after_build(ctx, report, work.model, progress=progress)
    if report.embedding:
        pipe.send("result", result=report.to_dict())
        progress.log("info", embedded_line(report.embedding))


def _embed(ctx: Context, work: Work, progress: CancellableProgress, pipe: EventPipe) -> None:
    model, max_chunks, unit_chars = work.call
    report = building.embed(
        ctx, work.source, model, max_chunks=max_chunks, unit_chars=unit_chars, progress=progress
    )
    result = report.to_dict()
    pipe.send("result", result=result)
    progress.log("info", embedded_line(result))


def embedded_line(e: dict[str, Any]) -> str:
    return (
        f"embedded {e['embedded_chunks']:,} of {e['chunks']:,} chunks with {e['model']}: "
        f"{e['vectors']:,} vectors ({e['embedded']:,} new, {e['reused']:,} from the cache)"
    )


def _failure(exc: BaseException) -> tuple[str, dict[str, Any], str | None]:
    """(state, error as the one error shape, the traceback of a bug)."""
    if isinstance(exc, Cancelled):
        return "cancelled", plain(exc.to_dict()), None
    if isinstance(exc, ChiezoError):
        return "failed", plain(exc.to_dict()), None
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit
        exc = RuntimeError(f"{type(exc).__name__}")
    trace = "".join(traceback.format_exception(exc))
    return "failed", plain(InternalError.wrapping(exc, detail=True).to_dict()), trace


def plain(error: dict[str, Any]) -> dict[str, Any]:
    """An error made plain JSON (it travels and is saved as JSON)."""
    return json.loads(json.dumps(error, ensure_ascii=False, default=str))


if __name__ == "__main__":
    child_main(int(sys.argv[1]), int(sys.argv[2]))
