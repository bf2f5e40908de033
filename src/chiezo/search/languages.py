"""The writing system of a question and of a source: where they differ, the question's words
cannot be the evidence of a match — only meaning can.

A source records its language when its input says it (a Wikipedia dump's ``xml:lang``, a ZIM's
``Language``, ``--language``); one that does not (documents) is judged by a sample of its
titles. What is compared is the *script*, not the language: a question's script is certain from
its characters, its language is not (German and English share every letter), and words cannot
match across scripts, while across languages of one script they sometimes do (names, loans).
An English question over the jawiki excerpt found its article by words R@1 .71 and by meaning
.84 (docs/design.md §42): the question's words matched the few Latin words of unrelated articles.
"""

from __future__ import annotations

import re
import unicodedata
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chiezo.store.library import Source

CJK = "cjk"
CYRILLIC = "cyrillic"
LATIN = "latin"
OTHER = "other"

# ISO 639-1 codes by script, for the languages sources are built in; a code not listed is
# of unknown script and never counts as crossing.
_SCRIPT_OF_LANGUAGE = {
    **dict.fromkeys(("ja", "zh", "ko", "yue", "wuu"), CJK),
    **dict.fromkeys(("ru", "uk", "be", "bg", "sr", "mk", "kk", "ky", "mn", "tg"), CYRILLIC),
    **dict.fromkeys(
        (
            "en", "simple", "de", "fr", "es", "it", "pt", "nl", "sv", "no", "nb", "nn", "da",
            "fi", "is", "pl", "cs", "sk", "sl", "hr", "bs", "hu", "ro", "tr", "id", "ms", "vi",
            "ca", "eu", "gl", "et", "lv", "lt", "sq", "af", "sw", "tl", "eo", "la", "cy", "ga",
            "cr", "oc", "br", "lb", "mt",
        ),
        LATIN,
    ),
}  # fmt: skip
# ISO 639-3 (a ZIM's ``Language``: ``eng``, ``jpn``) to the two letters sources record.
_TWO_LETTERS = {
    "eng": "en", "jpn": "ja", "zho": "zh", "chi": "zh", "kor": "ko", "deu": "de", "ger": "de",
    "fra": "fr", "fre": "fr", "spa": "es", "ita": "it", "por": "pt", "nld": "nl", "dut": "nl",
    "rus": "ru", "ukr": "uk", "bel": "be", "pol": "pl", "swe": "sv", "fin": "fi", "tur": "tr",
    "ind": "id", "vie": "vi", "cre": "cr", "lat": "la",
}  # fmt: skip
_CJK_TEXT = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\uf900-\ufaff]")
_CYRILLIC_TEXT = re.compile(r"[\u0400-\u04ff]")
_LATIN_TEXT = re.compile(r"[A-Za-z\u00c0-\u024f]")
# Titles read to judge a source that does not record its language: enough to be sure of a
# script, few enough to cost ~1 ms once per generation.
SAMPLE_TITLES = 200
# The share of sampled titles in CJK script above which a source counts as written in it:
# an English document set has a few titles in Japanese, a Japanese one many in Latin letters
# (Rust, JR, API).
CJK_SHARE = 0.3


def language_code(code: str | None) -> str | None:
    """``jpn``, ``ja-JP``, ``JA`` → ``ja``; None for nothing, ``mul`` or ``und``."""
    if not code:
        return None
    first = re.split(r"[,;_\-\s]", code.strip().lower())[0]
    first = _TWO_LETTERS.get(first, first)
    return None if first in ("", "mul", "und", "zxx") else first


def script_of_language(code: str | None) -> str | None:
    """The script a language is written in, None when it is not known here."""
    normal = language_code(code)
    return _SCRIPT_OF_LANGUAGE.get(normal) if normal else None


def script_of_text(text: str) -> str:
    """The script of a question: CJK when it has any Japanese, Chinese or Korean character
    (an English name inside a Japanese question is still a Japanese question), else the
    script of its letters."""
    folded = unicodedata.normalize("NFKC", text)
    if _CJK_TEXT.search(folded):
        return CJK
    if _CYRILLIC_TEXT.search(folded):
        return CYRILLIC
    return LATIN if _LATIN_TEXT.search(folded) else OTHER


def inferred_script(titles: list[str]) -> str | None:
    """The script of a source from a sample of its titles; None with no titles."""
    if not titles:
        return None
    cjk = sum(1 for t in titles if _CJK_TEXT.search(t))
    if cjk / len(titles) >= CJK_SHARE:
        return CJK
    scripts = [script_of_text(t) for t in titles]
    return max(set(scripts), key=scripts.count)


def script_of_source(source: Source) -> str | None:
    """The script ``source`` is written in: its recorded language's, else judged from its
    titles once per generation (kept while it is open); None for places, which are
    named in every language their data holds."""
    recorded = script_of_language(source.meta.get("language"))
    if recorded is not None or source.meta.get("language"):
        return recorded
    kind = source.kind
    if kind is not None and kind.capabilities.places:
        return None  # places are named in their own languages and others (GeoNames, OSM)
    if source.immutable and source in _JUDGED:
        return _JUDGED[source]
    titles = [r[0] for r in source.conn.execute("SELECT title FROM docs LIMIT ?", (SAMPLE_TITLES,))]
    judged = inferred_script(titles)
    if source.immutable:  # the notes change under their reader: judged anew each time
        _JUDGED[source] = judged
    return judged


# each generation's judged script, for as long as the generation is open
_JUDGED: weakref.WeakKeyDictionary[Source, str | None] = weakref.WeakKeyDictionary()


def crosses(source: Source, text: str) -> bool:
    """Whether ``text`` is in another script than ``source``: its words cannot be evidence
    there. False when either is not known."""
    script = script_of_text(text)
    if script == OTHER:
        return False
    theirs = script_of_source(source)
    return theirs is not None and theirs != script
