"""Full vs incremental rebuild of a place-table source: the AED workbook of the shared data
grown to ROWS rows (its rows repeated, ids renumbered) as an .xlsx, plus the small GPX and
CSV fixtures, built cold, rebuilt with nothing changed, and rebuilt after the small CSV
changed. Baseline in the same run: the cold build (every file read).

    python bench/places_incremental.py [ROWS]

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

AED = HERE.parent.parent / "shared" / "data" / "docs" / "office" / "yaizu-aed_location.xlsx"
FIXTURES = HERE.parent / "tests" / "data" / "places"
WORK = HERE / "work" / "places_incremental"
console = Console(width=120)


def grown_workbook(target: Path, rows: int) -> None:
    import openpyxl

    source = openpyxl.load_workbook(AED, read_only=True).worksheets[0]
    header, *records = [list(r) for r in source.iter_rows(values_only=True)]
    book = openpyxl.Workbook(write_only=True)
    sheet = book.create_sheet("AED")
    sheet.append(header)
    for i in range(rows):
        record = list(records[i % len(records)])
        record[0] = str(i + 1)
        sheet.append(record)
    book.save(target)


def main() -> None:
    rows_wanted = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000
    shutil.rmtree(WORK, ignore_errors=True)
    folder = WORK / "in"
    folder.mkdir(parents=True)
    grown_workbook(folder / "aed.xlsx", rows_wanted)
    files = [
        folder / "aed.xlsx",
        shutil.copy(FIXTURES / "kagawa.gpx", folder),
        shutil.copy(FIXTURES / "kagawa-broken.csv", folder),
    ]
    service = Context(Settings(data_dir=WORK / "data"))
    rows = []

    def build(label: str) -> None:
        started = time.monotonic()
        report = building.ingest(service, "places", files, "mine", embed=False)
        rows.append(
            {
                "build": label,
                "seconds": round(time.monotonic() - started, 2),
                "reading s": round(report.timings.get("reading", 0.0), 2),
                "docs": report.docs,
                **(report.conversions or {}),
            }
        )
        console.print(rows[-1])

    build("cold (baseline: every file read)")
    build("again, nothing changed")
    with open(files[2], "a", encoding="utf-8") as fh:
        fh.write("14,琴平町,集落,香川県仲多度郡琴平町,34.19167,133.82083,\n")
    build("the small CSV changed")
    table = Table(title=f"rebuilding a places source ({rows_wanted:,}-row workbook + 2 files)")
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    console.print(table)
    out = HERE / "results" / f"places_incremental-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps({"rows": rows_wanted, "builds": rows}, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")
    shutil.rmtree(WORK, ignore_errors=True)


if __name__ == "__main__":
    main()
