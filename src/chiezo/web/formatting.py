"""Template filters: marked query words, sizes, safe links, how a search was made."""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from ..progress import format_bytes
from .i18n import MESSAGES, Translator


def safe_url(url: str | None) -> str | None:
    """A document's own url as a link only when it is one a page may open (never
    ``javascript:``: a document's metadata must not run in the page)."""
    if not url:
        return None
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    return url if scheme in ("http", "https", "file") else None


def describe_how(how: str, t: Translator) -> str:
    """``hybrid+keyword`` → the words for each way the sources were searched."""
    return " + ".join(t(f"how.{part}") if f"how.{part}" in MESSAGES else part
                      for part in how.split("+"))  # fmt: skip


def highlight(text: str, query: str) -> Markup:
    """``text`` escaped, with the query's words marked: Latin words whole (from their start,
    three letters or more: "a" and "I" everywhere is noise), other scripts as substrings of
    two characters or more. Words are found in the text itself and each piece escaped after,
    so a word never matches inside an entity ("amp" in ``&amp;``)."""
    patterns = []
    for word in sorted(set(re.split(r"[\s\u3000]+", query or "")), key=len, reverse=True):
        if re.fullmatch(r"[\w'-]+", word, re.ASCII):
            if len(word) >= 3:
                patterns.append(rf"\b{re.escape(word)}\w*")
        elif len(word) >= 2:
            patterns.append(re.escape(word))
    if not patterns:
        return Markup(escape(text))
    pieces, last = [], 0
    for match in re.finditer("|".join(patterns), text, re.IGNORECASE):
        pieces += [escape(text[last : match.start()]), Markup("<mark>%s</mark>") % match.group(0)]
        last = match.end()
    pieces.append(escape(text[last:]))
    return Markup("").join(pieces)


def human_size(n: int | None) -> str:
    if not isinstance(n, int | float):  # None, or missing for a source that needs a rebuild
        return "—"
    return format_bytes(n)
