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
from dataclasses import dataclass, field

from chiezo.core.models import Chunk

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
        level, title, setext_line = heading
        if setext_line:  # the previous line was the heading's text: move it out
            sections[-1].lines.pop()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        heading_line = setext_line or line
        sections.append(Section(level, tuple(t for _, t in stack), [heading_line]))
    return [s for s in sections if s.text or s.level > 0]


def _heading(line: str, current: Section) -> tuple[int, str, str | None] | None:
    atx = _ATX.match(line)
    if atx:
        title = _ATX_CLOSING.sub("", atx.group(2) or "").strip()
        return len(atx.group(1)), title or "(untitled)", None
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
            return level, previous.strip(), f"{'#' * level} {previous.strip()}"
    return None


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


def opening_paragraph(sections: list[Section], limit: int = 400) -> str:
    """The first paragraph of prose: not a heading, fence, list, table or HTML line."""
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
            text = " ".join(paragraph)
            return text if len(text) <= limit else text[: limit - 1] + "…"
    return ""
