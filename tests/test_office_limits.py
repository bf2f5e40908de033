"""Office files (zips of XML) are read within limits — what they expand to, declared and real,
the compression ratio, rows, paragraphs, slides and time — and one over a limit is skipped with
the reason while the build goes on. The hostile files are made here, small: lowered limits
stand in for the real ones, except in the test that runs the security report's bombs against
the real limits in a subprocess and measures its time and peak memory."""

import io
import json
import random
import re
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest

from chiezo.core.config import Settings
from chiezo.ingest import formats
from chiezo.ingest.textdecode import Unreadable
from chiezo.ops.context import Context

from helpers import build_docs, data_file, write_files

PARAGRAPH = "<w:p><w:r><w:t>{}</w:t></w:r></w:p>"
WORDS = ["manual", "server", "install", "option", "select", "window", "network", "printer"]


def make_docx(path: Path, body: str) -> Path:
    """A Word file python-docx made, its body replaced by ``body`` (WordprocessingML)."""
    import docx

    base = io.BytesIO()
    docx.Document().save(base)
    return _replaced(base, path, "word/document.xml", "<w:body>", "<w:sectPr", body)


def make_xlsx(path: Path, rows: str, dimension: str = "") -> Path:
    """A workbook openpyxl made, its one sheet's rows replaced by ``rows`` (SpreadsheetML).
    Its <dimension> (openpyxl reads only the rows it declares) is ``dimension``, or none."""
    from openpyxl import Workbook

    base = io.BytesIO()
    Workbook().save(base)
    return _replaced(
        base,
        path,
        "xl/worksheets/sheet1.xml",
        "<sheetData>",
        "</sheetData>",
        rows,
        lambda xml: re.sub(r"<dimension [^>]*/>", dimension, xml),
    )


def _replaced(
    base: io.BytesIO, path: Path, part: str, after: str, before: str, new: str, edit=lambda xml: xml
) -> Path:
    with zipfile.ZipFile(base) as src, zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in src.infolist():
            data = src.read(info)
            if info.filename == part:
                xml = edit(data.decode())
                if after not in xml:  # an empty sheet is <sheetData/>
                    xml = xml.replace(after.replace(">", "/>"), after + before)
                start, end = xml.index(after) + len(after), xml.index(before)
                data = (xml[:start] + new + xml[end:]).encode()
            out.writestr(info.filename, data)
    return path


def sheet_rows(n: int, columns: int = 3) -> str:
    return "".join(
        f'<row r="{i}">'
        + "".join(f'<c r="{chr(65 + j)}{i}"><v>{i * j}</v></c>' for j in range(columns))
        + "</row>"
        for i in range(1, n + 1)
    )


def varied_paragraphs(n: int, seed: int = 1) -> str:
    """Paragraphs of varied words: XML that compresses like a real document's (~4×)."""
    rnd = random.Random(seed)
    return "".join(
        PARAGRAPH.format(" ".join(rnd.choice(WORDS) for _ in range(12))) for _ in range(n)
    )


def misstate_size(path: Path, part: str, declared: int) -> None:
    """Make the zip declare ``declared`` bytes for ``part`` — in its local header and its
    central directory — while its deflate stream still holds what it held."""
    data = bytearray(path.read_bytes())
    name = part.encode()
    # (signature, offset of the uncompressed size, offset of the name) of each header
    for signature, size_at, name_at in ((b"PK\x03\x04", 22, 30), (b"PK\x01\x02", 24, 46)):
        start = data.index(signature)
        while data[start + name_at : start + name_at + len(name)] != name:
            start = data.index(signature, start + 4)
        data[start + size_at : start + size_at + 4] = struct.pack("<I", declared)
    path.write_bytes(bytes(data))


def skipped(report, name: str) -> str:
    """The reason the build gave for skipping the file called ``name``."""
    (warning,) = [w for w in report.warnings if Path(w.split(": ", 1)[0]).name == name]
    assert warning.endswith("; skipped"), warning
    return warning.split(": ", 1)[1].removesuffix("; skipped")


# -- each limit, with the reason the build reports --------------------------------------------


def test_too_many_paragraphs_skip_a_word_file_and_the_build_goes_on(tmp_path, monkeypatch):
    monkeypatch.setattr(formats, "OFFICE_LIMITS", formats.OfficeLimits(paragraphs=500))
    folder = write_files(tmp_path / "docs", {"note.md": "# 開館時間\n\n九時から。\n"})
    make_docx(folder / "many.docx", PARAGRAPH.format("x") * 501)
    make_docx(folder / "fine.docx", PARAGRAPH.format("図書館の案内") * 500)
    report = build_docs(Context(Settings(data_dir=tmp_path / "data")), folder, "mine")
    reason = "more than 500 paragraphs and table rows, the most read from one Word file"
    assert skipped(report, "many.docx") == reason
    assert report.docs == 2  # the note and the Word file at the limit


def test_a_workbook_of_too_many_rows_is_skipped_before_openpyxl_reads_it(tmp_path):
    limits = formats.OfficeLimits(rows=300)
    assert len(formats.convert(make_xlsx(tmp_path / "fine.xlsx", sheet_rows(300)), limits)) == 1
    with pytest.raises(Unreadable, match=r"^more than 300 rows, the most read from one workbook"):
        formats.convert(make_xlsx(tmp_path / "many.xlsx", sheet_rows(301)), limits)
    wide = '<row r="1">' + "<c><v>1</v></c>" * 16_385 + "</row>"  # wider than Excel's XFD
    with pytest.raises(Unreadable, match="a row of more than 16,384 cells, Excel's most"):
        formats.convert(make_xlsx(tmp_path / "wide.xlsx", wide), limits)


def test_a_workbook_declaring_a_million_rows_is_skipped(tmp_path):
    """openpyxl pads a sheet out to the rows its <dimension> declares, as wide as declared."""
    fitting = '<dimension ref="A1:C2"/>'
    assert len(formats.convert(make_xlsx(tmp_path / "two.xlsx", sheet_rows(2), fitting))) == 1
    whole = '<dimension ref="A1:XFD1048576"/>'  # the same two rows, declared as a whole sheet
    with pytest.raises(Unreadable, match="^more than 200,000 rows"):
        formats.convert(make_xlsx(tmp_path / "padded.xlsx", sheet_rows(2), whole))


def test_a_deck_of_too_many_slides_is_skipped(tmp_path):
    from pptx import Presentation

    deck = Presentation()
    for n in range(4):
        deck.slides.add_slide(deck.slide_layouts[5]).shapes.title.text = f"slide {n}"
    path = tmp_path / "deck.pptx"
    deck.save(path)
    assert "slide 2" in formats.convert(path, formats.OfficeLimits(slides=4))[0].text
    with pytest.raises(Unreadable, match="^more than 3 slides, the most read from one deck"):
        formats.convert(path, formats.OfficeLimits(slides=3))


def test_xml_beyond_what_is_held_in_memory_is_skipped(tmp_path):
    path = make_docx(tmp_path / "big.docx", varied_paragraphs(20_000))  # ~3 MiB of XML
    with pytest.raises(Unreadable, match=r"^expands to \d MiB of XML, more than the 1 MiB read "):
        formats.convert(path, formats.OfficeLimits(xml_held_bytes=2**20))


def test_a_zip_bomb_is_refused_from_its_declared_sizes_alone(tmp_path):
    path = make_docx(tmp_path / "bomb.docx", PARAGRAPH.format("x") * 300_000)  # 11 MiB → 65 KiB
    started = time.monotonic()
    with pytest.raises(Unreadable, match=r"^declares 11 MiB from \d+ KiB, more than 100-fold"):
        formats.convert(path)
    assert time.monotonic() - started < 5  # no expanding: ~0.01 s (reading it all: minutes)


def test_a_zip_that_understates_its_sizes_is_judged_by_what_it_holds(tmp_path):
    """The entry says 1 KiB; its stream expands to ~3 MiB. zipfile alone would stop at the
    declared size and fail on the CRC; the limits are checked on the real size."""
    path = make_docx(tmp_path / "liar.docx", varied_paragraphs(20_000))
    misstate_size(path, "word/document.xml", 1024)
    with pytest.raises(Unreadable, match=r"^expands to 3 MiB of XML, more than the 1 MiB"):
        formats.convert(path, formats.OfficeLimits(xml_held_bytes=2**20))
    with pytest.raises(
        Unreadable,
        match="word/document.xml declares 1,024 bytes but holds "
        r"[\d,]+: a zip that misstates its sizes",
    ):
        formats.convert(path)


def test_a_zip_that_overstates_its_sizes_is_refused_unread(tmp_path):
    path = make_docx(tmp_path / "huge.docx", PARAGRAPH.format("x"))
    misstate_size(path, "word/document.xml", 2**31)
    with pytest.raises(Unreadable, match="^declares 2,049 MiB, more than the 256 MiB read"):
        formats.convert(path)


DEADLINE = """
import json, sys, time
from pathlib import Path
from chiezo.ingest.formats import OfficeLimits, convert
from chiezo.ingest.textdecode import Unreadable

started = time.process_time()
convert(Path(sys.argv[1]))
whole = time.process_time() - started
started = time.process_time()
try:
    convert(Path(sys.argv[1]), OfficeLimits(seconds=0.3))
    reason = None
except Unreadable as exc:
    reason = str(exc)
print(json.dumps({"whole": whole, "limited": time.process_time() - started, "reason": reason}))
"""


@pytest.mark.slow
def test_the_deadline_stops_a_read_midway(tmp_path):
    """Checked between rows (and on every read of the file), not after: a sheet that takes
    seconds to read is dropped a moment after its deadline. Measured in a fresh process, in
    CPU time against a whole read of the same file there: a test process that has run the
    suite spends its own time collecting garbage, and a busy machine stretches wall time."""
    path = make_xlsx(tmp_path / "slow.xlsx", sheet_rows(40_000, columns=6))
    run = subprocess.run(
        [sys.executable, "-c", DEADLINE, str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    measured = json.loads(run.stdout)
    assert measured["reason"].startswith("not read within 0.3 s, the time allowed"), measured
    assert measured["limited"] < measured["whole"] / 2, measured  # midway, not at the end


# -- the real limits: real documents read, the security report's bombs stopped ----------------


@pytest.mark.slow
def test_real_office_files_read_within_a_third_of_the_limits(tmp_path):
    """The limits are generous: every Office file of tests/data and a generated 300-page
    manual (Word-like markup, 9.6 MiB of XML) read with each limit cut to a third."""
    third = formats.OfficeLimits(
        **{k: v / 3 if k == "seconds" else v // 3 for k, v in vars(formats.OFFICE_LIMITS).items()}
    )
    office = data_file("docs/office")
    files = sorted(p for p in office.rglob("*") if p.suffix in formats.OFFICE_FORMATS)
    assert len(files) == 13
    for path in files:
        assert formats.convert(path, third), path
    manual = make_docx(tmp_path / "manual.docx", _manual_body(pages=300))
    assert "Page 300" in formats.convert(manual, third)[0].text


@pytest.mark.slow
def test_a_100000_row_sheet_passes_the_checks_made_before_reading(tmp_path):
    """100,000 rows of ten numbers (31 MiB of XML from 5.5 MiB). Read in full it takes ~17 s,
    so the test stops after pass 1 (sizes, ratio, rows), the checks a big sheet could fail."""
    path = make_xlsx(tmp_path / "big.xlsx", sheet_rows(100_000, columns=10))
    budget = formats._Budget(formats.OFFICE_LIMITS)
    with formats._TimedFile(path, budget) as stream, zipfile.ZipFile(stream) as archive:
        formats._check_expansion(
            archive, path.stat().st_size, formats.OFFICE_FORMATS[".xlsx"], budget
        )
    assert budget._counts["rows"] == 100_000


# Converts one file and prints the reason it was skipped, the seconds and the peak memory.
# Peak: ru_maxrss, but from /proc's VmHWM where there is one — Linux carries the parent's peak
# into a child's ru_maxrss across fork and exec (a child of this test process, whose bombs
# peaked at ~470 MiB, read 469 MiB for a 16 MiB run), VmHWM is the child's own.
MEASURE = """
import json, resource, sys, time
from pathlib import Path
from chiezo.ingest.formats import convert

def peak_kib():
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

started = time.monotonic()
try:
    convert(Path(sys.argv[1]))
    reason = None
except Exception as exc:
    reason = str(exc)
print(json.dumps({"reason": reason, "seconds": time.monotonic() - started,
                  "peak_mib": peak_kib() / 1024}))
"""


@pytest.mark.slow
def test_the_security_reports_bombs_stop_quickly_in_little_memory(tmp_path):
    """The real limits against files shaped like the report's: a 226 KB .docx of 1.9M
    paragraphs (64 MiB of XML; >600 s and 1 GB before), a .xlsx of 2M rows of one repeated
    cell (80 s and 1.2 GB before), and 2M numbered rows, whose XML compresses only ~7-fold
    (no zip bomb by ratio: the rows limit stops it). Each converted in a fresh process."""
    one_cell = "<row><c><v>1</v></c></row>"
    bombs = {
        "paragraphs.docx": make_docx(tmp_path / "p.docx", PARAGRAPH.format("x") * 1_900_000),
        "repeated.xlsx": make_xlsx(tmp_path / "repeated.xlsx", one_cell * 2_000_000),
        "numbered.xlsx": _numbered_rows(tmp_path / "numbered.xlsx", 2_000_000),
    }
    assert bombs["paragraphs.docx"].stat().st_size < 300_000
    for name, path in bombs.items():
        run = subprocess.run(
            [sys.executable, "-c", MEASURE, str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        measured = json.loads(run.stdout)
        assert measured["reason"], name
        assert measured["seconds"] < 10, (name, measured)
        assert measured["peak_mib"] < 200, (name, measured)
    assert "more than 200,000 rows" in measured["reason"]  # numbered.xlsx, the last


def _numbered_rows(path: Path, n: int) -> Path:
    """A sheet of ``n`` numbered one-cell rows, written in pieces (~90 MiB of XML)."""
    from openpyxl import Workbook

    base = io.BytesIO()
    Workbook().save(base)
    with (
        zipfile.ZipFile(base) as src,
        zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=1) as out,
    ):
        for info in src.infolist():
            if info.filename != "xl/worksheets/sheet1.xml":
                out.writestr(info.filename, src.read(info))
        with out.open("xl/worksheets/sheet1.xml", "w") as sheet:
            sheet.write(
                b'<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/'
                b'2006/main"><sheetData>'
            )
            for start in range(1, n + 1, 100_000):
                piece = range(start, min(start + 100_000, n + 1))
                sheet.write(
                    "".join(
                        f'<row r="{i}"><c r="A{i}"><v>{i}</v></c></row>' for i in piece
                    ).encode()
                )
            sheet.write(b"</sheetData></worksheet>")
    return path


def _manual_body(pages: int) -> str:
    """Per page a heading and 15 paragraphs of ~70 words in runs marked up as Word saves
    them (rsids, fonts, sizes), a 12 × 4 table every third page: 9.6 MiB for 300 pages."""
    rnd = random.Random(2)
    run = (
        '<w:r w:rsidRPr="00{:06X}"><w:rPr><w:rFonts w:ascii="Calibri" w:hAnsi="Calibri"/>'
        '<w:sz w:val="22"/><w:lang w:val="en-US"/></w:rPr><w:t xml:space="preserve">{}</w:t>'
        "</w:r>"
    )

    def para(words: int, style: str = "") -> str:
        runs = "".join(
            run.format(rnd.randrange(2**24), " ".join(rnd.choice(WORDS) for _ in range(words // 4)))
            for _ in range(4)
        )
        pstyle = f'<w:pStyle w:val="{style}"/>' if style else ""
        rsid = f"00{rnd.randrange(2**24):06X}"
        return f'<w:p w:rsidR="{rsid}"><w:pPr>{pstyle}<w:jc w:val="both"/></w:pPr>{runs}</w:p>'

    def table() -> str:
        row = lambda: "".join(f"<w:tc>{para(4)}</w:tc>" for _ in range(4))  # noqa: E731
        return "<w:tbl>" + "".join(f"<w:tr>{row()}</w:tr>" for _ in range(12)) + "</w:tbl>"

    body = []
    for page in range(1, pages + 1):
        heading = f"<w:r><w:t>Page {page}</w:t></w:r>"
        body.append(f'<w:p><w:pPr><w:pStyle w:val="Heading1"/></w:pPr>{heading}</w:p>')
        body += [para(70) for _ in range(15)]
        if page % 3 == 0:
            body.append(table())
    return "".join(body)
