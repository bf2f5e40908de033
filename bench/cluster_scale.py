"""Chiezo on a Ray cluster against the single-machine path, in the same run (issue 20).

    python bench/cluster_scale.py                          # 1 and 2 workers (about 6 minutes)
    python bench/cluster_scale.py --workers 1,2,4,8,16     # on a larger machine
    python bench/cluster_scale.py --parts embed,wiki --address HOST:6379

Three jobs, each through the code the commands run:

* **embed** — units/s of ``chiezo embed``'s vector step: ``embed.local_vectors`` (the default:
  one process, every core) against ``cluster.embedding.RayEmbedding`` with N actors of one CPU
  each, on the same passages (sentence units of the Wikipedia excerpt, ``--passages`` of them,
  in the batches embed_source makes). Actor start-up (each loads the model) is inside the
  rate and also shown on its own; ``steady_rate`` leaves it out.
* **wiki** — wikitext chars/s of the rendering in ``chiezo ingest wikipedia``: the local parser
  processes (``--workers`` default, the baseline) against ``cluster.wiki.ray_parsers`` on a
  cluster of N CPUs, over the same batches of pages (read from the dump once, before timing).
* **build** — a whole ``ingest wikipedia`` (chars/s of wikitext, end to end): local, on Ray
  with the pages sent from the builder, and on Ray with the workers reading their own streams
  of a multistream copy of the dump (``wikistreams.write_multistream``, 100 pages a stream).
* **serve** — requests/s of ``/v1/jawiki/search`` (titles and words of the excerpt), driven by
  wrk when it is installed (else a threaded client): ``chiezo serve --workers N`` against a
  Ray Serve deployment with N replicas (HAProxy ingress, as ``serve --ray`` starts it).

Without ``--address`` a one-node Ray cluster of N CPUs is started here for each N.
On a 2-core machine only the shape is meaningful (the load generator and the driver share the
cores); the scaling target — at least 0.8 × linear for embed and wiki up to the cores — needs
a larger machine. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

import httpx
from rich.console import Console
from rich.table import Table

from chiezo.ops import building

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.ingest.wikidump import WikiDump  # noqa: E402
from chiezo.ingest.wikipedia import BATCH_PAGES  # noqa: E402
from chiezo.ingest.wikirender import default_workers, local_parsers  # noqa: E402
from chiezo.ingest.wikistreams import write_multistream  # noqa: E402
from chiezo.ingest.wikitext import Namespaces  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.store.embed import BATCH, EmbedBatch, local_vectors, passage_text, unit_spans  # noqa: E402
from chiezo.store.embedders import get_embedder  # noqa: E402

from corpus import SHARED_DATA  # noqa: E402

DUMP = SHARED_DATA / "wikipedia/jawiki-20230501-excerpt.xml.bz2"
FALLBACK_DUMP = ROOT / "tests/data/wikipedia/jawiki-20230501-excerpt.xml.bz2"  # a bare machine
MODEL = "use-m"
IN_FLIGHT = 4  # batches queued per worker, as ingest/wikipedia.py does
console = Console(width=150)


def pages(dump_path: Path) -> tuple[Namespaces, list[list[tuple]]]:
    dump = WikiDump(dump_path)
    info = dump.siteinfo
    ns = Namespaces.for_wiki(info.namespaces, info.language or "ja")
    batches, batch = [], []
    for page in dump.pages():
        if page.ns != 0 or page.redirect is not None:
            continue
        batch.append((page.page_id, page.title, page.text, page.timestamp))
        if len(batch) >= BATCH_PAGES:
            batches.append(batch)
            batch = []
    dump.close()
    return ns, batches + ([batch] if batch else [])


# -- embed ------------------------------------------------------------------------------------


def work_batches(batches: list[list[tuple]], limit: int) -> list[EmbedBatch]:
    """Sentence units of the articles' plain text, as embed_source batches them."""
    import re

    units = []
    for batch in batches:
        for _, title, text, _ in batch:
            plain = re.sub(
                r"\{\{[^{}]*\}\}|\[\[(?:[^|\]]*\|)?([^\]]*)\]\]|'{2,}|<[^>]+>", r"\1", text
            )
            for a, b in unit_spans(plain, 60):
                units.append(passage_text(title, "", plain[a:b]))
                if len(units) >= limit:
                    break
    units = units[:limit]
    return [
        EmbedBatch(
            [str(i) for i in range(at, min(at + BATCH, len(units)))], units[at : at + BATCH], 1, 0
        )
        for at in range(0, len(units), BATCH)
    ]


def time_vectorize(vectorize, work: list[EmbedBatch]) -> dict:
    started = time.monotonic()
    first = None
    count = 0
    for done, _ in vectorize(work):
        first = first or time.monotonic() - started
        count += len(done.passages)
    seconds = time.monotonic() - started
    first = first or 0.0
    steady = (count - BATCH) / (seconds - first) if seconds > first and count > BATCH else 0.0
    return {
        "units": count,
        "seconds": round(seconds, 2),
        "startup_s": round(first, 2),
        "rate": round(count / seconds, 1),
        "steady_rate": round(steady, 1),
    }


def embed_local(embedder, work: list[EmbedBatch]) -> dict:
    embedder.embed(work[0].passages[:4], "passage")  # the model loaded before timing
    return {
        "job": "embed",
        "path": "local (one process, every core)",
        "workers": 1,
        **time_vectorize(local_vectors(embedder), work),
    }


def embed_on_ray(embedder, work: list[EmbedBatch], n: int, address: str | None) -> dict:
    from chiezo.cluster.embedding import RayEmbedding

    return {
        "job": "embed",
        "path": f"ray: {n} actor(s)",
        "workers": n,
        **time_vectorize(RayEmbedding(address, actors=n)(embedder), work),
    }


# -- wiki -------------------------------------------------------------------------------------


def time_render(parsers, batches) -> tuple[float, int]:
    import collections

    chars = sum(len(text) for batch in batches for _, _, text, _ in batch)
    started = time.monotonic()
    with parsers as (submit, workers):
        pending: collections.deque = collections.deque()
        for batch in batches:
            pending.append(submit(batch))
            while len(pending) > IN_FLIGHT * workers:
                pending.popleft().get()
        while pending:
            pending.popleft().get()
    return time.monotonic() - started, chars


def wiki_row(path: str, n: int, parsers, batches) -> dict:
    seconds, chars = time_render(parsers, batches)
    return {
        "job": "wiki",
        "path": path,
        "workers": n,
        "units": chars,
        "seconds": round(seconds, 2),
        "rate": round(chars / seconds),
    }


def wiki_local(ns, batches) -> dict:
    n = default_workers()
    return wiki_row(f"local ({n} parser processes)", n, local_parsers(ns, 500, n), batches)


def wiki_on_ray(ns, batches, n: int, address: str | None) -> dict:
    from chiezo.cluster.wiki import ray_parsers

    return wiki_row(f"ray: {n} CPU(s)", n, ray_parsers(address, ns, 500, n), batches)


def build_row(path: str, n: int, dump: Path, chars: int, ray_address: str | None) -> dict:
    """A whole ``ingest wikipedia`` into a scratch data directory: chars/s of wikitext."""
    from chiezo.ingest.wikipedia import WikiOptions, ingest_wikipedia

    if ray_address is not None:
        import chiezo.cluster.wiki  # noqa: F401 - registers the ray rendering, as --ray does

    with tempfile.TemporaryDirectory(dir=HERE / "work") as scratch:
        started = time.monotonic()
        ingest_wikipedia(
            Settings(data_dir=Path(scratch) / "data"), dump, wiki=WikiOptions(ray=ray_address)
        )
        seconds = time.monotonic() - started
    return {
        "job": "build",
        "path": path,
        "workers": n,
        "units": chars,
        "seconds": round(seconds, 2),
        "rate": round(chars / seconds),
    }


# -- serve ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def search_paths(service: Context, count: int = 200) -> list[str]:
    conn = service.library.get("jawiki").conn
    titles = [
        t
        for (t,) in conn.execute(
            "SELECT title FROM docs ORDER BY rank_score DESC LIMIT ?", (count,)
        )
    ]
    random.Random(7).shuffle(titles)
    return [f"/v1/jawiki/search?{urlencode({'q': t, 'limit': 5})}" for t in titles]


def load(base: str, paths: list[str], seconds: int, connections: int) -> dict:
    if shutil.which("wrk"):
        from serve_load import lua_script, run_wrk

        script = lua_script(paths, Path(tempfile.mkdtemp()) / "paths.lua")
        return run_wrk(base, script, seconds, connections)
    counts = {"ok": 0, "errors": 0}
    stop = time.monotonic() + seconds

    def client(k: int) -> None:
        with httpx.Client(base_url=base, timeout=30) as http:
            i = k
            while time.monotonic() < stop:
                ok = http.get(paths[i % len(paths)]).status_code == 200
                counts["ok" if ok else "errors"] += 1
                i += connections

    threads = [threading.Thread(target=client, args=(k,)) for k in range(connections)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return {"requests_per_s": round(counts["ok"] / seconds, 1), "errors": counts["errors"]}


def wait_ready(base: str, path: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if httpx.get(base + path, timeout=5).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{base} did not answer")


def serve_row(
    path: str, n: int, base: str, paths: list[str], seconds: int, connections: int
) -> dict:
    wait_ready(base, paths[0])
    result = load(base, paths, seconds, connections)
    return {
        "job": "serve",
        "path": path,
        "workers": n,
        "rate": result["requests_per_s"],
        "errors": result.get("errors", 0),
        "p99_ms": result.get("p99_ms"),
    }


def serve_local(data: Path, paths: list[str], n: int, seconds: int, connections: int) -> dict:
    port = free_port()
    env = {**os.environ, "CHIEZO_DATA": str(data)}
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chiezo.surfaces.cli.main",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(n),
        ],
        env=env,
    )
    try:
        return serve_row(
            f"local: serve --workers {n}",
            n,
            f"http://127.0.0.1:{port}",
            paths,
            seconds,
            connections,
        )
    finally:
        server.terminate()
        server.wait(30)


def serve_on_ray(
    data: Path, paths: list[str], n: int, seconds: int, connections: int, address: str | None
) -> dict:
    from ray import serve

    from chiezo.cluster.serving import APP_NAME, ServeOptions, deploy

    port = free_port()
    deploy(
        Settings(data_dir=data),
        ServeOptions(port=port, replicas=n, replica_cpus=1, address=address),
    )
    try:
        return serve_row(
            f"ray serve: {n} replica(s)", n, f"http://127.0.0.1:{port}", paths, seconds, connections
        )
    finally:
        serve.delete(APP_NAME, _blocking=False)  # no 30 s drain between configurations


def built_source(dump: Path, work: Path) -> Path:
    data = work / "data"
    service = Context(Settings(data_dir=data))
    if "jawiki" not in service.library.names():
        building.ingest(service, "wikipedia", dump, "jawiki")
    return data


# -- report -----------------------------------------------------------------------------------


def speedups(rows: list[dict]) -> None:
    """Each row against its job's single-machine baseline and its 1-worker cluster row (by the
    steady rate where there is one: actor start-up is paid once per run, not per unit)."""
    import re

    def family(row: dict) -> str:  # "ray build: 2 CPU(s), pages sent" → "ray build: N CPU(s)…"
        return re.sub(r"\b\d+\b", "N", row["path"])

    for job in {r["job"] for r in rows}:
        mine = [r for r in rows if r["job"] == job]
        base = mine[0]["rate"]
        for r in mine:
            r["vs_local"] = round(r["rate"] / base, 2) if base else None
            one = next((o for o in mine if family(o) == family(r) and o["workers"] == 1), None)
            if one and r["path"].startswith("ray"):
                key = "steady_rate" if r.get("steady_rate") else "rate"
                r["vs_1_worker"] = round(r[key] / one[key], 2)
                r["of_linear"] = round(r[key] / (one[key] * r["workers"]), 2)


def show(rows: list[dict]) -> None:
    table = Table(title="Chiezo on Ray against the single-machine path (same run)")
    for column in (
        "job",
        "path",
        "rate",
        "steady_rate",
        "startup_s",
        "vs_local",
        "vs_1_worker",
        "of_linear",
        "errors",
    ):
        table.add_column(column, justify="left" if column in ("job", "path") else "right")
    units = {"embed": "units/s", "wiki": "chars/s", "build": "chars/s", "serve": "req/s"}
    for r in rows:
        table.add_row(
            r["job"],
            r["path"],
            f"{r['rate']:,} {units[r['job']]}",
            *(
                str(r.get(c, ""))
                for c in (
                    "steady_rate",
                    "startup_s",
                    "vs_local",
                    "vs_1_worker",
                    "of_linear",
                    "errors",
                )
            ),
        )
    console.print(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default=None, help="e.g. 1,2,4,8 (default: 1 and the cores)")
    parser.add_argument("--parts", default="embed,wiki,build,serve")
    parser.add_argument("--passages", type=int, default=8000)
    parser.add_argument("--seconds", type=int, default=10, help="serve: load per configuration")
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--address", default=None, help="an existing cluster (default: start one)")
    parser.add_argument("--dump", type=Path, default=DUMP if DUMP.exists() else FALLBACK_DUMP)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    workers = sorted({int(w) for w in (args.workers or f"1,{cores}").split(",")})
    parts = args.parts.split(",")

    import ray

    from chiezo.cluster.serving import FAST_INGRESS

    for name, value in FAST_INGRESS.items():  # read when Ray starts (the cluster this starts)
        os.environ.setdefault(name, value)
    ns, batches = pages(args.dump)
    console.print(
        f"{sum(len(b) for b in batches)} articles from {args.dump.name}; "
        f"{cores} cores here; workers {workers}"
    )
    embedder = get_embedder(MODEL)
    work = work_batches(batches, args.passages)
    data = built_source(args.dump, HERE / "work" / "cluster_scale") if "serve" in parts else None
    paths = search_paths(Context(Settings(data_dir=data))) if data else []
    # the single-machine baselines first, then a cluster of N CPUs for each N (started here
    # with exactly N CPUs, so N bounds the tasks at once too; or the cluster at --address)
    rows: list[dict] = []
    if "embed" in parts:
        rows.append(embed_local(embedder, work))
    if "wiki" in parts:
        rows.append(wiki_local(ns, batches))
    chars = sum(len(text) for batch in batches for _, _, text, _ in batch)
    streams = None
    if "build" in parts:
        (HERE / "work").mkdir(exist_ok=True)
        streams = write_multistream(args.dump, Path(tempfile.mkdtemp(dir=HERE / "work")))
        rows.append(build_row("local build", default_workers(), args.dump, chars, None))
    if "serve" in parts:
        rows += [serve_local(data, paths, n, args.seconds, args.connections) for n in workers]
    for n in workers:
        if args.address:
            ray.init(address=args.address, log_to_driver=False)
        else:
            ray.init(num_cpus=n, log_to_driver=False)
        if "embed" in parts:
            rows.append(embed_on_ray(embedder, work, n, args.address))
        if "wiki" in parts:
            rows.append(wiki_on_ray(ns, batches, n, args.address))
        if "build" in parts:
            target = args.address or "default"
            rows.append(
                build_row(f"ray build: {n} CPU(s), pages sent", n, args.dump, chars, target)
            )
            rows.append(
                build_row(
                    f"ray build: {n} CPU(s), streams read by workers", n, streams, chars, target
                )
            )
        if "serve" in parts:
            rows.append(serve_on_ray(data, paths, n, args.seconds, args.connections, args.address))
        ray.shutdown()
    if streams is not None:
        shutil.rmtree(streams.parent, ignore_errors=True)
    speedups(rows)
    show(rows)
    out = HERE / "results" / f"cluster_scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {"cores": cores, "workers": workers, "dump": args.dump.name, "rows": rows},
            ensure_ascii=False,
            indent=1,
        )
    )
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
