"""Each source's semantic floor, measured when it is embedded.

Every query has nearest neighbours, nonsense included, and how similar "unrelated" looks
depends on the model (multilingual-e5 puts almost everything above 0.75 cosine; USE puts
unrelated text near 0.1) and on the corpus. So instead of trusting one constant per model, the
embed step asks the new index a few hundred generated nonsense queries — random Latin words,
keyboard runs, kana, kanji and symbol strings — and records how close the nearest passage came
(``semantic_floor`` in the source's meta). A semantic hit must beat that to count; a query may
still pass its own ``min_score``. The numbers behind the margin are in docs/design.md.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

NONSENSE_QUERIES = 240
SEED = 20261129
FLOOR_QUANTILE = 0.99


def nonsense_queries(count: int = NONSENSE_QUERIES, seed: int = SEED) -> list[str]:
    """Strings that mean nothing in any language, in the shapes people mistype."""
    rng = random.Random(seed)
    latin = "abcdefghijklmnopqrstuvwxyz"
    hiragana = [chr(c) for c in range(0x3041, 0x3097)]
    katakana = [chr(c) for c in range(0x30A1, 0x30FB)]
    kanji = [chr(c) for c in range(0x4E00, 0x9FA0)]
    rows = ["qwertyuiop", "asdfghjkl", "zxcvbnm"]

    def word(alphabet: str | list[str], low: int, high: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(low, high)))

    makers = [
        lambda: " ".join(word(latin, 4, 10) for _ in range(rng.randint(1, 4))),
        lambda: " ".join(rng.choice(rows)[: rng.randint(4, 9)] for _ in range(rng.randint(1, 3))),
        lambda: word(hiragana, 4, 12),
        lambda: word(katakana, 4, 12),
        lambda: word(kanji, 3, 8),
        lambda: word("#$%&*+=-_~^0123456789xyz", 5, 12),
    ]
    return [makers[i % len(makers)]() for i in range(count)]


class QueryEmbedder(Protocol):
    """What is asked of the model: ``embed(texts, kind)``, one row per text (an
    ``embedders.Embedder``, or a wrapper that counts its batches)."""

    def embed(self, texts: list[str], kind: str = "passage") -> NDArray[np.float32]: ...


# a query vector → the best (key, similarity) pairs of the index searched
Search = Callable[["NDArray[np.float32]"], list[tuple[int, float]]]


def nearest_scores(
    embedder: QueryEmbedder, search: Search, count: int = NONSENSE_QUERIES
) -> list[float]:
    """The best similarity each nonsense query reaches; ``search(vector)`` returns the best
    (key, similarity) pairs of the new index."""
    vectors = embedder.embed(nonsense_queries(count), "query")
    scores = []
    for vector in vectors:
        best = search(vector)
        if best:
            scores.append(best[0][1])
    return sorted(scores)


def floor_from(scores: list[float], quantile: float) -> float | None:
    """The similarity below which ``quantile`` of the nonsense queries' best matches fall."""
    if not scores:
        return None
    return scores[min(len(scores) - 1, int(quantile * len(scores)))]
