"""Claims checked against their citations, offline and without a new model.

An answer is split into sentences; each sentence names the excerpts it rests on with ``[n]``.
A small model restating a source gets the *details* wrong far more often than the gist: a
year off by one, the death date given as the birth date, a neighbouring town. So a cited
sentence is checked in the order a reader would distrust it:

1. **numbers** (years, days, heights) in the sentence must occur in an excerpt it cites;
2. **names** (capitalised words in spaced scripts, proper nouns and katakana words in
   Japanese, month names) must occur there too;
3. the **rest** must overlap the cited excerpts' words (``words.index_text``: stems and
   Sudachi's normalised forms, so 生まれ and 生まれる, "born" and "borne" meet) or, where the
   source has an embedder, be close in meaning to one of their sentences.

The thresholds and what each rule catches are measured in ``bench/answer_quality.py
--support`` (docs/design.md §25). A sentence without a citation is ``uncited`` (whether an
excerpt would have supported it is reported too); a sentence that only says the library has
no answer ("the sources do not say", 「記載がありません」) makes no claim.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import words

SUPPORTED, UNSUPPORTED, UNCITED, NO_CLAIM = "supported", "unsupported", "uncited", "no_claim"

# Below both, a sentence without a wrong number or name is still "not what the sources say".
MIN_OVERLAP = 0.5
MIN_SIMILARITY = 0.6

# [1], [1, 2], [1][2], ［1］: what a model writes for "source 1 (and 2)"
CITATION = re.compile(r"[\[［]\s*(\d{1,2}(?:\s*[,，、]\s*\d{1,2})*)\s*[\]］]")
_SENTENCE_END = re.compile(r"(?<=[。！？!?])|(?<=\.)(?=\s)")
_ABBREVIATION = re.compile(r"(?:\b[A-Z]|\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|vs|etc|No|Co|Inc|Ltd|Mt|ca|approx))\.$")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"\b[A-Z][\w'’\-]*")
_MONTHS = frozenset(
    ["january", "february", "march", "april", "may", "june", "july", "august", "september", "october", "november", "december"]
)
# "The library does not say", in the forms the prompts and small models use
_NO_ANSWER = re.compile(
    r"(does not|doesn't|do not|don't|did not|cannot|can't|no)\s+(say|mention|contain|state|"
    r"specify|provide|include|tell|answer|information|basis)"
    r"|not (?:in|from) the (?:library|sources?)|not from the library"
    r"|記載(?:が|は)?(?:ありません|ない|されていません)|書かれていません|見つかりません"
    r"|(?:わかりません|分かりません)|根拠が見つかりません|情報は(?:ありません|含まれていません)",
    re.I,
)


@dataclass
class Claim:
    """One sentence of an answer and what its citations say about it."""

    text: str
    cites: list[int]
    status: str
    reasons: list[str] = field(default_factory=list)
    overlap: float = 0.0
    similarity: float | None = None
    found_in: list[int] = field(default_factory=list)  # excerpts that support it (uncited too)

    def to_dict(self) -> dict[str, Any]:
        out = {"text": self.text, "cites": self.cites, "status": self.status,
               "reasons": self.reasons, "overlap": round(self.overlap, 3)}  # fmt: skip
        if self.similarity is not None:
            out["similarity"] = round(self.similarity, 3)
        if self.found_in:
            out["found_in"] = self.found_in
        return out


Embed = Callable[[list[str]], Any]  # texts → unit vectors (rows), e.g. Embedder.embed


def cited_numbers(text: str) -> list[int]:
    """The numbers of ``text``'s citation marks, in order, each once."""
    out: list[int] = []
    for match in CITATION.finditer(text):
        for part in re.split(r"[,，、]", match.group(1)):
            n = int(part)
            if n not in out:
                out.append(n)
    return out


def split_sentences(answer: str) -> list[str]:
    """The answer's sentences, each with the citations written after its end ("… 1930. [1]")
    kept with it; list items and lines are sentences of their own."""
    out: list[str] = []
    for line in answer.splitlines():
        pending = ""
        for piece in _SENTENCE_END.split(line):
            if not piece.strip():
                continue
            lead = re.match(rf"\s*(?:{CITATION.pattern}\s*)+", piece)
            if lead and out and not pending:
                out[-1] += " " + lead.group(0).strip()  # "…1930. [1] He died…"
                piece = piece[lead.end() :]
            pending += piece
            if _ABBREVIATION.search(pending.rstrip()):
                continue  # "U.S. Army", "Dr. Smith": not the end of a sentence
            if _has_words(pending):
                out.append(pending.strip())
            elif out:
                out[-1] += pending.rstrip()
            pending = ""
        if pending.strip():
            out.append(pending.strip())
    return out


def check_claims(answer: str, excerpts: Mapping[int, str], embed: Embed | None = None
                 ) -> list[Claim]:  # fmt: skip
    """Every sentence of ``answer`` checked against the excerpts it cites (``n`` → text)."""
    evidence = {n: Evidence(text) for n, text in excerpts.items() if text}
    claims: list[Claim] = []
    for sentence in split_sentences(answer):
        cites = cited_numbers(sentence)
        plain = CITATION.sub(" ", sentence).strip()
        if _NO_ANSWER.search(plain) or not _has_words(plain):
            claims.append(Claim(sentence, cites, NO_CLAIM))
            continue
        claims.append(_checked(sentence, plain, cites, evidence, embed))
    return claims


def _checked(sentence, plain, cites, evidence, embed) -> Claim:
    valid = [n for n in cites if n in evidence]
    if not valid:
        claim = Claim(sentence, cites, UNCITED)
        if cites:
            claim.status = UNSUPPORTED
            claim.reasons.append(f"it cites {_marks(cites)}, which no source has")
        claim.found_in = [n for n, e in evidence.items() if not _problems(plain, [e], embed)[0]]
        if claim.status == UNCITED:
            claim.reasons.append("it cites no source" + (
                f"; {_marks(claim.found_in)} would support it" if claim.found_in else ""))
        return claim
    reasons, overlap, similarity = _problems(plain, [evidence[n] for n in valid], embed)
    claim = Claim(sentence, cites, UNSUPPORTED if reasons else SUPPORTED, reasons, overlap,
                  similarity)  # fmt: skip
    if not reasons:
        claim.found_in = valid
    return claim


def _problems(plain: str, cited: Sequence[Evidence], embed: Embed | None):
    """(reasons it is not supported, word overlap, similarity) of one sentence."""
    facts = Facts(plain)
    reasons = [f"the number {n} is in none of the cited excerpts"
               for n in facts.numbers if not any(n in e.numbers for e in cited)]  # fmt: skip
    reasons += [f"the name {name!r} is in none of the cited excerpts"
                for name, key in facts.names if not any(e.has_name(key) for e in cited)]  # fmt: skip
    found: set[str] = set().union(*(e.words for e in cited))
    overlap = len(facts.words & found) / len(facts.words) if facts.words else 1.0
    similarity = None
    if not reasons and overlap < MIN_OVERLAP and embed is not None:
        similarity = max(e.similarity(plain, embed) for e in cited)
    if not reasons and overlap < MIN_OVERLAP and (similarity or 0.0) < MIN_SIMILARITY:
        said = f"; similarity {similarity:.2f}" if similarity is not None else ""
        reasons.append(f"little of it is in the cited excerpts (words {overlap:.0%}{said})")
    return reasons, overlap, similarity


class Facts:
    """What a sentence asserts that can be checked by lookup: numbers, names, content words."""

    def __init__(self, text: str):
        folded = unicodedata.normalize("NFKC", text)
        self.numbers = list(dict.fromkeys(_numbers(folded)))
        self.names = _names(folded)
        self.words = {w for w in words.index_text(folded).split() if not w.isdigit()}


class Evidence:
    """One excerpt, indexed the same ways as a sentence (numbers, words, folded text)."""

    def __init__(self, text: str):
        self.text = text
        self.folded = words.fold(text)
        self.numbers = set(_numbers(unicodedata.normalize("NFKC", text)))
        self.words = set(words.index_text(text).split())
        self._vectors = None

    def has_name(self, key: str) -> bool:
        return key in self.words or key in self.folded

    def similarity(self, sentence: str, embed: Embed) -> float:
        if self._vectors is None:
            self._sentences = [s for s in split_sentences(self.text) if _has_words(s)][:200]
            self._vectors = embed(self._sentences) if self._sentences else []
        if not len(self._vectors):
            return 0.0
        query = embed([sentence])[0]
        return float(max(row @ query for row in self._vectors))


def _numbers(text: str) -> list[str]:
    """Numbers as digits: "1,867" and "1867" are one number; a decimal keeps its point."""
    out = []
    for match in _NUMBER.finditer(text):
        number = match.group(0)
        if re.fullmatch(r"\d{1,3}(?:,\d{3})+", number):
            number = number.replace(",", "")
        out += [n for n in re.split(r",", number) if n]
    return out


def _names(text: str) -> list[tuple[str, str]]:
    """(as written, the key an excerpt must hold): capitalised words that do not open the
    sentence (or do, followed by another: "Ray Charles was…"), month names, Japanese names."""
    out: list[tuple[str, str]] = []
    tokens = [(m.start(), m.group(0)) for m in _CAPITALISED.finditer(text)]
    opening = re.match(r"\W*", text).end()
    for i, (position, token) in enumerate(tokens):
        lowered = token.lower().strip("'’-")
        if lowered in words.STOP_WORDS:
            continue
        following = tokens[i + 1][0] if i + 1 < len(tokens) else None
        next_word = re.match(r"\s+\S", text[position + len(token) :])
        if position == opening and lowered not in _MONTHS and not (
            next_word and following == position + len(token) + len(next_word.group(0)) - 1
        ):
            continue  # "Born in …", "During …": a sentence's first word is capitalised anyway
        key = words.index_text(token)
        if key:
            out.append((token, key.split()[0]))
    out += [(name, name) for name in words.japanese_names(text)]
    return list(dict.fromkeys(out))


def _has_words(text: str) -> bool:
    return bool(re.search(r"[^\W_]", CITATION.sub("", text)))


def _marks(numbers: Sequence[int]) -> str:
    return "".join(f"[{n}]" for n in numbers)


def summary(claims: Sequence[Claim]) -> dict[str, list[str]]:
    """The sentences a reader should doubt, by kind: what the JSON result and the CLI show."""
    return {
        "unsupported": [c.text for c in claims if c.status == UNSUPPORTED],
        "uncited": [c.text for c in claims if c.status == UNCITED],
    }
