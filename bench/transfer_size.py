"""Export size and time: the zstd archive `chiezo export` writes against the plain tar it wrote
before (issue #33), the same source in one run, and each imported back.

    python bench/transfer_size.py [--work bench/work/cross_source/data] [--source jawiki]

Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.ops import transfer  # noqa: E402
from chiezo.store import generations  # noqa: E402

console = Console(width=120)


def plain_tar(settings: Settings, name: str, dest: Path) -> None:
    """The archive as exports were before: the same members, no compression."""
    exported = dest.with_suffix(".zst")
    transfer.export_source(settings, name, exported)
    with (
        transfer._open_archive(exported) as tar,  # noqa: SLF001
        tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as out,
    ):
        for member in tar:
            out.addfile(member, tar.extractfile(member))
    exported.unlink()


def timed(work) -> float:
    started = time.perf_counter()
    work()
    return round(time.perf_counter() - started, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", default=str(HERE / "work" / "cross_source" / "data"))
    parser.add_argument("--source", default="jawiki")
    args = parser.parse_args()
    settings = Settings(data_dir=Path(args.work))
    generation = generations.current_path(settings.corpus_dir / args.source)
    assert generation is not None, f"no source {args.source!r} in {args.work}"
    scratch = Path(tempfile.mkdtemp(prefix="chiezo-transfer-"))
    try:
        rows = {}
        zst = scratch / "export.tar.zst"
        plain = scratch / "export.tar"
        rows["zstd (now)"] = {
            "export_s": timed(lambda: transfer.export_source(settings, args.source, zst)),
            "bytes": zst.stat().st_size,
        }
        plain_tar(settings, args.source, plain)
        rows["plain tar (before)"] = {"bytes": plain.stat().st_size}
        for label, archive in (("zstd (now)", zst), ("plain tar (before)", plain)):
            other = Settings(data_dir=scratch / label.split()[0])
            rows[label]["import_s"] = timed(lambda: transfer.import_source(other, archive))  # noqa: B023
            rows[label]["share_of_generation"] = round(
                rows[label]["bytes"] / generation.stat().st_size, 3
            )
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    report = {"source": args.source, "generation_bytes": generation.stat().st_size, **rows}
    table = Table(title=f"export of {args.source} ({generation.stat().st_size / 2**20:.1f} MiB)")
    for col in ("archive", "MiB", "share", "export s", "import s"):
        table.add_column(col, justify="right")
    for label, r in rows.items():
        table.add_row(
            label,
            f"{r['bytes'] / 2**20:.1f}",
            str(r["share_of_generation"]),
            str(r.get("export_s", "-")),
            str(r["import_s"]),
        )
    console.print(table)
    out = HERE / "results" / f"transfer_size-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
