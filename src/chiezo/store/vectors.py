"""Chunk vectors: kept once, in an HNSW index file next to the source file.

* ``chunk_vectors(vec_id, chunk_id, span_start, span_end)`` in the generation file says what
  each vector stands for: a *unit* of a chunk — a few sentences,
  ``chunk.text[span_start:span_end]`` — or the whole chunk (store/embed.py says which and why).
  The model, dimension, normalisation and unit size are in ``meta``; a query is always embedded
  with the source's own model.
* ``gen-….db.usearch`` next to it is an HNSW index (usearch, cosine, float16 — half of float32,
  at no measurable cost in recall: docs/design.md §18) and the vectors' one store: the
  passage picker and filtered search read vectors from it by ``vec_id`` (``VectorIndex.vectors``).
  Generations of an older layout also hold each vector in a ``vec`` column of
  ``chunk_vectors``; searches never read it (a vector in the file, the index and the embedding
  cache would be three copies: design.md §35.8); only importing an export of that layout does
  (``column_batches``). The index is opened as a memory-mapped *view*: nothing is loaded into
  the process heap, the OS page cache holds it, and it is warmed (read once) when the server
  starts and when a new generation switches in (store/library.py), so the first queries are
  not slow.
* Below ``EXACT_BELOW`` vectors the same file is searched exhaustively (SIMD over float16, about
  10 ms per 100k vectors here): exact results, no recall question.
* An export carries the vectors as a plain float16 array in ``vec_id`` order (ops/transfer.py):
  an HNSW file is native code's input and is rebuilt on import, never taken from a stranger.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from chiezo.core import db
from chiezo.core.errors import Operation, VectorsUnavailable

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

EXACT_BELOW = 50_000
INDEX_SUFFIX = ".usearch"
CONNECTIVITY = 16
EXPANSION_ADD = 128
EXPANSION_SEARCH = 200  # at 1M vectors ef=96 kept recall@10 at .91; ef=200 .985 (design.md §18)
# A file is read ahead into the page cache only when it is at most this share of the memory:
# a big dump's files must not push everything else out.
READ_AHEAD_SHARE = 8
READ_CHUNK = 1 << 20
INDEX_BATCH = 20_000  # vectors read at a time to build an index: memory holds one batch
INDEX_ADD = 4096  # vectors per index.add call: a few seconds each on 2 cores, then counted

VECTOR_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS chunk_vectors (
        vec_id     INTEGER PRIMARY KEY,
        chunk_id   INTEGER NOT NULL,
        span_start INTEGER NOT NULL,
        span_end   INTEGER NOT NULL,
        unit_hash  BLOB NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS chunk_vectors_by_chunk ON chunk_vectors (chunk_id)",
    "CREATE INDEX IF NOT EXISTS chunk_vectors_by_hash ON chunk_vectors (unit_hash)",
)


@dataclass(frozen=True)
class VectorInfo:
    model: str
    dim: int
    count: int  # vectors
    chunks: int  # chunks in the source
    embedded_chunks: int  # chunks with at least one vector
    docs: int

    @property
    def coverage(self) -> float:
        return self.embedded_chunks / self.chunks if self.chunks else 0.0

    @property
    def vectors_per_doc(self) -> float:
        return self.count / self.docs if self.docs else 1.0


def vector_info(meta: dict[str, str]) -> VectorInfo | None:
    if not meta.get("embedding_model"):
        return None
    return VectorInfo(
        model=meta["embedding_model"],
        dim=int(meta.get("embedding_dim", 0)),
        count=int(meta.get("vector_count", 0)),
        chunks=int(meta.get("chunk_count", 0)),
        embedded_chunks=int(meta.get("embedded_chunks") or meta.get("vector_count", "0")),
        docs=int(meta.get("doc_count", 0)),
    )


def usearch_index_class():
    """usearch's ``Index``, imported safely.

    Importing ``onnxruntime`` *after* ``usearch`` kills the process with SIGSEGV in libstdc++
    (reproduced: ``python -c "import usearch.index; import onnxruntime"`` → exit 139; the other
    order is fine). A process that opens an index and later loads the use-m embedder — an
    evaluation, a server whose first semantic query comes after an e5 source was opened — hit
    it. So onnxruntime, when installed, is imported first — unless this process embeds its
    queries through a model host (store/model_host.py): it then loads no model, and importing
    onnxruntime would cost it 0.2–0.4 s and 18 MB for nothing (``embedders`` refuses a load
    after usearch with a clear error rather than crash)."""
    from chiezo.store.model_host import configured_host

    if configured_host() is None:
        with contextlib.suppress(ImportError):
            import onnxruntime  # noqa: F401  (import order matters: see above)
    from usearch.index import Index

    return Index


def index_path(generation: Path) -> Path:
    return generation.with_name(generation.name + INDEX_SUFFIX)


class VectorIndex:
    """The index view of one generation, opened once, shared by threads."""

    def __init__(self, generation: Path, info: VectorInfo):
        Index = usearch_index_class()  # noqa: N806 - a class

        self.info = info
        path = index_path(generation)
        if not path.exists():
            raise VectorsUnavailable(
                f"the vector index file {path.name} is missing next to its source",
                hint="embed the source again: {see}",
                see=Operation("embed"),
            )
        self._path = path
        self._index = Index.restore(str(path), view=True)
        self._index.expansion_search = EXPANSION_SEARCH
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._index)

    def search(self, query: NDArray[np.float32], k: int) -> list[tuple[int, float]]:
        """(vec_id, cosine similarity), best first."""
        if not len(self._index):
            return []
        exact = len(self._index) < EXACT_BELOW
        with self._lock:  # one search context per index: serialise (each takes < 1 ms)
            matches = self._index.search(query, min(k, len(self._index)), exact=exact)
        pairs = zip(matches.keys, matches.distances, strict=True)
        return [(int(key), 1.0 - float(dist)) for key, dist in pairs]

    def vectors(self, vec_ids: list[int]):
        """(the vec_ids found, their vectors as a float32 matrix, in that order)."""
        import numpy as np

        if not vec_ids:
            return [], np.zeros((0, self.info.dim), dtype=np.float32)
        with self._lock:
            found = self._index.get(np.asarray(vec_ids, dtype=np.uint64))
        kept = [(v, row) for v, row in zip(vec_ids, found, strict=True) if row is not None]
        if not kept:
            return [], np.zeros((0, self.info.dim), dtype=np.float32)
        return [v for v, _ in kept], np.stack([row for _, row in kept]).astype(np.float32)

    def warm(self) -> None:
        """Read the whole index file once into the page cache (it stays mapped, not copied),
        then run one search so the graph's entry levels are resident."""
        import numpy as np

        read_ahead(self._path)  # when too big for that, the search below still warms the top
        probe = np.zeros(self.info.dim, dtype=np.float32)
        probe[0] = 1.0
        self.search(probe, 10)


def read_ahead(path: Path, share: int = READ_AHEAD_SHARE) -> int:
    """Read ``path`` once, sequentially, so that its pages are in the OS page cache and the
    first query reads none from the disk — when it is at most 1/``share`` of the memory.
    Returns the bytes read. ``posix_fadvise(WILLNEED)`` alone does not do it: Linux reads ahead
    only one readahead window of the file (24 of 103 MiB here, bench/first_query.py)."""
    try:
        memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, OSError, ValueError):
        memory = 0  # unknown: read nothing rather than risk evicting everything else
    done = 0
    try:
        if path.stat().st_size > memory // share:
            return 0
        chunk = memoryview(bytearray(READ_CHUNK))  # one buffer, reused: the heap stays flat
        with open(path, "rb", buffering=0) as handle:
            with contextlib.suppress(AttributeError, OSError):  # a hint; Linux widens readahead
                os.posix_fadvise(handle.fileno(), 0, 0, os.POSIX_FADV_SEQUENTIAL)
            while count := handle.readinto(chunk):
                done += count
    except OSError:
        pass  # gone or unreadable: the first query will say so
    return done


@dataclass(frozen=True)
class VectorOwner:
    chunk_id: int
    doc_id: int
    span: tuple[int, int]


def vector_owners(conn: db.Connection, vec_ids: list[int]) -> dict[int, VectorOwner]:
    """vec_id → the chunk, document and text span it stands for."""
    out: dict[int, VectorOwner] = {}
    for start in range(0, len(vec_ids), 500):
        part = vec_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        for vec_id, chunk_id, doc_id, a, b in conn.execute(
            f"SELECT v.vec_id, v.chunk_id, c.doc_id, v.span_start, v.span_end "
            f"FROM chunk_vectors v JOIN chunks c ON c.chunk_id = v.chunk_id "
            f"WHERE v.vec_id IN ({marks})",
            part,
        ):
            out[vec_id] = VectorOwner(chunk_id, doc_id, (a, b))
    return out


def write_index(
    batches: Iterable[tuple[list[int], NDArray[np.float16]]],
    final: Path,
    dim: int,
    added: Callable[[int], None] | None = None,
):
    """The HNSW file of generation ``final`` from ``batches`` of (vec_ids, float16 matrix) —
    one batch in memory at a time; ``added(n)`` after every ``INDEX_ADD`` vectors (so a phase
    moves every few seconds). Returns the index."""
    import numpy as np

    Index = usearch_index_class()  # noqa: N806 - a class

    index = Index(
        ndim=dim,
        metric="cos",
        dtype="f16",
        connectivity=CONNECTIVITY,
        expansion_add=EXPANSION_ADD,
        expansion_search=EXPANSION_SEARCH,
    )
    for ids, matrix in batches:
        keys = np.asarray(ids, dtype=np.uint64)
        for at in range(0, len(keys), INDEX_ADD):
            part = slice(at, at + INDEX_ADD)
            index.add(keys[part], matrix[part].astype(np.float32), threads=0)
            if added is not None:
                added(len(keys[part]))
    index.save(str(index_path(final)))
    return index


def vec_ids(conn: db.Connection) -> Iterator[list[int]]:
    """The generation's vec_ids in order, ``INDEX_BATCH`` at a time."""
    last = 0
    while rows := conn.execute(
        "SELECT vec_id FROM chunk_vectors WHERE vec_id > ? ORDER BY vec_id LIMIT ?",
        (last, INDEX_BATCH),
    ).fetchall():
        yield [r[0] for r in rows]
        last = rows[-1][0]


def file_batches(conn: db.Connection, vectors: BinaryIO, dim: int):
    """(vec_ids, float16 matrix) batches pairing the generation's vec_ids, in order, with the
    rows of a raw little-endian float16 file (one row per vector, as an export carries them)."""
    import numpy as np

    row = 2 * dim
    for ids in vec_ids(conn):
        raw = vectors.read(row * len(ids))
        if len(raw) != row * len(ids):
            raise ValueError(f"the vectors end before vector {ids[0] + len(raw) // row:,}")
        matrix = np.frombuffer(raw, dtype="<f2").reshape(len(ids), dim)
        if not np.isfinite(matrix).all():
            raise ValueError("the vectors hold values that are not numbers")
        yield ids, matrix
    if vectors.read(1):
        raise ValueError("there are more vectors than the generation has rows for")


def column_batches(conn: db.Connection, dim: int):
    """(vec_ids, float16 matrix) batches from the ``vec`` column of a generation embedded
    before the index became the vectors' store (an old export; a rebuild's old generation)."""
    import numpy as np

    last = 0
    while rows := conn.execute(
        "SELECT vec_id, vec FROM chunk_vectors WHERE vec_id > ? ORDER BY vec_id LIMIT ?",
        (last, INDEX_BATCH),
    ).fetchall():
        matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f2").reshape(len(rows), dim)
        yield [r[0] for r in rows], matrix
        last = rows[-1][0]


def has_vector_column(conn: db.Connection) -> bool:
    return any(r[1] == "vec" for r in conn.execute("PRAGMA table_info(chunk_vectors)"))


class HeldVectors:
    """The vectors a generation holds, by the hash of the exact text each was embedded from
    (``chunk_vectors.unit_hash``, store/embed.text_hash): what a re-embed or another source's
    embed reuses, so that the embedding cache need not keep a copy of them (design.md §35.10)."""

    def __init__(self, conn: db.Connection, index: VectorIndex) -> None:
        self.conn, self.index = conn, index

    @classmethod
    def of(cls, generation: Path | None, model: str) -> HeldVectors | None:
        """Those of ``generation`` if it has vectors of ``model`` with their hashes (a
        generation embedded before hashes were kept has none to give)."""
        if generation is None or not generation.exists():
            return None
        try:
            conn = db.open_readonly(generation)
        except db.Error:
            return None
        try:
            meta = dict(conn.execute("SELECT key, value FROM meta"))
            info = vector_info(meta)
            columns = {r[1] for r in conn.execute("PRAGMA table_info(chunk_vectors)")}
            if info is None or info.model != model or "unit_hash" not in columns:
                conn.close()
                return None
            return cls(conn, VectorIndex(generation, info))
        except (db.Error, VectorsUnavailable):
            conn.close()
            return None

    def _vec_ids(self, hashes: list[str]) -> dict[int, str]:
        marks = ",".join("?" * len(hashes))
        rows = self.conn.execute(
            f"SELECT vec_id, unit_hash FROM chunk_vectors WHERE unit_hash IN ({marks})",
            [bytes.fromhex(h) for h in hashes],
        )
        return {vec_id: key.hex() for vec_id, key in rows}

    def known(self, hashes: list[str]) -> set[str]:
        return set(self._vec_ids(hashes).values()) if hashes else set()

    def get(self, hashes: list[str]) -> dict[str, bytes]:
        """float16 rows (as the cache keeps them) of the hashes held."""
        if not hashes:
            return {}
        owners = self._vec_ids(hashes)
        found, matrix = self.index.vectors(list(owners))
        return {
            owners[v]: row.astype("<f2").tobytes() for v, row in zip(found, matrix, strict=True)
        }

    def hashes(self) -> Iterator[list[bytes]]:
        """Every hash held, ``INDEX_BATCH`` at a time."""
        last = 0
        while rows := self.conn.execute(
            "SELECT vec_id, unit_hash FROM chunk_vectors WHERE vec_id > ? ORDER BY vec_id LIMIT ?",
            (last, INDEX_BATCH),
        ).fetchall():
            yield [key for _, key in rows]
            last = rows[-1][0]

    def close(self) -> None:
        self.conn.close()
