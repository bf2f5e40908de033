"""Work on what a stranger sent, done in a process of its own: bounded in time and memory, and
never able to hold the process that asked for it past either.

Measured in a serving worker turning a live article into text itself: a 16 MiB article of
800,000 headings took 52 s (the limit was 5 s) and the worker to 1.29 GB, 858 MB of it still
held afterwards. Python cannot stop a parse from outside, and what a parse of millions of small
objects leaves in the heap is not given back. So the work runs in a child process that
lives on between calls (its start and imports cost ~0.4 s; a call then costs the pipe, ~1 ms;
unused for ``IDLE_EXIT_S`` it ends, its memory back), under an address-space limit; a call not
done by its deadline has its child killed (the next call starts a new one), and what the child
held goes with it.
"""

from __future__ import annotations

import contextlib
import os
import queue
import resource
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

from chiezo.core.processes import STOP_WAIT_S

CHILD = "from chiezo.core.isolation import _child_main; _child_main()"
ORPHAN_CHECK_S = 1.0
IDLE_EXIT_S = 300.0  # a child holds ~60 MB resident; one unused this long ends
IDLE_MARGIN_S = 30.0


class IsolatedFailure(Exception):
    """The work did not end well: ``reason`` is ``timeout``, ``memory`` or ``error``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def _child_main() -> None:
    """The child's life (started as ``python -c``, argv: the parent's pid, the memory cap):
    calls arrive on its standard input, answers leave through a copy of its standard output,
    which itself goes to standard error — a library that prints cannot garble an answer."""
    parent, memory_bytes = int(sys.argv[1]), int(sys.argv[2])
    answers = os.dup(1)
    os.dup2(2, 1)
    threading.Thread(target=_orphaned, args=(parent,), daemon=True).start()
    with contextlib.suppress(ValueError, OSError):  # where the limit cannot be set, none
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    calls = Connection(0, writable=False)
    replies = Connection(answers, readable=False)
    while True:
        try:
            if not calls.poll(IDLE_EXIT_S):
                return  # unused for a while: its memory back (the next call starts another)
            work, args = calls.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = ("ok", work(*args))
        except MemoryError:
            reply = ("memory", "")
        except Exception as exc:  # the caller says what failed; the child serves on
            reply = ("error", f"{type(exc).__name__}: {exc}")
        try:
            replies.send(reply)
        except MemoryError:  # the result itself did not fit
            replies.send(("memory", ""))


def _orphaned(parent: int) -> None:
    """End the child once its parent has gone, even in the middle of a call. (The kernel's
    parent-death signal is tied to the thread that started a child, and a server's request
    threads come and go: children started from one died with it, idle.) Waiting for a call,
    the child also ends when its parent's end of the pipe closes."""
    while os.getppid() == parent:
        time.sleep(ORPHAN_CHECK_S)
    os._exit(1)


class _Worker:
    """One child, started with ``python -c`` rather than multiprocessing's spawn, which runs
    the parent's main script again in the child (a script without a ``__main__`` guard would
    start children without end)."""

    def __init__(self, memory_bytes: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(os.getpid()), str(memory_bytes)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"},
        )
        assert self.process.stdin is not None and self.process.stdout is not None
        self.calls = Connection(os.dup(self.process.stdin.fileno()), readable=False)
        self.replies = Connection(os.dup(self.process.stdout.fileno()), writable=False)
        self.process.stdin.close()
        self.process.stdout.close()
        self.idle_since = time.monotonic()

    def idle_for(self) -> float:
        return time.monotonic() - self.idle_since

    def stop(self) -> None:
        for end in (self.calls, self.replies):
            with contextlib.suppress(OSError):
                end.close()
        with contextlib.suppress(OSError):
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(STOP_WAIT_S)


class Isolated:
    """Child processes each doing one call at a time: one more is started when every one is
    busy, so callers are bounded by whoever calls (a live source's slots), not here."""

    def __init__(self, memory_bytes: int) -> None:
        self.memory_bytes = memory_bytes
        self._idle: queue.LifoQueue[_Worker] = queue.LifoQueue()

    def run(self, work: Callable[..., Any], *args: Any, deadline: float) -> Any:
        """``work(*args)`` in a child, by ``deadline`` (time.monotonic()). ``work`` must be
        importable by name (it is sent by reference)."""
        worker = self._take()
        try:
            reply = self._call(worker, work, args, deadline)
        except BaseException:
            worker.stop()  # killed mid-call, or the pipe broke: never used again
            raise
        worker.idle_since = time.monotonic()
        self._idle.put(worker)
        status, value = reply
        if status == "ok":
            return value
        if status == "memory":
            raise IsolatedFailure("memory", f"it needed more than {self.memory_bytes >> 20} MiB")
        raise IsolatedFailure("error", value)

    def _take(self) -> _Worker:
        """An idle child, else a new one."""
        while True:  # an idle child that died meanwhile (killed from outside) is let go
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            # one about to end by itself is not sent a call it would not answer
            if worker.process.poll() is None and worker.idle_for() < IDLE_EXIT_S - IDLE_MARGIN_S:
                return worker
            worker.stop()
        try:
            return _Worker(self.memory_bytes)
        except OSError as exc:  # no process could be started (out of memory, pids, fds)
            raise IsolatedFailure("error", f"no process could be started ({exc})") from exc

    def _call(
        self, worker: _Worker, work: Callable[..., Any], args: tuple[Any, ...], deadline: float
    ) -> tuple[str, Any]:
        try:
            worker.calls.send((work, args))
            if not worker.replies.poll(max(deadline - time.monotonic(), 0)):
                raise IsolatedFailure("timeout", "it did not finish before the deadline")
            return worker.replies.recv()
        except (EOFError, OSError) as exc:  # the child died: the kernel's OOM killer, a crash
            raise IsolatedFailure("memory", f"its process ended ({type(exc).__name__})") from exc
