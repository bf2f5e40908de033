"""Plain full-text search over the jawiki excerpt, asked the 92 questions whose answer page is in
it (``eval/ja/jawiki-excerpt-questions.jsonl``): recall@1/5/10 of the answering page.

    python bench/wiki_questions.py

This is the baseline the semantic/hybrid search must beat. The same run also reports the whole
question as one phrase (what a plain FTS query does). Writes JSON to bench/results/.
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import searching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.query import phrase  # noqa: E402
from chiezo.ingest.wikipedia import ingest_wikipedia  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.ops.requests import SearchRequest  # noqa: E402

from corpus import SHARED  # noqa: E402

DUMP = SHARED / "data/wikipedia/jawiki-20230501-excerpt.xml.bz2"
QUESTIONS = SHARED / "data/eval/ja/jawiki-excerpt-questions.jsonl"
console = Console(width=120)


def evaluate(questions, search) -> dict:
    ranks, latencies = [], []
    for q in questions:
        started = time.perf_counter()
        titles = search(q["question"])
        latencies.append((time.perf_counter() - started) * 1000)
        relevant = set(q["relevant_titles_in_excerpt"])
        ranks.append(next((i for i, t in enumerate(titles, 1) if t in relevant), None))
    out = {
        f"recall@{k}": round(sum(1 for r in ranks if r and r <= k) / len(ranks), 3)
        for k in (1, 5, 10)
    }
    out["p50_ms"] = round(statistics.median(latencies), 2)
    return out


def main() -> None:
    questions = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]
    with tempfile.TemporaryDirectory(prefix="wiki-q-") as data:
        service = Context(Settings(data_dir=Path(data)))
        ingest_wikipedia(service.settings, DUMP)
        conn = service.library.get("jawiki").conn

        def chiezo(text: str) -> list[str]:
            return [
                h.title
                for h in searching.search(
                    service, SearchRequest.of(query=text, source="jawiki", limit=10)
                ).hits
            ]

        def whole_phrase(text: str) -> list[str]:
            rows = conn.execute(
                "SELECT d.title FROM docs_fts JOIN docs d ON d.doc_id = docs_fts.rowid "
                "WHERE docs_fts MATCH ? ORDER BY bm25(docs_fts) LIMIT 10",
                (phrase(text),),
            )
            return [r[0] for r in rows]

        results = {
            "whole question as one phrase (baseline)": evaluate(questions, whole_phrase),
            "chiezo search (full text)": evaluate(questions, chiezo),
        }
    table = Table(title=f"{len(questions)} questions over the jawiki excerpt (189 articles)")
    for col in ("plan", "recall@1", "recall@5", "recall@10", "p50 ms"):
        table.add_column(col, justify="right")
    for plan, r in results.items():
        table.add_row(plan, *(f"{r[f'recall@{k}']:.3f}" for k in (1, 5, 10)), str(r["p50_ms"]))
    console.print(table)
    out = HERE / "results" / f"wiki_questions-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps({"questions": len(questions), **results}, ensure_ascii=False, indent=2)
    )
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
