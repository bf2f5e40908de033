"""An answer without a model: the few sentences of the excerpts that most
likely say what was asked, each with the number of the excerpt it is from.

The excerpts are the passages chosen for the question (passages.py); the answer is usually one
sentence of them. Each sentence is scored on (``WEIGHTS``)

* **words** — the question's content words it holds (``words.content_pieces``: Sudachi pieces
  for Japanese, stems for spaced scripts), each weighed by how rare it is among the sentences
  competing (a local IDF: the article's name is in most of them and says little);
* **pieces** — the question's character bigrams it holds, weighed the same way: Japanese
  inflects and compounds, and 開催された / 開催し meet where no word does;
* **context** — the same for the sentence before it in its passage: a question often restates
  one sentence and asks what the next says («1911年に決定されたこの単位は…»);
* **heading** — the question's words in its section's name (人口, 歴史 > 近代);
* **kind** — what the question asks for, where it says so: a date (いつ, 何年, when), a place
  (どこ, where), a figure (何人, 人口, how many), a person (誰, who). A sentence holding one of
  that kind that the question does not already state is likelier to hold the answer;
* **order**, **passage** — its excerpt's place (excerpt 1 is the best evidence) and its
  passage's score there (passages.py's evidence, meaning included);
* **subject** — whether it opens with the document's title (or an alias).

Sentences are the excerpts' own (support.split_sentences), a list's items apart; headings,
table rows and markup residue are left out; a very long sentence is cut to the part around the
question's words. Weights were chosen on JaQuAD train articles as long documents and measured
on the shared questions and JaQuAD dev (bench/answer_context.py; docs/design.md §38).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from chiezo.answer.excerpt import SEPARATOR, Excerpt, excerpt_text
from chiezo.answer.support import split_sentences
from chiezo.core import words
from chiezo.core.words import content_pieces, fold

# Chosen on long-dev (JaQuAD train articles, 300 questions) by a coordinate search; the plateau
# is broad (answer in sentence 1 .763–.780 for passage 0.8–2.0, order 0.3–0.8, kind 0.3–0.5).
# heading is set, not fitted (JaQuAD has no sections): passages.py's ratio to words.
WEIGHTS = {
    "words": 1.0,
    "pieces": 0.5,
    "context": 0.3,
    "heading": 0.6,
    "kind": 0.5,
    "order": 0.5,
    "passage": 1.0,
    "subject": 0.1,
}
MAX_CHARS = 200  # longer sentences are cut to the part around the question's words
MIN_WORD_CHARS = 8  # fewer letters and digits than this: a heading, a caption, a stray piece
MIN_WORD_SHARE = 0.6  # below this share of letters and digits: table or markup residue
ELLIPSIS = "…"


@dataclass(frozen=True)
class AnswerSentence:
    text: str
    ref: int  # the excerpt's number (Excerpt.n), the citation

    def to_dict(self) -> dict:
        return {"text": self.text, "ref": self.ref}


def cited(sentences: list[AnswerSentence]) -> str:
    """The sentences as one text, each followed by its citation: what stands in for a model's
    answer (rag's unusable replies, an agent run that found but could not answer)."""
    return " ".join(f"{s.text} [{s.ref}]" for s in sentences)


def answer_sentences(
    question: str, excerpts: list[Excerpt], limit: int = 3
) -> list[AnswerSentence]:
    """The ``limit`` sentences of ``excerpts`` likeliest to answer ``question``, best first,
    each once, none longer than about ``MAX_CHARS`` characters."""
    if limit <= 0 or not question.strip():
        return []
    candidates = candidates_of(excerpts)
    if not candidates:
        return []
    asked = Question(question)
    scores = score(asked, candidates)
    out: list[AnswerSentence] = []
    seen: set[str] = set()
    for i in sorted(range(len(candidates)), key=lambda i: -scores[i]):
        text = cap(candidates[i].text, asked.terms + asked.grams)
        if fold(text) in seen:
            continue  # one sentence in two excerpts (a copy of the article) is said once
        seen.add(fold(text))
        out.append(AnswerSentence(text, candidates[i].ref))
        if len(out) == limit:
            break
    return out


# -- the sentences ------------------------------------------------------------------------------


@dataclass
class Candidate:
    text: str
    ref: int  # Excerpt.n
    place: int  # the excerpt's place in the list (0: the first)
    passage: float  # its passage's score, as a share of the best passage's
    piece: int  # which passage (or piece of an excerpt's text) it is from, counted across all
    names: tuple[str, ...]  # the document's title and aliases, folded
    heading: str = ""  # its section's path below the title, folded ("歴史 > 近代")
    folded: str = ""

    def __post_init__(self):
        self.folded = fold(self.text)


def candidates_of(excerpts: list[Excerpt]) -> list[Candidate]:
    """Every sentence of the excerpts that reads as one (``is_sentence``), in order."""
    best = max((p.score for e in excerpts for p in e.passages), default=0.0) or 1.0
    out: list[Candidate] = []
    pieces = 0
    for place, e in enumerate(excerpts):
        names = tuple(fold(n) for n in (e.title, *e.aliases) if n and n.strip())
        for text, passage_score, heading in _pieces(e):
            pieces += 1
            for sentence in (i for s in split_sentences(text) for i in list_items(s)):
                if is_sentence(sentence):
                    share = passage_score / best
                    out.append(Candidate(sentence, e.n, place, share, pieces, names, fold(heading)))
    return out


_LABEL = re.compile(r"^\(([^()]{1,60})\) ")  # excerpt_text's "(人口) " before a section's text


def _pieces(e: Excerpt) -> list[tuple[str, float, str]]:
    """(text, score, heading path) of each passage the excerpt was made of; where its text is
    not theirs (cut to fit a smaller context), the text itself, in the pieces " … " sets apart,
    each with the section name excerpt_text wrote before it."""
    if e.passages and excerpt_text(e.passages) == e.text:
        return [(p.text, max(p.score, 0.0), p.heading) for p in e.passages]
    out = []
    for part in e.text.split(SEPARATOR):
        label = _LABEL.match(part)
        out.append((part[label.end() :] if label else part, 0.0, label.group(1) if label else ""))
    return out


_LIST_MARK = re.compile(r"(?:^|\s)[-*•]\s+")  # plain_text keeps a list item's mark, on one line


def list_items(sentence: str) -> list[str]:
    """A sentence as its list items: a passage's list is one line of "- a - b - c" (plain_text),
    which split_sentences takes for one sentence; a mark inside brackets (「1955年 - 」) is a
    range, not an item."""
    out, last = [], 0
    for mark in _LIST_MARK.finditer(sentence):
        if not _open_bracket(sentence[last : mark.start()]):
            out.append(sentence[last : mark.start()])
            last = mark.end()
    out.append(sentence[last:])
    return [item.strip() for item in out if item.strip()]


def _open_bracket(text: str) -> bool:
    return sum(text.count(c) for c in "(（「『[【") > sum(text.count(c) for c in ")）」』]】")


_WORD_CHAR = re.compile(r"[^\W_]")
_ENDED = re.compile(r"[。！？.!?」』）)]\s*$")


def is_sentence(text: str) -> bool:
    """Whether ``text`` reads as a sentence: enough letters, mostly letters (not a table row,
    a template's residue or a list of links), and ended — or long enough to be one cut short
    (a passage cut to fit begins or ends mid-sentence)."""
    letters = len(_WORD_CHAR.findall(text))
    if letters < MIN_WORD_CHARS:
        return False
    if letters / len(text.replace(" ", "")) < MIN_WORD_SHARE:
        return False
    return bool(_ENDED.search(text)) or letters >= 3 * MIN_WORD_CHARS


# -- the question -------------------------------------------------------------------------------


class Question:
    """What is asked, as the sentences are scored against it."""

    def __init__(self, text: str):
        self.text = text
        self.folded = fold(text)
        self.terms = content_pieces(text)
        self.grams = sorted(_bigrams(self.folded))
        self.kinds = asked_kinds(text)


def _bigrams(folded: str) -> set[str]:
    """Pairs of neighbouring letters or digits, within a word (not across spaces)."""
    out: set[str] = set()
    for run in _WORD_RUN.findall(folded):
        out.update(run[i : i + 2] for i in range(len(run) - 1))
    return out


_WORD_RUN = re.compile(r"[^\W_]+")

# What a question asks for, where a question word says so. Japanese: 何 as a numeral (何年, 何人,
# 何メートル — Sudachi tags it 数詞, and 代名詞 where it is "what") asks for a date before a
# unit of time and for a figure before any other.
_ASKED = {
    "date": re.compile(
        r"いつ(?!つ)|西暦|時期|年代|\bwhen\b|\b(?:what|which) (?:year|date|day|month|century)\b",
        re.I,
    ),
    "place": re.compile(
        r"どこ|何処|(?:どの|何)(?:国|県|都市|市|町|村|州|島|地域|地方|場所|大陸)|場所|出身地|"
        r"所在地|\bwhere\b|\b(?:what|which) (?:country|city|state|town|region|place|island|"
        r"continent|province)\b",
        re.I,
    ),
    "number": re.compile(
        r"いくつ|いくら|(?:どれ|どの)(?:くらい|ぐらい|ほど|程度)|人口|割合|"
        r"\bhow (?:many|much|long|tall|high|old|far|large|big|deep|wide)\b|\bpopulation\b|"
        r"\bwhat percent",
        re.I,
    ),
    "person": re.compile(r"誰|だれ|どなた|何者|人物|\bwho(?:m|se)?\b", re.I),
}
_TIME_UNITS = ("年", "月", "日", "世紀", "時代", "年代", "年間", "年頃", "頃")


def asked_kinds(question: str) -> set[str]:
    """The kinds of answer ``question`` asks for: date, place, number, person (none: what)."""
    kinds = {kind for kind, pattern in _ASKED.items() if pattern.search(question)}
    if "何" in question:
        tokenizer, _ = words._sudachi()
        morphemes = list(tokenizer.tokenize(fold(question)))
        for m, after in zip(morphemes, [*morphemes[1:], None], strict=True):
            if m.surface() == "何" and m.part_of_speech()[1] == "数詞":
                unit = after.surface() if after is not None else ""
                kinds.add("date" if unit in _TIME_UNITS else "number")
    return kinds


# -- scoring ------------------------------------------------------------------------------------


def score(asked: Question, candidates: list[Candidate]) -> list[float]:
    """Each candidate's score (``WEIGHTS`` over ``features``), in the candidates' order."""
    return [sum(WEIGHTS[k] * v for k, v in f.items()) for f in features(asked, candidates)]


def features(asked: Question, candidates: list[Candidate]) -> list[dict[str, float]]:
    """What each candidate is scored on, each 0..1."""
    words_of, idf = _coverage(asked.terms, [c.folded for c in candidates])
    pieces_of, _ = _coverage(asked.grams, [c.folded for c in candidates])
    mass = sum(idf.values()) or 1.0
    out = []
    for i, c in enumerate(candidates):
        before = i - 1 if i and candidates[i - 1].piece == c.piece else None
        kind = float(bool(asked.kinds) and holds_kind(c.text, asked))
        out.append(
            {
                "words": words_of[i],
                "pieces": pieces_of[i],
                # the sentence before, in the same passage: a question often restates one
                # sentence and asks for what the next one says of it (「この単位は…」)
                "context": (words_of[before] + pieces_of[before]) / 2
                if before is not None
                else 0.0,
                # the question's words in the section's name: a section named for what is
                # asked is where the answer usually is (passages.py, §31.1)
                "heading": sum(w for t, w in idf.items() if t in c.heading) / mass,
                "kind": kind,
                "order": 1 / (1 + c.place),
                "passage": c.passage,
                "subject": float(_opens_with_subject(c)),
            }
        )
    return out


def _coverage(terms: list[str], texts: list) -> tuple[list[float], dict[str, float]]:
    """Each text's share of ``terms`` held (``in``: a substring of a folded sentence, a member
    of its set of words), each term weighed by its local IDF (how rare it is among the texts);
    and those weights."""
    if not terms:
        return [0.0] * len(texts), {}
    held = [{t for t in terms if t in text} for text in texts]
    n = len(texts)
    df = {t: sum(t in h for h in held) for t in terms}
    idf = {t: math.log(1 + n / df[t]) if df[t] else 0.0 for t in terms}
    mass = sum(idf.values()) or 1.0
    return [sum(idf[t] for t in h) / mass for h in held], idf


def _opens_with_subject(c: Candidate) -> bool:
    """The sentence is about the document: it opens with its title or an alias."""
    return any(name and c.folded.lstrip("(「『 ").startswith(name) for name in c.names)


# A year (3–4 digits, or an era's: 明治42年, 天保四年), a month or day, a century; "1年後" and
# "2年間" are spans of time, not dates
_DATE = re.compile(
    r"(?<![\d.])\d{3,4}\s*年|[\u4e00-\u9fff]{2}(?:元|\d{1,2}|[一二三四五六七八九十]{1,3})年|"
    r"(?<![\d.])\d{1,2}\s*(?:月|日)|\d{1,2}\s*世紀|\b1\d{3}s?\b|\b20\d{2}s?\b|"
    r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d|\bcentury\b",
    re.I,
)
_FIGURE = re.compile(
    r"\d[\d,.]*\s?(?:[%％]|(?!\d{0,3}年)[^\W\d_])|[一二三四五六七八九十百千万億]+"
    r"(?:つ|人|回|頭|個|本|倍|種|名|位|か所|ヶ所|カ所|階|件|隻|機)"
)
_PLACE_SUFFIX = re.compile(r"[\u4e00-\u9fff\u30a0-\u30ff]+(?:県|市|町|村|区|州|郡|府|島|国)")
_SPACED_PLACE = re.compile(r"\b(?:in|at|near|from|located)\s+(?:the\s+)?[A-Z][\w-]+")
_SPACED_NAME = re.compile(r"\b[A-Z][a-z]+(?:\s+[A-Z]\.)?\s+[A-Z][a-z]+")


def holds_kind(text: str, asked: Question) -> bool:
    """Whether ``text`` holds a date, place, figure or person (as asked) that the question
    does not already state."""
    kinds = asked.kinds

    def new(found: list[str]) -> bool:
        return any(fold(f).strip() not in asked.folded for f in found)

    if "date" in kinds and new(_DATE.findall(text)):
        return True
    if "number" in kinds and new(_FIGURE.findall(text)):
        return True
    if "place" in kinds and (
        new(_PLACE_SUFFIX.findall(text))
        or new(_SPACED_PLACE.findall(text))
        or new(_proper_nouns(text, "地名"))
    ):
        return True
    return "person" in kinds and (
        new(_proper_nouns(text, "人名")) or new(_SPACED_NAME.findall(text))
    )


def _proper_nouns(text: str, kind: str) -> list[str]:
    """Sudachi's proper nouns of one kind (人名, 地名) in the Japanese of ``text``; for persons,
    katakana words its dictionary does not know as well (ベリサリウス: foreign names)."""
    if not re.search("[\u3040-\u30ff\u4e00-\u9fff]", text):
        return []
    tokenizer, _ = words._sudachi()
    out = []
    for m in tokenizer.tokenize(fold(text)[: words.SUDACHI_MAX_CHARS]):
        pos = m.part_of_speech()
        if (pos[1] == "固有名詞" and pos[2] == kind) or (
            kind == "人名"
            and m.is_oov()
            and re.fullmatch("[\u30a1-\u30fa\u30fc・]{3,}", m.surface())
        ):
            out.append(m.surface())
    return out


# -- cutting ------------------------------------------------------------------------------------


def _densest(hits: list[tuple[int, int]], span: int) -> int:
    """Where the ``span`` characters holding the most matched characters begin: ``hits`` are
    (position, length), sorted; one pass with a window that trails behind."""
    best, best_mass, mass, first = hits[0][0], -1, 0, 0
    for position, length in hits:
        mass += length
        while hits[first][0] <= position - span:
            mass -= hits[first][1]
            first += 1
        if mass > best_mass:
            best, best_mass = hits[first][0], mass
    return best


_CLAUSE_END = re.compile(r"[、，,;；:：]\s*")


def cap(text: str, terms: list[str], width: int = MAX_CHARS) -> str:
    """``text`` as it is if it is short; otherwise the ``width`` characters where the question's
    terms are densest, begun and ended at a clause boundary where one is near, "…" where cut."""
    if len(text) <= width:
        return text
    lowered = text.casefold()  # NFKC would move positions; casefold keeps them for Japanese
    hits = sorted(
        (m.start(), len(t)) for t in set(terms) if t for m in re.finditer(re.escape(t), lowered)
    )
    start = 0
    if hits:
        start = max(0, _densest(hits, width * 3 // 4) - width // 8)
        start = min(start, len(text) - width)
        boundary = [m.end() for m in _CLAUSE_END.finditer(text, max(0, start - width // 4), start)]
        if boundary:
            start = boundary[-1]
    piece = text[start : start + width]
    ends = [m.end() for m in _CLAUSE_END.finditer(piece)]
    if start + width < len(text) and ends and ends[-1] > width * 2 // 3:
        piece = piece[: ends[-1]]
    piece = piece.strip(" 、，,;；")
    return (ELLIPSIS if start > 0 else "") + piece + (ELLIPSIS if start + width < len(text) else "")
