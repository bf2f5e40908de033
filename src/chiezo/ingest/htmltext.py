"""An HTML page → Markdown-shaped text that keeps its words apart and its facts in rows.

What a reader of the page sees, as text the chunker reads (core/markdown.py):

* every block and table-cell boundary (``p div li td th tr br h1–h6 dd dt figure …``)
  separates words; inline elements (``a b i span …``) add nothing. Reading an element's
  ``text_content()`` instead would glue a Kiwix infobox's list into
  ``musiciansingersongwritercomposer`` and its cells into ``September 23, 1930Albany, Georgia``;
* what the page does not show is left out, not glued to its neighbours: ``display:none``
  (Wikipedia's hidden ISO dates, ``(1930-09-23)September 23, 1930``), ``<script>``/``<style>``,
  edit links, reference markers ``[1]`` and their back-links ``↑``, navigation boxes, and a
  Kiwix file's ``<!--htdig_noindex-->`` parts (its attribution footer);
* headings are ``## Heading`` lines; an ``<h1>`` that repeats the page's title is left out
  (the title is the document's; in the body it would read as a literal ``# Ray Charles``);
* a table of label/value rows (an infobox) reads ``Label: value`` lines, and a cell of
  several values (an ``hlist``) reads ``value, value, value``; a table with a header row
  reads one record per row, ``Header: value`` lines (as formats.py's spreadsheets do); a
  table that lays a page out (headings or paragraphs in its cells) is read as the page;
* lists are ``- item`` lines, ``<pre>`` a fenced block, everything else paragraphs.

Markup that defeats the parser degrades to its words as one paragraph, never an error.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from lxml.html import HtmlElement

# Elements that start and end a block: a word never runs across their edges.
BLOCK_TAGS = frozenset(
    [
        "address",
        "article",
        "blockquote",
        "body",
        "caption",
        "center",
        "dd",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "frameset",
        "hgroup",
        "hr",
        "html",
        "legend",
        "li",
        "main",
        "menu",
        "ol",
        "option",
        "p",
        "pre",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
    ]
)
HEADINGS = {f"h{n}": n for n in range(1, 7)}
# Never shown as the page's text: code, styles, forms, and the page furniture around the
# content (head, navigation, header, footer, aside).
DROPPED_TAGS = frozenset(
    [
        "script",
        "style",
        "noscript",
        "template",
        "head",
        "title",
        "nav",
        "header",
        "footer",
        "aside",
        "form",
        "button",
        "select",
        "textarea",
        "iframe",
        "object",
        "embed",
        "svg",
        "canvas",
    ]
)
# MediaWiki's classes for what is not the article: "[edit]" links (mw-editsection), the
# screen-only furniture MediaWiki marks ``noprint`` ("From Wikibooks, open books…", jump
# links), the print-only "Retrieved from https://…" (printfooter, hidden on screen by its
# style sheet), the "^ a b" back-links of a reference list, and navigation boxes — in the
# 2015 Ray Charles ZIM 138 tables of every title of a topic, the same under each article.
DROPPED_CLASSES = frozenset(
    {
        "mw-editsection",
        "noprint",
        "mw-jump-link",
        "printfooter",
        "mw-cite-backlink",
        "navbox",
        "vertical-navbox",
    }
)
# What stands beside the lead rather than in it: MediaWiki's pictures (a ``thumb`` precedes the
# lead in 103 of the 236 articles of the 2015 cr ZIM) and "For other uses, see …" notes.
BESIDE_CLASSES = frozenset({"thumb", "hatnote"})
NOINDEX_START, NOINDEX_END = "htdig_noindex", "/htdig_noindex"  # Kiwix: not the article's text

_HIDDEN_STYLE = re.compile(r"(?:^|;)\s*(?:display\s*:\s*none|visibility\s*:\s*hidden)", re.I)
_MARKER = re.compile(r"\[[^\[\]]{1,20}\]")  # a reference marker: [1], [a], [note 3]
_LINE_BREAK = "\u2028"  # a <br> inside a run of inline text, until the run is split into lines
_SPACES = re.compile(r"[^\S\u2028]+")
# A line of text the chunker would read as structure: a heading, a fence, a setext underline.
_STRUCTURAL = re.compile(r"^ {0,3}(?:#{1,6}(?:\s|$)|`{3}|~{3}|=+\s*$|-+\s*$)")
_TITLE_SUFFIX = re.compile(r"\s+[-–—|·:]\s")  # "Page - Site name" after a repeated title
_TEXTY = frozenset({"prose", "text", "line"})


@dataclass
class PageText:
    title: str | None  # the page's <title>
    text: str  # Markdown-shaped: ## headings, - items, paragraphs
    links: list[str] = field(default_factory=list)  # href of every link in the page's content


@dataclass
class _Block:
    kind: str  # prose (a <p>), text, heading, item, line (a table row), record, pre, break
    text: str
    level: int = 0  # a heading's level; an item's depth
    marker: str = "-"  # an item's bullet or number
    source: HtmlElement | None = None  # the element the block's text came from


_BREAK = _Block("break", "")  # an empty block element: still a boundary between words
_Item = str | _Block  # the pieces of an element: inline text, or blocks


def page_text(markup: str, title: str | None = None) -> PageText:
    """The page's text; ``title`` is the name the page is known by (an ``<h1>`` that repeats
    it, or the page's ``<title>``, is left out of the text)."""
    try:
        return _Page(markup, title).read()
    except Exception:  # noqa: BLE001 - markup that defeats lxml must not stop a build
        return PageText(None, markup_words(markup))


def markup_words(markup: str) -> str:
    """The words of markup the parser gave up on: tags and what scripts and styles hold out."""
    text = re.sub(r"(?is)<(script|style)\b.*?</\1\s*>|<!--.*?-->", " ", markup)
    text = html.unescape(re.sub(r"<[^>]*>", " ", text))
    return " ".join(text.split())


class _Page:
    def __init__(self, markup: str, title: str | None):
        self.markup = markup
        self.titles = {_normal(title)} if title and title.strip() else set()
        self.links: list[str] = []
        self.marked_noindex = False  # the page marks its furniture (htdig_noindex)

    def read(self) -> PageText:
        import lxml.html

        if not self.markup.strip():
            return PageText(None, "")
        # bytes with a stated encoding: a str with an XML declaration is refused by lxml, and
        # a page's own <meta charset> must not re-decode text that is already decoded
        parser = lxml.html.HTMLParser(encoding="utf-8")
        tree = lxml.html.document_fromstring(self.markup.encode("utf-8", "replace"), parser=parser)
        if any(e.level_name == "FATAL" for e in parser.error_log):
            # libxml2 stops at 256 nested elements and drops the rest of the page: its words
            return PageText(None, markup_words(self.markup))
        page_title = " ".join((tree.findtext(".//title") or "").split()) or None
        if page_title:
            self.titles.add(_normal(page_title))
        root = (
            tree.xpath("//main")
            or tree.xpath("//*[@role='main']")
            or tree.xpath("//article")
            or tree.xpath("//body")
            or [tree]
        )[0]
        blocks = [b for b in self._blocks(self._items(root), "text", root) if b.kind != "break"]
        blocks = self._without_footer(blocks)
        return PageText(page_title, _render(_lead_first(blocks)), self.links)

    # -- walking the tree: every element becomes inline text or blocks ----------------------

    def _items(self, element: HtmlElement) -> list[_Item]:
        """The pieces of an element's content, in order, its children's tails included."""
        out: list[_Item] = [element.text] if element.text else []
        skipping = False
        for child in element:
            if not isinstance(child.tag, str):  # a comment or processing instruction
                marker = (child.text or "").strip() if child.tag is _comment_tag() else ""
                if marker == NOINDEX_START:
                    skipping = self.marked_noindex = True
                elif marker == NOINDEX_END:
                    skipping = False
            elif not skipping:
                out.extend(self._element(child))
            if child.tail and not skipping:
                out.append(child.tail)
        return out

    def _element(self, element: HtmlElement) -> list[_Item]:
        tag = _name(element)
        if tag in DROPPED_TAGS or _hidden(element):
            return []
        if _dropped_class(element):
            self._note_links(element)  # a navbox still links the page to its topic
            return [_BREAK] if tag in BLOCK_TAGS else []
        if tag == "a":
            href = element.get("href")
            if href:
                self.links.append(href)
            if _back_link(element, href):
                return []
        if tag == "sup" and _reference_marker(element):
            return []
        if tag == "br":
            return [_LINE_BREAK]
        if tag in HEADINGS:
            return self._heading(element, HEADINGS[tag])
        if tag == "table":
            return self._table(element)
        if tag == "pre":
            text = self._pre_text(element)
            return [_Block("pre", text, source=element)] if text.strip() else [_BREAK]
        if tag in ("ul", "ol", "menu", "dir"):
            return self._list(element, ordered=tag == "ol")
        if tag == "li":
            return self._list_item(element)
        if tag in BLOCK_TAGS:
            blocks = self._blocks(self._items(element), "prose" if tag == "p" else "text", element)
            return [*blocks] or [_BREAK]
        return self._items(element)

    def _note_links(self, element: HtmlElement) -> None:
        self.links.extend(href for a in element.iter("a") if (href := a.get("href")))

    def _blocks(self, items: list[_Item], kind: str, source: HtmlElement) -> list[_Block]:
        """Runs of inline text become blocks of ``kind``; blocks already made stay."""
        out: list[_Block] = []
        run: list[str] = []

        def flush() -> None:
            text = _collapse("".join(run))
            if text:
                out.append(_Block(kind, text, source=source))
            run.clear()

        for item in items:
            if isinstance(item, str):
                run.append(item)
            else:
                flush()
                out.append(item)
        flush()
        return out

    def _heading(self, element: HtmlElement, level: int) -> list[_Item]:
        text = " ".join(_texts(self._blocks(self._items(element), "text", element)))
        text = " ".join(text.split())
        if not text or (level == 1 and self._is_title(text)):
            return [_BREAK]
        return [_Block("heading", text, level=level, source=element)]

    def _is_title(self, heading: str) -> bool:
        """The heading repeats the page's title ("Ray Charles"), or the start of a <title>
        that names the site after it ("Offline Wikipedia - Wikibooks, open books…")."""
        heading = _normal(heading)
        return any(
            t == heading or (t.startswith(heading) and _TITLE_SUFFIX.match(t[len(heading) :]))
            for t in self.titles
        )

    def _pre_text(self, element: HtmlElement) -> str:
        """Preformatted text as written, less what is hidden in it."""
        parts: list[str] = []
        for item in self._items(element):
            parts.append(item if isinstance(item, str) else "\n" + item.text + "\n")
        return "".join(parts).replace(_LINE_BREAK, "\n").strip("\n")

    # -- lists -------------------------------------------------------------------------------

    def _list(self, element: HtmlElement, *, ordered: bool) -> list[_Item]:
        out: list[_Block] = []
        number = 0
        for block in self._blocks(self._items(element), "text", element):
            if block.kind in _TEXTY:  # text straight inside the list: an item of its own
                block = _Block("item", _one_line(block.text), source=block.source)
            if block.kind == "item" and block.level == 0 and ordered:
                number += 1
                block = replace(block, marker=f"{number}.")
            if block.kind != "break":
                out.append(block)
        return [*out] or [_BREAK]

    def _list_item(self, element: HtmlElement) -> list[_Item]:
        """``- the item's text``, then its sublists one level deeper."""
        blocks = [
            b for b in self._blocks(self._items(element), "text", element) if b.kind != "break"
        ]
        head: list[str] = []
        while blocks and blocks[0].kind in _TEXTY:
            head.append(blocks.pop(0).text)
        out = [_Block("item", _join_parts(_lines(head)), source=element)] if head else []
        for block in blocks:
            if block.kind == "item":
                out.append(replace(block, level=block.level + 1))
            elif block.kind in _TEXTY:  # text after a sublist: an item at this level
                out.append(_Block("item", _one_line(block.text), source=block.source))
            else:
                out.append(block)
        return [*out] or [_BREAK]

    # -- tables ------------------------------------------------------------------------------

    def _table(self, element: HtmlElement) -> list[_Item]:
        rows = _own_rows(element)
        out: list[_Block] = []
        for caption in element.findall("caption"):
            out.extend(b for b in self._blocks(self._items(caption), "line", caption))
        if _lays_out(element, rows):
            for row in rows:
                for cell in _cells(row):
                    out.extend(self._blocks(self._items(cell), "text", cell))
        else:
            out.extend(self._records(element, self._grid(rows)))
        out = [b for b in out if b.kind != "break"]
        return [*out] or [_BREAK]

    def _grid(self, rows: list[HtmlElement]) -> list[list[_Cell]]:
        """Each row's cells at their columns, a cell spanning rows repeated in each."""
        grid: list[list[_Cell]] = []
        pending: dict[int, tuple[int, _Cell]] = {}  # column → (rows still spanned, cell)
        for row in rows:
            placed: list[_Cell] = []
            column = 0
            for element in _cells(row):
                column = _carry(pending, placed, column)
                header = _name(element) == "th"
                lines = _lines(_texts(self._blocks(self._items(element), "text", element)))
                # a header's lines are one name ("Peak<br>position"); a value's, several values
                text = " ".join(lines) if header else _join_parts(lines)
                cell = _Cell(text, header, column, _span(element.get("colspan"), 1000))
                placed.append(cell)
                down = _span(element.get("rowspan"), 10_000)
                if down > 1:
                    pending[column] = (down - 1, cell)
                column += cell.span
            for rest in sorted(pending):  # spanned cells right of the row's last own cell
                if rest >= column:
                    column = _carry(pending, placed, rest)
            grid.append(placed)
        return grid

    def _records(self, table: HtmlElement, grid: list[list[_Cell]]) -> list[_Block]:
        """A row under a header row → ``Header: value`` lines (a record); a row of a label
        and values → ``Label: value``; a row of one cell across the table → that line."""
        width = max((c.column + c.span for row in grid for c in row), default=0)
        headers: dict[int, str] = {}
        out: list[_Block] = []
        after_data = False
        for row in grid:
            cells = [c for c in row if c.text]
            if not cells:
                continue
            if len(cells) >= 2 and all(c.header for c in row):
                if after_data:  # a header row further down starts a new set of columns
                    headers, after_data = {}, False
                for c in cells:
                    for column in range(c.column, c.column + c.span):
                        known = headers.get(column)
                        headers[column] = (
                            c.text if not known or known == c.text else known + " " + c.text
                        )
                continue
            after_data = True
            if len(cells) == 1 and (cells[0].span >= width > 1 or not headers):
                out.append(_Block("line", cells[0].text, source=table))
            elif headers:
                lines = []
                for c in cells:
                    label = " ".join(
                        dict.fromkeys(
                            headers[k] for k in range(c.column, c.column + c.span) if k in headers
                        )
                    )
                    lines.append(f"{label}: {c.text}" if label and label != c.text else c.text)
                kind = "record" if len(lines) > 1 else "line"
                out.append(_Block(kind, "\n".join(lines), source=table))
            elif cells[0].header and len(cells) > 1:
                values = " | ".join(c.text for c in cells[1:])
                out.append(_Block("line", f"{cells[0].text}: {values}", source=table))
            else:
                out.append(_Block("line", " | ".join(c.text for c in cells), source=table))
        return out

    # -- the page around the article ----------------------------------------------------------

    def _without_footer(self, blocks: list[_Block]) -> list[_Block]:
        """Without the attribution footer of a Kiwix file that does not mark it: Kiwix's
        mwoffliner ended every article of its 2015 files with a ``<div>`` of only links out of
        the archive ("This article is issued from Wikipedia … Creative Commons…"), the part
        its later files put inside ``htdig_noindex`` (320 of the 321 articles of the two 2015
        ZIMs in shared/data end so, all but a main page that has no footer; the 2017 and 2020
        files mark theirs)."""
        if self.marked_noindex or not blocks:
            return blocks
        last = blocks[-1]
        source = last.source
        if source is None or not isinstance(source.tag, str) or source.tag.lower() != "div":
            return blocks
        hrefs = [a.get("href") or "" for a in source.iter("a")]
        if len(hrefs) >= 2 and all("://" in h for h in hrefs):
            return blocks[:-1]
        return blocks


@dataclass
class _Cell:
    text: str
    header: bool  # a <th>
    column: int
    span: int  # columns


def _carry(pending: dict[int, tuple[int, _Cell]], placed: list[_Cell], column: int) -> int:
    """Place the cells of rows above that span down into ``column`` (and on); the column
    after them."""
    while column in pending:
        left, cell = pending.pop(column)
        placed.append(replace(cell, column=column))
        if left > 1:
            pending[column] = (left - 1, cell)
        column += cell.span
    return column


def _comment_tag():
    from lxml import etree

    return etree.Comment


def _name(element: HtmlElement) -> str:
    """The element's tag in lower case; "" for a comment or a processing instruction (lxml
    gives those a function as their tag)."""
    return element.tag.lower() if isinstance(element.tag, str) else ""


def _hidden(element: HtmlElement) -> bool:
    return element.get("hidden") is not None or bool(
        _HIDDEN_STYLE.search(element.get("style") or "")
    )


def _dropped_class(element: HtmlElement) -> bool:
    classes = element.get("class")
    if not classes:
        return False
    return not DROPPED_CLASSES.isdisjoint(classes.split())


def _reference_marker(sup: HtmlElement) -> bool:
    """``<sup><a href="#cite_note-1">[1]</a></sup>``: a marker pointing to a spot in a page
    (a saved page spells the same link ``https://…/Page#cite_note-1``)."""
    text = " ".join(sup.text_content().split())
    return bool(_MARKER.fullmatch(text)) and any(
        "#" in (a.get("href") or "") for a in sup.iter("a")
    )


def _back_link(anchor: HtmlElement, href: str | None) -> bool:
    """A link to a spot in a page shown as a symbol only: a reference's ``↑``/``^``."""
    if not href or "#" not in href:
        return False
    text = anchor.text_content()
    return bool(text.strip()) and not any(ch.isalnum() for ch in text)


def _own_rows(table: HtmlElement) -> list[HtmlElement]:
    """The table's rows, not those of tables inside its cells."""
    rows = []
    for child in table:
        if not isinstance(child.tag, str) or _hidden(child):
            continue
        tag = child.tag.lower()
        if tag == "tr":
            rows.append(child)
        elif tag in ("thead", "tbody", "tfoot"):
            rows.extend(
                r
                for r in child
                if isinstance(r.tag, str) and r.tag.lower() == "tr" and not _hidden(r)
            )
    return rows


def _cells(row: HtmlElement) -> list[HtmlElement]:
    return [
        c
        for c in row
        if isinstance(c.tag, str) and c.tag.lower() in ("td", "th") and not _hidden(c)
    ]


def _lays_out(table: HtmlElement, rows: list[HtmlElement]) -> bool:
    """A table that lays out a page rather than holding data: a cell holds a heading or
    paragraphs, or the table is a single cell (a frame around text)."""
    cells = [c for row in rows for c in _cells(row)]
    if len(cells) == 1:
        return True
    for cell in cells:
        inner = [e.tag.lower() for e in cell.iter() if isinstance(e.tag, str)]
        if any(t in HEADINGS for t in inner) or inner.count("p") >= 2:
            return True
    return False


def _span(value: str | None, limit: int) -> int:
    digits = re.match(r"\s*(\d+)", value or "")
    return min(max(int(digits.group(1)), 1), limit) if digits else 1


def _texts(blocks: list[_Block]) -> list[str]:
    return [b.text for b in blocks if b.text]


def _lines(texts: list[str]) -> list[str]:
    return [line.strip() for text in texts for line in text.splitlines() if line.strip()]


def _one_line(text: str) -> str:
    return _join_parts(_lines([text]))


def _join_parts(parts: list[str]) -> str:
    """Values of one cell or item in one line: ``musician, singer`` — or ``;`` between
    values that hold commas themselves (``September 23, 1930; Albany, Georgia``). A part in
    parentheses qualifies the one before it (``"Ruby" (1960)``); a part that ends in a
    separator of its own is followed by a space. A full stop is no separator: "Warner Bros."
    is one value of a list."""
    parts = [p for p in parts if p]
    if not parts:
        return ""
    separator = "; " if any("," in p for p in parts) else ", "
    out = parts[0]
    for part in parts[1:]:
        out += (" " if part.startswith("(") or out[-1] in ",;:、" else separator) + part
    return out


def _collapse(text: str) -> str:
    """Runs of white space → one space; ``<br>`` → a line break; empty lines dropped."""
    lines = (_SPACES.sub(" ", line).strip() for line in text.split(_LINE_BREAK))
    return "\n".join(line for line in lines if line)


def _normal(title: str) -> str:
    return " ".join(title.replace("_", " ").split()).casefold()


def _lead_first(blocks: list[_Block]) -> list[_Block]:
    """The lead's first paragraph first, when only what stands beside it on the page comes
    before it in the HTML (an infobox, a picture, a hatnote): the opening is the body's first
    paragraph (core/markdown.opening_paragraph reads it; the doc page shows it once). In 67 of
    the 85 articles of the 2015 Ray Charles ZIM an infobox precedes the lead, and the opening
    would be its first cell."""
    for i, block in enumerate(blocks):
        if block.kind == "prose":
            return [block, *blocks[:i], *blocks[i + 1 :]] if i else blocks
        if not _beside(block):
            break
    return blocks


def _beside(block: _Block) -> bool:
    """A table's rows, or the text of a figure or hatnote (MediaWiki's ``thumb``)."""
    if block.kind in ("line", "record"):
        return True
    if block.source is None:
        return False
    for element in (block.source, *block.source.iterancestors()):
        if element.tag == "figure" or not BESIDE_CLASSES.isdisjoint(
            (element.get("class") or "").split()
        ):
            return True
    return False


def _render(blocks: list[_Block]) -> str:
    paragraphs: list[str] = []
    previous = ""
    for block in blocks:
        if block.kind == "heading":
            text = f"{'#' * block.level} {block.text}"
        elif block.kind == "item":
            text = f"{'  ' * block.level}{block.marker} {_one_line(block.text)}"
        elif block.kind == "pre":
            fence = "`" * max(
                3, 1 + max((len(r) for r in re.findall(r"`+", block.text)), default=0)
            )
            text = f"{fence}\n{block.text}\n{fence}"
        else:
            text = "\n".join(_literal(line) for line in block.text.splitlines())
        if block.kind in ("item", "line") and block.kind == previous:
            paragraphs[-1] += "\n" + text  # a list, or an infobox's rows: one paragraph
        else:
            paragraphs.append(text)
        previous = block.kind
    return "\n\n".join(paragraphs)


def _literal(line: str) -> str:
    """A line of the page's text that would read as Markdown structure, escaped."""
    return "\\" + line.lstrip() if _STRUCTURAL.match(line) else line
