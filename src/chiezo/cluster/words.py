"""``chiezo ingest wikipedia --ray``: the words split on the cluster too.

Splitting Japanese into words (Sudachi) is the larger half of a build's indexing (~1,250 of the
CPU-seconds of a 1M-document build, docs/design.md §24.5); on one machine it runs in a process
per core beside the builder (store/wordindex.py). With ``--ray`` the wikitext is already
rendered on the cluster, and the words are split there too: a thread of the builder reads the
staged documents in doc_id order, ``READ_BATCH`` at a time, sends each batch as a task
(``wordindex.split_rows``, the same function a local splitter process runs), and writes the
answers in order to one scratch file — so the word index is the one a local build writes, row
for row. At most ``IN_FLIGHT_PER_CPU`` batches per cluster CPU are out at once: the builder's
memory stays bounded whatever the dump.
"""

from __future__ import annotations

import collections
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from chiezo.cluster import cluster_cpus, connect
from chiezo.core import db
from chiezo.core.errors import BuildError
from chiezo.store.wordindex import (
    WORDS_TABLE,
    SplitterFactory,
    split_rows,
    staged_batches,
    write_words,
)

IN_FLIGHT_PER_CPU = 2
POLL_SECONDS = 0.25


def ray_word_splitter(address: str | None) -> SplitterFactory:
    """The ``word_splitter`` of the ``ray`` rendering: a build's words split on the cluster
    at ``address``."""
    return lambda stage, words, docs: RayWordSplitter(address, stage, words, docs)


class RayWordSplitter:
    """``WordSplitter``'s contract (start, wait, cancel, remove, paths) with the work on a
    cluster: one scratch file, written in doc_id order by a thread of the builder."""

    def __init__(self, address: str | None, stage_path: Path, words_path: Path, docs: int):
        self.address, self.stage_path, self.docs = address, stage_path, docs
        self.span = (1, docs)
        self.paths = [words_path.with_name(f"{words_path.name}.0")]
        self._done = 0
        self._error: BaseException | None = None
        self._cancelled = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chiezo-ray-words", daemon=True)

    def start(self) -> RayWordSplitter:
        self._thread.start()
        return self

    def wait(self, on_progress: Callable[[int], None], poll: float = POLL_SECONDS) -> None:
        while self._thread.is_alive():
            self._thread.join(poll)
            on_progress(self._done)
        on_progress(self._done)
        if self._error is not None:
            raise BuildError(f"splitting documents into words on the cluster failed: {self._error}")

    def cancel(self) -> None:
        self._cancelled.set()
        self._thread.join(30)
        self.remove()

    def remove(self) -> None:
        for path in self.paths:
            path.unlink(missing_ok=True)

    def _run(self) -> None:
        try:
            self._split_on(connect(self.address))
        except BaseException as exc:  # noqa: BLE001 - reported by wait(), which fails the build
            self._error = exc

    def _split_on(self, ray: ModuleType) -> None:
        task = ray.remote(split_rows).options(num_cpus=1, max_retries=2)
        limit = IN_FLIGHT_PER_CPU * max(1, cluster_cpus(ray))
        source = sqlite3.connect(f"file:{self.stage_path}?mode=ro", uri=True)
        target = db.open_for_build(self.paths[0])
        pending: collections.deque = collections.deque()
        try:
            target.execute(WORDS_TABLE)
            for batch in staged_batches(source, self.span):
                if self._cancelled.is_set():
                    break
                pending.append((task.remote(batch), len(batch)))
                while len(pending) >= limit:
                    self._write_first(ray, pending, target)
            while pending and not self._cancelled.is_set():
                self._write_first(ray, pending, target)
        finally:
            for ref, _ in pending:
                ray.cancel(ref)
            source.close()
            target.close()

    def _write_first(
        self, ray: ModuleType, pending: collections.deque, target: db.Connection
    ) -> None:
        ref, size = pending.popleft()
        write_words(target, ray.get(ref))
        self._done += size
