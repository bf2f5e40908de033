"""The record of what was asked and answered (issue #34 item 5): ``DATA/logs/answers.db``.

Each answer ``ask`` and ``chat`` give — the CLI's, the API's, the web chat's (it asks through
the API) — is kept as one row: when, the question, the mode (rag or agent), the model, the
sources cited (number, source, title, link), the answer, the claim check (grounded, how many
sentences supported, unsupported, uncited), "no basis" when the library held nothing, how long
it took and which surface asked. ``chiezo logs`` lists and searches it, newest first.

It is on by default and the user's to turn off: ``chiezo logs off`` leaves a marker file
(``DATA/logs/off``) that every process reads before writing, ``chiezo logs on`` removes it,
``chiezo logs clear`` deletes every row (and VACUUMs, so the text is gone from the file).
The folder is made 0700 and the database 0600: questions can be private. A request from
beyond this machine is logged only when the server has a token (SECURITY.md): otherwise
anyone on the network could fill the owner's record.

Writes are one short transaction each (WAL, a busy timeout): several workers and a CLI command
may answer at once. A failure to write is logged and never fails the answer.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chiezo.core.query import like_pattern

log = logging.getLogger("chiezo.answers_log")

SCHEMA = """
CREATE TABLE IF NOT EXISTS answers (
    id INTEGER PRIMARY KEY,
    at TEXT NOT NULL,
    surface TEXT NOT NULL,
    question TEXT NOT NULL,
    mode TEXT NOT NULL,
    model TEXT,
    answer TEXT NOT NULL,
    cited TEXT NOT NULL,      -- JSON [{n, source, title, url, cite}]
    grounded INTEGER NOT NULL,
    no_basis INTEGER NOT NULL,
    claims TEXT NOT NULL,     -- JSON {supported, unsupported, uncited}
    seconds REAL NOT NULL
);
"""
BUSY_MS = 5000
MAX_LIST = 200


class AnswersLog:
    """The record of one data directory."""

    def __init__(self, data_dir: Path) -> None:
        self.folder = Path(data_dir) / "logs"
        self.path = self.folder / "answers.db"
        self.off_marker = self.folder / "off"

    @property
    def enabled(self) -> bool:
        return not self.off_marker.exists()

    def turn(self, on: bool) -> None:
        if on:
            self.off_marker.unlink(missing_ok=True)
        else:
            self._folder()
            self.off_marker.touch()

    def record(self, answer: dict[str, Any], *, mode: str, seconds: float, surface: str) -> None:
        """Keep one answer (``rag.Answer.to_dict()``), unless the record is off."""
        if not self.enabled:
            return
        row = (
            datetime.now(UTC).isoformat(timespec="seconds"),
            surface,
            str(answer.get("question") or ""),
            mode,
            answer.get("model"),
            str(answer.get("answer") or ""),
            json.dumps(_cited(answer), ensure_ascii=False),
            int(bool(answer.get("grounded"))),
            int(bool(answer.get("no_basis"))),
            json.dumps(_claims(answer)),
            round(seconds, 3),
        )
        try:
            with contextlib.closing(self._connect()) as conn, conn:
                conn.execute(
                    "INSERT INTO answers (at, surface, question, mode, model, answer, cited, "
                    "grounded, no_basis, claims, seconds) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                    row,
                )
        except (OSError, sqlite3.Error) as exc:  # the answer was given: it is not taken back
            log.warning("the answer was not recorded in %s: %s", self.path, exc)

    def entries(self, words: str | None = None, limit: int = 20, offset: int = 0) -> dict:
        """Newest first; ``words``: only those whose question or answer contains each word."""
        if not self.path.exists():
            return {"total": 0, "entries": [], "enabled": self.enabled}
        terms = (words or "").split()
        where = " AND ".join(
            ["(question LIKE ? ESCAPE '\\' OR answer LIKE ? ESCAPE '\\')"] * len(terms)
        )
        params: list[Any] = [p for t in terms for p in (like_pattern(t), like_pattern(t))]
        clause = f"WHERE {where}" if terms else ""
        with contextlib.closing(self._connect()) as conn:
            total = conn.execute(f"SELECT count(*) FROM answers {clause}", params).fetchone()[0]
            rows = conn.execute(
                f"SELECT * FROM answers {clause} ORDER BY id DESC LIMIT ? OFFSET ?",
                [*params, min(limit, MAX_LIST), offset],
            ).fetchall()
        return {"total": total, "entries": [_entry(r) for r in rows], "enabled": self.enabled}

    def clear(self) -> int:
        """Delete every entry; returns how many there were."""
        if not self.path.exists():
            return 0
        with contextlib.closing(self._connect()) as conn:
            with conn:
                gone = conn.execute("DELETE FROM answers").rowcount
            conn.execute("VACUUM")  # the deleted text leaves the file too
        return gone

    def _folder(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        os.chmod(self.folder, 0o700)

    def _connect(self) -> sqlite3.Connection:
        self._folder()
        if not self.path.exists():
            self.path.touch(mode=0o600)
        conn = sqlite3.connect(self.path, timeout=BUSY_MS / 1000)
        conn.row_factory = sqlite3.Row
        conn.execute("PRAGMA journal_mode=WAL")
        conn.executescript(SCHEMA)
        return conn


def _cited(answer: dict[str, Any]) -> list[dict[str, Any]]:
    cited = set(answer.get("cited") or [])
    return [
        {k: ref.get(k) for k in ("n", "source", "title", "url", "cite")}
        for ref in answer.get("references") or []
        if ref.get("n") in cited
    ]


def _claims(answer: dict[str, Any]) -> dict[str, int]:
    counts = {"supported": 0, "unsupported": 0, "uncited": 0}
    for claim in answer.get("claims") or []:
        if claim.get("status") in counts:
            counts[claim["status"]] += 1
    return counts


def _entry(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    out["cited"] = json.loads(out["cited"])
    out["claims"] = json.loads(out["claims"])
    out["grounded"], out["no_basis"] = bool(out["grounded"]), bool(out["no_basis"])
    return out
