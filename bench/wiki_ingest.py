"""Wikipedia ingest speed against the physical limit of this machine, in the same run.

    python bench/wiki_ingest.py [--repeat 20] [--workers 2]

Makes a dump of a few thousand pages by repeating the real jawiki excerpt (each copy with new
page ids and titles) and reports, in one run:

* **parse-only limit** — mwparserfromhell ``parse`` + ``strip_code`` over the same pages in
  ``--workers`` processes, nothing else: the ceiling for any wikitext pipeline here;
* **chiezo render** — our ``parse_article`` (parse + render + categories + coordinates) alone,
  in the same processes;
* **end to end** — ``chiezo ingest wikipedia`` as a separate process: decompression, XML,
  parsing, staging, FTS index, validation; with its peak RSS (process tree).

Writes JSON to bench/results/. Goal (issue 4): end to end ≥ 60% of the parse-only rate.
"""

from __future__ import annotations

import argparse
import bz2
import json
import multiprocessing
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from xml.sax.saxutils import escape

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.ingest.wikidump import WikiDump  # noqa: E402

from corpus import SHARED  # noqa: E402

EXCERPT = SHARED / "data/wikipedia/jawiki-20230501-excerpt.xml.bz2"
console = Console(width=140)


def make_dump(path: Path, repeat: int) -> tuple[int, int, list[str]]:
    """(articles, wikitext characters, texts) of a dump repeating the excerpt's articles."""
    dump = WikiDump(EXCERPT)
    with bz2.open(EXCERPT, "rt", encoding="utf-8") as fh:
        head = fh.read(6000)
    siteinfo = head[: head.index("</siteinfo>") + len("</siteinfo>")]
    pages = [p for p in dump.pages() if p.ns == 0 and p.redirect is None]
    texts, chars = [], 0
    with bz2.open(path, "wt", encoding="utf-8") as out:
        out.write(siteinfo)
        page_id = 0
        for copy in range(repeat):
            for page in pages:
                page_id += 1
                title = page.title if copy == 0 else f"{page.title} ({copy})"
                out.write(
                    f"<page><title>{escape(title)}</title><ns>0</ns><id>{page_id}</id>"
                    f"<revision><id>{page_id}</id><text>{escape(page.text)}</text></revision>"
                    "</page>\n"
                )
                texts.append(page.text)
                chars += len(page.text)
        out.write("</mediawiki>\n")
    return page_id, chars, texts


def _strip(text: str) -> int:
    import mwparserfromhell

    return len(mwparserfromhell.parse(text).strip_code())


def _render(text: str) -> int:
    from chiezo.ingest.wikitext import Namespaces, parse_article

    return len(parse_article(text, Namespaces.for_wiki({}, "ja")).text)


def rate(func, texts: list[str], workers: int) -> float:
    chars = sum(len(t) for t in texts)
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(func, texts[:4])  # start the workers before timing
        started = time.perf_counter()
        pool.map(func, texts, chunksize=8)
        return chars / (time.perf_counter() - started)


def end_to_end(dump: Path) -> dict:
    with tempfile.TemporaryDirectory(prefix="wiki-bench-") as data:
        started = time.perf_counter()
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "chiezo",
                "--data",
                data,
                "ingest",
                "wikipedia",
                str(dump),
                "--json",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        seconds = time.perf_counter() - started
    report = json.loads(result.stdout)
    peak_kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"seconds": round(seconds, 1), "report": report, "peak_rss_mb": round(peak_kb / 1024)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument(
        "--workers",
        type=int,
        default=2,
        help="processes for the parse-only limit; end to end uses chiezo's default (cores + 1)",
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="wiki-dump-") as tmp:
        dump = Path(tmp) / "jawiki-bench-pages-articles.xml.bz2"
        articles, chars, texts = make_dump(dump, args.repeat)
        console.print(
            f"{articles:,} articles, {chars:,} wikitext characters, "
            f"{dump.stat().st_size / 2**20:.1f} MiB bz2"
        )
        parse_only = rate(_strip, texts, args.workers)
        render_only = rate(_render, texts, args.workers)
        e2e = end_to_end(dump)
    e2e_rate = chars / e2e["seconds"]
    result = {
        "articles": articles,
        "wikitext_chars": chars,
        "workers": args.workers,
        "parse_only_chars_per_s": round(parse_only),
        "render_only_chars_per_s": round(render_only),
        "end_to_end_chars_per_s": round(e2e_rate),
        "end_to_end_articles_per_s": round(articles / e2e["seconds"], 1),
        "end_to_end_share_of_parse_only": round(e2e_rate / parse_only, 3),
        "end_to_end": e2e,
    }
    table = Table(
        title=f"{articles:,} jawiki articles; limits measured with {args.workers} processes"
    )
    for col in ("stage", "wikitext chars/s", "articles/s", "share of parse-only"):
        table.add_column(col, justify="right")
    per_article = chars / articles
    for label, value in (
        ("parse + strip_code only", parse_only),
        ("chiezo parse + render only", render_only),
        ("chiezo end to end", e2e_rate),
    ):
        table.add_row(
            label, f"{value:,.0f}", f"{value / per_article:,.1f}", f"{value / parse_only:.0%}"
        )
    console.print(table)
    console.print(
        f"end to end: {e2e['seconds']} s, peak RSS {e2e['peak_rss_mb']} MiB, phases "
        f"{e2e['report']['timings']}"
    )
    out = HERE / "results" / f"wiki_ingest-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(result, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
