"""Semantic candidates: the query embedded with the source's own model, nearest chunks, best
chunk per document.

With filters, the candidates must come from the filtered set. A set up to ``EXACT_SET`` documents
is searched exhaustively (its chunk vectors read from the source file, one matrix product); a
larger one is searched through the index with over-fetching, then filtered.

A ``min_score`` floor (per model; cosine similarity) keeps "the nearest junk" out: a nonsense
query has nearest neighbours too.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..embedders import get_embedder
from ..library import Source
from .filters import Filters, filter_ids
from .setplan import run_filters
from .vectors import VectorsUnavailable, chunk_docs, vector_info

EXACT_SET = 20_000
OVERFETCH = 4  # chunks fetched per document wanted: documents have several chunks
FILTERED_OVERFETCH = 40
# Cosine floors below which a document is not a semantic match, per model; measured on JaQuAD
# dev against nonsense queries (docs/design.md).
MIN_SCORE = {"use-m": 0.25, "e5-small": 0.80}
DEFAULT_MIN_SCORE = 0.3


@dataclass(frozen=True)
class SemanticHit:
    doc_id: int
    score: float
    chunk_id: int


def require_vectors(source: Source):
    info = vector_info(source.meta)
    if info is None or info.count == 0:
        raise VectorsUnavailable(
            f"source {source.name!r} has no vectors, so semantic search cannot run",
            source=source.name,
            hint=f"run `chiezo embed {source.name}`, or search with mode=keyword",
        )
    return info


def embed_query(source: Source, text: str):
    """The query as a vector of the source's own model; a model that now gives vectors of
    another size than the source's is an error, not a silent comparison of unrelated spaces."""
    info = require_vectors(source)
    vector = get_embedder(info.model).embed([text], "query")[0]
    if info.dim and len(vector) != info.dim:
        raise VectorsUnavailable(
            f"the model {info.model!r} now gives {len(vector)}-d vectors, but {source.name!r} "
            f"was embedded with {info.dim}-d ones",
            source=source.name,
            hint=f"re-embed: `chiezo embed {source.name} --model {info.model}`",
        )
    return vector


def default_floor(source: Source, model: str) -> float:
    """The source's calibrated floor (search/calibration.py), else the model's measured one."""
    measured = source.meta.get("semantic_floor")
    if measured:
        return float(measured)
    return MIN_SCORE.get(model, DEFAULT_MIN_SCORE)


def semantic_candidates(
    source: Source,
    query_vector,
    n: int,
    *,
    filters: Filters | None = None,
    min_score: float | None = None,
) -> list[SemanticHit]:
    """Up to ``n`` documents, best first, each with its best chunk."""
    info = require_vectors(source)
    floor = default_floor(source, info.model) if min_score is None else min_score
    if filters:
        allowed = run_filters(source, filters, EXACT_SET + 1, 0).ids
        if len(allowed) <= EXACT_SET:
            return _exact(source, query_vector, allowed, n, floor)
    fetch = n * (FILTERED_OVERFETCH if filters else OVERFETCH)
    chunks = source.vectors.search(query_vector, fetch)
    owners = chunk_docs(source.conn, [c for c, _ in chunks])
    best: dict[int, SemanticHit] = {}
    for chunk_id, score in chunks:
        doc_id = owners.get(chunk_id)
        if doc_id is not None and score >= floor and doc_id not in best:
            best[doc_id] = SemanticHit(doc_id, score, chunk_id)
    hits = list(best.values())
    if filters:
        keep = set(filter_ids(source.conn, filters, [h.doc_id for h in hits]))
        hits = [h for h in hits if h.doc_id in keep]
    return hits[:n]


def _exact(
    source: Source, query_vector, doc_ids: list[int], n: int, floor: float
) -> list[SemanticHit]:
    import numpy as np

    if not doc_ids:
        return []
    dim = len(query_vector)
    rows: list[tuple[int, int, bytes]] = []
    for start in range(0, len(doc_ids), 500):
        part = doc_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        rows += source.conn.execute(
            f"SELECT c.chunk_id, c.doc_id, v.vec FROM chunks c JOIN chunk_vectors v "
            f"ON v.chunk_id = c.chunk_id WHERE c.doc_id IN ({marks})",
            part,
        ).fetchall()
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(r[2] for r in rows), dtype="<f2").reshape(len(rows), dim)
    scores = matrix.astype(np.float32) @ np.asarray(query_vector, dtype=np.float32)
    best: dict[int, SemanticHit] = {}
    for i in np.argsort(-scores):
        chunk_id, doc_id, _ = rows[i]
        score = float(scores[i])
        if score < floor:
            break
        if doc_id not in best:
            best[doc_id] = SemanticHit(doc_id, score, chunk_id)
            if len(best) >= n:
                break
    return list(best.values())
