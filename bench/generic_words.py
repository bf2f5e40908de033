"""Search on generic words (issue #29, item 7): what the keyword side's matched words are worth,
how much weight it should get per query, and the code before → after — every rule on the same
candidate lists.

    python bench/retrieval_eval.py --corpus articles --models use-m   # builds the dev set
    python bench/generic_words.py --collect                           # the lists, once
    python bench/generic_words.py                                     # every rule, in seconds

Each question is searched once per side exactly as hybrid search does it (the keyword plan —
words and trigrams fused, title-exact first —, the semantic candidates with those under the
floor, the floor applied as retrieval._floored does), and every keyword candidate's set of the
query's words it holds (anywhere / in its title) is read, with each word's document frequency
and which of them are light (words.light_words: 一番, 何, ある). ``--collect`` also runs the real
hybrid search (retrieval.retrieve) for every question, so the table shows the code itself beside
the offline rule that should equal it. The rules are then applied offline: "BEFORE" is the
fusion before item 7 (coverage of every word, one weight), "AFTER" the code's.

Item 7 also tried leaving light words out of the word side's OR (keyword.choose_words): it lost
on three sets of four, so the keyword lists are the same before and after; that run's lists and
numbers are in bench/results/generic_words-20261202-000117.json (its "after" rows).

Question sets: the development sets (``natural jawiki``: bench/data/jawiki-natural-dev.jsonl,
117 questions written over the jawiki excerpt's articles; ``JaQuAD train articles``: whole
JaQuAD *train* articles, built by bench/retrieval_eval.py without the articles of the shared
jawiki questions), and two checks that are never tuned on — the 92 shared jawiki-excerpt
questions and JaQuAD dev. Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import searching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.query import phrase  # noqa: E402
from chiezo.core.words import light_words, query_words  # noqa: E402
from chiezo.ops import evaluate  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.ops.requests import SearchRequest  # noqa: E402
from chiezo.search import retrieval  # noqa: E402
from chiezo.search.evidence import SPECIFIC, TITLE_SHARE, _holding  # noqa: E402
from chiezo.search.filters import Filters  # noqa: E402
from chiezo.search.fts import plan_search  # noqa: E402
from chiezo.search.hybrid import minmax, scale_to_max  # noqa: E402
from chiezo.search.keyword import word_frequencies  # noqa: E402
from chiezo.search.semantic import (  # noqa: E402
    BELOW_FLOOR_OWNERS,
    default_floor,
    embed_query,
    semantic_candidates,
)

WORK = HERE / "work" / "retrieval_eval"
CACHE = HERE / "work" / "generic_words"
TOP = retrieval.DEFAULT_TOP_N
WEIGHT = retrieval.KEYWORD_WEIGHT["use-m"]
console = Console(width=160)

SETS = {  # name: (source, questions file)
    "dev: natural jawiki": ("jawiki-use-u60", HERE / "data" / "jawiki-natural-dev.jsonl"),
    "dev: JaQuAD train articles": (
        "articles-every10-use-u60",
        WORK / "jaquad-articles-every10" / "questions.jsonl",
    ),
    "check: jawiki 92": (
        "jawiki-use-u60",
        HERE.parent.parent / "shared/data/eval/ja/jawiki-excerpt-questions.jsonl",
    ),
    "check: JaQuAD dev": ("jaquad-dev-use-u60", WORK / "jaquad-dev-all" / "questions.jsonl"),
}


def collect(service: Context, name: str, questions) -> list[dict]:
    source = service.library.get(name)
    keys = dict(source.conn.execute("SELECT doc_id, key FROM docs"))
    titles = dict(source.conn.execute("SELECT doc_id, title FROM docs"))
    floor = default_floor(source, source.meta["embedding_model"])
    out = []
    for q in questions:
        plan = retrieval._keyword_side(source, q.text, TOP, None, Filters(), None)
        live = searching.search(
            service, SearchRequest.of(query=q.text, source=name, limit=10)
        )  # the code itself
        trigrams = plan_search(source, q.text, want=TOP)
        sem = semantic_candidates(
            source, embed_query(source, q.text), TOP, below_floor=BELOW_FLOOR_OWNERS
        )
        words = query_words(q.text)
        df = word_frequencies(source.conn, words) if words and source.has_words else {}
        ids = [d for d, _ in plan.ranked]
        held: dict[int, list[str]] = {d: [] for d in ids}
        in_title: dict[int, list[str]] = {d: [] for d in ids}
        for word in (w for w in words if df.get(w)):
            for got, expr in (
                (held, phrase(word)),
                (in_title, "{title aliases} : " + phrase(word)),
            ):
                for d in _holding(source.conn, expr, ids, True):
                    got[d].append(word)
        out.append(
            {
                "q": q.text,
                "n": source.doc_count,
                "words": words,
                "df": df,
                "floor": floor,
                "light": sorted(light_words(q.text)),
                "has_words": source.has_words,
                "keyword": plan.ranked,
                "first": plan.first,
                "mode": plan.plan,
                "trigrams": [(c.doc_id, -c.score) for c in trigrams.ordered],
                "held": {str(d): v for d, v in held.items()},
                "in_title": {str(d): v for d, v in in_title.items()},
                "semantic": [(h.doc_id, h.score) for h in sem],
                "live": [h.doc_id for h in live.hits],
                "relevant": [d for d, k in keys.items() if q.relevant(k, titles[d])],
            }
        )
    return out


# -- what the rules are made of ----------------------------------------------------------------


def idf(case, word) -> float:
    return math.log(1 + case["n"] / (case["df"].get(word, 0) + 1))


def coverage_of(case, d, words=None) -> float:
    """evidence.coverage of ``words`` (all the query's words when None) for document ``d``."""
    words = case["words"] if words is None else words
    present = {w: idf(case, w) for w in words}
    total = sum(present.values()) or 1.0
    held, title = set(case["held"].get(str(d), ())), set(case["in_title"].get(str(d), ()))
    anywhere = sum(v for w, v in present.items() if w in held)
    titled = sum(v for w, v in present.items() if w in title)
    return ((1 - TITLE_SHARE) * anywhere + TITLE_SHARE * titled) / total


def content(case, words) -> list[str]:
    light = set(case["light"])
    return [w for w in words if w not in light]


def specificity(case, scale: float = SPECIFIC) -> float:
    """evidence.specificity: the query's most informative content word, log(N/df) / log N,
    over ``scale``, at most 1."""
    words, n = case["words"], case["n"]
    if not words or not case["has_words"] or n < 2:
        return 1.0
    kept = content(case, words)
    if not kept:
        return 0.0
    rarest = min(case["df"].get(w, 0) for w in kept)
    information = 1.0 if rarest == 0 else math.log(n / rarest) / math.log(n)
    return min(1.0, information / scale)


def chance(case, words) -> float:
    """How many *other* documents would hold all of ``words`` if words fell independently."""
    n = case["n"]
    if not words or n < 2:
        return float(n)
    expected = n - 1
    for w in words:
        expected *= max(case["df"].get(w, 1) - 1, 0) / (n - 1)
    return expected


def information(case, words) -> float:
    """Σ log(N / df) of ``words`` over log N: 1 = as specific as a word of one document."""
    n = case["n"]
    if n < 2:
        return 1.0
    return sum(math.log(n / max(case["df"].get(w, 1), 1)) for w in words) / math.log(n)


def peak(case, words) -> float:
    """The most informative of ``words``: max log(N / df) over log N."""
    n = case["n"]
    if n < 2:
        return 1.0
    return max((math.log(n / max(case["df"].get(w, 1), 1)) for w in words), default=0.0) / math.log(
        n
    )


def measured(case, words, measure: str, scale: float) -> float:
    if measure == "chance":
        return 1.0 / (1.0 + chance(case, words) / scale)
    if measure == "peak":
        return min(1.0, peak(case, words) / scale)
    return min(1.0, information(case, words) / scale)


def floored(case):
    if "_sem" not in case:
        found = {d for d, _ in case["keyword"]}
        case["_sem"] = [(d, s) for d, s in case["semantic"] if s >= case["floor"] or d in found]
    return case["_sem"]


def fused_order(kw: dict, sem: list, weight: float, first: list) -> list:
    s = dict(zip([d for d, _ in sem], minmax([v for _, v in sem]), strict=True))
    combined = {d: weight * kw.get(d, 0.0) + (1 - weight) * s.get(d, 0.0) for d in {*kw, *s}}
    lead = [d for d in dict.fromkeys(first) if d in combined]
    rest = sorted((d for d in combined if d not in lead), key=lambda d: -combined[d])
    return lead + rest


def keyword_scaled(case, light: bool) -> dict:
    """retrieval._by_coverage: max-scaled keyword scores × √coverage — of the query's content
    words (``light``: the code now) or of all its words (before item 7)."""
    key = "_kw_light" if light else "_kw"
    if key not in case:
        ranked = case["keyword"]
        scaled = dict(
            zip([d for d, _ in ranked], scale_to_max([s for _, s in ranked]), strict=True)
        )
        words = content(case, case["words"]) if light else case["words"]
        if case["df"] and words:
            scaled = {d: v * math.sqrt(coverage_of(case, d, words)) for d, v in scaled.items()}
        case[key] = scaled
    return case[key]


# -- the rules -----------------------------------------------------------------------------------


def hybrid(weight: float, *, light: bool = True, scale: float | None = None):
    """The fusion in use: keyword max-scaled × √coverage, min-max meaning, ``weight`` — times
    the query's specificity (``scale``, the code: SPECIFIC) or fixed (None)."""

    def ranked(case):
        if not case["semantic"]:
            return [d for d, _ in case["keyword"]]
        w = weight if scale is None else round(weight * specificity(case, scale), 3)
        return fused_order(keyword_scaled(case, light), floored(case), w, case["first"])

    return ranked


def trigrams_only(weight: float):
    """Hybrid before the word index (docs/design.md §18): the trigram plan's scores min-maxed,
    ``weight`` against min-max meaning."""

    def ranked(case):
        trigrams = case["trigrams"]
        if not case["semantic"]:
            return [d for d, _ in trigrams]
        kw = dict(zip([d for d, _ in trigrams], minmax([s for _, s in trigrams]), strict=True))
        return fused_order(kw, floored(case), weight, case["first"])

    return ranked


def per_doc(weight: float, measure: str, scale: float):
    """Each keyword candidate's score × how specific the words it matched are (all words)."""

    def ranked(case):
        if not case["semantic"]:
            return [d for d, _ in case["keyword"]]
        kw = keyword_scaled(case, False)
        if case["df"]:
            kw = {
                d: v * measured(case, case["held"].get(str(d), ()), measure, scale)
                for d, v in kw.items()
            }
        return fused_order(kw, floored(case), weight, case["first"])

    return ranked


def per_query(weight: float, measure: str, scale: float, of: str = "top", only_content=False):
    """One weight per query: ``weight`` × the specificity of the words the best keyword
    candidate (``of="top"``) or the query (``of="query"``) holds; ``only_content``: its light
    words left out."""

    def spec(case):
        if not case["df"] or not case["keyword"]:
            return 1.0
        if of == "top":
            words = case["held"].get(str(case["keyword"][0][0]), ())
        else:
            words = [w for w in case["words"] if case["df"].get(w)]
        return measured(case, content(case, words) if only_content else words, measure, scale)

    def ranked(case):
        if not case["semantic"]:
            return [d for d, _ in case["keyword"]]
        kw = keyword_scaled(case, only_content)
        return fused_order(kw, floored(case), weight * spec(case), case["first"])

    return ranked


def rules() -> dict:
    """name: order of one case. "both": coverage of content words and a weight per query."""
    out = {
        "keyword only": lambda case: [d for d, _ in case["keyword"]],
        "semantic only": lambda case: [d for d, _ in floored(case)],
        "before the word index: trigrams min-max, kw 0.6": trigrams_only(0.6),
        "BEFORE: kw 0.8 × √cov(all words)": hybrid(WEIGHT, light=False),
        f"AFTER (the code): 0.8 × specificity/{SPECIFIC}, cov(content)": hybrid(
            WEIGHT, scale=SPECIFIC
        ),
        "AFTER, live: retrieval.retrieve": lambda case: case["live"],
        # one change at a time
        "coverage of content words only, fixed 0.8": hybrid(WEIGHT),
        f"0.8 × specificity/{SPECIFIC} only, cov(all words)": hybrid(
            WEIGHT, light=False, scale=SPECIFIC
        ),
    }
    for w in (0.5, 0.6, 0.7, 0.9):  # the fixed weight: 0.6 (design §18) or 0.8 (the code)?
        out[f"before, fixed {w}"] = hybrid(w, light=False)
        out[f"cov(content), fixed {w}"] = hybrid(w)
    for w in (0.7, 0.8, 0.9):
        for scale in (0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7):
            out[f"both, {w} × specificity/{scale}"] = hybrid(w, scale=scale)
    # tried before, on every word (light ones included)
    for measure, scales in (
        ("chance", (0.25, 1.0, 4.0)),
        ("info", (1.0, 2.0)),
        ("peak", (0.3, 0.5, 0.7)),
    ):
        for scale in scales:
            out[f"per-doc {measure}/{scale} kw=0.8"] = per_doc(WEIGHT, measure, scale)
            out[f"per-query top {measure}/{scale} kw=0.8"] = per_query(WEIGHT, measure, scale)
            out[f"per-query query {measure}/{scale} kw=0.8"] = per_query(
                WEIGHT, measure, scale, "query"
            )
    # content words only: how many other documents would hold what the best keyword match holds,
    # by chance
    for scale in (1.0, 4.0, 16.0):
        out[f"per-query top chance(content)/{scale} kw=0.8"] = per_query(
            WEIGHT, "chance", scale, only_content=True
        )
    return out


ALWAYS = ("BEFORE", "AFTER", "keyword only", "semantic only")  # shown whatever --only says


def measure(ranked_lists, cases) -> dict:
    ranks = []
    for ranked, case in zip(ranked_lists, cases, strict=True):
        relevant = set(case["relevant"])
        ranks.append(next((i for i, d in enumerate(ranked[:10], 1) if d in relevant), None))
    n = len(ranks)
    out = {f"R@{k}": round(sum(1 for r in ranks if r and r <= k) / n, 4) for k in (1, 5, 10)}
    out["MRR"] = round(sum(1 / r for r in ranks if r) / n, 4)
    return out


def cached(label: str) -> Path:
    return CACHE / (re.sub(r"\W+", "-", label.split(": ")[1]).strip("-") + ".json")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--collect", action="store_true", help="the lists not collected yet")
    parser.add_argument("--again", action="store_true", help="with --collect: all of them")
    parser.add_argument("--only", default=None, help="a substring of the rules to show")
    args = parser.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    cases: dict[str, list] = {}
    if args.collect:
        service = Context(Settings(data_dir=WORK / "data", query_timeout=60.0))
    for label, (name, path) in SETS.items():
        file = cached(label)
        if args.collect and (args.again or not file.exists()):
            started = time.monotonic()
            found = collect(service, name, evaluate.load_questions(path))
            file.write_text(json.dumps(found, ensure_ascii=False))
            console.print(f"{label}: {len(found)} questions in {time.monotonic() - started:.0f} s")
        cases[label] = json.loads(file.read_text())
    report = {}
    table = Table(title="rules, R@1 / R@5 / MRR per question set (use-m, top 50 a side)")
    table.add_column("rule")
    for label in cases:
        table.add_column(f"{label} ({len(cases[label])})", justify="right")
    for rule_name, rule in rules().items():
        if args.only and args.only not in rule_name and not rule_name.startswith(ALWAYS):
            continue
        row = []
        for label, found in cases.items():
            scores = measure([rule(c) for c in found], found)
            report.setdefault(rule_name, {})[label] = scores
            row.append(f"{scores['R@1']:.3f} / {scores['R@5']:.3f} / {scores['MRR']:.3f}")
        table.add_row(rule_name, *row)
    console.print(table)
    out = HERE / "results" / f"generic_words-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, indent=2, ensure_ascii=False))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
