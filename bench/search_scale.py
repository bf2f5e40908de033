"""Search latency and build cost at growing corpus sizes, against a naive baseline.

    python bench/search_scale.py --sizes 10000,100000,1000000

For each size it builds (or reuses, with --reuse) a source of real paragraphs (bench/corpus.py),
derives query classes from the data itself — rare term, common term (~10% of docs), exact
title, 2-character term, multi-term, deep offset, question typed as a sentence — and times
Chiezo's planner against the naive plan (join every match to ``docs`` and sort) in the same
run. Prints tables and writes JSON to bench/results/.

Targets (issue 2): every class p99 < 50 ms at 1M docs; p50 at 1M within 2x of p50 at 10k.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import searching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core import db  # noqa: E402
from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.progress import RichProgress  # noqa: E402
from chiezo.core.query import match_all, match_any, text_grams, text_segments  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.ops.requests import SearchRequest  # noqa: E402
from chiezo.store.build import BuildOptions, GenerationBuilder  # noqa: E402

from corpus import (  # noqa: E402
    jaquad_paragraphs,
    jaquad_questions,
    paragraph_pool,
    synthetic_docs,
)

console = Console(width=180)
QUERIES_PER_CLASS = 100
BASELINE_QUERIES = 20
DEEP_OFFSET = 1000


def build(
    settings: Settings, name: str, size: int, pool, full_validation: bool, word_index: bool = True
) -> dict:
    options = BuildOptions(
        min_docs=size, allow_shrink=True, full_validation=full_validation, word_index=word_index
    )
    progress = RichProgress(console)
    builder = GenerationBuilder(
        settings,
        name,
        "bench",
        options=options,
        progress=progress,
        input_identity={"generator": "synthetic_docs", "size": size},
    )
    chars = 0
    with builder:
        builder.start_reading(size)
        for doc in synthetic_docs(pool, size):
            chars += len(doc.body) + len(doc.title)
            builder.add(doc)
        report = builder.finish()
    progress.close()  # the build leaves its display to whoever made it
    return {
        "docs": report.docs,
        "chars": chars,
        "seconds": round(report.seconds, 1),
        "docs_per_s": round(report.docs / report.seconds),
        "chars_per_s": round(chars / report.seconds),
        "size_bytes": report.size_bytes,
        "bytes_per_doc": round(report.size_bytes / report.docs),
        "phases": {k: round(v, 1) for k, v in report.timings.items()},
    }


def count(conn, expr: str) -> int:
    return conn.execute("SELECT count(*) FROM docs_fts WHERE docs_fts MATCH ?", (expr,)).fetchone()[
        0
    ]


def query_classes(conn, size: int, pool, rng: random.Random) -> dict[str, list[tuple[str, int]]]:
    """(query, offset) per class, derived from the indexed data by rule."""
    n = QUERIES_PER_CLASS
    segments = [s for p in rng.sample(pool, 3000) for s in text_segments(p.text) if len(s) >= 6]
    candidates = list({s[i : i + 4] for s in rng.sample(segments, 1500) for i in (0, 2)})
    rng.shuffle(candidates)
    counted = sorted(
        ((count(conn, match_all([c])), c) for c in candidates[:800]), key=lambda x: x[0]
    )
    rare = [(c, 0) for k, c in counted if k > 0][:n]
    # the same number of matches at every size: the flat-cost check ("cost follows matches")
    fixed = [(c, 0) for k, c in counted if 100 <= k <= 300][:n]
    common_phrases = [(c, 0) for k, c in counted if size * 0.03 <= k <= size * 0.15][:n]
    grams = conn.execute(
        "SELECT gram FROM gram_df WHERE df BETWEEN ? AND ? AND gram NOT GLOB '*[ ,.]*'",
        (int(size * 0.07), int(size * 0.13)),
    ).fetchall()
    common = [(g[0], 0) for g in rng.sample(grams, min(n, len(grams)))]
    titles = [
        r[0]
        for r in conn.execute(
            "SELECT title FROM docs WHERE title NOT LIKE '%(%' ORDER BY random() LIMIT ?", (n,)
        )
    ]
    two = list({t[:2] for t in titles if len(t) >= 2 and " " not in t[:2]})
    multi = []
    for p in rng.sample(pool, n * 3):
        segs = [s for s in text_segments(p.text) if len(s) >= 3]
        if len(segs) >= 3:
            picks = rng.sample(segs, 3)
            multi.append((" ".join(s[:5] for s in picks), 0))
        if len(multi) >= n:
            break
    mid = conn.execute(
        "SELECT gram FROM gram_df WHERE df BETWEEN ? AND ? AND gram NOT GLOB '*[ ,.]*'",
        (max(int(size * 0.02), DEEP_OFFSET + 100), max(int(size * 0.05), DEEP_OFFSET + 500)),
    ).fetchall()
    deep = [(g[0], DEEP_OFFSET) for g in rng.sample(mid, min(n, len(mid)))]
    questions = [(q, 0) for q, _, _ in rng.sample(jaquad_questions("dev"), n)]
    return {
        "rare term": rare,
        "100-300 matches": fixed,
        "common term (~10%)": common,
        "common phrase (3-15%)": common_phrases,
        "title-exact": [(t, 0) for t in titles],
        "2-character term": [(t, 0) for t in two[:n]],
        "multi-term": multi,
        "deep offset": deep,
        "question (sentence)": questions,
    }


def question_recall(service: Context, name: str, rng: random.Random, n: int = 200) -> dict:
    """Of JaQuAD dev questions whose paragraph is in the source: how often a top-1 / top-5
    document contains that paragraph."""
    src = service.library.get(name)
    paragraphs = jaquad_paragraphs("dev")
    hits1 = hits5 = asked = 0
    for question, _, index in rng.sample(jaquad_questions("dev"), n):
        gold = paragraphs[index].text
        probe = next((s for s in text_segments(gold) if len(s) >= 8), None)
        if probe is None or count(src.conn, match_all([probe[:20]])) == 0:
            continue
        asked += 1
        result = searching.search(service, SearchRequest.of(query=question, source=name, limit=5))
        ids = [h.doc_id for h in result.hits]
        bodies = dict(
            src.conn.execute(
                f"SELECT doc_id, body FROM docs WHERE doc_id IN ({','.join('?' * len(ids))})", ids
            )
        )
        found = [gold in bodies.get(i, "") for i in ids]
        hits1 += bool(found[:1] and found[0])
        hits5 += any(found)
    return {
        "asked": asked,
        "recall@1": round(hits1 / max(asked, 1), 3),
        "recall@5": round(hits5 / max(asked, 1), 3),
    }


def naive(conn, cls: str, text: str, offset: int) -> None:
    """The plan the design notes started from: read every match, sort, take a page."""
    if cls == "2-character term":
        conn.execute(
            "SELECT doc_id, title FROM docs WHERE title LIKE ? ORDER BY rank_score DESC LIMIT 10",
            (text + "%",),
        ).fetchall()
        return
    expr = match_any(text_grams(text)) if cls.startswith("question") else match_all(text.split())
    conn.execute(
        "SELECT d.doc_id, d.title FROM docs_fts JOIN docs d ON d.doc_id = docs_fts.rowid "
        "WHERE docs_fts MATCH ? ORDER BY bm25(docs_fts) * (1 + 0.4 * d.rank_score) "
        "LIMIT 10 OFFSET ?",
        (expr, offset),
    ).fetchall()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def time_classes(
    service: Context, name: str, classes, baseline: bool, facets: bool = False
) -> dict:
    src = service.library.get(name)
    results = {}
    for cls, queries in classes.items():
        if not queries:
            continue
        for text, offset in queries:  # warm-up pass
            searching.search(
                service, SearchRequest.of(query=text, source=name, limit=10, offset=offset)
            )
        samples, totals, modes = [], [], {}
        for _ in range(2):
            for text, offset in queries:
                started = time.perf_counter()
                result = searching.search(
                    service, SearchRequest.of(query=text, source=name, limit=10, offset=offset)
                )
                samples.append((time.perf_counter() - started) * 1000)
                totals.append(result.total)
                modes[result.mode] = modes.get(result.mode, 0) + 1
        row = {
            "queries": len(queries),
            "median_total": statistics.median(totals),
            "modes": modes,
            "p50_ms": round(percentile(samples, 50), 2),
            "p99_ms": round(percentile(samples, 99), 2),
        }
        if baseline:
            naive_samples = []
            with db.deadline(src.conn, 60):
                for text, offset in queries[:BASELINE_QUERIES]:
                    started = time.perf_counter()
                    naive(src.conn, cls, text, offset)
                    naive_samples.append((time.perf_counter() - started) * 1000)
            row["naive_p50_ms"] = round(percentile(naive_samples, 50), 2)
            row["naive_p99_ms"] = round(percentile(naive_samples, 99), 2)
        if facets:
            row.update(time_facets(service, name, queries, samples))
        results[cls] = row
    return results


def time_facets(service: Context, name: str, queries, without: list[float]) -> dict:
    """The same queries with ``facets=tag,source`` (issue #32: ≤ 2x the query), same run."""
    samples, exact = [], []
    for _ in range(2):
        for text, offset in queries:
            started = time.perf_counter()
            result = searching.search(
                service,
                SearchRequest.of(
                    query=text, source=name, limit=10, offset=offset, facets=["tag", "source"]
                ),
            )
            samples.append((time.perf_counter() - started) * 1000)
            exact.append(bool(result.facets and result.facets["tag"]["exact"]))
    return {
        "facets_p50_ms": round(percentile(samples, 50), 2),
        "facets_p99_ms": round(percentile(samples, 99), 2),
        "facets_ratio_p50": round(percentile(samples, 50) / max(percentile(without, 50), 1e-3), 2),
        "facets_exact_share": round(sum(exact) / len(exact), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000,1000000")
    parser.add_argument("--work", default=str(HERE / "work"), help="where sources are built")
    parser.add_argument("--reuse", action="store_true", help="reuse sources already built")
    parser.add_argument("--no-baseline", action="store_true")
    parser.add_argument(
        "--trigram-baseline",
        action="store_true",
        help="also build and query each size without the word index (its cost, same run)",
    )
    parser.add_argument(
        "--quick-validation",
        action="store_true",
        help="quick_check instead of full integrity checks at build",
    )
    parser.add_argument(
        "--facets", action="store_true", help="also time each query with facets (issue #32)"
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    settings = Settings(data_dir=Path(args.work), query_timeout=60)
    service = Context(settings)
    pool = paragraph_pool()
    report = {"pool_paragraphs": len(pool), "sizes": {}}
    for size in sizes:
        if args.trigram_baseline:  # before the word index: same documents, trigrams only
            name = f"scale-{size}-trigram"
            entry = report["sizes"].setdefault(f"{size} trigrams only", {})
            if not (args.reuse and name in service.library.names()):
                console.rule(f"building {size:,} documents, trigram index only")
                entry["build"] = build(
                    settings, name, size, pool, not args.quick_validation, word_index=False
                )
            conn = service.library.get(name).conn
            classes = query_classes(conn, size, pool, random.Random(size))
            entry["search"] = time_classes(service, name, classes, False)
            entry["question_recall"] = question_recall(service, name, random.Random(1))
        name = f"scale-{size}"
        entry = report["sizes"].setdefault(str(size), {})
        if not (args.reuse and name in service.library.names()):
            console.rule(f"building {size:,} documents")
            entry["build"] = build(settings, name, size, pool, not args.quick_validation)
        console.rule(f"querying {size:,} documents")
        conn = service.library.get(name).conn
        classes = query_classes(conn, size, pool, random.Random(size))
        entry["search"] = time_classes(
            service, name, classes, not args.no_baseline, facets=args.facets
        )
        entry["question_recall"] = question_recall(service, name, random.Random(1))
        show(report)
    out_dir = HERE / "results"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / f"search_scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")


def show(report: dict) -> None:
    builds = Table(title="build")
    for col in ("docs", "seconds", "docs/s", "chars/s", "MiB", "bytes/doc", "phases (s)"):
        builds.add_column(col, justify="right")
    for size, entry in report["sizes"].items():
        b = entry.get("build")
        if b:
            builds.add_row(
                size,
                str(b["seconds"]),
                f"{b['docs_per_s']:,}",
                f"{b['chars_per_s']:,}",
                f"{b['size_bytes'] / 2**20:,.0f}",
                f"{b['bytes_per_doc']:,}",
                ", ".join(f"{k} {v}" for k, v in b["phases"].items()),
            )
    console.print(builds)
    table = Table(title="search latency (ms): chiezo vs naive join+sort, same run")
    for col in (
        "docs",
        "class",
        "n",
        "median total",
        "mode",
        "p50",
        "p99",
        "naive p50",
        "naive p99",
        "facets p50",
        "facets p99",
        "ratio",
    ):
        table.add_column(col, justify="right")
    for size, entry in report["sizes"].items():
        for cls, r in entry.get("search", {}).items():
            mode = max(r["modes"], key=r["modes"].get)
            table.add_row(
                size,
                cls,
                str(r["queries"]),
                f"{r['median_total']:,.0f}",
                mode,
                f"{r['p50_ms']:.2f}",
                f"{r['p99_ms']:.2f}",
                str(r.get("naive_p50_ms", "-")),
                str(r.get("naive_p99_ms", "-")),
                str(r.get("facets_p50_ms", "-")),
                str(r.get("facets_p99_ms", "-")),
                str(r.get("facets_ratio_p50", "-")),
            )
    console.print(table)
    for size, entry in report["sizes"].items():
        if "question_recall" in entry:
            console.print(f"{size} docs, JaQuAD dev questions: {entry['question_recall']}")


if __name__ == "__main__":
    main()
