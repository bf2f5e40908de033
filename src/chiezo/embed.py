"""``chiezo embed``: vectors for a source's chunks, added as a new generation.

Embedding is the slow part (e5-small: ~3.6 passages/s on 2 cores), so it is

* **resumable** — every batch is committed to an embedding cache
  (``$CHIEZO_DATA/vectors/<model>.db``, float16 by a hash of the exact text embedded); an
  interrupted run continues where it stopped;
* **incremental** — a chunk whose text is unchanged (after a rebuild, or shared by two sources)
  is never embedded twice;
* **partial if asked** — ``--max-chunks N`` embeds the chunks of the most popular documents
  first; the source reports its vector coverage and stays fully searchable by text.

When the cache holds a vector for every chunk wanted, the source gets a new generation: the
current file copied, ``chunk_vectors`` filled, the HNSW index file written next to it, then
switched in like any build (the file readers have open is never changed).
"""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from . import db
from .build import derive_generation
from .config import Settings
from .embedders import DEFAULT_MODEL, get_embedder
from .errors import BadQuery
from .library import NOTES, Library
from .progress import NullProgress, Progress
from .search.vectors import VECTOR_TABLE, index_path

BATCH = 64
MAX_PASSAGE_CHARS = 2000
INDEX_BATCH = 20_000


@dataclass
class EmbedReport:
    source: str
    model: str
    chunks: int
    vectors: int
    embedded: int  # newly computed in this run
    reused: int  # found in the cache
    seconds: float
    path: str = ""

    def to_dict(self) -> dict[str, Any]:
        rate = self.embedded / self.seconds if self.seconds else 0.0
        return {
            **self.__dict__,
            "seconds": round(self.seconds, 2),
            "passages_per_s": round(rate, 2),
        }


def passage_text(title: str, heading_path: str, text: str) -> str:
    """What is embedded for a chunk: its breadcrumb, led by the document title, then the text."""
    crumb = heading_path or title
    if title and not crumb.startswith(title):
        crumb = f"{title} > {crumb}"
    return f"{crumb}\n{text}"[:MAX_PASSAGE_CHARS]


def text_hash(model: str, text: str) -> str:
    return hashlib.sha1(f"{model}\0{text}".encode()).hexdigest()


class VectorCache:
    """float16 vectors by text hash, one file per model."""

    def __init__(self, settings: Settings, model: str):
        directory = settings.data_dir / "vectors"
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / (re.sub(r"[^A-Za-z0-9_.-]+", "_", model) + ".db")
        self.conn = db.open_for_writing(self.path)
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS vec (hash TEXT PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID"
        )

    def known(self, hashes: list[str]) -> set[str]:
        marks = ",".join("?" * len(hashes))
        return {
            r[0] for r in self.conn.execute(f"SELECT hash FROM vec WHERE hash IN ({marks})", hashes)
        }

    def put(self, rows: list[tuple[str, bytes]]) -> None:
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.executemany("INSERT OR REPLACE INTO vec VALUES (?, ?)", rows)
        self.conn.execute("COMMIT")

    def close(self) -> None:
        self.conn.close()


def embed_source(
    settings: Settings,
    library: Library,
    name: str,
    model: str | None = None,
    *,
    max_chunks: int | None = None,
    progress: Progress | None = None,
) -> EmbedReport:
    progress = progress or NullProgress()
    if name == NOTES:
        raise BadQuery("the notes source is not embedded (it changes with every write)")
    source = library.get(name)
    model = model or source.meta.get("embedding_model") or DEFAULT_MODEL
    embedder = get_embedder(model)
    started = time.monotonic()
    total = source.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    wanted = min(total, max_chunks) if max_chunks is not None else total
    cache = VectorCache(settings, embedder.name)
    embedded = reused = 0
    try:
        progress.phase(f"embedding with {embedder.name}", wanted, "chunks")
        for batch in _chunk_batches(source.conn, wanted):
            hashes = [text_hash(embedder.name, text) for _, text in batch]
            known = cache.known(hashes)
            todo = [(h, text) for h, (_, text) in zip(hashes, batch, strict=True) if h not in known]
            if todo:
                vectors = embedder.embed([text for _, text in todo], "passage")
                cache.put([(h, v.astype("<f2").tobytes()) for (h, _), v in zip(todo, vectors, strict=True)])  # fmt: skip
            embedded += len(todo)
            reused += len(batch) - len(todo)
            progress.advance(len(batch))
        progress.phase("writing vectors and index", None, "steps")
        report = derive_generation(
            settings, name,
            lambda conn, final: _write_vectors(conn, final, cache, embedder, wanted),
            what="embed",
        )  # fmt: skip
    finally:
        cache.close()
    return EmbedReport(name, embedder.name, total, wanted, embedded, reused,
                       time.monotonic() - started, str(report.path))  # fmt: skip


def _chunk_batches(conn: db.Connection, wanted: int):
    """(chunk_id, passage text) in batches, most popular documents first."""
    rows = conn.execute(
        "SELECT c.chunk_id, d.title, c.heading_path, c.text FROM chunks c "
        "JOIN docs d ON d.doc_id = c.doc_id ORDER BY c.doc_id, c.ord LIMIT ?",
        (wanted,),
    )
    batch: list[tuple[int, str]] = []
    for chunk_id, title, heading_path, text in rows:
        batch.append((chunk_id, passage_text(title, heading_path, text)))
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _write_vectors(
    conn: db.Connection, final: Path, cache: VectorCache, embedder, wanted: int
) -> None:
    import numpy as np

    conn.execute(VECTOR_TABLE)
    conn.execute("DELETE FROM chunk_vectors")
    conn.execute("ATTACH DATABASE ? AS cache", (str(cache.path),))
    rows = []
    for batch in _chunk_batches(conn, wanted):
        hashes = [text_hash(embedder.name, text) for _, text in batch]
        marks = ",".join("?" * len(hashes))
        found = dict(conn.execute(f"SELECT hash, v FROM cache.vec WHERE hash IN ({marks})", hashes))
        rows = [
            (chunk_id, found[h])
            for (chunk_id, _), h in zip(batch, hashes, strict=True)
            if h in found
        ]
        conn.executemany("INSERT INTO chunk_vectors VALUES (?, ?)", rows)
    conn.execute("DETACH DATABASE cache")
    count = conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0]
    meta = {
        "embedding_model": embedder.name,
        "embedding_dim": embedder.dim,
        "embedding_normalised": 1,
        "embedding_dtype": "float16",
        "vector_count": count,
        "embedding_max_chunks": "" if wanted >= _chunk_total(conn) else wanted,
        "embedded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    conn.executemany("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                     [(k, str(v)) for k, v in meta.items()])  # fmt: skip
    index = _write_index(conn, final, embedder.dim, np)
    floor = _calibrate(embedder, index)
    if floor is not None:
        conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('semantic_floor', ?)",
                     (str(round(floor, 4)),))  # fmt: skip


def _calibrate(embedder, index) -> float | None:
    """The similarity generated nonsense reaches in this index (search/calibration.py)."""
    from .search import calibration

    def nearest(vector):
        if not len(index):
            return []
        found = index.search(vector, 1)
        return [(int(k), 1.0 - float(d)) for k, d in zip(found.keys, found.distances, strict=True)]

    scores = calibration.nearest_scores(embedder, nearest)
    return calibration.floor_from(scores, calibration.FLOOR_QUANTILE)


def _chunk_total(conn: db.Connection) -> int:
    return conn.execute("SELECT count(*) FROM chunks").fetchone()[0]


def previous_embedding(path: Path | None) -> tuple[str, int | None] | None:
    """(model, max_chunks) of a generation that had vectors — what a rebuild carries over."""
    if path is None or not path.exists():
        return None
    conn = db.open_readonly(path)
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
    finally:
        conn.close()
    if not meta.get("embedding_model"):
        return None
    limit = meta.get("embedding_max_chunks") or None
    return meta["embedding_model"], int(limit) if limit else None


def _write_index(conn: db.Connection, final: Path, dim: int, np):
    """The HNSW file, filled in batches so memory holds one batch of raw vectors at a time."""
    from usearch.index import Index

    from .search import vectors as vec

    index = Index(ndim=dim, metric="cos", dtype="f16", connectivity=vec.CONNECTIVITY,
                  expansion_add=vec.EXPANSION_ADD, expansion_search=vec.EXPANSION_SEARCH)  # fmt: skip
    last = 0
    while True:
        rows = conn.execute(
            "SELECT chunk_id, vec FROM chunk_vectors WHERE chunk_id > ? ORDER BY chunk_id LIMIT ?",
            (last, INDEX_BATCH),
        ).fetchall()
        if not rows:
            break
        keys = np.array([r[0] for r in rows], dtype=np.uint64)
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f2").reshape(len(rows), dim)
        index.add(keys, matrix.astype(np.float32), threads=0)
        last = rows[-1][0]
    index.save(str(index_path(final)))
    return index
