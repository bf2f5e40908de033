"""Full vs incremental rebuild of a documents source: every shared document (PDF, Office, CSV,
Markdown) copied into a work folder, built cold, rebuilt with nothing changed, and rebuilt
after one file changed. Baseline in the same run: the cold build (every file converted).

    python bench/docs_incremental.py

Writes JSON to bench/results/.
"""

from __future__ import annotations

import json
import shutil
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import building

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402

SHARED_DOCS = HERE.parent.parent / "shared" / "data" / "docs"
WORK = HERE / "work" / "docs_incremental"
console = Console(width=120)


def main() -> None:
    shutil.rmtree(WORK, ignore_errors=True)
    folder = WORK / "docs"
    shutil.copytree(SHARED_DOCS, folder)
    files = sum(1 for p in folder.rglob("*") if p.is_file())
    service = Context(Settings(data_dir=WORK / "data"))
    rows = []

    def build(label: str) -> None:
        started = time.monotonic()
        report = building.ingest(service, "docs", folder, "mine", embed=False)
        rows.append(
            {
                "build": label,
                "seconds": round(time.monotonic() - started, 2),
                "docs": report.docs,
                **(report.conversions or {}),
            }
        )
        console.print(rows[-1])

    build("cold (baseline: every file converted)")
    build("again, nothing changed")
    changed = folder / "markdown" / "changed.md"
    changed.write_text("# 変更\n\n一つだけ変わった文書。\n", encoding="utf-8")
    build("one file added")
    table = Table(title=f"rebuilding a documents source ({files} files)")
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    console.print(table)
    out = HERE / "results" / f"docs_incremental-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"files": files, "rows": rows}, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
