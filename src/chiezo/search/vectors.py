"""Chunk vectors: stored in the source file, searched through an index file next to it.

* ``chunk_vectors(chunk_id, vec)`` in the generation file holds every vector as float16 (half
  the size of float32; the top-20 results kept ≥ 95% of their members in the design notes'
  study, re-measured in docs/design.md). The model, dimension and normalisation are in ``meta``;
  a query is always embedded with the source's own model.
* ``gen-….db.usearch`` next to it is an HNSW index (usearch, cosine, float16), opened as a
  memory-mapped *view*: nothing is loaded into the process heap, the OS page cache holds it, and
  it is warmed (touched) when the server starts so the first queries are not slow.
* Below ``EXACT_BELOW`` vectors the same file is searched exhaustively (SIMD over float16, about
  10 ms per 100k vectors here): exact results, no recall question.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from .. import db
from ..errors import ChiezoError

EXACT_BELOW = 50_000
INDEX_SUFFIX = ".usearch"
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 96

VECTOR_TABLE = """
CREATE TABLE IF NOT EXISTS chunk_vectors (
    chunk_id INTEGER PRIMARY KEY,
    vec      BLOB NOT NULL
)
"""


class VectorsUnavailable(ChiezoError):
    status = 400
    exit_code = 2


@dataclass(frozen=True)
class VectorInfo:
    model: str
    dim: int
    count: int
    chunks: int

    @property
    def coverage(self) -> float:
        return self.count / self.chunks if self.chunks else 0.0


def vector_info(meta: dict[str, str]) -> VectorInfo | None:
    if not meta.get("embedding_model"):
        return None
    return VectorInfo(
        model=meta["embedding_model"],
        dim=int(meta.get("embedding_dim", 0)),
        count=int(meta.get("vector_count", 0)),
        chunks=int(meta.get("chunk_count", 0)),
    )


def index_path(generation: Path) -> Path:
    return generation.with_name(generation.name + INDEX_SUFFIX)


class VectorIndex:
    """The index view of one generation, opened once, shared by threads."""

    def __init__(self, generation: Path, info: VectorInfo):
        from usearch.index import Index

        self.info = info
        path = index_path(generation)
        if not path.exists():
            raise VectorsUnavailable(
                f"the vector index file {path.name} is missing next to its source",
                hint="run `chiezo embed` for the source again",
            )
        self._path = path
        self._index = Index.restore(str(path), view=True)
        self._index.expansion_search = EXPANSION_SEARCH
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._index)

    def search(self, query, k: int) -> list[tuple[int, float]]:
        """(chunk_id, cosine similarity), best first."""
        if not len(self._index):
            return []
        exact = len(self._index) < EXACT_BELOW
        with self._lock:  # one search context per index: serialise (each takes < 1 ms)
            matches = self._index.search(query, min(k, len(self._index)), exact=exact)
        pairs = zip(matches.keys, matches.distances, strict=True)
        return [(int(key), 1.0 - float(dist)) for key, dist in pairs]

    def warm(self) -> None:
        """Ask the OS to read the whole index file ahead (it stays mapped, not copied), then
        run one search so the graph's entry levels are resident."""
        import os

        import numpy as np

        try:
            with open(self._path, "rb") as fh:
                os.posix_fadvise(fh.fileno(), 0, 0, os.POSIX_FADV_WILLNEED)
        except (AttributeError, OSError):
            pass  # not available on this platform: the search below still warms the top
        probe = np.zeros(self.info.dim, dtype=np.float32)
        probe[0] = 1.0
        self.search(probe, 10)


def chunk_docs(conn: db.Connection, chunk_ids: list[int]) -> dict[int, int]:
    """chunk_id → doc_id."""
    if not chunk_ids:
        return {}
    marks = ",".join("?" * len(chunk_ids))
    return dict(conn.execute(f"SELECT chunk_id, doc_id FROM chunks WHERE chunk_id IN ({marks})",
                             chunk_ids))  # fmt: skip
