"""Fusing keyword and semantic rankings — pure functions over lists.

Scores from the two sides are not comparable (bm25 × popularity against cosine similarity), so
they are brought to one scale first: **min-max** normalisation of each side's candidates to
0..1 (or, for the two keyword indexes of a source, division by the best score: ``max``), then a
weighted sum (the weight: retrieval.keyword_weight, per model and per query), or
**reciprocal rank fusion**, which ignores the scores and uses only the ranks. A document missing
from one side scores 0 there. Title-exact documents stay first whatever the fusion says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chiezo.search.rank import RRF_K


@dataclass(frozen=True)
class Fused:
    doc_id: int
    score: float
    keyword_rank: int | None
    semantic_rank: int | None
    keyword_score: float | None
    semantic_score: float | None


def minmax(scores: Sequence[float]) -> list[float]:
    """Scale to 0..1; a single candidate (or all equal) scores 1."""
    if not scores:
        return []
    low, high = min(scores), max(scores)
    if high - low < 1e-12:
        return [1.0] * len(scores)
    return [(s - low) / (high - low) for s in scores]


def scale_to_max(scores: Sequence[float]) -> list[float]:
    """Divide by the best score: 0..1 with the best at 1, but — unlike min-max — the weakest
    candidate keeps its share instead of dropping to 0 (with two candidates, min-max calls the
    second worthless). Scores must be positive (bm25 negated)."""
    top = max(scores, default=0.0)
    if top <= 0:
        return [1.0] * len(scores)
    return [max(s, 0.0) / top for s in scores]


def fuse(
    keyword: Sequence[tuple[int, float]],
    semantic: Sequence[tuple[int, float]],
    *,
    keyword_weight: float = 0.5,
    method: str = "minmax",
    first: Sequence[int] = (),
    keyword_scaled: bool = False,
) -> list[Fused]:
    """``keyword`` and ``semantic`` are (doc_id, score) best first, higher scores better;
    ``first`` (title-exact documents) lead in their own order. ``keyword_scaled``: the keyword
    scores are already on 0..1 (scaled by coverage, retrieval.py) and are kept as they are."""
    k_rank = {d: i for i, (d, _) in enumerate(keyword, 1)}
    s_rank = {d: i for i, (d, _) in enumerate(semantic, 1)}
    k_score = dict(keyword)
    s_score = dict(semantic)
    if method == "rrf":
        combined = {
            d: keyword_weight * (1 / (RRF_K + k_rank[d]) if d in k_rank else 0)
            + (1 - keyword_weight) * (1 / (RRF_K + s_rank[d]) if d in s_rank else 0)
            for d in {**k_rank, **s_rank}
        }
    elif method in ("minmax", "max"):
        scale = minmax if method == "minmax" else scale_to_max
        k_values = list(k_score.values())
        k_norm = dict(zip(k_score, k_values if keyword_scaled else scale(k_values), strict=True))
        s_norm = dict(zip(s_score, scale(list(s_score.values())), strict=True))
        combined = {
            d: keyword_weight * k_norm.get(d, 0.0) + (1 - keyword_weight) * s_norm.get(d, 0.0)
            for d in {**k_norm, **s_norm}
        }
    else:
        raise ValueError(f"unknown fusion method {method!r}")
    lead = [d for d in dict.fromkeys(first) if d in combined or d in k_rank]
    rest = sorted(
        (d for d in combined if d not in set(lead)),
        key=lambda d: (-combined[d], k_rank.get(d, 10**9), d),
    )
    return [
        Fused(d, combined.get(d, 1.0), k_rank.get(d), s_rank.get(d), k_score.get(d), s_score.get(d))
        for d in [*lead, *rest]
    ]
