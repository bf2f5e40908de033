"""Where the semantic floor goes: the similarity *nonsense* reaches against the similarity real
questions reach on the passage that answers them.

    python bench/semantic_floor.py          # after bench/retrieval_eval.py built the sources

The embed step calibrates each source with generated nonsense (store/calibration.py); this
checks candidate rules — quantiles of that calibration, and a fixed floor per model — against
the JaQuAD dev questions whose answering passage is the best semantic hit (they must be kept)
and against 600 *other* generated nonsense queries (they must be dropped). Writes JSON to
bench/results/.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.errors import NotFound  # noqa: E402
from chiezo.ops import evaluate  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.search.semantic import MIN_SCORE, embed_query, semantic_candidates  # noqa: E402
from chiezo.store.calibration import floor_from, nonsense_queries  # noqa: E402
from chiezo.store.calibration import nearest_scores as calibration_scores  # noqa: E402
from chiezo.store.embedders import get_embedder  # noqa: E402

WORK = HERE / "work" / "retrieval_eval"
# (model, source) pairs built by bench/retrieval_eval.py: sentence units (u60), whole chunks (u0)
SOURCES = [
    (model, f"jaquad-dev-{short}-u{units}")
    for model, short in (("use-m", "use"), ("e5-small", "e5"))
    for units in (60, 0)
]
QUESTIONS = WORK / "jaquad-dev-all" / "questions.jsonl"
console = Console(width=120)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main() -> None:
    service = Context(Settings(data_dir=WORK / "data", query_timeout=60.0))
    questions = evaluate.load_questions(QUESTIONS)
    junk = nonsense_queries(600, seed=7)  # held out: not the strings the embed step uses
    report = {}
    table = Table(title="semantic floors: answered questions kept vs held-out nonsense dropped")
    for column in ("source", "floor rule", "floor", "answered kept", "nonsense dropped"):
        table.add_column(column, justify="right")
    for model, name in SOURCES:
        try:
            source = service.library.get(name)
        except NotFound:
            console.print(f"[yellow]skipped {name}: not built (run bench/retrieval_eval.py)[/]")
            continue

        def best(text: str, source=source):
            hits = semantic_candidates(source, embed_query(source, text), 1, min_score=-1.0)
            return hits[0] if hits else None

        def nearest(vector, source=source):
            return [
                (h.chunk_id, h.score)
                for h in semantic_candidates(source, vector, 1, min_score=-1.0)
            ]

        calibration = calibration_scores(get_embedder(model), nearest)
        junk_scores = [h.score for h in map(best, junk) if h]
        answered = []
        for q in questions:
            hit = best(q.text)
            if hit is None:
                continue
            key = source.conn.execute(
                "SELECT key FROM docs WHERE doc_id = ?", (hit.doc_id,)
            ).fetchone()[0]
            if q.relevant(key, ""):
                answered.append(hit.score)
        rules = {f"calibration q{q}": floor_from(calibration, q) for q in (0.9, 0.95, 0.99, 1.0)}
        rules["fixed (MIN_SCORE)"] = MIN_SCORE[model]
        rows = {}
        for rule, floor in rules.items():
            rows[rule] = {
                "floor": round(floor, 4),
                "answered_kept": round(sum(s >= floor for s in answered) / len(answered), 4),
                "nonsense_dropped": round(
                    sum(s < floor for s in junk_scores) / len(junk_scores), 4
                ),
            }
            table.add_row(name, rule, *(f"{v:.4f}" for v in rows[rule].values()))
        report[name] = {
            "rules": rows,
            "answered": len(answered),
            "nonsense": len(junk_scores),
            "answered_p1": percentile(answered, 0.01),
            "answered_p50": percentile(answered, 0.5),
            "nonsense_p50": percentile(junk_scores, 0.5),
            "nonsense_max": max(junk_scores),
        }
    console.print(table)
    console.print(report)
    out = HERE / "results" / f"semantic_floor-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
