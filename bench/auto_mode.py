"""`mode=auto` against hybrid on the same questions, in one run: recall and latency.

    python bench/auto_mode.py [--work bench/work/cross_source/data] [--rounds 3]

auto runs the meaning side only when the words side cannot be trusted to have it: a query that
is a document's title (or alias) exactly goes by words alone — that document comes first in
every mode — and anything else is searched as hybrid (search/retrieval.py). Three sets over the
jawiki source of bench/cross_source.py's library (use-m vectors): the natural questions
(bench/data/jawiki-natural-dev.jsonl), the shared JaQuAD questions
(../shared/data/eval/ja/jawiki-excerpt-questions.jsonl), and names — the titles those questions
are about, typed as a user looking something up would. Per set: R@1/5/10 of each mode, how many
queries auto answered by words alone, p50/mean latency (modes interleaved, query caches cleared
before each timed search). Target (issue #32): recall within .005 of hybrid; the latency saved.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import searching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core import words  # noqa: E402
from chiezo.core.config import Settings  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.ops.requests import SearchRequest  # noqa: E402
from chiezo.search import semantic  # noqa: E402

console = Console(width=140)
SHARED = HERE.parent.parent / "shared" / "data" / "eval" / "ja" / "jawiki-excerpt-questions.jsonl"
MODES = ("hybrid", "auto")


def question_sets() -> dict[str, list[tuple[str, set[str]]]]:
    natural = [
        (row["question"], set(row["relevant_titles"]))
        for row in map(json.loads, (HERE / "data" / "jawiki-natural-dev.jsonl").open())
    ]
    shared = [
        (row["question"], set(row["relevant_titles_in_excerpt"]))
        for row in map(json.loads, SHARED.open())
        if row.get("relevant_titles_in_excerpt")
    ]
    titles = sorted({t for _, relevant in natural + shared for t in relevant})
    return {"natural": natural, "shared": shared, "names": [(t, {t}) for t in titles]}


def forget_queries() -> None:
    words._query.cache_clear()
    semantic._query_vector.cache_clear()


def run(service: Context, queries, rounds: int) -> dict:
    found: dict[str, list[int | None]] = {m: [] for m in MODES}
    samples: dict[str, list[float]] = {m: [] for m in MODES}
    skipped = 0
    for text, _ in queries[:10]:  # warm-up
        for mode in MODES:
            searching.search(service, SearchRequest.of(query=text, source="jawiki", mode=mode))
    for round_ in range(rounds):
        for i, (text, relevant) in enumerate(queries):
            order = MODES if (i + round_) % 2 == 0 else MODES[::-1]  # busy moments hit both
            for mode in order:
                forget_queries()
                started = time.perf_counter()
                result = searching.search(
                    service, SearchRequest.of(query=text, source="jawiki", mode=mode, limit=10)
                )
                samples[mode].append((time.perf_counter() - started) * 1000)
                if round_ == 0:
                    titles = [h.title for h in result.hits]
                    rank = next((r for r, t in enumerate(titles, 1) if t in relevant), None)
                    found[mode].append(rank)
                    skipped += mode == "auto" and result.retrieval == "keyword"
    n = len(queries)
    out: dict = {"queries": n, "auto_by_words_alone": skipped}
    for mode in MODES:
        ranks = found[mode]
        for k in (1, 5, 10):
            out[f"{mode}_R@{k}"] = round(sum(r is not None and r <= k for r in ranks) / n, 3)
        out[f"{mode}_p50_ms"] = round(statistics.median(samples[mode]), 2)
        out[f"{mode}_mean_ms"] = round(statistics.fmean(samples[mode]), 2)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=str(HERE / "work" / "cross_source" / "data"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    service = Context(Settings(data_dir=Path(args.work), query_timeout=60))
    report = {name: run(service, queries, args.rounds) for name, queries in question_sets().items()}
    table = Table(title="mode=auto against hybrid (jawiki, use-m), same run")
    columns = ["set", "n", "by words", *(f"{m} R@{k}" for m in MODES for k in (1, 5, 10))]
    columns += [f"{m} {s}" for m in MODES for s in ("p50", "mean")]
    for col in columns:
        table.add_column(col, justify="right")
    for name, r in report.items():
        table.add_row(
            name,
            str(r["queries"]),
            str(r["auto_by_words_alone"]),
            *(str(r[f"{m}_R@{k}"]) for m in MODES for k in (1, 5, 10)),
            *(str(r[f"{m}_{s}_ms"]) for m in MODES for s in ("p50", "mean")),
        )
    console.print(table)
    out = HERE / "results" / f"auto_mode-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
