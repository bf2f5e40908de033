"""Text normalisation shared by indexing and querying, so both sides fold text the same way."""

from __future__ import annotations

import re
import unicodedata

_SPACE = re.compile(r"\s+")
# kana and the common ideographs: a text with any is taken as Japanese (an answer's language,
# the words a question back is asked in)
JAPANESE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff]")


def language_of(text: str | None) -> str:
    """``ja`` when ``text`` has Japanese script, else ``en``."""
    return "ja" if text and JAPANESE.search(text) else "en"


def normalise_title(text: str) -> str:
    """The form titles are compared in: NFKC (full-width → half-width), case-folded, single
    spaces. 「ＲＵＳＴ　入門」 and "rust 入門" compare equal; 浅草寺 stays 浅草寺."""
    return _SPACE.sub(" ", unicodedata.normalize("NFKC", text)).strip().casefold()


def clipped(text: str, chars: int) -> str:
    """``text`` within ``chars`` characters, ``…`` standing for what was cut."""
    return text if len(text) <= chars else text[: chars - 1] + "…"


def split_terms(text: str) -> list[str]:
    """Whitespace-separated terms, including the ideographic space U+3000."""
    return [t for t in _SPACE.split(text.replace("\u3000", " ").strip()) if t]
