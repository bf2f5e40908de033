"""The one place that imports ``sqlite3``: opening files, pragmas and query deadlines.

Readers open a generation file ``mode=ro&immutable=1``: SQLite then skips all locking and
change detection, which is both the fastest way to read and correct, because a generation file
never changes after it has been switched in. Writers (the builder) open with journaling off,
because a failed build throws its file away instead of rolling back.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from chiezo.core import geometry
from chiezo.core.errors import Busy, ChiezoError, QueryTimeout, StorageFull

Connection = sqlite3.Connection
Error = sqlite3.Error
IntegrityError = sqlite3.IntegrityError
OperationalError = sqlite3.OperationalError
DatabaseError = sqlite3.DatabaseError
Row = sqlite3.Row

# How many SQLite VM steps pass between deadline checks: small enough to stop within a
# millisecond or two, large enough that the Python callback costs nothing measurable.
_PROGRESS_STEPS = 1_000


def _uri(path: Path, **params: str) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"file:{quote(str(Path(path).resolve()))}?{query}"


def open_readonly(path: Path, *, immutable: bool = True) -> Connection:
    """Open a source file for reading; ``immutable`` for finished generations."""
    params = {"mode": "ro"}
    if immutable:
        params["immutable"] = "1"
    conn = sqlite3.connect(_uri(path, **params), uri=True, check_same_thread=False)
    conn.execute("PRAGMA query_only = 1")
    # A source file may come from elsewhere (chiezo import): its schema's views and triggers
    # must never run functions with side effects on our behalf.
    conn.execute("PRAGMA trusted_schema = OFF")
    # Memory-mapped reads avoid a copy per page; the mapping is address space, not RAM.
    conn.execute("PRAGMA mmap_size = 1073741824")
    conn.execute("PRAGMA cache_size = -16384")  # 16 MiB page cache per connection
    name, arguments, function = geometry.SQL_FUNCTION  # polygons in SQL (core/geometry.py)
    conn.create_function(name, arguments, function, deterministic=True)
    return conn


BUILD_CACHE_ENV = "CHIEZO_BUILD_CACHE_MIB"
BUILD_CACHE_MIB = 64  # SQLite's page cache per connection a build writes through


def build_cache_mib() -> int:
    """The page cache of each connection a build writes through, in MiB: 64, or
    ``CHIEZO_BUILD_CACHE_MIB`` (a small machine's builds may take less; the memory test of
    every kind sets 1 to see what grows with the input besides the caches)."""
    raw = os.environ.get(BUILD_CACHE_ENV, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else BUILD_CACHE_MIB


def open_for_build(path: Path) -> Connection:
    """Open a new generation file for bulk writing."""
    conn = sqlite3.connect(str(path), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute(f"PRAGMA cache_size = -{build_cache_mib() * 1024}")  # bounded, whatever the size
    conn.execute("PRAGMA temp_store = FILE")
    return conn


def open_for_writing(path: Path, busy_timeout: float = 10.0) -> Connection:
    """Open a database that is changed in place (notes): WAL, and every commit synced, so a
    change acknowledged is on disk; other writers wait up to ``busy_timeout`` seconds."""
    conn = sqlite3.connect(
        str(path), isolation_level=None, check_same_thread=False, timeout=busy_timeout
    )
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    return conn


def open_cache(path: Path, busy_timeout: float = 10.0, *, auto_vacuum: bool = False) -> Connection:
    """Open a cache that is changed in place by whichever process answers (a live source's,
    store/live_cache.py): WAL, so readers never wait; not synced at each commit — what a crash
    loses is asked of the server again. ``auto_vacuum``: a new file's pages let go are given
    back as asked (set before anything else, or it does not hold)."""
    conn = sqlite3.connect(
        str(path), isolation_level=None, check_same_thread=False, timeout=busy_timeout
    )
    if auto_vacuum:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA trusted_schema = OFF")
    return conn


def statements(script: str) -> list[str]:
    """Split an SQL script into statements (trigger bodies included), so it can run inside a
    transaction the caller controls; ``executescript`` would commit it first."""
    out, buffer = [], ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            out.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        out.append(buffer.strip())
    return out


def storage_problem(exc: BaseException, what: str) -> ChiezoError | None:
    """A full disk or a lock held too long, said as such (a raw OperationalError would be a
    traceback or a 500); None for any other error."""
    if not isinstance(exc, sqlite3.Error):
        return None
    code = getattr(exc, "sqlite_errorcode", None)
    if code == sqlite3.SQLITE_FULL or "disk is full" in str(exc):
        return StorageFull(
            f"{what}: the disk is full",
            hint="free some space and try again; nothing already saved was lost",
        )
    if code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED) or "is locked" in str(exc):
        return Busy(f"{what}: another writer holds the lock", hint="try again in a moment")
    return None


def is_interrupt(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.OperationalError) and "interrupt" in str(exc).lower()


@dataclass(frozen=True)
class Deadline:
    """When the statements of one request must stop, and how to say so."""

    stop_at: float
    seconds: float
    what: str


_running = threading.local()  # the Deadline this thread's request runs under


def current_deadline() -> Deadline | None:
    """The deadline the calling thread runs under: a helper thread doing part of the same
    request (search/keyword.py) takes it along with ``deadline(conn, inherit=...)``."""
    return getattr(_running, "deadline", None)


@contextlib.contextmanager
def deadline(
    conn: Connection, seconds: float | None, what: str = "query", *, inherit: Deadline | None = None
) -> Iterator[None]:
    """Interrupt any statement on ``conn`` that is still running ``seconds`` from now (or at
    the ``inherit``-ed deadline of another thread's request).

    Raises QueryTimeout (HTTP 504) instead of SQLite's bare "interrupted".
    """
    if inherit is None:
        if not seconds or seconds <= 0:
            yield
            return
        inherit = Deadline(time.monotonic() + seconds, seconds, what)
    stop_at = inherit.stop_at
    previous = current_deadline()
    _running.deadline = inherit
    conn.set_progress_handler(lambda: 1 if time.monotonic() > stop_at else 0, _PROGRESS_STEPS)
    try:
        yield
    except sqlite3.OperationalError as exc:
        if is_interrupt(exc):
            raise QueryTimeout(
                f"{inherit.what} took longer than {inherit.seconds:g} s and was stopped",
                hint="narrow the query (more or longer terms, a smaller offset) or raise "
                "CHIEZO_QUERY_TIMEOUT",
            ) from exc
        raise
    finally:
        _running.deadline = previous
        conn.set_progress_handler(None, 0)
