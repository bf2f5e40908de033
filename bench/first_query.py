"""The first query after a new generation switches in: warmed in the background, or cold.

    python bench/first_query.py                 # 3 rounds of every case (about 5 minutes)
    python bench/first_query.py --repeats 5 --delays 0,1,3

Builds (once, under bench/work/first_query) the jawiki excerpt from ../shared/data with use-m
vectors (43k sentence vectors: the index is searched exactly, so a query reads all of it).
Then, in one server-like process (a Context, started and warmed as ``chiezo serve`` starts),
each trial switches in a new generation of it — a copy of the current file and its index
under a new name, switched with ``generations.switch_current`` as a build or ``chiezo import``
does — waits ``delay`` seconds, and times the first hybrid query (a question of the excerpt's
question set, a new one each time: query vectors are cached), then a second one.

Cases, each in both behaviours of the same run:
* ``old`` (the baseline: before issue #19, a new generation was warmed only at server start)
  and ``new`` (``Library.watch``: noticed within a second and warmed in the background);
* page cache ``cached`` (the file was just written, as after a local build) or ``dropped``
  (``echo 3 > /proc/sys/vm/drop_caches`` after the switch: as after a reboot, a generation
  built long ago or evicted; needs root — without it these cases are skipped, saying so);
* model ``loaded`` (the process already embeds queries with use-m) or ``unloaded`` (the new
  generation is the first with vectors of this model in the process: e.g. ``chiezo embed`` run
  from the CLI while the server runs);
* ``delay`` between the switch and the first query: 0 (a query already waiting) or a few
  seconds (someone searching shortly after a rebuild).
A keyword-only query right after the switch, in the worst case, shows whether a warm in
progress holds up a request that does not need what it loads.

Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import building, operating, searching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.errors import NotFound  # noqa: E402
from chiezo.ops import evaluate  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.ops.requests import SearchRequest  # noqa: E402
from chiezo.search import semantic  # noqa: E402
from chiezo.store import embedders, generations  # noqa: E402

from corpus import SHARED  # noqa: E402

WORK = HERE / "work" / "first_query"
DATA = SHARED / "data"
DUMP = DATA / "wikipedia/jawiki-20230501-excerpt.xml.bz2"
QUESTIONS = DATA / "eval/ja/jawiki-excerpt-questions.jsonl"
NAME = "jawiki"
MODEL = "use-m"
console = Console(width=150)


def library() -> Context:
    service = Context(Settings(data_dir=WORK / "data", query_timeout=30.0))
    try:
        service.library.get(NAME)
    except NotFound:
        started = time.monotonic()
        building.ingest(service, "wikipedia", DUMP, NAME, embed=MODEL)
        console.print(f"built {NAME} with {MODEL} vectors ({time.monotonic() - started:.0f} s)")
    return service


def original(directory: Path) -> Path:
    """The built generation with vectors that every trial copies (the oldest one that has an
    index beside it: the build also keeps its text-only intermediate)."""
    with_index = [p for p in generations.generation_files(directory) if generations.sidecars(p)]
    return with_index[0]


def switch_in_a_copy(service: Context) -> str:
    """A new generation with the same content, switched in as a build switches its own; the
    copies of earlier trials are removed (the original is kept)."""
    directory = service.settings.corpus_dir / NAME
    current = generations.current_path(directory)
    original_ = original(directory)
    new = directory / generations.new_generation_name()
    shutil.copyfile(original_, new)
    for sidecar in generations.sidecars(original_):
        shutil.copyfile(sidecar, new.with_name(new.name + sidecar.name[len(original_.name) :]))
    generations.switch_current(directory, new)
    # keep the one just replaced: a query of the previous trial may still read it
    generations.prune(directory, [original_, new, current, *_text_only(directory)])
    return new.name


def _text_only(directory: Path) -> list[Path]:
    return [p for p in generations.generation_files(directory) if not generations.sidecars(p)]


def drop_page_cache() -> bool:
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def unload_model() -> None:
    """As if no source of this process had used the model yet."""
    embedders._load.cache_clear()
    semantic._query_vector.cache_clear()


def timed(service: Context, question: str, mode: str | None) -> tuple[float, str]:
    started = time.perf_counter()
    result = searching.search(
        service, SearchRequest.of(query=question, source=NAME, limit=10, mode=mode)
    )
    return (time.perf_counter() - started) * 1000, result.retrieval


def trial(service: Context, questions, case: dict) -> dict:
    lib = service.library
    if case["behaviour"] == "new":
        lib.watch()
    else:
        lib.stop_watching()
    if case["model"] == "unloaded":
        unload_model()
    time.sleep(1.0)  # settle: the previous trial's queries and warm are done
    generation = switch_in_a_copy(service)
    if case["cache"] == "dropped":
        drop_page_cache()
    time.sleep(case["delay"])
    first_ms, retrieval = timed(service, next(questions), case["probe"])
    second_ms, _ = timed(service, next(questions), case["probe"])
    warm_s = None
    if case["behaviour"] == "new":  # let the warm end before the next trial starts
        deadline = time.monotonic() + 60
        while lib.warmed.get(NAME, {}).get("generation") != generation:
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        warm_s = lib.warmed.get(NAME, {}).get("seconds")
    return {
        **case,
        "first_ms": round(first_ms, 1),
        "second_ms": round(second_ms, 1),
        "retrieval": retrieval,
        "warm_s": warm_s,
    }


def cases(delays: list[float], can_drop: bool) -> list[dict]:
    out = []
    for cache in ("cached", "dropped") if can_drop else ("cached",):
        for model in ("loaded", "unloaded"):
            for delay in delays:
                for behaviour in ("old", "new"):
                    out.append(
                        {
                            "cache": cache,
                            "model": model,
                            "delay": delay,
                            "probe": None,
                            "behaviour": behaviour,
                        }
                    )
    worst = "dropped" if can_drop else "cached"
    for behaviour in ("old", "new"):  # a request that needs nothing the warm loads
        out.append(
            {
                "cache": worst,
                "model": "unloaded",
                "delay": 0.0,
                "probe": "keyword",
                "behaviour": behaviour,
            }
        )
    return out


def summary(rows: list[dict]) -> list[dict]:
    groups: dict[tuple, list[dict]] = {}
    for row in rows:
        key = (row["cache"], row["model"], row["delay"], row["probe"] or "hybrid", row["behaviour"])
        groups.setdefault(key, []).append(row)
    out = []
    for (cache, model, delay, probe, behaviour), group in groups.items():
        firsts = [r["first_ms"] for r in group]
        warms = [r["warm_s"] for r in group if r["warm_s"] is not None]
        out.append(
            {
                "cache": cache,
                "model": model,
                "delay_s": delay,
                "query": probe,
                "behaviour": behaviour,
                "trials": len(group),
                "first_ms_median": round(statistics.median(firsts), 1),
                "first_ms_max": max(firsts),
                "second_ms_median": round(statistics.median(r["second_ms"] for r in group), 1),
                "fell_back": sum(r["retrieval"] == "keyword-fallback" for r in group),
                "warm_s_median": round(statistics.median(warms), 3) if warms else None,
            }
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--delays", default="0,3", help="seconds from the switch to the query")
    args = parser.parse_args()
    service = library()
    operating.warm(service)  # as `chiezo serve` does before its first request
    can_drop = drop_page_cache()
    if not can_drop:
        console.print("[yellow]cannot drop the page cache (not root?): only process-cold cases")
    questions = iter(q.text for q in evaluate.load_questions(QUESTIONS, None) * 50)
    plan = cases([float(d) for d in args.delays.split(",")], can_drop)
    rows = []
    for round_ in range(args.repeats):
        for case in plan:
            rows.append(trial(service, questions, case))
            console.print(f"round {round_ + 1}: {rows[-1]}")
    service.library.stop_watching()
    table = Table(title="first query after a switch (ms, in-process; old = before #19)")
    shown = summary(rows)
    for column in shown[0]:
        table.add_column(column, justify="right")
    for row in shown:
        table.add_row(*(str(v) for v in row.values()))
    console.print(table)
    out = HERE / "results" / f"first_query-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps(
            {
                "sources": operating.sources(service),
                "page_cache_dropped": can_drop,
                "summary": shown,
                "trials": rows,
            },
            ensure_ascii=False,
            indent=2,
            default=str,
        )
    )
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
