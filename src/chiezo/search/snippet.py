"""Snippets: the stretch of a document where the query's words are densest, as plain text.

A snippet is read as a line of text (and the web page escapes it), so the markup of the stored
text must not reach it: a Markdown file's ``<!-- … -->`` blocks (the Rust book keeps its English
original in them), HTML tags, table pipes and rulers, code fences and backticks, heading marks.
Only the window around the hits is cleaned — a few hundred characters, never the whole body —
so the cleaning costs little next to finding the hits (numbers in docs/design.md).
"""

from __future__ import annotations

import re
from bisect import bisect_right

SNIPPET_CHARS = 160
_SCAN_LIMIT = 400_000  # beyond this a snippet is not worth scanning a huge page
_RAW_LIMIT = 16  # a window of markup is read on up to this many times the width for its text

# HTML elements by name: a tag is removed only when it names one, in lower case as Markdown
# writers write them, so that ``Vec<T>`` or ``Option<String>`` in prose stays as written.
_HTML_ELEMENTS = (
    "a abbr address article aside audio b bdi bdo big blockquote body br button caption center "
    "cite code col colgroup data dd del details dfn div dl dt em embed figcaption figure font "
    "footer form h1 h2 h3 h4 h5 h6 head header hr html i iframe img input ins kbd label legend "
    "li link main mark meta nav noscript object ol option p picture pre q rp rt ruby s samp "
    "script section select small source span strike strong style sub summary sup table tbody "
    "td template textarea tfoot th thead time title tr tt u ul var video wbr"
)
_TAG = re.compile(rf"</?({_HTML_ELEMENTS.replace(' ', '|')})\b(?:\s[^<>]*)?/?>")
# Tags that break a line leave a space (``a<br>b``); inline ones leave nothing (``<b>東京</b>都``).
_BREAKING = {
    "br",
    "p",
    "div",
    "li",
    "td",
    "th",
    "tr",
    "hr",
    "dd",
    "dt",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "table",
    "blockquote",
    "pre",
    "section",
    "article",
}
_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.S)  # an unclosed one runs past the window
_COMMENT_MARK = re.compile(r"<!--|-->")
# Whole lines of markup: code fences (with their info string), table rulers, thematic breaks.
_MARKUP_LINE = re.compile(
    r"^[ \t]*(?:`{3,}.*|~{3,}.*|\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)*\|?"
    r"|(?:[-*_][ \t]*){3,})$",
    re.M,
)
_QUOTE_MARK = re.compile(r"^[ \t]*(?:>[ \t]?)+", re.M)  # a block quote's marks, nested or not
_HEADING_MARK = re.compile(r"^[ \t]{0,3}#{1,6}(?=\s)", re.M)
_TABLE_ROW = re.compile(r"^[ \t]*\|.*$|^.*\|[ \t]*$", re.M)
_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
_LINK = re.compile(r"!?\[([^\]\n]*)\](?:\([^)\s]*(?:\s+\"[^\"]*\")?\)|\[[^\]\n]*\])")
# Stars only: underscores are as often part of a word (``__init__``, ``snake_case``).
_EMPHASIS = re.compile(r"(\*{1,3})(?=\S)(.+?)(?<=\S)\1")


def make_snippet(text: str, needles: list[str], width: int = SNIPPET_CHARS) -> str:
    """Return about ``width`` characters of ``text`` around the densest cluster of needles
    (case-insensitive), as plain text, with ``…`` where it was cut. Falls back to the start.
    Hits inside HTML comments count only when there are no others: a page never shows a
    comment, so a snippet quotes one only when the words are nowhere else."""
    return anchored_snippet(text, needles, width)[0]


def anchored_snippet(text: str, needles: list[str], width: int = SNIPPET_CHARS) -> tuple[str, int]:
    """``make_snippet``, and where in ``text`` it is anchored: the needle the densest cluster
    starts at (0 when no needle occurs and the snippet is the start). The anchor, not the
    window's start, says which section the snippet quotes (search/sections.py): the window
    may begin a line early, on the heading of the section before."""
    if not text:
        return "", 0
    haystack = text[:_SCAN_LIMIT]
    hits = _hits(haystack, needles)
    comments = _comment_spans(haystack) if "<!--" in haystack else []
    shown = [h for h in hits if not _inside(h[0], comments)] if comments else hits
    if not hits:
        return _window(text, 0, width, comments), 0
    anchor = _densest(shown or hits, width - 20)
    start = max(anchor - width // 4, 0)
    start = _line_start(text, start) if start > 0 else 0
    return _window(text, start, width, comments, keep_comments=not shown), anchor


def _hits(haystack: str, needles: list[str]) -> list[tuple[int, int]]:
    """(position, needle index) of every needle, sorted by position."""
    lowered = haystack.lower()
    hits: list[tuple[int, int]] = []
    for index, needle in enumerate(n.lower() for n in needles if n):
        start = lowered.find(needle)
        while start != -1 and len(hits) < 5000:
            hits.append((start, index))
            start = lowered.find(needle, start + 1)
    hits.sort()
    return hits


def _comment_spans(text: str) -> list[tuple[int, int]]:
    """Where the HTML comments are (str.find: a lazy regex took 130 µs on a Rust-book chapter)."""
    spans: list[tuple[int, int]] = []
    start = text.find("<!--")
    while start != -1:
        end = text.find("-->", start + 4)
        end = len(text) if end == -1 else end + 3
        spans.append((start, end))
        start = text.find("<!--", end)
    return spans


def _inside(position: int, spans: list[tuple[int, int]]) -> bool:
    at = bisect_right(spans, (position, float("inf"))) - 1
    return at >= 0 and spans[at][0] <= position < spans[at][1]


def _densest(hits: list[tuple[int, int]], span: int) -> int:
    """The first position of the window of ``span`` characters, starting at a hit, that holds
    the most distinct needles. One pass with counts: a set per window was quadratic in the hits
    of a long article (8.6 of a 38 ms hybrid query on the jawiki excerpt)."""
    counts = [0] * (max(n for _, n in hits) + 1)
    distinct = end = 0
    best_start, best_score = hits[0][0], -1
    for i, (pos, _) in enumerate(hits):
        while end < len(hits) and hits[end][0] <= pos + span:
            needle = hits[end][1]
            distinct += counts[needle] == 0
            counts[needle] += 1
            end += 1
        if distinct > best_score:
            best_start, best_score = pos, distinct
        elif distinct == best_score and pos - best_start <= span:
            # the same cluster, starting later and still holding as many: the snippet shows
            # from a little before its start, so a later start keeps the words in view —
            # 官報's 「一・五メートル」 140 characters after a 五 and an 一 of 第五十一条
            best_start = pos
        needle = hits[i][1]
        counts[needle] -= 1
        distinct -= counts[needle] == 0
    return best_start


def snippet_at(text: str, start: int, width: int = SNIPPET_CHARS) -> str:
    """About ``width`` characters of ``text`` from ``start`` as plain text: for a passage that
    matched by meaning (``start``: where the matching sentence begins)."""
    comments = _comment_spans(text[:_SCAN_LIMIT]) if "<!--" in text else []
    return _window(text, start, width, comments)


def past_headings(text: str, start: int) -> int:
    """``start`` moved past the heading lines (and blank lines) it begins at: a passage found
    by meaning often starts with its section's headings, which the hit shows as its section."""
    at = start
    while True:
        end = text.find("\n", at)
        line = text[at:] if end == -1 else text[at:end]
        if line.strip() and not _HEADING_MARK.match(line):
            return at
        if end == -1:
            return start  # nothing but headings: show them
        at = end + 1


def _window(
    text: str, start: int, width: int, comments: list[tuple[int, int]], keep_comments: bool = False
) -> str:
    """``width`` characters of plain text from ``start``, ``…`` marking a cut.
    ``keep_comments``: quote the words of HTML comments (without their marks) rather than
    leave them out."""
    if not keep_comments and _inside(start, comments):  # begin after the comment, not in it
        start = next(end for begin, end in comments if begin <= start < end)
    end = min(start + 2 * width, len(text))
    while True:  # markup shrinks a window: read on until there is text enough, or none left
        piece = plain_text(text[start:end], keep_comments=keep_comments)
        if len(piece) >= width or end == len(text) or end - start >= _RAW_LIMIT * width:
            break
        end = min(start + 2 * (end - start), len(text))
    prefix = "…" if start > 0 else ""
    suffix = "…" if len(piece) > width or end < len(text) else ""
    return f"{prefix}{piece[:width].rstrip()}{suffix}"


def _line_start(text: str, start: int) -> int:
    """Prefer to start after a line break or sentence end close to the window start."""
    window = text[max(start - 20, 0) : start + 20]
    for mark in ("\n", "。", ". "):
        at = window.find(mark)
        if at != -1:
            return max(start - 20, 0) + at + len(mark)
    return start


def plain_text(text: str, *, keep_comments: bool = False) -> str:
    """``text`` (Markdown, HTML-ish, or a Wikipedia article's ``## `` headings) as one line of
    plain text: comments, tags, fences, rulers, pipes, quote and heading marks, links' targets,
    emphasis stars and backticks gone.
    ``keep_comments``: an HTML comment's words stay, only its marks go."""
    if keep_comments:
        text = _COMMENT_MARK.sub(" ", text)
    elif "<!--" in text:
        text = _COMMENT.sub(" ", text)
    # Each pass only where its mark occurs: most windows (Wikipedia prose) have none of them.
    if "`" in text or "~~~" in text or "---" in text or "***" in text or "___" in text:
        text = _MARKUP_LINE.sub(" ", text)
    if ">" in text:
        text = _QUOTE_MARK.sub(" ", text)
    if "#" in text:
        text = _HEADING_MARK.sub(" ", text)
    if "|" in text:
        text = _TABLE_ROW.sub(lambda row: row.group(0).replace("|", " "), text)
    text = _without_code_marks(text) if "`" in text else _prose_plain(text)
    return " ".join(text.split())


def _without_code_marks(text: str) -> str:
    """Tags, links and emphasis marks removed outside code spans; code spans keep their text
    as written (``<T>``, ``*``) without the backticks."""
    out, last = [], 0
    for span in _CODE_SPAN.finditer(text):
        out += [_prose_plain(text[last : span.start()]), span.group(2)]
        last = span.end()
    out.append(_prose_plain(text[last:]))
    return "".join(out).replace("`", "")  # an unpaired backtick (a span cut by the window)


def _prose_plain(text: str) -> str:
    if "<" in text:
        text = _TAG.sub(lambda tag: " " if tag.group(1) in _BREAKING else "", text)
    if "[" in text:
        text = _LINK.sub(r"\1", text)
    if "*" in text:
        text = _EMPHASIS.sub(r"\2", text)
    return text
