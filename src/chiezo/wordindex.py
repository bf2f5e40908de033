"""Building the word index beside the trigram index, on the other core.

Splitting Japanese into words (Sudachi) costs about twice what FTS5 spends indexing trigrams
(3.7M characters of JaQuAD: 4.6 s against 2.3 s), while indexing the words once split costs
little (0.34 s). So for a large source the splitting runs in a separate process from the moment
documents have their final doc_ids, reading the staged documents through its own connection and
writing the words to a scratch file, while the builder copies documents and builds the trigram
index; the builder then loads the words into ``words_fts`` in doc_id order. A process, not a
thread: the trigram index folds text through a Python function called per row, and a thread
splitting words held the GIL that function needs (a 2,000-document build went from 1.3 s to
3.6 s). A small source is split in the builder's own process, after the trigram index: starting
a process (~1 s) would cost more than it saves. Build-time cost in docs/design.md §24.
"""

from __future__ import annotations

import multiprocessing
import sqlite3
import time
from pathlib import Path

from . import db
from .errors import BuildError
from .words import index_text

READ_BATCH = 500
PROCESS_MIN_DOCS = 20_000  # below this, split in the builder's process


class WordSplitter:
    """Splits the staged documents of ``stage_path`` into words, written to ``words_path``
    (table words: doc_id, title, aliases, body) — in a separate process for a large source."""

    def __init__(self, stage_path: Path, words_path: Path, docs: int):
        self.stage_path = stage_path
        self.words_path = words_path
        self._process = None
        if docs >= PROCESS_MIN_DOCS:
            context = multiprocessing.get_context("spawn")
            self._done = context.Value("q", 0)
            self._errors = context.Queue()
            self._process = context.Process(
                target=_split_in_child,
                args=(str(stage_path), str(words_path), self._done, self._errors),
                name="chiezo-word-splitter",
                daemon=True,
            )

    def start(self) -> WordSplitter:
        if self._process is not None:
            self._process.start()
        return self

    def wait(self, on_progress, poll: float = 0.25) -> None:
        """Finish the splitting, calling ``on_progress(done)`` as documents are split."""
        if self._process is None:
            split_words(self.stage_path, self.words_path, on_progress)
            return
        while self._process.is_alive():
            self._process.join(poll)
            on_progress(self._done.value)
        on_progress(self._done.value)
        if self._process.exitcode != 0:
            reason = self._errors.get() if not self._errors.empty() else (
                f"the word splitter exited with code {self._process.exitcode}")  # fmt: skip
            raise BuildError(f"splitting documents into words failed: {reason}")

    def cancel(self) -> None:
        if self._process is not None and self._process.is_alive():
            self._process.terminate()
            self._process.join()
        self.words_path.unlink(missing_ok=True)


def _split_in_child(stage_path: str, words_path: str, done, errors) -> None:
    try:
        split_words(Path(stage_path), Path(words_path), lambda n: setattr(done, "value", n))
    except BaseException as exc:  # reported by the builder, which fails the build
        errors.put(f"{type(exc).__name__}: {exc}")
        raise SystemExit(1) from exc


def split_words(stage_path: Path, words_path: Path, on_progress) -> None:
    """Read stage.docs in doc_id order, write each document's words (words.index_text)."""
    source = sqlite3.connect(f"file:{stage_path}?mode=ro", uri=True)
    target = db.open_for_build(words_path)
    try:
        target.execute(
            "CREATE TABLE words (doc_id INTEGER PRIMARY KEY, title TEXT, aliases TEXT, body TEXT)"
        )
        rows = source.execute(
            "SELECT o.doc_id, d.title, d.aliases, d.body FROM ordinal o "
            "JOIN docs d ON d.seq = o.seq ORDER BY o.doc_id"
        )
        done, shown = 0, time.monotonic()
        while batch := rows.fetchmany(READ_BATCH):
            target.execute("BEGIN")
            target.executemany(
                "INSERT INTO words VALUES (?, ?, ?, ?)",
                [
                    (doc_id, index_text(title), index_text(aliases or ""), index_text(body or ""))
                    for doc_id, title, aliases, body in batch
                ],
            )
            target.execute("COMMIT")
            done += len(batch)
            if time.monotonic() - shown > 0.2:
                on_progress(done)
                shown = time.monotonic()
        on_progress(done)
    finally:
        source.close()
        target.close()


def load_words(conn: db.Connection, words_path: Path, docs: int, batch: int, advance) -> None:
    """Index the split words into ``words_fts`` in doc_id order and count their document
    frequencies into ``word_df``."""
    conn.execute("ATTACH DATABASE ? AS split", (str(words_path),))
    try:
        conn.execute("INSERT INTO words_fts (words_fts, rank) VALUES ('automerge', 0)")
        for low in range(1, docs + 1, batch):
            high = low + batch - 1
            conn.execute(
                "INSERT INTO words_fts (rowid, title, aliases, body) SELECT doc_id, title, "
                "aliases, body FROM split.words WHERE doc_id BETWEEN ? AND ?",
                (low, high),
            )
            advance(min(high, docs) - low + 1)
        conn.execute("INSERT INTO words_fts (words_fts) VALUES ('optimize')")
    finally:
        conn.execute("DETACH DATABASE split")
    conn.execute("CREATE VIRTUAL TABLE temp.word_vocab USING fts5vocab(main, words_fts, row)")
    conn.execute("INSERT INTO word_df (word, df) SELECT term, doc FROM temp.word_vocab")
    conn.execute("DROP TABLE temp.word_vocab")
