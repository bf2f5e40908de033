"""Wikitext tables → "header: value" lines, or nothing.

A table's cells read in a row, without their headers, are debris ("147 / 145 / 空 / 知120") or
worse: a number beside the wrong label. So a table is kept only when it has a header row, and
then each data row becomes one line pairing every cell with its column's header. Spans are
resolved on a grid first — a ``rowspan`` cell's value belongs to the rows below it, a
``colspan`` cell's to the columns beside it — so a value is never paired with the wrong header;
a row that still does not fit the headers is left out.
"""

from __future__ import annotations

from collections.abc import Callable

from mwparserfromhell.nodes import Tag, Text

MAX_SPAN = 50  # a span larger than this is a layout trick, not data


def table_lines(table: Tag, render: Callable) -> list[str]:
    """The table's data rows as ``header: value; header: value`` lines (``render`` turns a
    cell's contents into text); [] when the table has no header row."""
    rows = _grid(_rows(table), render)
    while rows and rows[0][2]:
        rows = rows[1:]  # a title row across the table, above its headers
    if not rows or not rows[0][1]:
        return []
    headers = [text for text, _ in rows[0][0]]
    out = []
    for cells, is_header, note in rows[1:]:
        if note:  # one cell across the columns: a remark on the rows, not a value of each
            out.append(note)
            continue
        if is_header or len(cells) != len(headers):
            continue
        pairs = [f"{h}: {v}" for h, (v, _) in zip(headers, cells, strict=True) if h and v]
        if pairs:
            out.append("; ".join(pairs))
    return out


def _rows(table: Tag) -> list[list[Tag]]:
    """The cells of each row; cells written before the first ``|-`` are the first row, and a
    ``|+`` caption is not a cell."""
    rows: list[list[Tag]] = []
    loose: list[Tag] = []
    for node in table.contents.nodes if table.contents is not None else []:
        if not isinstance(node, Tag):
            continue
        name = str(node.tag).casefold()
        if name in ("td", "th") and not _is_caption(node):
            loose.append(node)
        elif name == "tr":
            if loose:
                rows.append(loose)
                loose = []
            rows.append(
                [
                    c
                    for c in (node.contents.nodes if node.contents else [])
                    if isinstance(c, Tag) and str(c.tag).casefold() in ("td", "th")
                ]
            )
    if loose:
        rows.append(loose)
    return [r for r in rows if r]


def _is_caption(cell: Tag) -> bool:
    """A ``|+`` caption, which the parser reads as a cell starting with "+"."""
    nodes = cell.contents.nodes if cell.contents is not None else []
    return bool(nodes) and isinstance(nodes[0], Text) and nodes[0].value.lstrip().startswith("+")


def _grid(
    rows: list[list[Tag]], render: Callable
) -> list[tuple[list[tuple[str, bool]], bool, str]]:
    """Rows of (text, is header) cells with spans filled in; each row flagged as a header
    row when all its own cells are ``!`` cells, and with its text when it is one cell spanning
    several columns (a note)."""
    carried: dict[int, tuple[str, bool, int]] = {}  # column → (text, header, rows left)
    out = []
    for row in rows:
        cells: list[tuple[str, bool]] = []
        column = 0
        queue = list(row)
        while queue or column in carried:
            if column in carried:
                text, header, left = carried[column]
                cells.append((text, header))
                carried = _used(carried, column, left)
                column += 1
                continue
            cell = queue.pop(0)
            text = " ".join(render(cell.contents).split())
            header = str(cell.tag).casefold() == "th"
            for _ in range(_span(cell, "colspan")):
                cells.append((text, header))
                down = _span(cell, "rowspan")
                if down > 1:
                    carried[column] = (text, header, down - 1)
                column += 1
        note = cells[0][0] if len(row) == 1 and _span(row[0], "colspan") > 1 else ""
        out.append((cells, all(str(c.tag).casefold() == "th" for c in row), note))
    return out


def _used(carried: dict, column: int, left: int) -> dict:
    text, header, _ = carried[column]
    rest = dict(carried)
    if left <= 1:
        del rest[column]
    else:
        rest[column] = (text, header, left - 1)
    return rest


def _span(cell: Tag, name: str) -> int:
    for attribute in cell.attributes:
        if str(attribute.name).strip().casefold() == name:
            try:
                return max(1, min(MAX_SPAN, int(str(attribute.value).strip().strip("\"'"))))
            except ValueError:
                return 1
    return 1
