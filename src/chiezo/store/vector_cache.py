"""The embedding cache: float16 vectors by a hash of the exact text embedded, one file per model
(``$CHIEZO_DATA/vectors/<model>.f16.db``), so an interrupted embed resumes (store/embed.py).
Once an embed's generation is switched in, the cache lets go of the vectors it holds
(``forget``, then ``compact``): a generation keeps each vector's text hash, and unchanged text
is found there (store/vectors.HeldVectors) — the cache is not a third copy (design.md §35.10).

Layout (docs/design.md §18, "The embedding cache"): ``vectors(id INTEGER PRIMARY KEY, key BLOB
UNIQUE, v BLOB)`` in 16 KiB pages. Rows are appended in rowid order, so the table's pages fill
up (15 vectors of 1 KiB to a page) and a lookup is one probe of the unique index on the 20-byte
key — its cost follows the lookup, not the cache's size. The first layout (``<model>.db``: hex
keys as the primary key of a WITHOUT ROWID table) stored a 1 KiB vector as an overflowing row:
4.6 bytes on disk for each byte of vector. A cache in that layout is converted the first time
it is opened (rows copied, counted, then the old file deleted).

Concurrency: a key's first vector is kept for good (``INSERT OR IGNORE``), so two builds that
embed the same text at once agree on its vector. Every holder keeps a shared ``flock`` on
``.<model>.lock`` beside the file; creating or converting the file takes it exclusively (others
wait), and ``chiezo gc`` (ops/maintenance.py) takes it exclusively without waiting before it deletes
a cache no source uses — a cache an embed has open is never deleted under it. Lock files are
never deleted: a process waiting on an unlinked lock file would hold a lock nobody else sees.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chiezo.core import db
from chiezo.core.config import Settings
from chiezo.core.errors import BuildError
from chiezo.core.progress import NullProgress, Progress

SUFFIX = ".f16.db"
BUILDING = ".building"  # a conversion under way (or one that died: chiezo gc removes it)
LEGACY_SUFFIX = ".db"
# 16 KiB: 1.10× the raw float16 size for 512-d vectors (8 KiB: 1.18×; 4 KiB: 1.37×, three
# 1 KiB rows to a page), measured on the jawiki excerpt's 41,641 use-m vectors.
PAGE_SIZE = 16384
TABLE = "CREATE TABLE IF NOT EXISTS vectors (id INTEGER PRIMARY KEY, key BLOB NOT NULL UNIQUE, v BLOB NOT NULL)"
COPY_BATCH = 2000


def directory_of(settings: Settings) -> Path:
    return settings.data_dir / "vectors"


def stem(model: str) -> str:
    """The file-name form of a model name (``onnx:/srv/e5`` → ``onnx_srv_e5``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", model)


CREATE_POLL_S = 0.05  # how often a process waiting for another to create the cache looks


def lock_path(path: Path) -> Path:
    return path.with_name("." + path.name.removesuffix(SUFFIX) + ".lock")


class VectorCache:
    """float16 vectors by text hash (hex sha1, embed.text_hash), one file per model."""

    def __init__(self, settings: Settings, model: str, progress: Progress | None = None):
        directory = directory_of(settings)
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / (stem(model) + SUFFIX)
        self._lock = os.open(lock_path(self.path), os.O_CREAT | os.O_RDWR, 0o644)
        try:
            self._hold(directory / (stem(model) + LEGACY_SUFFIX), progress)
            self.conn = db.open_for_writing(self.path)
            check_layout(self.conn, self.path)
        except BaseException:
            os.close(self._lock)  # closing the descriptor releases its lock
            raise

    def _hold(self, legacy: Path, progress: Progress | None) -> None:
        """Hold the shared lock on an existing cache file, creating (or converting) it first
        under the exclusive lock if there is none."""
        while True:
            fcntl.flock(self._lock, fcntl.LOCK_SH)  # held while open: gc leaves the file alone
            if self.path.exists():
                return
            try:  # one process creates it; the others look again
                fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                # not a blocking wait: the creator goes back to a shared lock it keeps while
                # the cache is open, so an exclusive wait would never end (measured: a hang)
                time.sleep(CREATE_POLL_S)
                continue
            if not self.path.exists():
                create(self.path, legacy, progress)
            # back to shared: flock converts by unlocking first, so a gc may delete the file
            # in between — hence the loop, which looks again

    def known(self, hashes: list[str]) -> set[str]:
        """Which of these hashes are cached (read from the key index alone)."""
        if not hashes:
            return set()
        marks = ",".join("?" * len(hashes))
        rows = self.conn.execute(
            f"SELECT key FROM vectors WHERE key IN ({marks})", [bytes.fromhex(h) for h in hashes]
        )
        return {key.hex() for (key,) in rows}

    def get(self, hashes: list[str]) -> dict[str, bytes]:
        """The cached vectors of these hashes (the ones not cached are left out)."""
        if not hashes:
            return {}
        marks = ",".join("?" * len(hashes))
        rows = self.conn.execute(
            f"SELECT key, v FROM vectors WHERE key IN ({marks})", [bytes.fromhex(h) for h in hashes]
        )
        return {key.hex(): v for key, v in rows}

    def put(self, rows: list[tuple[str, bytes]]) -> None:
        """Store vectors by hash; a hash already stored keeps its vector."""
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany(
            "INSERT OR IGNORE INTO vectors (key, v) VALUES (?, ?)",
            [(bytes.fromhex(h), v) for h, v in rows],
        )
        self.conn.execute("COMMIT")

    def forget(self, keys: list[bytes]) -> int:
        """Delete the vectors of these keys (raw 20-byte hashes): a generation holds them now
        (store/vectors.HeldVectors). Returns how many were here."""
        if not keys:
            return 0
        marks = ",".join("?" * len(keys))
        self.conn.execute("BEGIN IMMEDIATE")
        gone = self.conn.execute(f"DELETE FROM vectors WHERE key IN ({marks})", keys).rowcount
        self.conn.execute("COMMIT")
        return gone

    def compact(self) -> bool:
        """Give the pages of forgotten vectors back to the disk (VACUUM), when at least half
        the file is free. Best effort: another process reading the cache makes it wait for a
        later embed (False)."""
        pages = self.conn.execute("PRAGMA page_count").fetchone()[0]
        free = self.conn.execute("PRAGMA freelist_count").fetchone()[0]
        if not pages or free * 2 < pages:
            return False
        try:
            self.conn.execute("VACUUM")
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except db.OperationalError:
            return False
        return True

    def close(self) -> None:
        try:
            self.conn.close()
        finally:
            os.close(self._lock)


def create(path: Path, legacy: Path, progress: Progress | None = None) -> int:
    """Write the cache file ``path`` — with the vectors of ``legacy`` (the first layout) if that
    file exists — under a temporary name, then rename it into place and delete ``legacy``.
    The caller holds the exclusive lock. Returns the number of vectors carried over."""
    building = path.with_name(f".{path.name}.{secrets.token_hex(3)}{BUILDING}")
    try:
        conn = db.open_for_build(building)  # journal off: a failed conversion is thrown away
        try:
            conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # before the first table exists
            conn.execute(TABLE)
            copied = (
                _copy_legacy(conn, legacy, progress or NullProgress()) if legacy.exists() else 0
            )
            # WAL set here, alone: switching to it needs the file to itself, which processes
            # opening the new cache at once do not give one another ("database is locked")
            conn.execute("PRAGMA journal_mode = WAL")
        finally:
            conn.close()
        fd = os.open(building, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rows reach the disk before the old file goes
        finally:
            os.close(fd)
        os.replace(building, path)
        fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(fd)  # the rename is on the disk before the old file is deleted
        finally:
            os.close(fd)
    except BaseException as exc:
        building.unlink(missing_ok=True)
        problem = db.storage_problem(exc, f"converting the embedding cache {legacy.name}")
        if problem is not None:
            raise problem from exc
        raise
    for old in legacy_files(legacy):
        old.unlink(missing_ok=True)
    return copied


def _copy_legacy(conn: db.Connection, legacy: Path, progress: Progress) -> int:
    """Copy the first layout's rows (in key order, so the index fills its pages too) and check
    that every one arrived before the old file may be deleted."""
    old = db.open_for_writing(legacy)  # not read-only: its WAL, if any, must be replayed
    try:
        expected = old.execute("SELECT count(*) FROM vec").fetchone()[0]
        progress.phase("converting the embedding cache", expected, "vectors")
        conn.execute("BEGIN")
        for rows in _batches(old.execute("SELECT hash, v FROM vec ORDER BY hash")):
            conn.executemany(
                "INSERT OR IGNORE INTO vectors (key, v) VALUES (?, ?)",
                [(bytes.fromhex(h), v) for h, v in rows],
            )
            progress.advance(len(rows))
        conn.execute("COMMIT")
    except (db.Error, ValueError) as exc:  # ValueError: a key that is not hex
        if db.storage_problem(exc, "") is not None:
            raise  # a full disk is said as such by create()
        raise BuildError(
            f"the embedding cache {legacy} could not be converted: {exc}",
            hint=f"move {legacy.name} aside (its vectors will be computed again) and retry",
        ) from exc
    finally:
        old.close()
    copied = conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
    if copied != expected:
        raise BuildError(
            f"converting the embedding cache {legacy}: {copied} of {expected} "
            "vectors arrived; the old file is kept"
        )
    return copied


def _batches(rows: sqlite3.Cursor) -> Iterator[list[Any]]:
    while batch := rows.fetchmany(COPY_BATCH):
        yield batch


def legacy_files(legacy: Path) -> list[Path]:
    return [legacy, legacy.with_name(legacy.name + "-wal"), legacy.with_name(legacy.name + "-shm")]


def check_layout(conn: db.Connection, path: Path) -> None:
    """Refuse a file under the cache's name that is not a cache of this layout."""
    columns = [r[1] for r in conn.execute("PRAGMA table_info(vectors)")]
    if columns != ["id", "key", "v"]:
        conn.close()
        raise BuildError(
            f"{path} is not an embedding cache of this version",
            hint=f"move {path.name} aside; its vectors will be computed again",
        )


@contextlib.contextmanager
def unused(path: Path) -> Iterator[bool]:
    """Whether no process has the cache ``path`` open (then held so until the block ends): the
    exclusive lock, not waited for."""
    fd = os.open(lock_path(path), os.O_CREAT | os.O_RDWR, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)
