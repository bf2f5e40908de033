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
from pathlib import Path

from .. import db
from .formats import Converted

# Bump when a converter's output changes, so cached conversions are not reused across it.
CONVERTER_VERSION = 3
KEEP_DAYS = 90


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
        self.conn.execute("UPDATE conversions SET used = ? WHERE hash = ? AND version = ?",
                          (time.time(), digest, CONVERTER_VERSION))  # fmt: skip
        return [Converted(**part) for part in json.loads(row[0])]

    def put(self, digest: str, parts: list[Converted]) -> None:
        data = json.dumps([p.__dict__ for p in parts], ensure_ascii=False)
        self.conn.execute("INSERT OR REPLACE INTO conversions VALUES (?, ?, ?, ?)",
                          (digest, CONVERTER_VERSION, data, time.time()))  # fmt: skip

    def close(self) -> None:
        self.conn.execute("DELETE FROM conversions WHERE used < ?",
                          (time.time() - KEEP_DAYS * 86400,))  # fmt: skip
        self.conn.close()
