"""Template filters: marked query words, sizes, safe links, how a search was made."""

from __future__ import annotations

import re

from markupsafe import Markup, escape

from chiezo.core.progress import format_bytes
from chiezo.core.words import marked_words
from chiezo.surfaces.web.i18n import MESSAGES, Translator


def safe_url(url: str | None) -> str | None:
    """A document's own url as a link only when it is one a page may open (never
    ``javascript:``: a document's metadata must not run in the page)."""
    if not url:
        return None
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    return url if scheme in ("http", "https", "file") else None


def describe_how(how: str, t: Translator) -> str:
    """``hybrid+keyword`` → the words for each way the sources were searched."""
    return " + ".join(
        t(f"how.{part}") if f"how.{part}" in MESSAGES else part for part in how.split("+")
    )


def highlight(text: str, query: str) -> Markup:
    """``text`` escaped, with the query's content words marked (words.marked_words): words of
    spaced scripts from their stem on ("running" marks "runs"), stop words never ("the",
    "what"); Japanese by its words even when typed as one unspaced sentence, particles never.
    Words are found in the text itself and each piece escaped after, so a word never matches
    inside an entity ("amp" in ``&amp;``)."""
    stems, pieces = marked_words(query or "")
    patterns = [rf"\b{re.escape(s)}\w*" for s in stems]
    patterns += [re.escape(p) for p in sorted(pieces, key=len, reverse=True)]
    if not patterns:
        return Markup(escape(text))
    spans: list[list[int]] = []
    for match in re.finditer("|".join(patterns), text, re.IGNORECASE):
        if spans and spans[-1][1] == match.start():  # 夏目 + 漱石: one mark
            spans[-1][1] = match.end()
        else:
            spans.append([match.start(), match.end()])
    pieces, last = [], 0
    for start, end in spans:
        pieces += [escape(text[last:start]), Markup("<mark>%s</mark>") % text[start:end]]
        last = end
    pieces.append(escape(text[last:]))
    return Markup("").join(pieces)


def say(note: str, t: Translator) -> str:
    """A search note in the page's language: a notice by its code (search/notices.py)."""
    text = getattr(note, "text", None)
    return text(t.language) if callable(text) else note


def human_size(n: int | None) -> str:
    if not isinstance(n, int | float):  # None, or missing for a source that needs a rebuild
        return "—"
    return format_bytes(n)


# A model file's name ends in its quantisation (llama.cpp's Q4_K_M, IQ4_XS, Q8_0, F16…) and,
# when split, in its part number; both are kept out of the name and the quantisation said after.
_MODEL_FILE = re.compile(r"\.(gguf|bin|onnx|safetensors|pt)$", re.IGNORECASE)
_SPLIT_PART = re.compile(r"-\d{5}-of-\d{5}$", re.IGNORECASE)
_QUANT = re.compile(
    r"[-_.]((?:UD-)?(?:[IT]?Q\d(?:_[0-9A-Z]+)*|B?F16|F32|FP16|FP8))$", re.IGNORECASE
)
_LOCAL = re.compile(r"^(?:[/~.\\]|[A-Za-z]:[/\\])")
_EMBEDDER_PATH = re.compile(r"^(onnx|st):(.+)$")  # store/embedders.py: onnx:/dir, st:/dir


def model_label(name: str | None) -> str:
    """A model as a person reads it, never a path on this machine (a page may be seen from
    another one on the LAN): ``/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf`` → ``Qwen2.5-7B-Instruct
    (Q4_K_M)``; ``st:/opt/models/e5-base`` → ``st:e5-base``. A name that is no path — a hub id
    such as ``Qwen/Qwen2.5-7B-Instruct``, ``qwen2.5:7b``, ``use-m`` — is shown as it is. The
    same rules are in chiezo.js (``Chiezo.modelLabel``) for names the browser learns itself."""
    if not name:
        return ""
    embedder = _EMBEDDER_PATH.match(name)
    if embedder:
        return f"{embedder.group(1)}:{model_label(embedder.group(2)) or embedder.group(2)}"
    if not (_LOCAL.match(name) or "\\" in name or _MODEL_FILE.search(name)):
        return name
    stem = re.split(r"[/\\]", name.rstrip("/\\"))[-1]
    stem = _SPLIT_PART.sub("", _MODEL_FILE.sub("", stem))
    quant = _QUANT.search(stem)
    if quant and quant.start() > 0:
        return f"{stem[: quant.start()]} ({quant.group(1)})"
    return stem
