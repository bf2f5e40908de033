"""Workers of ``chiezo serve --workers N`` stop when their supervisor is gone.

uvicorn's supervisor stops its workers when it is asked to (SIGTERM, Ctrl-C), but a
``kill -9`` or a crash of the supervisor leaves them serving on the shared socket, so a
restart fails with "Address already in use". Each worker therefore watches the
process that started it and shuts down gracefully once it has been re-parented.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

SUPERVISOR_ENV = "CHIEZO_SUPERVISOR_PID"  # set by ``chiezo serve`` before starting workers
POLL_SECONDS = 0.5
GRACE_SECONDS = 10.0  # in-flight requests may finish; a stuck stream may not hold the port


def follow_supervisor() -> bool:
    """In a worker process, start watching the supervisor; False elsewhere (a single-process
    server runs in the supervisor itself and follows nobody)."""
    raw = os.environ.get(SUPERVISOR_ENV, "")
    if not raw.isdigit() or int(raw) in (os.getpid(), 0):
        return False
    supervisor = int(raw)
    if _started_by() != supervisor:  # started by something else (a test, another manager)
        return False
    threading.Thread(
        target=_watch, args=(supervisor,), name="chiezo-supervisor-watch", daemon=True
    ).start()
    return True


def _started_by() -> int:
    """The process that started this one, even if it is gone already. ``os.getppid()`` alone
    is not enough: a supervisor killed while a worker is still importing (seen in CI: one
    worker answered, the other was loading) re-parents that worker before it looks, and it
    would take itself for one started by something else and serve on for good."""
    parent = multiprocessing.parent_process()  # recorded at spawn; outlives the parent
    return parent.pid if parent is not None and parent.pid else os.getppid()


def _watch(supervisor: int) -> None:
    while os.getppid() == supervisor:
        time.sleep(POLL_SECONDS)
    os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's graceful shutdown
    time.sleep(GRACE_SECONDS)
    os._exit(1)
