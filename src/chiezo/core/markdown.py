"""Markdown (and plain text) → sections along headings → chunks of a useful size.

Why this shape (measured in the design notes behind Chiezo): fixed-length windows cut through
headings, lists and code, and the resulting fragments lose what they are about; chunks that
follow the document's own structure and carry their breadcrumb ("A > B > C") were found by
search far more reliably. The rules:

* headings are ATX (``#``..``######``) or setext (a line of ``===``/``---`` under a paragraph
  line) — but never inside a code fence (a ``#`` there is a shell comment), and an unclosed
  fence simply runs to the end of the file;
* each section is a chunk, except that small consecutive sections under the same parent merge
  up to ``TARGET_CHARS`` (headings stay inline as sub-headings);
* a section larger than ``MAX_CHARS`` is split on line boundaries, preferring blank lines, with
  the last few lines repeated at the start of the next piece; a single line longer than that
  (a Japanese paragraph has no line breaks) is split after sentence ends.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from chiezo.core.models import Chunk
from chiezo.core.textnorm import clipped

TARGET_CHARS = 800
MAX_CHARS = 1600
MIN_CHARS = 200  # a smaller group never stands alone when it can lead into the next
OVERLAP_LINES = 2
BREADCRUMB_SEPARATOR = " > "

_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_ATX_CLOSING = re.compile(r"[ \t]+#+$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_NOT_PARAGRAPH = re.compile(r"^\s*([-*+]\s|\d+[.)]\s|>|\||#|`{3}|~{3}|<)")
_SENTENCE_END = re.compile(r"(?<=[。．！？!?])|(?<=[.;:])\s")
_LINK = re.compile(r"(?<!!)\[([^\]\n]*)\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


@dataclass
class Section:
    level: int  # 0 = text before the first heading
    path: tuple[str, ...]  # heading titles from the outermost down to this one
    lines: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.lines).strip()


def parse_sections(text: str) -> list[Section]:
    """Split Markdown into sections at headings outside code fences."""
    sections = [Section(0, ())]
    stack: list[tuple[int, str]] = []
    fence: str | None = None
    in_comment = False
    for line in text.splitlines():
        if in_comment:  # an HTML comment is invisible text: no headings in it
            sections[-1].lines.append(line)
            in_comment = "-->" not in line
            continue
        if fence is not None:
            sections[-1].lines.append(line)
            stripped = line.strip()
            if stripped.startswith(fence) and set(stripped) == {fence[0]}:
                fence = None
            continue
        opened = _FENCE.match(line)
        if opened:
            fence = opened.group(1)
            sections[-1].lines.append(line)
            continue
        heading = _heading(line, sections[-1])
        if heading is None:
            sections[-1].lines.append(line)
            in_comment = _opens_comment(line)
            continue
        level, title, heading_line, setext = heading
        if setext:  # the previous line was the heading's text: move it out
            sections[-1].lines.pop()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        sections.append(Section(level, tuple(t for _, t in stack), [heading_line]))
    return [s for s in sections if s.text or s.level > 0]


def _heading(line: str, current: Section) -> tuple[int, str, str, bool] | None:
    """(level, title as plain text, the heading's line, whether it is a setext heading: the
    line before was its text)."""
    atx = _ATX.match(line)
    if atx:
        written = _ATX_CLOSING.sub("", atx.group(2) or "").strip()
        title = heading_text(written)
        level = len(atx.group(1))
        # the chunk's own heading line says what the breadcrumb says, not the markup
        shown = line if title == written else f"{'#' * level} {title}".rstrip()
        return level, title or "(untitled)", shown, False
    setext = _SETEXT.match(line)
    if setext and current.lines:
        previous = current.lines[-1]
        if (
            previous.strip()
            and not _NOT_PARAGRAPH.match(previous)
            and not (
                current.level > 0 and len(current.lines) == 1  # right under a heading line
            )
        ):
            level = 1 if setext.group(1)[0] == "=" else 2
            title = heading_text(previous.strip()) or "(untitled)"
            return level, title, f"{'#' * level} {title}", True
    return None


# Inline HTML in a heading, as the Rust book's translation writes a reading:
# ユニット<ruby>様<rp>(</rp><rt>よう</rt><rp>)</rp></ruby>構造体. A title and a breadcrumb are
# plain text (a page shows them escaped, a model reads them as they are), so a ruby's reading
# and its brackets go — 様 is the word, よう how to say it — and the tags of the other
# inline elements leave their text. Only names HTML gives inline elements are tags: in
# ``Rc<T>`` or Box<T>, <T> is a type.
_RUBY_READING = re.compile(r"<(rt|rp)\b[^<>]*>.*?</\1\s*>", re.I | re.S)
_INLINE_TAG = re.compile(
    r"</?(?:a|abbr|b|bdi|bdo|big|br|cite|code|del|dfn|em|font|i|img|ins|kbd|mark|q|rb|ruby|"
    r"s|samp|small|span|strong|sub|sup|time|tt|u|var|wbr)(?:\s[^<>]*)?/?>",
    re.I,
)
_HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
_CODE_SPAN = re.compile(r"(`+)(?:.*?[^`])?\1(?!`)")


def heading_text(written: str) -> str:
    """A heading as plain text: its inline HTML tags and comments left out, a ruby read as its
    base text; code spans (`` `Rc<T>` ``) as written."""
    if "<" not in written:
        return written
    parts, last = [], 0
    for code in _CODE_SPAN.finditer(written):
        parts.extend([_plain(written[last : code.start()]), code.group()])
        last = code.end()
    parts.append(_plain(written[last:]))
    return " ".join("".join(parts).split())


def _plain(html: str) -> str:
    return _INLINE_TAG.sub("", _RUBY_READING.sub("", _HTML_COMMENT.sub("", html)))


def _opens_comment(line: str) -> bool:
    start = line.rfind("<!--")
    return start != -1 and "-->" not in line[start:]


def document_title(sections: list[Section]) -> str | None:
    """The first heading of the highest level used: the H1 if there is one, else (a chapter
    that starts at ``##``) the first ``##``."""
    levels = [s.level for s in sections if s.level > 0]
    if not levels:
        return None
    top = min(levels)
    return next(s.path[-1] for s in sections if s.level == top)


def chunk_sections(
    sections: list[Section],
    target: int = TARGET_CHARS,
    max_chars: int = MAX_CHARS,
    *,
    merge: bool = True,
) -> list[Chunk]:
    """Chunks along the headings; ``merge=False`` keeps every section its own chunk (a PDF
    page, a slide: a citation must be able to name it)."""
    if not merge:
        return [c for section in sections for c in _emit([section], max_chars, target)]
    chunks: list[Chunk] = []
    group: list[Section] = []
    size = 0
    for section in sections:
        length = len(section.text)
        if group and _mergeable(group, section) and size + length <= target:
            group.append(section)
            size += length + 1
            continue
        # Headings with no text of their own belong with what follows them, not at the end
        # of the previous chunk.
        carried: list[Section] = []
        if group and size < MIN_CHARS and _mergeable(group, section):
            carried, group = group, []  # too small to stand alone: it leads into the next
        while group and _heading_only(group[-1]) and _is_ancestor(group[-1], section):
            carried.insert(0, group.pop())
        chunks.extend(_emit(group, max_chars, target))
        group = [*carried, section]
        size = sum(len(s.text) + 1 for s in group)
    chunks.extend(_emit(group, max_chars, target))
    return chunks


def _heading_only(section: Section) -> bool:
    return section.level > 0 and len(section.text.splitlines()) <= 1


def _is_ancestor(section: Section, other: Section) -> bool:
    return other.path[: len(section.path)] == section.path and other.path != section.path


def _mergeable(group: list[Section], section: Section) -> bool:
    """``section`` lies under the parent of the group's first section (a sibling or deeper)."""
    parent = group[0].path[:-1]
    return section.path[: len(parent)] == parent


def _breadcrumb(group: list[Section]) -> str:
    """The heading path shared by the sections that have text (headings with nothing under
    them only lead into the others)."""
    with_text = [s for s in group if not _heading_only(s)] or group
    common = list(with_text[0].path)
    for section in with_text[1:]:
        i = 0
        while i < len(common) and i < len(section.path) and common[i] == section.path[i]:
            i += 1
        del common[i:]
    if not common:
        common = list(next((s.path for s in group if s.path), ()))
    return BREADCRUMB_SEPARATOR.join(common)


def _emit(group: list[Section], max_chars: int, target: int) -> list[Chunk]:
    if not group:
        return []
    text = "\n\n".join(s.text for s in group if s.text).strip()
    if not text:
        return []
    breadcrumb = _breadcrumb(group)
    if len(text) <= max_chars:
        return [Chunk(text=text, heading_path=breadcrumb)]
    return [Chunk(text=p, heading_path=breadcrumb) for p in split_long(text, max_chars, target)]


def split_long(text: str, max_chars: int = MAX_CHARS, target: int = TARGET_CHARS) -> list[str]:
    """Split on line boundaries into pieces of at most ``max_chars``, preferring blank lines
    once a piece has reached ``target``, repeating the last lines of one piece in the next."""
    lines: list[str] = []
    for line in text.splitlines():
        lines.extend(_split_line(line, max_chars // 2) if len(line) > max_chars // 2 else [line])
    pieces: list[list[str]] = []
    current: list[str] = []
    size = 0
    for line in lines:
        at_paragraph_break = not line.strip() and size >= target
        if current and (size + len(line) + 1 > max_chars or at_paragraph_break):
            pieces.append(current)
            current = _overlap(current, max_chars // 4)
            size = sum(len(x) + 1 for x in current)
            if at_paragraph_break:
                continue
        current.append(line)
        size += len(line) + 1
    if any(x.strip() for x in current):
        pieces.append(current)
    return [p for p in ("\n".join(piece).strip() for piece in pieces) if p]


def _overlap(lines: list[str], budget: int) -> list[str]:
    tail = [x for x in lines if x.strip()][-OVERLAP_LINES:]
    while tail and sum(len(x) + 1 for x in tail) > budget:
        tail = tail[1:]
    return list(tail)


def _split_line(line: str, limit: int) -> list[str]:
    """A very long line → sentences (after 。！？ or . followed by space), packed up to
    ``limit``; a sentence longer than that is cut hard."""
    parts = [p for p in _SENTENCE_END.split(line) if p]
    out: list[str] = []
    current = ""
    for part in parts:
        while len(part) > limit:
            if current:
                out.append(current)
                current = ""
            out.append(part[:limit])
            part = part[limit:]
        if len(current) + len(part) > limit and current:
            out.append(current)
            current = ""
        current += part
    if current:
        out.append(current)
    return out


def markdown_links(text: str) -> list[str]:
    """Targets of inline links ``[text](target)``, images excluded."""
    return [m.group(2) for m in _LINK.finditer(text)]


def opening_paragraph(
    sections: list[Section], limit: int = 400, *, soft_wraps: bool = False
) -> str:
    """The first paragraph of prose: not a heading, fence, list, table or HTML line, its
    lines joined by a space. ``soft_wraps``: the text is Markdown as written by hand, where a
    line break inside a paragraph is where the author's editor wrapped, not a break in the
    text (the Rust book's translation: 説明が許されることもあります。/ このような場合; the shared
    Markdown has 3,698 line breaks between two Japanese characters in its paragraphs), so one
    between two Japanese characters joins them with nothing. Text
    converted from a PDF or an Office file breaks a line only where the document does."""
    for section in sections:
        paragraph: list[str] = []
        fence = skipping = False
        for line in section.lines:
            stripped = line.strip()
            if _FENCE.match(line):
                fence = not fence
                continue
            if fence or _ATX.match(line):
                continue
            if not stripped:
                if paragraph:
                    break
                skipping = False
                continue
            # a list item or table row, and the lines that continue it, are not prose
            if not paragraph and (skipping or _NOT_PARAGRAPH.match(line)):
                skipping = True
                continue
            paragraph.append(stripped)
        if paragraph:
            text = _join_lines(paragraph) if soft_wraps else " ".join(paragraph)
            return clipped(text, limit)
    return ""


def _join_lines(lines: list[str]) -> str:
    text = lines[0]
    for line in lines[1:]:
        text += ("" if _wide(text[-1]) and _wide(line[0]) else " ") + line
    return text


def _wide(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F") and not char.isspace()
