"""Vector search at scale: the HNSW index Chiezo writes (usearch, cosine, float16) against exact
search, at 100k and 1M vectors; and what float16 / int8 storage costs in recall on real
embeddings.

    python bench/vector_scale.py                    # 100k and 1M (about 15 minutes on 2 cores)
    python bench/vector_scale.py --sizes 100000     # quicker

Part 1 (synthetic, clustered like real embeddings: 2,000 topics, unit vectors, 512-d like
use-m): build the index with the production parameters, open it the way the server does
(a memory-mapped view through ``VectorIndex``), and for held-out queries report recall@10
against exact float32 search, p50/p99 latency for k=10 and for k=200 (what a hybrid query
over-fetches: top_n 50 × 4 vectors per document; k=600: 50 × 12, sentence units), build time and file size. Baseline in the
same run: exact search (usearch ``exact=True`` over the same file).

Part 2 (real): the JaQuAD dev paragraphs and questions embedded with use-m in float32; top-20
overlap and recall@10 of float16 and int8 storage against float32 (numpy-side quantisation).
Then the usearch index itself, built with the production parameters and opened as a view the
way the server does, at dtype f16 (what Chiezo ships), i8 (usearch's own cast of float32, which
multiplies by 127 and truncates, and int8 quantised here with a per-vector scale, which cosine
ignores) and b1 (sign bits, packed, metric hamming: usearch's b1 takes only packed bits and a
bitwise metric), plus b1 with its top 4·k rescored with float16 copies of the vectors (held in
memory here; since #33 the index is the vectors' only store, so this would need a second copy
kept beside a b1 index, and its reads are not timed from disk): bytes per vector of the saved
file, recall@10 and top-1 unchanged against exact float32, recall@k and p50/p99 latency for
k=10 and k=200, for the HNSW search and for the exact search over the same file (what Chiezo
runs below EXACT_BELOW vectors).
``--index-synthetic 100000`` runs the same index comparison on Part 1's synthetic vectors.
Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.store import vectors as vec  # noqa: E402
from chiezo.store.vectors import VectorIndex, VectorInfo, index_path  # noqa: E402

from corpus import jaquad_paragraphs, jaquad_questions  # noqa: E402

DIM = 512
TOPICS = 2000
QUERIES = 500
console = Console(width=130)


def clustered(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    """Unit vectors around topic centres: nearest neighbours are meaningful, as in text."""
    out = np.empty((n, DIM), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        topic = rng.integers(0, len(centres), m)
        block = centres[topic] + rng.normal(0, 0.045, (m, DIM)).astype(np.float32)
        out[start : start + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def exact_top(data: np.ndarray, queries: np.ndarray, k: int) -> np.ndarray:
    """Exact float32 top-k by inner product (vectors are unit length), in blocks."""
    best_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(queries), k), dtype=np.int64)
    for start in range(0, len(data), 200_000):
        scores = queries @ data[start : start + 200_000].T
        part = np.argpartition(-scores, k, axis=1)[:, :k]
        part_scores = np.take_along_axis(scores, part, axis=1)
        merged_scores = np.concatenate([best_scores, part_scores], axis=1)
        merged_ids = np.concatenate([best_ids, part + start], axis=1)
        order = np.argsort(-merged_scores, axis=1)[:, :k]
        best_scores = np.take_along_axis(merged_scores, order, axis=1)
        best_ids = np.take_along_axis(merged_ids, order, axis=1)
    return best_ids


def latencies(index: VectorIndex, queries: np.ndarray, k: int) -> tuple[list[float], list]:
    times, results = [], []
    for q in queries:
        started = time.perf_counter()
        results.append(index.search(q, k))
        times.append((time.perf_counter() - started) * 1000)
    return times, results


def p(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def scale(n: int, workdir: Path) -> list[dict]:
    Index = vec.usearch_index_class()  # noqa: N806 - onnxruntime first: see its docstring

    rng = np.random.default_rng(n)
    centres = rng.normal(0, 1, (TOPICS, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    data = clustered(n, rng, centres)
    queries = clustered(QUERIES, rng, centres)  # held out: not in the index
    truth = exact_top(data, queries, 10)

    generation = workdir / f"bench-{n}.db"
    started = time.monotonic()
    index = Index(
        ndim=DIM,
        metric="cos",
        dtype="f16",
        connectivity=vec.CONNECTIVITY,
        expansion_add=vec.EXPANSION_ADD,
        expansion_search=vec.EXPANSION_SEARCH,
    )
    for start in range(0, n, 20_000):
        keys = np.arange(start + 1, min(start + 20_000, n) + 1, dtype=np.uint64)
        index.add(keys, data[start : start + 20_000], threads=0)
    index.save(str(index_path(generation)))
    build_s = time.monotonic() - started
    size = index_path(generation).stat().st_size
    del index, data

    view = VectorIndex(generation, VectorInfo("bench", DIM, n, n, n, n))
    started = time.monotonic()
    view.warm()
    warm_s = time.monotonic() - started
    rows = []
    original = vec.EXACT_BELOW
    hnsw = f"HNSW (usearch f16, M={vec.CONNECTIVITY}, ef={vec.EXPANSION_SEARCH})"
    for label, exact in ((hnsw, False), ("exact (same file)", True)):
        vec.EXACT_BELOW = n + 1 if exact else 0
        for k in (10, 200, 600):
            times, results = latencies(view, queries[: 100 if exact else QUERIES], k)
            hits = [
                len({key - 1 for key, _ in r[:10]} & set(t.tolist())) / 10
                for r, t in zip(results, truth, strict=False)
            ]
            rows.append(
                {
                    "vectors": n,
                    "method": label,
                    "k": k,
                    "recall@10": round(statistics.mean(hits), 4),
                    "p50_ms": round(p(times, 0.5), 3),
                    "p99_ms": round(p(times, 0.99), 3),
                    "build_s": round(build_s, 1) if not exact else None,
                    "index_mib": round(size / 2**20, 1),
                    "warm_s": round(warm_s, 2),
                }
            )
            console.print(rows[-1])
    vec.EXACT_BELOW = original
    index_path(generation).unlink()
    return rows


def storage() -> tuple[list[dict], np.ndarray, np.ndarray]:
    """float32 vs float16 vs int8 on real use-m embeddings of JaQuAD dev; also returns the
    embeddings (passages, questions) for the index comparison."""
    from chiezo.store.embedders import get_embedder

    model = get_embedder("use-m")
    passages = [f"{p.title}\n{p.text}" for p in jaquad_paragraphs("dev")]
    questions = [q for q, _, _ in jaquad_questions("dev")]
    data = model.embed(passages, "passage")
    queries = model.embed(questions, "query")
    truth20 = np.argsort(-(queries @ data.T), axis=1)[:, :20]
    as_f16 = data.astype(np.float16).astype(np.float32)
    scale_ = 127.0 / np.abs(data).max(axis=1, keepdims=True)
    as_i8 = np.round(data * scale_).astype(np.int8).astype(np.float32) / scale_
    rows = []
    for label, stored, size in (
        ("float32", data, 4),
        ("float16", as_f16, 2),
        ("int8 (per-vector scale)", as_i8, 1),
    ):
        top = np.argsort(-(queries @ stored.T), axis=1)[:, :20]
        overlap = np.mean([len(set(a) & set(b)) / 20 for a, b in zip(top, truth20, strict=True)])
        top1 = np.mean(top[:, 0] == truth20[:, 0])
        rows.append(
            {
                "storage": label,
                "bytes_per_vector": DIM * size + (4 if size == 1 else 0),
                "top20_overlap": round(float(overlap), 4),
                "top1_same": round(float(top1), 4),
                "passages": len(passages),
                "queries": len(questions),
            }
        )
        console.print(rows[-1])
    return rows, data, queries


RESCORE = 4  # b1: fetch RESCORE·k by hamming distance, keep the k best by float16 dot product


def int8_scaled(rows: np.ndarray) -> np.ndarray:
    """int8 with a per-vector scale (max |x| → 127): cosine does not see the scale."""
    scale_ = 127.0 / np.abs(rows).max(axis=1, keepdims=True)
    return np.round(rows * scale_).astype(np.int8)


def sign_bits(rows: np.ndarray, centre: np.ndarray | None = None) -> np.ndarray:
    """One bit per dimension (x > centre), packed: what usearch's b1 + hamming takes."""
    return np.packbits(rows > (0 if centre is None else centre), axis=1)


def index_variants(data: np.ndarray) -> list[dict]:
    """The indexes to compare: label, dtype, metric, the rows added, the query forms tried
    (label suffix, transform of the float32 query; None: pass float32, usearch casts it) and
    whether the top RESCORE·k are also rescored with float16."""
    centre = data.mean(axis=0)
    plain = [("", None)]
    return [
        {"label": "f16 (shipped)", "dtype": "f16", "metric": "cos", "rows": data, "q": plain},
        {"label": "i8 (usearch cast)", "dtype": "i8", "metric": "cos", "rows": data, "q": plain},
        {
            "label": "i8 (per-vector scale)",
            "dtype": "i8",
            "metric": "cos",
            "rows": int8_scaled(data),
            "q": [
                (", int8 query", lambda q: int8_scaled(q[None, :])[0]),
                (", float32 query", None),
            ],
        },
        {
            "label": "b1 (sign, hamming)",
            "dtype": "b1",
            "metric": "hamming",
            "rows": sign_bits(data),
            "q": [("", lambda q: sign_bits(q[None, :])[0])],
            "rescore": (False, True),
        },
        {
            "label": "b1 (centred sign, hamming)",
            "dtype": "b1",
            "metric": "hamming",
            "rows": sign_bits(data, centre),
            "q": [("", lambda q: sign_bits(q[None, :], centre)[0])],
            "rescore": (False, True),
        },
    ]


def index_precision(
    data: np.ndarray, queries: np.ndarray, workdir: Path, corpus: str, exact_too: bool
) -> list[dict]:
    """The usearch index at f16 / i8 / b1 against exact float32 search over ``data``."""
    Index = vec.usearch_index_class()  # noqa: N806 - onnxruntime first: see its docstring

    n = len(data)
    ks = (10, 200)
    truth = exact_top(data, queries, max(ks))
    as_f16 = data.astype(np.float16)  # the rescoring copy (in memory: see the docstring)
    rows = []
    for variant in index_variants(data):
        path = workdir / f"precision-{variant['dtype']}.usearch"
        started = time.monotonic()
        index = Index(
            ndim=DIM,
            metric=variant["metric"],
            dtype=variant["dtype"],
            connectivity=vec.CONNECTIVITY,
            expansion_add=vec.EXPANSION_ADD,
            expansion_search=vec.EXPANSION_SEARCH,
        )
        for start in range(0, n, 20_000):
            keys = np.arange(start, min(start + 20_000, n), dtype=np.uint64)
            index.add(keys, variant["rows"][start : start + 20_000], threads=0)
        index.save(str(path))
        build_s = time.monotonic() - started
        size = path.stat().st_size
        del index
        view = Index.restore(str(path), view=True)
        view.expansion_search = vec.EXPANSION_SEARCH
        forms = [
            (suffix, shape, exact, rescore, k)
            for suffix, shape in variant["q"]
            for exact in ((False, True) if exact_too else (False,))
            for rescore in variant.get("rescore", (False,))
            for k in ks
        ]
        for suffix, shape, exact, rescore, k in forms:
            fetch = k * RESCORE if rescore else k
            times, hits10, hitsk, top1 = [], [], [], []
            for q, t in zip(queries, truth, strict=True):
                started = time.perf_counter()
                query = shape(q) if shape else q
                found = view.search(query, fetch, exact=exact).keys.astype(np.int64)
                if rescore:
                    scores = as_f16[found].astype(np.float32) @ q
                    found = found[np.argsort(-scores)[:k]]
                times.append((time.perf_counter() - started) * 1000)
                hits10.append(len(set(found[:10].tolist()) & set(t[:10].tolist())) / 10)
                hitsk.append(len(set(found[:k].tolist()) & set(t[:k].tolist())) / k)
                top1.append(len(found) > 0 and found[0] == t[0])
            label = variant["label"] + suffix
            label += f" + f16 rescore of top {RESCORE}·k" if rescore else ""
            rows.append(
                {
                    "corpus": corpus,
                    "vectors": n,
                    "index": label,
                    "search": "exact (same file)" if exact else "HNSW",
                    "k": k,
                    "bytes_per_vector": round(size / n, 1),
                    "recall@10": round(statistics.mean(hits10), 4),
                    "top1_same": round(float(np.mean(top1)), 4),
                    "recall@k": round(statistics.mean(hitsk), 4),
                    "p50_ms": round(p(times, 0.5), 3),
                    "p99_ms": round(p(times, 0.99), 3),
                    "build_s": round(build_s, 1),
                    "queries": len(queries),
                }
            )
            console.print(rows[-1])
        del view
        path.unlink()
    return rows


def synthetic_precision(n: int, workdir: Path) -> list[dict]:
    """Part 1's synthetic vectors (same seed, same held-out queries) through index_precision."""
    rng = np.random.default_rng(n)
    centres = rng.normal(0, 1, (TOPICS, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    data = clustered(n, rng, centres)
    queries = clustered(QUERIES, rng, centres)
    return index_precision(data, queries, workdir, f"synthetic {n:,}", exact_too=False)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="100000,1000000", help="'' for the storage part only")
    parser.add_argument("--skip-storage", action="store_true")
    parser.add_argument(
        "--skip-index", action="store_true", help="Part 2: numpy-side storage rows only"
    )
    parser.add_argument(
        "--index-synthetic",
        type=int,
        default=0,
        metavar="N",
        help="also compare the index dtypes on N of Part 1's synthetic vectors (0: no)",
    )
    args = parser.parse_args()
    rows = []
    (HERE / "work").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="vector-scale-", dir=HERE / "work") as tmp:
        for n in (int(s) for s in args.sizes.split(",") if s.strip()):
            rows += scale(n, Path(tmp))
    table = Table(title="ANN vs exact (held-out queries, recall@10 against exact float32)")
    columns = ("vectors", "method", "k", "recall@10", "p50_ms", "p99_ms", "build_s", "index_mib")
    for column in columns:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    console.print(table)
    stored, indexed = [], []
    if not args.skip_storage:
        stored, data, queries = storage()
        if not args.skip_index:
            with tempfile.TemporaryDirectory(prefix="vector-scale-", dir=HERE / "work") as tmp:
                indexed += index_precision(data, queries, Path(tmp), "JaQuAD dev", exact_too=True)
    if args.index_synthetic:
        with tempfile.TemporaryDirectory(prefix="vector-scale-", dir=HERE / "work") as tmp:
            indexed += synthetic_precision(args.index_synthetic, Path(tmp))
    if stored:
        table = Table(title="storage precision on real embeddings (use-m, JaQuAD dev)")
        for column in stored[0]:
            table.add_column(column, justify="right")
        for row in stored:
            table.add_row(*(str(v) for v in row.values()))
        console.print(table)
    if indexed:
        table = Table(title="index dtype against exact float32 (usearch, production M / ef)")
        columns = (
            "corpus",
            "index",
            "search",
            "k",
            "bytes_per_vector",
            "recall@10",
            "top1_same",
            "recall@k",
            "p50_ms",
            "p99_ms",
        )
        for column in columns:
            table.add_column(column, justify="right")
        for row in indexed:
            table.add_row(*(str(row[c]) for c in columns))
        console.print(table)
    out = HERE / "results" / f"vector_scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    payload = {"ann": rows, "storage": stored, "index_precision": indexed}
    out.write_text(json.dumps(payload, indent=2))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
