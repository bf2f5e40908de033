"""How to fuse keyword and semantic candidates: every fusion rule on the same candidate lists.

    python bench/fusion_study.py --split train --max-paragraphs 1500   # tune here
    python bench/fusion_study.py --split dev                           # then confirm here

Each question is searched once per side (keyword top-50 with its scores, semantic top-50 with
its cosine similarities — the lists hybrid search fuses); the rules are then applied offline, so
dozens of variants cost seconds. Needs the sources bench/retrieval_eval.py builds. Writes JSON
to bench/results/.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo import evaluate  # noqa: E402
from chiezo.config import Settings  # noqa: E402
from chiezo.search.fts import search_source  # noqa: E402
from chiezo.search.hybrid import fuse  # noqa: E402
from chiezo.search.semantic import embed_query, semantic_candidates  # noqa: E402
from chiezo.service import Service  # noqa: E402

WORK = HERE / "work" / "retrieval_eval"
console = Console(width=130)
TOP = 50


def candidates(service, name: str, questions) -> list[dict]:
    source = service.library.get(name)
    keys = dict(source.conn.execute("SELECT doc_id, key FROM docs"))
    out = []
    for q in questions:
        kw = search_source(source, q.text, limit=TOP, offset=0, timeout=60)
        sem = semantic_candidates(source, embed_query(source, q.text), TOP, min_score=-1.0)
        out.append({
            "keyword": [(h.doc_id, -h.score) for h in kw.hits],
            "title": [h.doc_id for h in kw.hits if h.title_match],
            "semantic": [(h.doc_id, h.score) for h in sem],
            "relevant": {d for d, k in keys.items() if q.relevant(k, "")},
        })  # fmt: skip
    return out


def zscore(pairs):
    if len(pairs) < 2:
        return {d: 1.0 for d, _ in pairs}
    values = [s for _, s in pairs]
    mean, sd = statistics.mean(values), statistics.pstdev(values) or 1.0
    return {d: (s - mean) / sd for d, s in pairs}


def rules(weights):
    """name → f(keyword, semantic, title) returning doc ids best first."""
    out = {}
    for w in weights:
        out[f"minmax w={w}"] = lambda k, s, t, w=w: [
            f.doc_id for f in fuse(k, s, keyword_weight=w, first=t)
        ]
        out[f"rrf w={w}"] = lambda k, s, t, w=w: [
            f.doc_id for f in fuse(k, s, keyword_weight=w, method="rrf", first=t)
        ]

        def z(k, s, t, w=w):
            kz, sz = zscore(k), zscore(s)
            low_k, low_s = min(kz.values(), default=0), min(sz.values(), default=0)
            ids = set(kz) | set(sz)
            score = {d: w * kz.get(d, low_k) + (1 - w) * sz.get(d, low_s) for d in ids}
            return t + sorted((d for d in ids if d not in t), key=lambda d: -score[d])

        out[f"zscore w={w}"] = z

        def mnz(k, s, t, w=w):
            """CombMNZ: the min-max sum, times the number of sides that found the document."""
            fused = fuse(k, s, keyword_weight=w, first=t)
            both = {d for d, _ in k} & {d for d, _ in s}
            lead = [f.doc_id for f in fused[: len(t)]]
            rest = sorted(fused[len(t) :], key=lambda f: -f.score * (2 if f.doc_id in both else 1))
            return lead + [f.doc_id for f in rest]

        out[f"combmnz w={w}"] = mnz

        def maxnorm(k, s, t, w=w):
            """Each side divided by its best score (no arbitrary minimum of the pool)."""
            kmax = max((v for _, v in k), default=1.0) or 1.0
            smax = max((v for _, v in s), default=1.0) or 1.0
            kn, sn = {d: v / kmax for d, v in k}, {d: v / smax for d, v in s}
            ids = set(kn) | set(sn)
            score = {d: w * kn.get(d, 0.0) + (1 - w) * sn.get(d, 0.0) for d in ids}
            return t + sorted((d for d in ids if d not in t), key=lambda d: -score[d])

        out[f"maxnorm w={w}"] = maxnorm
    out["keyword only"] = lambda k, s, t: t + [d for d, _ in k if d not in t]
    out["semantic only"] = lambda k, s, t: [d for d, _ in s]
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
    parser.add_argument("--models", default="use,e5")
    args = parser.parse_args()
    corpus = f"jaquad-{args.split}" + (f"-{args.max_paragraphs}" if args.max_paragraphs else "")
    folder = WORK / f"jaquad-{args.split}-{args.max_paragraphs or 'all'}"
    questions = evaluate.load_questions(folder / "questions.jsonl")
    service = Service(Settings(data_dir=WORK / "data", query_timeout=60.0))
    weights = (0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
    report = {}
    for model in args.models.split(","):
        started = time.monotonic()
        cases = candidates(service, f"{corpus}-{model}", questions)
        console.print(f"{model}: candidates for {len(cases)} questions in "
                      f"{time.monotonic() - started:.0f} s")  # fmt: skip
        table = Table(title=f"{corpus} · {model} · {len(cases)} questions")
        for column in ("rule", "R@1", "R@5", "R@10", "MRR", "nDCG@10"):
            table.add_column(column, justify="right")
        for name, rule in rules(weights).items():
            ranked = [rule(c["keyword"], c["semantic"], c["title"]) for c in cases]
            row = measure(ranked, cases)
            report[f"{model} {name}"] = row
            table.add_row(name, *(str(v) for v in row.values()))
        console.print(table)
    out = HERE / "results" / f"fusion_study-{corpus}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
