"""How to fuse the word index, the trigram index and meaning: every rule on the same lists.

    python bench/fusion_study.py --split train --max-paragraphs 1500   # tune here
    python bench/fusion_study.py --split dev                           # then confirm here

Each question is searched once per side (words top-50, trigrams top-50, semantic top-50 with
its cosine similarities, and each keyword candidate's coverage of the query's words — the lists
hybrid search fuses); the rules are then applied offline, so dozens of variants cost seconds. Needs the sources bench/retrieval_eval.py builds. Writes JSON
to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.words import query_words  # noqa: E402
from chiezo.ops import evaluate  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.search.evidence import coverage  # noqa: E402
from chiezo.search.filters import Filters  # noqa: E402
from chiezo.search.fts import plan_search  # noqa: E402
from chiezo.search.hybrid import minmax, scale_to_max  # noqa: E402
from chiezo.search.keyword import word_matches  # noqa: E402
from chiezo.search.semantic import embed_query, semantic_candidates  # noqa: E402

WORK = HERE / "work" / "retrieval_eval"
console = Console(width=130)
TOP = 50


def candidates(service, name: str, questions) -> list[dict]:
    """Per question, every list hybrid search fuses: the word index's and the trigram index's
    top candidates (each bm25 × popularity), the semantic top-50 cosines, the title-exact
    documents, and each candidate's coverage of the query's words (search/evidence.py)."""
    source = service.library.get(name)
    keys = dict(source.conn.execute("SELECT doc_id, key FROM docs"))
    out = []
    for q in questions:
        trigrams = plan_search(source, q.text, want=TOP)
        words = query_words(q.text)
        found = word_matches(source, words, TOP, Filters()) if words else None
        sem = semantic_candidates(source, embed_query(source, q.text), TOP, min_score=-1.0)
        case = {
            "words": [(c.doc_id, -c.score) for c in found.candidates] if found else [],
            "trigrams": [(c.doc_id, -c.score) for c in trigrams.ordered],
            "title": [c.doc_id for c in trigrams.ordered if c.title_match],
            "semantic": [(h.doc_id, h.score) for h in sem],
            "relevant": {d for d, k in keys.items() if q.relevant(k, "")},
        }
        ids = {d for side in ("words", "trigrams") for d, _ in case[side]}
        case["coverage"] = coverage(source, words, sorted(ids)) if words else {}
        out.append(case)
    return out


def scaled(pairs, how):
    values = (minmax if how == "minmax" else scale_to_max)([s for _, s in pairs])
    return dict(zip([d for d, _ in pairs], values, strict=True))


def rank(scores: dict, first: list) -> list:
    return first + sorted((d for d in scores if d not in first), key=lambda d: -scores[d])


def rule(inner: str, word_weight: float, keyword_weight: float, power: float | None):
    """Keyword = words and trigrams, each scaled (``inner``: minmax or max) and summed with
    ``word_weight``; times coverage ** ``power`` (None: not at all, then min-max again as
    before); then summed with the min-max semantic side at ``keyword_weight``."""

    def ranked(case):
        w, t = scaled(case["words"], inner), scaled(case["trigrams"], inner)
        keyword = {
            d: word_weight * w.get(d, 0) + (1 - word_weight) * t.get(d, 0) for d in set(w) | set(t)
        }
        if power is None:
            keyword = scaled(list(keyword.items()), "minmax")
        else:
            top = max(keyword.values(), default=1.0) or 1.0
            keyword = (
                {d: v / top * case["coverage"].get(d, 0.0) ** power for d, v in keyword.items()}
                if case["coverage"]
                else keyword
            )
        s = scaled(case["semantic"], "minmax")
        fused = {
            d: keyword_weight * keyword.get(d, 0) + (1 - keyword_weight) * s.get(d, 0)
            for d in set(keyword) | set(s)
        }
        return rank(fused, case["title"])

    return ranked


def rules() -> dict:
    out = {}
    for kw in (0.6, 0.7, 0.8, 0.9):
        out[f"words+trigrams min-max, then min-max; kw={kw}"] = rule("minmax", 0.7, kw, None)
        for power in (0.5, 1.0):
            out[f"max-scaled × coverage^{power}; kw={kw}"] = rule("max", 0.7, kw, power)
    out["keyword only (words+trigrams, max-scaled)"] = rule("max", 0.7, 1.0, None)
    out["trigrams only, then min-max; kw=0.6 (before the word index)"] = rule(
        "minmax", 0.0, 0.6, None
    )
    out["semantic only"] = lambda case: [d for d, _ in case["semantic"]]
    return out


def measure(ranked_lists, cases) -> dict:
    ranks, gains = [], []
    for ranked, case in zip(ranked_lists, cases, strict=True):
        marks = [d in case["relevant"] for d in ranked[:10]]
        ranks.append(next((i for i, m in enumerate(marks, 1) if m), None))
        gains.append(evaluate.ndcg(marks, max(len(case["relevant"]), 1)))
    n = len(ranks)
    out = {f"R@{k}": round(sum(1 for r in ranks if r and r <= k) / n, 4) for k in (1, 5, 10)}
    out["MRR"] = round(sum(1 / r for r in ranks if r) / n, 4)
    out["nDCG@10"] = round(sum(gains) / n, 4)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", default="dev")
    parser.add_argument("--max-paragraphs", type=int, default=None)
    parser.add_argument("--models", default="use")
    args = parser.parse_args()
    corpus = f"jaquad-{args.split}" + (f"-{args.max_paragraphs}" if args.max_paragraphs else "")
    folder = WORK / f"jaquad-{args.split}-{args.max_paragraphs or 'all'}"
    questions = evaluate.load_questions(folder / "questions.jsonl")
    service = Context(Settings(data_dir=WORK / "data", query_timeout=60.0))
    report = {}
    for model in args.models.split(","):
        started = time.monotonic()
        cases = candidates(service, f"{corpus}-{model}-u60", questions)
        console.print(
            f"{model}: candidates for {len(cases)} questions in {time.monotonic() - started:.0f} s"
        )
        table = Table(title=f"{corpus} · {model} · {len(cases)} questions")
        for column in ("rule", "R@1", "R@5", "R@10", "MRR", "nDCG@10"):
            table.add_column(column, justify="right")
        for name, ranked_by in rules().items():
            ranked = [ranked_by(c) for c in cases]
            row = measure(ranked, cases)
            report[f"{model} {name}"] = row
            table.add_row(name, *(str(v) for v in row.values()))
        console.print(table)
    out = HERE / "results" / f"fusion_study-{corpus}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
