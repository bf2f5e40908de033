"""``chiezo eval``: retrieval quality on a set of questions with known answers.

A questions file is JSON Lines, one question per line::

    {"question": "…", "relevant_keys": ["…"], "relevant_titles": ["…"]}

A hit is relevant when its document key or its title is listed (``relevant`` and
``relevant_page_ids`` are accepted as key lists, ``relevant_titles_in_excerpt`` as a title list,
so the bundled jawiki and JaQuAD sets load as they are). Each configuration runs every question
through the same search code the server uses and reports recall@1/5/10, MRR and nDCG@10 —
documents, not chunks, are judged.

A configuration is ``key=value`` pairs separated by commas: ``mode``, ``keyword_weight``,
``fusion``, ``top_n``, ``min_score`` and ``source`` (to compare two builds of the same corpus,
e.g. two chunk sizes or two models).
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from chiezo.core.errors import BadQuery
from chiezo.core.models import Hit
from chiezo.ops import searching
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest
from chiezo.search.retrieval import RETRIEVAL_MODES
from chiezo.store.vectors import vector_info

KS = (1, 5, 10)
DEPTH = 10
_NUMBERS = {"keyword_weight": float, "top_n": int, "min_score": float}
_KEYS = {"mode", "fusion", "source", *_NUMBERS}


@dataclass(frozen=True)
class Question:
    text: str
    keys: frozenset[str]
    titles: frozenset[str]

    def relevant(self, key: str, title: str) -> bool:
        return key in self.keys or title in self.titles

    @property
    def wanted(self) -> int:
        """How many relevant documents exist (for the ideal DCG)."""
        return max(len(self.keys), len(self.titles), 1)


def load_questions(path: Path, limit: int | None = None) -> list[Question]:
    questions: list[Question] = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise BadQuery(f"cannot read questions file {path}: {exc.strerror}") from exc
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise BadQuery(f"{path}:{number}: not JSON ({exc.msg})") from exc
        text = row.get("question") or row.get("query") or ""
        keys = _strings(row, "relevant_keys", "relevant", "relevant_page_ids")
        titles = _strings(row, "relevant_titles", "relevant_titles_in_excerpt")
        if not text.strip() or not (keys or titles):
            raise BadQuery(
                f"{path}:{number}: a question needs 'question' and relevant keys or titles",
                hint="fields: question, relevant_keys, relevant_titles",
            )
        questions.append(Question(text.strip(), frozenset(keys), frozenset(titles)))
        if limit is not None and len(questions) >= limit:
            break
    if not questions:
        raise BadQuery(f"{path} holds no questions")
    return questions


def _strings(row: dict, *names: str) -> list[str]:
    out: list[str] = []
    for name in names:
        value = row.get(name)
        if isinstance(value, list):
            out += [str(v) for v in value if v is not None]
        elif isinstance(value, str | int):
            out.append(str(value))
    return out


def parse_config(text: str) -> dict[str, Any]:
    """``mode=hybrid,keyword_weight=0.7`` → {"mode": "hybrid", "keyword_weight": 0.7}."""
    config: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        key = key.strip()
        if not sep or key not in _KEYS:
            raise BadQuery(
                f"bad configuration item {part!r}",
                allowed_fields=sorted(_KEYS),
                hint="e.g. mode=hybrid,keyword_weight=0.7,fusion=rrf",
            )
        try:
            config[key] = _NUMBERS.get(key, str)(value.strip())
        except ValueError as exc:
            raise BadQuery(f"{key} needs a number, got {value!r}") from exc
    if config.get("mode") not in (None, *RETRIEVAL_MODES):
        raise BadQuery(f"mode must be one of {', '.join(RETRIEVAL_MODES)}")
    return config


def label(config: dict[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in config.items()) or "default"


@dataclass
class Scores:
    config: dict[str, Any]
    ranks: list[int | None] = field(default_factory=list)  # first relevant rank, 1-based
    gains: list[float] = field(default_factory=list)  # nDCG@10 per question
    # per question, its hits as an A/B comparison shows them: title, relevant, score, the
    # section's breadcrumb and the opening of the passage quoted (the chunking A/B design)
    top: list[list[dict[str, Any]]] = field(default_factory=list)
    seconds: float = 0.0
    retrieval: dict[str, int] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        n = len(self.ranks) or 1
        out: dict[str, Any] = {"config": label(self.config), "questions": len(self.ranks)}
        for k in KS:
            out[f"R@{k}"] = round(sum(1 for r in self.ranks if r and r <= k) / n, 4)
        out["MRR"] = round(sum(1 / r for r in self.ranks if r) / n, 4)
        out["nDCG@10"] = round(sum(self.gains) / n, 4)
        out["ms_per_query"] = round(1000 * self.seconds / n, 2)
        if self.retrieval:
            out["retrieval"] = dict(self.retrieval)
        return out


def run(ctx: Context, source: str, questions: list[Question], config: dict[str, Any]) -> Scores:
    """Every question through ``searching.search`` with one configuration."""
    params = {k: v for k, v in config.items() if k != "source"}
    name = config.get("source", source)
    scores = Scores(config)
    started = time.monotonic()
    for question in questions:
        result = searching.search(
            ctx, SearchRequest.of(query=question.text, source=name, limit=DEPTH, **params)
        )
        marks = [question.relevant(h.key, h.title) for h in result.hits]
        first = next((i for i, rel in enumerate(marks, 1) if rel), None)
        scores.ranks.append(first)
        scores.gains.append(ndcg(marks, question.wanted))
        scores.top.append([_shown(h, rel) for h, rel in zip(result.hits, marks, strict=True)])
        kind = result.retrieval or "keyword"
        scores.retrieval[kind] = scores.retrieval.get(kind, 0) + 1
    scores.seconds = time.monotonic() - started
    return scores


PASSAGE_OPENING = 80  # characters of the quoted passage an A/B row shows


def _shown(hit: Hit, relevant: bool) -> dict[str, Any]:
    return {
        "title": hit.title,
        "relevant": relevant,
        "score": round(hit.score, 4),
        "section": hit.section or "",
        "passage": " ".join((hit.snippet or "").split()).lstrip("…")[:PASSAGE_OPENING],
    }


def ndcg(marks: Iterable[bool], wanted: int, depth: int = DEPTH) -> float:
    """Binary-relevance nDCG at ``depth``."""
    dcg = sum(1 / math.log2(i + 1) for i, rel in enumerate(marks, 1) if rel and i <= depth)
    ideal = sum(1 / math.log2(i + 1) for i in range(1, min(wanted, depth) + 1))
    return dcg / ideal if ideal else 0.0


def default_configs(ctx: Context, source: str) -> tuple[list[dict[str, Any]], list[str]]:
    """keyword, semantic and hybrid — the last two only where the source has vectors."""
    notes: list[str] = []
    configs: list[dict[str, Any]] = [{"mode": "keyword"}]
    info = vector_info(ctx.library.get(source).meta)
    if info is None or not info.count:
        notes.append(f"{source} has no vectors: only keyword search was measured")
    else:
        configs += [{"mode": "semantic"}, {"mode": "hybrid"}]
    return configs, notes


def differing(a: Scores, b: Scores, questions: list[Question], show: int) -> list[dict[str, Any]]:
    """The questions where the two configurations put the first relevant document at different
    ranks, biggest difference first."""

    def rank(r: int | None) -> int:
        return r if r is not None else DEPTH + 1

    rows: list[dict[str, Any]] = [
        {
            "question": q.text,
            "a_rank": ra,
            "b_rank": rb,
            "a_top": [h["title"] for h in ta],
            "b_top": [h["title"] for h in tb],
            "a_relevant": [h["relevant"] for h in ta],
            "b_relevant": [h["relevant"] for h in tb],
            "a_hits": ta,  # with score, section and the passage's opening
            "b_hits": tb,
        }
        for q, ra, rb, ta, tb in zip(questions, a.ranks, b.ranks, a.top, b.top, strict=True)
        if rank(ra) != rank(rb)
    ]
    rows.sort(key=lambda r: -abs(rank(r["a_rank"]) - rank(r["b_rank"])))
    return rows[:show]
