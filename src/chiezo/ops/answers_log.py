"""The record of what was asked and answered: ``DATA/logs/answers.db``.

Each answer ``ask`` and ``chat`` give — the CLI's, the API's, the web chat's (it asks through
the API) — is kept as one row: when, the question, the mode (rag or agent), the model, the
sources cited (number, source, title, link), the answer, the claim check (grounded, how many
sentences supported, unsupported, uncited), "no basis" when the library held nothing, how long
it took and which surface asked, and each model call's timings (``calls``: stage, seconds, first
token, tokens in and out where the endpoint says, how it finished) and its ``stages``, the
timeline of where the time went (plan, each search, the excerpts, each tool call, each model
call: answer/rag.py ``timeline``). An ask that failed is kept too (a record of answers alone
kept 1 of 8 asks on a small model), with its ``cause`` (the error's: timeout, unreachable,
context_exceeded…), its message in ``error``, what was written before it failed and the calls
and stages made; an answer the model did not finish (stopped at a loop, cut by its deadline)
is kept with why as its ``cause`` and no ``error``. A whole answer's cause is null.
``chiezo logs`` lists and searches it, newest first.

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
import re
import sqlite3
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chiezo.core.errors import ChiezoError
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
    seconds REAL NOT NULL,
    cause TEXT,               -- null: answered; else why it failed (the error's cause)
    error TEXT,               -- the failure's message
    calls TEXT,               -- JSON [{stage, seconds, first_token_s, tokens_in, tokens_out, finish}]
    stages TEXT               -- JSON [{stage, name, seconds, tokens_in, tokens_out}], in order
);
"""
# columns added since the first schema: an older answers.db gains them when next opened
ADDED = {"cause": "TEXT", "error": "TEXT", "calls": "TEXT", "stages": "TEXT"}
COLUMNS = (
    "at, surface, question, mode, model, answer, cited, grounded, no_basis, claims, seconds, "
    "cause, error, calls, stages"
)
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
        """Keep one answer (``rag.Answer.to_dict()``), unless the record is off; one the model
        did not finish (its ``stopped``: loop, timeout, cut_short…) has that as its cause."""
        stopped = answer.get("stopped")
        self._keep(
            (
                str(answer.get("question") or ""),
                mode,
                answer.get("model"),
                str(answer.get("answer") or ""),
                json.dumps(_cited(answer), ensure_ascii=False),
                int(bool(answer.get("grounded"))),
                int(bool(answer.get("no_basis"))),
                json.dumps(_claims(answer)),
                round(seconds, 3),
                stopped if isinstance(stopped, str) and stopped else None,
                None,
                _calls(answer.get("calls")),
                _calls(answer.get("stages")),
            ),
            surface,
        )

    def record_failure(
        self,
        question: str,
        *,
        mode: str,
        seconds: float,
        surface: str,
        cause: str,
        message: str,
        calls: list[dict[str, Any]] | None = None,
        model: str | None = None,
        answer: str = "",
        stages: list[dict[str, Any]] | None = None,
    ) -> None:
        """Keep an ask that failed: its ``cause`` and ``message``, the model ``calls`` and the
        ``stages`` before it did and ``answer``, the text written before it (a stream cut
        short)."""
        self._keep(
            (
                str(question or ""),
                mode,
                model,
                str(answer or ""),
                "[]",
                0,
                0,
                json.dumps(_claims({})),
                round(seconds, 3),
                str(cause or "error"),
                str(message or ""),
                _calls(calls),
                _calls(stages),
            ),
            surface,
        )

    def record_error(
        self,
        question: str,
        error: Any,
        *,
        mode: str,
        seconds: float,
        surface: str,
        model: str | None = None,
        answer: str = "",
    ) -> None:
        """``record_failure`` with what ``error`` says (:func:`failure_of`: an exception or
        a stream's ``error`` event); ``model``: the configured one, where the error names none."""
        found = failure_of(error)
        self.record_failure(
            question,
            mode=mode,
            seconds=seconds,
            surface=surface,
            cause=found["cause"],
            message=found["message"],
            calls=found["calls"],
            model=found["model"] or model,
            answer=answer,
            stages=_extras(error).get("stages"),
        )

    def _keep(self, row: tuple, surface: str) -> None:
        if not self.enabled:
            return
        at = datetime.now(UTC).isoformat(timespec="seconds")
        try:
            with contextlib.closing(self._connect()) as conn, conn:
                conn.execute(
                    f"INSERT INTO answers ({COLUMNS}) VALUES ({','.join('?' * (len(row) + 2))})",
                    (at, surface, *row),
                )
        except (OSError, sqlite3.Error) as exc:  # the answer was given: it is not taken back
            log.warning("the answer was not recorded in %s: %s", self.path, exc)

    def entries(
        self, words: str | None = None, limit: int = 20, offset: int = 0, *, failed: bool = False
    ) -> dict:
        """Newest first; ``words``: only those whose question, answer or error contains each
        word; ``failed``: only the asks that failed. ``failures``: how many of ``total``
        failed."""
        if not self.path.exists():
            return {"total": 0, "failures": 0, "entries": [], "enabled": self.enabled}
        terms = (words or "").split()
        match = (
            "(question LIKE ? ESCAPE '\\' OR answer LIKE ? ESCAPE '\\' OR error LIKE ? ESCAPE '\\')"
        )
        conditions = [match] * len(terms) + (["cause IS NOT NULL"] if failed else [])
        params: list[Any] = [like_pattern(t) for t in terms for _ in range(3)]
        clause = f"WHERE {' AND '.join(conditions)}" if conditions else ""
        with contextlib.closing(self._connect()) as conn:
            total, failures = conn.execute(
                f"SELECT count(*), count(cause) FROM answers {clause}", params
            ).fetchone()
            rows = conn.execute(
                f"SELECT * FROM answers {clause} ORDER BY id DESC LIMIT ? OFFSET ?",
                [*params, min(limit, MAX_LIST), offset],
            ).fetchall()
        return {
            "total": total,
            "failures": failures,
            "entries": [_entry(r) for r in rows],
            "enabled": self.enabled,
        }

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
        _migrate(conn)
        return conn


def _migrate(conn: sqlite3.Connection) -> None:
    """Add the columns an answers.db made before them lacks (its rows keep theirs: answers,
    so null causes). Two processes may both try: the loser's "duplicate column" is no error."""
    have = {row[1] for row in conn.execute("PRAGMA table_info(answers)")}
    for name, kind in ADDED.items():
        if name in have:
            continue
        try:
            conn.execute(f"ALTER TABLE answers ADD COLUMN {name} {kind}")
        except sqlite3.OperationalError as exc:
            if "duplicate column" not in str(exc):
                raise


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


def _calls(calls: Any) -> str | None:
    """The model calls (or the stages) as given (the answering code decides their fields),
    JSON; None when there are none to keep."""
    if not isinstance(calls, list | tuple) or not calls:
        return None
    kept = [c.to_dict() if hasattr(c, "to_dict") else c for c in calls]  # llm.Call or its dict
    return json.dumps([c for c in kept if isinstance(c, dict)], ensure_ascii=False, default=str)


def failure_of(error: Any) -> dict[str, Any]:
    """``record_failure``'s ``cause``, ``message``, ``calls`` and ``model`` from what an ask
    failed with: a ChiezoError, its ``to_dict()`` (a stream's ``error`` event) or any other
    exception (a bug: its type, as the client is told)."""
    if isinstance(error, dict):
        said = error
        cause = said.get("cause") or "error"
        message = said.get("error")
    elif isinstance(error, ChiezoError):
        said = error.extras
        cause = said.get("cause") or _snake(type(error).__name__)
        message = error.message
    else:
        said, cause, message = {}, "internal_error", f"internal error ({type(error).__name__})"
    model = said.get("model")
    return {
        "cause": str(cause),
        "message": str(message or cause),
        "calls": said.get("calls"),
        "model": model if isinstance(model, str) else None,
    }


def _extras(error: Any) -> dict[str, Any]:
    """What a failure carries besides its message (a stream's ``error`` event is one)."""
    if isinstance(error, dict):
        return error
    return error.extras if isinstance(error, ChiezoError) else {}


def _snake(name: str) -> str:
    """``LLMNotConfigured`` → ``llm_not_configured``: an error without a cause, by its kind."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", "_", name).lower()


def _entry(row: sqlite3.Row) -> dict[str, Any]:
    out = dict(row)
    out["cited"] = json.loads(out["cited"])
    out["claims"] = json.loads(out["claims"])
    out["grounded"], out["no_basis"] = bool(out["grounded"]), bool(out["no_basis"])
    out["calls"] = json.loads(out["calls"]) if out.get("calls") else []
    out["stages"] = json.loads(out["stages"]) if out.get("stages") else []
    out["failed"] = out.get("cause") is not None  # no whole answer: an error, or stopped
    return out
