"""Questions in another language than the library: English over the jawiki excerpt, Japanese
over the English Ray Charles ZIM and the enwiki excerpt — before and after the search knows the
script of the question and of each source (search/languages.py).

    python bench/cross_language.py              # the cross-language and same-language sets
    python bench/cross_language.py --jaquad     # also JaQuAD dev (3,939 questions, ~10 min)
    python bench/cross_language.py --sweep      # the weights tried (design.md §42)
    python bench/cross_language.py --plan       # the model's plan on SmolLM2 (llama.cpp), ~15 min
    python bench/cross_language.py --answer     # what a rag answer reads (no model), ~5 min

The library is bench/cross_source.py's (built once under bench/work/cross_source: the jawiki
excerpt with use-m vectors, GeoNames, the enwiki excerpt, the Rust book, the Ray Charles ZIM),
and a second one whose English sources carry use-m vectors too (the other sources linked): a
Japanese question cannot find an English article by words, only by meaning. Question sets:
bench/data/README-crosslingual.md says how each was written. Every set is asked of its own
source alone and of all sources, "before" (the script of the question ignored, as the search
was) and "after", in the same run. Prints a table and writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import cross_source  # noqa: E402
from chiezo.core.config import Settings  # noqa: E402
from chiezo.ops import evaluate  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.search import evidence, languages, retrieval  # noqa: E402
from retrieval_eval import jaquad_folder  # noqa: E402

DATA = HERE / "data"
# each library by its folder: the five sources as built, the English ones with vectors, JaQuAD
LIBRARIES = {"data": "as built", "english-embedded": "English with vectors", "six": "+ JaQuAD"}
SHARED = cross_source.DATA
console = Console(width=160)


@contextlib.contextmanager
def scripts_ignored() -> Iterator[None]:
    """The search as it was: no source is ever in another script than the question, and no
    excerpt counts as about a subject across scripts (rag.ACROSS_SCRIPTS_ABOUT)."""
    from chiezo.answer import rag

    saved = languages.crosses, rag.ACROSS_SCRIPTS_ABOUT
    languages.crosses, rag.ACROSS_SCRIPTS_ABOUT = (lambda source, text: False), float("inf")
    try:
        yield
    finally:
        languages.crosses, rag.ACROSS_SCRIPTS_ABOUT = saved


@contextlib.contextmanager
def weights(**values: float) -> Iterator[None]:
    """The cross-script constants set for a while: keyword (retrieval's weight), meaning,
    and full (evidence's full meaning)."""
    where = {
        "keyword": (retrieval, "CROSS_SCRIPT_KEYWORD_WEIGHT"),
        "meaning": (evidence, "CROSS_SCRIPT_MEANING_WEIGHT"),
        "full": (evidence, "CROSS_SCRIPT_FULL_MEANING"),
    }
    saved = {name: getattr(*where[name]) for name in values}
    for name, value in values.items():
        setattr(*where[name], value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(*where[name], value)


def english_embedded(five: Context) -> Context:
    """A library whose English sources have use-m vectors; the others linked from ``five``."""
    root = cross_source.WORK / "english-embedded"
    corpus = root / "corpus"
    corpus.mkdir(parents=True, exist_ok=True)
    for name in ("jawiki", "geonames", "rust-book"):
        link = corpus / name
        if not link.exists():
            link.symlink_to(five.settings.corpus_dir / name, target_is_directory=True)
    library = Context(Settings(data_dir=root, query_timeout=60.0))
    for name in ("enwiki", "raycharles"):
        kind, path, options, _ = cross_source.LIBRARY[name]
        cross_source.build(library, name, kind, path, options, "use-m")
    return library


def question_sets(five: Context, english: Context, jaquad: Context | None) -> list[tuple]:
    """(direction, library, target source, questions file)"""
    sets = [
        ("en→ja", five, "jawiki", DATA / "en-over-jawiki-questions.jsonl"),
        ("en→ja", five, "jawiki", DATA / "en-over-jawiki-natural-questions.jsonl"),
        ("ja→en", english, "raycharles", DATA / "ja-over-raycharles-questions.jsonl"),
        ("ja→en", english, "enwiki", DATA / "ja-over-enwiki-questions.jsonl"),
        ("ja→ja", five, "jawiki", SHARED / "eval/ja/jawiki-excerpt-questions.jsonl"),
        ("ja→ja", five, "jawiki", DATA / "jawiki-natural-dev.jsonl"),
        ("en→en", five, "raycharles", DATA / "raycharles-questions.jsonl"),
        ("en→en", english, "raycharles", DATA / "raycharles-questions.jsonl"),
    ]
    if jaquad is not None:
        sets.append(("ja→ja", jaquad, "jaquad", jaquad_folder("dev", None)[1]))
    return sets


def measure(sets: list[tuple], limit: int | None) -> list[dict]:
    rows = []
    for direction, library, target, path in sets:
        questions = evaluate.load_questions(path, limit)
        shown = LIBRARIES.get(library.settings.data_dir.name, library.settings.data_dir.name)
        for scope, source in (("alone", target), ("all sources", None)):
            for when, context in (("before", scripts_ignored), ("after", contextlib.nullcontext)):
                with context():
                    row = cross_source.ask(library, questions, source, scope, target)
                rows.append(
                    {
                        "direction": direction,
                        "set": path.name,
                        "library": shown,
                        "scope": scope,
                        "when": when,
                        **{k: row[k] for k in ("R@1", "R@5", "MRR", "ms_per_query")},
                        "n": len(questions),
                    }
                )
                console.print(rows[-1])
    return rows


def sweep(sets: list[tuple]) -> list[dict]:
    """The cross-script constants tried, on the cross-language sets only: the keyword weight
    on each source alone, then the merge's on all sources."""
    crossing = [s for s in sets if s[0] in ("en→ja", "ja→en")]
    tried = [("alone", {"keyword": k}) for k in (0.0, 0.1, 0.2, 0.3, 0.5)]
    tried += [
        ("all sources", {"meaning": m, "full": f})
        for m in (0.65, 1.0)
        for f in (0.1, 0.15, 0.25, 0.5, 1.0)
    ]
    rows = []
    for scope, values in tried:
        with weights(**values):
            for _, library, target, path in crossing:
                source = target if scope == "alone" else None
                row = cross_source.ask(
                    library, evaluate.load_questions(path), source, scope, target
                )
                rows.append({**values, "set": path.name, "scope": scope,
                             "R@1": row["R@1"], "R@5": row["R@5"]})  # fmt: skip
                console.print(rows[-1])
    return rows


def planned(sets: list[tuple], limit: int | None) -> list[dict]:
    """Does a query in the source's language, added by the model's plan, find more? The
    English questions over the jawiki excerpt, asked of every source as a person asks: the
    question's own words (the default planner), the model's plan without the rule
    (``ACROSS_LANGUAGES``) and with it — on SmolLM2-135M served by llama.cpp with the documented
    line (bench/answer_e2e.py). R@k of the documents found (what the excerpts are cut from)."""
    from answer_e2e import documented_at
    from chiezo.answer import plan as planning
    from chiezo.answer import rag
    from chiezo.answer.llm import LLMClient, endpoints_from
    from chiezo.answer.options import AnswerOptions
    from chiezo.ops.lookups import LibraryLookups

    server, url, alias = documented_at(2048)
    rows = []
    for _direction, library, target, path in (s for s in sets if s[0] == "en→ja"):
        lookups = LibraryLookups(library)
        names = lookups.source_names()
        languages = {n: lookups.source_language(n) for n in names}
        options = AnswerOptions().resolved(library.settings)
        llm = LLMClient(endpoints_from(url, alias, None), timeout=60)
        for label, planner, rule in (("keywords", "keywords", ""), ("model, before", "model", ""),
                                     ("model, after", "model", planning.ACROSS_LANGUAGES)):  # fmt: skip
            at1 = at5 = added = unusable = 0
            questions = evaluate.load_questions(path, limit)
            saved = rag.ACROSS_LANGUAGES
            rag.ACROSS_LANGUAGES = rule
            try:
                for q in questions:
                    plan = rag.plan_queries(q.text, llm, names, planner=planner,
                                            languages=languages)  # fmt: skip
                    added += any(languages_differ(q.text, query) for query in plan.queries)
                    unusable += planner == "model" and plan.planner != "model"
                    hits, _ = rag.find_documents(lookups, plan, None, options.excerpts)
                    found = [h.title for h in hits if h.source == target]
                    at1 += bool(hits) and hits[0].source == target and hits[0].title in q.titles
                    at5 += any(t in found[:5] for t in q.titles)
            finally:
                rag.ACROSS_LANGUAGES = saved
            n = len(questions)
            rows.append({"set": path.name, "planner": label, "n": n, "R@1": round(at1 / n, 3),
                         "R@5": round(at5 / n, 3), "queries in another script": added,
                         "model's plan unusable": unusable})  # fmt: skip
            console.print(rows[-1])
    del server
    return rows


def excerpted(sets: list[tuple], limit: int | None) -> list[dict]:
    """What a rag answer reads, without a model (the default planner): R@1 / R@5 of the
    documents its excerpts come from, and how many questions get the fixed "no basis" reply
    (nothing found, or no excerpt about the subject named: answer/subject.py) — asked of all
    sources, before (scripts ignored) and after. The off-topic set (120 SQuAD test questions,
    seeded, about subjects the library lacks) counts only its "no basis" replies, which
    should stay."""
    from chiezo.answer import rag
    from chiezo.answer.options import AnswerOptions
    from chiezo.ops.lookups import LibraryLookups

    rows = []
    for direction, library, target, questions, name in _with_off_topic(sets, limit):
        lookups = LibraryLookups(library)
        options = AnswerOptions().resolved(library.settings)
        for when, context in (("before", scripts_ignored), ("after", contextlib.nullcontext)):
            at1 = at5 = refused = 0
            with context():
                for text, titles in questions:
                    prepared = rag.prepare(lookups, text, options)
                    right = [e.source == target and e.title in titles for e in prepared.excerpts]
                    at1 += any(right[:1])
                    at5 += any(right[:5])
                    refused += not prepared.needs_model
            n = len(questions)
            rows.append({"direction": direction, "set": name, "when": when, "n": n,
                         "R@1": round(at1 / n, 3), "R@5": round(at5 / n, 3),
                         "no basis": refused})  # fmt: skip
            console.print(rows[-1])
    return rows


OFF_TOPIC = 120  # SQuAD test questions asked as off-topic: their articles are in no source here


def _with_off_topic(sets: list[tuple], limit: int | None) -> list[tuple]:
    import random

    out = []
    for direction, library, target, path in sets:
        if library.settings.data_dir.name == "six":
            continue  # JaQuAD: the same-language rows above say it is unchanged
        asked = [(q.text, q.titles) for q in evaluate.load_questions(path, limit)]
        out.append((direction, library, target, asked, path.name))
    lines = (SHARED / "eval/en/topics.dpr.squad.test.txt").read_text().splitlines()
    random.Random(7).shuffle(lines)
    off = [(json.loads(line)["question"], frozenset()) for line in lines[:OFF_TOPIC]]
    out.append(("en, off-topic", sets[0][1], None, off, "squad-test-120 (no article here)"))
    return out


def languages_differ(question: str, query: str) -> bool:
    return languages.script_of_text(question) != languages.script_of_text(query)


def write(name: str, out: dict) -> None:
    path = HERE / "results" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, ensure_ascii=False, indent=2))
    console.print(f"wrote {path}")


def table(rows: list[dict], title: str) -> None:
    shown = Table(title=title)
    for column in rows[0]:
        shown.add_column(column)
    for row in rows:
        shown.add_row(*(str(v) for v in row.values()))
    console.print(shown)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jaquad", action="store_true", help="also JaQuAD dev as a source")
    parser.add_argument("--sweep", action="store_true", help="try the cross-script weights")
    parser.add_argument("--plan", action="store_true", help="the model's plan on SmolLM2")
    parser.add_argument("--answer", action="store_true", help="what a rag answer reads")
    parser.add_argument("--max-questions", type=int, default=None)
    args = parser.parse_args()
    five = Context(Settings(data_dir=cross_source.WORK / "data", query_timeout=60.0))
    for name, (kind, path, options, model) in cross_source.LIBRARY.items():
        cross_source.build(five, name, kind, path, options, model)
    english = english_embedded(five)
    jaquad = cross_source.with_jaquad(five) if args.jaquad else None
    sets = question_sets(five, english, jaquad)
    out: dict = {}
    if args.sweep:
        out["sweep"] = sweep(sets)
        table(out["sweep"], "cross-script weights (keyword side alone; meaning in the merge)")
    if args.plan or args.answer:  # one study a run: each writes its own results file
        key, study, title = (
            ("plan", planned, "the model's plan: a query in the source's language (SmolLM2-135M)")
            if args.plan
            else ("answer", excerpted, "what a rag answer reads (excerpts' documents), all sources")
        )
        out[key] = study(sets, args.max_questions)
        table(out[key], title)
        write(f"cross_language_{key}", out)
        return
    out["results"] = measure(sets, args.max_questions)
    table(out["results"], "R@k of the question's own article, before → after")
    write("cross_language", out)


if __name__ == "__main__":
    main()
