"""Which passages of the documents found answer the question.

Every passage (a chunk: a section's text, cut at about 500 characters) of the documents found
competes for the budget on evidence. An even share per document (its lead and a window around
the question's rarest pieces) gives a long article that holds the answer 500 characters and
four documents that barely match the rest: measured so, the answer was in the excerpts for
.728 of the shared questions. The evidence:

* **words** — the question's words (Sudachi pieces for Japanese, stems for spaced scripts) the
  passage holds, each weighed by how rare it is *among the passages competing* (a local IDF:
  the article's own name is in every passage of the article and says nothing about which);
* **heading** — those words in the passage's heading path below the title (``人口``,
  ``歴史 > 近代``): a section named for what is asked is where the answer usually is;
* **meaning** — the question's vector against the passage's own (its best unit), where the
  source has vectors: the passage that answers often shares few words with the question;
* **lead** — the first passage of a document, as far as the question is *about* that
  document (its title stands for much of the question: "what is X", "where is X");
* **rank** — the document's place among those found.

The budget follows the evidence: the best passages go in, whatever document they are from, so
one article may give several and a document that barely matches gives none. Weights and the
threshold were chosen on JaQuAD train articles as long documents (bench/answer_context.py,
``long-dev``) and then measured on the shared questions and JaQuAD dev (docs/design.md §31.1).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from chiezo.answer.excerpt import Passage, take
from chiezo.answer.lookups import Lookups
from chiezo.core.errors import ChiezoError
from chiezo.core.models import Hit
from chiezo.core.words import content_pieces, fold
from chiezo.search.snippet import plain_text

WEIGHTS = {"words": 1.0, "heading": 0.6, "meaning": 0.7, "lead": 0.5, "rank": 0.6}
KEEP_SHARE = 0.45  # a passage scoring below this share of the best one is left out


@dataclass(frozen=True)
class Found:
    """A document to choose passages from, where no search hit names it (``doc`` asked with a
    question): what ``choose`` reads of a hit."""

    source: str
    doc_id: int
    title: str
    url: str | None = None


@dataclass
class Document:
    """One document found, with its passages and those chosen of them."""

    hit: Hit | Found  # the search hit, or the document asked about
    title: str
    aliases: list[str]
    passages: list[Passage]
    chosen: list[Passage] = field(default_factory=list)  # in the document's order


def choose(
    lookups: Lookups, hits: Sequence[Hit | Found], question: str, budget: int
) -> list[Document]:
    """``hits``' documents that give a passage, each with the passages chosen for it, best
    evidence first, within ``budget`` characters: the best passages of all go in while the
    budget lasts, none far below the best (``KEEP_SHARE``)."""
    documents = [d for i, hit in enumerate(hits) if (d := _document(lookups, i, hit))]
    passages = [p for d in documents for p in d.passages]
    if not passages:
        return []
    _score(lookups, documents, passages, question)
    floor = max(p.score for p in passages) * KEEP_SHARE
    by_place = {d.passages[0].doc: d for d in documents if d.passages}
    for p in take([p for p in passages if p.score >= floor], budget):
        by_place[p.doc].chosen.append(p)
    for d in documents:
        d.chosen.sort(key=lambda p: p.ord)
    return sorted((d for d in documents if d.chosen), key=lambda d: -max(p.score for p in d.chosen))


def _document(lookups: Lookups, place: int, hit: Hit | Found) -> Document | None:
    try:
        doc = lookups.read(hit.source, hit.doc_id, ["title", "aliases", "chunks"])
        title = doc.get("title") or hit.title
        ids = lookups.chunk_ids(hit.source, hit.doc_id)
        passages = [
            Passage(
                place,
                c["ord"],
                _below_title(c.get("heading_path") or "", title),
                _plain(c.get("text") or ""),
                ids.get(c["ord"], 0),
            )
            for c in doc.get("chunks") or []
            if _plain(c.get("text") or "")
        ]
        if not passages:  # a document without passages (notes): its body is the one
            body = lookups.read(hit.source, hit.doc_id, ["body"]).get("body") or ""
            passages = [Passage(place, 0, "", " ".join(body.split()))] if body.strip() else []
    except ChiezoError:
        return None
    aliases = doc.get("aliases") or []
    return Document(hit, title, aliases if isinstance(aliases, list) else [], passages)


_HEADING_LINE = re.compile(r"^\s*#{1,6}\s.*$", re.M)


def _plain(text: str) -> str:
    """A passage as one line of what its page shows: without its heading's ``## …`` line (the
    heading path says it), HTML comments and tags. The Rust book keeps its English original in
    ``<!-- -->`` in 1,997 of its 2,048 passages and wraps file names in ``<span
    class="filename">`` (3,293 times): the model read both."""
    return plain_text(_HEADING_LINE.sub(" ", text))


def _below_title(path: str, title: str) -> str:
    """``浅草寺 > 歴史 > 近代`` → ``歴史 > 近代``: the title is every passage's, not one's."""
    parts = [p.strip() for p in path.split(">")]
    if parts and fold(parts[0]) == fold(title):
        parts = parts[1:]
    return " > ".join(p for p in parts if p)


# -- evidence -----------------------------------------------------------------------------------


def _score(
    lookups: Lookups, documents: list[Document], passages: list[Passage], question: str
) -> None:
    terms = _terms(question)
    idf = _local_idf(terms, passages)
    mass = sum(idf.values()) or 1.0
    meaning = _meaning(lookups, documents, question)
    for d in documents:
        about = _aboutness(d, terms, idf, mass)
        first = min((p.ord for p in d.passages), default=0)
        for p in d.passages:
            words = sum(idf[t] for t in p.terms) / mass
            heading = sum(idf[t] for t in p.heading_terms) / mass
            p.score = (
                WEIGHTS["words"] * words
                + WEIGHTS["heading"] * heading
                + WEIGHTS["meaning"] * meaning.get(id(p), 0.0)
                + WEIGHTS["lead"] * about * (p.ord == first)
                + WEIGHTS["rank"] / (1 + p.doc)
            )


def _terms(question: str) -> list[str]:
    """The question's content words as they are found in text (words.content_pieces): どんな,
    一番 or 何 are rare among passages by chance, and would otherwise weigh most."""
    return content_pieces(question)


def _local_idf(terms: list[str], passages: list[Passage]) -> dict[str, float]:
    """How rare each word is among the passages competing; each passage learns which it holds."""
    df = dict.fromkeys(terms, 0)
    for p in passages:
        heading, text = fold(p.heading), fold(p.text)  # NFKC: the costliest step, once each
        p.heading_terms = {t for t in terms if t in heading}
        p.terms = {t for t in terms if t in text} | p.heading_terms
        for t in p.terms:
            df[t] += 1
    n = len(passages)
    return {t: (math.log(1 + n / df[t]) if df[t] else 0.0) for t in terms}


def _aboutness(document: Document, terms: list[str], idf: dict[str, float], mass: float) -> float:
    """How much of the question the document's names stand for: 1 for "what is 浅草寺?"."""
    names = " ".join(fold(n) for n in (document.title, *document.aliases))
    named = [t for t in terms if t in names]
    if not named:
        return 0.0
    weights = {t: max(idf[t], 0.5) for t in terms}  # a name in every passage has idf ~0
    return sum(weights[t] for t in named) / sum(weights.values())


def _meaning(lookups: Lookups, documents: list[Document], question: str) -> dict[int, float]:
    """Passage → how close its best vector is to the question's (``passage_closeness``),
    scaled to 0..1 over the passages that have vectors (a source without them adds nothing)."""
    similarity: dict[int, float] = {}
    for source, group in _by_source(documents).items():
        by_chunk = {p.chunk_id: p for d in group for p in d.passages if p.chunk_id}
        for chunk_id, best in lookups.passage_closeness(source, list(by_chunk), question).items():
            similarity[id(by_chunk[chunk_id])] = best
    if not similarity:
        return {}
    low, high = min(similarity.values()), max(similarity.values())
    spread = (high - low) or 1.0
    return {k: (v - low) / spread for k, v in similarity.items()}


def _by_source(documents: list[Document]) -> dict[str, list[Document]]:
    out: dict[str, list[Document]] = {}
    for d in documents:
        out.setdefault(d.hit.source, []).append(d)
    return out
