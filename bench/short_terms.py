"""A 1-2 character term beside longer ones, at size (docs/design.md §35.12): the trigram
planner's ``fts+short`` plan reading each long-term match's text for the short term (before)
against finding a 2-character term through the indexed trigrams that begin with it once the
long terms match more than ``fts.BODY_CHECK_MAX`` documents (after) — same generation, same
queries, one run, the two settings alternated query by query.

    python bench/short_terms.py                   # bench/jawiki_scale.py's 20,000 articles
    python bench/short_terms.py --data DIR --source NAME [--queries 200]

Queries: jawiki_scale's "two words (AND)" class (two words of one article's opening, each in
0.5-20 % of documents), keeping those with a term of 1-2 characters. Reports the trigram side
alone (``fts.plan_search`` and reading the page, what keyword search runs beside the word
index) and keyword search as a user gets it (both sides fused): p50/p95/p99/max per setting,
and how many answers differ — first ten hits and total. Prints a table, writes JSON to
bench/results/short_terms.json.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import searching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import jawiki_scale  # noqa: E402
from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.query import MIN_FTS_CHARS  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.ops.requests import SearchRequest  # noqa: E402
from chiezo.search import fts  # noqa: E402

console = Console()
READ_ALL = 10**12  # BODY_CHECK_MAX out of reach: every long-term match's text is read


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 1)


def queries_with_short_terms(path: Path, count: int, seed: int) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    docs = conn.execute("SELECT count(*) FROM docs").fetchone()[0]
    drawn = jawiki_scale.query_classes(conn, docs, count * 3, random.Random(seed))
    conn.close()
    pairs = [q["query"] for q in drawn["two words (AND)"]]
    short = [p for p in dict.fromkeys(pairs) if any(len(t) < MIN_FTS_CHARS for t in p.split())]
    return short[:count]


def timed(run, query: str, setting: int) -> tuple[float, object]:
    fts.BODY_CHECK_MAX = setting
    started = time.perf_counter()
    answer = run(query)
    return (time.perf_counter() - started) * 1000, answer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=jawiki_scale.WORK / "data")
    parser.add_argument("--source", default="jawiki")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--seed", type=int, default=33)
    args = parser.parse_args()
    after_setting = fts.BODY_CHECK_MAX
    settings = {"before (read every match)": READ_ALL, "after": after_setting}
    service = Context(Settings(data_dir=args.data))
    source = service.library.get(args.source)
    path = jawiki_scale.current(args.data, args.source)
    queries = queries_with_short_terms(path, args.queries, args.seed)
    docs = source.conn.execute("SELECT count(*) FROM docs").fetchone()[0]
    console.print(f"{args.source}: {docs:,} documents, {len(queries)} queries with a short term")

    def trigram(q: str):
        plan = fts.plan_search(source, q, want=10)
        hits = fts.read_hits(source, plan.ordered[:10], plan.needles)
        return [h.doc_id for h in hits], plan.total, plan.plan

    def keyword(q: str):
        result = searching.search(
            service, SearchRequest.of(source=args.source, query=q, mode="keyword")
        )
        return [h.doc_id for h in result.hits], result.total, result.mode

    report: dict = {"source": args.source, "docs": docs, "queries": len(queries), "sides": {}}
    for side, run in (("trigram side", trigram), ("keyword search", keyword)):
        times: dict[str, list[float]] = {name: [] for name in settings}
        answers: dict[str, list] = {name: [] for name in settings}
        for q in queries:
            for setting in settings.values():  # warm both
                timed(run, q, setting)
            for name, setting in settings.items():
                ms, answer = timed(run, q, setting)
                times[name].append(ms)
                answers[name].append(answer)
        before, after = answers.values()
        differ = [
            {"query": q, "before": b[:2], "after": a[:2]}
            for q, b, a in zip(queries, before, after, strict=True)
            if b[:2] != a[:2]
        ]
        report["sides"][side] = {
            "latency_ms": {
                name: {
                    "p50": pct(ms, 0.5),
                    "p95": pct(ms, 0.95),
                    "p99": pct(ms, 0.99),
                    "max": pct(ms, 1.0),
                }
                for name, ms in times.items()
            },
            "answers_differ": len(differ),
            "hits_differ": sum(d["before"][0] != d["after"][0] for d in differ),
            "differences": differ,
            "plans_after": sorted({a[2] for a in after}),
        }
    fts.BODY_CHECK_MAX = after_setting
    show(report, after_setting)
    out = HERE / "results" / "short_terms.json"
    out.write_text(json.dumps(report, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")


def show(report: dict, after_setting: int) -> None:
    table = Table(title=f"{report['queries']} queries with a short term, {report['docs']:,} docs")
    for column in ("side", "setting", "p50 ms", "p95 ms", "p99 ms", "max ms", "answers differ"):
        table.add_column(column, justify="right")
    for side, found in report["sides"].items():
        for name, lat in found["latency_ms"].items():
            differ = "" if name.startswith("before") else (
                f"{found['answers_differ']} (hits: {found['hits_differ']})"
            )  # fmt: skip
            label = name if name.startswith("before") else f"after (BODY_CHECK_MAX {after_setting})"
            table.add_row(side, label, *(f"{lat[k]:.1f}" for k in ("p50", "p95", "p99", "max")),
                          differ)  # fmt: skip
    console.print(table)
    for side, found in report["sides"].items():
        for d in found["differences"][:5]:
            console.print(f"  {side}: {d['query']}: total {d['before'][1]} → {d['after'][1]}")


if __name__ == "__main__":
    main()
