"""``chiezo ingest docs PATH --watch``: rebuild when the folder changes.

Polling, not inotify: it works the same on every platform and network drive, and a folder of
documents changes at human speed. A change must stay still for ``debounce`` seconds before the
rebuild starts (an editor saving a file writes it several times; a copy of many files takes a
while), and each rebuild is incremental (ingest/conversions.py)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

Snapshot = frozenset


def snapshot(root: Path) -> Snapshot:
    """(relative path, size, mtime_ns) of every visible file under ``root``."""
    found = set()
    root = Path(root)
    if root.is_file():
        stat = root.stat()
        return frozenset({(root.name, stat.st_size, stat.st_mtime_ns)})
    for directory, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for filename in filenames:
            if filename.startswith("."):
                continue
            path = Path(directory) / filename
            try:
                stat = path.stat()
            except OSError:
                continue  # vanished between listing and stat: the next poll sees it
            found.add((str(path.relative_to(root)), stat.st_size, stat.st_mtime_ns))
    return frozenset(found)


def watch(
    take: Callable[[], Snapshot],
    rebuild: Callable[[], None],
    *,
    interval: float = 2.0,
    debounce: float = 1.0,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
    rounds: int | None = None,
) -> int:
    """Poll ``take()`` every ``interval`` s; after a change that then holds still for
    ``debounce`` s, call ``rebuild()``. Returns the number of rebuilds (``rounds`` polls at
    most; None: until interrupted)."""
    seen = take()
    pending_since: float | None = None
    pending: Snapshot | None = None
    rebuilds = 0
    polls = 0
    while rounds is None or polls < rounds:
        sleep(interval)
        polls += 1
        now = take()
        if now != (pending if pending is not None else seen):
            pending, pending_since = now, clock()  # changed (again): wait for it to settle
            continue
        if (
            pending is not None
            and pending_since is not None
            and clock() - pending_since >= debounce
        ):
            rebuild()
            rebuilds += 1
            seen, pending, pending_since = take(), None, None
    return rebuilds
