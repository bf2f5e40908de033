"""A server's memory per process and a cold CLI search, with and without the model host
(issue #33 item 3; store/model_host.py, docs/design.md §35.2).

    python bench/worker_memory.py                 # ~4 minutes on 2 cores once the data is built
    python bench/worker_memory.py --queries 300 --cli-runs 3

Data (built once under bench/work/worker_memory from ../shared/data): the jawiki excerpt with
use-m vectors, and the same excerpt without vectors (keyword-only). In one run:

* **serve**: ``chiezo serve --workers 2`` on each library, the use-m one twice — with its model
  host (the default) and with ``CHIEZO_MODEL_HOST=off`` (every worker loads the model: the
  baseline) — ``--queries`` mixed searches over HTTP (keyword, semantic, hybrid and auto;
  titles, questions, words), then each process's smaps_rollup: RSS, PSS and private
  (Private_Clean + Private_Dirty).
* **cold CLI**: ``chiezo search Q --source jawiki`` as a new process each time, the median of
  ``--cli-runs``: keyword-only; hybrid with no server (the model loads in the command); while
  a server runs on the same data directory, hybrid and keyword searched in the command (its
  host embeds the query: the way before surfaces/cli/via_server.py) and answered by the
  server. ``--cli-only`` runs these alone, keeping the serve rounds on file.

The load average is printed beside the numbers: on a shared machine a busy neighbour slows the
cold starts (not the memory). Writes bench/results/worker_memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DUMP = ROOT.parent / "shared" / "data" / "wikipedia" / "jawiki-20230501-excerpt.xml.bz2"
WORK = HERE / "work" / "worker_memory"
RESULTS = HERE / "results" / "worker_memory.json"
CHIEZO = [sys.executable, "-m", "chiezo"]
QUESTIONS = ["夏目漱石はいつ生まれましたか", "日本で一番高い山は", "京都の寺", "鉄道の駅"]
WORDS = ["東京", "川", "大学", "Ray Charles", "第二次世界大戦", "明治"]
MODES = ["keyword", "semantic", "hybrid", "auto"]
console = Console(width=130)


def build(data: Path, embed: bool) -> None:
    if (data / "corpus" / "jawiki").exists():
        return
    command = [*CHIEZO, "--data", str(data), "ingest", "wikipedia", str(DUMP), "--name", "jawiki"]
    subprocess.run(command + (["--embed", "use-m"] if embed else []), check=True)


def titles(data: Path, n: int) -> list[str]:
    out = subprocess.run(
        [*CHIEZO, "--data", str(data), "random", "jawiki", "-n", str(n), "--seed", "7", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return [doc["title"] for doc in json.loads(out.stdout)["docs"]]


def queries(data: Path, n: int, modes: list[str]) -> list[tuple[str, str]]:
    words = titles(data, 20) + QUESTIONS + WORDS
    return [(words[i % len(words)], modes[i % len(modes)]) for i in range(n)]


class Server:
    def __init__(self, data: Path, port: int, env: dict[str, str]) -> None:
        self.port = port
        command = [*CHIEZO, "--data", str(data), "serve", "--port", str(port), "--workers", "2"]
        self.process = subprocess.Popen(
            command,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 180
        while not self._answers():
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise SystemExit("the server did not start")
            time.sleep(0.3)

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2):
                return True
        except OSError:
            return False

    def ask(self, q: str, mode: str) -> None:
        query = urllib.parse.urlencode({"q": q, "mode": mode})
        url = f"http://127.0.0.1:{self.port}/v1/jawiki/search?{query}"
        with urllib.request.urlopen(url, timeout=60) as answer:
            answer.read()

    def processes(self) -> dict[str, dict[str, float]]:
        found = {"supervisor": memory(self.process.pid)}
        workers = 0
        for pid in children(self.process.pid):
            command = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"chiezo.store.model_host" in command:
                found["model host"] = memory(pid)
            elif b"multiprocessing.spawn" in command:
                workers += 1
                found[f"worker {workers}"] = memory(pid)
        return found

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(30)


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def memory(pid: int) -> dict[str, float]:
    fields: dict[str, float] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        name, value = line.split(":", 1)
        fields[name] = int(value.split()[0]) / 1024
    private = fields["Private_Clean"] + fields["Private_Dirty"]
    return {"rss_mb": round(fields["Rss"], 1), "pss_mb": round(fields["Pss"], 1),
            "private_mb": round(private, 1)}  # fmt: skip


def serve_round(name: str, data: Path, env: dict[str, str], asked, port: int) -> dict:
    server = Server(data, port, env)
    try:
        started = time.monotonic()
        for q, mode in asked:
            server.ask(q, mode)
        seconds = time.monotonic() - started
        return {"name": name, "queries": len(asked), "seconds": round(seconds, 1),
                "load": os.getloadavg()[0], "processes": server.processes()}  # fmt: skip
    finally:
        server.stop()


# the command as it was before it asked a running server (surfaces/cli/via_server.py): the
# server's host still embeds the query, the search runs in the command
SEARCHING_HERE = [
    sys.executable,
    "-c",
    "from chiezo.surfaces.cli import via_server; via_server.search = lambda *a: None; "
    "from chiezo.surfaces.cli.main import main; main()",
]


def cold_cli(
    data: Path, mode: str, runs: int, env: dict[str, str], command: list[str] = CHIEZO
) -> dict:
    times = []
    for _ in range(runs):
        started = time.monotonic()
        subprocess.run(
            [*command, "--data", str(data), "search", QUESTIONS[0], "--source", "jawiki",
             "--mode", mode, "--json"],
            env={**os.environ, **env}, stdout=subprocess.DEVNULL, check=True,
        )  # fmt: skip
        times.append(time.monotonic() - started)
    return {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
            "load": os.getloadavg()[0]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--cli-runs", type=int, default=7)
    parser.add_argument("--port", type=int, default=8791)
    parser.add_argument("--cli-only", action="store_true", help="keep the serve rounds on file")
    args = parser.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's CLI reuses compiled modules
    vectors, words = WORK / "use-m", WORK / "keyword-only"
    build(vectors, embed=True)
    build(words, embed=False)
    if args.cli_only:
        rounds = json.loads(RESULTS.read_text())["serve"]
    else:
        asked = queries(vectors, args.queries, MODES)
        rounds = [
            serve_round("keyword-only, host", words, {},
                        queries(words, args.queries, ["keyword"]), args.port),
            serve_round("use-m, no host (before)", vectors, {"CHIEZO_MODEL_HOST": "off"}, asked,
                        args.port),
            serve_round("use-m, host (after)", vectors, {}, asked, args.port),
        ]  # fmt: skip
    off = {"CHIEZO_MODEL_HOST": "off"}
    cli = {
        "keyword, no server": cold_cli(vectors, "keyword", args.cli_runs, off),
        "hybrid, no server (before)": cold_cli(vectors, "hybrid", args.cli_runs, off),
    }
    server = Server(vectors, args.port, {})
    try:
        cli["hybrid, server running, host embeds, searched here"] = cold_cli(
            vectors, "hybrid", args.cli_runs, {}, SEARCHING_HERE
        )
        cli["hybrid, server running, the server answers (after)"] = cold_cli(
            vectors, "hybrid", args.cli_runs, {}
        )
        cli["keyword, server running, searched here"] = cold_cli(
            vectors, "keyword", args.cli_runs, {}, SEARCHING_HERE
        )
        cli["keyword, server running, the server answers"] = cold_cli(
            vectors, "keyword", args.cli_runs, {}
        )
    finally:
        server.stop()
    show(rounds, cli)
    RESULTS.parent.mkdir(exist_ok=True)
    RESULTS.write_text(json.dumps({"serve": rounds, "cold_cli": cli}, indent=2) + "\n")
    console.print(f"wrote {RESULTS.relative_to(ROOT)}")


def show(rounds: list[dict], cli: dict) -> None:
    table = Table(title="chiezo serve --workers 2 after the queries (MB)")
    for column in ("library", "process", "RSS", "PSS", "private", "queries / s", "load"):
        table.add_column(column, justify="left" if column in ("library", "process") else "right")
    for r in rounds:
        for process, m in r["processes"].items():
            table.add_row(r["name"], process, f"{m['rss_mb']:.0f}", f"{m['pss_mb']:.0f}",
                          f"{m['private_mb']:.0f}", f"{r['queries'] / r['seconds']:.0f}",
                          f"{r['load']:.2f}")  # fmt: skip
        total = sum(m["private_mb"] for m in r["processes"].values())
        table.add_row(r["name"], "[b]all, private[/]", "", "", f"[b]{total:.0f}[/]", "", "")
    console.print(table)
    table = Table(title="a cold `chiezo search` (new process each time)")
    for column in ("how", "median s", "min s", "load"):
        table.add_column(column, justify="left" if column == "how" else "right")
    for how, m in cli.items():
        table.add_row(how, f"{m['median_s']:.3f}", f"{m['min_s']:.3f}", f"{m['load']:.2f}")
    console.print(table)


if __name__ == "__main__":
    main()
