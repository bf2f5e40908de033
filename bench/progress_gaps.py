"""How long does a build's progress go silent? Per phase: its length, the longest gap between
any two progress updates, and the longest gap between updates that moved the count.

    python bench/progress_gaps.py [DUMP] [--embed use-m] [--out FILE]

Builds a Wikipedia source from DUMP (default: the jawiki excerpt in ../shared) through
``Context.ingest`` — the path ``chiezo ingest … --embed`` and a rebuild job take — with a
Progress that timestamps every call, then prints a table and writes JSON. Only the Progress
protocol is used, so the same script measures an older checkout (run it with
``PYTHONPATH=<old>/src``) for a before/after comparison.

Issue 19's target: no phase silent for more than 2 s; no count above its total. Measured on
2 cores (jawiki excerpt, 189 articles, use-m; the machine shared with other work): the longest
silent gap was 30.0 s before ("writing vectors and index", one spinner) and 1.1 s after.
"""

from __future__ import annotations

import argparse
import collections
import json
import tempfile
import threading
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

import chiezo
from chiezo.core.config import Settings
from chiezo.ops import building
from chiezo.ops.context import Context

HERE = Path(__file__).resolve().parent
DUMP = HERE.parents[1] / "shared" / "data" / "wikipedia" / "jawiki-20230501-excerpt.xml.bz2"


class Recorder:
    """Every Progress call as (seconds since start, call, phase, done, total)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.start = time.monotonic()
        self.events: list[tuple[float, str, str, int, int | None]] = []
        self.phase_name, self.done, self.total = "(before any phase)", 0, None
        self.warnings: list[str] = []

    def _note(self, call: str) -> None:
        t = time.monotonic() - self.start
        self.events.append((t, call, self.phase_name, self.done, self.total))

    def phase(self, name: str, total: int | None = None, unit: str = "docs") -> None:
        with self.lock:
            self.phase_name, self.done, self.total = name, 0, total
            self._note("phase")

    def advance(self, n: int = 1) -> None:
        with self.lock:
            self.done += n
            self._note("advance")

    def retotal(self, total: int) -> None:
        with self.lock:
            self.total = total
            self._note("retotal")

    def warn(self, message: str) -> None:
        with self.lock:
            self.warnings.append(message)

    def close(self) -> None:
        with self.lock:
            self._note("close")


def phases(events, end: float) -> list[dict]:
    """Per phase: seconds, longest gap between any updates, between count changes, and
    whether the count ever passed the total."""
    out: list[dict] = []
    for t, call, name, done, total in events:
        if call == "phase" or not out:
            out.append(
                {
                    "phase": name,
                    "start": t,
                    "last_any": t,
                    "last_move": t,
                    "gap_any": 0.0,
                    "gap_move": 0.0,
                    "count": 0,
                    "total": total,
                    "over": False,
                }
            )
        p = out[-1]
        p["gap_any"] = max(p["gap_any"], t - p["last_any"])
        p["last_any"] = t
        if call == "advance" and done != p["count"] or call == "phase":
            p["gap_move"] = max(p["gap_move"], t - p["last_move"])
            p["last_move"] = t
        p["count"], p["total"] = done, total
        p["over"] = p["over"] or (total is not None and done > total)
    for i, p in enumerate(out):  # the silence before the next phase (or the end) counts too
        stop = out[i + 1]["start"] if i + 1 < len(out) else end
        p["seconds"] = stop - p["start"]
        p["gap_any"] = max(p["gap_any"], stop - p["last_any"])
        p["gap_move"] = max(p["gap_move"], stop - p["last_move"])
        for key in ("start", "last_any", "last_move"):
            del p[key]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dump", nargs="?", type=Path, default=DUMP)
    parser.add_argument("--embed", default="use-m", help="model to embed with ('' for none)")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    parser.add_argument(
        "--out", type=Path, default=HERE / "results" / f"progress_gaps-{stamp}.json"
    )
    args = parser.parse_args()
    console = Console(width=140)
    recorder = Recorder()
    with tempfile.TemporaryDirectory(prefix="progress-gaps-") as tmp:
        service = Context(Settings(data_dir=Path(tmp)))
        report = building.ingest(
            service, "wikipedia", args.dump, "jawiki", progress=recorder, embed=args.embed or False
        )
        end = time.monotonic() - recorder.start
    rows = phases(recorder.events, end)
    table = Table(
        title=f"progress gaps, {args.dump.name} (chiezo from {Path(chiezo.__file__).parent})"
    )
    for column in (
        "phase",
        "seconds",
        "updates",
        "longest gap",
        "longest still count",
        "count/total",
    ):
        table.add_column(column, justify="left" if column == "phase" else "right")
    counts = collections.Counter(event[2] for event in recorder.events)
    for p in rows:
        total = "?" if p["total"] is None else f"{p['total']:,}"
        mark = " [red]over[/]" if p["over"] else ""
        table.add_row(
            p["phase"],
            f"{p['seconds']:.1f}",
            f"{counts.get(p['phase'], 0):,}",
            f"{p['gap_any']:.1f}",
            f"{p['gap_move']:.1f}",
            f"{p['count']:,}/{total}{mark}",
        )
    console.print(table)
    worst = max(rows, key=lambda p: p["gap_any"])
    console.print(
        f"longest silent gap: {worst['gap_any']:.1f} s in {worst['phase']!r}; "
        f"total {end:.1f} s; {report.docs:,} docs"
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "dump": str(args.dump),
                "seconds": end,
                "phases": rows,
                "chiezo": str(Path(chiezo.__file__).parent),
            },
            ensure_ascii=False,
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
