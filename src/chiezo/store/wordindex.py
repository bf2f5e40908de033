"""Building the word index beside the trigram index, on the other core.

Splitting Japanese into words (Sudachi) costs about twice what FTS5 spends indexing trigrams
(3.7M characters of JaQuAD: 4.6 s against 2.3 s), while indexing the words once split costs
little (0.34 s). So for a large source the splitting runs in a separate process from the moment
documents have their final doc_ids — one process per core, each over a range of doc_ids,
reading the staged documents through its own connection and writing the words to its own
scratch file — while the builder copies documents and builds the trigram index; the builder
then loads the words into ``words_fts`` in doc_id order. A process, not a
thread: the trigram index folds text through a Python function called per row, and a thread
splitting words held the GIL that function needs (a 2,000-document build went from 1.3 s to
3.6 s). A small source is split in the builder's own process, after the trigram index: starting
a process (~1 s) would cost more than it saves. Build-time cost in docs/design.md §24.
"""

from __future__ import annotations

import multiprocessing
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from chiezo.core import db
from chiezo.core.errors import BuildError
from chiezo.core.processes import die_with_parent, stop_processes
from chiezo.core.words import index_text

if TYPE_CHECKING:
    from multiprocessing.queues import Queue
    from multiprocessing.sharedctypes import Synchronized

READ_BATCH = 500
PROCESS_MIN_DOCS = 20_000  # below this, split in the builder's process


class WordSplitter:
    """Splits the staged documents of ``stage_path`` into words, written to scratch files
    named after ``words_path`` (table words: doc_id, title, aliases, body), one per part: a
    large source is cut into contiguous doc_id ranges, one process each, as many as the machine
    has cores (the builder's own work runs beside them); a small one is split in place."""

    def __init__(self, stage_path: Path, words_path: Path, docs: int):
        self.stage_path = stage_path
        parts = splitter_processes() if docs >= PROCESS_MIN_DOCS else 1
        bounds = [docs * i // parts for i in range(parts + 1)]
        self.ranges = [(bounds[i] + 1, bounds[i + 1]) for i in range(parts)]
        self.paths = [words_path.with_name(f"{words_path.name}.{i}") for i in range(parts)]
        self._processes: list = []
        if docs >= PROCESS_MIN_DOCS:
            context = multiprocessing.get_context("spawn")
            self._done = [context.Value("q", 0) for _ in self.ranges]
            self._errors = context.Queue()
            self._processes = [
                context.Process(
                    target=_split_in_child,
                    args=(str(stage_path), str(path), span, done, self._errors, os.getpid()),
                    name=f"chiezo-word-splitter-{i}",
                    daemon=True,
                )
                for i, (path, span, done) in enumerate(
                    zip(self.paths, self.ranges, self._done, strict=True)
                )
            ]

    def start(self) -> WordSplitter:
        for process in self._processes:
            process.start()
        return self

    def wait(self, on_progress: Callable[[int], None], poll: float = 0.25) -> None:
        """Finish the splitting, calling ``on_progress(done)`` as documents are split."""
        if not self._processes:
            split_words(self.stage_path, self.paths[0], self.ranges[0], on_progress)
            return
        while any(p.is_alive() for p in self._processes):
            for process in self._processes:
                process.join(poll / len(self._processes))
            on_progress(sum(d.value for d in self._done))
        on_progress(sum(d.value for d in self._done))
        failed = [p for p in self._processes if p.exitcode != 0]
        if failed:
            reason = (
                self._errors.get()
                if not self._errors.empty()
                else (f"a word splitter exited with code {failed[0].exitcode}")
            )
            raise BuildError(f"splitting documents into words failed: {reason}")

    def cancel(self) -> None:
        stop_processes(p for p in self._processes if p.pid is not None)  # killed: never a hang
        self.remove()

    def remove(self) -> None:
        for path in self.paths:
            path.unlink(missing_ok=True)


class Splitter(Protocol):
    """What the builder asks of a word splitter: ``WordSplitter`` (this machine's processes) or
    another given through ``BuildOptions.word_splitter`` (cluster/words.py: Ray tasks)."""

    paths: list[Path]  # scratch files of consecutive doc_id ranges, in order

    def start(self) -> Splitter: ...

    def wait(self, on_progress: Callable[[int], None]) -> None: ...

    def cancel(self) -> None: ...

    def remove(self) -> None: ...


SplitterFactory = Callable[[Path, Path, int], Splitter]  # (stage_path, words_path, docs)


def splitter_processes() -> int:
    """One per core: the builder's own process mostly waits on SQLite, and Sudachi is the
    larger half of the work (docs/design.md §24.5)."""
    return max(1, min(os.cpu_count() or 1, 8))


def _split_in_child(
    stage_path: str,
    words_path: str,
    span: tuple[int, int],
    done: Synchronized[int],
    errors: Queue[str],
    parent_pid: int,
) -> None:
    die_with_parent(parent_pid)  # a killed build's splitters stop with it
    try:
        split_words(Path(stage_path), Path(words_path), span, lambda n: setattr(done, "value", n))
    except BaseException as exc:  # reported by the builder, which fails the build
        errors.put(f"{type(exc).__name__}: {exc}")
        raise SystemExit(1) from exc


def split_words(
    stage_path: Path, words_path: Path, span: tuple[int, int], on_progress: Callable[[int], None]
) -> None:
    """Read the staged documents whose doc_id is within ``span``, in order, and write each
    one's words (words.index_text)."""
    source = sqlite3.connect(f"file:{stage_path}?mode=ro", uri=True)
    target = db.open_for_build(words_path)
    try:
        target.execute(WORDS_TABLE)
        done, shown = 0, time.monotonic()
        for batch in staged_batches(source, span):
            write_words(target, split_rows(batch))
            done += len(batch)
            if time.monotonic() - shown > 0.2:
                on_progress(done)
                shown = time.monotonic()
        on_progress(done)
    finally:
        source.close()
        target.close()


WORDS_TABLE = "CREATE TABLE words (doc_id INTEGER PRIMARY KEY, title TEXT, aliases TEXT, body TEXT)"


def staged_batches(source: sqlite3.Connection, span: tuple[int, int]) -> Iterator[list[tuple]]:
    """The staged documents whose doc_id is within ``span``, in order, ``READ_BATCH`` at a
    time: (doc_id, title, aliases, body)."""
    rows = source.execute(
        "SELECT o.doc_id, d.title, d.aliases, d.body FROM ordinal o "
        "JOIN docs d ON d.seq = o.seq WHERE o.doc_id BETWEEN ? AND ? ORDER BY o.doc_id",
        span,
    )
    while batch := rows.fetchmany(READ_BATCH):
        yield batch


def split_rows(batch: list[tuple]) -> list[tuple]:
    """Each staged document's words (words.index_text): what a splitter process or a cluster
    task computes."""
    return [
        (doc_id, index_text(title), index_text(aliases or ""), index_text(body or ""))
        for doc_id, title, aliases, body in batch
    ]


def write_words(target: db.Connection, rows: list[tuple]) -> None:
    target.execute("BEGIN")
    target.executemany("INSERT INTO words VALUES (?, ?, ?, ?)", rows)
    target.execute("COMMIT")


def load_words(
    conn: db.Connection, parts: list[Path], docs: int, batch: int, advance: Callable[[int], None]
) -> None:
    """Index the split words into ``words_fts`` in doc_id order (the parts are consecutive
    doc_id ranges) and count their document frequencies into ``word_df``."""
    conn.execute("INSERT INTO words_fts (words_fts, rank) VALUES ('automerge', 0)")
    for part in parts:
        conn.execute("ATTACH DATABASE ? AS split", (str(part),))
        try:
            low, high = conn.execute("SELECT min(doc_id), max(doc_id) FROM split.words").fetchone()
            for start in range(low or 1, (high or 0) + 1, batch):
                end = min(start + batch - 1, high)
                conn.execute(
                    "INSERT INTO words_fts (rowid, title, aliases, body) SELECT doc_id, title, "
                    "aliases, body FROM split.words WHERE doc_id BETWEEN ? AND ?",
                    (start, end),
                )
                advance(end - start + 1)
        finally:
            conn.execute("DETACH DATABASE split")
    conn.execute("INSERT INTO words_fts (words_fts) VALUES ('optimize')")
    conn.execute("CREATE VIRTUAL TABLE temp.word_vocab USING fts5vocab(main, words_fts, row)")
    conn.execute("INSERT INTO word_df (word, df) SELECT term, doc FROM temp.word_vocab")
    conn.execute("DROP TABLE temp.word_vocab")
