"""HTTP load on a real `chiezo serve` process over loopback, driven by wrk.

    python bench/serve_load.py [--seconds 20] [--connections 32]

Builds the bundled sample sources (sample/ → guide, docs/ → chiezo-docs) and 300 notes in a
scratch data directory, starts `chiezo serve` as a separate process, and runs wrk against
request mixes derived from that data (search words taken from the documents, exact titles,
questions, note recall). `/healthz` (no database work) runs first as the baseline of the same
run. Reports throughput, p50/p99, errors and the server's resident memory; writes JSON to
bench/results/.

Targets (issue 3): zero errors and p99 < 100 ms at 32 concurrent clients; serving RSS < 300 MB.
wrk comes from Debian (`make bench-serve` installs it when missing).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
console = Console(width=140)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def chiezo(*args: str, env: dict) -> None:
    subprocess.run(
        [sys.executable, "-m", "chiezo", *args],
        env=env,
        check=True,
        capture_output=True,
        timeout=600,
    )


def prepare(data: Path) -> dict:
    env = {**os.environ, "CHIEZO_DATA": str(data)}
    chiezo("ingest", "docs", str(ROOT / "sample"), "--name", "guide", env=env)
    chiezo("ingest", "docs", str(ROOT / "docs"), "--name", "chiezo-docs", env=env)
    return env


def request_mixes(data: Path, rng: random.Random) -> dict[str, list[str]]:
    """Paths per mix, from the served data itself: the documents' titles and words."""
    from chiezo.config import Settings
    from chiezo.service import Service

    library = Service(Settings(data_dir=data)).library
    titles, words = [], set()
    for source in ("guide", "chiezo-docs"):
        for title, body in library.get(source).conn.execute("SELECT title, body FROM docs"):
            titles.append((source, title))
            words.update(re.findall(r"[A-Za-z]{4,}|[\u3040-\u30ff\u4e00-\u9fff]{3,6}", body))
    words = sorted(words)
    rng.shuffle(words)
    search = [f"/v1/search?{urlencode({'q': w})}" for w in words[:150]]
    search += [f"/v1/guide/search?{urlencode({'q': w, 'limit': 5})}" for w in words[150:300]]
    doc = [f"/v1/{s}/doc?{urlencode({'title': t, 'max_chars': 2000})}" for s, t in titles]
    sentences = [f"/v1/search?{urlencode({'q': w + 'はどこですか'})}" for w in words[:100]]
    recall = [f"/v1/notes/recall?{urlencode({'q': w})}" for w in words[:50]]
    recall += ["/v1/notes/recall?since=2000-01-01", "/v1/notes/recall?tag=bench"]
    mixed = search[:100] + doc + sentences[:50] + recall
    rng.shuffle(mixed)
    return {
        "healthz (baseline)": ["/healthz"],
        "search": search,
        "doc by title": doc,
        "question (sentence)": sentences,
        "notes recall": recall,
        "mixed": mixed,
    }


def lua_script(paths: list[str], path: Path) -> Path:
    quoted = ",\n".join(json.dumps(p) for p in paths)
    path.write_text(
        "local paths = {\n" + quoted + "\n}\n"
        "local i = 0\n"
        "request = function()\n"
        "  i = i + 1\n"
        "  return wrk.format('GET', paths[(i % #paths) + 1])\n"
        "end\n",
        encoding="utf-8",
    )
    return path


def run_wrk(url: str, script: Path, seconds: int, connections: int) -> dict:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
    ).stdout
    return parse_wrk(out)


def parse_wrk(text: str) -> dict:
    def ms(value: str) -> float:
        number, unit = re.match(r"([\d.]+)(\w+)", value).groups()
        return float(number) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[unit]

    result = {"requests_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))}
    for pct in ("50", "99"):
        result[f"p{pct}_ms"] = round(ms(re.search(rf"\s{pct}%\s+(\S+)", text).group(1)), 2)
    result["requests"] = int(re.search(r"(\d+) requests in", text).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    socket_errors = re.search(r"Socket errors: (.*)", text)
    result["errors"] = (int(non2xx.group(1)) if non2xx else 0) + (
        sum(int(n) for n in re.findall(r"\d+", socket_errors.group(1))) if socket_errors else 0
    )
    return result


def rss_mb(pid: int) -> dict:
    """Resident memory of the server: its process plus worker processes, if any."""
    pids = [pid]
    children = Path(f"/proc/{pid}/task/{pid}/children")
    if children.exists():
        pids += [int(p) for p in children.read_text().split()]
    total = peak = 0.0
    for p in pids:
        status = Path(f"/proc/{p}/status").read_text()
        total += int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) / 1024
        peak += int(re.search(r"VmHWM:\s+(\d+) kB", status).group(1)) / 1024
    return {"processes": len(pids), "rss_mb": round(total, 1), "peak_rss_mb": round(peak, 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=20)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--workers", type=int, default=1, help="chiezo serve --workers")
    args = parser.parse_args()
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed: run `make bench-serve` (installs it from Debian)")
    data = Path(tempfile.mkdtemp(prefix="chiezo-load-"))
    env = prepare(data)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chiezo",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(args.workers),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        for _ in range(150):
            try:
                httpx.get(f"{url}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.2)
        for i in range(300):
            httpx.post(
                f"{url}/v1/notes",
                json={"text": f"bench note {i}: 会議 {i} の記録", "tags": ["bench"]},
            )
        mixes = request_mixes(data, random.Random(3))
        report = {
            "connections": args.connections,
            "seconds": args.seconds,
            "workers": args.workers,
            "idle": rss_mb(server.pid),
            "mixes": {},
        }
        for name, paths in mixes.items():
            script = lua_script(paths, data / "paths.lua")
            console.print(f"[bold]{name}[/] ({len(paths)} distinct requests)")
            report["mixes"][name] = {
                "paths": len(paths),
                **run_wrk(url, script, args.seconds, args.connections),
            }
        report["after"] = rss_mb(server.pid)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
        shutil.rmtree(data, ignore_errors=True)
    show(report)
    out = HERE / "results" / f"serve_load-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")


def show(report: dict) -> None:
    table = Table(title=f"wrk, {report['connections']} connections, {report['seconds']} s per mix")
    for col in ("mix", "requests", "req/s", "p50 ms", "p99 ms", "errors"):
        table.add_column(col, justify="right")
    for name, r in report["mixes"].items():
        table.add_row(
            name,
            f"{r['requests']:,}",
            f"{r['requests_per_s']:,.0f}",
            str(r["p50_ms"]),
            str(r["p99_ms"]),
            str(r["errors"]),
        )
    console.print(table)
    console.print(f"server RSS: idle {report['idle']}, after load {report['after']}")


if __name__ == "__main__":
    main()
