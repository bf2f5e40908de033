"""Does the model get to read the answer? The excerpts `ask` would send, measured without a model
(issue #29): for each question, the excerpts of `rag.prepare` (keyword planner, the default
budget), and whether the gold answer string (NFKC, case and spaces ignored) is inside them, and
inside excerpt 1; the mean size of the excerpts in characters. The baseline, in the same run
and on the same found documents, is the selection before #29: each of the documents gets an even
share of the budget, its lead plus a window around the question's rarest pieces.

An answer without a model (issue #43 item 5): on the excerpts `ask` sends, whether the gold
answer is in the first of ``answer/sentences.py``'s sentences and in the first three, beside the
baseline the issue named — the same excerpts' sentences ranked by how many of the question's
character bigrams each holds (``bigram_sentences``).

    python bench/answer_context.py                 # every set below
    python bench/answer_context.py --sets shared,library --limit 40
    python bench/answer_context.py --sets shared,long-check --sentences-only

Sets:

* ``shared`` — the 92 shared questions (``../shared/data/eval/ja/jawiki-excerpt-questions.jsonl``,
  about 日本語 and 桂正和) against the jawiki excerpt alone;
* ``library`` — the same questions over every source of a library: the jawiki and enwiki
  excerpts, GeoNames cities15000, the bundled guide and docs;
* ``jaquad-dev`` — JaQuAD dev questions against its paragraphs, one document each (short
  paragraphs: what must not drop);
* ``long-dev`` — JaQuAD *train* questions against their articles, each article one long
  document (its paragraphs in order): the set passage choice and the sentence ranker were
  developed on — the shared questions and JaQuAD dev were only measured, never tuned on;
* ``long-check`` — JaQuAD dev questions against their articles as long documents: held out.

Sources are built with the real CLI into ``--data`` (default bench/work/answer_context) and
embedded with use-m; a second run reuses them. Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import operating, reading
from chiezo.ops.lookups import LibraryLookups
from chiezo.ops.requests import DocRequest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SHARED = ROOT.parent / "shared" / "data"
JAWIKI = SHARED / "wikipedia" / "jawiki-202207-excerpt-truncated.xml.bz2"
ENWIKI = SHARED / "wikipedia" / "enwiki-202207-excerpt.xml.bz2"
GEONAMES = SHARED / "geonames" / "cities15000.zip"
ADMIN1 = SHARED / "geonames" / "admin1CodesASCII.txt"
QUESTIONS = SHARED / "eval" / "ja" / "jawiki-excerpt-questions.jsonl"
JAQUAD = SHARED / "eval" / "ja" / "jaquad"
SHARED_TITLES = ("日本語", "桂正和")  # the shared questions' articles: kept out of long-dev
MODEL = "use-m"
console = Console(width=150)


def folded(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


# -- data ---------------------------------------------------------------------------------------


def chiezo(data: Path, *args: str) -> None:
    env = {**os.environ, "CHIEZO_DATA": str(data)}
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "chiezo", *args],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    console.print(
        f"  chiezo {' '.join(args[:2])} {args[-1] if len(args) > 2 else ''} "
        f"({time.monotonic() - started:.0f} s)"
    )


def prepare(data: Path, rng: random.Random, wanted: list[str]) -> dict[str, list[dict]]:
    """Build what the ``wanted`` sets need and is missing — the library in ``data/library``,
    the JaQuAD sources in ``data/jaquad`` (apart: searched together, JaQuAD's own Wikipedia
    articles would crowd the library's) — and return the question sets."""
    library, jaquad = data / "library", data / "jaquad"
    once = _builder(data)
    if {"shared", "library"} & set(wanted):
        once(
            library,
            "jawiki",
            "ingest",
            "wikipedia",
            str(JAWIKI),
            "--name",
            "jawiki",
            "--allow-truncated",
            "--embed",
            MODEL,
        )
    if "library" in wanted:
        once(
            library,
            "enwiki",
            "ingest",
            "wikipedia",
            str(ENWIKI),
            "--name",
            "enwiki",
            "--embed",
            MODEL,
        )
        once(library, "geonames", "ingest", "geonames", str(GEONAMES), "--admin1", str(ADMIN1))
        once(library, "guide", "ingest", "docs", str(ROOT / "sample"), "--name", "guide")
        once(library, "chiezo-docs", "ingest", "docs", str(ROOT / "docs"), "--name", "chiezo-docs")
    sets = {"shared": _shared(), "library": _shared()}
    train, dev = _jaquad("train"), _jaquad("dev")
    for name, articles, whole in (
        ("jaquad-dev", dev, False),
        ("long-dev", train, True),
        ("long-check", dev, True),
    ):
        questions = [q for a in articles for q in a["questions"]]
        sets[name] = rng.sample(questions, min(len(questions), 300))  # the same draw always
        if name not in wanted:
            continue
        folder = data / "folders" / name
        if not folder.exists():
            _write_docs(folder, articles, whole)
        once(jaquad, name, "ingest", "docs", str(folder), "--name", name, "--embed", MODEL)
    return sets


def _builder(data: Path):
    """``once(data_dir, name, *args)``: run ``chiezo *args`` unless ``name`` was built there."""
    record = data / "built.json"
    done = json.loads(record.read_text()) if record.exists() else []

    def once(where: Path, name: str, *args: str) -> None:
        if f"{where.name}/{name}" not in done:
            chiezo(where, *args)
            done.append(f"{where.name}/{name}")
            record.write_text(json.dumps(done))

    return once


def _shared() -> list[dict]:
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]
    return [{"question": r["question"], "answers": r["answers"], "id": r["id"]} for r in rows]


def _jaquad(split: str) -> list[dict]:
    """JaQuAD's articles of a split: title, paragraphs, questions (with their answers)."""
    articles = []
    for path in sorted((JAQUAD / split).glob("*.json")):
        for article in json.loads(path.read_text(encoding="utf-8"))["data"]:
            if article["title"] in SHARED_TITLES:
                continue
            paragraphs = [p["context"] for p in article["paragraphs"]]
            questions = [
                {
                    "question": qa["question"],
                    "id": qa["id"],
                    "answers": [a["text"] for a in qa["answers"]],
                }
                for p in article["paragraphs"]
                for qa in p["qas"]
            ]
            articles.append(
                {"title": article["title"], "paragraphs": paragraphs, "questions": questions}
            )
    return articles


def _write_docs(folder: Path, articles: list[dict], whole: bool) -> None:
    """One Markdown file per article (its paragraphs in order) or per paragraph."""
    folder.mkdir(parents=True, exist_ok=True)
    for i, article in enumerate(articles):
        parts = [article["paragraphs"]] if whole else [[p] for p in article["paragraphs"]]
        for j, paragraphs in enumerate(parts):
            body = "\n\n".join(paragraphs)
            title = article["title"].replace('"', "'")
            (folder / f"{i:04d}-{j:03d}.md").write_text(
                f'---\ntitle: "{title}"\n---\n\n{body}\n', encoding="utf-8"
            )


# -- measuring ----------------------------------------------------------------------------------


def measure(service, questions: list[dict], source: str | None, selections, rankers) -> dict:
    """Per selection: answer in the excerpts, in excerpt 1, mean characters, ms; and per
    sentence ranker, on the excerpts of the last selection (what `ask` sends): answer in
    sentence 1, in the first three, sentence 1's mean characters, ms."""
    from chiezo.answer import rag
    from chiezo.answer.options import AnswerOptions

    options = AnswerOptions(source=source).resolved(service.settings)
    names = [s["name"] for s in operating.sources(service)]
    found = {name: {"in": 0, "first": 0, "chars": [], "ms": []} for name in selections}
    said = {name: {"first": 0, "three": 0, "chars": [], "ms": []} for name in rankers}
    for q in questions:
        plan = rag.plan_queries(q["question"], None, names)
        hits, _ = rag.find_documents(LibraryLookups(service), plan, source, options.excerpts)
        gold = [folded(a) for a in q["answers"] if a.strip()]
        excerpts = []
        for name, select in selections.items():
            started = time.perf_counter()
            excerpts = select(service, hits, q["question"], options.budget)
            found[name]["ms"].append((time.perf_counter() - started) * 1000)
            texts = [folded(e.text) for e in excerpts]
            found[name]["in"] += any(g in t for g in gold for t in texts)
            found[name]["first"] += bool(texts) and any(g in texts[0] for g in gold)
            found[name]["chars"].append(sum(len(e.text) for e in excerpts))
        for name, rank in rankers.items():
            started = time.perf_counter()
            sentences = [folded(s.text) for s in rank(q["question"], excerpts, 3)]
            said[name]["ms"].append((time.perf_counter() - started) * 1000)
            said[name]["first"] += bool(sentences) and any(g in sentences[0] for g in gold)
            said[name]["three"] += any(g in s for g in gold for s in sentences[:3])
            said[name]["chars"].append(len(sentences[0]) if sentences else 0)
    n = max(len(questions), 1)
    out = {
        name: {
            "questions": len(questions),
            "answer_in_excerpts": round(f["in"] / n, 3),
            "answer_in_excerpt_1": round(f["first"] / n, 3),
            "mean_chars": round(statistics.mean(f["chars"]) if f["chars"] else 0),
            "ms_median": round(statistics.median(f["ms"]) if f["ms"] else 0, 1),
        }
        for name, f in found.items()
    }
    for name, f in said.items():
        out[name] = {
            "questions": len(questions),
            "answer_in_sentence_1": round(f["first"] / n, 3),
            "answer_in_sentences_1_3": round(f["three"] / n, 3),
            "sentence_1_mean_chars": round(statistics.mean(f["chars"]) if f["chars"] else 0),
            "ms_median": round(statistics.median(f["ms"]) if f["ms"] else 0, 1),
        }
    return out


def answer_sentences(question, excerpts, limit):
    """The answer without a model (answer/sentences.py, issue #43 item 5)."""
    from chiezo.answer.sentences import answer_sentences as ranked

    return ranked(question, excerpts, limit)


def bigram_sentences(question, excerpts, limit):
    """The baseline named by issue #43: the excerpts' sentences (as the model reads them,
    support.split_sentences) ranked by how many of the question's character bigrams each
    holds, the earlier first among equals; whole, none left out."""
    from chiezo.answer.sentences import AnswerSentence
    from chiezo.answer.support import split_sentences

    def grams(text: str) -> set[str]:
        text = folded(text)
        return {text[i : i + 2] for i in range(len(text) - 1)}

    asked = grams(question)
    pool = [(s, e.n) for e in excerpts for s in split_sentences(e.text)]
    ranked = sorted(pool, key=lambda p: -len(asked & grams(p[0])))
    return [AnswerSentence(text, n) for text, n in ranked[:limit]]


def evidence(service, hits, question, budget):
    from chiezo.answer import rag

    return rag.make_excerpts(LibraryLookups(service), hits, question, budget)


def before_29(service, hits, question, budget):
    """The selection before issue #29, kept here as the baseline: an even share of the budget
    per document, its lead (a quarter of the share, cut at a sentence end) and the window
    around the question's rarest index pieces."""
    from chiezo.answer.excerpt import Excerpt
    from chiezo.search.fts import choose_grams

    if not hits:
        return []
    share = max(300, budget // len(hits))
    out = []
    for hit in hits:
        doc = reading.doc(
            service, DocRequest.of(source=hit.source, doc_id=hit.doc_id, fields=["body"])
        )
        source = service.library.get(hit.source)
        pieces = choose_grams(source.conn, question, int(source.meta.get("doc_count", 1)))
        text = _lead_and_window(doc.get("body") or hit.snippet, pieces, share)
        if any(e.text == text for e in out):
            continue
        out.append(Excerpt(len(out) + 1, hit.source, hit.doc_id, hit.title, None, text))
    return out


def _lead_and_window(body: str, pieces: list[str], budget: int) -> str:
    import re

    sentence_end = re.compile(r"[。！？!?]|\.\s")

    def cut(text: str) -> str:
        ends = [m.end() for m in sentence_end.finditer(text)]
        return text[: ends[-1]].strip() if ends and ends[-1] > len(text) // 2 else text.strip()

    body = " ".join(body.split())
    if len(body) <= budget:
        return body
    lead = cut(body[: max(1, int(budget * 0.25))])
    rest = budget - len(lead) - 3
    lowered = body.lower()
    weights = {p.lower(): 1.0 / (1 + rank) for rank, p in enumerate(pieces[:12])}
    hits = sorted(
        (m.start(), p)
        for p in weights
        for m in re.finditer(re.escape(p), lowered)
        if m.start() >= len(lead)
    )
    if rest <= 0 or not hits:
        return cut(body[:budget])
    best, best_score = None, 0.0
    for i, (position, _) in enumerate(hits):
        inside = {p for q, p in hits[i:] if q < position + rest * 2 // 3}
        score = sum(weights[p] for p in inside)
        if score > best_score:
            best, best_score = position, score
    start = max(len(lead), best - rest // 6)
    window_start = body.rfind("。", len(lead), best)
    if window_start != -1 and best - window_start < rest // 3:
        start = window_start + 1
    if start <= len(lead):
        return cut(body[:budget])
    return f"{lead} … {body[start : start + rest]}"


# each set: (the data folder it is asked in, the source it is asked of; None: every source)
SOURCE_OF = {
    "shared": ("library", "jawiki"),
    "library": ("library", None),
    "jaquad-dev": ("jaquad", "jaquad-dev"),
    "long-dev": ("jaquad", "long-dev"),
    "long-check": ("jaquad", "long-check"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=HERE / "work" / "answer_context")
    parser.add_argument("--sets", default=",".join(SOURCE_OF))
    parser.add_argument("--limit", type=int, default=0, help="questions per set (0: all)")
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument(
        "--sentences-only",
        action="store_true",
        help="measure only the excerpts `ask` sends (not the selection before #29)",
    )
    args = parser.parse_args()

    from chiezo.core.config import Settings
    from chiezo.ops.context import Context

    rng = random.Random(args.seed)
    args.data.mkdir(parents=True, exist_ok=True)
    wanted = args.sets.split(",")
    sets = prepare(args.data, rng, wanted)
    services = {
        where: Context(Settings(data_dir=args.data / where)) for where in ("library", "jaquad")
    }
    selections = {"before #29": before_29, "evidence": evidence}
    if args.sentences_only:
        selections = {"evidence": evidence}
    rankers = {"sentences: bigrams": bigram_sentences, "sentences: ranked": answer_sentences}
    report = {"sets": {}, "budget": services["library"].settings.answer_budget}
    for name in wanted:
        questions = sets[name][: args.limit] if args.limit else sets[name]
        console.print(f"[bold]{name}[/] ({len(questions)} questions)")
        where, source = SOURCE_OF[name]
        report["sets"][name] = measure(services[where], questions, source, selections, rankers)
    show(report)
    out = HERE / "results" / f"answer_context-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")


def show(report: dict) -> None:
    table = Table(title=f"the excerpts `ask` sends (budget {report['budget']:,} characters)")
    for column in (
        "set",
        "selection",
        "questions",
        "answer in excerpts",
        "in excerpt 1",
        "mean chars",
        "ms (median)",
    ):
        table.add_column(column, justify="right")
    said = Table(title="an answer without a model: sentences of those excerpts (issue #43)")
    for column in (
        "set",
        "ranking",
        "questions",
        "answer in excerpts",
        "in sentence 1",
        "in sentences 1-3",
        "sentence 1 chars",
        "ms (median)",
    ):
        said.add_column(column, justify="right")
    for name, rows in report["sets"].items():
        for selection, r in rows.items():
            if "answer_in_sentence_1" in r:
                said.add_row(
                    name,
                    selection.removeprefix("sentences: "),
                    str(r["questions"]),
                    f"{rows['evidence']['answer_in_excerpts']:.3f}",
                    f"{r['answer_in_sentence_1']:.3f}",
                    f"{r['answer_in_sentences_1_3']:.3f}",
                    f"{r['sentence_1_mean_chars']:,}",
                    f"{r['ms_median']:.1f}",
                )
                continue
            table.add_row(
                name,
                selection,
                str(r["questions"]),
                f"{r['answer_in_excerpts']:.3f}",
                f"{r['answer_in_excerpt_1']:.3f}",
                f"{r['mean_chars']:,}",
                f"{r['ms_median']:.1f}",
            )
    console.print(table)
    console.print(said)


if __name__ == "__main__":
    main()
