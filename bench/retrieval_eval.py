"""Keyword vs semantic vs hybrid retrieval on real Japanese questions — the numbers that set the
defaults (docs/design.md, "Semantic and hybrid search").

    python bench/retrieval_eval.py                      # JaQuAD dev, both built-in models
    python bench/retrieval_eval.py --split train --max-paragraphs 1500   # the tuning set
    python bench/retrieval_eval.py --corpus jawiki      # the 92 jawiki-excerpt questions
    python bench/retrieval_eval.py --corpus articles    # whole JaQuAD train articles (dev set)

JaQuAD: every paragraph of the split becomes one document (``# title`` + the paragraph), every
question is asked, and the paragraph it was written from is the one relevant document. The
sources and the embedding cache persist under bench/work/retrieval_eval, so a second run costs
only the searches (e5-small embeds ~3.6 passages/s here: the first dev run takes ~7 minutes).

``articles``: every JaQuAD *train* article becomes one document (its paragraphs joined — long
documents, as jawiki's), every ``--every``-th question is asked, and its article is the relevant
document. Articles the shared jawiki questions are about are left out, with their questions, so
this development set shares nothing with them (docs/design.md §31.4).

Weights and fusion are tuned on the *train* split and reported on *dev*, so the dev numbers are
not fitted to the questions they are measured on. Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import building

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.errors import NotFound  # noqa: E402
from chiezo.ops import evaluate  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402

from corpus import SHARED, jaquad_articles  # noqa: E402

WORK = HERE / "work" / "retrieval_eval"
JAWIKI_DUMP = SHARED / "data/wikipedia/jawiki-20230501-excerpt.xml.bz2"
JAWIKI_QUESTIONS = SHARED / "data/eval/ja/jawiki-excerpt-questions.jsonl"
MODELS = {"use-m": "use", "e5-small": "e5"}
console = Console(width=140)


def jaquad_folder(split: str, max_paragraphs: int | None) -> tuple[Path, Path]:
    """One Markdown file per paragraph and the questions file pointing at them."""
    folder = WORK / f"jaquad-{split}-{max_paragraphs or 'all'}"
    docs, questions = folder / "docs", folder / "questions.jsonl"
    if questions.exists():
        return docs, questions
    docs.mkdir(parents=True, exist_ok=True)
    lines, count = [], 0
    for a, article in enumerate(jaquad_articles(split)):
        for p, paragraph in enumerate(article["paragraphs"]):
            if max_paragraphs is not None and count >= max_paragraphs:
                break
            key = f"{a:03d}-{p:03d}.md"
            (docs / key).write_text(f"# {article['title']}\n\n{paragraph['context']}\n", "utf-8")
            count += 1
            for qa in paragraph["qas"]:
                row = {"question": qa["question"], "relevant_keys": [key]}
                lines.append(json.dumps(row, ensure_ascii=False))
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return docs, questions


def articles_folder(every: int) -> tuple[Path, Path]:
    """One Markdown file per JaQuAD train article, and every ``every``-th question of the
    articles kept. The articles of the shared jawiki questions are not among them."""
    folder = WORK / f"jaquad-articles-every{every}"
    docs, questions = folder / "docs", folder / "questions.jsonl"
    if questions.exists():
        return docs, questions
    shared = [json.loads(line) for line in JAWIKI_QUESTIONS.read_text("utf-8").splitlines()]
    held = {t for row in shared for t in row["relevant_titles_in_excerpt"]}
    held_ids = {row["id"].removeprefix("jaquad:") for row in shared}
    docs.mkdir(parents=True, exist_ok=True)
    lines, count = [], 0
    for a, article in enumerate(jaquad_articles("train")):
        if article["title"] in held:
            continue
        key = f"{a:03d}.md"
        body = "\n\n".join(p["context"] for p in article["paragraphs"])
        (docs / key).write_text(f"# {article['title']}\n\n{body}\n", "utf-8")
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                count += 1
                if count % every or qa["id"] in held_ids:
                    continue
                row = {"id": qa["id"], "question": qa["question"], "relevant_keys": [key]}
                lines.append(json.dumps(row, ensure_ascii=False))
    questions.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return docs, questions


def build(
    service: Context,
    corpus: str,
    docs: Path | None,
    name: str,
    model: str | None,
    unit_chars: int | None = None,
) -> None:
    try:
        source = service.library.get(name)
        built = True
    except NotFound:
        built = False
    if not built:
        if corpus == "jawiki":
            building.ingest(service, "wikipedia", JAWIKI_DUMP, name)
        else:
            building.ingest(service, "docs", docs, name)
        source = service.library.get(name)
    units = source.meta.get("embedding_unit_chars")
    if model and (source.meta.get("embedding_model") != model or units != str(unit_chars)):
        started = time.monotonic()
        report = building.embed(service, name, model, unit_chars=unit_chars)
        console.print(
            f"embedded {name} with {model}: {report.to_dict()} ({time.monotonic() - started:.0f} s)"
        )


def configs_for(name: str, sweep: bool) -> list[dict]:
    out = [{"source": name, "mode": "semantic"}]
    weights = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8) if sweep else (None,)
    for w in weights:
        config = {"source": name, "mode": "hybrid", "fusion": "minmax"}
        if w is not None:
            config["keyword_weight"] = w
        out.append(config)
    out.append({"source": name, "mode": "hybrid", "fusion": "rrf", "keyword_weight": 0.5})
    return out


@contextlib.contextmanager
def trigrams_only():
    """Keyword search as before the word index: the word side finds no words."""
    from chiezo.search import keyword

    saved = keyword.query_words
    keyword.query_words = lambda text: []
    try:
        yield
    finally:
        keyword.query_words = saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", choices=("jaquad", "jawiki", "articles"), default="jaquad")
    parser.add_argument("--every", type=int, default=10, help="articles: ask every N-th question")
    parser.add_argument("--split", choices=("dev", "train"), default="dev")
    parser.add_argument("--max-paragraphs", type=int, default=None)
    parser.add_argument("--models", default="use-m,e5-small")
    parser.add_argument("--sweep", action="store_true", help="keyword weights 0.3..0.8")
    parser.add_argument("--max-questions", type=int, default=None)
    parser.add_argument(
        "--unit-chars",
        default="60",
        help="comma-separated embedding unit sizes to compare (0: whole chunks)",
    )
    parser.add_argument(
        "--baseline",
        action="store_true",
        help="also run every config with the word index switched off",
    )
    args = parser.parse_args()

    service = Context(Settings(data_dir=WORK / "data", query_timeout=60.0))
    if args.corpus == "jawiki":
        corpus, docs, questions_path = "jawiki", None, JAWIKI_QUESTIONS
    elif args.corpus == "articles":
        corpus = f"articles-every{args.every}"
        docs, questions_path = articles_folder(args.every)
    else:
        corpus = f"jaquad-{args.split}"
        docs, questions_path = jaquad_folder(args.split, args.max_paragraphs)
        if args.max_paragraphs:
            corpus += f"-{args.max_paragraphs}"
    questions = evaluate.load_questions(questions_path, args.max_questions)
    models = [m for m in args.models.split(",") if m]

    build(service, args.corpus, docs, f"{corpus}-kw", None)
    configs: list[dict] = [{"source": f"{corpus}-kw", "mode": "keyword"}]
    for model in models:
        for units in (int(u) for u in args.unit_chars.split(",")):
            name = f"{corpus}-{MODELS[model]}-u{units}"
            build(service, args.corpus, docs, name, model, units)
            configs += configs_for(name, args.sweep)

    rows = []
    for config in configs:
        scores = evaluate.run(service, config["source"], questions, config)
        rows.append(scores.summary())
        console.print(rows[-1])
    if args.baseline:  # the same configs with the trigram index alone, in the same run
        with trigrams_only():
            for config in configs:
                scores = evaluate.run(service, config["source"], questions, config)
                rows.append(
                    {**scores.summary(), "config": "trigrams only: " + scores.summary()["config"]}
                )
                console.print(rows[-1])
    table = Table(title=f"{len(questions)} questions, {corpus}")
    columns = ("config", "R@1", "R@5", "R@10", "MRR", "nDCG@10", "ms_per_query")
    for column in columns:
        table.add_column(column, justify="left" if column == "config" else "right")
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    console.print(table)
    out = HERE / "results" / f"retrieval_eval-{corpus}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(
        json.dumps(
            {"corpus": corpus, "questions": len(questions), "results": rows},
            ensure_ascii=False,
            indent=2,
        )
    )
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
