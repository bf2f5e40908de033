"""Semantic candidates: the query embedded with the source's own model, nearest vectors (units
of chunks, see store/embed.py), best unit per document.

With filters, the candidates must come from the filtered set. A set up to ``EXACT_SET`` documents
is searched exhaustively (its chunk vectors read from the source file, one matrix product); a
larger one is searched through the index with over-fetching, then filtered.

A ``min_score`` floor (per model; cosine similarity) keeps "the nearest junk" out: a nonsense
query has nearest neighbours too.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import TYPE_CHECKING

from chiezo.core.errors import ChiezoError, Operation, Option
from chiezo.search.filters import Filters, filter_ids
from chiezo.search.setplan import run_filters
from chiezo.store.library import Source
from chiezo.store.model_host import query_embedder
from chiezo.store.vectors import VectorsUnavailable, vector_info, vector_owners

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

EXACT_SET = 20_000
# Vectors fetched per document wanted (documents have several): at least this many, more where
# the source has more vectors per document, at most MAX_FETCH in all.
OVERFETCH = 4
FILTERED_OVERFETCH = 40
MAX_FETCH = 5_000
# Fallback cosine floors, per model, for a source without a calibrated one: the 0.99 quantile
# of generated nonsense on JaQuAD dev with 60-char units (docs/design.md §18).
MIN_SCORE = {"use-m": 0.40, "e5-small": 0.86}
DEFAULT_MIN_SCORE = 0.3
NO_FLOOR = -1.0  # cosine similarity is never below it
# Hybrid also weighs the meaning of keyword matches under the floor (retrieval._floored), but
# which document a vector belongs to is a lookup per vector: the 5,000 a long-article source
# fetches cost 13 ms of a 40 ms hybrid query on the jawiki excerpt, the first 1,000 under the
# floor 2.6 ms, with the same recall on its 92 questions (docs/design.md §24.6).
BELOW_FLOOR_OWNERS = 1_000


@dataclass(frozen=True)
class SemanticHit:
    doc_id: int
    score: float
    chunk_id: int
    span: tuple[int, int] | None = None  # the unit of the chunk that matched


def require_vectors(source: Source):
    info = vector_info(source.meta)
    if info is None or info.count == 0:
        raise VectorsUnavailable(
            f"source {source.name!r} has no vectors, so semantic search cannot run",
            source=source.name,
            hint="embed it with {0}, or search with {1}",
            see=(Operation("embed", source.name), Option("mode", "keyword")),
        )
    return info


def embed_query(source: Source, text: str):
    """The query as a vector of the source's own model; a model that now gives vectors of
    another size than the source's is an error, not a silent comparison of unrelated spaces."""
    info = require_vectors(source)
    vector = _query_vector(info.model, text)
    if info.dim and len(vector) != info.dim:
        raise VectorsUnavailable(
            f"the model {info.model!r} now gives {len(vector)}-d vectors, but {source.name!r} "
            f"was embedded with {info.dim}-d ones",
            source=source.name,
            hint="embed it again: {see}",
            see=Operation("embed", source.name, model=info.model),
        )
    return vector


@functools.lru_cache(maxsize=8192)
def _query_vector(model: str, text: str):
    """Repeated queries (paging, a chat's follow-ups, an evaluation's configurations) are
    embedded once; e5-small takes ~100 ms a query on 2 cores."""
    vector = query_embedder(model).embed([text], "query")[0]
    vector.setflags(write=False)
    return vector


def chunk_closeness(source: Source, chunk_ids: list[int], text: str) -> dict[int, float]:
    """Each of ``chunk_ids`` (that has vectors) → the cosine of its best vector to ``text``
    embedded with the source's model: which passages of a document are about a question
    (answer/passages.py). Empty where the source has no vectors, ``text`` cannot be embedded
    (ChiezoError), or the vectors are of another size than the model's."""
    import numpy as np

    if source.vectors is None:
        return {}
    try:
        query = np.asarray(embed_query(source, text), dtype=np.float32)
    except ChiezoError:
        return {}
    best: dict[int, float] = {}
    for start in range(0, len(chunk_ids), 500):
        part = chunk_ids[start : start + 500]
        owned = dict(
            source.conn.execute(
                f"SELECT vec_id, chunk_id FROM chunk_vectors WHERE chunk_id IN "
                f"({','.join('?' * len(part))})",
                part,
            ).fetchall()
        )
        found, vectors = source.vectors.vectors(list(owned))
        if not found:
            continue
        if vectors.shape[1] != len(query):
            return {}
        for vec_id, score in zip(found, vectors @ query, strict=True):
            chunk_id = owned[vec_id]
            best[chunk_id] = max(best.get(chunk_id, -1.0), float(score))
    return best


def default_floor(source: Source, model: str) -> float:
    """The source's calibrated floor (store/calibration.py), else the model's measured one."""
    measured = source.meta.get("semantic_floor")
    if measured:
        return float(measured)
    return MIN_SCORE.get(model, DEFAULT_MIN_SCORE)


def semantic_candidates(
    source: Source,
    query_vector: NDArray[np.float32],
    n: int,
    *,
    filters: Filters | None = None,
    min_score: float | None = None,
    below_floor: int = 0,
) -> list[SemanticHit]:
    """Up to ``n`` documents, best first, each with its best chunk: those at or above the
    floor, then those of the next ``below_floor`` vectors under it."""
    info = require_vectors(source)
    floor = default_floor(source, info.model) if min_score is None else min_score
    if filters:
        allowed = run_filters(source, filters, EXACT_SET + 1, 0).ids
        if len(allowed) <= EXACT_SET:
            return _exact(source, query_vector, allowed, n, floor if not below_floor else NO_FLOOR)
    per_doc = max(OVERFETCH, round(2 * info.vectors_per_doc))
    fetch = min(MAX_FETCH, n * (FILTERED_OVERFETCH if filters else 1) * per_doc)
    searched = source.vectors.search(query_vector, fetch)  # best first
    above = sum(1 for _, score in searched if score >= floor)
    found = searched[: above + below_floor]
    owners = vector_owners(source.conn, [v for v, _ in found])
    best: dict[int, SemanticHit] = {}
    for vec_id, score in found:
        owner = owners.get(vec_id)
        if owner is not None and owner.doc_id not in best:
            best[owner.doc_id] = SemanticHit(owner.doc_id, score, owner.chunk_id, owner.span)
    hits = list(best.values())
    if filters:
        keep = set(filter_ids(source.conn, filters, [h.doc_id for h in hits]))
        hits = [h for h in hits if h.doc_id in keep]
    return hits[:n]


def _exact(
    source: Source, query_vector: NDArray[np.float32], doc_ids: list[int], n: int, floor: float
) -> list[SemanticHit]:
    import numpy as np

    if not doc_ids:
        return []
    rows: dict[int, tuple[int, int, int, int]] = {}  # vec_id → chunk, document, span
    for start in range(0, len(doc_ids), 500):
        part = doc_ids[start : start + 500]
        marks = ",".join("?" * len(part))
        for vec_id, *owner in source.conn.execute(
            f"SELECT v.vec_id, c.chunk_id, c.doc_id, v.span_start, v.span_end FROM chunks c "
            f"JOIN chunk_vectors v ON v.chunk_id = c.chunk_id WHERE c.doc_id IN ({marks})",
            part,
        ):
            rows[vec_id] = tuple(owner)
    found, matrix = source.vectors.vectors(list(rows))
    if not found:
        return []
    scores = matrix @ np.asarray(query_vector, dtype=np.float32)
    best: dict[int, SemanticHit] = {}
    for i in np.argsort(-scores):
        chunk_id, doc_id, a, b = rows[found[i]]
        score = float(scores[i])
        if score < floor:
            break
        if doc_id not in best:
            best[doc_id] = SemanticHit(doc_id, score, chunk_id, (a, b))
            if len(best) >= n:
                break
    return list(best.values())
