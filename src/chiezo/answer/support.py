"""Claims checked against their citations, offline and without a new model.

An answer is split into sentences; each sentence names the excerpts it rests on with ``[n]``.
A small model restating a source gets the *details* wrong far more often than the gist: a
year off by one, the death date given as the birth date, a neighbouring town. So a cited
sentence is checked in the order a reader would distrust it:

1. **numbers** (years, days, heights) in the sentence must occur in an excerpt it cites;
2. **names** (capitalised words in spaced scripts, month names among them; proper nouns and
   katakana words unknown to the dictionary in Japanese) must occur there too;
3. the **rest** must overlap the cited excerpts' words (``words.index_text``: stems and
   Sudachi's normalised forms, so 生まれ and 生まれる, "born" and "borne" meet) — the sentence
   as a whole, and its words but the names on their own: an excerpt that shares only the
   names does not say what the sentence says of them — or, where the source has an embedder,
   be close in meaning to one of their sentences; and what a Japanese sentence is about (the
   noun phrase before its topic は) must be among the cited excerpts' words or titles.

An excerpt is read with its **title and aliases** (what the model was told to cite it by, and
the document's other names): a passage from deep in an article need not repeat its subject,
and a place's English name may be only in its aliases. A name that no excerpt, title or alias
holds, and that the question does not state, is named as such in the reasons: the model made
it up (or knew it), whichever excerpt the sentence cites (docs/design.md §31.3).

The thresholds and what each rule catches are measured in ``bench/answer_quality.py
--support`` (docs/design.md §25). A sentence without a citation is ``uncited`` (whether an
excerpt would have supported it is reported too); a sentence that only says the library has
no answer ("the sources do not say", 「記載がありません」) makes no claim.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, TypeAlias

from chiezo.core import words

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

SUPPORTED, UNSUPPORTED, UNCITED, NO_CLAIM = "supported", "unsupported", "uncited", "no_claim"

# Below both, a sentence without a wrong number or name is still "not what the sources say".
MIN_OVERLAP = 0.5
MIN_SIMILARITY = 0.6
# ... and of its words but the names ("museum", "modern", "art" of "Kiasma is a museum of
# modern art in Helsinki"): a bike station named Kiasma in Helsinki shares every name
MIN_REST_OVERLAP = 0.25
# A number or name must stand in an excerpt sentence sharing at least this share of the words
# the best-matching sentence shares with the answer's sentence (§25: moved details).
ALIGN_SHARE = 0.5
SUBJECT_CHARS = 40  # a name this close to an excerpt's start is its subject (its title)

# [1], [1, 2], [1][2], ［1］: what a model writes for "source 1 (and 2)"
CITATION = re.compile(r"[\[［]\s*(\d{1,2}(?:\s*[,，、]\s*\d{1,2})*)\s*[\]］]")
# 。！？ end a sentence; ! ? . only before a space ("Spacewar!, Computer Space" goes on)
_SENTENCE_END = re.compile(r"(?<=[。！？])|(?<=[.!?])(?=\s)")
_ABBREVIATION = re.compile(
    r"(?:\b[A-Z]|\b(?:Mr|Mrs|Ms|Dr|St|Jr|Sr|vs|etc|No|Co|Inc|Ltd|Mt|ca|approx|e\.g|i\.e|cf))\.$"
)
_LIST_MARK = re.compile(r"(?:.*\s)?\d{1,3}\.")  # "1." opening a list item
# Japanese quotes and brackets: a 『よつばと！』 or 「…！」 inside them does not end the sentence
_OPENING, _CLOSING = "「『（(〈《【", "」』）)〉》】"
_EXCERPT_SENTENCE = re.compile(r"(?<=[。！？!?\n])|(?<=\.)\s+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9'’\-]*")  # not into a Japanese run after it
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
        out = {
            "text": self.text,
            "cites": self.cites,
            "status": self.status,
            "reasons": self.reasons,
            "overlap": round(self.overlap, 3),
        }
        if self.similarity is not None:
            out["similarity"] = round(self.similarity, 3)
        if self.found_in:
            out["found_in"] = self.found_in
        return out


# texts → unit vectors, one float32 row each (store/embedders.py Embedder.embed)
Embed: TypeAlias = "Callable[[list[str]], NDArray[np.float32]]"


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
            if (
                _ABBREVIATION.search(pending.rstrip())
                or _inside_brackets(pending)
                or _LIST_MARK.fullmatch(pending.strip())
            ):
                continue  # "U.S. Army", "Dr. Smith", 『よつばと！』, "1. Arabic": not an end
            if _has_words(pending):
                out.append(pending.strip())
            elif out:
                out[-1] += pending.rstrip()
            pending = ""
        if pending.strip():
            out.append(pending.strip())
    return out


def _inside_brackets(text: str) -> bool:
    return sum(text.count(c) for c in _OPENING) > sum(text.count(c) for c in _CLOSING)


def check_claims(
    answer: str,
    excerpts: Mapping[int, str],
    embed: Embed | None = None,
    titles: Mapping[int, str] | None = None,
    aliases: Mapping[int, Sequence[str]] | None = None,
    question: str | None = None,
) -> list[Claim]:
    """Every sentence of ``answer`` checked against the excerpts it cites (``n`` → text;
    ``titles``: ``n`` → the title the model was told to cite it by; ``aliases``: ``n`` → the
    document's other names; ``question``: what was asked, whose names are no invention)."""
    titles, aliases = titles or {}, aliases or {}
    evidence = {
        n: Evidence(text, [titles.get(n) or "", *(aliases.get(n) or ())])
        for n, text in excerpts.items()
        if text
    }
    context = Context(evidence, question or "")
    claims: list[Claim] = []
    for sentence in split_sentences(answer):
        cites = cited_numbers(sentence)
        plain = CITATION.sub(" ", sentence).strip()
        if _NO_ANSWER.search(plain) or not _has_words(plain):
            claims.append(Claim(sentence, cites, NO_CLAIM))
        elif titles and not _has_words(_without_titles(plain, titles.values())):
            # "Alabama, [2] Appellate court, [3] Ada": the list to cite by, echoed back
            claims.append(
                Claim(sentence, cites, UNSUPPORTED, ["it only names sources; it states nothing"])
            )
        else:
            claims.append(_checked(sentence, plain, cites, context, embed))
    return claims


def _without_titles(text: str, titles: Iterable[str]) -> str:
    for title in sorted((t for t in titles if t), key=len, reverse=True):
        text = text.replace(title, " ")
    return text


class Context:
    """What every sentence of one answer is checked within: all its excerpts (with their
    titles and aliases) and the names the question states."""

    def __init__(self, evidence: Mapping[int, Evidence], question: str):
        self.evidence = evidence
        self._asked = words.fold(question)
        self._asked_words = set(words.index_text(question).split())

    def invented(self, facts: Facts) -> list[str]:
        """The sentence's names that no excerpt, title or alias holds and the question does
        not state, as written."""
        return [
            name
            for name, key in facts.names
            if key not in self._asked_words
            and key not in self._asked
            and not any(e.has_name(key) for e in self.evidence.values())
        ]


def _checked(
    sentence: str, plain: str, cites: list[int], context: Context, embed: Embed | None
) -> Claim:
    evidence = context.evidence
    facts = Facts(plain)
    invented = context.invented(facts)
    valid = [n for n in cites if n in evidence]
    if not valid:
        claim = Claim(sentence, cites, UNCITED)
        if cites:
            claim.status = UNSUPPORTED
            claim.reasons.append(f"it cites {_marks(cites)}, which no source has")
        # which excerpt would bear it out; a name none holds is said once, not held against each
        claim.found_in = [
            n
            for n, e in evidence.items()
            if not _problems(facts, plain, [e], embed, set(invented))[0]
        ]
        if claim.status == UNCITED:
            rest = " the rest of" if invented else ""
            claim.reasons.append(
                "it cites no source"
                + (f"; {_marks(claim.found_in)} would support{rest} it" if claim.found_in else "")
            )
        claim.reasons += [f"the name {name!r} is in no excerpt" for name in invented]
        return claim
    reasons, overlap, similarity = _problems(facts, plain, [evidence[n] for n in valid], embed)
    named = {f"the name {name!r} is in none of the cited excerpts": name for name in invented}
    reasons = [f"the name {named[r]!r} is in no excerpt" if r in named else r for r in reasons]
    claim = Claim(
        sentence, cites, UNSUPPORTED if reasons else SUPPORTED, reasons, overlap, similarity
    )
    if not reasons:
        claim.found_in = valid
    return claim


def _problems(
    facts: Facts,
    plain: str,
    cited: Sequence[Evidence],
    embed: Embed | None,
    excused: Set[str] = frozenset(),
) -> tuple[list[str], float, float | None]:
    """(reasons it is not supported, word overlap, similarity) of one sentence; names in
    ``excused`` (reported apart) are not looked up."""
    details = [
        _detail_problem(f"the number {n}", facts, n, partial(_number_places, n, facts), cited)
        for n in facts.numbers
    ]
    details += [
        _detail_problem(f"the name {name!r}", facts, key, partial(_name_places, key), cited)
        for name, key in facts.names
        if name not in excused
    ]
    reasons = [r for r in details if r]
    found: set[str] = set().union(*(e.words for e in cited))
    if facts.topic_words and not facts.topic_words & found:
        reasons.append(f"what it is about, {facts.topic!r}, is in none of the cited excerpts")
    overlap = len(facts.words & found) / len(facts.words) if facts.words else 1.0
    rest = facts.rest
    rest_overlap = len(rest & found) / len(rest) if rest else 1.0
    low = overlap < MIN_OVERLAP or rest_overlap < MIN_REST_OVERLAP
    similarity = None
    if not reasons and low and embed is not None:
        similarity = max(e.similarity(plain, embed) for e in cited)
    if not reasons and low and (similarity or 0.0) < MIN_SIMILARITY:
        said = f"; similarity {similarity:.2f}" if similarity is not None else ""
        share = (
            f"words {overlap:.0%}"
            if overlap < MIN_OVERLAP
            else f"words but the names {rest_overlap:.0%}"
        )
        reasons.append(f"little of it is in the cited excerpts ({share}{said})")
    return reasons, overlap, similarity


def _number_places(number: str, facts: Facts, evidence: Evidence) -> list[int]:
    """The sentences of ``evidence`` holding ``number``; anywhere ([-1]) where the sentence
    writes it as part of the subject's name ("Apollo 11")."""
    return [-1] if number in evidence.named_numbers(facts) else evidence.number_at(number)


def _name_places(key: str, evidence: Evidence) -> list[int]:
    return evidence.name_at(key)


def _detail_problem(
    what: str,
    facts: Facts,
    key: str,
    places: Callable[[Evidence], list[int]],
    cited: Sequence[Evidence],
) -> str | None:
    """Why a number or name of the sentence is not borne out, or None: it must be in a cited
    excerpt, and — where the excerpt has a sentence that restates the answer's — in that part
    of it. A detail moved from elsewhere in the same excerpt (the death year given as the
    birth year, the town one was raised in as the birthplace) is there, but not there."""
    found = [(e, places(e)) for e in cited]
    found = [(e, at) for e, at in found if at]
    if not found:
        return f"{what} is in none of the cited excerpts"
    context = facts.context_without(key)
    if any(e.aligned(context, at) for e, at in found):
        return None
    return f"{what} is in the cited excerpt, but not in the part that says the rest of it"


class Facts:
    """What a sentence asserts that can be checked by lookup: numbers, names, content words."""

    def __init__(self, text: str):
        folded = unicodedata.normalize("NFKC", text)
        self.folded = words.fold(text)
        self.numbers = list(dict.fromkeys(_numbers(folded)))
        self.names = _names(folded)
        self.words = {w for w in words.index_text(folded).split() if not w.isdigit()}
        self._name_words = {key: set(words.index_text(key).split()) for _, key in self.names}
        # the words but the names': what the sentence says of them
        self.rest = self.words - set().union(*self._name_words.values())
        self.topic = _japanese_topic(folded)
        self.topic_words = (
            {w for w in words.index_text(self.topic).split() if not w.isdigit()}
            if self.topic
            else set()
        )

    def context_without(self, key: str) -> set[str]:
        """The sentence's words but those of one detail: what must surround that detail."""
        return self.words - self._name_words.get(key, {key})


class Evidence:
    """One excerpt, indexed the same ways as a sentence (numbers, words, folded text), and
    by sentence, to tell where in it a detail stands; with its title and aliases (``names``),
    which name its subject: what they hold may stand anywhere in a sentence about it."""

    def __init__(self, text: str, names: Sequence[str] = ()):
        self.text = text
        heading = "\n".join(n for n in names if n)
        self.folded = words.fold(text)
        self._subject = words.fold(heading)
        self._subject_names = [words.fold(n) for n in names if n and n.strip()]
        self._subject_words = set(words.index_text(heading).split())
        # the words of the names in them ("Kiasma", "Museum", "Modern", "Art"; ヘルシンキ)
        self._subject_names_words = {
            key for name in names if name for _, key in _names(unicodedata.normalize("NFKC", name))
        }
        self.numbers = set(_numbers(unicodedata.normalize("NFKC", text))) | _written_numbers(text)
        self.words = set(words.index_text(text).split()) | self._subject_words
        self._sentences: list[str] = []
        self._vectors: Any = None  # embed()'s rows, once asked for
        self._parts: list[tuple[set[str], set[str], str]] | None = None

    def has_name(self, key: str) -> bool:
        return key in self.words or key in self.folded or key in self._subject

    def _names_subject(self, key: str) -> bool:
        return key in self._subject_words or key in self._subject

    def named_numbers(self, sentence: Facts) -> set[str]:
        """Numbers that are part of the title or an alias where the sentence writes it whole
        ("Apollo 11", "エアバスA318"): the subject's name, not a figure it states."""
        return {
            n for name in self._subject_names if name in sentence.folded for n in _numbers(name)
        }

    @property
    def parts(self) -> list[tuple[set[str], set[str], str]]:
        """(words, numbers, folded text) of each sentence of the excerpt."""
        if self._parts is None:
            self._parts = []
            for sentence in _EXCERPT_SENTENCE.split(self.text):
                folded = unicodedata.normalize("NFKC", sentence)
                self._parts.append(
                    (
                        set(words.index_text(sentence).split()),
                        set(_numbers(folded)) | _written_numbers(sentence),
                        words.fold(sentence),
                    )
                )
        return self._parts

    def number_at(self, number: str) -> list[int]:
        """The sentences holding ``number`` (empty: not in this excerpt)."""
        if number not in self.numbers:
            return []
        return [i for i, (_, numbers, _) in enumerate(self.parts) if number in numbers] or [-1]

    def name_at(self, key: str) -> list[int]:
        """The sentences naming ``key``; [-1] (anywhere will do) when the title or an alias
        holds it or the excerpt opens with it: that is the document's subject, which the
        sentence restating a fact of it ("He was born…") does not repeat."""
        if not self.has_name(key):
            return []
        if self._names_subject(key):
            return [-1]
        opening = self.folded.find(key)
        if 0 <= opening < SUBJECT_CHARS or (opening < 0 and key in self.words):
            return [-1]
        places = [i for i, (found, _, text) in enumerate(self.parts) if key in found or key in text]
        return places or [-1]

    def aligned(self, context: set[str], places: list[int]) -> bool:
        """Whether a detail found at ``places`` stands where the excerpt says what the
        sentence's other words say: in a sentence sharing at least ALIGN_SHARE of the best
        any sentence of the excerpt shares with them. Nothing shared anywhere: no judgement.
        Nor where nothing but the subject's names (its title, aliases) is shared: in a record
        ("Kiasma: museum (tourism=museum). … City: Helsinki") every line is about the
        subject, and only the first names it."""
        overlaps = [len(context & found) for found, _, _ in self.parts]
        best = max(overlaps, default=0)
        beyond = context - self._subject_names_words
        if best == 0 or -1 in places or not any(beyond & found for found, _, _ in self.parts):
            return True
        return any(overlaps[i] >= max(1, ALIGN_SHARE * best) for i in places)

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


_SMALL_WORDS = {
    w: str(n)
    for n, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        ]
    )
}  # noqa: SIM905
_SMALL_KANA = {
    w: str(n + 1)
    for n, w in enumerate(
        [
            "ひとつ",
            "ふたつ",
            "みっつ",
            "よっつ",
            "いつつ",
            "むっつ",
            "ななつ",
            "やっつ",
            "ここのつ",
            "とお",
        ]
    )
}  # noqa: SIM905
_KANJI_DIGITS = {c: str(n + 1) for n, c in enumerate("一二三四五六七八九十")}
# a kanji numeral counts as a number before a counter (一つ, 二人, 三回), not inside a word (統一)
_KANJI_COUNTED = re.compile(
    "([一二三四五六七八九十])(?=[つ人回度個位本台匹頭冊枚名番階期代点社校曲作])"
)


def _written_numbers(text: str) -> set[str]:
    """Small numbers an excerpt writes in words (one, ひとつ, 二人) that an answer may give in
    digits: "酵素のひとつ" supports "酵素の1つ"."""
    lowered = text.lower()
    found = {_SMALL_WORDS[w] for w in re.findall(r"[a-z]+", lowered) if w in _SMALL_WORDS}
    found |= {n for w, n in _SMALL_KANA.items() if w in text}
    found |= {_KANJI_DIGITS[c] for c in _KANJI_COUNTED.findall(text)}
    return found


def _names(text: str) -> list[tuple[str, str]]:
    """(as written, the key an excerpt must hold): capitalised words but stop words (a name
    opening the sentence included: an excerpt holds it in any case, as it holds "born" of
    "Born in …"), Japanese names."""
    out: list[tuple[str, str]] = []
    for token in _CAPITALISED.findall(text):
        lowered = token.lower().strip("'’-")
        if lowered in words.STOP_WORDS:
            continue
        key = words.index_text(token)
        if key:
            out.append((token, key.split()[0]))
    out += [(name, name) for name in words.japanese_names(text)]
    return list(dict.fromkeys(out))


_TOPIC_MAX_CHARS = 40
# a topic that points back (同社は, その後は, 彼は) names nothing to look up
_POINTING = re.compile(r"^(?:同|本|当|その|この|あの|これ|それ|彼|両)")


def _japanese_topic(text: str) -> str:
    """What a Japanese sentence is about: the noun phrase before its first topic は
    (「合理主義哲学は…」, 「香川県の県庁所在地は…」), not 「1958年には」 or 「とは」; "" if none."""
    if not re.search("[\u3040-\u30ff\u4e00-\u9fff]", text[: _TOPIC_MAX_CHARS + 1]):
        return ""
    tokenizer, _ = words._sudachi()
    previous = None
    for morpheme in tokenizer.tokenize(text[: _TOPIC_MAX_CHARS + 1]):
        pos = morpheme.part_of_speech()
        if morpheme.surface() == "は" and pos[:2] == ("助詞", "係助詞"):
            topic = text[: morpheme.begin()].strip()
            if (
                previous is None
                or previous.part_of_speech()[0] not in ("名詞", "接尾辞")
                or _POINTING.match(topic)
            ):
                return ""
            return topic
        previous = morpheme
    return ""


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
