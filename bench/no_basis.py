"""No basis means no basis (issue #43, item 4): how often a question is declared "no article
about its subject" (answer/subject.py), on questions whose subject the library has and on
questions whose subject it lacks. No model: `Context.prepare_answer` with the keyword planner,
then `missing_subject` over the excerpts it found.

    python bench/no_basis.py                       # every set, at most --limit questions each
    python bench/no_basis.py --sets tune --limit 400

Sets (``in``: the question's article is in the library — a "no basis" there is wrong; ``out``:
it is not — a "no basis" there is right):

* ``shared`` (held out) — the 92 shared questions (``eval/ja/jawiki-excerpt-questions.jsonl``,
  about 日本語 and 桂正和) over the jawiki excerpt: all ``in``;
* ``dev-jawiki`` (held out) — JaQuAD dev questions over the jawiki excerpt: none of dev's
  articles is in it, all ``out``;
* ``tune-in``/``tune-out`` — JaQuAD *train* questions over a library of half of train's
  articles (seeded; 日本語 and 桂正和 left out): the only set the rules were tuned on;
* ``check-in``/``check-out`` (held out) — JaQuAD dev questions over a library of half of
  dev's articles, split the same way;
* ``en-titles`` — English questions written from the enwiki excerpt's titles ("What is T
  known for?"): ``in``; ``en-squad`` — DPR SQuAD test questions (cased) over the enwiki
  excerpt: its articles (Super Bowl 50, Normans…) are not in the excerpt, ``out`` unless the
  question names one of its titles (``en-squad-named``); ``en-nq`` — NQ test questions
  (lowercased as published: they name nothing a capital marks).

Libraries are built with the real CLI (``chiezo --data DIR ingest …``) into ``--work``
(default bench/work/no_basis) once; what ``prepare_answer`` found for each question is kept
there too, so a second run (changing only subject.py) reads it back (``--fresh`` asks again).
Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
import unicodedata
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import answering, operating, reading
from chiezo.ops.requests import DocRequest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.answer.excerpt import Excerpt  # noqa: E402
from chiezo.answer.options import AnswerOptions  # noqa: E402
from chiezo.answer.passages import Passage  # noqa: E402
from chiezo.answer.subject import RULES, Rules, missing_among, subjects_of  # noqa: E402
from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.textnorm import normalise_title  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402

from corpus import JAQUAD, SHARED_DATA  # noqa: E402

JAWIKI = SHARED_DATA / "wikipedia/jawiki-202207-excerpt-truncated.xml.bz2"
ENWIKI = SHARED_DATA / "wikipedia/enwiki-202207-excerpt.xml.bz2"
QUESTIONS = SHARED_DATA / "eval/ja/jawiki-excerpt-questions.jsonl"
NQ = SHARED_DATA / "eval/en/topics.nq.test.txt"
SQUAD = SHARED_DATA / "eval/en/topics.dpr.squad.test.txt"
SHARED_TITLES = ("日本語", "桂正和")  # the shared questions' articles: never in the tuning set
SEED = 43
console = Console(width=160)

# The variants compared on the same found excerpts: what the decision rests on.
VARIANTS = {
    "title/alias only": (
        Rules(headings=False, said=False, share=2.0, mentions=10**9),
        False,
        False,
    ),
    "chosen, first subject only": (RULES, True, False),
    "chosen (any subject)": (RULES, False, False),
    "chosen + title look-up": (RULES, False, True),
}


# -- libraries --------------------------------------------------------------------------------


def chiezo(data: Path, *args: str) -> None:
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "chiezo", "--data", str(data), *args],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    console.print(f"  built {data.name} ({time.monotonic() - started:.0f} s)")


def library(work: Path, name: str, build) -> Context:
    """The data directory ``work/name``, built by ``build(data)`` the first time."""
    data = work / name
    if not (data / "built").exists():
        build(data)
        (data / "built").write_text("")
    return Context(Settings(data_dir=data))


def jaquad_library(articles: list[dict], name: str):
    def build(data: Path) -> None:
        folder = data.parent / f"{name}-docs"
        folder.mkdir(parents=True, exist_ok=True)
        for i, article in enumerate(articles):
            title = article["title"].replace('"', "'")
            body = "\n\n".join(article["paragraphs"])
            (folder / f"{i:04d}.md").write_text(
                f'---\ntitle: "{title}"\n---\n\n{body}\n', encoding="utf-8"
            )
        chiezo(data, "ingest", "docs", str(folder), "--name", name)

    return build


def jaquad(split: str) -> list[dict]:
    articles = []
    for path in sorted((JAQUAD / split).glob("*.json")):
        for a in json.loads(path.read_text(encoding="utf-8"))["data"]:
            articles.append(
                {
                    "title": a["title"],
                    "paragraphs": [p["context"] for p in a["paragraphs"]],
                    "questions": [
                        {"question": qa["question"], "answers": [x["text"] for x in qa["answers"]]}
                        for p in a["paragraphs"]
                        for qa in p["qas"]
                    ],
                }
            )
    return articles


def halves(articles: list[dict]) -> tuple[list[dict], list[dict]]:
    shuffled = sorted(articles, key=lambda a: a["title"])
    random.Random(SEED).shuffle(shuffled)
    middle = len(shuffled) // 2
    return shuffled[:middle], shuffled[middle:]


def sample(questions: list[dict], limit: int | None) -> list[dict]:
    if limit is None or len(questions) <= limit:
        return questions
    return random.Random(SEED).sample(questions, limit)


# -- the sets ----------------------------------------------------------------------------------


def question_sets(work: Path, wanted: set[str], limit: int | None):
    """(name, service, source, questions with ``in`` labels) for each set wanted."""
    out = []
    if wanted & {"shared", "dev-jawiki"}:
        ja = library(
            work,
            "jawiki",
            lambda d: chiezo(d, "ingest", "wikipedia", "--allow-truncated", str(JAWIKI)),
        )
    if "shared" in wanted:
        rows = [json.loads(line) for line in QUESTIONS.read_text(encoding="utf-8").splitlines()]
        qs = [{"question": r["question"], "answers": r["answers"], "in": True} for r in rows]
        out.append(("shared", ja, None, sample(qs, limit)))
    if "dev-jawiki" in wanted:
        titles = titles_of(ja)
        qs = [{**q, "in": a["title"] in titles} for a in jaquad("dev") for q in a["questions"]]
        out.append(("dev-jawiki", ja, None, sample(qs, limit)))
    for name, split in (("tune", "train"), ("check", "dev")):
        if name not in wanted:
            continue
        articles = [a for a in jaquad(split) if a["title"] not in SHARED_TITLES]
        inside, outside = halves(articles)
        service = library(work, name, jaquad_library(inside, name))
        for side, group, label in (("in", inside, True), ("out", outside, False)):
            qs = [{**q, "in": label} for a in group for q in a["questions"]]
            out.append((f"{name}-{side}", service, name, sample(qs, limit)))
    if wanted & {"en-titles", "en-squad", "en-nq"}:
        en = library(work, "enwiki", lambda d: chiezo(d, "ingest", "wikipedia", str(ENWIKI)))
    if "en-titles" in wanted:
        titles = articles_of(en, "enwiki")
        qs = [{"question": f"What is {t} known for?", "answers": [], "in": True} for t in titles]
        out.append(("en-titles", en, None, sample(qs, limit)))
    if "en-squad" in wanted:
        rows = [json.loads(line) for line in SQUAD.read_text(encoding="utf-8").splitlines()]
        qs = [{"question": r["question"], "answers": r["answer"], "in": False} for r in rows]
        out.append(("en-squad", en, None, sample(qs, limit)))
    if "en-nq" in wanted:
        qs = []
        for line in NQ.read_text(encoding="utf-8").splitlines():
            question, _, answers = line.partition("\t")
            qs.append({"question": question, "answers": answers, "in": None})
        out.append(("en-nq", en, None, sample(qs, limit)))
    return out


def article_lookup(service: Context):
    """``name → bool``: whether a source of ``service`` has a document of that title or alias
    (normalised), or of that title with a disambiguator (「夏目漱石 (作家)」) — what
    ``missing_subject(has_article=…)`` is given."""
    conns = [service.library.get(s["name"]).conn for s in operating.sources(service)]

    def has_article(name: str) -> bool:
        norm = normalise_title(name)
        return bool(norm) and any(
            c.execute(
                "SELECT 1 FROM titles WHERE norm = ? OR (norm >= ? AND norm < ?) LIMIT 1",
                (norm, norm + " (", norm + " )"),
            ).fetchone()
            for c in conns
        )

    return has_article


def articles_of(service: Context, source: str) -> list[str]:
    """The titles of ``source``'s articles: not its disambiguation, list or main pages."""
    conn = service.library.get(source).conn
    out = []
    for doc_id, title in conn.execute("SELECT doc_id, title FROM docs ORDER BY doc_id"):
        attrs = (
            reading.doc(service, DocRequest.of(source=source, doc_id=doc_id, fields=["attrs"])).get(
                "attrs"
            )
            or {}
        )
        flags = attrs.get("flag") or []
        if not (
            {"disambiguation", "list", "main"} & set(flags if isinstance(flags, list) else [flags])
        ):
            out.append(title)
    return out


def titles_of(service: Context) -> set[str]:
    found: set[str] = set()
    for source in operating.sources(service):
        conn = service.library.get(source["name"]).conn
        found |= {r[0] for r in conn.execute("SELECT title FROM docs")}
    return found


# -- asking -----------------------------------------------------------------------------------


def found_excerpts(service: Context, source: str | None, questions: list[dict], cache: Path,
                   fresh: bool) -> list[list[dict]]:  # fmt: skip
    """What ``prepare_answer`` found for each question (title, aliases, text, passages),
    kept in ``cache`` by question."""
    kept = {} if fresh or not cache.exists() else json.loads(cache.read_text(encoding="utf-8"))
    out = []
    for q in questions:
        if q["question"] not in kept:
            prepared = answering.prepare_answer(
                service, q["question"], AnswerOptions(source=source)
            )
            kept[q["question"]] = [
                {
                    "title": e.title,
                    "aliases": e.aliases,
                    "text": e.text,
                    "passages": [[p.heading, p.text] for p in e.passages],
                }
                for e in prepared.excerpts
            ]
        out.append(kept[q["question"]])
    cache.write_text(json.dumps(kept, ensure_ascii=False), encoding="utf-8")
    return out


def as_excerpts(found: list[dict]) -> list[Excerpt]:
    return [
        Excerpt(
            n,
            "bench",
            n,
            e["title"],
            None,
            e["text"],
            aliases=e["aliases"],
            passages=[Passage(n, i, h, t) for i, (h, t) in enumerate(e["passages"])],
        )
        for n, e in enumerate(found, 1)
    ]


def folded(text: str) -> str:
    return "".join(unicodedata.normalize("NFKC", text).casefold().split())


def measure(questions: list[dict], founds: list[list[dict]], has_article) -> dict:
    """Per variant: the share declared "no basis"; the answers lost by it (the gold answer was
    in the excerpts); and before (declared only when nothing was found). ``has_article``:
    the library's title look-up, for the variant that uses it."""
    n = len(questions)
    answered = [
        any(folded(a) in folded(" ".join(e["text"] for e in f)) for a in q["answers"] if a)
        if isinstance(q["answers"], list)
        else False
        for q, f in zip(questions, founds, strict=True)
    ]
    named = 0
    declared = {v: 0 for v in VARIANTS}
    lost = {v: 0 for v in VARIANTS}
    examples: dict[str, list] = {v: [] for v in VARIANTS}
    for q, found, has_answer in zip(questions, founds, answered, strict=True):
        subjects = subjects_of(q["question"])
        named += bool(subjects)
        excerpts = as_excerpts(found)
        for variant, (rules, first_only, look_up) in VARIANTS.items():
            missing = missing_among(subjects[:1] if first_only else subjects, q["question"],
                                    excerpts, rules, has_article if look_up else None)  # fmt: skip
            if missing is not None:
                declared[variant] += 1
                lost[variant] += has_answer
                examples[variant].append(
                    {
                        "question": q["question"],
                        "subject": missing.subject,
                        "mentioned_in": missing.mentioned_in,
                        "found": [e["title"] for e in found],
                        "answer_in_excerpts": has_answer,
                    }
                )
    return {
        "questions": n,
        "subject_named": round(named / n, 3),
        "before_declared": round(sum(1 for f in founds if not f) / n, 3),
        "answer_in_excerpts": round(sum(answered) / n, 3),
        "declared": {v: round(c / n, 3) for v, c in declared.items()},
        "answers_lost": lost,
        "examples": {v: x[:40] for v, x in examples.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--sets",
        default="shared,dev-jawiki,tune,check,en-titles,en-squad,en-nq",
        help="comma-separated: shared, dev-jawiki, tune, check, en-titles, en-squad, en-nq",
    )
    parser.add_argument("--limit", type=int, default=300, help="at most N questions a set")
    parser.add_argument("--work", type=Path, default=HERE / "work" / "no_basis")
    parser.add_argument("--fresh", action="store_true", help="ask again, not from the cache")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    wanted = set(args.sets.split(","))
    report: dict = {"limit": args.limit, "rules": RULES.__dict__, "sets": {}}
    started = time.monotonic()
    for name, service, source, questions in question_sets(args.work, wanted, args.limit):
        cache = args.work / f"found-{name}.json"
        t0 = time.monotonic()
        founds = found_excerpts(service, source, questions, cache, args.fresh)
        result = measure(questions, founds, article_lookup(service))
        if name == "en-squad":  # a question naming one of the excerpt's titles is not "out"
            result = split_named(questions, founds, service)
            report["sets"].update(result)
        else:
            report["sets"][name] = result
        console.print(f"  {name}: {len(questions)} questions ({time.monotonic() - t0:.0f} s)")
    report["seconds"] = round(time.monotonic() - started, 1)
    show(report)
    out = HERE / "results" / f"no_basis-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    console.print(f"wrote {out}")


def split_named(questions, founds, service) -> dict:
    """en-squad apart by whether a subject of the question is one of the library's titles."""
    from chiezo.answer.subject import stands_for

    titles = titles_of(service)
    named = [
        any(s.text == t or stands_for(s.text, t) and s.text.lower() == t.lower()
            for s in subjects_of(q["question"]) for t in titles)
        for q in questions
    ]  # fmt: skip
    out = {}
    for name, keep in (("en-squad", False), ("en-squad-named", True)):
        pairs = [(q, f) for q, f, n in zip(questions, founds, named, strict=True) if n == keep]
        if pairs:
            qs = [{**q, "in": keep} for q, _ in pairs]
            out[name] = measure(qs, [f for _, f in pairs], article_lookup(service))
    return out


def show(report: dict) -> None:
    table = Table(title="no basis: share of questions declared 'no article about its subject'")
    for column in ("set", "side", "n", "named", "before", *VARIANTS, "ans. in exc.", "lost"):
        table.add_column(column, justify="left" if column in ("set", "side") else "right")
    sides = {"shared": "in", "dev-jawiki": "out", "tune-in": "in", "tune-out": "out",
             "check-in": "in", "check-out": "out", "en-titles": "in", "en-squad": "out",
             "en-squad-named": "in", "en-nq": "?"}  # fmt: skip
    for name, r in report["sets"].items():
        table.add_row(
            name,
            sides.get(name, "?"),
            str(r["questions"]),
            f"{r['subject_named']:.3f}",
            f"{r['before_declared']:.3f}",
            *(f"{r['declared'][v]:.3f}" for v in VARIANTS),
            f"{r['answer_in_excerpts']:.3f}",
            "/".join(str(r["answers_lost"][v]) for v in VARIANTS),
        )
    console.print(table)


if __name__ == "__main__":
    main()
