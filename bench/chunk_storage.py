"""Passages kept as spans of their document's body against passages kept as text (issue #33
item 2): the jawiki excerpt built twice in one run — as Chiezo builds it now, and with every
passage's text stored (``chunk_text.SPANS_FROM`` out of reach: the layout before) — then sizes
and what reading passages costs.

    python bench/chunk_storage.py [--dump PATH] [--reads 300]
    python bench/chunk_storage.py --unspan GENERATION   # a generation already built, e.g.
        # bench/jawiki_scale.py's: its size against the same file with every passage as text

Reports per layout: the generation (VACUUMed), the ``chunks`` table by dbstat, how many
passages are spans; the time to read a document's passages (the document page, the section
probe), one passage (a semantic hit's snippet), every passage in order (what an embed reads),
and keyword search p50/p95 (a title and a common word). Prints a table, writes
JSON to bench/results/chunk_storage.json.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import building, searching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.ops.requests import SearchRequest  # noqa: E402
from chiezo.store import chunk_text, embed, generations  # noqa: E402

from corpus import SHARED  # noqa: E402

EXCERPT = SHARED / "data/wikipedia/jawiki-20230501-excerpt.xml.bz2"
WORK = HERE / "work" / "chunk_storage"
console = Console(width=120)
LAYOUTS = {"before: text": 10**9, "after: spans": chunk_text.SPANS_FROM}


def build(name: str, limit: int, dump: Path) -> Context:
    service = Context(Settings(data_dir=WORK / name.split(":")[0]))
    keep, chunk_text.SPANS_FROM = chunk_text.SPANS_FROM, limit
    try:
        building.ingest(service, "wikipedia", dump, "jawiki", embed=False)
    finally:
        chunk_text.SPANS_FROM = keep
    return service


def sizes(service: Context) -> dict:
    path = generations.current_path(service.settings.corpus_dir / "jawiki")
    copy = path.with_name("vacuumed.db")
    shutil.copyfile(path, copy)
    conn = sqlite3.connect(copy)
    try:
        conn.execute("VACUUM")
        table = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'chunks'").fetchone()[0]
        spans, total = conn.execute(
            "SELECT count(*) FILTER (WHERE spans IS NOT NULL), count(*) FROM chunks"
        ).fetchone()
    finally:
        conn.close()
    size = copy.stat().st_size
    copy.unlink()
    return {"generation": size, "chunks_table": table, "spans": spans, "chunks": total}


def timed(work, items) -> list[float]:
    out = []
    for item in items:
        started = time.perf_counter()
        work(item)
        out.append((time.perf_counter() - started) * 1000)
    return out


def summary(ms: list[float]) -> dict:
    ms = sorted(ms)
    return {
        "p50_ms": round(statistics.median(ms), 3),
        "p95_ms": round(ms[int(0.95 * (len(ms) - 1))], 3),
    }


def costs(service: Context, reads: int, rng: random.Random) -> dict:
    source = service.library.get("jawiki")
    conn = source.conn
    docs = [r[0] for r in conn.execute("SELECT doc_id FROM docs")]
    chunks = [r[0] for r in conn.execute("SELECT chunk_id FROM chunks")]
    titles = [r[0] for r in conn.execute("SELECT title FROM docs")]
    doc_sample = [rng.choice(docs) for _ in range(reads)]
    chunk_sample = [rng.choice(chunks) for _ in range(reads)]
    queries = [rng.choice(titles) + " 歴史" for _ in range(min(reads, 200))]
    for query in queries[:20]:  # warm: the page cache and the query plans
        searching.search(service, SearchRequest.of(query=query, source="jawiki", mode="keyword"))
    started = time.perf_counter()
    units = sum(len(batch) for batch, _ in embed._unit_batches(conn, len(chunks), 60))  # noqa: SLF001
    all_units_s = time.perf_counter() - started

    def search(query: str) -> None:
        searching.search(service, SearchRequest.of(query=query, source="jawiki", mode="keyword"))

    return {
        "document_passages": summary(
            timed(lambda d: chunk_text.document_chunks(conn, d), doc_sample)
        ),
        "one_passage": summary(timed(lambda c: chunk_text.one_chunk(conn, c), chunk_sample)),
        "every_unit_in_order_s": round(all_units_s, 2),
        "units": units,
        "keyword_search": summary(timed(search, queries)),
    }


def unspan(generation: Path) -> None:
    """``generation`` and a copy of it with every passage's text stored (the layout before),
    both VACUUMed: the same build, the two layouts."""
    WORK.mkdir(parents=True, exist_ok=True)
    after, before = WORK / "after.db", WORK / "before.db"
    shutil.copyfile(generation, after)
    shutil.copyfile(generation, before)
    conn = sqlite3.connect(before)
    bodies = chunk_text.Bodies(conn)
    rows = conn.execute(
        "SELECT chunk_id, doc_id, text, spans FROM chunks WHERE spans IS NOT NULL"
    ).fetchall()
    conn.executemany(
        "UPDATE chunks SET text = ?, spans = NULL WHERE chunk_id = ?",
        [(bodies.text(d, t, s), c) for c, d, t, s in rows],
    )
    conn.commit()
    conn.close()
    found = {}
    for name, path in (("before: text", before), ("after: spans", after)):
        conn = sqlite3.connect(path)
        conn.execute("VACUUM")
        table = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name = 'chunks'").fetchone()[0]
        conn.close()
        found[name] = {"generation": path.stat().st_size, "chunks_table": table}
        console.print(
            f"{name}: generation {path.stat().st_size / 2**20:.2f} MiB, "
            f"chunks {table / 2**20:.2f} MiB"
        )
        path.unlink()
    ratio = found["after: spans"]["generation"] / found["before: text"]["generation"]
    console.print(f"after / before: {ratio:.3f} ({len(rows):,} passages were spans)")
    out = HERE / "results" / "chunk_storage-unspan.json"
    out.write_text(json.dumps({"generation": str(generation), **found}, indent=2) + "\n")


def same_hits(services: list[Context], rng: random.Random, queries: int = 300) -> dict:
    """Whether the two layouts answer alike: each query's hits — document, snippet, section
    and score — compared between them (keyword; a title's word, a word and 歴史, a sentence)."""
    conn = services[0].library.get("jawiki").conn
    titles = [r[0] for r in conn.execute("SELECT title FROM docs")]
    asked = [
        rng.choice(titles) + rng.choice(("", " 歴史", "の特徴", " 人口")) for _ in range(queries)
    ]
    equal = 0
    for query in asked:
        answers = [
            [
                (h.doc_id, h.snippet, h.section, h.score)
                for h in s.search(SearchRequest.of(query=query, source="jawiki", limit=10)).hits
            ]
            for s in services
        ]
        equal += answers[0] == answers[1]
    return {"queries": queries, "equal": equal}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dump", default=str(EXCERPT))
    parser.add_argument("--reads", type=int, default=300)
    parser.add_argument("--unspan", metavar="GENERATION")
    args = parser.parse_args()
    if args.unspan:
        unspan(Path(args.unspan))
        return
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    result: dict = {"dump": Path(args.dump).name}
    services = {}
    for name, limit in LAYOUTS.items():
        started = time.monotonic()
        services[name] = build(name, limit, Path(args.dump))
        result[name] = {"build_s": round(time.monotonic() - started, 1)}
        result[name].update(sizes(services[name]))
    for name, service in services.items():
        result[name].update(costs(service, args.reads, random.Random(7)))
    result["same_hits"] = same_hits(list(services.values()), random.Random(11))
    console.print(
        f"hits (title, snippet, section, score) equal in both layouts for "
        f"{result['same_hits']['equal']} of {result['same_hits']['queries']} queries"
    )
    table = Table(title=f"{result['dump']}: passages as text (before) and as spans (after)")
    rows = [
        ("generation MiB", lambda r: f"{r['generation'] / 2**20:.2f}"),
        ("chunks table MiB", lambda r: f"{r['chunks_table'] / 2**20:.2f}"),
        ("passages as spans", lambda r: f"{r['spans']:,} / {r['chunks']:,}"),
        ("build s", lambda r: f"{r['build_s']}"),
        ("a document's passages p50 / p95 ms", lambda r: _pair(r["document_passages"])),
        ("one passage p50 / p95 ms", lambda r: _pair(r["one_passage"])),
        ("every unit in order s", lambda r: f"{r['every_unit_in_order_s']}"),
        ("keyword search p50 / p95 ms", lambda r: _pair(r["keyword_search"])),
    ]
    table.add_column("")
    for name in LAYOUTS:
        table.add_column(name, justify="right")
    for label, show in rows:
        table.add_row(label, *(show(result[name]) for name in LAYOUTS))
    console.print(table)
    out = HERE / "results" / "chunk_storage.json"
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    console.print(f"wrote {out}")


def _pair(found: dict) -> str:
    return f"{found['p50_ms']:.2f} / {found['p95_ms']:.2f}"


if __name__ == "__main__":
    main()
