"""What the Wikipedia build *stores* as prose: does it state things the article does not say?

    python bench/wiki_text_quality.py                 # both shared excerpts
    python bench/wiki_text_quality.py --show 5        # and five examples of each defect

Every article of the jawiki and enwiki excerpts is rendered with ``parse_article`` (what the
build stores) and the text is searched for four kinds of defect:

* **parameter as number** — a number slot (the words before a unit that must follow a number:
  平方キロメートル, km2, square miles…, 人口は…人) filled with something that is not a number:
  「面積は岩手県km2」 comes from ``{{formatnum:{{自治体面積/岩手県|岩手県}}}}`` rendered as
  its parameter. A *false statement*; the target is 0;
* **stray markup** — ``{{ }} [[ ]]``, HTML tags, ``||`` cell separators, ``==`` heading marks,
  ``'''`` left in the text;
* **duplicated sentences** — a sentence of 20+ characters that occurs twice in one article;
* **table debris** — runs of 4+ consecutive short lines (≤ 6 characters, not list items or
  headings): a map's labels or a table's cells without their headers ("147 / 145 / 空 / 知120").

The baseline in the same run is the renderer as it was before issue 17 (``--baseline REV``
renders with ``git show REV:src/chiezo/ingest/wikitext.py``; default: the commit before the
change). Writes JSON with the examples to bench/results/.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared" / "data" / "wikipedia"
DUMPS = {
    "jawiki": SHARED / "jawiki-20230501-excerpt.xml.bz2",
    "enwiki": SHARED / "enwiki-202207-excerpt.xml.bz2",
}
BASELINE_REV = "2a44cfd"  # main before issue 17's renderer changes
console = Console(width=140)

# a unit that only ever follows a number; what stands before it must be one
_UNIT = (
    r"平方キロメートル|平方メートル|ヘクタール|km2|km²|㎢|square (?:kilometres|kilometers|miles)"
    r"|sq mi"
)
_NUMERIC_END = re.compile(
    r"(?:[\d０-９〇一二三四五六七八九十百千万億数余]|[(（/]|\bper|\b(?:thousands|hundreds|millions"
    r"|billions|tens) of)\s*$"  # a number, or a unit's gloss "(平方キロメートル)", "人/", "per"
)
_SLOT = re.compile(rf"(\S{{0,12}}?)\s*(?:{_UNIT})")
_POPULATION = re.compile(r"人口(?:は|が|：|:)\s*(約|およそ)?([^\s\d０-９、。]{1,10})人")
_MARKUP = re.compile(r"\{\{|\}\}|\[\[|\]\]|<[a-zA-Z/!][^>]{0,80}>|\|\||^=+|=+$|'''", re.M)
_SENTENCE = re.compile(r"[^。！？\n]+[。！？]|[^.!?\n]+[.!?](?=\s|$)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--show", type=int, default=3, help="examples of each defect to print")
    parser.add_argument("--baseline", default=BASELINE_REV, help="git revision of the old renderer")
    args = parser.parse_args()
    renderers = {"before": old_renderer(args.baseline), "now": current_renderer()}
    rows, examples = [], {}
    for wiki, dump in DUMPS.items():
        pages = list(articles(dump))
        for label, (parse, namespaces) in renderers.items():
            started = time.monotonic()
            found = defects(pages, parse, namespaces(dump))
            rows.append(
                {
                    "wiki": wiki,
                    "renderer": label,
                    "articles": len(pages),
                    **{k: len(v) for k, v in found.items()},
                    "seconds": round(time.monotonic() - started, 1),
                }
            )
            examples[f"{wiki}/{label}"] = {k: v[:30] for k, v in found.items()}
    show(rows, examples, args.show)
    out = HERE / "results" / f"wiki_text_quality-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps(
            {"baseline": args.baseline, "rows": rows, "examples": examples},
            ensure_ascii=False,
            indent=2,
        )
    )
    console.print(f"wrote {out}")


def articles(dump: Path):
    """(title, wikitext) of the dump's articles (namespace 0, not redirects)."""
    from chiezo.ingest.wikidump import WikiDump

    reader = WikiDump(dump)
    try:
        for page in reader.pages():
            if page.ns == 0 and not page.redirect:
                yield page.title, page.text
    finally:
        reader.close()


def current_renderer():
    from chiezo.ingest import wikitext

    return wikitext.parse_article, lambda dump: _namespaces(wikitext, dump)


def old_renderer(rev: str):
    """The renderer of ``rev``, loaded from git as a module of its own."""
    source = subprocess.run(
        ["git", "show", f"{rev}:src/chiezo/ingest/wikitext.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    path = Path(tempfile.mkdtemp()) / "wikitext_before.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("wikitext_before", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["wikitext_before"] = module
    spec.loader.exec_module(module)
    return module.parse_article, lambda dump: _namespaces(module, dump)


def _namespaces(module, dump: Path):
    from chiezo.ingest.wikidump import WikiDump

    reader = WikiDump(dump)
    info = reader.siteinfo
    reader.close()
    return module.Namespaces.for_wiki(info.namespaces, info.language)


def defects(pages, parse, namespaces) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {
        "parameter as number": [],
        "stray markup": [],
        "duplicated sentences": [],
        "table debris": [],
    }
    for title, wikitext in pages:
        text = parse(wikitext, namespaces).text
        for kind, hits in (
            ("parameter as number", slots(text)),
            ("stray markup", markup(text)),
            ("duplicated sentences", duplicates(text)),
            ("table debris", debris(text)),
        ):
            found[kind] += [{"title": title, "text": hit} for hit in hits]
    return found


def slots(text: str) -> list[str]:
    """Sentences with a number slot filled by words."""
    out = []
    for sentence in _SENTENCE.findall(text):
        bad = [
            m
            for m in _SLOT.finditer(sentence)
            if not _NUMERIC_END.search(m.group(1))
            and not _NUMERIC_END.search(sentence[: m.start(1)] + m.group(1))
        ]
        if bad or _POPULATION.search(sentence):
            out.append(sentence.strip())
    return out


def markup(text: str) -> list[str]:
    return [
        line.strip()[:200]
        for line in text.splitlines()
        if _MARKUP.search(line) and not line.startswith("#")
    ]


def duplicates(text: str) -> list[str]:
    counts = Counter(s.strip() for s in _SENTENCE.findall(text) if len(s.strip()) >= 20)
    return [s for s, n in counts.items() if n > 1]


def debris(text: str) -> list[str]:
    """Runs of 4+ consecutive short lines, joined with " / "."""
    out, run = [], []
    for line in [*text.splitlines(), "a line long enough to end a run"]:
        line = line.strip()
        if line and len(line) <= 6 and not line.startswith(("#", "- ")):
            run.append(line)
            continue
        if len(run) >= 4:
            out.append(" / ".join(run)[:200])
        if line:
            run = []
    return out


def show(rows, examples, count: int) -> None:
    table = Table(
        title="Wikipedia text defects (sentences or lines; target: 0 parameters as numbers)"
    )
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    console.print(table)
    for key, kinds in examples.items():
        for kind, hits in kinds.items():
            for hit in hits[:count]:
                console.print(
                    f"[dim]{key} {kind}[/] {escape(hit['title'])}: {escape(hit['text'][:160])}"
                )


if __name__ == "__main__":
    main()
