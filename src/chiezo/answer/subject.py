"""No basis means no basis: the subject a question names, and whether any
document found is about it.

「夏目漱石はいつ生まれましたか？」 over a library without an article on 夏目漱石 found 愛媛県
(which names him in a list of works and a dialect note), and a model answered "from [1]
愛媛県". When the question names a subject and no document found is about it, the answer is
the fixed no-basis reply naming the subject and where it is mentioned in passing, decided
before any model is asked.

* **Subjects** are what the question names: 『…』, 「…」 or "…" around a name, capitalised
  English phrases, Japanese noun phrases holding a name (a Sudachi proper noun, a katakana or
  Latin word its dictionary does not know: 夏目漱石, ウイングマン, WJ), the topic (before は,
  とは, が…) first. General nouns (敬語, 人口), words quoted as words (「言う」), an era's year
  (大正2年) and a lone capital (「Cは誰に…」) are no subject; nor is anything in an
  all-lowercase English question (nothing tells its names apart).
* A document **is about** a subject when its title or an alias stands for it (``stands_for``:
  NFKC, case, spaces, brackets, a disambiguator 「夏目漱石 (作家)」, or one the other with a
  short affix at a word boundary: 桂 → 桂正和, 沖縄 → 沖縄県, Huxley → Aldous Huxley), or
  when its excerpt treats the subject at more than passing length (``Rules``): a heading names
  it, a passage says something of it (「Xは」, "X was"), it is named five times, or a passage
  naming it holds much of what else the question asks (「ウイングマン」の名称… under 特撮
  ヒーロー in 桂正和). JaQuAD asks about people and works inside articles about something
  else: without these, 34% of questions whose article *is* in the library were declared.
* The check passes when **any** subject has such a document (「ナポレオンがエジプト遠征を…」 is
  answered if the library has either), and when the library has an article of the subject's
  title that the search missed (``has_article``). A false "no basis" on a question the
  library can answer is worse than an answer: bench/no_basis.py measures both sides.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from chiezo.answer.excerpt import Excerpt
from chiezo.core.words import STOP_WORDS, content_pieces, fold

if TYPE_CHECKING:
    from sudachipy import Morpheme, MorphemeList

MAX_QUESTION_CHARS = 2_000  # a subject is named early; Sudachi reads no more than this
AFFIX_CHARS = 2  # 桂 → 桂正和, 沖縄 → 沖縄県: at most this much more in unspaced script
LONG_LATIN = 8  # a Latin name this long is found in a text however it is spaced
MAX_QUOTED_CHARS = 40  # a longer 「…」 is a sentence quoted, not a name


@dataclass(frozen=True)
class Rules:
    """When a document found is about a subject its title does not name. Chosen on JaQuAD
    train questions (bench/no_basis.py, ``tune``); the shared questions and JaQuAD dev held out
    (docs/design.md)."""

    headings: bool = True  # a chosen passage's heading names it
    said: bool = True  # a passage says something of it: 「Xは」「Xが」, "X was"
    mentions: int = 5  # the excerpt names it this many times
    # a passage naming it holds this share of the question's other words (at least
    # ``min_other`` of them asked): its nouns within ``window`` sentences of a mention (None:
    # the passage), its verbs within ``verb_window`` — 生まれ is no evidence three sentences
    # from 夏目漱石, in 「交流が生まれ」
    share: float = 0.3
    min_other: int = 1
    window: int | None = None
    verb_window: int | None = 1


RULES = Rules()


@dataclass(frozen=True)
class Subject:
    text: str  # as the question writes it
    forms: tuple[str, ...]  # ways a title may stand for it (the phrase, its name part)
    topic: bool = False  # before は/とは/って/について/が: what the question is about


@dataclass
class Missing:
    """The question's subject, which no document found is about, and the titles of those
    that mention it in passing."""

    subject: str
    mentioned_in: list[str] = field(default_factory=list)


# -- what the question names ------------------------------------------------------------------


def subject_of(question: str) -> str | None:
    """The subject ``question`` names (its topic first, else the first named), or None."""
    found = subjects_of(question)
    return found[0].text if found else None


def subjects_of(question: str) -> list[Subject]:
    """Every subject ``question`` names, the topic first, each once."""
    text = unicodedata.normalize("NFKC", question[:MAX_QUESTION_CHARS])
    found = _quoted(text) + (_japanese(text) if _JAPANESE.search(text) else []) + _english(text)
    out: dict[str, Subject] = {}
    for subject in sorted(found, key=lambda s: not s.topic):  # stable: topics first
        key = _key(subject.text)
        if key and key not in out:
            out[key] = subject
    return list(out.values())


_JAPANESE = re.compile("[\u3040-\u30ff\u3400-\u9fff]")
_QUOTES = re.compile(r"『([^』]+)』|「([^」]+)」|\"([^\"]+)\"|“([^”]+)”")
# Latin with a capital, two characters or more: 「WJ」, SHADOWLADY — not the S or C that
# stand for an anonymous person (「Cは誰に殺されたの？」) nor 2019 or apivorous
_LATIN_NAME = re.compile(r"(?=[A-Za-z0-9.\-]*[A-Z])[A-Za-z0-9][A-Za-z0-9.\-]+")


def _quoted(text: str) -> list[Subject]:
    """『…』 is a work's title; 「…」 and "…" quote words as often as names (「言う」に対応する
    尊敬語, 「めし」を漢語に), so they count only around a name."""
    out = []
    for match in _QUOTES.finditer(text):
        inner = next(g for g in match.groups() if g).strip()
        if not inner or len(inner) > MAX_QUOTED_CHARS:
            continue
        if match.group(1) or _names_something(inner):
            out.append(Subject(inner, (inner,), topic=_topic_after(text, match.end())))
    return out


def _names_something(text: str) -> bool:
    if not _JAPANESE.search(text):
        return bool(_LATIN_NAME.search(text)) and not text.endswith(("?", "."))
    return any(_is_name(m) for m in _morphemes(text))


# Japanese ----------------------------------------------------------------------------------------

_TOPIC_MARKS = ("は", "とは", "って", "について", "が")
_JOINERS = frozenset("・=&-")


def _japanese(text: str) -> list[Subject]:
    """Noun phrases (runs of nouns, affixes, Latin words, joined by ・) that hold a name."""
    out: list[Subject] = []
    run: list[Morpheme] = []
    ms = list(_morphemes(text))
    for i, m in enumerate([*ms, None]):
        if m is not None and (_in_noun_run(m) or (run and _joins(m, ms, i))):
            run.append(m)
            continue
        while run and not _in_noun_run(run[-1]):
            run.pop()  # a trailing ・ joins nothing
        if run and any(_is_name(x) for x in run) and not _DATE.fullmatch(_surface(run)):
            out.append(_phrase(run, _topic_at(ms, i)))
        run = []
    return out


# an era's year is a date, not a subject: 大正2年, 寛永17年, 昭和元年
_DATE = re.compile(r"\D{1,4}(?:\d+|元)年(?:\d+月)?(?:\d+日)?(?:頃|ごろ|代)?")


def _surface(run: list[Morpheme]) -> str:
    return "".join(m.surface() for m in run)


def _phrase(run: list[Morpheme], topic: bool) -> Subject:
    """The phrase, with the shorter forms a title or a text may name it by: up to its last
    name (エジプト遠征 → エジプト), its names alone (発明家フランソワ・デュソー →
    フランソワ・デュソー), the last part of a name joined by ・ (パッタコス)."""
    surfaces = [m.surface() for m in run]
    names = [i for i, m in enumerate(run) if _is_name(m)]
    first, last = names[0], names[-1]
    core = "".join(surfaces[first : last + 1])
    forms = ["".join(surfaces), "".join(surfaces[: last + 1]), core]
    if "・" in core and len(core.rsplit("・", 1)[1]) >= 3:
        forms.append(core.rsplit("・", 1)[1])
    return Subject(forms[0], tuple(dict.fromkeys(forms)), topic=topic)


def _in_noun_run(m: Morpheme) -> bool:
    pos = m.part_of_speech()
    return pos[0] in ("名詞", "接頭辞") or (pos[0] == "接尾辞" and pos[1] == "名詞的")


def _joins(m: Morpheme, ms: list[Morpheme], i: int) -> bool:
    return m.surface() in _JOINERS and i + 1 < len(ms) and _in_noun_run(ms[i + 1])


def _is_name(m: Morpheme) -> bool:
    """A proper noun, or a word the dictionary does not know that looks like a name (katakana,
    or Latin with a capital: ウイングマン, SHADOWLADY, WJ — not 2019 or apivorous)."""
    pos = m.part_of_speech()
    if pos[0] == "名詞" and pos[1] == "固有名詞":
        return True
    surface = m.surface()
    if not m.is_oov():
        return False
    return bool(_KATAKANA.fullmatch(surface)) or bool(_LATIN_NAME.fullmatch(surface))


_KATAKANA = re.compile("[\u30a1-\u30fa\u30fc]{2,}")


def _topic_at(ms: list[Morpheme], i: int) -> bool:
    """The phrase ending before morpheme ``i`` is followed by a topic mark."""
    following = "".join(m.surface() for m in ms[i : i + 3])
    return following.startswith(_TOPIC_MARKS)


def _topic_after(text: str, end: int) -> bool:
    return text[end:].startswith(_TOPIC_MARKS)


def _morphemes(text: str) -> MorphemeList:
    from chiezo.core.words import _sudachi  # the one tokenizer per thread words.py keeps

    tokenizer, _ = _sudachi()
    return tokenizer.tokenize(text)


# English -----------------------------------------------------------------------------------------

# a capitalised phrase, joined through "of", "the", "de"…: "Bank of England", "Leonardo da Vinci"
_LETTERS = r"[A-Za-z0-9\u00c0-\u024f'’.\-]*"  # not \w: it would run on into Japanese
_CAPITALISED = re.compile(
    rf"[A-Z]{_LETTERS}(?:\s+(?:(?:of|the|de|da|di|del|der|von|van|la|le|du)\s+)*"
    rf"[A-Z0-9]{_LETTERS})*"
)
# first words that are capitalised only for opening the sentence
_OPENERS = STOP_WORDS | frozenset(
    "name list describe explain define compare identify tell give show find in on at".split()  # noqa: SIM905
)


def _english(text: str) -> list[Subject]:
    """Capitalised phrases, the capital that only opens a sentence and stop words at their
    ends taken off (「What is」, "the")."""
    out = []
    for match in _CAPITALISED.finditer(text):
        words = match.group(0).split()
        opening = _opens_sentence(text, match.start())
        while words and (words[0].lower() in STOP_WORDS or (opening and _opener(words[0]))):
            words.pop(0)
            opening = False
        while words and words[-1].lower() in STOP_WORDS:
            words.pop()
        if words and len("".join(words)) >= 2:
            phrase = re.sub(r"['’]s$", "", " ".join(words)).strip(".")
            out.append(Subject(phrase, (phrase,), topic=_topic_after(text, match.end())))
    return out


def _opens_sentence(text: str, at: int) -> bool:
    before = text[:at].rstrip()
    return not before or before.endswith((".", "?", "!", ":", '"'))


def _opener(word: str) -> bool:
    return word.lower() in _OPENERS


# -- is a document found about it -------------------------------------------------------------------


def missing_subject(
    question: str,
    excerpts: Sequence[Excerpt],
    rules: Rules = RULES,
    has_article: Callable[[str], bool] | None = None,
) -> Missing | None:
    """The subject ``question`` names when none of ``excerpts`` is about any subject it names
    (no title or alias stands for it, no excerpt treats it at more than passing length);
    None when it names none or one is covered. ``has_article(name)``: whether the library
    holds a document of that title (or alias) — one that the search missed is no reason to
    say the library has none."""
    return missing_among(subjects_of(question), question, excerpts, rules, has_article)


def missing_among(
    subjects: list[Subject],
    question: str,
    excerpts: Sequence[Excerpt],
    rules: Rules = RULES,
    has_article: Callable[[str], bool] | None = None,
) -> Missing | None:
    """``missing_subject`` for subjects already found (the first is the one named)."""
    if not subjects:
        return None
    for subject in subjects:
        others = _other_pieces(question, subject)
        besides = [s for s in subjects if s is not subject]
        for e in excerpts:
            names = [e.title, *(getattr(e, "aliases", None) or [])]
            if any(stands_for(form, name) for form in subject.forms for name in names):
                return None
            if _covered(subject, others, besides, e, rules):
                return None
    if has_article is not None and any(has_article(f) for s in subjects for f in s.forms):
        return None
    first = subjects[0]
    mentioned = [e.title for e in excerpts if _mentions(e.text, first) > 0]
    return Missing(first.text, list(dict.fromkeys(mentioned)))


def stands_for(subject: str, title: str) -> bool:
    """Whether ``title`` (or an alias) names ``subject``: the same once normalised, the
    disambiguator of 「夏目漱石 (作家)」 off, or one the other with a short affix at a word
    boundary (桂 → 桂正和, プレスリー → エルヴィス・プレスリー, Huxley → Aldous Huxley)."""
    s, t = _key(subject), _key(_main(title))
    if not s or not t:
        return False
    if s == t:
        return True
    short, long = sorted((_words(subject), _words(_main(title))), key=lambda w: len("".join(w)))
    if not short or not long:
        return False
    # whole words at either end: "Huxley", ナポレオン of 「ナポレオン・ボナパルト」
    if len(short) < len(long) and (long[: len(short)] == short or long[-len(short) :] == short):
        return True
    joined_short, joined_long = "".join(short), "".join(long)
    if not _JAPANESE.search(joined_long):
        return False  # spaced scripts: whole words only ("Paris" is no part of "Parisian")
    rest = len(joined_long) - len(joined_short)
    return 0 < rest <= AFFIX_CHARS and (
        joined_long.startswith(joined_short) or joined_long.endswith(joined_short)
    )


_DISAMBIGUATOR = re.compile(r"\s*[(（][^()（）]*[)）]\s*$")
_BRACKETS = re.compile(r"[「」『』“”\"'’()（）\[\]【】〈〉《》]")
_WORD_BREAK = re.compile(r"[\s・･·=＝/／_\-]+")


def _main(title: str) -> str:
    """A title without its disambiguator: 「夏目漱石 (作家)」 → 夏目漱石."""
    return _DISAMBIGUATOR.sub("", title) or title


# a change of script is a word break too: エアバスA310 is エアバス + a310
_SCRIPT_RUN = re.compile(r"[a-z0-9\u00c0-\u024f.'’]+|[^a-z0-9\u00c0-\u024f.'’]+")


def _words(text: str) -> list[str]:
    pieces = _WORD_BREAK.split(_BRACKETS.sub(" ", fold(text)))
    return [w for piece in pieces for w in _SCRIPT_RUN.findall(piece)]


def _key(text: str) -> str:
    return "".join(_words(text))


def _covered(
    subject: Subject,
    others: tuple[list[str], list[str]],
    besides: list[Subject],
    excerpt: Excerpt,
    rules: Rules,
) -> bool:
    """The excerpt treats ``subject`` at more than passing length: a chosen passage's heading
    names it, it names it ``rules.mentions`` times, or a passage naming it holds
    ``rules.share`` of the question's other words or another subject the question names
    (the two names asked about together: パッタコス and パパドプロス)."""
    text = getattr(excerpt, "text", "") or ""
    if _mentions(text, subject) >= rules.mentions:
        return True
    passages = getattr(excerpt, "passages", None) or []
    if rules.headings and any(_mentions(p.heading or "", subject) for p in passages):
        return True
    if rules.said and any(_said_of(p.text, subject) for p in passages):
        return True
    nouns, verbs = others
    wanted = len(nouns) + len(verbs)
    if wanted < rules.min_other:
        wanted = 0  # too few to say: only another subject near it counts
    # a passage's heading is part of what it says: 「趣味 > 特撮ヒーロー」 over the passage on
    # how ウイングマン was named holds the ヒーロー of the question
    for heading, piece in [(p.heading or "", p.text) for p in passages] or [("", text)]:
        for near in _near_mentions(piece, subject, rules.window):
            near = f"{heading} {near}"
            if any(_mentions(near, other) for other in besides):
                return True
            if not wanted:
                continue
            close = fold(" ".join(_near_mentions(near, subject, rules.verb_window)))
            held = sum(o in fold(near) for o in nouns) + sum(v in close for v in verbs)
            if held >= rules.share * wanted:
                return True
    return False


def _said_of(text: str, subject: Subject) -> bool:
    """``text`` makes the subject the topic or subject of a sentence: 「オルタンス・フィケは」,
    "Fiquet was" — not a name in a list or before の (「夏目漱石の小説『坊っちゃん』」)."""
    folded = fold(text)
    for form in subject.forms:
        name = fold(form)
        if not name:
            continue
        if _JAPANESE.search(folded):
            if re.search(re.escape(name) + r"(?:は|が|も|とは)", folded):
                return True
        elif re.search(r"\b" + re.escape(name) + r"\s+(?:is|was|are|were|has|had)\b", folded):
            return True
    return False


_SENTENCE = re.compile(r"(?<=[。！？!?])|(?<=\.)\s+")


def _near_mentions(text: str, subject: Subject, window: int | None) -> list[str]:
    """The stretches of ``text`` around each mention of the subject: ``window`` sentences
    either side (None: the whole text, if it mentions it)."""
    if window is None:
        return [text] if _mentions(text, subject) else []
    sentences = [s for s in _SENTENCE.split(text) if s.strip()]
    return [
        " ".join(sentences[max(0, i - window) : i + window + 1])
        for i, sentence in enumerate(sentences)
        if _mentions(sentence, subject)
    ]


def _mentions(text: str, subject: Subject) -> int:
    """How often ``text`` names the subject (any of its forms): in Japanese anywhere, spaces and
    ・ ignored; in spaced scripts as whole words ("Paris" is not in "comparison") unless long
    enough to be found as it is (DasLandohneFrauen in "Das Land ohne Frauen")."""
    if not text:
        return 0
    counts = [0]
    for form in subject.forms:
        words = _words(form)
        if not words:
            continue
        if _JAPANESE.search(form) or len("".join(words)) >= LONG_LATIN:
            counts.append(_key(text).count("".join(words)))
        else:
            pattern = r"\b" + r"[\s・\-]*".join(map(re.escape, words)) + r"\b"
            counts.append(len(re.findall(pattern, fold(text))))
    return max(counts)


def _other_pieces(question: str, subject: Subject) -> tuple[list[str], list[str]]:
    """The question's content pieces that are not part of the subject: (nouns, the rest) —
    in a spaced script all are nouns (no part of speech is known)."""
    inside = _key(subject.text)
    pieces = [p for p in content_pieces(question) if _key(p) not in inside]
    if not _JAPANESE.search(question):
        return pieces, []
    nouns = {m.surface().casefold() for m in _morphemes(fold(question)) if _is_noun(m)}
    kept = [p for p in pieces if p in nouns or not _JAPANESE.search(p)]
    return kept, [p for p in pieces if p not in kept]


def _is_noun(m: Morpheme) -> bool:
    pos = m.part_of_speech()
    return pos[0] == "名詞" and pos[1] != "数詞" and pos[2] != "副詞可能"


# -- the reply ------------------------------------------------------------------------------------


def no_basis_reply(missing: Missing, language: str) -> str:
    """The fixed reply naming the subject (and where it is mentioned in passing), in
    ``language`` ("ja" or "en")."""
    if language == "ja":
        where = "".join(f"「{t}」" for t in missing.mentioned_in)
        said = f"（{where}で触れられています）" if where else ""
        return f"ライブラリには「{missing.subject}」についての記事がありません{said}。"
    where = ", ".join(missing.mentioned_in)
    said = f" (it is mentioned in: {where})" if where else ""
    return f"The library has no article about “{missing.subject}”{said}."
