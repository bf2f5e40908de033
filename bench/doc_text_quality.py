"""What a documents build stores and what its pages show: debris the documents do not state?

    python bench/doc_text_quality.py                  # before (9bc5715) and now, one run
    python bench/doc_text_quality.py --show 5         # and five examples of each defect

Every PDF, Office file and Markdown file in ../shared/data/docs is built as a docs source
(one per folder: pdf, office, markdown), every sheet there with coordinates as a places
source, and each document's page is fetched from the web app (FastAPI's TestClient; the
first ``--place-pages`` of a places source, whose pages are alike). Counted (target: 0 each):

* **spaces between touching Japanese characters in PDF text** — a space in a PDF's stored
  text (what the chunks, the index and the model read) between two Japanese characters that
  pdfminer places less than half a character apart on a line of the page, and never further:
  ``一・五メー トル`` could not be found as 一・五メートル. Spaces between characters drawn
  apart (an item number and its text, 一　歩行者は; a name, 新山 祐介) are counted beside
  them, as are line breaks between two Japanese characters: a wrap joined leaves none, a
  paragraph's or a line of verse's end keeps its break;
* **heading marks on pages** — a line of a page's text (outside code) starting with ``#``:
  ``## p. 1`` shown as text, a place's ``#property: 6`` line;
* **repeated paragraphs on pages** — a paragraph of 40+ characters shown more often than
  the stored body holds it (at least once): an opening shown above a body that holds it;
* **raw HTML in headings** — a tag (outside code) in a page's heading, a document's title or
  a chunk's breadcrumb: ``ユニット<ruby>様<rp>(</rp>…`` as a section's label;
* **marker lines in place bodies** — a place's stored body line starting with ``#``;
* **chunk labels as titles** — a title that is one of the labels the converters give parts
  of a file (``p. 3``, ``Slide 2``, ``rows 2–4``), not the document's name.

Each version builds in a process of its own, with ``src`` from ``git archive <baseline>`` or
the working tree first on its path. Writes JSON with the examples to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path

from chiezo.ops import building

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared" / "data" / "docs"
BASELINE_REV = "9bc5715"  # main before issue 31's document-text changes
FOLDERS = ("pdf", "office", "markdown")
PLACE_SUFFIXES = (".xlsx", ".csv")
KINDS = {
    "pdf_spaces": "spaces between touching Japanese characters in PDF text",
    "heading_marks": "heading marks (#) on pages",
    "repeated_paragraphs": "repeated paragraphs on pages",
    "raw_tags": "raw HTML in headings, titles, breadcrumbs",
    "place_markers": "marker lines (#…) in place bodies",
    "label_titles": "chunk labels as titles",
}
INFO = {
    "pdf_gaps": "spaces between Japanese characters drawn apart (kept)",
    "pdf_breaks": "line breaks between Japanese characters in PDF text (kept)",
}

_TAG = re.compile(r"</?[A-Za-z][A-Za-z0-9-]*(?:\s[^<>]*)?/?>")
_CODE_SPAN = re.compile(r"(`+).*?\1")
_LABEL = re.compile(r"p\. \d+|Slide \d+(?::.*)?|rows \d+–\d+")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=BASELINE_REV, help="git revision of 'before'")
    parser.add_argument("--show", type=int, default=3, help="examples of each defect to print")
    parser.add_argument("--place-pages", type=int, default=40, help="pages fetched per places")
    parser.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # one version, to JSON
    args = parser.parse_args()
    if args.measure:
        args.measure.write_text(json.dumps(measure(args.place_pages), ensure_ascii=False))
        return
    with tempfile.TemporaryDirectory() as work:
        old_src = exported(args.baseline, Path(work) / "before")
        results = {
            "before": run_version(old_src, Path(work) / "before.json", args.place_pages),
            "now": run_version(ROOT / "src", Path(work) / "now.json", args.place_pages),
        }
    show(results, args.show)
    out = HERE / "results" / f"doc_text_quality-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps({"baseline": args.baseline, **kept(results)}, ensure_ascii=False, indent=2)
    )
    print(f"wrote {out}")


EXAMPLES_KEPT = 30  # per defect in the JSON: the counts are whole, the examples a sample


def kept(results: dict) -> dict:
    """``results`` with each defect's list as its count and its first examples."""
    return {
        version: {
            **result,
            "found": {
                kind: {"count": len(hits), "examples": hits[:EXAMPLES_KEPT]}
                for kind, hits in result["found"].items()
            },
        }
        for version, result in results.items()
    }


def exported(rev: str, folder: Path) -> Path:
    """``src`` as it was at ``rev``, written out of git (nothing in the checkout changes)."""
    folder.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "archive", rev, "src"], cwd=ROOT, capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder / "src"


def run_version(src: Path, out: Path, place_pages: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    started = time.monotonic()
    command = [sys.executable, __file__, "--measure", str(out), "--place-pages", str(place_pages)]
    subprocess.run(command, env=env, cwd=ROOT, check=True)
    result = json.loads(out.read_text())
    result["seconds"] = round(time.monotonic() - started, 1)
    assert result["code"].startswith(str(src)), f"measured {result['code']}, not {src}"
    return result


# -- one version, in its own process ---------------------------------------------------------------


def measure(place_pages: int) -> dict:
    import chiezo
    from chiezo.core.config import Settings
    from chiezo.core.errors import ChiezoError
    from chiezo.ingest.documents import DocsOptions
    from chiezo.ops.context import Context
    from chiezo.store.build import BuildOptions

    found: dict[str, list] = {kind: [] for kind in (*KINDS, *INFO)}
    counts = {"docs": 0, "pages": 0, "place docs": 0}
    with tempfile.TemporaryDirectory() as data:
        service = Context(Settings(data_dir=Path(data)))
        build = BuildOptions(word_index=False, full_validation=False)
        for folder in FOLDERS:
            building.ingest(
                service, "docs", SHARED / folder, folder, options=DocsOptions(), build=build
            )
        places = []
        for path in sorted((SHARED / "office").iterdir()):
            if path.suffix.lower() in PLACE_SUFFIXES:
                name = f"places{len(places)}"
                try:
                    building.ingest(service, "places", [path], name, build=build)
                except ChiezoError:  # a table without coordinates is no list of places
                    continue
                places.append(name)
        client = _client(service)
        for source in FOLDERS:
            for doc in _docs(service, source):
                counts["docs"] += 1
                _check_doc(service, client, source, doc, found)
                counts["pages"] += 1
        for source in places:
            for n, doc in enumerate(_docs(service, source)):
                counts["place docs"] += 1
                for line in doc["body"].splitlines():
                    if line.startswith("#"):
                        found["place_markers"].append(_where(source, doc, line))
                if n < place_pages:
                    _check_page(client, source, doc, found)
                    counts["pages"] += 1
    return {"code": chiezo.__file__, "counts": counts, "found": found}


def _client(service):
    from fastapi.testclient import TestClient

    from chiezo.surfaces.rest import create_app

    # a client on this machine, as a browser on it is (helpers.ON_THIS_MACHINE)
    return TestClient(
        create_app(service.settings), client=("127.0.0.1", 50000), base_url="http://127.0.0.1"
    )


def _docs(service, source: str):
    conn = service.library.get(source).conn
    for doc_id, key, title, opening, extra, body in conn.execute(
        "SELECT doc_id, key, title, opening, extra, body FROM docs ORDER BY doc_id"
    ):
        yield {
            "doc_id": doc_id,
            "key": key,
            "title": title,
            "opening": opening,
            "format": json.loads(extra or "{}").get("format"),
            "body": body,
            "breadcrumbs": [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT heading_path FROM chunks WHERE doc_id = ?", (doc_id,)
                )
            ],
        }


def _check_doc(service, client, source: str, doc: dict, found: dict) -> None:
    if doc["format"] == "pdf":
        touching, apart = _drawn_pairs(SHARED / source / doc["key"])
        for match in re.finditer(r"(?<=(.))( +|\n)(?=(.))", doc["body"]):
            pair = match.group(1), match.group(3)
            if not (_japanese(pair[0]) and _japanese(pair[1])):
                continue
            if match.group(2) == "\n":
                kind = "pdf_breaks"
            else:
                kind = "pdf_spaces" if pair in touching and pair not in apart else "pdf_gaps"
            around = doc["body"][max(match.start() - 8, 0) : match.end() + 8]
            found[kind].append(_where(source, doc, around))
    if _LABEL.fullmatch(doc["title"]):
        found["label_titles"].append(_where(source, doc, doc["title"]))
    for label in [doc["title"], *doc["breadcrumbs"]]:
        if _TAG.search(_CODE_SPAN.sub("", label)):
            found["raw_tags"].append(_where(source, doc, label))
    _check_page(client, source, doc, found)


def _check_page(client, source: str, doc: dict, found: dict) -> None:
    import lxml.html

    response = client.get(f"/doc/{source}/{doc['doc_id']}")
    assert response.status_code == 200, (source, doc["doc_id"], response.status_code)
    article = lxml.html.fromstring(response.text).xpath("//article")[0]
    for br in article.iter("br"):
        br.tail = "\n" + (br.tail or "")
    for code in list(article.iter("code")):
        code.drop_tree()  # Rc<T> in code is a type, not a tag
    for heading in article.iter("h1", "h2", "h3", "h4", "h5", "h6"):
        if _TAG.search(_CODE_SPAN.sub("", heading.text_content())):  # a title's `Rc<T>` too
            found["raw_tags"].append(_where(source, doc, heading.text_content().strip()))
    shown = []
    for part in article.xpath(".//section[contains(@class, 'body') or @class = 'opening']"):
        for block in part.iter("p", "li", "td", "th", "dd", "blockquote", "h2", "h3", "h4"):
            if any(a.tag == "pre" for a in block.iterancestors()):
                continue
            text = block.text_content()
            if block.tag in ("p", "li"):
                shown.append(text)
            for line in text.splitlines():
                if line.lstrip().startswith("#"):
                    found["heading_marks"].append(_where(source, doc, line.strip()))
    stored = _squeezed(doc["body"])
    for paragraph, times in Counter(_squeezed(p) for p in shown).items():
        if len(paragraph) >= 40 and times > max(stored.count(paragraph), 1):
            found["repeated_paragraphs"].append(_where(source, doc, f"{times}× {paragraph}"))


def _drawn_pairs(path: Path) -> tuple[set, set]:
    """Pairs of Japanese characters next to each other on a line of the PDF, as pdfminer
    places them (no Chiezo code): those drawn less than half a character apart, and those
    drawn further apart. A space between a pair only ever drawn touching is none the page
    shows."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams, LTChar, LTTextContainer, LTTextLine, LTTextLineVertical

    touching, apart = set(), set()

    def lines(element):
        if isinstance(element, LTTextLine):
            yield element
        elif isinstance(element, LTTextContainer):
            for child in element:
                yield from lines(child)

    for layout in extract_pages(str(path), laparams=LAParams(detect_vertical=True)):
        for element in layout:
            for line in lines(element):
                chars = [c for c in line if isinstance(c, LTChar)]
                vertical = isinstance(line, LTTextLineVertical)
                shown = [c for c in chars if c.get_text().strip()]
                for a, b in zip(shown, shown[1:], strict=False):
                    pair = a.get_text()[-1:], b.get_text()[:1]
                    if not (_japanese(pair[0]) and _japanese(pair[1])):
                        continue
                    gap = a.y0 - b.y1 if vertical else b.x0 - a.x1
                    spaced = chars.index(b) - chars.index(a) > 1  # a space the PDF draws
                    close = gap < 0.5 * max(a.size, b.size) and not spaced
                    (touching if close else apart).add(pair)
    return touching, apart


def _where(source: str, doc: dict, text: str) -> dict:
    return {"source": source, "key": doc["key"], "text": text[:200]}


def _squeezed(text: str) -> str:
    return "".join(text.split())


def _japanese(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F") and not char.isspace()


# -- the table ---------------------------------------------------------------------------------


def show(results: dict, count: int) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=140)
    table = Table(title="Document text and page defects (target: 0 each)")
    table.add_column("defect")
    for label in results:
        table.add_column(label, justify="right")
    for kind, description in {**KINDS, **INFO}.items():
        cells = [str(len(r["found"][kind])) for r in results.values()]
        table.add_row(description if kind in KINDS else f"[dim]{description}[/]", *cells)
    for what in ("docs", "pages", "place docs"):
        table.add_row(f"[dim]{what}[/]", *(str(r["counts"][what]) for r in results.values()))
    table.add_row("[dim]seconds[/]", *(str(r["seconds"]) for r in results.values()))
    console.print(table)
    for label, result in results.items():
        for kind in KINDS:
            hits = result["found"][kind]
            for hit in hits[:count]:
                text = escape(hit["text"].replace("\n", "⏎")[:120])
                console.print(
                    f"[dim]{label} {kind}[/] {hit['source']}/{escape(hit['key'])}: {text}"
                )
            if len(hits) > count:
                console.print(f"[dim]{label} {kind}: … {len(hits) - count} more[/]")


if __name__ == "__main__":
    main()
