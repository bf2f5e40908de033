"""A kiwix-serve book searched live against the same ZIM re-indexed by Chiezo (docs/design.md
§36.5): recall and latency, the same queries, one run, both searched through Chiezo's own
search (what a user, the CLI or an agent gets).

    python bench/kiwix_live.py                    # tests/data's Ray Charles ZIM (129 articles)
    python bench/kiwix_live.py --zim FILE --passages 3

Needs kiwix-serve (Debian's kiwix-tools: ``make kiwix``) and a ZIM with a full-text index.
Queries are made from the ZIM's own articles, three kinds each:

- **title**: the article's title as typed — is the article first?
- **passage**: five consecutive words from a sentence of its body past the opening — is the
  article first, or in the first five?
- **two words**: two of its rarer words (in at most 5 % of articles) — first five?

Reports R@1, R@5 and the p50/p95 latency for each side and kind. Prints a table, writes JSON
to bench/results/kiwix_live.json.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import building, searching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.ingest import zim  # noqa: E402
from chiezo.ingest.htmltext import page_text  # noqa: E402
from chiezo.ingest.zimscan import scan  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.ops.requests import SearchRequest  # noqa: E402

RESULTS = HERE / "results" / "kiwix_live.json"
WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")


def articles(path: Path) -> list[tuple[str, str, str]]:
    """(path, title, text) of every article of the ZIM."""
    archive = zim.open_archive(path)
    with scan(archive) as scanned:
        ids = scanned.articles
    out = []
    for entry_id in ids:
        entry = archive._get_entry_by_id(entry_id)
        markup = bytes(entry.get_item().content).decode("utf-8", "replace")
        page = page_text(markup, entry.title)
        if page.text.strip():
            out.append((entry.path, entry.title or entry.path, page.text))
    return out


def queries(docs, passages: int, rng: random.Random) -> list[tuple[str, str, str]]:
    """(kind, query, the path of the article it is made from)."""
    df = Counter(w for _, _, text in docs for w in {w.lower() for w in WORD.findall(text)})
    rare = len(docs) * 0.05
    made = []
    for path, title, text in docs:
        made.append(("title", title, path))
        sentences = [s for s in re.split(r"(?<=[.!?])\s+", text[300:]) if len(s.split()) >= 8]
        for sentence in rng.sample(sentences, min(passages, len(sentences))):
            words = sentence.split()
            start = rng.randrange(0, len(words) - 5)
            made.append(("passage", " ".join(words[start : start + 5]), path))
        own = sorted({w.lower() for w in WORD.findall(text) if 1 < df[w.lower()] <= rare})
        if len(own) >= 2:
            made.append(("two words", " ".join(rng.sample(own, 2)), path))
    return made


def measure(service: Context, source: str, made) -> dict[str, dict]:
    by_kind: dict[str, dict] = {}
    for kind, query, path in made:
        started = time.perf_counter()
        try:
            hits = searching.search(
                service, SearchRequest.of(query=query, source=source, limit=5)
            ).hits
        except Exception as exc:  # a query one side refuses counts as a miss, said
            hits, error = [], type(exc).__name__
        else:
            error = None
        ms = (time.perf_counter() - started) * 1000
        keys = [h.key for h in hits]
        row = by_kind.setdefault(kind, {"ms": [], "at1": 0, "at5": 0, "n": 0, "errors": 0})
        row["ms"].append(ms)
        row["n"] += 1
        row["at1"] += bool(keys) and keys[0] == path
        row["at5"] += path in keys
        row["errors"] += error is not None
    for row in by_kind.values():
        ms = sorted(row.pop("ms"))
        row["p50_ms"] = statistics.median(ms)
        row["p95_ms"] = ms[min(len(ms) - 1, int(len(ms) * 0.95))]
        row["r_at_1"] = row["at1"] / row["n"]
        row["r_at_5"] = row["at5"] / row["n"]
    return by_kind


def main() -> None:
    from test_kiwix import KIWIX_SERVE, KiwixServe

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = HERE.parent / "tests" / "data" / "zim" / "libkiwix_zimfile_raycharles.zim"
    parser.add_argument("--zim", type=Path, default=default)
    parser.add_argument("--passages", type=int, default=3, help="passage queries per article")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    if KIWIX_SERVE is None:
        sys.exit("kiwix-serve is not installed: `make kiwix` installs Debian's kiwix-tools")
    console = Console(width=140)
    docs = articles(args.zim)
    made = queries(docs, args.passages, random.Random(args.seed))
    console.log(f"{len(docs)} articles, {len(made)} queries")
    server = KiwixServe(args.zim)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            service = Context(Settings(data_dir=Path(tmp) / "data"))
            live = building.ingest(service, "kiwix", server.url, None).name
            indexed = building.ingest(service, "zim", args.zim, "reindexed", embed=False).name
            measure(service, live, made[:10])  # both warm: connections, the files' pages
            measure(service, indexed, made[:10])
            sides = {
                "kiwix-serve, live": measure(service, live, made),
                "re-indexed by Chiezo": measure(service, indexed, made),
            }
    finally:
        server.stop()
    table = Table(title=f"{args.zim.name}: {len(docs)} articles, the same queries on each side")
    for column in ("side", "queries", "n", "R@1", "R@5", "p50 ms", "p95 ms", "errors"):
        table.add_column(column, justify="left" if column in ("side", "queries") else "right")
    for side, by_kind in sides.items():
        for kind, row in by_kind.items():
            table.add_row(
                side,
                kind,
                str(row["n"]),
                f"{row['r_at_1']:.3f}",
                f"{row['r_at_5']:.3f}",
                f"{row['p50_ms']:.1f}",
                f"{row['p95_ms']:.1f}",
                str(row["errors"]),
            )
    console.print(table)
    RESULTS.parent.mkdir(exist_ok=True)
    summary = {"zim": args.zim.name, "articles": len(docs), "queries": len(made), "sides": sides}
    RESULTS.write_text(json.dumps(summary, indent=1))
    console.print(f"written {RESULTS}")


if __name__ == "__main__":
    main()
