"""Office, PDF, HTML and CSV files → Markdown-shaped text, so one chunker serves every format.

Each converter returns :class:`Converted` parts — usually one, one per sheet for a workbook —
whose text uses Markdown headings for the file's own structure: a PDF page is ``## p. 12``
(so a chunk's breadcrumb says "p. 12" and a citation can too), a slide ``## Slide 3: title``, a
Word heading its level, a block of spreadsheet rows ``## rows 2–51``. Rows are rendered as
``header: value`` lines, so a row is findable by any value in it and reads on its own.

A file that cannot be read (a broken zip, an encrypted or scanned PDF) raises
:class:`~chiezo.ingest.textdecode.Unreadable` with the reason; the build reports it and goes
on. An Office file (a zip of XML parts) is read within :class:`OfficeLimits` — what it expands
to, its rows, paragraphs and slides, and time — checked at one seam, :func:`_read_office`; one
over a limit is unreadable too. Text files are decoded by the one policy of ingest/textdecode.py.
"""

from __future__ import annotations

import copy
import csv
import functools
import io
import itertools
import logging
import re
import statistics
import time
import unicodedata
import zipfile
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, TypeAlias

from chiezo.ingest.textdecode import Unreadable, decode_bytes, read_text

if TYPE_CHECKING:
    from docx.document import Document as WordDocument
    from docx.table import Table as WordTable
    from openpyxl.worksheet._read_only import ReadOnlyWorksheet
    from pdfminer.layout import LTAnno, LTChar, LTPage, LTTextLine
    from pdfminer.pdffont import PDFFont
    from pdfminer.utils import Matrix, Rect
    from pptx.slide import Slide

    # a character of a text line, or a space or line break pdfminer put between characters
    LineItem: TypeAlias = LTChar | LTAnno

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
    warnings: list[str] = field(default_factory=list)  # for the build to report; file kept


def convert(path: Path, limits: OfficeLimits | None = None) -> list[Converted]:
    """The file's parts; an Office file read within ``limits`` (default :data:`OFFICE_LIMITS`)."""
    suffix = path.suffix.lower()
    try:
        if suffix in OFFICE_FORMATS:
            return _read_office(path, OFFICE_FORMATS[suffix], limits or OFFICE_LIMITS)
        return CONVERTERS[suffix](path)
    except Unreadable:
        raise
    except Exception as exc:  # noqa: BLE001 - a corrupt file must not stop the build
        raise Unreadable(f"cannot read as {suffix[1:]}: {type(exc).__name__}: {exc}") from exc


# -- PDF -------------------------------------------------------------------------------------------

# One-letter text lines in a font this much larger than the page's median character are a
# heading set letter by letter: kampo.pdf's 官報 masthead is 12 pt over an 8 pt body (1.5×).
# Of the 72 one-character lines in the shared PDFs, the others this large are digits and a
# bracket (section numbers, １ at 1.27×), not letters; 序 in jo.pdf is body size.
LARGE_LETTER = 1.25
# Letters of one such word lie at most this many letter sizes apart (官→報: 36 pt at 12 pt, 3.0×),
# on one baseline or one column (ALIGN × size) and at one size (SAME_SIZE × size).
JOIN_GAP = 4.0
ALIGN = 0.2
SAME_SIZE = 0.1
# A page whose characters are mostly without a Unicode mapping is said to need OCR.
MOSTLY_UNMAPPED = 0.5
_GONE = "\x00"  # marks a dropped character until the line's spaces are tidied
_CID = re.compile(r"\(cid:\d+\)")  # pdfminer's text for a code no map gives a character for


def pdf(path: Path) -> list[Converted]:
    """Text per page with pdfminer.six: its CMaps decode Japanese CID fonts that pypdf turned
    into mojibake on the shared 官報 and slide PDFs; ``detect_vertical`` reads 縦書き. Large
    one-letter lines become words (:func:`_join_large_letters`); characters without a Unicode
    mapping are dropped (:class:`_FontUse`), and pages that were mostly such are reported."""
    from pdfminer.pdfdocument import PDFEncryptionError, PDFPasswordIncorrect

    fonts: dict = {}
    try:
        pages = [_page_runs(layout) for layout in _layouts(path, fonts)]
    except (PDFEncryptionError, PDFPasswordIncorrect) as exc:
        raise Unreadable("encrypted PDF (a password is needed)") from exc
    texts, note = _document_text(pages)
    if not texts:
        raise Unreadable(note or "no text layer (a scanned PDF?)")
    return [
        Converted(
            "\n\n".join(texts),
            _pdf_title(path) or _stem(path),
            extra={"pages": len(pages), "pages_without_text": len(pages) - len(texts)},
            one_chunk_per_section=True,
            warnings=[note] if note else [],
        )
    ]


def _document_text(pages: list) -> tuple[list[str], str]:
    """Each page's ``## p. N`` section (pages without text left out), and what to tell the
    user about characters dropped for want of a Unicode mapping ("" if nothing to tell)."""
    texts, unmapped, dropped, total = [], [], 0, 0
    for number, lines in enumerate(pages, start=1):
        text, page_dropped, page_total = _page_text(lines)
        dropped, total = dropped + page_dropped, total + page_total
        if page_dropped and page_dropped > page_total * MOSTLY_UNMAPPED:
            unmapped.append(number)
        if len(text) >= MIN_PAGE_TEXT:
            texts.append(f"## p. {number}\n\n{text}")
    return texts, _unmapped_note(unmapped, dropped, total)


def _unmapped_note(pages: list[int], dropped: int, total: int) -> str:
    if not pages:
        return ""
    where, one = ", ".join(map(str, pages)), len(pages) == 1
    return (
        f"{dropped} of {total} characters have no Unicode mapping and were dropped; "
        f"{'p.' if one else 'pp.'} {where} {'is' if one else 'are'} mostly such text and "
        f"{'needs' if one else 'need'} OCR to be searchable"
    )


def _layouts(path: Path, fonts: dict):
    """pdfminer's page layouts, as ``extract_pages`` makes them, with each LTChar tagged with
    its font's :class:`_FontUse` (pdfminer keeps only the font's name, and kampo.pdf has two
    Ryumin-Light fonts, horizontal and vertical)."""
    from pdfminer.layout import LAParams
    from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
    from pdfminer.pdfpage import PDFPage

    manager = PDFResourceManager(caching=True)
    device = _font_noting_aggregator()(manager, laparams=LAParams(detect_vertical=True))
    device.fonts = fonts
    interpreter = PDFPageInterpreter(manager, device)
    with open(path, "rb") as fh:
        for page in PDFPage.get_pages(fh):
            interpreter.process_page(page)
            yield device.get_result()


@functools.cache
def _font_noting_aggregator():
    from pdfminer.converter import PDFPageAggregator

    class FontNotingAggregator(PDFPageAggregator):
        fonts: dict

        def render_char(
            self,
            matrix: Matrix,
            font: PDFFont,
            fontsize: float,
            scaling: float,
            rise: float,
            cid: int,
            *rest: Any,  # the colour space and graphic state, handed on as pdfminer gives them
        ) -> float:
            advance = super().render_char(matrix, font, fontsize, scaling, rise, cid, *rest)
            char: Any = self.cur_item._objs[-1]  # the LTChar just made, given font_use here
            use = self.fonts.get(font)
            if use is None:
                use = self.fonts[font] = _FontUse(_symbolic_simple(font))
            use.note(cid, char.get_text())
            char.font_use = use
            return advance

    return FontNotingAggregator


def _symbolic_simple(font: PDFFont) -> bool:
    """A one-byte font flagged Symbolic: its codes are the font's own, not a standard
    encoding's (PDF 32000 §9.8.2), so only its ToUnicode or glyph names can say what it shows."""
    from pdfminer.pdftypes import resolve1

    flags = resolve1((getattr(font, "descriptor", None) or {}).get("Flags", 0))
    return not font.is_multibyte() and isinstance(flags, int) and bool(flags & 4)


@dataclass(eq=False)
class _FontUse:
    """How one PDF uses one font, over all its pages: the evidence that the font's characters
    have no real Unicode mapping. Seen in kampo.pdf: the date and issue number of the running
    head (平成 ™— 年 › 月 ™œ 日, 第 ›Ÿ˜(cid:1) 号) are digits of an embedded one-byte font,
    DFHSMincho-W3G014, flagged Symbolic. It has a ToUnicode, but one made from glyph names
    that are only PDFDocEncoding's names for the codes (0x92 trademark, 0x84 emdash, …); it
    draws with codes 1, 31 and 132–156, never a printable ASCII one, where every text
    encoding keeps letters and digits; 8 of its 10 characters come out as Latin letters or
    punctuation (œ Ÿ ˜ — ›) or (cid:1); and 4 of its 5 runs sit between CJK characters. A
    font is judged over the whole file, so one it spoils on one line goes on every line."""

    symbolic_simple: bool
    chars: int = 0  # characters drawn, blanks not counted
    foreign: int = 0  # ... from a code outside printable ASCII, as :func:`_narrow_foreign`
    runs: int = 0  # runs of this font within a text line
    inside_cjk: int = 0  # ... with a wide (CJK) character on both sides

    def note(self, code: int, text: str) -> None:
        if text.strip():
            self.chars += 1
            if self.symbolic_simple and not 0x21 <= code <= 0x7E:
                self.foreign += _narrow_foreign(text)

    @property
    def unmapped(self) -> bool:
        return (
            self.symbolic_simple
            and 2 * self.foreign > self.chars
            and 2 * self.inside_cjk > self.runs
        )


def _narrow_foreign(text: str) -> bool:
    """Latin-script letters and punctuation beyond ASCII (œ Ÿ ˜ — ›), or no mapping at all;
    not symbols (○ ■ ✓ ±), which symbol fonts legitimately draw between CJK words."""
    if _CID.fullmatch(text):
        return True
    return all(
        not c.isascii() and not _wide(c) and unicodedata.category(c) not in ("So", "Sm")
        for c in text
    )


def _wide(char: str) -> bool:
    return bool(char) and unicodedata.east_asian_width(char) in ("W", "F")


def _page_runs(layout: LTPage) -> list[list[tuple[str, _FontUse | None]]]:
    """The page's text lines in pdfminer's order, each as runs of (text, font); a character
    without any mapping (``(cid:N)``) is already ``_GONE``. Counts each font's runs in CJK."""
    lines = _join_large_letters(_text_lines(layout))
    runs = [_runs(line) for line in lines]
    for line in runs:
        _note_context(line)
    return runs


def _text_lines(layout: LTPage) -> list[list[LineItem]]:
    """Each text line's characters and pdfminer's spaces, without its closing line break; a
    line that wraps into the next (:func:`_wraps_in_box`, :func:`_wraps_across`) goes on as
    that line, with nothing between them, and a space pdfminer put between two Japanese
    characters that touch is left out (:func:`_keeps_space`)."""
    from pdfminer.layout import LTAnno, LTTextBox, LTTextLine

    boxes = [
        [line for line in element if isinstance(line, LTTextLine)]
        if isinstance(element, LTTextBox)
        else [element]
        for element in layout
        if isinstance(element, LTTextBox | LTTextLine)
    ]
    page = [line for box in boxes for line in box]
    ends = _line_ends(page)
    lines: list[list[LineItem]] = []
    previous = None  # the line before, and its box's far edge
    for box in boxes:
        edge = max((_end(line) for line in box), default=0.0)
        for n, line in enumerate(box):
            items = list(line)
            if items and isinstance(items[-1], LTAnno) and items[-1].get_text() == "\n":
                items.pop()
            vertical = _vertical(line)
            items = [
                item
                for i, item in enumerate(items)
                if not isinstance(item, LTAnno) or _keeps_space(items, i, vertical)
            ]
            if previous and (
                _wraps_in_box(*previous, line, ends)
                if n
                else _wraps_across(previous[0], line, page)
            ):
                lines[-1].extend(items)
            else:
                lines.append(items)
            previous = line, edge
    return lines


# pdfminer writes a space wherever two characters of a line lie apart by more than a tenth of
# a character. In kampo.pdf's vertical columns the turned glyphs (ー「」、) sit 0.24 of a
# character off the column's rhythm, so "一・五メー トル" (183 such spaces on its one page)
# and a search for 一・五メートル would find a Rust chapter first. The real spaces between Japanese
# characters in the shared PDFs are a full character or more (25 in kampo.pdf: 一　歩行者は,
# 1.0; one before an icon in yaizu-datamap-manual.pdf, 1.3).
TOUCHING = 0.5
# A line that wraps runs to its column's far edge, within TOUCHING of a character, and spans
# at least WRAP_CHARS characters. The wrapped lines of the shared PDFs span 14–45 characters
# (kampo.pdf's table cells 20–24, its columns 45, yaizu-opendatacatalog-kiyaku.pdf's 38, the
# slides' bullets 14–20); lines that end at their box's edge without wrapping — table cells,
# a date centred over its caption (nlp2004slides.pdf p. 9), numbered items — span 2–9.
WRAP_CHARS = 10
# Lines of one text box: the edge is a column's when another line of the page ends there too
# (a box of two lines of verse ends where its longer line does).
# Lines of two boxes: the next starts within SHIFT characters of where the line starts (a
# hanging indent is 1: kampo.pdf's items, the slides' bullets at 1.03) and lies under it (in a
# vertical column, beside it) less than LINE_GAP of a character away, pdfminer's own bound
# for lines of one paragraph (LAParams.line_margin; kampo.pdf's columns were cut into boxes
# between lines 0.32 apart, the slides' between 0.03–0.5 apart) — or, where lines are set
# further apart than pdfminer groups, less than SPACED_GAP away in a column where at least
# MARGIN_LINES lines end at that edge: yaizu-opendatacatalog-kiyaku.pdf's lines are 1.08 apart,
# each a box, 4–6 of each page's reaching the margin; jo.pdf's verse, 0.77 apart, has at most
# 2 lines of its longest length, and the slides' chart labels 1.1–1.2 below a caption, 1.
SHIFT = 1.25
LINE_GAP = 0.5
SPACED_GAP = 1.5
MARGIN_LINES = 3


def _vertical(line: LTTextLine) -> bool:
    from pdfminer.layout import LTTextLineVertical

    return isinstance(line, LTTextLineVertical)


def _start(line: LTTextLine) -> float:
    """Where the line starts along its direction, growing in reading order (down a column)."""
    return -line.y1 if _vertical(line) else line.x0


def _end(line: LTTextLine) -> float:
    return -line.y0 if _vertical(line) else line.x1


def _line_ends(lines: Iterable[LTTextLine]) -> dict[bool, list[float]]:
    """Where the page's lines end, horizontal (False) and vertical (True) apart."""
    ends: dict[bool, list[float]] = {False: [], True: []}
    for line in lines:
        ends[_vertical(line)].append(_end(line))
    return ends


def _char_size(line: LTTextLine) -> float:
    """The line's typical character size: the median, as a bullet is set larger (61.7 pt
    before 32 pt text on the slides)."""
    from pdfminer.layout import LTChar

    sizes = [c.size for c in line if isinstance(c, LTChar)]
    return statistics.median(sizes) if sizes else 0.0


def _may_wrap(line: LTTextLine, following: LTTextLine) -> bool:
    """Whether ``following`` could go on with ``line``'s text: a Japanese character on either
    side of the break, one direction, and a line long enough to be a column's. A break between
    two Japanese characters that wraps is then no space and no newline (道路交通法施行令… 並び
    / に道路交通法 read 並び に). A line that stops short of its column's edge is a
    paragraph's end, a heading or a line of verse, and keeps its break."""
    size = _char_size(line)
    extent = line.height if _vertical(line) else line.width
    return (
        bool(size)
        and _vertical(line) == _vertical(following)
        and _japanese(_text_edge(line, -1))
        and _japanese(_text_edge(following, 0))
        and extent >= WRAP_CHARS * size
    )


def _wraps_in_box(
    line: LTTextLine, edge: float, following: LTTextLine, ends: dict[bool, list[float]]
) -> bool:
    """``line`` and ``following`` are lines of one box, and ``line`` ends at the box's far
    edge, where another line of the page ends too."""
    if not _may_wrap(line, following):
        return False
    size, end = _char_size(line), _end(line)
    shared = sum(abs(other - end) <= TOUCHING * size for other in ends[_vertical(line)])
    return edge - end <= TOUCHING * size and shared > 1


def _wraps_across(line: LTTextLine, following: LTTextLine, page: list[LTTextLine]) -> bool:
    """``following``, the first line of the next box, goes on under ``line`` (beside it, in a
    vertical column), which ends at the far edge of the lines that start where it starts."""
    if not _may_wrap(line, following):
        return False
    size = _char_size(line)
    gap = line.x0 - following.x1 if _vertical(line) else line.y0 - following.y1
    if gap < 0 or abs(_start(following) - _start(line)) > SHIFT * size:
        return False
    column = [
        other
        for other in page
        if _vertical(other) == _vertical(line) and abs(_start(other) - _start(line)) <= SHIFT * size
    ]
    edge = max(_end(other) for other in column)
    if edge - _end(line) > TOUCHING * size:
        return False
    margin = sum(edge - _end(other) <= TOUCHING * size for other in column)
    return gap < LINE_GAP * size or (gap < SPACED_GAP * size and margin >= MARGIN_LINES)


def _text_edge(line: LTTextLine, index: int) -> str:
    """The line's first (``index`` 0) or last (-1) character, pdfminer's spaces skipped."""
    from pdfminer.layout import LTChar

    chars = [item for item in line if isinstance(item, LTChar) and item.get_text().strip()]
    text = chars[index].get_text() if chars else ""
    return text[index] if text else ""


def _japanese(char: str) -> bool:
    """A wide character that is not a space: an ideographic space opens an indented
    paragraph, so a line before one does not wrap into it."""
    return _wide(char) and not char.isspace()


def _keeps_space(items: list[LineItem], i: int, vertical: bool) -> bool:
    """Whether pdfminer's space ``items[i]`` stands for a gap on the page: not when both its
    neighbours are Japanese characters less than TOUCHING of a character apart."""
    from pdfminer.layout import LTChar

    before, after = items[i - 1] if i else None, items[i + 1] if i + 1 < len(items) else None
    if not (isinstance(before, LTChar) and isinstance(after, LTChar)):
        return True
    if not (_japanese(before.get_text()[-1:]) and _japanese(after.get_text()[:1])):
        return True
    gap = before.y0 - after.y1 if vertical else after.x0 - before.x1
    return gap >= TOUCHING * max(before.size, after.size)


def _join_large_letters(lines: list[list[LineItem]]) -> list[list[LineItem]]:
    """Lines of one large CJK letter next to each other become one line, the word they spell
    (kampo.pdf's masthead: 官 and 報 are two lines to pdfminer, so 官報 would match nothing). A
    vertical text column pdfminer reads already is one line, and a normal-size letter is left
    alone."""
    from pdfminer.layout import LTChar

    letters = {i: c for i, line in enumerate(lines) if (c := _lone_letter(line))}
    if len(letters) < 2:
        return lines
    body = statistics.median(c.size for line in lines for c in line if isinstance(c, LTChar))
    letters = {i: c for i, c in letters.items() if c.size >= body * LARGE_LETTER}
    joined: set[int] = set()  # lines whose letter went into an earlier line's word
    for group in _word_groups(letters, lines):
        ordered = _reading_order([letters[i] for i in group])
        lines[group[0]] = list(ordered)
        joined.update(group[1:])
    return [line for i, line in enumerate(lines) if i not in joined]


def _lone_letter(line: list[LineItem]) -> LTChar | None:
    """The line's only character, if it is a CJK letter (not a digit, not punctuation)."""
    from pdfminer.layout import LTChar

    found = None
    for item in line:
        if isinstance(item, LTChar) and item.get_text().strip():
            if found is not None:
                return None
            found = item
    text = found.get_text() if found is not None else ""
    return found if len(text) == 1 and _wide(text) and text.isalpha() else None


def _word_groups(letters: dict[int, LTChar], lines: list[list[LineItem]]) -> list[list[int]]:
    """Indices of lone letters that chain into words, each group in line order."""
    parent = {i: i for i in letters}

    def root(i: int) -> int:
        while parent[i] != i:
            i = parent[i]
        return i

    boxes = [_bbox(line) for line in lines]
    keys = sorted(letters)
    for n, a in enumerate(keys):
        for b in keys[n + 1 :]:
            if _neighbours(letters[a], letters[b], boxes, {a, b}):
                parent[root(b)] = root(a)
    groups: dict[int, list[int]] = {}
    for i in keys:
        groups.setdefault(root(i), []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def _neighbours(a: LTChar, b: LTChar, boxes: list[Rect | None], own: set[int]) -> bool:
    """Same size, on one baseline or one column, near, and no other text between them."""
    size = max(a.size, b.size)
    if abs(a.size - b.size) > size * SAME_SIZE:
        return False
    row = abs((a.y0 + a.y1) - (b.y0 + b.y1)) / 2 <= size * ALIGN
    column = abs((a.x0 + a.x1) - (b.x0 + b.x1)) / 2 <= size * ALIGN
    gap = max(a.x0, b.x0) - min(a.x1, b.x1) if row else max(a.y0, b.y0) - min(a.y1, b.y1)
    if not (row or column) or gap > size * JOIN_GAP:
        return False
    between = (
        (min(a.x1, b.x1), min(a.y0, b.y0), max(a.x0, b.x0), max(a.y1, b.y1))
        if row
        else (min(a.x0, b.x0), min(a.y1, b.y1), max(a.x1, b.x1), max(a.y0, b.y0))
    )
    return not any(_overlaps(box, between) for i, box in enumerate(boxes) if i not in own and box)


def _overlaps(box: Rect, area: Rect) -> bool:
    return box[0] < area[2] and area[0] < box[2] and box[1] < area[3] and area[1] < box[3]


def _bbox(line: list[LineItem]) -> Rect | None:
    from pdfminer.layout import LTChar

    shown = [c for c in line if isinstance(c, LTChar)]  # pdfminer's spaces have no box
    if not shown:
        return None
    return (
        min(c.x0 for c in shown),
        min(c.y0 for c in shown),
        max(c.x1 for c in shown),
        max(c.y1 for c in shown),
    )


def _reading_order(chars: list[LTChar]) -> list[LTChar]:
    """Left to right for a row, top to bottom for a column (a 縦書き heading)."""
    xs, ys = [c.x0 for c in chars], [c.y0 for c in chars]
    if max(xs) - min(xs) >= max(ys) - min(ys):
        return sorted(chars, key=lambda c: c.x0)
    return sorted(chars, key=lambda c: -c.y1)


def _runs(line: list[LineItem]) -> list[tuple[str, _FontUse | None]]:
    """The line as runs of one font each (pdfminer's spaces have none)."""
    runs = []
    for _, group in itertools.groupby(line, key=lambda item: id(getattr(item, "font_use", None))):
        items = list(group)
        text = "".join(
            _GONE if _CID.fullmatch(t) else t.replace("\x00", "")
            for t in (item.get_text() for item in items)
        )
        runs.append((text, getattr(items[0], "font_use", None)))
    return runs


def _note_context(runs: list[tuple[str, _FontUse | None]]) -> None:
    texts = [text.strip() for text, _ in runs]
    for i, (_, use) in enumerate(runs):
        if use is None or not texts[i]:
            continue
        before = next((t[-1] for t in reversed(texts[:i]) if t), "")
        after = next((t[0] for t in texts[i + 1 :] if t), "")
        use.runs += 1
        use.inside_cjk += _wide(before) and _wide(after)


def _page_text(lines: list[list[tuple[str, _FontUse | None]]]) -> tuple[str, int, int]:
    """(the page's text, characters dropped, characters in all) once the fonts are judged."""
    out, dropped, total = [], 0, 0
    for runs in lines:
        text = "".join(re.sub(r"\S", _GONE, t) if use and use.unmapped else t for t, use in runs)
        gone = text.count(_GONE)
        dropped, total = dropped + gone, total + len("".join(text.split()))
        if not gone or text.strip(_GONE + " "):  # a line of dropped characters goes entirely
            out.append(_close_gaps(text))
    return _clean("\n".join(out)), dropped, total


def _close_gaps(line: str) -> str:
    """Dropped characters leave one space where pdfminer had put spaces round them (平成 年),
    none at the line's ends or between characters that touched."""

    def gap(m: re.Match) -> str:
        edge = m.start() == 0 or m.end() == len(line)
        return " " if " " in m.group() and not edge else ""

    return re.sub(rf" *{_GONE}[{_GONE} ]*", gap, line)


def _pdf_title(path: Path) -> str | None:
    try:
        from pdfminer.pdfdocument import PDFDocument
        from pdfminer.pdfparser import PDFParser

        with open(path, "rb") as fh:
            info = PDFDocument(PDFParser(fh)).info
        raw: Any = info[0].get("Title") if info else None  # a PDF object, of any kind
        if hasattr(raw, "resolve"):
            raw = raw.resolve()
        if isinstance(raw, bytes):
            raw = raw.decode("utf-16") if raw.startswith(b"\xfe\xff") else raw.decode("latin-1")
    except Exception:  # noqa: BLE001 - broken metadata is not worth failing over
        return None
    title = str(raw).strip() if raw else ""
    return title if title and not title.lower().startswith(("untitled", "microsoft word")) else None


# -- Office files: one archive, read within limits -------------------------------------------------

# What one Office file (a zip of XML parts) may cost to read. documents.py's 200 MiB cap is on
# the compressed file, and XML compresses up to ~1000-fold: a 226 KB .docx held 64 MiB of XML
# (1.9M paragraphs, >600 s, 1 GB), a 449 KB .xlsx 2M rows (80 s, 1.2 GB). Numbers measured on
# real and generated files (docs/design.md, "Office files within limits"); the reason a file
# is skipped names the limit it passed.
#
# All parts together, as declared and as really expanded: a 100,000-row × 10-column sheet is
# 39 MiB as Excel writes it (51 MiB with inline strings), pictures barely compress (a deck of
# photographs expands to about its file size), so 256 MiB leaves ~5× over the largest real
# files while bounding the decompression (~1 s per 256 MiB).
MAX_EXPANDED_BYTES = 256 * 2**20
# XML a library parses whole into a tree (every part of a .docx or .pptx; a workbook's shared
# strings and styles), which takes ~13× its size in memory: a 300-page Word manual's 8.3 MiB
# of XML peaks at 127 MiB; 32 MiB (~1,100 such pages) caps a hostile file at ~550 MiB (31 MiB
# of minimal paragraphs peaked at 527 MiB).
MAX_XML_HELD_BYTES = 32 * 2**20
# Expanded ÷ compressed size of the whole file: real Office files measure 1.0–10.1×
# (tests/data, a 300-page manual, a 100,000-row sheet); the zip bombs seen, 290–400×.
MAX_RATIO = 100
# Rows in a workbook's sheets (all sheets together, blank rows in the XML included): 2× the
# 100,000-row sheet that must be read (20–45 s here); openpyxl keeps ~80 bytes per row of a
# sheet until the sheet is done, so this bounds its memory as well as the text.
MAX_ROWS = 200_000
# A Word file's body paragraphs and table rows: a 300-page manual has ~4,800 paragraphs and
# 1,200 table rows; 100,000 is ~15× that, ~7 s of reading (11 MiB of XML).
MAX_PARAGRAPHS = 100_000
# Slides of a deck: a 300-slide deck is a large one (1.1 s to read, ~4 ms a slide).
MAX_SLIDES = 2_000
# Wall-clock time for one file, checked between rows, paragraphs, shapes and on every read of
# the file: ~3× the 100,000-row sheet (20–45 s on 2 shared cores), the slowest real file.
MAX_SECONDS = 120.0
# Excel's widest row (XFD): a row with more cells is not a worksheet's.
EXCEL_COLUMNS = 16_384
_READ_CHUNK = 2**20


@dataclass(frozen=True)
class OfficeLimits:
    """The limits above; tests lower them to build small hostile files."""

    expanded_bytes: int = MAX_EXPANDED_BYTES
    xml_held_bytes: int = MAX_XML_HELD_BYTES
    ratio: float = MAX_RATIO
    rows: int = MAX_ROWS
    paragraphs: int = MAX_PARAGRAPHS
    slides: int = MAX_SLIDES
    seconds: float = MAX_SECONDS


OFFICE_LIMITS = OfficeLimits()


class _Budget:
    """One Office file's reading against its limits: a deadline from when it was opened, and
    counts of what was read."""

    def __init__(self, limits: OfficeLimits):
        self.limits = limits
        self._deadline = time.monotonic() + limits.seconds
        self._counts: Counter[str] = Counter()

    def check_time(self) -> None:
        if time.monotonic() > self._deadline:
            raise Unreadable(
                f"not read within {self.limits.seconds:g} s, the time allowed for one Office file"
            )

    def count(self, what: str, limit: int, where: str, n: int = 1) -> None:
        self.check_time()
        self._counts[what] += n
        _at_most(self._counts[what], limit, what, where)


def _at_most(n: int, limit: int, what: str, where: str) -> None:
    if n > limit:
        raise Unreadable(f"more than {limit:,} {what}, the most read from one {where}")


class _TimedFile(io.BufferedReader):
    """The file as zipfile and the libraries read it: every read checks the deadline, so what
    they do outside our loops (python-docx and python-pptx reading every part, openpyxl its
    shared strings and each sheet) stops at it too."""

    def __init__(self, path: Path, budget: _Budget):
        super().__init__(io.FileIO(path))
        self._budget = budget

    def read(self, size: int | None = -1, /) -> bytes:
        self._budget.check_time()
        return super().read(size)


@dataclass(frozen=True)
class _OfficeFormat:
    read: Callable[[IO[bytes], _Budget, Path], list[Converted]]
    # content types of parts the library streams rather than holding whole, each with a scan
    # that pass 1 feeds them through (bounding what streaming still keeps)
    streamed: dict[str, Callable[[_Budget], Callable[[bytes], None]]] = field(default_factory=dict)


def _read_office(path: Path, office: _OfficeFormat, limits: OfficeLimits) -> list[Converted]:
    """The one seam every Office format is read through. Pass 1 decompresses every part —
    what the zip declares is checked first, then what its streams really hold, since a zip
    can misstate its sizes — and counts it against the limits; the library then reads the
    same open file, each read under the deadline (zipfile never expands a part past its
    declared size, which pass 1 has confirmed)."""
    budget = _Budget(limits)
    with _TimedFile(path, budget) as stream:
        with zipfile.ZipFile(stream) as archive:
            _check_expansion(archive, path.stat().st_size, office, budget)
        stream.seek(0)
        return office.read(stream, budget, path)


def _check_expansion(
    archive: zipfile.ZipFile, file_bytes: int, office: _OfficeFormat, budget: _Budget
) -> None:
    members = archive.infolist()
    # what the zip declares, before a byte is expanded; the XML in it is known once
    # [Content_Types].xml is read, and checked on what the parts really hold
    _check_sizes([(m, m.file_size) for m in members], set(), file_bytes, budget.limits, "declares")
    types = _content_types(archive, {m.filename for m in members}, budget)
    held = {m.filename for m in members if _held_whole(m.filename, types.get(m.filename), office)}
    actual = _expanded_sizes(archive, members, types, office, budget)
    _check_sizes(actual, held, file_bytes, budget.limits, "expands to")
    for member, size in actual:
        if size != member.file_size:
            raise Unreadable(
                f"{member.filename} declares {member.file_size:,} bytes but holds "
                f"{size:,}: a zip that misstates its sizes"
            )


def _check_sizes(
    sizes: _Sizes, held: set[str], file_bytes: int, limits: OfficeLimits, verb: str
) -> None:
    total = sum(size for _, size in sizes)
    xml = sum(size for member, size in sizes if member.filename in held)
    if total > limits.expanded_bytes:
        raise Unreadable(
            f"{verb} {_size(total)}, more than the {_size(limits.expanded_bytes)} "
            "read from one Office file"
        )
    if xml > limits.xml_held_bytes:
        raise Unreadable(
            f"{verb} {_size(xml)} of XML, more than the "
            f"{_size(limits.xml_held_bytes)} read from one Office file"
        )
    if total > limits.ratio * max(file_bytes, 1):
        raise Unreadable(
            f"{verb} {_size(total)} from {_size(file_bytes)}, more than "
            f"{limits.ratio:g}-fold: a zip bomb, not a document"
        )


_Sizes = list[tuple[zipfile.ZipInfo, int]]


def _expanded_sizes(
    archive: zipfile.ZipFile,
    members: list[zipfile.ZipInfo],
    types: dict,
    office: _OfficeFormat,
    budget: _Budget,
) -> _Sizes:
    """What each part really expands to, reading stops once the total passes the limit (the
    list is then short, and its sum over the limit)."""
    sizes, left = [], budget.limits.expanded_bytes
    for member in members:
        scan = office.streamed.get(types.get(member.filename, ""))
        size = _stream_size(archive, member, left + 1, budget, scan(budget) if scan else None)
        sizes.append((member, size))
        left -= size
        if left < 0:
            break
    return sizes


def _stream_size(
    archive: zipfile.ZipFile,
    member: zipfile.ZipInfo,
    ceiling: int,
    budget: _Budget,
    scan: Callable[[bytes], None] | None,
) -> int:
    """Bytes the part's stream really expands to, up to ``ceiling``: opened with its declared
    size raised to the ceiling, zipfile decompresses the stream as it is rather than stopping
    where the entry says (and still checks the CRC of what it read)."""
    probe = copy.copy(member)
    probe.file_size = ceiling
    size = 0
    with archive.open(probe) as part:
        while size < ceiling and (chunk := part.read(_READ_CHUNK)):
            size += len(chunk)
            budget.check_time()
            if scan is not None:
                scan(chunk)
    return size


def _content_types(archive: zipfile.ZipFile, names: set[str], budget: _Budget) -> dict[str, str]:
    """Each part's content type from ``[Content_Types].xml`` (an override, else the default for
    its extension), as the libraries decide which parts to parse. Streamed, and only parts
    present are kept, so a hostile listing costs no more memory than the zip's own."""
    from lxml import etree

    if "[Content_Types].xml" not in names:
        return {}
    defaults, types = {}, {}
    with archive.open("[Content_Types].xml") as listing:
        for _, element in etree.iterparse(
            listing, events=("end",), resolve_entities=False, tag=("{*}Default", "{*}Override")
        ):
            budget.check_time()
            kind = element.get("ContentType", "")
            tag = element.tag
            assert isinstance(tag, str)  # as parsed (only one set by hand is ever not a str)
            if tag.endswith("Default"):
                defaults[element.get("Extension", "").lower()] = kind
            elif (name := element.get("PartName", "").lstrip("/")) in names:
                types[name] = kind
            element.clear()
            parent = element.getparent()
            while element.getprevious() is not None:
                assert parent is not None  # it has a sibling, so a parent
                del parent[0]
    for name in names - types.keys():
        types[name] = defaults.get(name.rpartition(".")[2].lower(), "")
    return types


def _held_whole(name: str, content_type: str | None, office: _OfficeFormat) -> bool:
    if content_type in office.streamed:
        return False
    return bool(re.search(r"[/+]xml$", content_type or "")) or name.endswith((".xml", ".rels"))


def _size(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB" if n >= 2**20 else f"{n / 2**10:,.0f} KiB"


# -- Word ------------------------------------------------------------------------------------------


def docx(stream: IO[bytes], budget: _Budget, path: Path) -> list[Converted]:
    import docx as python_docx

    document = python_docx.Document(stream)
    styles = _paragraph_styles(document)
    lines = list(_docx_lines(document, styles, budget))
    title = (document.core_properties.title or "").strip() or None
    return [Converted("\n\n".join(line for line in lines if line), title)]


def _docx_lines(
    document: WordDocument, styles: tuple[dict[str, str], str], budget: _Budget
) -> Iterator[str]:
    from docx.table import Table

    names, default = styles
    for block in document.element.body.iterchildren():
        tag = block.tag.rsplit("}", 1)[-1]
        if tag == "p":
            budget.count("paragraphs and table rows", budget.limits.paragraphs, "Word file")
            text = block.text.strip()
            level = _heading_level(names.get(block.style, default) if block.style else default)
            if text:
                yield f"{'#' * level} {text}" if level else text
        elif tag == "tbl":
            yield _table_text(_docx_rows(Table(block, document), budget))


def _docx_rows(table: WordTable, budget: _Budget) -> Iterator[list[str]]:
    for row in table.rows:
        budget.count("paragraphs and table rows", budget.limits.paragraphs, "Word file")
        yield [c.text for c in row.cells]


def _paragraph_styles(document: WordDocument) -> tuple[dict[str, str], str]:
    """Paragraph style names by id, and the default one's: what ``paragraph.style.name``
    answers, looked up once. python-docx searches all styles for the default on every
    paragraph without a style of its own: 85% of a 300-page manual's 8.6 s when asked per
    paragraph; looked up once, the manual reads in 2.6 s."""
    from docx.enum.style import WD_STYLE_TYPE

    first: dict = {}
    for style in document.styles:  # python-docx takes the first style of an id
        first.setdefault(style.style_id, style)
    names = {i: s.name or "" for i, s in first.items() if s.type == WD_STYLE_TYPE.PARAGRAPH}
    default = document.styles.default(WD_STYLE_TYPE.PARAGRAPH)
    return names, (default.name or "") if default is not None else ""


def _heading_level(style: str) -> int:
    if style == "Title":
        return 1
    found = re.match(r"Heading (\d)", style)
    return min(int(found.group(1)) + 1, 6) if found else 0


# -- spreadsheets ----------------------------------------------------------------------------------

_WORKSHEET = "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"


def xlsx(stream: IO[bytes], budget: _Budget, path: Path) -> list[Converted]:
    from openpyxl import load_workbook

    workbook = load_workbook(stream, read_only=True, data_only=True)  # read_only: streamed
    out = []
    try:
        for sheet in workbook.worksheets:
            # openpyxl yields every row a sheet's <dimension> declares, as wide as declared
            _at_most(sheet.max_row or 0, budget.limits.rows, "rows", "workbook")
            text = _rows_text(_sheet_rows(sheet, budget))
            if text:
                out.append(
                    Converted(
                        text,
                        f"{_stem(path)} — {sheet.title}",
                        key_suffix=f"#{sheet.title}",
                        extra={"sheet": sheet.title},
                    )
                )
    finally:
        workbook.close()
    if not out:
        raise Unreadable("the workbook has no cells with values")
    return out


def _sheet_rows(sheet: ReadOnlyWorksheet, budget: _Budget) -> Iterator[list[str]]:
    for row in sheet.values:  # the cells' values, row by row
        budget.check_time()
        yield [_cell(v) for v in row]


# A worksheet's row and cell tags, any namespace prefix; a tag cut between two chunks of the
# expanded stream is carried into the next unless longer than _TAG_CARRY (a prefix that long
# leaves room for few rows in MAX_EXPANDED_BYTES).
_ROW_TAG = re.compile(rb"<(?:[\w.-]+:)?row[\s/>]")
_CELL_TAG = re.compile(rb"<(?:[\w.-]+:)?c[\s/>]")
_TAG_CARRY = 4096


def _sheet_scan(budget: _Budget) -> Callable[[bytes], None]:
    """Counts a worksheet's rows, and each row's cells, as pass 1 expands it. openpyxl keeps
    every row element of a sheet (cleared, ~80 bytes) until the sheet is done — all of them
    before the first row is read, when the sheet has no <dimension> — and a row's cells until
    the row ends; MAX_ROWS and Excel's width bound both. Tags are found by pattern: exact for
    elements (a '<row' in a comment or CDATA counts too), 1 s for the 100,000-row sheet where
    lxml's parse took 5 s."""
    cells, carry = 0, b""

    def feed(chunk: bytes) -> None:
        nonlocal cells, carry
        text = carry + chunk
        cut = text.rfind(b"<")
        if cut < 0 or len(text) - cut > _TAG_CARRY:
            cut = len(text)
        text, carry = text[:cut], text[cut:]
        segments = _ROW_TAG.split(text)  # the first continues the row before the chunk
        budget.count("rows", budget.limits.rows, "workbook", len(segments) - 1)
        for i, segment in enumerate(segments):
            cells = (0 if i else cells) + len(_CELL_TAG.findall(segment))
            if cells > EXCEL_COLUMNS:
                raise Unreadable(f"a row of more than {EXCEL_COLUMNS:,} cells, Excel's most")

    return feed


def delimited(path: Path) -> list[Converted]:
    text = decode_bytes(path.read_bytes())
    delimiter = "\t" if path.suffix.lower() == ".tsv" else ","
    rows = ([c.strip() for c in row] for row in csv.reader(io.StringIO(text), delimiter=delimiter))
    # named as a workbook's sheet is: without a title the document would take its first heading,
    # the ``## rows 2–4`` label of its first block of rows
    return [Converted(_rows_text(rows), _stem(path))]


def _rows_text(rows: Iterable[list[str]]) -> str:
    """The first non-empty row is the header; every other row becomes ``header: value`` lines,
    a blank line between rows, ``## rows a–b`` every ``ROWS_PER_SECTION`` rows. Rows are taken
    as they come: a sheet is never held as a list of rows besides its text. A column headed by
    a marker that only numbers the rows (:func:`_row_counters`) is left out."""
    rows = iter(r for r in rows if any(r))
    header = next(rows, None)
    if header is None:
        return ""
    header = [h or f"column {i + 1}" for i, h in enumerate(header)]
    parts: list[str] = []
    start = 1
    left_out: set[int] | None = None
    while block := list(itertools.islice(rows, ROWS_PER_SECTION)):
        if left_out is None:
            left_out = _row_counters(header, block)
        parts.append(f"## rows {start + 1}–{start + len(block)}")
        parts.extend(_row_lines(header, row, left_out) for row in block)
        start += len(block)
    if start == 1:
        parts.append(" | ".join(header))
    return "\n\n".join(parts)


def _row_counters(header: list[str], block: list[list[str]]) -> set[int]:
    """Columns headed by a marker, not a label (``#property``, the marker of the Kagawa
    tables' header row, yaizu-*.xlsx), whose values in the first rows are whole numbers from
    0 or 1 up, each greater than the one before (1–31, 33, …: rows taken out). Such a column
    says where a row stands, which ``## rows`` says too; as ``#property: 6`` lines it put a
    Markdown-looking mark on every row (900 on the shared sheets' pages)."""
    counters = set()
    for i, name in enumerate(header):
        values = [_number(row[i]) if i < len(row) else "" for row in block]
        if not (name.startswith("#") and all(values)):
            continue
        numbers = [int(v) for v in values]
        if numbers[0] <= 1 and all(a < b for a, b in itertools.pairwise(numbers)):
            counters.add(i)
    return counters


def _number(cell: str) -> str:
    """The cell as decimal digits (full-width ones folded), or "" if it is not a number."""
    folded = unicodedata.normalize("NFKC", cell)
    return folded if folded.isdecimal() else ""


def _row_lines(header: list[str], row: list[str], left_out: set[int]) -> str:
    # a counting column's number is left out; anything else written there is kept
    return "\n".join(
        f"{header[i] if i < len(header) else f'column {i + 1}'}: {v}"
        for i, v in enumerate(row)
        if v and not (i in left_out and _number(v))
    )


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value).strip()


def _table_text(rows: Iterable[list[str]]) -> str:
    rows = [[c.strip() for c in r] for r in rows if any(c.strip() for c in r)]
    if len(rows) < 2:
        return "\n".join(" | ".join(r) for r in rows)
    header = rows[0]
    return "\n\n".join(
        "\n".join(
            f"{header[i] if i < len(header) else ''}: {v}".lstrip(": ")
            for i, v in enumerate(r)
            if v
        )
        for r in rows[1:]
    )


# -- slides ----------------------------------------------------------------------------------------


def pptx(stream: IO[bytes], budget: _Budget, path: Path) -> list[Converted]:
    from pptx import Presentation

    deck = Presentation(stream)
    _at_most(len(deck.slides), budget.limits.slides, "slides", "deck")
    parts: list[str] = []
    first_title = None
    for number, slide in enumerate(deck.slides, start=1):
        title = slide.shapes.title.text.strip() if slide.shapes.title is not None else ""
        first_title = first_title or title or None
        body = "\n\n".join(_slide_texts(slide, budget))
        parts.append(f"## Slide {number}" + (f": {title}" if title else "") + f"\n\n{body}")
    # a deck without a title anywhere is named by its file, not by its first ``## Slide 1``
    title = (deck.core_properties.title or "").strip() or first_title or _stem(path)
    return [
        Converted(
            "\n\n".join(parts),
            title,
            extra={"slides": len(deck.slides)},
            one_chunk_per_section=True,
        )
    ]


def _slide_texts(slide: Slide, budget: _Budget) -> list[str]:
    from pptx.shapes.autoshape import Shape  # the one kind of shape with a text frame
    from pptx.shapes.graphfrm import GraphicFrame  # the one kind that can hold a table

    texts = []
    for shape in slide.shapes:
        budget.check_time()
        if shape == slide.shapes.title:
            continue
        if isinstance(shape, Shape) and shape.text_frame.text.strip():
            texts.append(shape.text_frame.text.strip())
        elif isinstance(shape, GraphicFrame) and shape.has_table:
            texts.append(_table_text([[c.text for c in row.cells] for row in shape.table.rows]))
    notes = ""
    if slide.has_notes_slide and slide.notes_slide.notes_text_frame is not None:
        notes = slide.notes_slide.notes_text_frame.text.strip()
    return texts + ([f"Notes: {notes}"] if notes else [])


# -- HTML ------------------------------------------------------------------------------------------


def html(path: Path) -> list[Converted]:
    """A web page read as its reader sees it (ingest/htmltext.py): words apart at every block
    and cell, what it hides left out, an infobox as ``label: value`` lines."""
    from chiezo.ingest.htmltext import page_text

    page = page_text(read_text(path))
    return [Converted(page.text, page.title)]


def _clean(text: str) -> str:
    text = text.replace("\x00", "")
    return "\n".join(line.rstrip() for line in text.splitlines()).strip()


def _stem(path: Path) -> str:
    return path.stem.replace("_", " ").strip() or path.name


OFFICE_FORMATS = {
    ".docx": _OfficeFormat(docx),
    ".xlsx": _OfficeFormat(xlsx, {_WORKSHEET: _sheet_scan}),
    ".xlsm": _OfficeFormat(xlsx, {_WORKSHEET: _sheet_scan}),
    ".pptx": _OfficeFormat(pptx),
}
CONVERTERS = {
    ".pdf": pdf,
    ".html": html,
    ".htm": html,
    ".csv": delimited,
    ".tsv": delimited,
}
SUFFIXES = frozenset(CONVERTERS) | frozenset(OFFICE_FORMATS)
