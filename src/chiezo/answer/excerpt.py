"""Excerpts: what of each found document a small model gets to read.

The answer is often one sentence deep in a long article (a birth date in the lead, a height in
a section far below), and small models have small context windows. So each document gets its
lead — about a quarter of its share, cut at a sentence end — plus the window around the place
where the question's rarest pieces cluster (pieces chosen like the keyword side's sentence
fallback: present in the index, rarest first).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

LEAD_SHARE = 0.25
MAX_PIECES = 12
_SENTENCE_END = re.compile(r"[。！？!?]|\.\s")


@dataclass
class Excerpt:
    n: int  # the citation number, from 1
    source: str
    doc_id: int
    title: str
    url: str | None  # where a person can open it (references.link)
    text: str
    cite: str = ""  # "source:key", stable across rebuilds
    aliases: list[str] = field(default_factory=list)  # the document's other names

    def reference(self) -> dict:
        return {"n": self.n, "source": self.source, "title": self.title, "doc_id": self.doc_id,
                "url": self.url, "cite": self.cite}  # fmt: skip

    def to_dict(self) -> dict:
        """The reference with its text: what is shown when no model could answer."""
        return {**self.reference(), "text": self.text}


def excerpt_text(body: str, pieces: list[str], budget: int) -> str:
    """The lead plus the best window for ``pieces`` (rarest first), within ``budget`` chars."""
    body = " ".join(body.split())
    if len(body) <= budget:
        return body
    lead = _cut_at_sentence(body[: max(1, int(budget * LEAD_SHARE))])
    rest = budget - len(lead) - 3
    start = _best_window(body, pieces, rest, after=len(lead))
    if start is None or start <= len(lead):
        return _cut_at_sentence(body[:budget])
    window = body[start : start + rest]
    return f"{lead} … {window}"


def _cut_at_sentence(text: str) -> str:
    ends = [m.end() for m in _SENTENCE_END.finditer(text)]
    return text[: ends[-1]].strip() if ends and ends[-1] > len(text) // 2 else text.strip()


def _best_window(body: str, pieces: list[str], width: int, after: int) -> int | None:
    """Start of the ``width`` window past the lead holding the most weight of distinct
    pieces (rarer pieces weigh more), begun a little before its first hit and, where one is
    near, at a sentence start."""
    if width <= 0:
        return None
    lowered = body.lower()
    weights = {p.lower(): 1.0 / (1 + rank) for rank, p in enumerate(pieces[:MAX_PIECES])}
    hits: list[tuple[int, str]] = []
    for piece in weights:
        for match in re.finditer(re.escape(piece), lowered):
            if match.start() >= after:
                hits.append((match.start(), piece))
    if not hits:
        return None
    hits.sort()
    best, best_score = None, 0.0
    for i, (position, _) in enumerate(hits):
        inside = {p for q, p in hits[i:] if q < position + width * 2 // 3}
        score = sum(weights[p] for p in inside)
        if score > best_score:
            best, best_score = position, score
    assert best is not None
    start = max(after, best - width // 3)
    sentence = body.rfind("。", after, best)
    if sentence >= 0 and best - sentence < width // 2:
        start = max(start, sentence + 1)
    return start


def fit(excerpts: list[Excerpt], budget: int) -> list[Excerpt]:
    """``excerpts`` within ``budget`` characters of text in all: what weighs least goes first
    (for now: each excerpt cut to its share, at a sentence end)."""
    total = sum(len(e.text) for e in excerpts)
    if total <= budget:
        return excerpts
    out = []
    for e in excerpts:
        share = max(1, len(e.text) * budget // total)
        out.append(replace(e, text=_cut_at_sentence(e.text[:share])))
    return out
