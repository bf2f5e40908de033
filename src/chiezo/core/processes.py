"""The processes Chiezo starts — parser pools, word splitters, a background job's own process —
end with whoever started them, and can be stopped whole, whatever state they are in.

Measured: after ``kill -9`` of a GeoNames or Wikipedia build its parser processes
lived on for 1–5 s (once more than 5 s), parsing for nobody; and a cancelled job hung for good in
``multiprocessing.Pool.__exit__``, its task thread blocked sending to workers that were gone.
So: every such child asks the kernel to kill it when its parent goes (``die_with_parent``), and
what stops a child kills it and waits a bounded time (``kill_group``, ``stop_processes``) —
never a join without a timeout.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Iterable
from multiprocessing.process import BaseProcess

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
M_ARENA_MAX = -8  # <malloc.h>
SERVING_ARENAS = 2
STOP_WAIT_S = 5.0  # a killed process is gone in milliseconds; this bounds a stuck one


def die_with_parent(parent_pid: int | None = None) -> None:
    """Have the kernel send SIGKILL to this process when the thread that started it ends (Linux;
    elsewhere nothing happens). ``parent_pid``: the process that started it — if that one is
    already gone (it died before this line ran), exit at once."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if parent_pid is not None and os.getppid() != parent_pid:
        os._exit(1)


def kill_group(pgid: int) -> None:
    """SIGKILL to every process of group ``pgid`` (a job's process and its pools)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def stop_processes(
    processes: Iterable[BaseProcess], wait_s: float = STOP_WAIT_S
) -> list[BaseProcess]:
    """Kill ``processes`` (multiprocessing.Process objects) and wait for them, at most
    ``wait_s`` in all; returns those still alive after that (a process in uninterruptible
    sleep), for the caller to report — it is not waited for again."""
    processes = list(processes)
    for process in processes:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            process.kill()
    deadline = time.monotonic() + wait_s
    for process in processes:
        with contextlib.suppress(OSError, ValueError, AssertionError):
            process.join(max(0.0, deadline - time.monotonic()))
    return [p for p in processes if _alive(p)]


def _alive(process: BaseProcess) -> bool:
    try:
        return process.is_alive()
    except (ValueError, AssertionError):  # closed, or not a child of this process
        return False


def limit_malloc_arenas(arenas: int = SERVING_ARENAS) -> None:
    """Cap glibc's malloc arenas in a serving process (elsewhere nothing happens).

    Measured in bench/serve_load.py (docs/design.md §30.6): anyio ends a request thread idle for
    10 s and starts a new one before the old has exited, so glibc gives the new thread a new
    arena, and an arena keeps what it once held — a worker's anonymous memory grew +13–18%
    across three rebuilds (12 → 15 heaps, free memory inside them 20 → 38–47 MB, in use flat).
    Two arenas: +3–4%, flat after the first switch, and no throughput measurably lost (32
    connections: 159/175/204 req/s with, 157/178/196 without)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).mallopt(M_ARENA_MAX, arenas)
