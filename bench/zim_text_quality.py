"""What the ZIM build *stores* as an article's text: are its words kept apart, its hidden parts
left out, its title said once?

    python bench/zim_text_quality.py                  # every ZIM in ../shared/data/zim
    python bench/zim_text_quality.py --show 5         # and five examples of each defect

Every article of every ZIM is rendered as the build stores it (``ingest/zim._doc``: the body)
twice in one run: with the module as it was at ``--baseline`` (default 9bc5715, before issue
31; loaded from ``git show REV:src/chiezo/ingest/zim.py`` as a module of its own) and as it is
now. The HTML itself is the reference, read with the standard library's parser (not lxml, which
both renderers use): its visible text nodes, where a block or table-cell boundary (``p div li
td th tr br h1–h6 dd dt figure …``) lies between two of them, and what is hidden
(``display:none``, ``<script>``, ``<style>``…). The defects counted in each stored text:

* **glued words** — two words that a block/cell boundary or a hidden element separates in the
  HTML, written with nothing between them (``musiciansinger``, ``1930Albany,``,
  ``(1930-09-23)September``): the last word of one text node joined to the first of the next
  (or to the hidden text between them), found in the stored text and in no single text node
  of the page (where it would be the page's own spelling). Target: 0;
* **hidden text shown** — a hidden run (``(1930-09-23)``) that the stored text contains and
  no visible text node does;
* **title headings** — a literal ``# Title`` line repeating the article's title. Target: 0;
* **stray markup** — ``<tag>``, ``{{``, ``|}`` outside code blocks that no visible text node
  contains (a page about C++ may well say ``#include <iostream>``);
* **repeated paragraphs** — a paragraph of 40+ characters that occurs twice in one article.

Writes JSON with the examples to bench/results/zim_text_quality-<timestamp>.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared" / "data" / "zim"
BASELINE_REV = "9bc5715"  # main before issue 31's HTML text
console = Console(width=200)

DEFECTS = (
    "glued words",
    "hidden text shown",
    "title headings",
    "stray markup",
    "repeated paragraphs",
)
# The reference's own list of what breaks a line on the page (HTML's block-level and table
# elements), kept apart from the module it measures.
BLOCK = frozenset(
    [
        "address",
        "article",
        "aside",
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
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hgroup",
        "hr",
        "html",
        "legend",
        "li",
        "main",
        "menu",
        "nav",
        "ol",
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
VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)
HIDDEN_TAGS = frozenset(["script", "style", "noscript", "template", "title", "head"])
_HIDDEN_STYLE = re.compile(r"display\s*:\s*none|visibility\s*:\s*hidden", re.I)
_MARKUP = re.compile(r"<[a-zA-Z/!][^<>\n]{0,80}>|\{\{|\|\}")
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TITLE_LINE = re.compile(r"^#[ \t]+(.+?)[ \t]*#*[ \t]*$", re.M)


@dataclass
class Node:
    text: str
    boundary: bool  # a block or cell edge lies between this node and the one before
    hidden: str  # hidden text between this node and the one before


@dataclass
class Reference:
    nodes: list[Node] = field(default_factory=list)
    hidden_runs: list[str] = field(default_factory=list)

    @property
    def visible(self) -> str:
        """Every visible text node, apart: a string is the page's own where it is in here."""
        return "\x00".join(n.text for n in self.nodes)


class _ReferenceParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out = Reference()
        self.stack: list[tuple[str, bool]] = []
        self.hidden = 0
        self.boundary = False
        self.hidden_text: list[str] = []  # since the last visible node
        self.run_start = 0  # where the open hidden run starts in hidden_text

    def handle_starttag(self, tag, attrs):
        if tag in BLOCK or tag == "br":
            self.boundary = True
        if tag in VOID:
            return
        values = dict(attrs)
        hidden = (
            tag in HIDDEN_TAGS
            or "hidden" in values
            or bool(_HIDDEN_STYLE.search(values.get("style") or ""))
        )
        self.stack.append((tag, hidden))
        if hidden and not self.hidden:
            self.run_start = len(self.hidden_text)
        self.hidden += hidden

    def handle_startendtag(self, tag, attrs):
        if tag in BLOCK or tag == "br":
            self.boundary = True

    def handle_endtag(self, tag):
        if tag in BLOCK:
            self.boundary = True
        if not any(t == tag for t, _ in self.stack):
            return
        while self.stack:
            open_tag, hidden = self.stack.pop()
            self.hidden -= hidden
            if hidden and not self.hidden:
                self.out.hidden_runs.append("".join(self.hidden_text[self.run_start :]))
            if open_tag == tag:
                break

    def handle_data(self, data):
        if self.hidden:
            self.hidden_text.append(data)
            return
        self.out.nodes.append(Node(data, self.boundary, "".join(self.hidden_text)))
        self.boundary = False
        self.hidden_text = []


def reference(markup: str) -> Reference:
    parser = _ReferenceParser()
    parser.feed(markup)
    parser.close()
    return parser.out


def glued(ref: Reference, text: str, haystack: str) -> list[str]:
    """The joins of words across a boundary or hidden text that ``text`` writes as one."""
    candidates: Counter[str] = Counter()
    previous = ""
    for node in ref.nodes:
        if not node.text:
            continue
        tail = re.search(r"(\S+)$", previous) if previous else None
        head = re.match(r"\S+", node.text)
        hidden = node.hidden
        if node.boundary and tail and head:
            candidates[tail.group(1) + head.group(0)] += 1
        if hidden.strip():
            if head and not hidden[-1].isspace():
                candidates[hidden.split()[-1] + head.group(0)] += 1
            if tail and not hidden[0].isspace():
                candidates[tail.group(1) + hidden.split()[0]] += 1
        previous = node.text
    out = []
    for candidate, times in candidates.items():
        if len(candidate) < 3 or candidate in haystack:
            continue
        out += [candidate] * min(times, text.count(candidate))
    return out


def hidden_shown(ref: Reference, text: str, haystack: str) -> list[str]:
    runs = {" ".join(r.split()) for r in ref.hidden_runs}
    return sorted(
        r
        for r in runs
        if len(r) >= 3 and any(c.isalnum() for c in r) and r not in haystack and r in text
    )


def title_headings(title: str, text: str) -> list[str]:
    name = " ".join(title.replace("_", " ").split()).casefold()
    return [
        m.group(0)
        for m in _TITLE_LINE.finditer(text)
        if " ".join(m.group(1).split()).casefold() == name
    ]


def stray_markup(text: str, haystack: str) -> list[str]:
    out, fence = [], None
    for line in text.splitlines():
        opened = _FENCE.match(line)
        if opened:
            fence = (
                None if fence and opened.group(1).startswith(fence) else fence or opened.group(1)
            )
            continue
        if fence:
            continue
        out += [m.group(0) for m in _MARKUP.finditer(line) if m.group(0) not in haystack]
    return out


def repeated(text: str) -> list[str]:
    counts = Counter(p.strip() for p in re.split(r"\n\s*\n", text) if len(p.strip()) >= 40)
    return [p for p, n in counts.items() if n > 1]


def zim_module(rev: str | None):
    """``ingest/zim`` as it is now (``rev`` None) or at ``rev``, loaded from git with the
    ``ingest/formats`` of the same revision (its HTML converter went with issue 31)."""
    if rev is None:
        from chiezo.ingest import zim

        return zim
    formats = _module_at(rev, "formats")
    sys.modules["formats_before"] = formats
    source = _source_at(rev, "zim").replace(
        "from chiezo.ingest.formats import", "from formats_before import"
    )
    return _load("zim_before", source)


def _source_at(rev: str, name: str) -> str:
    return subprocess.run(
        ["git", "show", f"{rev}:src/chiezo/ingest/{name}.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout


def _module_at(rev: str, name: str):
    return _load(f"{name}_before", _source_at(rev, name))


def _load(name: str, source: str):
    path = Path(tempfile.mkdtemp()) / f"{name}.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def articles(path: Path):
    """(the archive, its scan) as the build reads them: close the scan when done."""
    from chiezo.ingest.zim import open_archive
    from chiezo.ingest.zimscan import scan

    archive = open_archive(path)
    return archive, scan(archive)


def read_doc(module, entry, scanned):
    """``module._doc`` of the entry: a module before the scan tables (design.md §35.18) takes
    the scan's maps as dicts."""
    if len(inspect.signature(module._doc).parameters) == 2:
        return module._doc(entry, scanned)
    redirects: dict[str, list[str]] = {}
    for target, title in scanned.conn.execute("SELECT target, title FROM redirects"):
        redirects.setdefault(target, []).append(title)
    titles = dict(scanned.conn.execute("SELECT path, title FROM articles"))
    return module._doc(entry, redirects, titles)


def measure(path: Path, renderers: dict) -> tuple[list[dict], dict]:
    archive, scanned = articles(path)
    with scanned:
        return _measure(path, archive, scanned, renderers)


def _measure(path: Path, archive, scanned, renderers: dict) -> tuple[list[dict], dict]:
    entries = [archive._get_entry_by_id(i) for i in scanned.articles]
    pages = []
    for entry in entries:
        markup = bytes(entry.get_item().content).decode("utf-8", "replace")
        ref = reference(markup)
        pages.append((ref, ref.visible))
    rows, examples = [], {}
    for label, module in renderers.items():
        started = time.monotonic()
        found: dict[str, list[dict]] = {k: [] for k in DEFECTS}
        docs = chars = 0
        for entry, (ref, haystack) in zip(entries, pages, strict=True):
            doc = read_doc(module, entry, scanned)
            if doc is None:
                continue
            docs += 1
            text = doc.body
            chars += len(text)
            for kind, hits in (
                ("glued words", glued(ref, text, haystack)),
                ("hidden text shown", hidden_shown(ref, text, haystack)),
                ("title headings", title_headings(doc.title, text)),
                ("stray markup", stray_markup(text, haystack)),
                ("repeated paragraphs", repeated(text)),
            ):
                found[kind] += [{"title": doc.title, "text": hit[:200]} for hit in hits]
        rows.append(
            {
                "zim": path.stem,
                "renderer": label,
                "articles": docs,
                **{k: len(v) for k, v in found.items()},
                "chars": chars,
                "seconds": round(time.monotonic() - started, 1),
            }
        )
        examples[f"{path.stem}/{label}"] = {k: v[:30] for k, v in found.items()}
    return rows, examples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", type=int, default=3, help="examples of each defect to print")
    parser.add_argument("--baseline", default=BASELINE_REV, help="git revision of the old module")
    parser.add_argument("--zims", type=Path, default=SHARED, help="folder of .zim files")
    args = parser.parse_args()
    renderers = {"before": zim_module(args.baseline), "now": zim_module(None)}
    rows, examples = [], {}
    for path in sorted(args.zims.glob("*.zim")):
        found_rows, found_examples = measure(path, renderers)
        rows += found_rows
        examples.update(found_examples)
    show(rows, examples, args.show)
    out = HERE / "results" / f"zim_text_quality-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {"baseline": args.baseline, "rows": rows, "examples": examples},
            ensure_ascii=False,
            indent=2,
        )
    )
    console.print(f"wrote {out}")


def show(rows: list[dict], examples: dict, count: int) -> None:
    table = Table(
        title="ZIM article text defects, before → now (targets: 0 glued, 0 title headings)"
    )
    table.add_column("zim", no_wrap=True)
    for column in ("articles", *DEFECTS, "chars", "seconds"):
        table.add_column(column, justify="right")
    by_zim: dict[str, dict[str, dict]] = {}
    for row in rows:
        by_zim.setdefault(row["zim"], {})[row["renderer"]] = row
    totals: dict[str, Counter] = {"before": Counter(), "now": Counter()}
    for zim, pair in by_zim.items():
        before, now = pair["before"], pair["now"]
        for label in totals:
            totals[label].update({k: pair[label][k] for k in ("articles", *DEFECTS, "chars")})
        table.add_row(
            zim,
            *(f"{before[k]} → {now[k]}" for k in ("articles", *DEFECTS, "chars", "seconds")),
        )
    table.add_row(
        "all",
        *(f"{totals['before'][k]} → {totals['now'][k]}" for k in ("articles", *DEFECTS, "chars")),
        "",
        style="bold",
    )
    console.print(table)
    for key, kinds in examples.items():
        for kind, hits in kinds.items():
            for hit in hits[:count]:
                console.print(
                    f"[dim]{key} {kind}[/] {escape(hit['title'])}: {escape(hit['text'][:160])}"
                )


if __name__ == "__main__":
    main()
