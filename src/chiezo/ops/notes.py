"""``notes``: the one writable source (remember / recall / update / forget).

Why it differs from the other sources (the design notes call it short-term memory):

* it lives in its own directory (``$CHIEZO_DATA/notes/notes.db``), not under ``corpus/``: one
  note written must not look like a new generation of anything;
* it is written in place, one transaction per change, WAL journal with ``synchronous=FULL``: a
  note acknowledged is on disk; ``BEGIN IMMEDIATE`` plus a busy timeout serialise concurrent
  writers, threads and processes alike, so none loses a note;
* readers open it read-only but **not** ``immutable`` (an immutable reader would trust pages that
  the writer changes under it);
* recall is by time (``updated_at`` is indexed): "the thing we talked about last week" shares no
  words with the note, so ``since`` alone must work.

It has the same core tables as every built source (a test compares them), so search, doc, tags
and links work on it unchanged. Triggers keep the FTS index in step with ``docs``; the trigram
document frequencies (``gram_df``) and tag counts are refreshed for what each write touched.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import threading
from pathlib import Path
from types import TracebackType
from typing import Any

from chiezo.core import db
from chiezo.core.errors import BadQuery, NotFound
from chiezo.core.query import (
    MIN_FTS_CHARS,
    has_terms,
    like_pattern,
    match_all,
    match_any,
    parse_query,
)
from chiezo.core.schema import INDEXES, SCHEMA_VERSION, TABLES, WRITABLE_TEXT_INDEX
from chiezo.core.textnorm import normalise_title
from chiezo.search.fts import choose_grams

NAME = "notes"
KIND = "notes"
MAX_NOTE_CHARS = 200_000
MAX_TITLE_CHARS = 200
# A note's tags are labels, not content: 4,000,000 tags in one request once held the write
# lock for ~23 s (the other worker's writer timed out) and grew /admin to 65 MB.
MAX_TAGS = 50
MAX_TAG_CHARS = 100

NOTES_TABLES = """
CREATE TABLE note_times (
    doc_id     INTEGER PRIMARY KEY,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX idx_note_times_updated ON note_times(updated_at, doc_id);

CREATE TRIGGER notes_fts_insert AFTER INSERT ON docs BEGIN
    INSERT INTO docs_fts (rowid, title, aliases, body)
    VALUES (new.doc_id, new.title, new.aliases, new.body);
END;
CREATE TRIGGER notes_fts_delete AFTER DELETE ON docs BEGIN
    INSERT INTO docs_fts (docs_fts, rowid, title, aliases, body)
    VALUES ('delete', old.doc_id, old.title, old.aliases, old.body);
END;
CREATE TRIGGER notes_fts_update AFTER UPDATE ON docs BEGIN
    INSERT INTO docs_fts (docs_fts, rowid, title, aliases, body)
    VALUES ('delete', old.doc_id, old.title, old.aliases, old.body);
    INSERT INTO docs_fts (rowid, title, aliases, body)
    VALUES (new.doc_id, new.title, new.aliases, new.body);
END;
"""


def _stamp(moment: dt.datetime) -> str:
    """UTC, fixed width, so that text order is time order in the index."""
    utc = moment.astimezone(dt.UTC).isoformat(timespec="microseconds")
    return utc.replace("+00:00", "Z")


def now_iso() -> str:
    return _stamp(dt.datetime.now(dt.UTC))


_EARLIEST = dt.datetime.min.replace(tzinfo=dt.UTC)
_LATEST = dt.datetime.max.replace(tzinfo=dt.UTC)


def _parse_moment(value: str, name: str) -> dt.datetime:
    """An ISO date or date-time as a UTC moment. Moments past the calendar's ends (year 1 at
    +01:00 is still year 0 in UTC) are clamped to them: ``until=9999-12-31`` means "no end"."""
    text = str(value).strip().replace("Z", "+00:00")
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError as exc:
        raise BadQuery(
            f"{name} must be an ISO date or date-time, got {value!r}",
            hint="e.g. 2026-11-01 or 2026-11-01T09:00:00+09:00",
        ) from exc
    if moment.tzinfo is None:
        return moment.replace(tzinfo=dt.UTC)
    return _shifted(moment, dt.timedelta(0))


def _shifted(moment: dt.datetime, delta: dt.timedelta) -> dt.datetime:
    """``moment + delta`` in UTC, clamped to the representable range instead of overflowing."""
    try:
        return (moment + delta).astimezone(dt.UTC)
    except OverflowError:
        return _LATEST if moment.year > 5000 else _EARLIEST


def parse_time(value: str | None, name: str) -> str | None:
    """An ISO date or date-time (any offset; none means UTC) → the stored UTC form."""
    if value is None or str(value).strip() == "":
        return None
    return _stamp(_parse_moment(value, name))


class NotesStore:
    """The writer (one connection, serialised) and the schema of the notes file."""

    def __init__(self, directory: Path):
        self.directory = Path(directory)
        self.path = self.directory / "notes.db"
        self._lock = threading.Lock()
        self._conn: db.Connection | None = None

    @property
    def exists(self) -> bool:
        return self.path.exists()

    def _writer(self) -> db.Connection:
        if self._conn is None:
            self.directory.mkdir(parents=True, exist_ok=True)
            try:
                conn = db.open_for_writing(self.path)
                has_schema = conn.execute(
                    "SELECT 1 FROM sqlite_master WHERE name = 'meta'"
                ).fetchone()
                if not has_schema:
                    self._create(conn)
            except db.Error as exc:
                raise db.storage_problem(exc, "opening the notes") or exc from exc
            self._conn = conn
        return self._conn

    def ensure(self) -> None:
        with self._lock:
            self._writer()

    def _create(self, conn: db.Connection) -> None:
        conn.execute("BEGIN IMMEDIATE")
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
            conn.execute("COMMIT")  # another process created it meanwhile
            return
        for statement in db.statements(TABLES + WRITABLE_TEXT_INDEX + INDEXES + NOTES_TABLES):
            conn.execute(statement)
        meta = {
            "schema_version": SCHEMA_VERSION,
            "source": NAME,
            "kind": KIND,
            "language": "",
            "built_at": now_iso(),
            "generation": "notes.db",
            "input": json.dumps({"path": str(self.path)}),
            "attributes": "[]",
            "last_note_id": 0,
        }
        conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)", [(k, str(v)) for k, v in meta.items()]
        )
        conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- writes ------------------------------------------------------------------------------

    def remember(self, text: str, title: str | None = None, tags: list[str] | None = None) -> int:
        text = _check_text(text)
        title = _title(title, text)
        tags = _check_tags(tags)
        with self._lock, _transaction(self._writer()) as conn:
            note_id = int(_meta(conn, "last_note_id")) + 1
            conn.execute("UPDATE meta SET value = ? WHERE key = 'last_note_id'", (str(note_id),))
            stamp = now_iso()
            conn.execute(
                "INSERT INTO docs (doc_id, key, title, rank_score, opening, body) "
                "VALUES (?, ?, ?, 0, ?, ?)",
                (note_id, f"note-{note_id}", title, _opening(text), text),
            )
            conn.execute(
                "INSERT INTO titles (norm, doc_id, is_alias) VALUES (?, ?, 0)",
                (normalise_title(title), note_id),
            )
            conn.executemany(
                "INSERT INTO doc_tags (tag, doc_id) VALUES (?, ?)", [(t, note_id) for t in tags]
            )
            conn.execute("INSERT INTO note_times VALUES (?, ?, ?)", (note_id, stamp, stamp))
            _refresh_counts(conn, _grams(title, text), tags)
        return note_id

    def update(
        self,
        note_id: int,
        *,
        text: str | None = None,
        title: str | None = None,
        tags: list[str] | None = None,
    ) -> None:
        """Change only the fields given."""
        if text is None and title is None and tags is None:
            raise BadQuery("nothing to update", hint="send text, title and/or tags")
        with self._lock, _transaction(self._writer()) as conn:
            old_title, old_text = _title_and_text(conn, note_id)
            new_text = old_text if text is None else _check_text(text)
            if title is not None:
                new_title = _title(title, new_text)
            elif old_title == _title(None, old_text):  # derived from the text: follow it
                new_title = _title(None, new_text)
            else:
                new_title = old_title
            touched_grams = _grams(old_title, old_text) | _grams(new_title, new_text)
            conn.execute(
                "UPDATE docs SET title = ?, opening = ?, body = ? WHERE doc_id = ?",
                (new_title, _opening(new_text), new_text, note_id),
            )
            conn.execute("DELETE FROM titles WHERE doc_id = ?", (note_id,))
            conn.execute(
                "INSERT INTO titles (norm, doc_id, is_alias) VALUES (?, ?, 0)",
                (normalise_title(new_title), note_id),
            )
            touched_tags: set[str] = set()
            if tags is not None:
                new_tags = _check_tags(tags)
                touched_tags = {
                    r[0]
                    for r in conn.execute("SELECT tag FROM doc_tags WHERE doc_id = ?", (note_id,))
                } | set(new_tags)
                conn.execute("DELETE FROM doc_tags WHERE doc_id = ?", (note_id,))
                conn.executemany(
                    "INSERT INTO doc_tags (tag, doc_id) VALUES (?, ?)",
                    [(t, note_id) for t in new_tags],
                )
            conn.execute(
                "UPDATE note_times SET updated_at = ? WHERE doc_id = ?", (now_iso(), note_id)
            )
            _refresh_counts(conn, touched_grams, touched_tags)

    def forget(self, note_id: int) -> None:
        with self._lock, _transaction(self._writer()) as conn:
            row = _title_and_text(conn, note_id)
            tags = {
                r[0] for r in conn.execute("SELECT tag FROM doc_tags WHERE doc_id = ?", (note_id,))
            }
            for table in (
                "docs",
                "titles",
                "doc_tags",
                "note_times",
                "doc_links",
                "doc_attrs",
                "chunks",
            ):
                conn.execute(f"DELETE FROM {table} WHERE doc_id = ?", (note_id,))
            _refresh_counts(conn, _grams(*row), tags)


class _transaction:
    """``BEGIN IMMEDIATE`` … ``COMMIT``, rolled back on any error: takes the write lock up front
    so two writers queue (busy timeout) instead of failing half-way."""

    def __init__(self, conn: db.Connection):
        self.conn = conn

    def __enter__(self) -> db.Connection:
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except db.Error as exc:
            raise db.storage_problem(exc, "saving the note") or exc from exc
        return self.conn

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc is None:  # Python passes all three or none
            try:
                self.conn.execute("COMMIT")
                return
            except db.Error as failed:
                exc = failed
        with contextlib.suppress(db.Error):  # SQLite may have rolled back already (SQLITE_FULL)
            self.conn.execute("ROLLBACK")
        problem = db.storage_problem(exc, "saving the note")
        if problem is not None:
            raise problem from exc
        if exc_type is None:
            raise exc


def _title_and_text(conn: db.Connection, note_id: int) -> tuple[str, str]:
    row = conn.execute("SELECT title, body FROM docs WHERE doc_id = ?", (note_id,)).fetchone()
    if row is None:
        raise NotFound(f"there is no note {note_id}")
    return row


def _meta(conn: db.Connection, key: str) -> str:
    return conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()[0]


def _refresh_counts(conn: db.Connection, grams: set[str], tags: set[str] | list[str]) -> None:
    """Re-read the document frequency of the trigrams and tags a write touched."""
    listed = list(grams)
    if listed:
        conn.execute(
            "CREATE VIRTUAL TABLE IF NOT EXISTS temp.notes_vocab "
            "USING fts5vocab(main, docs_fts, row)"
        )
        for start in range(0, len(listed), 500):
            part = listed[start : start + 500]
            marks = ",".join("?" * len(part))
            conn.execute(f"DELETE FROM gram_df WHERE gram IN ({marks})", part)
            conn.execute(
                f"INSERT INTO gram_df (gram, df) SELECT term, doc FROM temp.notes_vocab "
                f"WHERE term IN ({marks})",
                part,
            )
    for tag in set(tags):
        conn.execute("DELETE FROM tag_counts WHERE tag = ?", (tag,))
        conn.execute(
            "INSERT INTO tag_counts (tag, n) SELECT tag, count(*) FROM doc_tags WHERE tag = ? "
            "GROUP BY tag",
            (tag,),
        )


def _grams(title: str, text: str) -> set[str]:
    """Every trigram the FTS index may hold for this note (it indexes punctuation and spaces
    too); the counts themselves are read back from the index."""
    grams: set[str] = set()
    for field in (title, text):
        folded = field.lower()
        grams.update(folded[i : i + MIN_FTS_CHARS] for i in range(len(folded) - MIN_FTS_CHARS + 1))
    return grams


def _check_text(text: str | None) -> str:
    if text is None or not str(text).strip():
        raise BadQuery("a note needs text", hint="write the content itself: names, numbers, items")
    text = str(text).strip()
    if len(text) > MAX_NOTE_CHARS:
        raise BadQuery(f"a note may hold at most {MAX_NOTE_CHARS:,} characters, got {len(text):,}")
    return text


def _title(title: str | None, text: str) -> str:
    if title is not None and str(title).strip():
        return " ".join(str(title).split())[:MAX_TITLE_CHARS]
    first_line = next((line.strip() for line in text.splitlines() if line.strip()), text)
    return first_line[:60] + ("…" if len(first_line) > 60 else "")


def _check_tags(tags: list[str] | None) -> list[str]:
    if tags is None:
        return []
    if isinstance(tags, str):
        tags = [tags]
    if len(tags) > MAX_TAGS * 4:  # refused before any work, duplicates or not
        raise BadQuery(f"a note may have at most {MAX_TAGS} tags, got {len(tags):,}")
    cleaned = list(dict.fromkeys(str(t).strip() for t in tags if str(t).strip()))
    if len(cleaned) > MAX_TAGS:
        raise BadQuery(f"a note may have at most {MAX_TAGS} tags, got {len(cleaned):,}")
    long = next((t for t in cleaned if len(t) > MAX_TAG_CHARS), None)
    if long is not None:
        raise BadQuery(
            f"a tag may be at most {MAX_TAG_CHARS} characters, got {len(long):,}",
            hint="a tag is a short label; put the content in the text",
        )
    return cleaned


def _opening(text: str) -> str:
    paragraph = text.strip().split("\n\n", 1)[0]
    return paragraph[:400]


def note_row(
    conn: db.Connection, note_id: int, max_chars: int | None = None
) -> dict[str, Any] | None:
    """One note as the API returns it."""
    row = conn.execute(
        "SELECT d.doc_id, d.title, d.body, t.created_at, t.updated_at FROM docs d "
        "JOIN note_times t ON t.doc_id = d.doc_id WHERE d.doc_id = ?",
        (note_id,),
    ).fetchone()
    if row is None:
        return None
    doc_id, title, body, created, updated = row
    out: dict[str, Any] = {
        "id": doc_id,
        "title": title,
        "text": body if max_chars is None else body[:max_chars],
        "tags": [
            r[0]
            for r in conn.execute(
                "SELECT tag FROM doc_tags WHERE doc_id = ? ORDER BY tag", (doc_id,)
            )
        ],
        "created_at": created,
        "updated_at": updated,
    }
    if max_chars is not None and len(body) > max_chars:
        out["truncated"] = True
        out["chars"] = len(body)
    return out


def recall(
    conn: db.Connection,
    *,
    q: str | None = None,
    since: str | None = None,
    until: str | None = None,
    tag: str | None = None,
    limit: int,
    offset: int,
    max_chars: int | None = None,
) -> dict[str, Any]:
    """Notes newest first (by last change), narrowed by time, tag and/or text.

    ``since`` alone is the way to find "what we discussed last week": no words needed. With
    ``q`` every term must occur; when none does, notes sharing the query's rarer trigrams are
    returned instead (mode ``trigram_or``), as for any source."""
    clauses, params = [], []
    since_at, until_at = parse_time(since, "since"), _until(until)
    if since_at:
        clauses.append("t.updated_at >= ?")
        params.append(since_at)
    if until_at:
        clauses.append("t.updated_at < ?")
        params.append(until_at)
    if tag:
        clauses.append("t.doc_id IN (SELECT doc_id FROM doc_tags WHERE tag = ?)")
        params.append(tag)
    plan = "time"  # how the notes were found: the result's ``mode``
    if q is not None and has_terms(q):  # a q of spaces or control characters narrows nothing
        query = parse_query(q)
        text_clauses, text_params = [], []
        if query.long_terms:
            text_clauses.append("t.doc_id IN (SELECT rowid FROM docs_fts WHERE docs_fts MATCH ?)")
            text_params.append(match_all(query.long_terms))
        for term in query.short_terms:
            text_clauses.append(
                "t.doc_id IN (SELECT doc_id FROM docs WHERE title LIKE ? ESCAPE '\\' "
                "OR body LIKE ? ESCAPE '\\')"
            )
            text_params += [like_pattern(term)] * 2
        plan = "fts"
        if not _count(conn, clauses + text_clauses, params + text_params):
            doc_count = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
            grams = choose_grams(conn, query.text, doc_count)
            if grams:
                text_clauses = ["t.doc_id IN (SELECT rowid FROM docs_fts WHERE docs_fts MATCH ?)"]
                text_params = [match_any(grams)]
                plan = "trigram_or"
        clauses, params = clauses + text_clauses, params + text_params
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    total = _count(conn, clauses, params)
    ids = [
        r[0]
        for r in conn.execute(
            f"SELECT t.doc_id FROM note_times t {where} "
            "ORDER BY t.updated_at DESC, t.doc_id DESC LIMIT ? OFFSET ?",
            (*params, limit, offset),
        )
    ]
    notes = [n for n in (note_row(conn, i, max_chars) for i in ids) if n is not None]
    return {"total": total, "mode": plan, "offset": offset, "limit": limit, "notes": notes}


def _count(conn: db.Connection, clauses: list[str], params: list) -> int:
    where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
    return conn.execute(f"SELECT count(*) FROM note_times t {where}", params).fetchone()[0]


def _until(value: str | None) -> str | None:
    """``until`` is inclusive: a bare date means up to the end of that day."""
    if value is None or not str(value).strip():
        return None
    moment = _parse_moment(value, "until")
    is_date = len(str(value).strip()) == 10
    step = dt.timedelta(days=1) if is_date else dt.timedelta(microseconds=1)
    return _stamp(_shifted(moment, step))
