"""Excerpts: what of each found document a small model gets to read — the passages chosen for
it (passages.py), set down in the document's order, and what they are cited by.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from chiezo.answer.websearch import WEB
from chiezo.core.words import fold

SEPARATOR = " … "  # between passages that do not follow each other in the document
MIN_PASSAGE = 120  # a passage cut shorter than this says too little to be worth its place
_SENTENCE_END = re.compile(r"[。！？!?]|\.\s")


@dataclass
class Passage:
    """A part of a found document that competes for the budget (passages.py scores it)."""

    doc: int  # the document's place among those found (0: first)
    ord: int  # its order in the document
    heading: str  # the heading path below the document's title ("" for the lead)
    text: str
    chunk_id: int = 0
    score: float = 0.0
    terms: set[str] = field(default_factory=set)  # the question's words it holds
    heading_terms: set[str] = field(default_factory=set)  # … in its heading path


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
    passages: list[Passage] = field(default_factory=list, repr=False)  # as chosen
    distance_km: float | None = None  # from the person's location (near=here), straight-line
    # how far above its source's semantic floor meaning found it, 0..1 (search/evidence.py)
    meaning: float | None = field(default=None, repr=False)

    def reference(self) -> dict:
        shown = {
            "n": self.n,
            "source": self.source,
            "title": self.title,
            "doc_id": self.doc_id,
            "url": self.url,
            "cite": self.cite,
        }
        if self.distance_km is not None:
            shown["distance_km"] = self.distance_km
        if self.source == WEB:  # a page of the web, not a document of the library
            shown["kind"] = WEB
            del shown["doc_id"]
        return shown

    def heading(self) -> str:
        """The line the model reads above the excerpt: number, title, and a distance said
        to be a straight line."""
        if self.source == WEB:
            return f"[{self.n}] {self.title} (web page {self.url})"
        if self.distance_km is None:
            return f"[{self.n}] {self.title}"
        return f"[{self.n}] {self.title} ({self.distance_km:g} km from the asker, straight-line)"

    def to_dict(self) -> dict:
        """The reference with its text: what is shown when no model could answer."""
        return {**self.reference(), "text": self.text}


def excerpt_text(passages: Sequence[Passage]) -> str:
    """Chosen passages (in document order) as one excerpt: each below a
    heading introduced by its section's name, so the model knows what the part is about
    (``(人口) パリの人口は…``); passages that do not follow each other are set apart by " … "."""
    parts: list[str] = []
    previous: Passage | None = None
    for p in passages:
        label = " > ".join(p.heading.split(" > ")[-2:]) if p.heading else ""
        text = (
            f"({label}) {p.text}"
            if label and (previous is None or previous.heading != p.heading)
            else p.text
        )
        joiner = " " if previous is not None and p.ord == previous.ord + 1 else SEPARATOR
        parts.append(text if previous is None else joiner + text)
        previous = p
    return "".join(parts).strip()


def fit(excerpts: list[Excerpt], budget: int) -> list[Excerpt]:
    """``excerpts`` within ``budget`` characters of text in all (a model's context that turned
    out smaller than planned): the passages of least evidence go first (``take``), an excerpt
    left with none goes, the rest are numbered anew."""
    if sum(len(e.text) for e in excerpts) <= budget:
        return excerpts
    kept: dict[int, list[Passage]] = {}  # a passage's document → its passages kept
    for p in take([p for e in excerpts for p in e.passages], budget):
        kept.setdefault(p.doc, []).append(p)
    out: list[Excerpt] = []
    for e in excerpts:
        passages = sorted(
            kept.get(e.passages[0].doc, []) if e.passages else [], key=lambda p: p.ord
        )
        if passages:
            out.append(replace(e, n=len(out) + 1, text=excerpt_text(passages), passages=passages))
    return out or [replace(excerpts[0], text=window(excerpts[0].text, set(), budget))]


def take(passages: list[Passage], budget: int) -> list[Passage]:
    """The passages that go in: best score first while the budget lasts;
    one longer than what is left is cut (a copy) to the window around the question's words it
    holds; one that would be cut below ``MIN_PASSAGE`` characters is left out."""
    kept, left = [], budget
    for p in sorted(passages, key=lambda p: -p.score):
        if left < MIN_PASSAGE:
            break
        text = (
            p.text
            if len(p.text) + len(SEPARATOR) <= left
            else window(p.text, p.terms, left - len(SEPARATOR))
        )
        if len(text) < min(MIN_PASSAGE, len(p.text)):
            continue
        kept.append(replace(p, text=text))
        left -= len(text) + len(SEPARATOR)
    return kept


def window(text: str, terms: set[str], width: int) -> str:
    """At most ``width`` characters of ``text``: where its question words are densest, begun at
    a sentence start where one is near, ended at a sentence end."""
    if len(text) <= width:
        return text
    if width <= 0:
        return ""
    folded = fold(text)
    hits = sorted(m.start() for t in terms for m in re.finditer(re.escape(t), folded))
    start = 0
    if hits:
        best = max(hits, key=lambda h: sum(1 for x in hits if h <= x < h + width * 2 // 3))
        start = max(0, best - width // 6)
        sentence = max(text.rfind("。", 0, best), text.rfind(". ", 0, best))
        if sentence != -1 and best - sentence < width // 3:
            start = sentence + 1
    piece = text[start : start + width].strip()
    ends = [m.end() for m in _SENTENCE_END.finditer(piece)]
    return piece[: ends[-1]].strip() if ends and ends[-1] > len(piece) // 2 else piece
