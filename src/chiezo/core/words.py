"""Text → words, the one way both the word index and queries split text.

The trigram index finds any substring but ranks a question by its grammar as much as by its
content: 「夏目漱石はいつ生まれましたか」 shares 生まれました/含まれます pieces with a Rust book
chapter. A word index ranks by content words (measured on JaQuAD dev, docs/design.md §24:
trigram-OR bm25 R@1 .795, words .842, both fused .861).

* Runs of Japanese script go through Sudachi (split mode A, ``normalized_form()``: 生まれ →
  生まれる, ＪＲ → JR); particles, auxiliary verbs, pronouns, symbols and spaces are dropped.
* Everything else is split into letter/digit runs, stripped of accents and stemmed with the
  Snowball English stemmer (PyStemmer); English stop words are dropped.
* Both sides are folded first (NFKC, case): ｱｲｽ and アイス, ＪＲ and JR are the same word.

The output is space-separated tokens that FTS5's ``unicode61`` tokenizer keeps exactly as they
are, so the index's vocabulary is this module's vocabulary and a query word's document frequency
is one lookup (``word_df``).
"""

from __future__ import annotations

import functools
import re
import threading
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Protocol

# Hiragana, katakana (incl. the phonetic extensions), CJK ideographs and their compatibility
# forms, CJK punctuation: Sudachi sees a Japanese sentence whole, punctuation included.
_JAPANESE = (
    "\u3000-\u303f\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
    "\U00020000-\U0002ffff"
)
_JAPANESE_RUN = re.compile(f"[{_JAPANESE}]+")
_TOKEN = re.compile(r"[^\W_]+")  # what unicode61 calls a token: letters and digits
# Scripts written without spaces that no installed tokenizer splits (Thai, Lao, Myanmar, Khmer):
# a run of them would be one "word" that matches nothing, so they stay with the trigram index.
_UNSPLIT = re.compile("[\u0e00-\u0eff\u1000-\u109f\u1780-\u17ff]")
_UNSAFE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\ud800-\udfff]")
# Sudachi refuses a single input over ~49 KB of UTF-8; 12,000 characters is at most 36 KB.
SUDACHI_MAX_CHARS = 12_000
DROPPED_POS = ("助詞", "助動詞", "補助記号", "空白", "記号", "代名詞")
STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves""".split()  # noqa: SIM905 - a word list reads better as text
)

_local = threading.local()


def fold(text: str) -> str:
    """The form both indexes and queries compare in: NFKC (full-width → half-width, half-width
    kana → full-width), case folded, control characters and lone surrogates as spaces."""
    return unicodedata.normalize("NFKC", _UNSAFE.sub(" ", text)).casefold()


def index_text(text: str) -> str:
    """The words of ``text`` for the word index, space-separated, in order."""
    return " ".join(_words(fold(text)))


def query_words(text: str) -> list[str]:
    """The distinct content words of a query, in order."""
    return list(_query(text).words)


def light_words(text: str) -> frozenset[str]:
    """Those of ``query_words(text)`` that say little of *what* is asked (``_LIGHT_POS``:
    一番, 何, 最も, ある, する…): words the index holds like any other, but no evidence that a
    document is about the question. 「世界で一番広い国は？」 → {一番}."""
    return frozenset(_query(text).light)


def evidence_words(text: str) -> list[str]:
    """``query_words(text)`` but the light ones: the words whose presence in a document is
    evidence that it is about the question (coverage, search/evidence.py)."""
    light = light_words(text)
    return [w for w in query_words(text) if w not in light]


def marked_words(text: str) -> tuple[list[str], list[str]]:
    """What a reader should see marked for a query: (word stems of spaced scripts, to mark as
    whole words from their start; pieces of Japanese as written, to mark wherever they occur).
    Stop words, particles and auxiliaries are not marked: 「夏目漱石はいつ生まれましたか」 marks
    夏目, 漱石 and 生まれ, not は or まし."""
    query = _query(text)
    return list(query.stems), list(query.pieces)


@dataclass(frozen=True)
class _Query:
    words: tuple[str, ...]  # as indexed (normalised, stemmed)
    stems: tuple[str, ...]  # to mark in spaced scripts
    pieces: tuple[str, ...]  # to mark in Japanese, as written
    light: tuple[str, ...]  # of ``words``, those only light morphemes gave (light_words)


# One search needs its query's words several times (the word side, coverage, snippets, each
# source of a search across sources): one pass of Sudachi, ~1 ms, a fifth of a hybrid query on
# JaQuAD dev, serves them all (docs/design.md §24.6).
@functools.lru_cache(maxsize=256)
def _query(text: str) -> _Query:
    folded = fold(text)
    words: list[str] = []
    stems: list[str] = []
    pieces: list[str] = []
    light: list[str] = []
    heavy: set[str] = set()  # a word is light only where every morpheme giving it is
    for spaced, japanese in _runs(folded):
        found = list(_spaced_words(spaced))
        words += found
        heavy.update(found)
        stems += _marked_stems(spaced)
        for morpheme in _kept_morphemes(japanese):
            found = _TOKEN.findall(morpheme.normalized_form().casefold())
            words += found
            (light.extend if _is_light(morpheme) else heavy.update)(found)
            surface = morpheme.surface()
            if _TOKEN.search(surface) and (len(surface) >= 2 or "\u4e00" <= surface <= "\u9fff"):
                pieces.append(surface)  # one kana is noise
    light = [w for w in light if w not in heavy]
    return _Query(*(tuple(dict.fromkeys(x)) for x in (words, stems, pieces, light)))


_KATAKANA_WORD = re.compile("[\u30a1-\u30fa\u30fc]{2,}")


def japanese_names(text: str) -> list[str]:
    """The names in the Japanese runs of ``text``, folded, as written: Sudachi's proper nouns
    (夏目, 漱石, 牛込) and katakana words its dictionary does not know (ヴァラーノ,
    ツキヨタケ) — not the katakana common nouns it knows (タイプ, フルネーム), which an answer
    may well use where its source does not. What an answer must not change when it restates
    a source."""
    out: list[str] = []
    for _, japanese in _runs(fold(text)):
        for morpheme in _kept_morphemes(japanese):
            surface = morpheme.surface()
            if morpheme.part_of_speech()[1] == "固有名詞" or (
                morpheme.is_oov() and _KATAKANA_WORD.fullmatch(surface)
            ):
                out.append(surface)
    return list(dict.fromkeys(out))


def _marked_stems(text: str) -> list[str]:
    out = []
    for token in _TOKEN.findall(text):
        if len(token) < 3 or token in STOP_WORDS:
            continue  # "a" and "I" everywhere is noise
        stem = _stemmer().stemWord(token)
        out.append(stem if token.startswith(stem) and len(stem) >= 3 else token)
    return out


def _words(folded: str) -> Iterator[str]:
    for spaced, japanese in _runs(folded):
        yield from _spaced_words(spaced)
        yield from _japanese_words(japanese)


def _runs(folded: str) -> Iterator[tuple[str, str]]:
    """``folded`` as (text in spaced scripts, the run of Japanese after it) pairs, in order;
    either may be empty."""
    position = 0
    for run in _JAPANESE_RUN.finditer(folded):
        yield folded[position : run.start()], run.group(0)
        position = run.end()
    yield folded[position:], ""


def _spaced_words(text: str) -> Iterator[str]:
    if not text.strip():
        return
    plain = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    tokens = [t for t in _TOKEN.findall(plain) if t not in STOP_WORDS and not _UNSPLIT.search(t)]
    yield from _stemmer().stemWords(tokens)


def _japanese_words(run: str) -> Iterator[str]:
    for morpheme in _kept_morphemes(run):
        # a normalised form may hold characters unicode61 would split on (・, symbols)
        yield from _TOKEN.findall(morpheme.normalized_form().casefold())


class _Morpheme(Protocol):
    """What is read of a Sudachi morpheme (sudachipy ships no types)."""

    def surface(self) -> str: ...
    def normalized_form(self) -> str: ...
    def part_of_speech(self) -> tuple[str, ...]: ...
    def is_oov(self) -> bool: ...


def _kept_morphemes(run: str) -> Iterator[_Morpheme]:
    """Sudachi's morphemes of a run of Japanese, but for particles, auxiliaries, symbols."""
    tokenizer, dropped = _sudachi()
    for piece in _pieces(run, SUDACHI_MAX_CHARS):
        for morpheme in tokenizer.tokenize(piece):
            if not dropped(morpheme):
                yield morpheme


def _pieces(text: str, size: int) -> Iterator[str]:
    """``text`` in pieces of at most ``size`` characters, cut after a 。 where there is one."""
    while len(text) > size:
        cut = text.rfind("。", 0, size) + 1 or size
        yield text[:cut]
        text = text[cut:]
    if text:
        yield text


def _sudachi():
    """This thread's Sudachi tokenizer and its "dropped part of speech" matcher (tokenizers
    are not shared between threads)."""
    found = getattr(_local, "sudachi", None)
    if found is None:
        from sudachipy import Dictionary, SplitMode

        dictionary = Dictionary(dict="core")
        tokenizer = dictionary.tokenizer(mode=SplitMode.A, fields={"pos", "normalized_form"})
        dropped = dictionary.pos_matcher(lambda pos: pos[0] in DROPPED_POS)
        found = _local.sudachi = (tokenizer, dropped)
    return found


def _stemmer():
    found = getattr(_local, "stemmer", None)
    if found is None:
        import Stemmer

        found = _local.stemmer = Stemmer.Stemmer("english")
    return found


# What says little of *what* is asked: adnominals (どんな, 同じ), adverbs, numerals (何), affixes
# (〜家, 〜人), nouns used as adverbs (一番, ところ, 今), forms that lean on another word (いる,
# する, なる, ない). A question's evidence is in its other words.
_LIGHT_POS = (
    {"連体詞", "副詞", "接頭辞", "接尾辞", "感動詞", "接続詞"},
    {"数詞", "副詞可能", "非自立可能", "助動詞語幹"},
)


def _is_light(morpheme: _Morpheme) -> bool:
    pos = morpheme.part_of_speech()
    return pos[0] in _LIGHT_POS[0] or bool(set(pos[1:3]) & _LIGHT_POS[1])


def content_pieces(text: str) -> list[str]:
    """The pieces of ``text`` that carry its content, folded, as they are found in text:
    Japanese words as written (not the light ones above), stems of spaced scripts (not stop
    words). 「北海道とはどんなところ？」 → 北海道; "Where was Kiasma built?" → kiasma, built."""
    out: list[str] = []
    for spaced, japanese in _runs(fold(text)):
        out += _marked_stems(spaced)
        for morpheme in _kept_morphemes(japanese):
            if _is_light(morpheme):
                continue
            surface = morpheme.surface()
            if len(surface) >= 2 or "\u4e00" <= surface <= "\u9fff":  # one kana is noise
                out.append(surface)
    return list(dict.fromkeys(out))
