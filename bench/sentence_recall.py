"""Questions typed as sentences: does search find the paragraph that answers them?

    python bench/sentence_recall.py            # JaQuAD dev: 1,431 jawiki paragraphs, 3,939 questions

Builds one source whose documents are the paragraphs (title = article title) and asks every
question through Chiezo's search, against the baseline of the same run: the whole question as
one phrase (what a plain FTS query does). Reports recall@1/@5 and latency; writes JSON to
bench/results/. Use --split train for a held-out check of parameters tuned on dev.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.models import Doc  # noqa: E402
from chiezo.core.query import phrase  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.search.retrieval import retrieve  # noqa: E402
from chiezo.store.build import BuildOptions, GenerationBuilder  # noqa: E402

from corpus import jaquad_articles  # noqa: E402

console = Console(width=140)


def load(split: str, limit_paragraphs: int | None):
    docs, questions = [], []
    for article in jaquad_articles(split):
        for i, paragraph in enumerate(article["paragraphs"]):
            key = f"{article['title']}#{i}"
            docs.append(Doc(key=key, title=article["title"], body=paragraph["context"]))
            questions += [(qa["question"], key) for qa in paragraph["qas"]]
            if limit_paragraphs and len(docs) >= limit_paragraphs:
                return docs, questions
    return docs, questions


def evaluate(src, questions, search) -> dict:
    at1 = at5 = 0
    latencies = []
    for question, key in questions:
        started = time.perf_counter()
        keys = search(src, question)
        latencies.append((time.perf_counter() - started) * 1000)
        at1 += bool(keys[:1] == [key])
        at5 += key in keys[:5]
    latencies.sort()
    return {
        "recall@1": round(at1 / len(questions), 3),
        "recall@5": round(at5 / len(questions), 3),
        "p50_ms": round(statistics.median(latencies), 2),
        "p99_ms": round(latencies[int(0.99 * (len(latencies) - 1))], 2),
    }


def chiezo_search(src, question):
    """One source's search as the service runs it (search/retrieval.py)."""
    return [h.key for h in retrieve(src, question, limit=5, offset=0, timeout=None).hits]


def phrase_search(src, question):
    rows = src.conn.execute(
        "SELECT d.key FROM docs_fts JOIN docs d ON d.doc_id = docs_fts.rowid "
        "WHERE docs_fts MATCH ? ORDER BY bm25(docs_fts) LIMIT 5",
        (phrase(question),),
    ).fetchall()
    return [r[0] for r in rows]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--split", default="dev", choices=["dev", "train"])
    parser.add_argument("--paragraphs", type=int, default=None, help="cap the corpus size")
    parser.add_argument("--work", default=str(HERE / "work"))
    args = parser.parse_args()
    docs, questions = load(args.split, args.paragraphs)
    settings = Settings(data_dir=Path(args.work), query_timeout=60)
    name = f"jaquad-{args.split}"
    with GenerationBuilder(settings, name, "bench", options=BuildOptions(allow_shrink=True)) as b:
        b.start_reading(len(docs))
        for doc in docs:
            b.add(doc)
        b.finish()
    src = Context(settings).library.get(name)
    rows = {
        "whole question as one phrase (baseline)": evaluate(src, questions, phrase_search),
        "chiezo search": evaluate(src, questions, chiezo_search),
    }
    table = Table(
        title=f"JaQuAD {args.split}: {len(docs):,} paragraphs, {len(questions):,} questions"
    )
    for col in ("plan", "recall@1", "recall@5", "p50 ms", "p99 ms"):
        table.add_column(col, justify="right")
    for plan, r in rows.items():
        table.add_row(
            plan, f"{r['recall@1']:.3f}", f"{r['recall@5']:.3f}", str(r["p50_ms"]), str(r["p99_ms"])
        )
    console.print(table)
    out = HERE / "results" / f"sentence_recall-{args.split}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {"paragraphs": len(docs), "questions": len(questions), **rows},
            ensure_ascii=False,
            indent=2,
        )
    )
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
