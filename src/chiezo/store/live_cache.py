"""A live source's cache (``gen-….db.live``, beside its registration): what its server
answered — each hit, then each document's text when first asked for — in the generation
schema, so that every read path reads it as it reads a built source (store/library.py
``LiveSource``). A cache, not an index: searches always ask the server.

It is bounded whatever the server answers and however long a server runs: the text of the
documents read last (``Bounds.read``), the hits seen last (``Bounds.hits``) and its bytes
(``Bounds.bytes``), the oldest let go a tenth at a time; the pages let go leave the file
(incremental auto-vacuum). A hostile feed grew a cache from 176 to 209 MB in six searches;
``compact`` (run by ``chiezo gc``) brings one within its bounds and gives its free pages back.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from chiezo.core import db
from chiezo.core.models import Doc, Hit
from chiezo.core.textnorm import normalise_title

SUFFIX = ".live"  # the cache of generation gen-….db is gen-….db.live


def path_of(registration: Path) -> Path:
    return registration.with_name(registration.name + SUFFIX)


def caches_in(folder: Path) -> list[Path]:
    """The caches of the generations in a source's folder (a live source has one a
    generation; a built source none)."""
    return sorted(folder.glob(f"*{SUFFIX}"))


# When each hit was last seen: the oldest are forgotten first.
SEEN_TABLE = "CREATE TABLE IF NOT EXISTS seen (doc_id INTEGER PRIMARY KEY, at REAL NOT NULL)"
TEXT_TABLES = ("chunks", "titles", "reads", "seen", "docs")  # what a document has here


@dataclass(frozen=True)
class Bounds:
    read: int = 2000  # documents whose text is kept (a real article: 10-100 KB)
    hits: int = 20_000  # hits kept (each a title, a path and a passage: ~1 KB)
    bytes: int = 256 * 2**20


def create(registration_meta: dict[str, str], cache: Path) -> None:
    """A new cache with the registration's meta. Made aside and linked in, so that two
    workers opening the source at once keep one cache."""
    from chiezo.core.schema import INDEXES, TABLES, TEXT_INDEXES

    tmp = cache.with_name(f".{cache.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.unlink(missing_ok=True)
    conn = db.open_cache(tmp, auto_vacuum=True)
    try:
        conn.executescript(TABLES + TEXT_INDEXES + INDEXES)
        conn.execute("CREATE TABLE reads (doc_id INTEGER PRIMARY KEY, at REAL NOT NULL)")
        conn.execute(SEEN_TABLE)
        conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", registration_meta.items())
    finally:
        conn.close()
    try:
        os.link(tmp, cache)
    except FileExistsError:
        pass  # another worker's is in place
    finally:
        tmp.unlink(missing_ok=True)


@contextlib.contextmanager
def writing(path: Path, bounds: Bounds):
    """A write transaction on the cache at ``path``, which leaves it within ``bounds``."""
    conn = db.open_cache(path)
    try:
        conn.execute("BEGIN IMMEDIATE")
        _date_hits(conn)
        yield conn
        freed = bound(conn, bounds)
        conn.execute("COMMIT")
        if freed:
            conn.execute("PRAGMA incremental_vacuum")  # the pages let go, back to the disk
    finally:
        conn.close()


def record(conn: db.Connection, hit: Hit) -> None:
    """A hit as a document: its path as key, its passage as the opening (what the merge
    across sources weighs, until its text is read)."""
    conn.execute(
        "INSERT INTO docs (doc_id, key, title, url, opening) VALUES (?, ?, ?, ?, ?) "
        "ON CONFLICT (doc_id) DO UPDATE SET url = coalesce(excluded.url, url)",
        (hit.doc_id, hit.key, hit.title, hit.url, hit.snippet),
    )
    conn.execute(
        "INSERT OR IGNORE INTO titles (norm, doc_id) VALUES (?, ?)",
        (normalise_title(hit.title), hit.doc_id),
    )
    conn.execute(
        "INSERT OR REPLACE INTO seen (doc_id, at) VALUES (?, ?)", (hit.doc_id, time.time())
    )


def store_text(conn: db.Connection, doc_id: int, doc: Doc | None) -> None:
    """A document's text and passages, read from the server (None: it has none there —
    remembered, not asked again)."""
    from chiezo.store.chunk_text import stored_rows

    conn.execute("INSERT OR REPLACE INTO reads (doc_id, at) VALUES (?, ?)", (doc_id, time.time()))
    if doc is None:
        return
    conn.execute(
        "UPDATE docs SET body = ?, opening = ?, url = coalesce(url, ?) WHERE doc_id = ?",
        (doc.body, doc.opening or "", doc.url, doc_id),
    )
    conn.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
    rows = stored_rows(doc.body, ((c.heading_path, c.text) for c in doc.chunks))
    conn.executemany(
        "INSERT INTO chunks (doc_id, ord, heading_path, spans, text) VALUES (?, ?, ?, ?, ?)",
        [(doc_id, i, heading, spans, text) for i, (heading, text, spans) in enumerate(rows)],
    )


def bound(conn: db.Connection, bounds: Bounds) -> bool:
    """Let go of what is beyond ``bounds``, oldest first; whether anything went."""
    freed = False
    if (hits := _count(conn, "seen")) > bounds.hits:
        _forget(conn, hits - bounds.hits * 9 // 10)
        freed = True
    if (read := _count(conn, "reads")) > bounds.read:
        _let_go(conn, max(read // 10, 1))
        freed = True
    for _ in range(20):  # a tenth at a time: 20 tenths let go of everything
        if used_bytes(conn) <= bounds.bytes:
            break
        if read := _count(conn, "reads"):
            _let_go(conn, max(read // 10, 1))
        elif hits := _count(conn, "seen"):
            _forget(conn, max(hits // 10, 1))
        else:
            break  # nothing left to let go: the schema alone is that large
        freed = True
    return freed


def _count(conn: db.Connection, table: str) -> int:
    return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]


def _forget(conn: db.Connection, count: int) -> None:
    """The ``count`` hits seen longest ago, gone (a search finds them again)."""
    old = [r[0] for r in conn.execute("SELECT doc_id FROM seen ORDER BY at LIMIT ?", (count,))]
    marks = ",".join("?" * len(old))
    for table in TEXT_TABLES:
        conn.execute(f"DELETE FROM {table} WHERE doc_id IN ({marks})", old)


def _let_go(conn: db.Connection, count: int) -> None:
    """The text of the ``count`` documents read longest ago, gone (read again when asked)."""
    old = [r[0] for r in conn.execute("SELECT doc_id FROM reads ORDER BY at LIMIT ?", (count,))]
    marks = ",".join("?" * len(old))
    conn.execute(f"UPDATE docs SET body = '' WHERE doc_id IN ({marks})", old)
    conn.execute(f"DELETE FROM chunks WHERE doc_id IN ({marks})", old)
    conn.execute(f"DELETE FROM reads WHERE doc_id IN ({marks})", old)


def _date_hits(conn: db.Connection) -> None:
    """Give a cache made before hits were dated its ``seen`` table, its hits the oldest."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'seen'").fetchone() is None:
        conn.execute(SEEN_TABLE)
        conn.execute("INSERT OR IGNORE INTO seen (doc_id, at) SELECT doc_id, 0 FROM docs")


def used_bytes(conn: db.Connection) -> int:
    """The bytes of the pages that hold something (free pages are not counted)."""
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    free = conn.execute("PRAGMA freelist_count").fetchone()[0]
    return (pages - free) * conn.execute("PRAGMA page_size").fetchone()[0]


# -- for chiezo gc -------------------------------------------------------------------------------


def reclaimable(path: Path, bounds: Bounds) -> int:
    """The bytes ``compact`` would give back: its free pages, and what is beyond the bounds;
    all of a cache made before its pages were given back as they go (it is rewritten)."""
    try:
        conn = db.open_readonly(path, immutable=False)
        try:
            size = path.stat().st_size + _wal_size(path)
            used = used_bytes(conn)
            incremental = conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 2
        finally:
            conn.close()
    except (OSError, db.Error):
        return 0
    if not incremental:
        return size - min(used, bounds.bytes)
    return max(size - used, 0) + max(used - bounds.bytes, 0)


def _wal_size(path: Path) -> int:
    wal = path.with_name(path.name + "-wal")
    return wal.stat().st_size if wal.exists() else 0


def compact(path: Path, bounds: Bounds, *, empty: bool = False) -> None:
    """Bring the cache within ``bounds`` (``empty``: let go of everything) and give its free
    pages back, its pages given back as they go from then on. Raises ``db.Error`` when a
    server is writing it at that moment."""
    with writing(path, bounds) as conn:
        if empty:
            for table in TEXT_TABLES:
                conn.execute(f"DELETE FROM {table}")
    conn = db.open_cache(path)
    try:
        conn.execute("PRAGMA auto_vacuum = INCREMENTAL")
        conn.execute("VACUUM")  # the only way to change the mode of a cache made before
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
