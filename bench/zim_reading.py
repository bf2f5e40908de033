"""A ZIM build's memory and time as its articles are read (docs/design.md §35.17): in entry-id
order with libzim's default cluster cache (before) against in cluster order with a 1 MiB cache
(after, ``ingest/zimdirectory.py``) — and, to show why the order matters, id order with the
same 1 MiB cache. Same input files, one run, each build in a fresh process.

    python bench/zim_reading.py                   # 16,000 and 64,000 generated articles
    python bench/zim_reading.py --sizes 4000 16000 64000 256000

The input is tests/test_build_memory.py's ZIM case (paths Article_1, Article_10, … run across
the clusters the writer filled in order, as a real ZIM's paths do). Reports each build's peak
anonymous memory (its whole process, sampled every 5 ms), the reading phase's seconds and the
whole build's, and the growth per 1,000 articles between the sizes. SQLite's page cache, bounded
on its own (64 MiB by default), is set to 1 MiB (``--page-cache-mib``) so that its filling does
not pass for what the reading order changes. Prints a table, writes
JSON to bench/results/zim_reading.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "zim_reading.json"

MODES = {
    "before: id order, default cache": (
        "import chiezo.ingest.zim as z; z.cluster_order = lambda *a: None"
    ),
    "id order, 1 MiB cache": (
        "import chiezo.ingest.zim as z, libzim.reader as r; z.cluster_order = lambda *a: None;"
        " r.set_cluster_cache_max_size(z.CLUSTER_CACHE)"
    ),
    "after: cluster order, 1 MiB cache": "",
}

BUILD = r"""
import sys, threading, time
from pathlib import Path
{patch}
from chiezo.core.config import Settings
from chiezo.core.progress import NullProgress
from chiezo.ops.context import Context

def anon():
    for line in open("/proc/self/smaps_rollup"):
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) * 1024

class Phases(NullProgress):
    def __init__(self):
        super().__init__(); self.at = {{}}
    def phase(self, name, total=None, unit="docs"):
        self.at[name] = time.perf_counter(); super().phase(name, total, unit)

peak, done = [0], [False]
def watch():
    while not done[0]:
        peak[0] = max(peak[0], anon()); time.sleep(0.005)
threading.Thread(target=watch, daemon=True).start()
zim, data = Path(sys.argv[1]), Path(sys.argv[2])
progress, started = Phases(), time.perf_counter()
Context(Settings(data_dir=data)).ingest("zim", zim, "bench", embed=False, progress=progress)
ended = time.perf_counter(); done[0] = True
after = [t for name, t in progress.at.items() if t > progress.at["reading"]]
print(peak[0], min(after) - progress.at["reading"], ended - started)
"""


def make(folder: Path, n: int) -> Path:
    sys.path.insert(0, str(HERE.parent / "tests"))
    from test_build_memory import zim_input

    return zim_input(folder, n)


def build(zim: Path, patch: str, work: Path, page_cache_mib: int) -> dict:
    data = Path(tempfile.mkdtemp(dir=work))
    out = subprocess.run(
        [sys.executable, "-c", BUILD.format(patch=patch), str(zim), str(data)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "CHIEZO_BUILD_CACHE_MIB": str(page_cache_mib)},
    ).stdout.split()
    peak, reading, total = int(out[-3]), float(out[-2]), float(out[-1])
    return {"peak_mib": peak / 2**20, "reading_s": reading, "build_s": total}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16_000, 64_000])
    parser.add_argument("--page-cache-mib", type=int, default=1)
    args = parser.parse_args()
    console = Console(width=150)
    rows: dict[str, dict[int, dict]] = {mode: {} for mode in MODES}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for n in args.sizes:
            folder = work / f"in-{n}"
            folder.mkdir()
            console.log(f"writing a ZIM of {n:,} articles")
            zim = make(folder, n)
            for mode, patch in MODES.items():
                started = time.perf_counter()
                rows[mode][n] = build(zim, patch, work, args.page_cache_mib)
                console.log(f"{n:,} · {mode}: {time.perf_counter() - started:.1f} s")
    table = Table(title="ZIM build: peak memory and time by reading order")
    table.add_column("reading")
    for n in args.sizes:
        table.add_column(f"{n:,}: peak MiB", justify="right")
        table.add_column(f"{n:,}: reading s", justify="right")
    table.add_column("KB / 1,000 more articles", justify="right")
    for mode, by_size in rows.items():
        low, high = args.sizes[0], args.sizes[-1]
        slope = (by_size[high]["peak_mib"] - by_size[low]["peak_mib"]) * 1024 / (high - low)
        cells = [f"{by_size[n][k]:.1f}" for n in args.sizes for k in ("peak_mib", "reading_s")]
        table.add_row(mode, *cells, f"{slope * 1000:.0f}")
        by_size["kb_per_1000_articles"] = slope * 1000
    console.print(table)
    RESULTS.parent.mkdir(exist_ok=True)
    summary = {"sizes": args.sizes, "page_cache_mib": args.page_cache_mib, "modes": rows}
    RESULTS.write_text(json.dumps(summary, indent=1, default=str))
    console.print(f"written {RESULTS}")


if __name__ == "__main__":
    main()
