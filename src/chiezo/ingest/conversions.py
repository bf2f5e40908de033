"""A cache of converted documents, so rebuilding a folder re-reads only what changed.

Converting a PDF or a workbook is the slow part of building a documents source (seconds for
a slide deck; the FTS index of the result takes milliseconds). The cache maps a file's
content hash (sha1 of its bytes) and the converter version to the converted parts, in
``$CHIEZO_DATA/cache/conversions.db``; a rebuild after editing one file of a thousand converts
one file. Deleted files simply are not read again; entries unused for ``KEEP_DAYS`` are
dropped.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from pathlib import Path

from chiezo.core import db
from chiezo.core.models import Chunk, Doc
from chiezo.ingest.formats import Converted

# Bump when a converter's output changes, so cached conversions are not reused across it.
CONVERTER_VERSION = 4  # 4: PDF wraps joined, CSV titles, counter columns
KEEP_DAYS = 90

Warn = Callable[[str], None]
# reads one file's documents, saying what it skips through the Warn it is given
Produce = Callable[[Warn], Iterable[Doc]]


class ConversionCache:
    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / "conversions.db"
        self.conn = db.open_for_writing(self.path)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS conversions (hash TEXT, version INTEGER, parts TEXT, "
            "used REAL, PRIMARY KEY (hash, version)) WITHOUT ROWID"
        )
        self.hits = self.misses = 0

    def get(self, digest: str) -> list[Converted] | None:
        row = self.conn.execute(
            "SELECT parts FROM conversions WHERE hash = ? AND version = ?",
            (digest, CONVERTER_VERSION),
        ).fetchone()
        if row is None:
            self.misses += 1
            return None
        self.hits += 1
        self.conn.execute(
            "UPDATE conversions SET used = ? WHERE hash = ? AND version = ?",
            (time.time(), digest, CONVERTER_VERSION),
        )
        return [Converted(**part) for part in json.loads(row[0])]

    def put(self, digest: str, parts: list[Converted]) -> None:
        data = json.dumps([p.__dict__ for p in parts], ensure_ascii=False)
        self.conn.execute(
            "INSERT OR REPLACE INTO conversions VALUES (?, ?, ?, ?)",
            (digest, CONVERTER_VERSION, data, time.time()),
        )

    def close(self) -> None:
        self.conn.execute(
            "DELETE FROM conversions WHERE used < ?", (time.time() - KEEP_DAYS * 86400,)
        )
        self.conn.close()


# Bump when the place-table reader's output changes (ingest/places.py).
PLACE_READER_VERSION = 3  # 2: a row-number column is not a body line; 3: flag columns


class DocCache:
    """The documents a file was read into, for kinds whose reading is the slow part of a
    rebuild (a workbook of places: openpyxl parses ~3,800 rows/s, the build indexes them
    several times faster). Keyed by the file's content hash, the reader's version and whatever
    else changes the result (options, the file's label in keys); rows are stored one per
    record and streamed back, so a large file is never held whole in memory. A file read
    partway (a build that failed) is not kept."""

    def __init__(self, directory: Path):
        directory.mkdir(parents=True, exist_ok=True)
        # a file of its own: a long read holds its write transaction, which must not make a
        # documents build wait on conversions.db
        self.conn = db.open_for_writing(directory / "read_docs.db")
        self.conn.executescript(
            "CREATE TABLE IF NOT EXISTS read_files (key TEXT PRIMARY KEY, warnings TEXT, "
            "used REAL) WITHOUT ROWID;"
            "CREATE TABLE IF NOT EXISTS read_docs (key TEXT, seq INTEGER, doc TEXT, "
            "PRIMARY KEY (key, seq)) WITHOUT ROWID;"
        )
        self.hits = self.misses = 0

    def read(self, key: str, produce: Produce, warn: Warn) -> Iterator[Doc]:
        """The docs of ``key``: from the cache (its warnings said again), else from
        ``produce(warn)``, stored as they stream past."""
        row = self.conn.execute("SELECT warnings FROM read_files WHERE key = ?", (key,)).fetchone()
        if row is not None:
            self.hits += 1
            self.conn.execute("UPDATE read_files SET used = ? WHERE key = ?", (time.time(), key))
            for message in json.loads(row[0]):
                warn(message)
            for (data,) in self.conn.execute(
                "SELECT doc FROM read_docs WHERE key = ? ORDER BY seq", (key,)
            ):
                yield _doc_from_json(data)
            return
        self.misses += 1
        yield from self._stored(key, produce, warn)

    def _stored(self, key: str, produce: Produce, warn: Warn) -> Iterator[Doc]:
        said: list[str] = []

        def noted(message: str) -> None:
            said.append(message)
            warn(message)

        self.conn.execute("BEGIN")  # one transaction per file: one sync, none of it if cut
        try:
            self.conn.execute("DELETE FROM read_docs WHERE key = ?", (key,))
            for seq, doc in enumerate(produce(noted)):
                self.conn.execute(
                    "INSERT INTO read_docs VALUES (?, ?, ?)",
                    (key, seq, json.dumps(asdict(doc), ensure_ascii=False)),
                )
                yield doc
            self.conn.execute(
                "INSERT OR REPLACE INTO read_files VALUES (?, ?, ?)",
                (key, json.dumps(said, ensure_ascii=False), time.time()),
            )
        except BaseException:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")
            raise
        self.conn.execute("COMMIT")

    def close(self) -> None:
        if self.conn.in_transaction:  # a read left suspended: nothing of it is kept
            self.conn.execute("ROLLBACK")
        stale = time.time() - KEEP_DAYS * 86400
        gone = [
            k for (k,) in self.conn.execute("SELECT key FROM read_files WHERE used < ?", (stale,))
        ]
        self.conn.executemany("DELETE FROM read_docs WHERE key = ?", [(k,) for k in gone])
        self.conn.execute("DELETE FROM read_files WHERE used < ?", (stale,))
        self.conn.close()


def _doc_from_json(data: str) -> Doc:
    fields = json.loads(data)
    fields["chunks"] = [Chunk(**c) for c in fields.get("chunks") or []]
    if fields.get("point") is not None:
        fields["point"] = tuple(fields["point"])
    return Doc(**fields)
