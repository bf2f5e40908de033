"""What the Wikipedia build *stores*: does it state things the article does not say?

    python bench/wiki_text_quality.py                 # both shared excerpts
    python bench/wiki_text_quality.py --show 5        # and five examples of each defect

Every article of the jawiki and enwiki excerpts is rendered with ``parse_article`` (what the
build stores) and the text is searched for these defects:

* **parameter as number** — a number slot (the words before a unit that must follow a number:
  平方キロメートル, km2, square miles…, 人口は…人) filled with something that is not a number:
  「面積は岩手県km2」 comes from ``{{formatnum:{{自治体面積/岩手県|岩手県}}}}`` rendered as
  its parameter. A *false statement*; the target is 0;
* **stray markup** — ``{{ }} [[ ]]``, HTML tags, ``||`` cell separators, ``==`` heading marks,
  ``'''`` left in the text;
* **duplicated sentences** — a sentence of 20+ characters that occurs twice in one article;
* **table debris** — runs of 4+ consecutive short lines (≤ 6 characters, not list items or
  headings): a map's labels or a table's cells without their headers ("147 / 145 / 空 / 知120");
* **raw parameter names** (issue 31) — infobox lines labelled with the template's parameter
  name instead of the label it shows: ``nomcommune:``, ``population_total:``, ``x: 140``
  (a lower-case ASCII name, or one with ``_``, on a line of the infobox section);
* **placeholders** — infobox values that are the template's unfilled boilerplate
  (``人口の時点: 年月日``, ``YYYY-MM-DD``);
* **weather lines** — one line per month and measure (``Jan record high C: 16.1``);
* **far points** — the stored point more than 30 km from the GeoNames place that is the same
  thing. Neither excerpt carries Wikidata ids (no page_props dump is reachable) and GeoNames'
  city export has none either, so "the same thing" is matched by name: a title that is exactly
  a GeoNames city name of cities15000 (smaller towns share names with countries: Angola,
  Indiana; Andorra, Teruel) (its Japanese alternate name on jawiki; the most populous when several
  share it), or, for a Japanese prefecture, the prefecture's seat (GeoNames' PPLA of that
  admin1 code): jawiki and Wikidata put a prefecture at its office. Countries (Natural Earth's
  names: a town called Albania is not the country) and US states are not compared (enwiki
  puts them at their centre; GeoNames has no such point);
* **stated, no point** — the wikitext states the article's own point with values (a
  ``display=title`` coordinate with numbers, or infobox degree/latitude parameters) and the
  build stored none.

The baseline in the same run is the renderer of ``--baseline REV`` (``git show
REV:src/chiezo/ingest/wikitext.py``; default: main before issue 31). Writes JSON with the
examples to bench/results/.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import io
import json
import math
import re
import subprocess
import sys
import tempfile
import time
import zipfile
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
BASELINE_REV = "9bc5715"  # main before issue 31 (issue 17's baseline was 2a44cfd)
GEONAMES = ROOT.parent / "shared" / "data" / "geonames" / "cities15000.zip"
COUNTRIES = ROOT.parent / "shared" / "data" / "naturalearth" / "ne_110m_countries.geojson"
FAR_KM = 30.0
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
        references = geonames_references({t for t, _ in pages}, wiki)
        for label, (parse, namespaces) in renderers.items():
            started = time.monotonic()
            found = defects(pages, parse, namespaces(dump), references)
            rows.append(
                {
                    "wiki": wiki,
                    "renderer": label,
                    "articles": len(pages),
                    "compared points": sum(1 for t, _ in pages if t in references),
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


def defects(pages, parse, namespaces, references=None) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = {
        "parameter as number": [],
        "stray markup": [],
        "duplicated sentences": [],
        "table debris": [],
        "raw parameter names": [],
        "placeholders": [],
        "weather lines": [],
        "far points": [],
        "stated, no point": [],
        "compared, no point": [],  # not a defect: a reference exists, the wikitext gave none
    }
    takes_title = "title" in inspect.signature(parse).parameters
    for title, wikitext in pages:
        article = parse(wikitext, namespaces, title) if takes_title else parse(wikitext, namespaces)
        text = article.text
        facts = text.partition("\n## Infobox\n")[2]
        for kind, hits in (
            ("parameter as number", slots(text)),
            ("stray markup", markup(text)),
            ("duplicated sentences", duplicates(text)),
            ("table debris", debris(text)),
            ("raw parameter names", raw_names(facts)),
            ("placeholders", placeholders(facts)),
            ("weather lines", [line for line in text.splitlines() if _WEATHER.match(line)]),
            ("far points", far(title, article.point, (references or {}).get(title))),
            (
                "stated, no point",
                [title] if article.point is None and states_point(wikitext) else [],
            ),
            (
                "compared, no point",
                [title] if article.point is None and title in (references or {}) else [],
            ),
        ):
            found[kind] += [{"title": title, "text": hit} for hit in hits]
    return found


_RAW_NAME = re.compile(r"^([a-z][a-z0-9 \-]*|[A-Za-z0-9\-]*_[A-Za-z0-9_\- ]*|[a-z]):\s", re.M)
_PLACEHOLDER = re.compile(r"^[^:\n]+:\s*(?:[年月日時点\s/\-.]|YYYY|yyyy|MM|DD|dd|\?)+$", re.M)
_WEATHER = re.compile(
    r"^(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec|year) [a-z ]+(?: [CF]| mm| cm)?: ", re.I
)
# a point stated with numbers: a title coordinate, or infobox degrees / latitude (location
# maps and map frames mark other places, or frame a map: not the article's point)
_TITLE_COORD = re.compile(r"^\s*-?\d[^{}]*display\s*=\s*[^|}]*(?:title|\bt\b)", re.I | re.S)
_LATITUDE_KEY = re.compile(r"^(?:緯度度|lat|latitude|lat_deg|lat_d)$", re.I)


def raw_names(facts: str) -> list[str]:
    return [m.group(0).strip() + " …" for m in _RAW_NAME.finditer(facts)]


def placeholders(facts: str) -> list[str]:
    return [m.group(0) for m in _PLACEHOLDER.finditer(facts)]


def states_point(wikitext: str) -> bool:
    import mwparserfromhell

    for template in mwparserfromhell.parse(wikitext).filter_templates():
        name = str(template.name).strip().casefold()
        if name.startswith(("location map", "maplink")):
            continue
        if name in ("coord", "ウィキ座標度分秒") and _TITLE_COORD.match(
            str(template).split("|", 1)[-1]
        ):
            return True
        for param in template.params:
            value = str(param.value).strip()
            if _LATITUDE_KEY.match(str(param.name).strip()) and re.match(r"-?\d", value):
                return True
    return False


def far(title: str, point, reference) -> list[str]:
    if point is None or reference is None:
        return []
    km = distance_km(point, reference[:2])
    return [f"{km:.0f} km from {reference[2]}"] if km > FAR_KM else []


def distance_km(a, b) -> float:
    lat1, lon1, lat2, lon2 = map(math.radians, (*a, *b))
    h = (
        math.sin((lat2 - lat1) / 2) ** 2
        + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    return 2 * 6371.0 * math.asin(math.sqrt(h))


def geonames_references(titles: set[str], wiki: str) -> dict[str, tuple[float, float, str]]:
    """Title → (lat, lon, what) of the GeoNames place that is the same thing (see the module
    docstring: by name, as no Wikidata ids are at hand)."""
    from chiezo.ingest.geonames import jp_prefectures

    seats = {p.japanese: code for code, p in jp_prefectures().items()}
    by_name: dict[str, tuple[int, float, float, str]] = {}
    by_seat: dict[str, tuple[float, float, str]] = {}
    with zipfile.ZipFile(GEONAMES) as archive:
        member = next(n for n in archive.namelist() if n.endswith(".txt"))
        for raw in io.TextIOWrapper(archive.open(member), encoding="utf-8"):
            row = raw.rstrip("\n").split("\t")
            name, alternates, lat, lon = row[1], row[3], float(row[4]), float(row[5])
            code, country, admin1, population = row[7], row[8], row[10], int(row[14] or 0)
            if code == "PPLA" and country == "JP":
                by_seat[f"JP.{admin1}"] = (lat, lon, f"{name} (seat)")
            names = alternates.split(",") if wiki == "jawiki" else [name]
            for one in names:
                if one in titles and population >= by_name.get(one, (-1,))[0]:
                    by_name[one] = (population, lat, lon, name)
    countries = {f["properties"]["name"] for f in json.loads(COUNTRIES.read_text())["features"]}
    found = {
        t: (lat, lon, name) for t, (_, lat, lon, name) in by_name.items() if t not in countries
    }
    if wiki == "jawiki":
        for title in titles:
            seat = by_seat.get(seats.get(title, ""))
            if seat:
                found[title] = seat
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
