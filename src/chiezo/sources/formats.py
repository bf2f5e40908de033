"""Office, PDF, HTML and CSV files → Markdown-shaped text, so one chunker serves every format.

Each converter returns :class:`Converted` parts — usually one, one per sheet for a workbook —
whose text uses Markdown headings for the file's own structure: a PDF page is ``## p. 12``
(so a chunk's breadcrumb says "p. 12" and a citation can too), a slide ``## Slide 3: title``, a
Word heading its level, a block of spreadsheet rows ``## rows 2–51``. Rows are rendered as
``header: value`` lines, so a row is findable by any value in it and reads on its own.

A file that cannot be read (a broken zip, an encrypted or scanned PDF) raises
:class:`~chiezo.sources.documents.SkipFile` with the reason; the build reports it and goes on.
"""

from __future__ import annotations

import csv
import io
import logging
import re
from dataclasses import dataclass, field
from pathlib import Path

# pdfminer and pypdf-style libraries log every odd font at WARNING; the build reports files
logging.getLogger("pdfminer").setLevel(logging.ERROR)

ROWS_PER_SECTION = 50
MIN_PAGE_TEXT = 1  # a page with no characters at all has no text layer


@dataclass
class Converted:
    text: str  # Markdown-shaped
    title: str | None = None
    key_suffix: str = ""  # "#Sheet1" for one sheet of a workbook
    extra: dict = field(default_factory=dict)
    one_chunk_per_section: bool = False  # PDF pages and slides stay apart, to be cited


class Unreadable(Exception):
    """The file cannot be converted; the message says why."""


def convert(path: Path) -> list[Converted]:
    suffix = path.suffix.lower()
    converter = CONVERTERS[suffix]
    try:
        return converter(path)
    except Unreadable:
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt file must not stop the build
        raise Unreadable(f"cannot read as {suffix[1:]}: {type(exc).__name__}: {exc}") from exc


# -- PDF -------------------------------------------------------------------------------------------


def pdf(path: Path) -> list[Converted]:
    """Text per page with pdfminer.six: its CMaps decode Japanese CID fonts that pypdf turned
    into mojibake on the shared 官報 and slide PDFs; ``detect_vertical`` reads 縦書き."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams, LTTextContainer
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect

    pages, empty, number = [], 0, 0
    try:
        for number, layout in enumerate(
            extract_pages(str(path), laparams=LAParams(detect_vertical=True)), start=1
        ):
            text = _clean("".join(e.get_text() for e in layout if isinstance(e, LTTextContainer)))
            if len(text) < MIN_PAGE_TEXT:
                empty += 1
                continue
            pages.append(f"## p. {number}\n\n{text}")
    except (PDFEncryptionError, PDFPasswordIncorrect) as exc:
        raise Unreadable("encrypted PDF (a password is needed)") from exc
    if not pages:
        raise Unreadable("no text layer (a scanned PDF?)")
    return [Converted("\n\n".join(pages), _pdf_title(path) or _stem(path),
                      extra={"pages": number, "pages_without_text": empty},
                      one_chunk_per_section=True)]  # fmt: skip


def _pdf_title(path: Path) -> str | None:
    try:
        from pdfminer.pdfdocument import PDFDocument
        from pdfminer.pdfparser import PDFParser

        with open(path, "rb") as fh:
            info = PDFDocument(PDFParser(fh)).info
        raw = info[0].get("Title") if info else None
        if hasattr(raw, "resolve"):
            raw = raw.resolve()
        if isinstance(raw, bytes):
            raw = raw.decode("utf-16") if raw.startswith(b"\xfe\xff") else raw.decode("latin-1")
    except Exception:  # noqa: BLE001 - broken metadata is not worth failing over
        return None
    title = str(raw).strip() if raw else ""
    return title if title and not title.lower().startswith(("untitled", "microsoft word")) else None


# -- Word ------------------------------------------------------------------------------------------


def docx(path: Path) -> list[Converted]:
    import docx as python_docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    document = python_docx.Document(str(path))
    lines: list[str] = []
    for block in document.element.body.iterchildren():
        tag = block.tag.rsplit("}", 1)[-1]
        if tag == "p":
            paragraph = Paragraph(block, document)
            text = paragraph.text.strip()
            level = _heading_level(paragraph.style.name if paragraph.style else "")
            if text:
                lines.append(f"{'#' * level} {text}" if level else text)
        elif tag == "tbl":
            lines.append(
                _table_text([[c.text for c in row.cells] for row in Table(block, document).rows])
            )
    title = (document.core_properties.title or "").strip() or None
    return [Converted("\n\n".join(line for line in lines if line), title)]


def _heading_level(style: str) -> int:
    if style == "Title":
        return 1
    found = re.match(r"Heading (\d)", style)
    return min(int(found.group(1)) + 1, 6) if found else 0


# -- spreadsheets ----------------------------------------------------------------------------------


def xlsx(path: Path) -> list[Converted]:
    from openpyxl import load_workbook

    workbook = load_workbook(str(path), read_only=True, data_only=True)
    out = []
    try:
        for sheet in workbook.worksheets:
            rows = [[_cell(v) for v in row] for row in sheet.iter_rows(values_only=True)]
            text = _rows_text(rows)
            if text:
                out.append(Converted(text, f"{_stem(path)} — {sheet.title}",
                                     key_suffix=f"#{sheet.title}", extra={"sheet": sheet.title}))  # fmt: skip
    finally:
        workbook.close()
    if not out:
        raise Unreadable("the workbook has no cells with values")
    return out


def delimited(path: Path) -> list[Converted]:
    text = decode_bytes(path.read_bytes())
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    rows = [[c.strip() for c in row] for row in csv.reader(io.StringIO(text), delimiter=delimiter)]
    return [Converted(_rows_text(rows), None)]


def _rows_text(rows: list[list[str]]) -> str:
    """The first non-empty row is the header; every other row becomes ``header: value`` lines,
    a blank line between rows, ``## rows a–b`` every ``ROWS_PER_SECTION`` rows."""
    rows = [r for r in rows if any(c for c in r)]
    if not rows:
        return ""
    header = [h or f"column {i + 1}" for i, h in enumerate(rows[0])]
    parts: list[str] = []
    for start in range(1, len(rows), ROWS_PER_SECTION):
        block = rows[start : start + ROWS_PER_SECTION]
        parts.append(f"## rows {start + 1}–{start + len(block)}")
        for row in block:
            parts.append("\n".join(f"{header[i] if i < len(header) else f'column {i + 1}'}: {v}"
                                   for i, v in enumerate(row) if v))  # fmt: skip
    if len(rows) == 1:
        parts.append(" | ".join(header))
    return "\n\n".join(parts)


def _cell(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _table_text(rows: list[list[str]]) -> str:
    rows = [[c.strip() for c in r] for r in rows if any(c.strip() for c in r)]
    if len(rows) < 2:
        return "\n".join(" | ".join(r) for r in rows)
    header = rows[0]
    return "\n\n".join("\n".join(f"{header[i] if i < len(header) else ''}: {v}".lstrip(": ")
                                 for i, v in enumerate(r) if v) for r in rows[1:])  # fmt: skip


# -- slides ----------------------------------------------------------------------------------------


def pptx(path: Path) -> list[Converted]:
    from pptx import Presentation

    deck = Presentation(str(path))
    parts: list[str] = []
    first_title = None
    for number, slide in enumerate(deck.slides, start=1):
        title = slide.shapes.title.text.strip() if slide.shapes.title is not None else ""
        first_title = first_title or title or None
        texts = []
        for shape in slide.shapes:
            if shape == slide.shapes.title:
                continue
            if shape.has_text_frame and shape.text_frame.text.strip():
                texts.append(shape.text_frame.text.strip())
            elif getattr(shape, "has_table", False) and shape.has_table:
                texts.append(_table_text([[c.text for c in row.cells] for row in shape.table.rows]))
        notes = ""
        if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
            notes = slide.notes_slide.notes_text_frame.text.strip()
        body = "\n\n".join(texts + ([f"Notes: {notes}"] if notes else []))
        parts.append(f"## Slide {number}" + (f": {title}" if title else "") + f"\n\n{body}")
    title = (deck.core_properties.title or "").strip() or first_title
    return [Converted("\n\n".join(parts), title, extra={"slides": len(deck.slides)},
                      one_chunk_per_section=True)]  # fmt: skip


# -- HTML ------------------------------------------------------------------------------------------

_DROP = ("script", "style", "noscript", "nav", "header", "footer", "aside", "form", "template")


def html(path: Path) -> list[Converted]:
    from .documents import read_text

    title, text, _ = html_to_markdown(read_text(path))
    return [Converted(text, title)]


def html_to_markdown(markup: str) -> tuple[str | None, str, list[str]]:
    """(title, Markdown-shaped main text, link targets) of an HTML page."""
    import lxml.html

    if not markup.strip():
        return None, "", []
    tree = lxml.html.fromstring(markup)
    title = (tree.findtext(".//title") or "").strip() or None
    for element in tree.xpath("//" + " | //".join(_DROP)):
        element.drop_tree()
    main = tree.xpath("//main") or tree.xpath("//article") or tree.xpath("//body") or [tree]
    lines: list[str] = []
    for element in main[0].iter("h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "td", "th",
                                "pre", "blockquote", "dd", "dt"):  # fmt: skip
        text = " ".join(element.text_content().split())
        if not text:
            continue
        if element.tag[0] == "h" and element.tag[1:].isdigit():
            lines.append(f"{'#' * int(element.tag[1])} {text}")
        elif not any(a.tag in ("li", "td", "th", "p") for a in element.iterancestors()):
            lines.append(f"- {text}" if element.tag == "li" else text)
    links = [href for href in main[0].xpath(".//a/@href") if href]
    return title, "\n\n".join(lines), links


def decode_bytes(data: bytes) -> str:
    """UTF-8 (BOM or not), else CP932 (Shift_JIS as Windows writes it — Japanese CSV exports
    usually are), else what charset-normalizer finds."""
    for encoding in ("utf-8-sig", "cp932"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    try:
        from charset_normalizer import from_bytes

        best = from_bytes(data).best()
        if best is not None:
            return str(best)
    except ImportError:
        pass
    raise Unreadable("cannot tell the text encoding")


def _clean(text: str) -> str:
    text = text.replace("\x00", "")
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


def _stem(path: Path) -> str:
    return path.stem.replace("_", " ").strip() or path.name


CONVERTERS = {
    ".pdf": pdf,
    ".docx": docx,
    ".xlsx": xlsx,
    ".xlsm": xlsx,
    ".pptx": pptx,
    ".html": html,
    ".htm": html,
    ".csv": delimited,
    ".tsv": delimited,
}
SUFFIXES = frozenset(CONVERTERS)
