"""Mixed searches under load on a real `chiezo serve`, against baselines of the same run, and a
worker's private memory across rebuilds (issue #28, "Under load"; docs/design.md).

    python bench/serve_load.py                     # 5-8 minutes on 2 cores, data built
    python bench/serve_load.py --quick             # about 3: 32 connections, no variants
    python bench/serve_load.py --connections 16,32,64 --seconds 20 --variants 1x4,1x1,2x2
    python bench/serve_load.py --phases memory --data /tmp/d --server-env MALLOC_ARENA_MAX=2

Data, in a scratch CHIEZO_DATA (or ``--data DIR``, built there once and reused): the bundled
samples (sample/ → guide, docs/ → chiezo-docs), the jawiki excerpt (../shared/data, 189
articles), GeoNames cities15000 with admin1 names (25,704 places) and 300 notes (POSTed).

Phases (``--phases``), each started once no pytest runs; the load average and the CPU that
other processes took during each round are reported beside every number:

* **load** — wrk over loopback: ``/healthz`` (HTTP and framework, no search) and the mixed
  searches (exact titles, words, JaQuAD questions, GeoNames place names, place searches with
  ``near`` + radius, feature or country) at each ``--connections``; each class alone at the
  middle count; one more mixed round sampled by py-spy (``--native``; py-spy is installed in
  the venv for this bench only, not a dependency). The server's CPU seconds per request come
  from /proc; Python's garbage collections in the workers are timed (``gc.callbacks``).
* **inproc** — the same requests without the server: ``SearchRequest`` → ``Context.search`` →
  ``to_dict`` → JSON as Starlette encodes it, in a process of their own, one at a time (each
  stage timed; the SQL a subset of searches ran, captured with ``set_trace_callback`` and
  replayed alone; py-spy), then with as many processes × threads as the server answers with.
* **memory** — each worker's memory idle (smaps_rollup: private = Private_Clean +
  Private_Dirty, Anonymous, Rss, Pss; private split into heap, generation files, libraries)
  before the switches and after each of ``--rebuilds`` rebuild jobs (``POST /v1/jobs``) and a
  short load on the new generation; then after ``gc.collect()`` and after ``malloc_trim(0)``.
  A probe in every server process (a sitecustomize on the server's PYTHONPATH, SIGUSR1)
  counts live Source objects and SQLite connections and reads malloc's figures and heaps.
  Experiments: ``--control-idle S`` (idle S seconds instead of each rebuild: no switch),
  ``--trim-after-switch``, ``--server-env MALLOC_ARENA_MAX=2`` or ``CHIEZO_BENCH_ARENA_MAX=2``
  (the probe calls ``mallopt(M_ARENA_MAX, 2)`` at start, as a product fix would).
* **variants** — ``--variants WxT[:NAME=VALUE]``: servers of W workers × T threads
  (CHIEZO_SERVE_THREADS), with environment, for /healthz and the mixed load.

Writes bench/results/serve_load-*.json. wrk comes from Debian (`make bench-serve` installs it).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import resource
import shutil
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlencode

from chiezo.ops import operating, searching

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared" / "data"
WIKI = SHARED / "wikipedia" / "jawiki-20230501-excerpt.xml.bz2"
WIKI_FALLBACK = ROOT / "tests" / "data" / "wikipedia" / "jawiki-20230501-excerpt.xml.bz2"
GEONAMES = SHARED / "geonames" / "cities15000.zip"
ADMIN1 = SHARED / "geonames" / "admin1CodesASCII.txt"
QUESTIONS = SHARED / "eval" / "ja" / "jawiki-excerpt-questions.jsonl"
CLASSES = ("title", "word", "question", "place", "near")
HZ = os.sysconf("SC_CLK_TCK")
NCPU = os.cpu_count() or 1


def console():
    from rich.console import Console

    return Console(width=150)


# -- the machine: wait for quiet, say how busy it was --------------------------------------------


def wait_quiet(max_wait: float) -> dict:
    """Wait until no pytest runs (others share these cores), at most ``max_wait`` seconds."""
    waited = 0.0
    while (
        waited < max_wait
        and subprocess.run(["pgrep", "-f", "pytest"], capture_output=True).returncode == 0
    ):
        time.sleep(20)
        waited += 20
    busy = subprocess.run(["pgrep", "-f", "pytest"], capture_output=True).returncode == 0
    return {
        "waited_s": waited,
        "pytest_running": busy,
        "loadavg": [round(x, 2) for x in os.getloadavg()],
    }


def tree(pid: int) -> list[int]:
    """``pid`` and every process below it."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return out


def cpu_ticks(pids: list[int]) -> int:
    total = 0
    for p in pids:
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except (OSError, IndexError):
            pass
    return total


def machine_ticks() -> tuple[int, int]:
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = values[3] + values[4]
    return sum(values[:8]) - idle, sum(values[:8])


class CpuMeter:
    """CPU used during a round: by the server (all its processes), by this script's children
    (wrk, in-process runs), by this script, and by everything else on the machine."""

    def __init__(self, server_pid: int | None):
        self.server_pid = server_pid

    def __enter__(self):
        self.t0 = time.monotonic()
        self.busy0, self.all0 = machine_ticks()
        self.pids = tree(self.server_pid) if self.server_pid else []
        self.server0 = cpu_ticks(self.pids)
        self.children0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        self.self0 = resource.getrusage(resource.RUSAGE_SELF)
        self.load = os.getloadavg()[0]
        return self

    def __exit__(self, *exc):
        wall = time.monotonic() - self.t0
        busy, total = machine_ticks()
        server = (cpu_ticks(self.pids) - self.server0) / HZ
        c, s = (
            resource.getrusage(resource.RUSAGE_CHILDREN),
            resource.getrusage(resource.RUSAGE_SELF),
        )
        children = (c.ru_utime + c.ru_stime) - (self.children0.ru_utime + self.children0.ru_stime)
        mine = (s.ru_utime + s.ru_stime) - (self.self0.ru_utime + self.self0.ru_stime)
        machine = (busy - self.busy0) / max(1, total - self.all0) * NCPU  # cores busy
        self.result = {
            "wall_s": round(wall, 2),
            "loadavg_1m": round(self.load, 2),
            "server_cpu_s": round(server, 2),
            "driver_cpu_s": round(children, 2),  # wrk or the in-process runs (ended children)
            "machine_cores_busy": round(machine, 2),
            "other_cores_busy": round(max(0.0, machine - (server + children + mine) / wall), 2),
        }


# -- data -----------------------------------------------------------------------------------------


def chiezo(*args: str, env: dict, timeout: int = 900) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "chiezo", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode:
        sys.exit(f"chiezo {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return round(time.monotonic() - started, 1)


def prepare(data: Path, env: dict, with_geonames: bool) -> dict:
    wiki = WIKI if WIKI.exists() else WIKI_FALLBACK
    built = {
        "guide": chiezo("ingest", "docs", str(ROOT / "sample"), "--name", "guide", env=env),
        "chiezo-docs": chiezo(
            "ingest", "docs", str(ROOT / "docs"), "--name", "chiezo-docs", env=env
        ),
        "jawiki": chiezo("ingest", "wikipedia", str(wiki), "--name", "jawiki", env=env),
    }
    if with_geonames:
        built["geonames"] = chiezo(
            "ingest", "geonames", str(GEONAMES), "--admin1", str(ADMIN1), env=env
        )
    return {"build_s": built, "wiki_input": str(wiki)}


def requests_for(data: Path, rng: random.Random, per_class: int) -> list[dict]:
    """The mixed searches, from the served data: each {"cls", "path", "call"}: the HTTP path
    and the same request as SearchRequest fields (what the in-process run calls)."""

    def conn(name: str) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{data / 'corpus' / name / 'current'}?mode=ro", uri=True)

    out: list[dict] = []

    def add(cls: str, source: str | None, **params) -> None:
        params = {k: v for k, v in params.items() if v is not None}
        path = f"/v1/{source}/search" if source else "/v1/search"
        query = {("q" if k == "query" else k): v for k, v in params.items()}
        out.append(
            {
                "cls": cls,
                "path": f"{path}?{urlencode(query, doseq=True)}",
                "call": {**params, "source": source},
            }
        )

    wiki = conn("jawiki")
    titles = [t for (t,) in wiki.execute("SELECT title FROM docs")]
    for title in rng.sample(titles, min(per_class, len(titles))):
        add("title", "jawiki", query=title, limit=10)
    words: set[str] = set()
    for (body,) in wiki.execute("SELECT body FROM docs"):
        words.update(re.findall(r"[\u30a0-\u30ff]{3,8}|[\u4e00-\u9fff]{2,4}", body))
    latin: set[str] = set()
    for name in ("chiezo-docs", "guide"):
        for (body,) in conn(name).execute("SELECT body FROM docs"):
            latin.update(w.lower() for w in re.findall(r"[A-Za-z]{5,12}", body))
    picked = rng.sample(sorted(words), per_class // 2) + rng.sample(sorted(latin), per_class // 2)
    for i, word in enumerate(picked):
        source = None if i % 2 == 0 else ("jawiki" if i < per_class // 2 else "chiezo-docs")
        add("word", source, query=word, limit=10)
    questions = [json.loads(line)["question"] for line in QUESTIONS.read_text().splitlines()]
    for i, question in enumerate(rng.sample(questions, min(per_class, len(questions)))):
        add("question", "jawiki" if i % 2 else None, query=question, limit=10)
    if (data / "corpus" / "geonames").exists():
        geo = conn("geonames")
        japanese = [
            t
            for (t,) in geo.execute("SELECT title FROM docs WHERE title GLOB '*[ぁ-んァ-ヶ一-龥]*'")
        ]
        other = [
            t
            for (t,) in geo.execute(
                "SELECT title FROM docs WHERE title NOT GLOB '*[ぁ-んァ-ヶ一-龥]*' LIMIT 20000"
            )
        ]
        for title in rng.sample(japanese, per_class // 2) + rng.sample(
            other, per_class - per_class // 2
        ):
            add("place", "geonames", query=title, limit=10)
        points = geo.execute(
            "SELECT p.lat, p.lon, a.value FROM doc_points p JOIN doc_attrs a USING (doc_id) "
            "WHERE a.name = 'country'"
        ).fetchall()
        jp = [p for p in points if p[2] == "JP"]
        for i in range(per_class):
            lat, lon, country = rng.choice(jp if i % 2 == 0 else points)
            word = rng.choice(
                ["市", "町", "区", "村"] if country == "JP" else ["San", "city", "Saint", "North"]
            )
            extra = [{}, {"feature": ["P=PPLA2,P=PPLA"]}, {"attr": [f"country={country}"]}][i % 3]
            add(
                "near",
                "geonames",
                query=word,
                near=f"{lat:.4f},{lon:.4f}",
                radius_km=rng.choice([20, 50, 100, 300]),
                limit=10,
                **extra,
            )
    return out


def check_requests(url: str, reqs: list[dict]) -> tuple[list[dict], dict]:
    """Each request once: those not answered 200 are dropped (and counted); hits counted."""
    import httpx

    kept, failed, empty = [], [], 0
    with httpx.Client(base_url=url, timeout=30) as client:
        for r in reqs:
            resp = client.get(r["path"])
            if resp.status_code != 200:
                failed.append(
                    {"path": r["path"], "status": resp.status_code, "error": resp.text[:200]}
                )
                continue
            empty += not resp.json().get("hits")
            kept.append(r)
    by_class = {c: sum(r["cls"] == c for r in kept) for c in CLASSES}
    return kept, {"kept": len(kept), "by_class": by_class, "dropped": failed, "no_hits": empty}


# -- the server ------------------------------------------------------------------------------------

PROBE = r"""
# bench/serve_load.py's probe, imported by every Python process of the server under test
import gc, os, signal, time

_GC = {0: [0, 0.0, 0.0], 1: [0, 0.0, 0.0], 2: [0, 0.0, 0.0]}  # collections, seconds, longest
_GC_START = [0.0]


def _gc_timer(phase, info):
    if phase == "start":
        _GC_START[0] = time.perf_counter()
    else:
        spent, entry = time.perf_counter() - _GC_START[0], _GC[info["generation"]]
        entry[0] += 1
        entry[1] += spent
        entry[2] = max(entry[2], spent)


def _malloc(libc):
    import ctypes
    names = ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks",
             "uordblks", "fordblks", "keepcost")
    class Info(ctypes.Structure):
        _fields_ = [(n, ctypes.c_size_t) for n in names]
    libc.mallinfo2.restype = Info
    info = libc.mallinfo2()
    return {"arenas_mb": round(info.arena / 2**20, 1), "mmapped_mb": round(info.hblkhd / 2**20, 1),
            "in_use_mb": round(info.uordblks / 2**20, 1), "free_mb": round(info.fordblks / 2**20, 1)}


def _heaps(libc):
    # malloc's heaps (the main arena, then one per thread arena) and their sizes
    import ctypes, re
    buf, size = ctypes.c_char_p(), ctypes.c_size_t()
    libc.open_memstream.restype = ctypes.c_void_p
    stream = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    libc.malloc_info(0, ctypes.c_void_p(stream))
    libc.fclose(ctypes.c_void_p(stream))
    xml = ctypes.string_at(buf, size.value).decode()
    libc.free(buf)
    heaps = re.findall(r'<heap nr="\d+">(.*?)</heap>', xml, re.S)
    return [round(int(re.search(r'<system type="current" size="(\d+)"', h).group(1)) / 2**20, 1)
            for h in heaps]


def _probe(signum, frame):
    import ctypes, json, sqlite3, sys, threading
    directory = os.environ["CHIEZO_BENCH_PROBE_DIR"]
    try:
        with open(os.path.join(directory, "command")) as handle:
            command = handle.read().strip()
    except OSError:
        command = "probe"
    out = {"pid": os.getpid(), "command": command, "time": time.time(),
           "gc_times": {str(g): [n, round(t, 4), round(m, 4)] for g, (n, t, m) in _GC.items()}}
    if command != "gc":
        libc = ctypes.CDLL("libc.so.6")
        if command in ("collect", "trim"):
            out["malloc_before"] = _malloc(libc)
            out["gc_collected"] = gc.collect()
        if command == "trim":
            out["malloc_trim"] = libc.malloc_trim(0)
        try:
            out["malloc_heaps_mb"] = _heaps(libc)
        except Exception as exc:
            out["malloc_heaps_error"] = repr(exc)
        library = sys.modules.get("chiezo.store.library")
        objects = gc.get_objects()
        if library is not None:
            sources = [o for o in objects if isinstance(o, library.Source)]
            out["sources_alive"] = sorted(f"{s.name}:{s.path.name}" for s in sources)
            libraries = [o for o in objects if isinstance(o, library.Library)]
            out["sources_open"] = sorted(f"{n}:{s.path.name}" for lib in libraries
                                         for n, s in lib._open.items())
        out["sqlite_connections"] = sum(isinstance(o, sqlite3.Connection) for o in objects)
        out["gc_objects"] = len(objects)
        out["allocated_blocks"] = sys.getallocatedblocks()
        out["threads"] = sorted(t.name for t in threading.enumerate())
        out["malloc"] = _malloc(libc)
        del objects
    path = os.path.join(directory, f"probe-{os.getpid()}.json")
    with open(path + ".tmp", "w") as handle:
        json.dump(out, handle)
    os.replace(path + ".tmp", path)


if os.environ.get("CHIEZO_BENCH_PROBE_DIR"):
    signal.signal(signal.SIGUSR1, _probe)
    gc.callbacks.append(_gc_timer)
    if os.environ.get("CHIEZO_BENCH_ARENA_MAX"):  # another arena count than serve's own (2)
        import ctypes
        ctypes.CDLL("libc.so.6").mallopt(-8, int(os.environ["CHIEZO_BENCH_ARENA_MAX"]))  # M_ARENA_MAX
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


WRK_TIMEOUT_S = 30  # longer than any answer the server gives before its own deadlines
SETTLED_S = 0.05  # /healthz answers in ~1 ms on a server with nothing queued


class Server:
    """`chiezo serve --workers W` with CHIEZO_SERVE_THREADS=T, the probe on its PYTHONPATH."""

    def __init__(self, env: dict, scratch: Path, workers: int, threads: int, extra_env=None):
        import httpx

        self.workers, self.threads = workers, threads
        self.probe_dir = scratch / f"probe-{workers}x{threads}-{time.monotonic_ns()}"
        self.probe_dir.mkdir()
        (self.probe_dir / "sitecustomize.py").write_text(PROBE)
        path = os.pathsep.join(p for p in (str(self.probe_dir), env.get("PYTHONPATH")) if p)
        self.env = {
            **env,
            "PYTHONPATH": path,
            "CHIEZO_BENCH_PROBE_DIR": str(self.probe_dir),
            "CHIEZO_SERVE_THREADS": str(threads),
            **(extra_env or {}),
        }
        self.url = f"http://127.0.0.1:{free_port()}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "chiezo",
                "serve",
                "--port",
                self.url.rsplit(":", 1)[1],
                "--workers",
                str(workers),
            ],
            env=self.env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{self.url}/healthz", timeout=1)
                break
            except httpx.HTTPError:
                if self.process.poll() is not None:
                    sys.exit(f"chiezo serve failed: {self.process.stderr.read().decode()[-2000:]}")
                time.sleep(0.2)
        while len(self.worker_pids()) < workers and time.monotonic() < deadline:
            time.sleep(0.2)

    def settle(self, within: float = 60.0) -> float:
        """Wait until the server answers ``/healthz`` quickly again: when wrk stops, the server
        still runs what was queued (0.94 s of questions after a question round at 64
        connections), and the next round inherited it (place@64's p99 1,570 ms beside a p50
        of 200). Returns the seconds waited."""
        import httpx

        started = time.monotonic()
        while time.monotonic() - started < within:
            asked = time.monotonic()
            with contextlib.suppress(httpx.HTTPError):
                httpx.get(f"{self.url}/healthz", timeout=5)
                if time.monotonic() - asked < SETTLED_S:
                    break
            time.sleep(0.1)
        return round(time.monotonic() - started, 2)

    def worker_pids(self) -> list[int]:
        if self.workers == 1:
            return [self.process.pid]
        out = []
        for pid in tree(self.process.pid)[1:]:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "spawn_main" in cmd and "resource_tracker" not in cmd:
                out.append(pid)
        return sorted(out)

    def probe(self, command: str = "probe") -> dict[int, dict]:
        """Ask each worker's probe: "probe" (count, read malloc's figures), "collect"
        (gc.collect() first) or "trim" (gc.collect() and malloc_trim(0) first)."""
        (self.probe_dir / "command").write_text(command)
        pids = self.worker_pids()
        for pid in pids:
            (self.probe_dir / f"probe-{pid}.json").unlink(missing_ok=True)
            os.kill(pid, signal.SIGUSR1)
        out = {}
        deadline = time.monotonic() + 30
        for pid in pids:
            path = self.probe_dir / f"probe-{pid}.json"
            while not path.exists() and time.monotonic() < deadline:
                time.sleep(0.1)
            if path.exists():
                out[pid] = json.loads(path.read_text())
        return out

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


# -- wrk --------------------------------------------------------------------------------------------


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


def run_wrk(
    server: Server, paths: list[str], seconds: float, connections: int, scratch: Path
) -> dict:
    script = lua_script(paths, scratch / "paths.lua")
    settled = server.settle()
    before = server.probe("gc")
    with CpuMeter(server.process.pid) as meter:
        out = subprocess.run(
            [
                "wrk",
                f"-t{min(2, connections)}",
                f"-c{connections}",
                f"-d{max(1, round(seconds))}s",
                # wrk's histogram ends at its timeout (2 s unless told): slower answers were
                # left out of every percentile and counted as errors (question@64's p99 was
                # exactly 2,000 ms, with 47 "errors": design.md §37.10)
                f"--timeout={WRK_TIMEOUT_S}s",
                "--latency",
                "-s",
                str(script),
                server.url,
            ],
            capture_output=True,
            text=True,
            timeout=seconds + 120,
        )
    if "Requests/sec" not in out.stdout:
        raise RuntimeError(f"wrk failed: {out.stdout[-500:]} {out.stderr[-500:]}")
    result = parse_wrk(out.stdout)
    result["settled_s"] = settled
    result["gc"] = gc_delta(before, server.probe("gc"))
    result["paths"] = len(paths)
    result["cpu"] = meter.result
    result["server_cpu_ms_per_request"] = round(
        1000 * meter.result["server_cpu_s"] / max(1, result["requests"]), 2
    )
    return result


def gc_delta(before: dict[int, dict], after: dict[int, dict]) -> dict:
    """Python's garbage collections in the workers during a round, by generation: how many,
    seconds in all (the GIL held throughout), the longest one so far."""
    out = {}
    for gen in ("0", "1", "2"):
        n = t = longest = 0.0
        for pid, a in after.items():
            b = before.get(pid, {}).get("gc_times", {}).get(gen, [0, 0.0, 0.0])
            n += a["gc_times"][gen][0] - b[0]
            t += a["gc_times"][gen][1] - b[1]
            longest = max(longest, a["gc_times"][gen][2])
        out[gen] = {
            "collections": int(n),
            "seconds": round(t, 3),
            "longest_ms": round(longest * 1000, 1),
        }
    return out


def parse_wrk(text: str) -> dict:
    def ms(value: str) -> float:
        number, unit = re.match(r"([\d.]+)(\w+)", value).groups()
        return float(number) * {"us": 0.001, "ms": 1, "s": 1000, "m": 60000}[unit]

    result = {"requests_per_s": float(re.search(r"Requests/sec:\s+([\d.]+)", text).group(1))}
    for pct in ("50", "90", "99"):
        result[f"p{pct}_ms"] = round(ms(re.search(rf"\s{pct}%\s+(\S+)", text).group(1)), 2)
    latency = re.search(r"Latency\s+(\S+)\s+(\S+)\s+(\S+)", text)
    result["mean_ms"], result["max_ms"] = (
        round(ms(latency.group(1)), 2),
        round(ms(latency.group(3)), 2),
    )
    result["requests"] = int(re.search(r"(\d+) requests in", text).group(1))
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", text)
    # "Socket errors: connect 0, read 2, write 0, timeout 5": each kind apart (a read error is
    # a connection closed under the client; a timeout, an answer slower than WRK_TIMEOUT_S)
    socket_errors = re.search(r"Socket errors: (.*)", text)
    kinds = (
        dict((kind, int(n)) for kind, n in re.findall(r"(\w+) (\d+)", socket_errors.group(1)))
        if socket_errors
        else {}
    )
    result["non_2xx"] = int(non2xx.group(1)) if non2xx else 0
    result["socket_errors"] = kinds
    result["errors"] = result["non_2xx"] + sum(kinds.values())
    return result


# -- the same searches in-process (a process of its own, this script with --inproc) ---------------


def inproc_main(args) -> None:
    """One in-process run: ``Context.search`` on the same data, no HTTP."""
    from chiezo.core.config import Settings
    from chiezo.ops.context import Context
    from chiezo.ops.requests import SearchRequest

    reqs = json.loads(Path(args.inproc).read_text())
    service = Context(Settings.from_env())
    operating.warm(service)

    def one(r: dict, stages: dict | None = None) -> None:
        t0 = time.perf_counter()
        request = SearchRequest(**r["call"])
        t1 = time.perf_counter()
        result = searching.search(service, request)
        t2 = time.perf_counter()
        data = result.to_dict()
        t3 = time.perf_counter()
        json.dumps(
            data, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")
        ).encode("utf-8")  # as Starlette's JSONResponse
        t4 = time.perf_counter()
        if stages is not None:
            for key, value in (
                ("model", t1 - t0),
                ("search", t2 - t1),
                ("to_dict", t3 - t2),
                ("json", t4 - t3),
            ):
                stages[key].append(value * 1000)

    for r in reqs:  # warm: each generation's pages, the word splitter, the caches
        one(r)
    out: dict = {"threads": args.inproc_threads, "processes": 1}
    if args.detail:
        per: dict[str, dict[str, list[float]]] = {
            c: {"model": [], "search": [], "to_dict": [], "json": []} for c in CLASSES
        }
        scope: dict[str, dict[str, list[float]]] = {
            k: {"model": [], "search": [], "to_dict": [], "json": []}
            for k in ("every source", "one source")
        }
        for _ in range(2):
            for r in reqs:
                stages = {k: [] for k in ("model", "search", "to_dict", "json")}
                one(r, stages)
                where = "every source" if r["call"]["source"] is None else "one source"
                for k, v in stages.items():
                    per[r["cls"]][k] += v
                    if r["cls"] in ("word", "question"):  # both scopes in these classes
                        scope[where][k] += v
        out["stages_ms"] = {
            c: {k: round(statistics.mean(v), 3) for k, v in s.items() if v}
            for c, s in per.items()
            if s["search"]
        }
        out["words_and_questions_by_scope_ms"] = {
            c: {k: round(statistics.mean(v), 3) for k, v in s.items() if v}
            for c, s in scope.items()
            if s["search"]
        }
        out["sql"] = replay_sql(service, reqs, args.sql_subset)
    print("ready", flush=True)  # the parent starts sampling now
    latencies: list[float] = []
    lock = threading.Lock()
    stop_at = time.monotonic() + args.seconds
    started = time.monotonic()
    usage0 = resource.getrusage(resource.RUSAGE_SELF)

    def loop(offset: int) -> None:
        mine = []
        i = offset
        while time.monotonic() < stop_at:
            t0 = time.perf_counter()
            one(reqs[i % len(reqs)])
            mine.append((time.perf_counter() - t0) * 1000)
            i += 1
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=loop, args=(k * 7919,)) for k in range(args.inproc_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.monotonic() - started
    latencies.sort()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    out.update(
        {
            "requests": len(latencies),
            "seconds": round(wall, 2),
            "requests_per_s": round(len(latencies) / wall, 1),
            "p50_ms": round(latencies[len(latencies) // 2], 2),
            "p99_ms": round(latencies[int(len(latencies) * 0.99)], 2),
            "cpu_s": round(usage.ru_utime + usage.ru_stime - usage0.ru_utime - usage0.ru_stime, 2),
        }
    )
    Path(args.out).write_text(json.dumps(out))


def replay_sql(service, reqs: list[dict], subset: int) -> dict:
    """The SQL statements the first ``subset`` searches run (trace callback on each source's
    connection), replayed alone on the same connections: the raw SQLite cost of the queries."""
    from chiezo.ops.requests import SearchRequest

    chosen = [r for c in CLASSES for r in [q for q in reqs if q["cls"] == c][: max(1, subset // 5)]]
    conns = {src.name: src.conn for src in service.library.sources()}
    rows, failures = [], 0
    for r in chosen:
        statements: list[tuple[str, str]] = []
        for name, conn in conns.items():
            conn.set_trace_callback(lambda sql, n=name, into=statements: into.append((n, sql)))
        t0 = time.perf_counter()
        searching.search(service, SearchRequest(**r["call"]))
        traced_ms = (time.perf_counter() - t0) * 1000
        for conn in conns.values():
            conn.set_trace_callback(None)
        best = float("inf")
        t0 = time.perf_counter()
        searching.search(service, SearchRequest(**r["call"]))
        search_ms = (time.perf_counter() - t0) * 1000
        for _ in range(3):
            spent = 0.0
            for name, sql in statements:
                if not sql.lstrip().upper().startswith(("SELECT", "WITH")):
                    continue
                try:
                    t0 = time.perf_counter()
                    conns[name].execute(sql).fetchall()
                    spent += time.perf_counter() - t0
                except sqlite3.Error:
                    failures += 1
            best = min(best, spent * 1000)
        rows.append(
            {
                "cls": r["cls"],
                "statements": len(statements),
                "sql_ms": best,
                "search_ms": search_ms,
                "traced_ms": traced_ms,
            }
        )
    by_class = {}
    for c in CLASSES:
        mine = [x for x in rows if x["cls"] == c]
        if mine:
            by_class[c] = {
                "n": len(mine),
                "statements": round(statistics.mean(x["statements"] for x in mine), 1),
                "sql_ms": round(statistics.mean(x["sql_ms"] for x in mine), 3),
                "search_ms": round(statistics.mean(x["search_ms"] for x in mine), 3),
            }
    total_sql = sum(x["sql_ms"] for x in rows)
    total = sum(x["search_ms"] for x in rows)
    return {
        "by_class": by_class,
        "requests": len(rows),
        "failed_statements": failures // 3,
        "sql_share": round(total_sql / total, 3) if total else None,
    }


def inproc(
    env: dict,
    scratch: Path,
    reqs: list[dict],
    *,
    threads: int,
    processes: int,
    seconds: float,
    detail: bool = False,
    profile: float = 0,
    sql_subset: int = 40,
) -> dict:
    """``processes`` copies of the in-process run at once, each with ``threads`` threads."""
    path = scratch / "requests.json"
    path.write_text(json.dumps(reqs, ensure_ascii=False))
    outs = [scratch / f"inproc-{k}.json" for k in range(processes)]
    cmd = [
        sys.executable,
        __file__,
        "--inproc",
        str(path),
        "--inproc-threads",
        str(threads),
        "--seconds",
        str(seconds),
        "--sql-subset",
        str(sql_subset),
    ]
    procs = [
        subprocess.Popen(
            cmd + ["--out", str(o)] + (["--detail"] if detail else []),
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for o in outs
    ]
    for p in procs:  # each says "ready" after its warm-up (and detail) pass
        p.stdout.readline()
    spy = None
    with CpuMeter(None) as meter:
        if profile:
            spy = py_spy([procs[0].pid], min(profile, seconds - 0.5), scratch / "spy-inproc")
        for p in procs:
            p.wait()
        if spy:
            spy.wait()
    results = [json.loads(o.read_text()) for o in outs]
    merged = dict(results[0])
    merged.update(
        {
            "processes": processes,
            "cpu_ms_per_request": round(
                1000
                * sum(r["cpu_s"] for r in results)
                / max(1, sum(r["requests"] for r in results)),
                2,
            ),
            "requests": sum(r["requests"] for r in results),
            "requests_per_s": round(sum(r["requests_per_s"] for r in results), 1),
            "p50_ms": round(statistics.median(r["p50_ms"] for r in results), 2),
            "p99_ms": round(max(r["p99_ms"] for r in results), 2),
            "cpu": meter.result,
        }
    )
    if spy:
        merged["profile"] = read_profile(spy.outputs)
    return merged


# -- py-spy: where the time goes ---------------------------------------------------------------------


def py_spy_path() -> str | None:
    local = Path(sys.executable).with_name("py-spy")
    return str(local) if local.exists() else shutil.which("py-spy")


class Spy:
    def __init__(self, procs, outputs, seconds):
        self.procs, self.outputs, self.seconds = procs, outputs, seconds

    def wait(self):
        for p in self.procs:
            p.wait(timeout=self.seconds + 60)


def py_spy(pids: list[int], seconds: float, stem: Path, rate: int = 97) -> Spy | None:
    exe = py_spy_path()
    if not exe:
        return None
    outputs, procs = [], []
    for pid in pids:
        out = stem.with_name(f"{stem.name}-{pid}.txt")
        outputs.append(out)
        procs.append(
            subprocess.Popen(
                [
                    exe,
                    "record",
                    "-p",
                    str(pid),
                    "-r",
                    str(rate),
                    "-d",
                    str(max(1, int(seconds))),
                    "--native",
                    "-f",
                    "raw",
                    "-o",
                    str(out),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
    return Spy(procs, outputs, seconds)


WAITS = (
    "PyThread_acquire_lock_timed",
    "pthread_cond_wait",
    "pthread_cond_timedwait",
    "epoll_wait",
    "epoll_pwait",
    "clock_nanosleep",
    "select (",
    "poll (",
    "sem_wait",
    "sem_timedwait",
    "futex",
    "accept",
    "recv",
    "_queue_SimpleQueue_get",
)
GIL = ("take_gil", "RestoreThread", "PyEval_AcquireThread", "PyGILState_Ensure")
PYTHON_AREAS = (  # (path fragment, category), first match of the innermost Python frame
    ("chiezo/core/words.py", "word splitting (chiezo/words)"),
    ("chiezo/core/textnorm.py", "word splitting (chiezo/words)"),
    ("sudachipy", "word splitting (chiezo/words)"),
    ("chiezo/search/snippet", "snippets (chiezo/search/snippet)"),
    ("chiezo/search/", "search, Python (chiezo/search)"),
    ("chiezo/surfaces/rest/", "chiezo API layer (middleware, routes)"),
    ("chiezo/", "chiezo service, library, models"),
    ("json/", "JSON encoding"),
    ("starlette/responses", "JSON encoding"),
    ("pydantic", "pydantic validation"),
    ("fastapi", "FastAPI/Starlette"),
    ("starlette", "FastAPI/Starlette"),
    ("uvicorn", "HTTP server (uvicorn, httptools)"),
    ("httptools", "HTTP server (uvicorn, httptools)"),
    ("h11", "HTTP server (uvicorn, httptools)"),
    ("anyio", "event loop, thread hand-off"),
    ("asyncio", "event loop, thread hand-off"),
    ("concurrent/", "event loop, thread hand-off"),
    ("threading.py", "event loop, thread hand-off"),
    ("queue.py", "event loop, thread hand-off"),
)


def classify(frames: list[str]) -> str:
    """One sample's stack (root first) → "idle", "GIL wait" or where its CPU time goes."""
    tail = frames[-5:]
    waits = [i for i, f in enumerate(frames) if i >= len(frames) - 5 and any(w in f for w in WAITS)]
    if waits:
        before = frames[max(0, waits[0] - 2) : waits[0]]
        if any(g in f for f in frames[-6:] for g in GIL) or any(
            "EvalFrameDefault" in f or "eval_frame_handle_pending" in f for f in before
        ):
            return "GIL wait"  # taking the GIL back: after a C call, or at the eval breaker
        return "idle"
    del tail
    for frame in reversed(frames):
        if ".py:" in frame or "<frozen" in frame:
            path = frame.rsplit("(", 1)[-1]
            for fragment, category in PYTHON_AREAS:
                if fragment in path:
                    return category
            return "other Python"
        low = frame.lower()
        if "sqlite" in low:
            return "SQLite (C)"
        if "sudachi" in low:
            return "word splitting (chiezo/words)"
        if "gc_collect" in low:
            return "garbage collector"
        if "_json" in low or "encoder_" in low:
            return "JSON encoding"
    return "other native"


def innermost_python(frames: list[str]) -> str:
    for frame in reversed(frames):
        if ".py:" in frame:
            name, _, where = frame.partition(" (")
            return f"{name} ({where.rsplit(':', 1)[0]})"
    return "(native only)"


def read_profile(paths: list[Path]) -> dict | None:
    counts: dict[str, int] = {}
    frames_seen: dict[str, int] = {}
    for path in paths:
        if not path.exists():
            continue
        for line in path.read_text(errors="replace").splitlines():
            stack, _, n = line.rpartition(" ")
            if not n.isdigit():
                continue
            frames = stack.split(";")
            category = classify(frames)
            counts[category] = counts.get(category, 0) + int(n)
            if category not in ("idle", "GIL wait"):
                key = innermost_python(frames)
                frames_seen[key] = frames_seen.get(key, 0) + int(n)
    if not counts:
        return None
    busy = sum(n for c, n in counts.items() if c not in ("idle", "GIL wait"))
    return {
        "samples": sum(counts.values()),
        "on_cpu_samples": busy,
        "gil_wait_samples": counts.get("GIL wait", 0),
        "share": {
            c: round(n / busy, 3)
            for c, n in sorted(counts.items(), key=lambda x: -x[1])
            if c not in ("idle", "GIL wait")
        },
        "gil_wait_per_on_cpu": round(counts.get("GIL wait", 0) / max(1, busy), 3),
        "top_python_frames": {
            k: round(v / busy, 3) for k, v in sorted(frames_seen.items(), key=lambda x: -x[1])[:15]
        },
    }


# -- memory ---------------------------------------------------------------------------------------


def memory(pid: int, data: Path) -> dict:
    """smaps_rollup of one process, and its private memory by kind of mapping."""
    fields = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, value = line.split(":", 1)
        fields[key] = int(value.split()[0]) / 1024
    kinds = {
        "heap (anonymous)": 0.0,
        "generation files (mmap)": 0.0,
        "notes file": 0.0,
        "libraries and other files": 0.0,
    }
    mapped, deleted, name = set(), set(), ""
    corpus = str(data / "corpus")
    for line in Path(f"/proc/{pid}/smaps").read_text().splitlines():
        head = line.split(None, 5)
        if len(head) >= 5 and re.fullmatch(r"[0-9a-f]+-[0-9a-f]+", head[0]):
            name = head[5] if len(head) == 6 else ""
            if name.startswith(corpus):
                mapped.add(Path(name.split(" (deleted)")[0]).name)
                if name.endswith("(deleted)"):
                    deleted.add(Path(name.split(" (deleted)")[0]).name)
            continue
        if line.startswith(("Private_Clean:", "Private_Dirty:")):
            kb = int(line.split()[1]) / 1024
            if not name or name.startswith("["):
                kinds["heap (anonymous)"] += kb
            elif name.startswith(corpus):
                kinds["generation files (mmap)"] += kb
            elif "/notes/" in name:
                kinds["notes file"] += kb
            else:
                kinds["libraries and other files"] += kb
    return {
        "private_mb": round(fields["Private_Clean"] + fields["Private_Dirty"], 1),
        "private_dirty_mb": round(fields["Private_Dirty"], 1),
        "anonymous_mb": round(fields["Anonymous"], 1),
        "rss_mb": round(fields["Rss"], 1),
        "pss_mb": round(fields["Pss"], 1),
        "private_by_kind_mb": {k: round(v, 1) for k, v in kinds.items()},
        "generation_files_mapped": sorted(mapped),
        "deleted_files_mapped": sorted(deleted),
    }


def snapshot(server: Server, data: Path, label: str, probe: str | None = "probe") -> dict:
    time.sleep(2)  # idle: requests and warm threads done
    probes = server.probe(probe) if probe else {}
    out = {"label": label, "workers": {}}
    for pid in server.worker_pids():
        entry = memory(pid, data)
        if pid in probes:
            p = probes[pid]
            entry["probe"] = {
                k: p.get(k)
                for k in (
                    "sources_alive",
                    "sources_open",
                    "sqlite_connections",
                    "gc_objects",
                    "malloc",
                    "threads",
                    "gc_collected",
                    "malloc_before",
                    "malloc_trim",
                    "malloc_heaps_mb",
                    "malloc_heaps_error",
                )
            }
        out["workers"][pid] = entry
    return out


def rebuild(server: Server, source: str) -> dict:
    import httpx

    started = time.monotonic()
    with httpx.Client(base_url=server.url, timeout=60) as client:
        job = client.post("/v1/jobs", json={"source": source, "action": "rebuild"})
        job.raise_for_status()
        job_id = job.json()["id"]
        while True:
            state = client.get(f"/v1/jobs/{job_id}", params={"log_from": 10**6}).json()
            if state["state"] != "running" and state["state"] != "queued":
                break
            time.sleep(0.5)
        current = (server.env_data / "corpus" / source / "current").resolve().name
        deadline, seen = time.monotonic() + 60, 0
        while time.monotonic() < deadline and seen < 6:  # every worker serves it (any answers)
            gens = [
                s.get("generation")
                for s in client.get("/v1/sources").json()["sources"]
                if s["name"] == source
            ]
            seen = seen + 1 if gens and gens[0] == current else 0
            time.sleep(0.25)
    return {
        "job": job_id,
        "state": state["state"],
        "seconds": round(time.monotonic() - started, 1),
        "generation": current,
        "error": state.get("error"),
    }


# -- the run --------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0].replace("\n", " "))
    parser.add_argument(
        "--quick",
        action="store_true",
        help="4 s rounds, 32 connections only, no variants, no class rounds",
    )
    parser.add_argument("--seconds", type=float, default=8, help="per load round")
    parser.add_argument("--connections", default="16,32,64")
    parser.add_argument(
        "--workers",
        type=int,
        default=min(2, NCPU),
        help="chiezo serve --workers (default: serve's own default)",
    )
    parser.add_argument("--threads", type=int, default=4, help="CHIEZO_SERVE_THREADS")
    parser.add_argument(
        "--variants",
        default="1x4,1x1,2x4:MALLOC_ARENA_MAX=2",
        help="WxT[:NAME=VALUE..]: other worker × thread settings (and server "
        "environment), mixed load at the middle connection count ('' for none)",
    )
    parser.add_argument("--per-class", type=int, default=40, help="requests per class")
    parser.add_argument("--rebuilds", type=int, default=3)
    parser.add_argument("--rebuild-source", default="jawiki")
    parser.add_argument(
        "--switch-seconds",
        type=float,
        default=5,
        help="load round after each switch, so the new generation is used",
    )
    parser.add_argument(
        "--control-idle",
        type=float,
        default=0,
        help="experiment: stay idle this long instead of each rebuild",
    )
    parser.add_argument(
        "--trim-after-switch",
        action="store_true",
        help="experiment: malloc_trim(0) in each worker after each switch",
    )
    parser.add_argument("--no-geonames", action="store_true")
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument(
        "--server-env",
        action="append",
        default=[],
        help="NAME=VALUE for the server, e.g. MALLOC_ARENA_MAX=2",
    )
    parser.add_argument("--data", type=Path, help="reuse this data directory (built if empty)")
    parser.add_argument(
        "--phases",
        default="load,inproc,memory,variants",
        help="which of load, inproc, memory, variants to run",
    )
    parser.add_argument("--keep", action="store_true", help="keep the scratch directory")
    parser.add_argument(
        "--max-wait",
        type=float,
        default=1800,
        help="seconds to wait for running pytest before measuring anyway",
    )
    # the in-process run (this script started by itself)
    parser.add_argument("--inproc", help=argparse.SUPPRESS)
    parser.add_argument("--inproc-threads", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    parser.add_argument("--detail", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sql-subset", type=int, default=40, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inproc:
        return inproc_main(args)
    if not shutil.which("wrk"):
        sys.exit("wrk is not installed: run `make bench-serve` (installs it from Debian)")
    if args.quick:
        args.seconds, args.connections, args.variants = 4, "32", ""
        args.switch_seconds = 3
    connections = [int(c) for c in args.connections.split(",") if c]
    middle = connections[len(connections) // 2]
    out = console()
    scratch = Path(tempfile.mkdtemp(prefix="chiezo-load-"))
    data = args.data or scratch / "data"
    env = {**os.environ, "CHIEZO_DATA": str(data)}
    env.pop("CHIEZO_SERVE_THREADS", None)
    extra_env = dict(item.split("=", 1) for item in args.server_env)
    report: dict = {
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "machine": {"cpus": NCPU, "loadavg_at_start": [round(x, 2) for x in os.getloadavg()]},
        "settings": {
            k: v
            for k, v in vars(args).items()
            if k not in ("inproc", "inproc_threads", "out", "detail", "data")
        },
        "quiet": {},
    }
    phases = set(args.phases.split(","))
    server = None
    try:
        if not (data / "corpus").exists():
            out.print(
                "[bold]building[/] guide, chiezo-docs, jawiki"
                + ("" if args.no_geonames else ", geonames")
            )
            report["data"] = prepare(data, env, not args.no_geonames)
        server = Server(env, scratch, args.workers, args.threads, extra_env)
        server.env_data = data
        if not (data / "notes").exists() or args.data is None:
            import httpx

            with httpx.Client(base_url=server.url, timeout=30) as client:
                for i in range(300):
                    client.post(
                        "/v1/notes",
                        json={"text": f"bench note {i}: 会議 {i} の記録", "tags": ["bench"]},
                    )
        reqs = requests_for(data, random.Random(3), args.per_class)
        reqs, report["requests"] = check_requests(server.url, reqs)
        random.Random(5).shuffle(reqs)
        out.print(
            f"{len(reqs)} requests: {report['requests']['by_class']}, "
            f"{len(report['requests']['dropped'])} dropped, "
            f"{report['requests']['no_hits']} without hits"
        )
        run = Run(args, out, scratch, data, env, extra_env, reqs, report, connections, middle)
        report["rounds"], report["memory"] = {}, {}
        if "load" in phases:
            phase_load(run, server)
        if "inproc" in phases:
            phase_inproc(run, server)
        if "memory" in phases:
            phase_memory(run, server)
        server.stop()
        server = None
        if "variants" in phases:
            phase_variants(run)
        report["where"] = where_time_goes(report, middle)
        report["machine"]["loadavg_at_end"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        if server is not None:
            server.stop()
        if args.keep:
            print(f"kept {scratch}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    path = HERE / "results" / f"serve_load-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(report, ensure_ascii=False, indent=2, default=str))
    show(report, out)
    out.print(f"wrote {path}")


@dataclass
class Run:
    args: argparse.Namespace
    out: object
    scratch: Path
    data: Path
    env: dict
    extra_env: dict
    reqs: list[dict]
    report: dict
    connections: list[int]
    middle: int

    @property
    def mixed(self) -> list[str]:
        return [r["path"] for r in self.reqs]


def phase_load(run: Run, server: Server) -> None:
    """1. wrk on the server: /healthz and the mixed searches at each connection count, each
    class alone at the middle one, and a round sampled by py-spy."""
    args, out, rounds = run.args, run.out, run.report["rounds"]
    run.report["quiet"]["load"] = quiet = wait_quiet(args.max_wait)
    out.print(
        f"[bold]load[/] {server.workers} workers × {server.threads} threads, "
        f"loadavg {quiet['loadavg']}"
    )
    run_wrk(server, run.mixed, 3, run.middle, run.scratch)  # warm-up: every page, every thread
    run.report["memory"]["after_warm_up"] = snapshot(server, run.data, "after warm-up", probe=None)
    for c in run.connections:
        for name, paths in (("healthz", ["/healthz"]), ("mixed", run.mixed)):
            rounds[f"{name}@{c}"] = r = run_wrk(server, paths, args.seconds, c, run.scratch)
            out.print(
                f"  {name}@{c}: {r['requests_per_s']:.0f} req/s, p50 {r['p50_ms']} ms,"
                f" p99 {r['p99_ms']} ms, {r['server_cpu_ms_per_request']} CPU ms/req,"
                f" other load {r['cpu']['other_cores_busy']} cores"
            )
    if not args.quick:
        for cls in CLASSES:
            paths = [r["path"] for r in run.reqs if r["cls"] == cls]
            if paths:
                rounds[f"{cls}@{run.middle}"] = run_wrk(
                    server, paths, max(3, args.seconds / 2), run.middle, run.scratch
                )
    if not args.no_profile and py_spy_path():
        spy = py_spy(server.worker_pids(), args.seconds - 1, run.scratch / "spy-server")
        rounds[f"mixed@{run.middle} (py-spy)"] = r = run_wrk(
            server, run.mixed, args.seconds, run.middle, run.scratch
        )
        spy.wait()
        r["profile"] = read_profile(spy.outputs)
        # py-spy --native at 97 Hz took 1.53 cores (16 req/s): where the time goes, not how long
        r["latencies_comparable"] = False


def phase_inproc(run: Run, server: Server) -> None:
    """2. the same searches without the server: sequentially (stages, SQL, py-spy), then as
    many processes × threads as the server answers with."""
    args = run.args
    run.report["quiet"]["inproc"] = wait_quiet(args.max_wait)
    run.out.print("[bold]in-process[/] Context.search, same requests")
    base = run.report["inproc"] = {}
    base["sequential"] = inproc(
        run.env,
        run.scratch,
        run.reqs,
        threads=1,
        processes=1,
        seconds=args.seconds,
        detail=True,
        profile=0 if args.no_profile else args.seconds - 1,
    )
    shapes = {(server.workers, server.threads), (1, server.threads)}
    for processes, threads in sorted(shapes, reverse=True):
        base[f"{processes}x{threads}"] = inproc(
            run.env,
            run.scratch,
            run.reqs,
            threads=threads,
            processes=processes,
            seconds=args.seconds,
        )


def phase_memory(run: Run, server: Server) -> None:
    """4. each worker's memory, idle, before the switches and after each rebuild job and a
    short load on the new generation; then after gc.collect() and after malloc_trim(0)."""
    args, out, data = run.args, run.out, run.data
    run.report["quiet"]["memory"] = wait_quiet(args.max_wait)
    out.print(f"[bold]memory[/] {args.rebuilds} rebuilds of {args.rebuild_source}")
    if "load" not in run.report["quiet"]:  # the warm-up the load phase would have done
        for c in run.connections:
            run_wrk(server, run.mixed, args.seconds, c, run.scratch)
    memory_report = run.report["memory"]
    series = memory_report["series"] = [snapshot(server, data, "before switches")]
    memory_report["rebuilds"] = []
    for i in range(args.rebuilds):
        if args.control_idle:  # the control: as long idle as a rebuild, no new generation
            time.sleep(args.control_idle)
            job = {"state": "idle (control)", "seconds": args.control_idle}
        else:
            job = rebuild(server, args.rebuild_source)
        memory_report["rebuilds"].append(job)
        series.append(snapshot(server, data, f"switch {i + 1}, before load", probe=None))
        if args.trim_after_switch:  # what a malloc_trim(0) after each switch would keep
            server.probe("trim")
        run_wrk(server, run.mixed, args.switch_seconds, 16, run.scratch)
        series.append(snapshot(server, data, f"switch {i + 1}, after load"))
        w = series[-1]["workers"]
        out.print(
            f"  rebuild {i + 1}: {job['state']} in {job['seconds']} s → "
            + ", ".join(f"{pid}: {m['private_mb']} MB" for pid, m in w.items())
        )
    # what the growth is: garbage in reference cycles, or memory malloc keeps
    series.append(snapshot(server, data, "then gc.collect()", probe="collect"))
    series.append(snapshot(server, data, "then malloc_trim(0)", probe="trim"))
    memory_report["verdict"] = verdict(series)


def phase_variants(run: Run) -> None:
    """3b. other workers × threads settings: /healthz and the mixed load at the middle count."""
    variants = [v for v in run.args.variants.split(",") if v]
    if not variants:
        return
    run.report["quiet"]["variants"] = wait_quiet(run.args.max_wait)
    for variant in variants:
        shape, *settings = variant.split(":")
        w, t = (int(x) for x in shape.split("x"))
        other = Server(
            run.env, run.scratch, w, t, {**run.extra_env, **dict(x.split("=", 1) for x in settings)}
        )
        try:
            run_wrk(other, run.mixed, 3, run.middle, run.scratch)  # warm-up
            for name, paths in (("healthz", ["/healthz"]), ("mixed", run.mixed)):
                key = f"{name}@{run.middle} ({variant})"
                key += (
                    f" #{sum(k.startswith(key) for k in run.report['rounds']) + 1}"
                    if key in run.report["rounds"]
                    else ""
                )
                run.report["rounds"][key] = run_wrk(
                    other, paths, run.args.seconds, run.middle, run.scratch
                )
        finally:
            other.stop()


def where_time_goes(report: dict, middle: int) -> dict:
    """Per mixed request, CPU milliseconds: the server's, what /healthz costs it (HTTP and
    framework alone), the same search in-process by stage, and of it the SQL alone."""
    rounds, base = report.get("rounds", {}), report.get("inproc", {})
    mixed, healthz = rounds.get(f"mixed@{middle}"), rounds.get(f"healthz@{middle}")
    seq = base.get("sequential")
    if not (mixed and healthz and seq):
        return {}
    counts = report["requests"]["by_class"]
    total = sum(counts[c] for c in seq["stages_ms"])

    def mean(stage: str) -> float:
        return sum(seq["stages_ms"][c][stage] * counts[c] for c in seq["stages_ms"]) / total

    sql = seq["sql"]
    sql_ms = sum(sql["by_class"][c]["sql_ms"] * counts[c] for c in sql["by_class"]) / sum(
        counts[c] for c in sql["by_class"]
    )
    search_subset_ms = sum(
        sql["by_class"][c]["search_ms"] * counts[c] for c in sql["by_class"]
    ) / sum(counts[c] for c in sql["by_class"])
    gc2 = mixed["gc"]["2"]
    out = {
        "connections": middle,
        "server_cpu_ms": mixed["server_cpu_ms_per_request"],
        "http_and_framework_cpu_ms (healthz)": healthz["server_cpu_ms_per_request"],
        "inproc_cpu_ms (sequential)": seq["cpu_ms_per_request"],
        "inproc_wall_ms": {k: round(mean(k), 3) for k in ("model", "search", "to_dict", "json")},
        "sql_alone_ms (replayed, subset)": round(sql_ms, 3),
        "search_ms (same subset)": round(search_subset_ms, 3),
        "sql_share_of_search": round(sql_ms / search_subset_ms, 3) if search_subset_ms else None,
        "gen2_gc_ms_per_request": round(1000 * gc2["seconds"] / max(1, mixed["requests"]), 3),
        "all_gc_ms_per_request": round(
            1000 * sum(g["seconds"] for g in mixed["gc"].values()) / max(1, mixed["requests"]), 3
        ),
    }
    out["server_beyond_search_and_healthz_ms"] = round(
        out["server_cpu_ms"]
        - out["http_and_framework_cpu_ms (healthz)"]
        - out["inproc_cpu_ms (sequential)"],
        2,
    )
    out["cpu_bound_ceiling_req_per_s"] = round(NCPU * 1000 / out["server_cpu_ms"], 1)
    shape = f"{report['settings']['workers']}x{report['settings']['threads']}"
    if shape in base:
        out["inproc_req_per_s (same processes × threads)"] = base[shape]["requests_per_s"]
        out["server_req_per_s"] = mixed["requests_per_s"]
    return out


def verdict(series: list[dict]) -> dict:
    """Each worker's private memory: the last snapshot after a load (before the trim) against
    the snapshot before the first switch."""
    first = series[0]["workers"]
    loaded = [s for s in series if s["label"].endswith("after load")]
    if not loaded:
        return {}
    last = loaded[-1]["workers"]
    out = {}
    for pid in first:
        if pid in last:
            out[pid] = {}
            for key in ("private_mb", "anonymous_mb"):
                a, b = first[pid][key], last[pid][key]
                out[pid][key] = {
                    "first": a,
                    "last": b,
                    "change": round(b / a - 1, 3),
                    "within_10_percent": abs(b / a - 1) <= 0.10,
                }
    return out


def show(report: dict, out) -> None:
    from rich.table import Table

    settings = report["settings"]
    quiet = ", ".join(
        f"{k} {v['loadavg']}" + (" (pytest running)" if v["pytest_running"] else "")
        for k, v in report["quiet"].items()
    )
    out.print(f"load average at the start of each phase: {quiet}")
    table = Table(
        title=f"wrk over loopback, {settings['workers']} workers × "
        f"{settings['threads']} threads unless named; {settings['seconds']:g} s a round"
    )
    for col in (
        "round",
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "max ms",
        "errors",
        "server CPU ms/req",
        "gen2 GCs (s)",
        "others' load (cores)",
    ):
        table.add_column(col, justify="right")
    for name, r in report["rounds"].items():
        gc2 = r.get("gc", {}).get("2", {})
        table.add_row(
            name,
            f"{r['requests_per_s']:,.0f}",
            str(r["p50_ms"]),
            str(r["p90_ms"]),
            str(r["p99_ms"]),
            str(r["max_ms"]),
            str(r["errors"]),
            str(r["server_cpu_ms_per_request"]),
            f"{gc2.get('collections', '')} ({gc2.get('seconds', '')})",
            str(r["cpu"]["other_cores_busy"]),
        )
    out.print(table)
    base = report.get("inproc", {})
    if base:
        table = Table(
            title="the same requests in-process (Context.search, no HTTP): processes × threads"
        )
        for col in ("run", "req/s", "p50 ms", "p99 ms", "CPU ms/req", "others' load (cores)"):
            table.add_column(col, justify="right")
        for name, r in base.items():
            table.add_row(
                name,
                f"{r['requests_per_s']:,.0f}",
                str(r["p50_ms"]),
                str(r["p99_ms"]),
                str(r["cpu_ms_per_request"]),
                str(r["cpu"]["other_cores_busy"]),
            )
        out.print(table)
    seq = base.get("sequential", {})
    if "stages_ms" in seq:
        middle = report.get("where", {}).get("connections")
        table = Table(
            title="per request, in-process, one at a time (mean ms); SQL alone: the "
            "statements a search ran, replayed"
        )
        for col in (
            "class",
            "SearchRequest",
            "search",
            "to_dict",
            "JSON",
            "SQL alone / search",
            f"server p50 @{middle}",
            f"server p99 @{middle}",
        ):
            table.add_column(col, justify="right")
        for cls, st in seq["stages_ms"].items():
            sql = seq["sql"]["by_class"].get(cls, {})
            served = report["rounds"].get(f"{cls}@{middle}", {})
            table.add_row(
                cls,
                str(st["model"]),
                str(st["search"]),
                str(st["to_dict"]),
                str(st["json"]),
                f"{sql.get('sql_ms', '')} / {sql.get('search_ms', '')}",
                str(served.get("p50_ms", "")),
                str(served.get("p99_ms", "")),
            )
        out.print(table)
        scope = seq.get("words_and_questions_by_scope_ms", {})
        out.print(
            "word and question searches, mean ms: "
            + "; ".join(
                f"{k}: search {v['search']}, to_dict {v['to_dict']}" for k, v in scope.items()
            )
        )
    if report.get("where"):
        table = Table(title="where a mixed request's CPU time goes (ms)")
        table.add_column("", justify="left")
        table.add_column("value", justify="right")
        for key, value in report["where"].items():
            table.add_row(key, json.dumps(value) if isinstance(value, dict) else str(value))
        out.print(table)
    profiles = [(k, r.get("profile")) for k, r in report["rounds"].items()]
    for label, profile in profiles + [("in-process, one at a time", seq.get("profile"))]:
        if profile:
            shares = ", ".join(f"{c} {v:.0%}" for c, v in profile["share"].items() if v >= 0.01)
            out.print(
                f"[bold]py-spy {label}[/] ({profile['on_cpu_samples']} on-CPU samples): "
                f"{shares}; threads waiting for the GIL per on-CPU sample "
                f"{profile['gil_wait_per_on_cpu']}"
            )
            top = ", ".join(
                f"{k} {v:.0%}" for k, v in list(profile["top_python_frames"].items())[:8]
            )
            out.print(f"   innermost Python frames: {top}")
    mem = report.get("memory", {})
    if mem.get("series"):
        table = Table(
            title="each worker's memory (MB), idle: private = Private_Clean + "
            "Private_Dirty; heap = private anonymous"
        )
        for col in (
            "when",
            "worker",
            "private",
            "heap",
            "gen. files",
            "Rss",
            "Pss",
            "Sources",
            "sqlite conns",
            "malloc in use / free",
            "malloc heaps",
        ):
            table.add_column(col, justify="right")
        for snap in mem["series"]:
            for pid, m in snap["workers"].items():
                probe = m.get("probe") or {}
                malloc = probe.get("malloc") or {}
                kinds = m["private_by_kind_mb"]
                table.add_row(
                    snap["label"],
                    str(pid),
                    str(m["private_mb"]),
                    str(kinds["heap (anonymous)"]),
                    str(kinds["generation files (mmap)"]),
                    str(m["rss_mb"]),
                    str(m["pss_mb"]),
                    str(len(probe.get("sources_alive") or [])) if probe else "",
                    str(probe.get("sqlite_connections", "")),
                    f"{malloc.get('in_use_mb', '')} / {malloc.get('free_mb', '')}",
                    str(len(probe.get("malloc_heaps_mb") or [])) if probe else "",
                )
        out.print(table)
        for pid, v in mem.get("verdict", {}).items():
            out.print(
                f"worker {pid}: "
                + "; ".join(
                    f"{k} {x['first']} → {x['last']} ({x['change']:+.1%}, "
                    f"{'within' if x['within_10_percent'] else 'NOT within'} ±10%)"
                    for k, x in v.items()
                )
            )


if __name__ == "__main__":
    main()
