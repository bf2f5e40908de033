"""One search request, walked: the Chiezo modules it passes through from the operation's entry
to its result, and how often it climbs back up a floor or returns to the switchboard.

    python bench/request_walk.py                                  # the chiezo on PYTHONPATH
    PYTHONPATH=/work/baseline/src python bench/request_walk.py --out /tmp/walk_before.json

The tree is the one ``import chiezo`` finds (PYTHONPATH first): the same script walks the code
before and after a refactor. It builds a docs source from the contract templates of tests/data
(``chiezo ingest docs``, the CLI of that tree), then sends one request as ``chiezo search 有給休暇
-s contracts --tag HR`` does: ``BINDINGS["search"].handle(ctx, SearchRequest)``, where ctx is a
``chiezo.ops.context.Context`` where the tree has one, else a ``chiezo.ops.service.Service``.

A first request of the same shape (another word: the traced one's query caches stay cold) runs
untraced, so that the walk holds no import-time loading; the modules imported while tracing are
counted and should be none. The walk: every ``call`` event (sys.setprofile, this thread) into a
frame whose file is in the chiezo package, as its module's name; consecutive repeats collapse
into *stays*. Reported:

* stays, distinct modules, the first 10 stays;
* climbs back up: calls whose nearest Chiezo caller sits on a lower floor than the callee
  (floors bottom to top: core, store, ingest, search, answer, ops, surfaces, cluster, as in
  docs/architecture.md) — a callback handed down and called from below;
* switchboard re-entries: stays in the switchboard module (chiezo.ops.service before,
  chiezo.ops.context after) after its first, i.e. times control came back to it by a call from
  another module; and the same counted with returns too (control back in it when a callee
  returns), as ``switchboard_reentries_with_returns``.

Prints a table, writes JSON (``--out``, default bench/results/request_walk.json).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

from rich.console import Console
from rich.table import Table

import chiezo
from chiezo.core.config import Settings
from chiezo.ops.registry import BINDINGS
from chiezo.ops.requests import SearchRequest

HERE = Path(__file__).resolve().parent
DOCS = HERE.parent / "tests" / "data" / "docs" / "markdown" / "h13-contract-templates"
PACKAGE = str(Path(chiezo.__file__).resolve().parent) + "/"
FLOORS = ("core", "store", "ingest", "search", "answer", "ops", "surfaces", "cluster")
SWITCHBOARDS = ("chiezo.ops.service", "chiezo.ops.context")
console = Console(width=140)


def floor(module: str) -> int | None:
    """The floor of ``chiezo.<floor>.…``; None for the package's own top-level modules."""
    parts = module.split(".")
    return FLOORS.index(parts[1]) if len(parts) > 2 and parts[1] in FLOORS else None


def switchboard(settings: Settings) -> tuple[Any, str]:
    """What the handlers take: the Context after the refactor, the Service before it."""
    try:
        from chiezo.ops.context import Context
    except ModuleNotFoundError as exc:
        if exc.name != "chiezo.ops.context":
            raise
        from chiezo.ops.service import Service

        return Service(settings), "chiezo.ops.service.Service"
    return Context(settings), "chiezo.ops.context.Context"


def build(data: Path, name: str) -> None:
    """The docs source, built by the CLI of the tree under walk (the same in both trees)."""
    command = [sys.executable, "-m", "chiezo", "--data", str(data), "ingest", "docs", str(DOCS)]
    subprocess.run([*command, "--name", name], check=True, capture_output=True)


class Walk:
    """A profile function: the Chiezo module of every call, and where control goes back."""

    def __init__(self) -> None:
        self.calls: list[str] = []  # module entered, per call event
        self.control: list[str] = []  # module holding control after each call and return
        self.climbs: Counter[tuple[str, str]] = Counter()
        self._modules: dict[CodeType, str | None] = {}

    def module(self, frame: FrameType | None) -> str | None:
        if frame is None:
            return None
        code = frame.f_code
        if code not in self._modules:  # the profile function runs on every call: kept cheap
            inside = code.co_filename.startswith(PACKAGE)
            self._modules[code] = frame.f_globals.get("__name__") if inside else None
        return self._modules[code]

    def nearest(self, frame: FrameType | None) -> str | None:
        """The module of the nearest Chiezo frame at or above ``frame``."""
        while frame is not None:
            found = self.module(frame)
            if found:
                return found
            frame = frame.f_back
        return None

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event == "call":
            module = self.module(frame)
            if module is None:
                return
            self.calls.append(module)
            self.control.append(module)
            caller = self.nearest(frame.f_back)
            low, high = floor(caller or ""), floor(module)
            if low is not None and high is not None and high > low:
                self.climbs[(caller, module)] += 1
        elif event == "return" and self.module(frame):
            back = self.nearest(frame.f_back)
            if back:
                self.control.append(back)


def stays(modules: Iterable[str]) -> list[str]:
    """Consecutive repeats collapsed: a, a, b, a → a, b, a."""
    out: list[str] = []
    for module in modules:
        if not out or out[-1] != module:
            out.append(module)
    return out


def reentries(walked: list[str]) -> int:
    """Stays in a switchboard module after its first one."""
    return max(0, sum(1 for m in walked if m in SWITCHBOARDS) - 1)


def walk(query: str, warm_query: str, source: str, tag: str | None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        build(data, source)
        ctx, entry = switchboard(Settings(data_dir=data, query_timeout=10))
        binding = BINDINGS["search"]
        conditions = {"source": source, "tag": [tag] if tag else None}
        binding.handle(ctx, SearchRequest.of(query=warm_query, **conditions))  # imports, opens
        request = SearchRequest.of(query=query, **conditions)
        loaded = set(sys.modules)
        tracer = Walk()
        sys.setprofile(tracer)
        try:
            result = binding.handle(ctx, request)
        finally:
            sys.setprofile(None)
        imported = sorted(set(sys.modules) - loaded)
    walked, control = stays(tracer.calls), stays(tracer.control)
    return {
        "chiezo": str(Path(chiezo.__file__).parent),
        "entry": f'BINDINGS["search"].handle({entry}(settings), SearchRequest)',
        "request": {"query": query, **conditions},
        "warm_up_query": warm_query,
        "result": {
            "total": result.total,
            "retrieval": result.retrieval,
            "hits": [h.title for h in result.hits],
        },
        "imported_while_tracing": imported,
        "calls": len(tracer.calls),
        "stays": len(walked),
        "distinct_modules": len(set(walked)),
        "first_10_stays": walked[:10],
        "climbs_up": sum(tracer.climbs.values()),
        "climbs_by_pair": {f"{a} -> {b}": n for (a, b), n in tracer.climbs.most_common()},
        "switchboard_reentries": reentries(walked),
        "switchboard_reentries_with_returns": reentries(control),
        "calls_by_module": dict(Counter(tracer.calls).most_common()),
        "all_stays": walked,
    }


def show(report: dict[str, Any]) -> None:
    table = Table(title=f"one search request, walked ({report['chiezo']})")
    table.add_column("measure")
    table.add_column("value", overflow="fold")
    for key in ("entry", "request", "result", "imported_while_tracing", "calls", "stays",
                "distinct_modules", "climbs_up", "switchboard_reentries",
                "switchboard_reentries_with_returns"):  # fmt: skip
        value = report[key]
        table.add_row(
            key, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        )
    for i, module in enumerate(report["first_10_stays"], 1):
        table.add_row(f"stay {i}", module)
    for pair, n in report["climbs_by_pair"].items():
        table.add_row("climb", f"{pair}: {n}")
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", default="有給休暇")
    parser.add_argument("--warm-query", default="就業規則", help="the untraced first request")
    parser.add_argument("--source", default="contracts")
    parser.add_argument("--tag", default="HR", help="a tag condition; '' for none")
    parser.add_argument("--out", type=Path, default=HERE / "results" / "request_walk.json")
    args = parser.parse_args()
    report = walk(args.query, args.warm_query, args.source, args.tag or None)
    show(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, ensure_ascii=False, indent=2))
    console.print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
