"""``chiezo embed``: vectors for a source's chunks, added as a new generation.

Embedding is the slow part (e5-small: ~3.6 passages/s on 2 cores), so it is

* **resumable** — every batch is committed to an embedding cache
  (``$CHIEZO_DATA/vectors/<model>.f16.db``, float16 by a hash of the exact text embedded:
  store/vector_cache.py); an interrupted run continues where it stopped;
* **incremental** — a chunk whose text is unchanged (after a rebuild, or shared by two sources)
  is never embedded twice: its vector is found by the text's hash in the cache or in a
  generation that holds it (each vector's ``unit_hash``), and the cache lets go of what the new
  generation holds once it is switched in;
* **partial if asked** — ``--max-chunks N`` embeds the chunks of the most popular documents
  first; the source reports its vector coverage and stays fully searchable by text.

A chunk is embedded as **units** of a few sentences (up to ``unit_chars`` characters, each led
by the chunk's breadcrumb), not as one vector: a question is usually about one sentence, and one
vector for 500 characters blurs it. On JaQuAD dev this raised USE-multilingual's semantic
recall@1 from .52 to .64 (docs/design.md §18). It multiplies the vectors (≈6 per paragraph), so
sources with more than ``UNITS_UP_TO_CHUNKS`` chunks embed whole chunks unless told otherwise
(``unit_chars=0``). A document's semantic score is its best unit's.

When the cache holds a vector for every chunk wanted, the source gets a new generation: the
current file copied, ``chunk_vectors`` filled (what each vector stands for), the HNSW index
file — the vectors' one store — written next to it, then switched in like any build (the file readers have open is never changed).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from chiezo.core import db
from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, ChiezoError
from chiezo.core.progress import NullProgress, Progress, ticking
from chiezo.store import chunk_text, generations
from chiezo.store import vectors as vec
from chiezo.store.build import check_memory, derive_generation, require_disk
from chiezo.store.embedders import DEFAULT_MODEL, Embedder, get_embedder
from chiezo.store.generations import REPLACED
from chiezo.store.library import Library, Source
from chiezo.store.vector_cache import VectorCache
from chiezo.store.vectors import VECTOR_SCHEMA

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import ArrayLike, NDArray
    from usearch.index import Index

    from chiezo.store.calibration import QueryEmbedder

BATCH = 64
MAX_PASSAGE_CHARS = 2000
CALIBRATION_BATCH = 32
SENTENCE_UNIT_CHARS = 60  # best of 1–150 on JaQuAD dev (docs/design.md §18)
UNITS_UP_TO_CHUNKS = 200_000
# Refused before the model loads with less memory available: use-m holds ~0.8 GiB while it
# embeds (docs/operations.md).
EMBED_MEMORY = 1 * 2**30
UNIT_SAMPLE = 2000
# Bytes a vector costs beyond its float16 values, summed over the three places it is while an
# embed runs (the scratch file the index is built from, the index, the cache): its row (ids,
# span), the HNSW graph (M=16: ~32 neighbours of 4 bytes at the base level) and the cache key.
VECTOR_OVERHEAD = 48 + 160 + 48
# A unit shorter than this joins its neighbour: a heading line ("# 百済") or "注釈" alone carries
# no meaning, and such near-empty vectors were where generated nonsense landed (design.md §18).
MIN_UNIT_CHARS = 16
# Where a sentence ends: Japanese and Western end marks (with closing quotes), a period before
# white space, a line break.
_SENTENCE_END = re.compile(r"[。！？!?]+[」』）)\"'’”]*|\.(?=\s)|\n")


@dataclass
class EmbedReport:
    source: str
    model: str
    chunks: int
    embedded_chunks: int
    vectors: int
    unit_chars: int
    embedded: int  # newly computed in this run
    reused: int  # found in the cache
    seconds: float
    path: str = ""
    computed_by: str = "this process"  # or the cluster and its actors (cluster/embedding.py)

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


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence, surrounding white space left out."""
    spans, start = [], 0
    for match in _SENTENCE_END.finditer(text):
        spans.append((start, match.end()))
        start = match.end()
    spans.append((start, len(text)))
    out = []
    for a, b in spans:
        piece = text[a:b]
        a += len(piece) - len(piece.lstrip())
        b -= len(piece) - len(piece.rstrip())
        if b > a:
            out.append((a, b))
    return out


def unit_spans(text: str, unit_chars: int) -> list[tuple[int, int]]:
    """Consecutive sentences grouped up to ``unit_chars`` (a longer sentence stays whole, a
    shorter than ``MIN_UNIT_CHARS`` joins the next); ``unit_chars=0``: the whole chunk."""
    if unit_chars <= 0:
        return [(0, len(text))]
    units: list[tuple[int, int]] = []
    current: tuple[int, int] | None = None
    for a, b in sentence_spans(text):
        if current and b - current[0] > unit_chars and current[1] - current[0] >= MIN_UNIT_CHARS:
            units.append(current)
            current = None
        current = (current[0], b) if current else (a, b)
    if current and units and current[1] - current[0] < MIN_UNIT_CHARS:
        units[-1] = (units[-1][0], current[1])
    elif current:
        units.append(current)
    return units or [(0, len(text))]


def choose_unit_chars(requested: int | None, meta: dict[str, str], chunks: int) -> int:
    """As asked; else as the source was embedded before; else sentences unless it is huge."""
    if requested is not None:
        return requested
    if meta.get("embedding_unit_chars"):
        return int(meta["embedding_unit_chars"])
    return SENTENCE_UNIT_CHARS if chunks <= UNITS_UP_TO_CHUNKS else 0


def disk_for_vectors(source: Source, chunks: int, unit_chars: int, dim: int) -> int:
    """Bytes an embed of ``chunks`` chunks writes at its peak: the new generation (a copy of
    the current one plus the vectors' rows), the scratch copy of the vectors the index is built
    from, the index and the cache's copies. Units are estimated from
    the first ``UNIT_SAMPLE`` chunks' length (a scan of every chunk would read the whole
    source before the work starts)."""
    conn = source.conn
    rows = conn.execute(
        f"SELECT text, {chunk_text.spans_column(conn)} FROM chunks LIMIT ?", (UNIT_SAMPLE,)
    ).fetchall()
    sample = sum(chunk_text.text_length(t, s) for t, s in rows) / len(rows) if rows else 0
    per_chunk = max(1.0, (sample or 0) / unit_chars) if unit_chars else 1.0
    units = int(chunks * per_chunk)
    return int(source.path.stat().st_size + units * dim * 2 * 3 + units * VECTOR_OVERHEAD)


def text_hash(model: str, text: str) -> str:
    return hashlib.sha1(f"{model}\0{text}".encode()).hexdigest()


def embed_source(
    settings: Settings,
    library: Library,
    name: str,
    model: str | None = None,
    *,
    max_chunks: int | None = None,
    unit_chars: int | None = None,
    progress: Progress | None = None,
    keep_previous: Path | None | str = REPLACED,
    runner: Runner | None = None,
) -> EmbedReport:
    """Embed source ``name`` and switch the result in (see the module docstring); progress
    has a heartbeat throughout, so a long model batch or index step never goes silent.
    ``keep_previous``: the generation to keep beside the new one — by default the one it
    replaces; the embed step of an ingest gives the one that served before the ingest.
    ``runner``: what computes the missing vectors — by default this process's embedder; a
    cluster's actor pool (cluster/embedding.py) writes through the same cache."""
    with ticking(progress) as shown:
        return _embed_source(
            settings,
            library,
            name,
            model,
            max_chunks=max_chunks,
            unit_chars=unit_chars,
            progress=shown,
            keep_previous=keep_previous,
            runner=runner,
        )


def _embed_source(
    settings: Settings,
    library: Library,
    name: str,
    model: str | None,
    *,
    max_chunks: int | None,
    unit_chars: int | None,
    progress: Progress,
    keep_previous: Path | None | str,
    runner: Runner | None,
) -> EmbedReport:
    if unit_chars is not None and unit_chars < 0:
        raise BadQuery(f"unit_chars must be 0 (whole chunks) or more, got {unit_chars}")
    source = library.get(name)
    if source.writable:
        raise BadQuery(
            f"the {name} source is not embedded (it changes with every write)", source=name
        )
    if source.live:
        raise BadQuery(
            f"the {name} source is searched live by its server: it has nothing here to embed",
            source=name,
        )
    model = model or source.meta.get("embedding_model") or DEFAULT_MODEL
    if runner is None:  # the model computes here: refused before it is loaded
        check_memory(EMBED_MEMORY, name, doing="embed")
    progress.phase(f"loading {model}", None, "steps")
    embedder = get_embedder(model)
    started = time.monotonic()
    total = source.conn.execute("SELECT count(*) FROM chunks").fetchone()[0]
    wanted = min(total, max_chunks) if max_chunks is not None else total
    unit_chars = choose_unit_chars(unit_chars, source.meta, total)
    needed = disk_for_vectors(source, wanted, unit_chars, embedder.dim)
    require_disk(settings.corpus_dir, needed, f"embed {name!r}", after=": nothing was changed")
    cache = VectorCache(settings, embedder.name, progress)  # converts a cache of the old layout
    stored = StoredVectors(cache, held_vectors(library, embedder.name, keep_previous))
    embedded = reused = 0
    try:
        progress.phase(f"embedding with {embedder.name}", wanted, "chunks")
        vectorize = (runner or local_vectors)(embedder)
        for work, vectors in vectorize(
            _missing(source.conn, wanted, unit_chars, stored, embedder.name)
        ):
            if work.hashes:
                cache.put(
                    [
                        (h, row.tobytes())
                        for h, row in zip(work.hashes, as_fp16(vectors), strict=True)
                    ]
                )
            embedded += len(work.hashes)
            reused += work.reused
            progress.advance(work.chunks)
        # the copy of the current generation is one file copy: the heartbeat shows it alive
        progress.phase("copying the generation", None, "steps")
        counts: dict[str, int] = {}

        def step(conn: db.Connection, final: Path) -> None:
            progress.phase("writing vectors", embedded + reused, "vectors")
            counts.update(
                _write_vectors(conn, final, stored, embedder, wanted, unit_chars, progress)
            )
            progress.phase("checking and switching", None, "steps")

        report = derive_generation(settings, name, step, what="embed", keep_previous=keep_previous)
        _forget_held(cache, report.path, embedder.name, progress)
    finally:
        stored.close()
        cache.close()
    return EmbedReport(
        name,
        embedder.name,
        total,
        counts.get("embedded_chunks", 0),
        counts.get("vector_count", 0),
        unit_chars,
        embedded,
        reused,
        time.monotonic() - started,
        str(report.path),
        getattr(vectorize, "where", "this process"),
    )


@dataclass(frozen=True)
class EmbedBatch:
    """One batch of units for the embedder: the ones the cache lacks (by text hash)."""

    hashes: list[str]
    passages: list[str]
    chunks: int  # chunks of the source this batch completes (for progress)
    reused: int  # units of the batch already in the cache


# A runner turns batches of work into (work, vectors) pairs, in any order: the cache is keyed
# by text, so where a vector is computed does not change the result.
Vectorize = Callable[[Iterable[EmbedBatch]], Iterator[tuple[EmbedBatch, Any]]]
Runner = Callable[[Embedder], Vectorize]


def local_vectors(embedder: Embedder) -> Vectorize:
    """The default runner: this process's embedder, one batch after another."""

    def vectorize(batches: Iterable[EmbedBatch]) -> Iterator[tuple[EmbedBatch, Any]]:
        for work in batches:
            yield work, embedder.embed(work.passages, "passage") if work.passages else None

    return vectorize


def as_fp16(vectors: ArrayLike) -> NDArray[np.float16]:
    """Rows as stored in the cache and the generation: little-endian float16."""
    import numpy as np

    return np.asarray(vectors).astype("<f2", copy=False)


# what a look-up finds: which hashes are stored, or their vectors
_Found = TypeVar("_Found", set[str], dict[str, bytes])


class StoredVectors:
    """Where an embed finds vectors computed before, by text hash: the embedding cache (what
    this or an interrupted run computed), then the generations that hold them — the source's
    own, the one an ingest keeps, other sources' of the same model (``held_vectors``)."""

    def __init__(self, cache: VectorCache, held: list[vec.HeldVectors]) -> None:
        self.cache, self.held = cache, held

    def _look(
        self, hashes: list[str], ask: Callable[[VectorCache | vec.HeldVectors, list[str]], _Found]
    ) -> _Found:
        found = ask(self.cache, hashes)
        for holder in self.held:
            rest = [h for h in hashes if h not in found]
            if not rest:
                break
            found |= ask(holder, rest)
        return found

    def known(self, hashes: list[str]) -> set[str]:
        return self._look(hashes, lambda where, wanted: where.known(wanted))

    def get(self, hashes: list[str]) -> dict[str, bytes]:
        return self._look(hashes, lambda where, wanted: where.get(wanted))

    def close(self) -> None:
        for holder in self.held:
            holder.close()


def held_vectors(
    library: Library, model: str, keep_previous: Path | None | str
) -> list[vec.HeldVectors]:
    """The generations whose vectors of ``model`` an embed may reuse: every source's current
    one, and ``keep_previous`` (an ingest's embed step: the generation that served before)."""
    paths = [keep_previous] if isinstance(keep_previous, Path) else []
    for name in library.names():
        with contextlib.suppress(ChiezoError):
            source = library.get(name)
            if not source.writable and source.meta.get("embedding_model") == model:
                paths.append(source.path)
    held = [vec.HeldVectors.of(path, model) for path in dict.fromkeys(paths)]
    return [h for h in held if h is not None]


def _forget_held(cache: VectorCache, generation: Path, model: str, progress: Progress) -> None:
    """The cache lets go of the vectors the new generation holds (a re-embed finds them there):
    it keeps what no generation holds — an interrupted run's — not a third copy. Best effort:
    the embed has switched in; a failure here only leaves the cache larger."""
    held = vec.HeldVectors.of(generation, model)
    if held is None:
        return
    try:
        for keys in held.hashes():
            for at in range(0, len(keys), 500):
                cache.forget(keys[at : at + 500])
        cache.compact()
    except db.Error as exc:
        progress.warn(f"the embedding cache keeps copies of the new vectors ({exc})")
    finally:
        held.close()


def _missing(
    conn: db.Connection, wanted: int, unit_chars: int, stored: StoredVectors, model: str
) -> Iterator[EmbedBatch]:
    """The units of ``_unit_batches`` whose vectors are stored nowhere yet, batch by batch."""
    for batch, chunk_count in _unit_batches(conn, wanted, unit_chars):
        hashes = [text_hash(model, unit.passage) for unit in batch]
        known = stored.known(hashes)
        todo = {h: unit.passage for h, unit in zip(hashes, batch, strict=True) if h not in known}
        yield EmbedBatch(list(todo), list(todo.values()), chunk_count, len(batch) - len(todo))


@dataclass(frozen=True)
class Unit:
    chunk_id: int
    start: int
    end: int
    passage: str  # what is embedded: breadcrumb + the unit's text


def _unit_batches(conn: db.Connection, wanted: int, unit_chars: int):
    """(units, chunks they came from) in batches of about ``BATCH`` units, most popular
    documents first; the same units in the same order every time (the index keys follow it)."""
    rows = conn.execute(
        f"SELECT c.chunk_id, c.doc_id, d.title, c.heading_path, c.text, "
        f"{chunk_text.spans_column(conn, 'c')} FROM chunks c "
        "JOIN docs d ON d.doc_id = c.doc_id ORDER BY c.doc_id, c.ord LIMIT ?",
        (wanted,),
    )
    bodies = chunk_text.Bodies(conn)  # by document: each body is read once
    batch: list[Unit] = []
    chunk_count = 0
    for chunk_id, doc_id, title, heading_path, stored, spans in rows:
        text = bodies.text(doc_id, stored, spans)
        chunk_count += 1
        for a, b in unit_spans(text, unit_chars):
            batch.append(Unit(chunk_id, a, b, passage_text(title, heading_path, text[a:b])))
        if len(batch) >= BATCH:
            yield batch, chunk_count
            batch, chunk_count = [], 0
    if batch or chunk_count:
        yield batch, chunk_count


def _write_vectors(
    conn: db.Connection,
    final: Path,
    stored: StoredVectors,
    embedder: Embedder,
    wanted: int,
    unit_chars: int,
    progress: Progress | None = None,
) -> dict[str, int]:
    """The units' rows into ``chunk_vectors`` (with the hash of the text each vector was
    embedded from) and their vectors from where they are stored into a scratch file (a
    "writing vectors" phase of as many units is open), then the index from that file — the
    vectors' one home in the generation (store/vectors.py) — and the calibration, as phases of
    their own. A vector gone from the cache since it was counted (another source's embed
    finished and let go of it) is computed again here, never left out."""
    progress = progress or NullProgress()

    conn.execute("DROP TABLE IF EXISTS chunk_vectors")  # a layout from an older embed goes too
    for statement in VECTOR_SCHEMA:
        conn.execute(statement)
    with generations.scratch_dir(final.parent.parent, "vectors-") as scratch:
        raw = scratch / "vectors.f16"
        count = 0
        with open(raw, "wb") as out:
            for batch, _ in _unit_batches(conn, wanted, unit_chars):
                hashes = [text_hash(embedder.name, unit.passage) for unit in batch]
                found = stored.get(hashes)
                found.update(_computed_again(stored.cache, embedder, batch, hashes, found))
                conn.executemany(
                    "INSERT INTO chunk_vectors (vec_id, chunk_id, span_start, span_end, "
                    "unit_hash) VALUES (?, ?, ?, ?, ?)",
                    [
                        (count + i, u.chunk_id, u.start, u.end, bytes.fromhex(h))
                        for i, (u, h) in enumerate(zip(batch, hashes, strict=True), 1)
                    ],
                )
                out.write(b"".join(found[h] for h in hashes))
                count += len(batch)
                progress.advance(len(batch))
        chunks = conn.execute("SELECT count(DISTINCT chunk_id) FROM chunk_vectors").fetchone()[0]
        _record_embedding(conn, embedder, unit_chars, count, chunks, wanted)
        progress.phase("building the vector index", count, "vectors")
        with open(raw, "rb") as vectors:
            batches = vec.file_batches(conn, vectors, embedder.dim)
            index = vec.write_index(batches, final, embedder.dim, progress.advance)
    progress.phase("calibrating", calibration_queries(), "queries")
    floor = _calibrate(_Counting(embedder, progress.advance), index)
    if floor is not None:
        conn.execute(
            "INSERT OR REPLACE INTO meta (key, value) VALUES ('semantic_floor', ?)",
            (str(round(floor, 4)),),
        )
    return {"vector_count": count, "embedded_chunks": chunks}


def _computed_again(
    cache: VectorCache,
    embedder: Embedder,
    batch: list[Unit],
    hashes: list[str],
    found: dict[str, bytes],
) -> dict[str, bytes]:
    missing = {h: u.passage for u, h in zip(batch, hashes, strict=True) if h not in found}
    if not missing:
        return {}
    rows = as_fp16(embedder.embed(list(missing.values()), "passage"))
    again = {h: row.tobytes() for h, row in zip(missing, rows, strict=True)}
    cache.put(list(again.items()))
    return again


def _record_embedding(
    conn: db.Connection, embedder: Embedder, unit_chars: int, count: int, chunks: int, wanted: int
) -> None:
    meta = {
        "embedding_model": embedder.name,
        "embedding_dim": embedder.dim,
        "embedding_normalised": 1,
        "embedding_dtype": "float16",
        "embedding_unit_chars": unit_chars,
        "vector_count": count,
        "embedded_chunks": chunks,
        "embedding_max_chunks": "" if wanted >= _chunk_total(conn) else wanted,
        "embedded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    conn.executemany(
        "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
        [(k, str(v)) for k, v in meta.items()],
    )


class _Counting:
    """The embedder, embedding in small batches and counting them: the calibration's queries
    are one call, which would otherwise show no count for its length."""

    def __init__(self, embedder: Embedder, counted: Callable[[int], None]) -> None:
        self.embedder, self.counted = embedder, counted

    def embed(self, texts: list[str], kind: str = "passage"):
        import numpy as np

        parts = []
        for at in range(0, len(texts), CALIBRATION_BATCH):
            parts.append(self.embedder.embed(texts[at : at + CALIBRATION_BATCH], kind))
            self.counted(len(parts[-1]))
        return np.concatenate(parts) if parts else self.embedder.embed([], kind)


def calibration_queries() -> int:
    from chiezo.store import calibration

    return calibration.NONSENSE_QUERIES


def _calibrate(embedder: QueryEmbedder, index: Index) -> float | None:
    """The similarity generated nonsense reaches in this index (store/calibration.py)."""
    from chiezo.store import calibration

    def nearest(vector: NDArray[np.float32]) -> list[tuple[int, float]]:
        if not len(index):
            return []
        found = index.search(vector, 1)
        return [(int(k), 1.0 - float(d)) for k, d in zip(found.keys, found.distances, strict=True)]

    scores = calibration.nearest_scores(embedder, nearest)
    return calibration.floor_from(scores, calibration.FLOOR_QUANTILE)


def _chunk_total(conn: db.Connection) -> int:
    return conn.execute("SELECT count(*) FROM chunks").fetchone()[0]


def previous_embedding(path: Path | None) -> tuple[str, int | None, int | None] | None:
    """(model, max_chunks, unit_chars) of a generation that had vectors — what a rebuild
    carries over."""
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
    units = meta.get("embedding_unit_chars")
    return (
        meta["embedding_model"],
        int(limit) if limit else None,
        int(units) if units not in (None, "") else None,
    )
