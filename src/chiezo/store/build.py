"""Building a source: a new generation file, validated, then switched in atomically.

The flow (``GenerationBuilder``):

1. preflight — free disk and memory are checked before anything is written;
2. stream — sources ``add()`` Doc records; they land in a *staging* file next to the new
   generation, in arrival order, in batches;
3. order — every doc gets its doc_id = popularity ordinal (rank_score descending), and the docs
   and their tags, links, attributes, coordinates and chunks are copied into the generation file
   in that order (see core/schema.py for why the ordinal matters);
4. index — secondary indexes, the FTS5 trigram index, the trigram document-frequency table,
   per-tag and per-attribute counts, the rank vector;
5. validate — integrity check, FTS consistency, minimum doc count, a shrink guard against the
   current generation, and sample titles that must be findable through the same lookups search
   uses;
6. switch — rename the file into place, repoint ``current``, keep exactly one previous generation.

Any failure removes the new generation's files and leaves ``current`` untouched.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import sys
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from chiezo.core import db
from chiezo.core.config import Settings
from chiezo.core.errors import BuildError, ChiezoError, StorageFull
from chiezo.core.models import Doc
from chiezo.core.progress import NullProgress, Progress, ticking
from chiezo.core.query import MIN_FTS_CHARS, match_in_columns, phrase
from chiezo.core.schema import INDEXES, SCHEMA_VERSION, TABLES, TEXT_INDEXES, WORDS_AND_TRIGRAMS
from chiezo.core.textnorm import normalise_title
from chiezo.core.words import fold
from chiezo.store import chunk_text, generations
from chiezo.store.wordindex import Splitter, SplitterFactory, WordSplitter, load_words

BATCH_DOCS = 1000
COPY_BATCH = 20_000
MIN_FREE_MEMORY = 512 * 2**20
# A generation takes roughly 3x its input text (docs + FTS index + chunks), plus the staging
# copy while it is built; measured figures are in docs/design.md.
DISK_FACTOR = 5.0
DISK_MARGIN = 64 * 2**20
SAMPLE_TITLES = 20

STAGE_TABLES = """
CREATE TABLE stage.docs (
    seq INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE, title TEXT NOT NULL, rank_score REAL,
    url TEXT, aliases TEXT, opening TEXT, extra TEXT, body TEXT
);
CREATE TABLE stage.titles (seq INTEGER, norm TEXT, is_alias INTEGER);
CREATE TABLE stage.tags (seq INTEGER, tag TEXT);
CREATE TABLE stage.links (seq INTEGER, target TEXT);
CREATE TABLE stage.attrs (seq INTEGER, name TEXT, value TEXT);
CREATE TABLE stage.points (seq INTEGER, lat REAL, lon REAL);
CREATE TABLE stage.chunks (seq INTEGER, ord INTEGER, heading_path TEXT, spans TEXT, text TEXT);
CREATE TABLE stage.late_aliases (target TEXT, alias TEXT);
"""


@dataclass
class BuildOptions:
    # 0 only for a generation that registers a source searched live (ingest/kiwix.py): the
    # command line's --min-docs starts at 1
    min_docs: int = 1
    allow_shrink: bool = False
    shrink_ratio: float = 0.5  # refuse a generation with fewer docs than this share of current
    full_validation: bool = True  # integrity_check + FTS integrity-check; quick_check otherwise
    language: str | None = None
    # the word index beside the trigram one (store/wordindex.py); off only to measure its cost
    word_index: bool = True
    # where the words are split (store/wordindex.py): None for this machine's processes
    word_splitter: SplitterFactory | None = None


@dataclass
class BuildReport:
    name: str
    kind: str
    path: Path
    docs: int
    chunks: int
    seconds: float
    size_bytes: int
    previous: Path | None
    warnings: list[str] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    embedding: dict[str, Any] | None = None  # the embed step that followed, if any
    conversions: dict[str, int] | None = None  # documents: files converted vs from the cache
    # how inputs were read, by topic: {"article points": {"title": 120, "unreadable": 2}}
    tallies: dict[str, dict[str, int]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "path": str(self.path),
            "docs": self.docs,
            "chunks": self.chunks,
            "seconds": round(self.seconds, 3),
            "size_bytes": self.size_bytes,
            "previous": str(self.previous) if self.previous else None,
            "warnings": self.warnings,
            "timings": {k: round(v, 3) for k, v in self.timings.items()},
            "embedding": self.embedding,
            "conversions": self.conversions,
            "tallies": self.tallies,
        }


class GenerationBuilder:
    # the phase under way, for its timing (unset until the first phase: see _end_phase)
    _phase_name: str | None
    _phase_started: float

    def __init__(
        self,
        settings: Settings,
        name: str,
        kind: str,
        *,
        input_identity: dict[str, Any] | None = None,
        options: BuildOptions | None = None,
        progress: Progress | None = None,
        expected_bytes: int | None = None,
    ):
        self.name = generations.check_name(name)
        self.kind = kind
        self.settings = settings
        self.directory = generations.source_dir(settings.corpus_dir, name)
        self.identity = input_identity or {}
        self.options = options or BuildOptions()
        self.progress = progress or NullProgress()
        self._ticking: contextlib.ExitStack | None = None  # the heartbeat while the builder is open
        self._count_docs = True  # the reading phase counts documents (start_reading)
        self.expected_bytes = expected_bytes
        self.warnings: list[str] = []
        self.tallies: dict[str, dict[str, int]] = {}
        self.timings: dict[str, float] = {}
        self._conn: db.Connection | None = None
        self._seq = 0
        self._batch: dict[str, list[tuple]] = {}
        self._finished = False
        self._started = time.monotonic()
        self._before_order: list[Callable[[db.Connection], None]] = []
        self._splitter: Splitter | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def __enter__(self) -> GenerationBuilder:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._held_lock = generations.BuildLock(self.directory).__enter__()
        try:
            generations.remove_debris(self.directory)
            self._preflight()
            final_name = generations.new_generation_name()
            self.final_path = self.directory / final_name
            self.path = self.directory / (final_name + generations.BUILDING_SUFFIX)
            self.stage_path = self.directory / (final_name + generations.BUILDING_SUFFIX + ".stage")
            # Sorting spills go next to the data, never to a RAM-backed /tmp.
            os.environ.setdefault("SQLITE_TMPDIR", str(self.settings.corpus_dir))
            self._conn = db.open_for_build(self.path)
            self._conn.executescript(TABLES + TEXT_INDEXES)
            self._conn.execute("ATTACH DATABASE ? AS stage", (str(self.stage_path),))
            self._conn.execute("PRAGMA stage.journal_mode = OFF")
            self._conn.execute("PRAGMA stage.synchronous = OFF")
            self._conn.executescript(STAGE_TABLES)
            self._ticking = contextlib.ExitStack()
            self.progress = self._ticking.enter_context(ticking(self.progress))
        except BaseException as exc:
            self._abort()
            self._held_lock.__exit__(None, None, None)  # __exit__ does not run after this
            failure = build_failure(self.name, exc)
            if failure is not None:
                raise failure from exc
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if not self._finished:
                self._abort()
        finally:
            if self._ticking is not None:
                self._ticking.close()
            self._held_lock.__exit__(None, None, None)
        failure = build_failure(self.name, exc) if exc is not None else None
        if failure is not None:  # a full disk said as such, not an SQLite traceback
            raise failure from exc

    def _abort(self) -> None:
        if self._splitter is not None:
            self._splitter.cancel()
            self._splitter = None
        if self._conn is not None:
            with contextlib.suppress(db.Error):
                self._conn.close()
            self._conn = None
        path = getattr(self, "path", None)
        if path is not None:  # the building file, its staging file and any journals
            for leftover in self.directory.glob(path.name + "*"):
                leftover.unlink(missing_ok=True)

    def _preflight(self) -> None:
        if self.expected_bytes:
            check_disk(self.directory, self.expected_bytes, self.name)
        check_memory(MIN_FREE_MEMORY, self.name)

    # -- streaming ---------------------------------------------------------------------------

    def start_reading(self, expected: int | None = None, unit: str = "docs") -> None:
        """The reading phase, of ``expected`` documents — or of other units (files of a folder,
        where a workbook gives a document per sheet): then the source counts them with
        ``advance`` and ``add`` counts nothing, so the count can never pass the total."""
        self._count_docs = unit == "docs"
        self._phase("reading", expected, unit)

    def advance(self, n: int = 1) -> None:
        """Count ``n`` units of a reading phase that is not counted in documents."""
        self.progress.advance(n)

    def tally(self, topic: str, outcome: str, n: int = 1) -> None:
        """Count how an input was read (``tally("article points", "unreadable")``), for the
        build report: what a warning per document would drown."""
        counts = self.tallies.setdefault(topic, {})
        counts[outcome] = counts.get(outcome, 0) + n

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        self.progress.warn(message)

    def add(self, doc: Doc) -> None:
        if not doc.key or not str(doc.key).strip():
            raise BuildError(f"a document titled {doc.title!r} has no key")
        title = (doc.title or "").strip()
        if not title:
            raise BuildError(f"document {doc.key!r} has no title")
        self._seq += 1
        seq = self._seq
        rank = doc.rank_score if isinstance(doc.rank_score, int | float) else 0.0
        rank = 0.0 if math.isnan(rank) else min(max(float(rank), 0.0), 1.0)
        aliases = [a.strip() for a in doc.aliases if a and a.strip() and a.strip() != title]
        extra = json.dumps(doc.extra, ensure_ascii=False) if doc.extra else None
        self._queue(
            "docs",
            (
                seq,
                str(doc.key),
                title,
                rank,
                doc.url,
                "\n".join(aliases),
                doc.opening or "",
                extra,
                doc.body or "",
            ),
        )
        self._queue("titles", (seq, normalise_title(title), 0))
        for alias in aliases:
            self._queue("titles", (seq, normalise_title(alias), 1))
        for tag in dict.fromkeys(t.strip() for t in doc.tags if t and t.strip()):
            self._queue("tags", (seq, tag))
        for target in dict.fromkeys(t.strip() for t in doc.links if t and t.strip()):
            self._queue("links", (seq, target))
        for attr, values in doc.attrs.items():
            for value in dict.fromkeys(str(v) for v in values if v is not None and str(v) != ""):
                self._queue("attrs", (seq, attr, value))
        if doc.point is not None:
            lat, lon = doc.point
            if -90 <= lat <= 90 and -180 <= lon <= 180:
                self._queue("points", (seq, float(lat), float(lon)))
            else:
                self.warn(f"{doc.key}: coordinates {lat}, {lon} are out of range; dropped")
        kept = chunk_text.stored_rows(
            doc.body or "", ((c.heading_path, c.text) for c in doc.chunks)
        )
        for ord_, (heading_path, text, spans) in enumerate(kept):
            self._queue("chunks", (seq, ord_, heading_path, spans, text))
        if self._count_docs:
            self.progress.advance(1)
        if seq % BATCH_DOCS == 0:
            self._flush()

    @property
    def docs_added(self) -> int:
        return self._seq

    def add_alias(self, target_title: str, alias: str) -> None:
        """An alternate title for the document titled ``target_title``, which may arrive later
        (a Wikipedia redirect can precede its target in the dump); resolved at finish()."""
        if target_title and alias and target_title != alias:
            self._queue("late_aliases", (target_title, alias))

    def before_ordering(self, step: Callable[[db.Connection], None]) -> None:
        """Run ``step(conn)`` over the staging tables after every document has arrived and
        before doc_ids are assigned — e.g. to set rank_score from counts only known then."""
        self._before_order.append(step)

    def _queue(self, table: str, row: tuple) -> None:
        self._batch.setdefault(table, []).append(row)

    def _flush(self) -> None:
        conn = self._require_conn()
        conn.execute("BEGIN")
        try:
            for table, rows in self._batch.items():
                marks = ",".join("?" * len(rows[0]))
                conn.executemany(f"INSERT INTO stage.{table} VALUES ({marks})", rows)
        except db.IntegrityError as exc:
            conn.execute("ROLLBACK")
            raise BuildError(
                f"two documents share a key in {self.name!r}: {exc}",
                hint="every document of a source needs its own key",
            ) from exc
        conn.execute("COMMIT")
        self._batch.clear()

    def _require_conn(self) -> db.Connection:
        if self._conn is None:
            raise BuildError("the builder is not open")
        return self._conn

    def _phase(self, name: str, total: int | None = None, unit: str = "docs") -> None:
        self._end_phase()
        self._phase_name, self._phase_started = name, time.monotonic()
        self.progress.phase(name, total, unit)

    def _end_phase(self) -> None:
        if name := getattr(self, "_phase_name", None):
            self.timings[name] = time.monotonic() - self._phase_started
            self._phase_name = None

    # -- finishing ---------------------------------------------------------------------------

    def finish(self) -> BuildReport:
        self._flush()
        conn = self._require_conn()
        docs = self._seq
        try:
            self._order_and_copy(conn, docs)
            self._index(conn, docs)
            self._write_meta(conn, docs)
            self._phase("validating", validation_checks(self.options), "checks")
            validate_generation(
                conn, self.options, self._previous_doc_count(), checked=self.progress.advance
            )
            self._phase("switching", None, "steps")
            chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            conn.close()
            self._conn = None
            self.stage_path.unlink(missing_ok=True)
            previous = generations.install(self.path, self.final_path)
            generations.prune(self.directory, [self.final_path, previous])
            self._finished = True
            self._end_phase()
        finally:  # the display stays open: whoever made it closes it (an embedding may follow)
            self._end_phase()
        return BuildReport(
            name=self.name,
            kind=self.kind,
            path=self.final_path,
            docs=docs,
            chunks=chunks,
            seconds=time.monotonic() - self._started,
            size_bytes=self.final_path.stat().st_size,
            previous=previous,
            warnings=self.warnings,
            timings=self.timings,
            tallies=self.tallies,
        )

    def _order_and_copy(self, conn: db.Connection, docs: int) -> None:
        if docs < self.options.min_docs:
            raise BuildError(
                f"{self.name!r} would have {docs} documents; at least "
                f"{self.options.min_docs} are required",
                hint="check that the input holds what you expect; the current generation "
                "keeps serving",
            )
        # counted in steps (late aliases, each ranking step, the ordinal): a step is one long
        # statement on a large source, and the heartbeat keeps the line alive meanwhile
        self._phase("ordering by popularity", 2 + len(self._before_order), "steps")
        _resolve_late_aliases(conn)
        self.progress.advance(1)
        for step in self._before_order:
            step(conn)
            self.progress.advance(1)
        conn.execute(
            "CREATE TABLE stage.ordinal (seq INTEGER PRIMARY KEY, doc_id INTEGER NOT NULL UNIQUE)"
        )
        conn.execute(
            "INSERT INTO stage.ordinal (seq, doc_id) "
            "SELECT seq, row_number() OVER (ORDER BY rank_score DESC, seq) FROM stage.docs"
        )
        self.progress.advance(1)
        # doc_ids are final: words can be split on the other core from here (store/wordindex.py)
        if self.options.word_index:
            words_path = self.path.with_name(self.path.name + ".words")
            splitter = self.options.word_splitter or WordSplitter
            self._splitter = splitter(self.stage_path, words_path, docs).start()
        self._phase("writing documents", docs)
        for low in range(1, docs + 1, COPY_BATCH):
            high = low + COPY_BATCH - 1
            conn.execute(
                "INSERT INTO docs (doc_id, key, title, rank_score, url, aliases, opening, extra, "
                "body) SELECT o.doc_id, d.key, d.title, d.rank_score, d.url, d.aliases, "
                "d.opening, d.extra, d.body FROM stage.ordinal o JOIN stage.docs d "
                "ON d.seq = o.seq WHERE o.doc_id BETWEEN ? AND ? ORDER BY o.doc_id",
                (low, high),
            )
            self.progress.advance(min(high, docs) - low + 1)
        self._phase("writing tags, links, chunks", len(_COPY_CHILDREN), "steps")
        for statement in _COPY_CHILDREN:
            conn.execute(statement)
            self.progress.advance(1)
        conn.execute("DETACH DATABASE stage")

    def _index(self, conn: db.Connection, docs: int) -> None:
        statements = [s.strip() for s in INDEXES.split(";") if s.strip()]
        self._phase("indexing", len(statements), "steps")
        for statement in statements:
            conn.execute(statement)
            self.progress.advance(1)
        self._phase("indexing full text", docs)
        # No incremental merging while loading: 'optimize' merges everything once at the end
        # (measured: 22.2 s instead of 28.0 s for 30k documents, 24M characters).
        conn.execute("INSERT INTO docs_fts (docs_fts, rank) VALUES ('automerge', 0)")
        conn.create_function("chiezo_fold", 1, fold, deterministic=True)
        for low in range(1, docs + 1, COPY_BATCH):
            high = low + COPY_BATCH - 1
            conn.execute(
                "INSERT INTO docs_fts (rowid, title, aliases, body) SELECT doc_id, "
                "chiezo_fold(title), chiezo_fold(aliases), chiezo_fold(body) FROM docs "
                "WHERE doc_id BETWEEN ? AND ?",
                (low, high),
            )
            self.progress.advance(min(high, docs) - low + 1)
        # one statement that cannot be cut into steps: only the heartbeat says it is alive
        self._phase("merging full-text segments", None, "steps")
        conn.execute("INSERT INTO docs_fts (docs_fts) VALUES ('optimize')")
        self._phase("counting trigrams", 1, "steps")
        conn.execute("CREATE VIRTUAL TABLE temp.fts_vocab USING fts5vocab(main, docs_fts, row)")
        conn.execute("INSERT INTO gram_df (gram, df) SELECT term, doc FROM temp.fts_vocab")
        conn.execute("DROP TABLE temp.fts_vocab")
        self.progress.advance(1)
        if self.options.word_index:
            self._index_words(conn, docs)
        self._count(conn)

    def _count(self, conn: db.Connection) -> None:
        """Tag and attribute counts, the rank vector, the planner's statistics: four steps."""
        self._phase("counting tags and attributes", 4, "steps")
        conn.execute(
            "INSERT INTO tag_counts (tag, n) SELECT tag, count(*) FROM doc_tags GROUP BY tag"
        )
        self.progress.advance(1)
        conn.execute(
            "INSERT INTO attr_counts (name, value, n) "
            "SELECT name, value, count(*) FROM doc_attrs GROUP BY name, value"
        )
        self.progress.advance(1)
        scores = array(
            "f", (row[0] for row in conn.execute("SELECT rank_score FROM docs ORDER BY doc_id"))
        )
        if scores.itemsize != 4:
            raise BuildError("this platform has no 32-bit float array type")
        conn.execute("INSERT INTO rank_vector (id, scores) VALUES (1, ?)", (_le_bytes(scores),))
        self.progress.advance(1)
        conn.execute("PRAGMA analysis_limit = 1000")
        conn.execute("ANALYZE")
        self.progress.advance(1)

    def _index_words(self, conn: db.Connection, docs: int) -> None:
        splitter = self._splitter
        if splitter is None:
            raise BuildError("the word splitter did not start")
        self._phase("splitting words", docs)
        shown = 0

        def advance_to(done: int) -> None:
            nonlocal shown
            self.progress.advance(done - shown)
            shown = done

        splitter.wait(advance_to)
        self._phase("indexing words", docs)
        load_words(conn, splitter.paths, docs, COPY_BATCH, self.progress.advance)
        splitter.remove()
        self._splitter = None

    def _write_meta(self, conn: db.Connection, docs: int) -> None:
        counts = {
            "doc_count": docs,
            "chunk_count": conn.execute("SELECT count(*) FROM chunks").fetchone()[0],
            "tag_count": conn.execute("SELECT count(*) FROM tag_counts").fetchone()[0],
            "link_count": conn.execute("SELECT count(*) FROM doc_links").fetchone()[0],
            "point_count": conn.execute("SELECT count(*) FROM doc_points").fetchone()[0],
        }
        attributes = [r[0] for r in conn.execute("SELECT DISTINCT name FROM attr_counts")]
        meta = {
            "schema_version": SCHEMA_VERSION,
            "source": self.name,
            "kind": self.kind,
            "language": self.options.language or "",
            "text_index": WORDS_AND_TRIGRAMS if self.options.word_index else "trigram",
            "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "generation": self.final_path.name,
            "input": json.dumps(self.identity, ensure_ascii=False, sort_keys=True),
            "attributes": json.dumps(attributes, ensure_ascii=False),
            "warnings": json.dumps(self.warnings[:100], ensure_ascii=False),
            **counts,
        }
        conn.executemany(
            "INSERT INTO meta (key, value) VALUES (?, ?)", [(k, str(v)) for k, v in meta.items()]
        )

    def _previous_doc_count(self) -> int | None:
        current = generations.current_path(self.directory)
        if current is None:
            return None
        try:
            conn = db.open_readonly(current)
            try:
                row = conn.execute("SELECT value FROM meta WHERE key = 'doc_count'").fetchone()
            finally:
                conn.close()
            return int(row[0]) if row else None
        except (db.Error, ValueError):
            return None


_COPY_CHILDREN = (
    "INSERT OR IGNORE INTO titles (norm, doc_id, is_alias) "
    "SELECT t.norm, o.doc_id, min(t.is_alias) FROM stage.titles t JOIN stage.ordinal o "
    "ON o.seq = t.seq WHERE t.norm != '' GROUP BY t.norm, o.doc_id ORDER BY t.norm, o.doc_id",
    "INSERT OR IGNORE INTO doc_tags (tag, doc_id) SELECT t.tag, o.doc_id FROM stage.tags t "
    "JOIN stage.ordinal o ON o.seq = t.seq ORDER BY t.tag, o.doc_id",
    "INSERT OR IGNORE INTO doc_links (doc_id, target) SELECT o.doc_id, l.target "
    "FROM stage.links l JOIN stage.ordinal o ON o.seq = l.seq ORDER BY o.doc_id, l.target",
    "INSERT OR IGNORE INTO doc_attrs (name, value, doc_id) SELECT a.name, a.value, o.doc_id "
    "FROM stage.attrs a JOIN stage.ordinal o ON o.seq = a.seq ORDER BY a.name, a.value, o.doc_id",
    "INSERT OR IGNORE INTO doc_points (doc_id, lat, lon) SELECT o.doc_id, p.lat, p.lon "
    "FROM stage.points p JOIN stage.ordinal o ON o.seq = p.seq ORDER BY o.doc_id",
    "INSERT INTO doc_coords (doc_id, min_lat, max_lat, min_lon, max_lon) "
    "SELECT doc_id, lat, lat, lon, lon FROM doc_points",
    "INSERT INTO chunks (doc_id, ord, heading_path, spans, text) SELECT o.doc_id, c.ord, "
    "c.heading_path, c.spans, c.text FROM stage.chunks c JOIN stage.ordinal o ON o.seq = c.seq",
)


def build_failure(name: str, exc: BaseException) -> BuildError | None:
    """An SQLite or disk error of a build as a BuildError that says what happened and that
    the current generation is untouched; None for any other error (raised as it is)."""
    if isinstance(exc, ChiezoError) or not isinstance(exc, db.Error | OSError):
        return None
    full = isinstance(exc, OSError) and exc.errno == errno.ENOSPC
    if full or isinstance(db.storage_problem(exc, name), StorageFull):
        return BuildError(
            f"building {name!r} stopped: the disk is full; the current generation keeps serving",
            hint=f"free space in {name!r}'s folder (the unfinished file was removed) and build again",
        )
    if isinstance(exc, OSError):
        return None
    return BuildError(f"building {name!r} failed in SQLite: {exc}")


def _resolve_late_aliases(conn: db.Connection) -> None:
    """Attach aliases that named their target by title: into titles (exact-title lookup) and
    into docs.aliases (full-text search)."""
    if not conn.execute("SELECT 1 FROM stage.late_aliases LIMIT 1").fetchone():
        return
    conn.create_function("chiezo_norm", 1, normalise_title, deterministic=True)
    conn.execute("CREATE INDEX stage.idx_stage_docs_title ON docs(title)")
    conn.execute(
        "CREATE TABLE stage.alias_groups AS SELECT target, group_concat(alias, char(10)) AS names "
        "FROM (SELECT DISTINCT target, alias FROM stage.late_aliases) GROUP BY target"
    )
    conn.execute(
        "INSERT INTO stage.titles (seq, norm, is_alias) SELECT d.seq, chiezo_norm(a.alias), 1 "
        "FROM stage.late_aliases a JOIN stage.docs d ON d.title = a.target"
    )
    conn.execute(
        "UPDATE stage.docs SET aliases = CASE WHEN aliases = '' THEN g.names "
        "ELSE aliases || char(10) || g.names END "
        "FROM stage.alias_groups AS g WHERE stage.docs.title = g.target"
    )


def _le_bytes(values: array) -> bytes:
    if sys.byteorder != "little":
        values = array(values.typecode, values)
        values.byteswap()
    return values.tobytes()


def _text_indexes(options: BuildOptions) -> tuple[str, ...]:
    return ("docs_fts", "words_fts") if options.word_index else ("docs_fts",)


def validation_checks(options: BuildOptions) -> int:
    """How many checks ``validate_generation`` reports: SQLite's, one per text index, titles."""
    return 2 + len(_text_indexes(options))


def validate_generation(
    conn: db.Connection,
    options: BuildOptions,
    previous_docs: int | None,
    checked: Callable[[], None] | None = None,
) -> None:
    """Refuse to switch in a generation that is damaged, empty or suspiciously small.
    ``checked()`` is called after each of the ``validation_checks`` checks (an integrity
    check of a large file takes minutes)."""
    checked = checked or (lambda: None)
    docs = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
    if docs < options.min_docs:
        raise BuildError(f"the new generation has {docs} documents, fewer than {options.min_docs}")
    if previous_docs and not options.allow_shrink and docs < previous_docs * options.shrink_ratio:
        raise BuildError(
            f"the new generation has {docs:,} documents, the current one {previous_docs:,}: "
            "refusing to shrink the source by more than half",
            hint="if the smaller input is intended, rebuild with --allow-shrink",
        )
    pragma = "integrity_check" if options.full_validation else "quick_check"
    problems = [r[0] for r in conn.execute(f"PRAGMA {pragma}(20)")]
    if problems != ["ok"]:
        raise BuildError(
            "the new generation failed SQLite's integrity check: " + "; ".join(problems)
        )
    checked()
    for index in _text_indexes(options):
        indexed = conn.execute(f"SELECT count(*) FROM {index}_docsize").fetchone()[0]
        if indexed != docs:
            raise BuildError(f"the text index {index} holds {indexed} documents, the table {docs}")
        if options.full_validation:
            try:
                conn.execute(f"INSERT INTO {index} ({index}) VALUES ('integrity-check')")
            except db.Error as exc:
                raise BuildError(f"the text index {index} is inconsistent: {exc}") from exc
        checked()
    _check_sample_titles(conn, docs)
    checked()


def _check_sample_titles(conn: db.Connection, docs: int) -> None:
    step = max(docs // SAMPLE_TITLES, 1)
    for doc_id in range(1, docs + 1, step):
        title = conn.execute("SELECT title FROM docs WHERE doc_id = ?", (doc_id,)).fetchone()[0]
        found = conn.execute(
            "SELECT 1 FROM titles WHERE norm = ? AND doc_id = ?", (normalise_title(title), doc_id)
        ).fetchone()
        if not found:
            raise BuildError(f"validation: title {title!r} (doc {doc_id}) is not findable by title")
        if len(title) >= MIN_FTS_CHARS:
            expr = match_in_columns(("title",), phrase(fold(title)))
            hit = conn.execute(
                "SELECT 1 FROM docs_fts WHERE docs_fts MATCH ? AND rowid = ?", (expr, doc_id)
            ).fetchone()
            if not hit:
                raise BuildError(
                    f"validation: title {title!r} (doc {doc_id}) is not in the full-text index"
                )


def free_disk(directory: Path) -> tuple[Path, int]:
    """(the nearest existing folder at or above ``directory``, its free bytes): a source's
    folder may not exist before its first build."""
    probe = directory
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe, shutil.disk_usage(probe).free


def check_disk(directory: Path, text_bytes: int, name: str) -> None:
    """Refuse before any work when the disk under ``directory`` cannot hold a source built from
    about ``text_bytes`` of text (the generation, its index and the staging copy)."""
    require_disk(directory, int(text_bytes * DISK_FACTOR) + DISK_MARGIN, f"build {name!r}")


def require_disk(
    directory: Path, needed: int, doing: str, error: type = BuildError, after: str = ""
) -> None:
    """``error`` saying how much is needed and free when the disk under ``directory`` has
    less than ``needed`` bytes for ``doing`` (``after``: what the refusal left untouched)."""
    probe, free = free_disk(directory)
    if free < needed:
        raise error(
            f"not enough disk to {doing}: about {needed / 2**20:,.0f} MiB needed, "
            f"{free / 2**20:,.0f} MiB free in {probe}{after}",
            hint="free some space or point CHIEZO_DATA at a larger disk",
        )


def check_memory(needed: int, name: str, doing: str = "build") -> None:
    """Refuse before any work when less than ``needed`` bytes of memory are available."""
    available = available_memory()
    if available is not None and available < needed:
        raise BuildError(
            f"not enough memory to {doing} {name!r}: {available / 2**20:,.0f} MiB available, "
            f"{needed / 2**20:,.0f} MiB needed",
            hint="stop other programs; the build's own memory stays flat whatever the size",
        )


def available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes; None where that is unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def derive_generation(
    settings: Settings,
    name: str,
    step: Callable[[db.Connection, Path], None],
    *,
    what: str,
    keep_previous: Path | None | str = generations.REPLACED,
) -> BuildReport:
    """A new generation of ``name`` made from the current one: copy it, let ``step(conn,
    final_path)`` change the copy (and write sidecar files named ``final_path.name + ".…"``),
    check it, switch. Used to add vectors to a built source without touching the file readers
    have open; a failure leaves the current generation and removes the copy and its sidecars.
    ``keep_previous``: the generation kept beside the new one (``generations.previous_to_keep``;
    an ingest's embed step passes the one that served before the ingest)."""
    started = time.monotonic()
    directory = generations.source_dir(settings.corpus_dir, name)
    with generations.BuildLock(directory):
        generations.remove_debris(directory)
        current = generations.current_path(directory)
        if current is None:
            raise BuildError(f"source {name!r} has no generation to {what}")
        check_disk(directory, current.stat().st_size, name)
        final = directory / generations.new_generation_name()
        building = directory / (final.name + generations.BUILDING_SUFFIX)
        conn = None
        try:
            shutil.copyfile(current, building)
            conn = db.open_for_build(building)
            step(conn, final)
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES ('generation', ?), "
                "('derived_at', ?)",
                (final.name, time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())),
            )
            problems = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
            if problems != ["ok"]:
                raise BuildError(f"the new generation failed its check: {'; '.join(problems)}")
            docs = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
            chunks = conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
            conn.close()
            conn = None
            previous = generations.previous_to_keep(
                generations.install(building, final), keep_previous
            )
            generations.prune(directory, [final, previous])
        except BaseException as exc:
            if conn is not None:
                conn.close()
            building.unlink(missing_ok=True)
            for companion in generations.sidecars(final):
                companion.unlink(missing_ok=True)
            failure = build_failure(name, exc)
            if failure is not None:
                raise failure from exc
            raise
    return BuildReport(
        name=name,
        kind=what,
        path=final,
        docs=docs,
        chunks=chunks,
        seconds=time.monotonic() - started,
        size_bytes=final.stat().st_size,
        previous=previous,
    )
