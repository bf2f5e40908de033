"""Building the word index beside the trigram index, on the other core.

Splitting Japanese into words (Sudachi) costs about twice what FTS5 spends indexing trigrams
(3.7M characters of JaQuAD: 4.6 s against 2.3 s), while indexing the words once split costs
little (0.34 s). So the splitting runs in a thread from the moment documents have their final
doc_ids, reading the staged documents through its own connection and writing the words to a
scratch file, while the builder's connection copies documents and builds the trigram index —
SQLite releases the GIL for the whole of each statement, so the two overlap. The builder then
loads the words into ``words_fts`` in doc_id order. Build-time cost in docs/design.md §24.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

from . import db
from .errors import BuildError
from .words import index_text

READ_BATCH = 500


class WordSplitter:
    """Reads ``stage.docs`` in doc_id order from ``stage_path`` and writes their words to
    ``words_path`` (table words: doc_id, title, aliases, body) in a background thread."""

    def __init__(self, stage_path: Path, words_path: Path):
        self.stage_path = stage_path
        self.words_path = words_path
        self.done = 0  # documents split so far (read by the progress display)
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="word-splitter", daemon=True)
        self._stop = threading.Event()

    def start(self) -> WordSplitter:
        self._thread.start()
        return self

    def wait(self, on_progress=None, poll: float = 0.25) -> None:
        """Wait for the thread, calling ``on_progress(done)`` meanwhile; re-raise its error."""
        while self._thread.is_alive():
            self._thread.join(poll)
            if on_progress is not None:
                on_progress(self.done)
        if on_progress is not None:
            on_progress(self.done)
        if self.error is not None:
            raise BuildError(f"splitting documents into words failed: {self.error}") from self.error

    def cancel(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.words_path.unlink(missing_ok=True)

    def _run(self) -> None:
        try:
            self._split()
        except BaseException as exc:  # reported by wait(), on the builder's thread
            self.error = exc

    def _split(self) -> None:
        source = sqlite3.connect(f"file:{self.stage_path}?mode=ro", uri=True)
        target = db.open_for_build(self.words_path)
        try:
            target.execute(
                "CREATE TABLE words (doc_id INTEGER PRIMARY KEY, title TEXT, aliases TEXT, "
                "body TEXT)"
            )
            rows = source.execute(
                "SELECT o.doc_id, d.title, d.aliases, d.body FROM ordinal o "
                "JOIN docs d ON d.seq = o.seq ORDER BY o.doc_id"
            )
            while not self._stop.is_set():
                batch = rows.fetchmany(READ_BATCH)
                if not batch:
                    break
                target.execute("BEGIN")
                target.executemany(
                    "INSERT INTO words VALUES (?, ?, ?, ?)",
                    [
                        (doc_id, index_text(title), index_text(aliases or ""),
                         index_text(body or ""))  # fmt: skip
                        for doc_id, title, aliases, body in batch
                    ],
                )
                target.execute("COMMIT")
                self.done += len(batch)
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
