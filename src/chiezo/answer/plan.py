"""Planning: a question (and a chat's recent turns) → up to three search queries.

The model is asked for JSON, but small models wrap it in fences, add prose, or stop
mid-object. So the reply is read leniently — JSON, then the first ``{…}``, then the fields
scraped one by one — and when nothing usable comes back (or there is no model), the queries
come from :func:`keyword_queries`, which needs no model. Whatever was used is reported, so a
degraded plan is visible.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

MAX_QUERIES = 3
MAX_QUERY_CHARS = 200

PLAN_PROMPT = """You turn a question into search queries for an encyclopedia-like library.
Reply with JSON only: {"queries": ["...", "..."], "source": null}
- at most 3 short queries, most specific first; the first is the main subject's title if the
  question names one (e.g. "浅草寺はどこにある？" -> ["浅草寺"])
- keep the question's language; no explanations
- "source": one of the listed source names if the question is clearly about it, else null"""
# Added to the prompt when a listed source is written in another script than the question: its
# words cannot find that source's documents, a query in its language can (docs/design.md §42).
ACROSS_LANGUAGES = """
- a source listed with another language than the question's, e.g. "jawiki (ja)" for a
  question in English: make one of the queries the subject in that language, e.g.
  "Who painted the Mona Lisa?" -> ["Mona Lisa", "モナ・リザ"]"""


@dataclass
class Plan:
    queries: list[str]
    source: str | None = None
    planner: str = "keywords"  # "model", or "keywords" (no model, or its reply was unusable)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "queries": self.queries,
            "source": self.source,
            "planner": self.planner,
            "notes": self.notes,
        }


# -- reading a model's reply -------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json)?\s*(.*?)(?:```|$)", re.S)
_QUERIES_FIELD = re.compile(r'"queries"\s*:\s*\[(.*?)(?:\]|$)', re.S)
_SOURCE_FIELD = re.compile(r'"source"\s*:\s*"([^"]*)"')
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_PLAN_FIELDS = frozenset(["source", "sources", "queries", "reason", "notes"])


def parse_plan_reply(reply: str, sources: list[str] | None = None) -> tuple[list[str], str | None]:
    """(queries, source) from a model's reply, however it is wrapped; ``([], None)`` if
    nothing usable is in it."""
    text = strip_reasoning(reply or "")
    fenced = _FENCE.search(text)
    candidates = [fenced.group(1)] if fenced else []
    candidates.append(text)
    for candidate in candidates:
        data = _as_json_object(candidate)
        if data is not None:
            return _checked(data.get("queries"), data.get("source"), sources)
    for candidate in candidates:  # truncated or invalid JSON: scrape the fields
        found = _QUERIES_FIELD.search(candidate)
        if found:
            queries = _scraped_values(found.group(1))
            source = _SOURCE_FIELD.search(candidate)
            return _checked(queries, source.group(1) if source else None, sources)
    return [], None


def _scraped_values(text: str) -> list[str]:
    """The strings of a broken ``"queries": [...`` list, but never a key: in
    ``["query": "when was he born?", "source": null}`` only the question is a query, and the
    list ends at the next field."""
    out: list[str] = []
    for match in _STRING.finditer(text):
        if text[match.end() :].lstrip().startswith(":"):
            if match.group(1) in _PLAN_FIELDS:
                break  # the next field of the plan: the list is over
            continue
        out.append(_unescape(match.group(1)))
    return out


def _as_json_object(text: str) -> dict | None:
    text = text.strip()
    for attempt in (text, _first_object(text)):
        if not attempt:
            continue
        try:
            data = json.loads(attempt)
        except ValueError:
            continue
        if isinstance(data, dict):
            return data
    return None


def _first_object(text: str) -> str | None:
    """The first balanced ``{…}`` (strings respected), or None."""
    start = text.find("{")
    if start < 0:
        return None
    depth, in_string, escaped = 0, False, False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            escaped = ch == "\\" and not escaped
            if ch == '"' and not escaped:
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start : i + 1]
    return None


def _unescape(s: str) -> str:
    try:
        return json.loads(f'"{s}"')
    except ValueError:
        return s


def _checked(
    queries: object, source: object, sources: list[str] | None
) -> tuple[list[str], str | None]:
    if isinstance(queries, str):
        queries = [queries]
    if not isinstance(queries, list):
        queries = []
    cleaned: list[str] = []
    for q in queries:
        if isinstance(q, str) and q.strip() and q.strip() not in cleaned:
            cleaned.append(q.strip()[:MAX_QUERY_CHARS])
    if not isinstance(source, str) or (sources is not None and source not in sources):
        source = None
    return cleaned[:MAX_QUERIES], source


THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def strip_reasoning(text: str) -> str:
    """Reasoning-model residue out of a whole reply: ``<think>…</think>`` blocks, everything
    up to a stray ``</think>`` (its opening tag was in the prompt), and a block never closed
    (the reply ran out while thinking) — what :class:`ReasoningFilter` shows of it, stripped."""
    shown = ReasoningFilter()
    return (shown.feed(text or "") + shown.flush()).strip()


def without_reasoning(deltas: Iterable[str]) -> Iterator[str]:
    """A streamed reply's pieces without what a reasoning model thinks aloud (see
    :class:`ReasoningFilter`); pieces with nothing to show are skipped. A stray ``</think>``
    that comes after text was already passed on is passed on too: the pieces before it were
    reasoning, and the whole reply (``strip_reasoning``) is then the answer after it."""
    shown = ReasoningFilter(mark_late_close=True)
    for delta in deltas:
        text = shown.feed(delta)
        if text:
            yield text
    rest = shown.flush()
    if rest:
        yield rest


class ReasoningFilter:
    """What of a streamed reply a reader may see. Qwen3 and the DeepSeek-R1 distills write
    ``<think>…</think>`` before the answer (Qwen3 with thinking off an empty one), or only the
    closing ``</think>`` when the chat template opened the block in the prompt; a tag may come
    split over pieces (``<th`` + ``ink>``).

    * Inside a block nothing is shown; a block never closed is dropped to the end.
    * Outside one, text is shown as it comes but for a tail that could be the start of a tag
      (``<``, ``</thi``): only that is held back, until the next piece tells.
    * A stray ``</think>`` drops whatever is still held before it (all of the reply before it
      when the reply is fed whole, as ``strip_reasoning`` does). What was shown already cannot
      be taken back: ``late_closes`` counts those, and with ``mark_late_close`` the tag is
      kept in the output at its place, so that whoever reads the pieces whole drops what came
      before it (docs/design.md §31.3).
    * Whitespace before the first visible text is not shown: the ``\n\n`` after an empty
      block does not open the answer with blank lines."""

    def __init__(self, *, mark_late_close: bool = False) -> None:
        self._pending = ""
        self._thinking = False
        self._trim = True  # nothing shown yet: leading whitespace is dropped
        self._mark = mark_late_close
        self.late_closes = 0  # stray closing tags after text was shown

    def feed(self, text: str) -> str:
        """The part of everything fed so far that can be shown now and was not yet."""
        self._pending += text
        out: list[str] = []
        while True:
            if self._thinking:
                at = self._pending.find(THINK_CLOSE)
                if at < 0:  # keep only what may be the start of the closing tag
                    self._pending = self._pending[
                        len(self._pending) - _partial_tag(self._pending, THINK_CLOSE) :
                    ]
                    return self._shown(out)
                self._pending = self._pending[at + len(THINK_CLOSE) :]
                self._thinking = False
                continue
            opening, closing = self._pending.find(THINK_OPEN), self._pending.find(THINK_CLOSE)
            if closing >= 0 and (opening < 0 or closing < opening):
                # a stray closing tag: what came before it was reasoning
                out.clear()
                if not self._trim:  # some of it was shown already
                    self.late_closes += 1
                    if self._mark:
                        out.append(THINK_CLOSE)
                self._pending = self._pending[closing + len(THINK_CLOSE) :]
                continue
            if opening >= 0:
                out.append(self._pending[:opening])
                self._pending = self._pending[opening + len(THINK_OPEN) :]
                self._thinking = True
                continue
            keep = max(
                _partial_tag(self._pending, THINK_OPEN), _partial_tag(self._pending, THINK_CLOSE)
            )
            cut = len(self._pending) - keep
            out.append(self._pending[:cut])
            self._pending = self._pending[cut:]
            return self._shown(out)

    def flush(self) -> str:
        """What is left at the end of the reply: a held tail that never became a tag."""
        rest = "" if self._thinking else self._pending
        self._pending, self._thinking = "", False
        return self._shown([rest])

    def _shown(self, parts: list[str]) -> str:
        text = "".join(parts)
        if self._trim:
            text = text.lstrip()
            self._trim = not text
        return text


def _partial_tag(text: str, tag: str) -> int:
    """How many characters at the end of ``text`` could be the start of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0


# -- no model: keywords from the question itself ------------------------------------------------

# Runs of kanji and katakana (東京タワー), and Latin words: the content of a question. Hiragana
# between them is mostly particles and inflection (は, いつ, ましたか), so it separates terms.
_CONTENT_RUN = re.compile(
    r"[\u4e00-\u9fff\u3400-\u4dbf々〆ヶ\u30a0-\u30ffー]+|[A-Za-z0-9][A-Za-z0-9'’.\-]*"
)
_QUOTED = re.compile(r"「([^」]+)」|『([^』]+)』|\"([^\"]+)\"|“([^”]+)”")
# a connector must be a whole word: "Who developed" is not "Who de…"
_CAPITALISED = re.compile(
    r"\b[A-Z][\w'’\-]*(?:\s+(?:(?:of|de|da|di|del|der|dos|the|von|van|la|le|du)\b|[A-Z][\w'’\-]*))*"
)
# Question words, copulas and weak verbs in Japanese and English: they tell what is asked, not
# what to look up.
_STOP = frozenset(
    [
        "いつ",
        "どこ",
        "どこで",
        "どこに",
        "どこへ",
        "どなた",
        "だれ",
        "誰",
        "なに",
        "なん",
        "何",
        "何年",
        "何時",
        "何処",
        "どの",
        "どれ",
        "どんな",
        "どう",
        "どうして",
        "なぜ",
        "何故",
        "いくつ",
        "いくら",
        "ですか",
        "ますか",
        "ましたか",
        "でしたか",
        "でしょうか",
        "だった",
        "である",
        "ある",
        "いる",
        "する",
        "した",
        "される",
        "された",
        "なる",
        "なった",
        "ください",
        "教えて",
        "教え",
        "知りたい",
        "について",
        "とは",
        "という",
        "what",
        "when",
        "where",
        "which",
        "who",
        "whom",
        "whose",
        "why",
        "how",
        "is",
        "are",
        "was",
        "were",
        "be",
        "been",
        "being",
        "do",
        "does",
        "did",
        "the",
        "a",
        "an",
        "of",
        "in",
        "on",
        "at",
        "to",
        "for",
        "from",
        "by",
        "with",
        "about",
        "as",
        "and",
        "or",
        "not",
        "it",
        "its",
        "this",
        "that",
        "these",
        "those",
        "there",
        "their",
        "his",
        "her",
        "he",
        "she",
        "they",
        "them",
        "i",
        "you",
        "we",
        "me",
        "my",
        "your",
        "our",
        "can",
        "could",
        "would",
        "should",
        "will",
        "shall",
        "may",
        "might",
        "must",
        "have",
        "has",
        "had",
        "tell",
        "please",
        "know",
        "explain",
        "give",
        "find",
        "show",
        "born",
    ]
)


def keyword_queries(question: str, history: list[dict] | None = None) -> list[str]:
    """Up to three queries without a model: quoted and capitalised phrases first (they are
    likely titles), then the remaining content words in their original order. A follow-up
    that names no subject of its own ("When did he die?") is searched with the subject of the
    conversation: the titles the last answer cited, or the previous question's names."""
    text = strip_reasoning(question)
    phrases, words = _phrases(text), _content_words(text)
    subject = conversation_subject(history) if history else None
    if subject and _leans_on_context(text, phrases):
        return _limited([f"{subject} {' '.join(words)}".strip(), subject, f"{subject} {text}"])
    # The question as typed is one of the queries: the keyword side's sentence fallback ranks
    # its rarest pieces well (on the 92 jawiki questions, keywords alone found the right page
    # for 90% of them, the question as typed for 98%; design.md §19).
    candidates = phrases + [text.strip(), " ".join(words)]
    if not phrases and len(words) > 1:
        candidates.append(words[0])  # the first named thing, as a title guess
    out = _limited(candidates)
    if not out and text.strip():
        out.append(text.strip()[:MAX_QUERY_CHARS])
    return out


def conversation_subject(history: list[dict]) -> str | None:
    """What the conversation is about: the first title the last answer cited (a client
    passes them as ``cited_titles`` on the assistant's turn), else the names of the last
    question, else its first content word."""
    for turn in reversed(history):
        if turn.get("role") == "assistant" and turn.get("cited_titles"):
            return str(turn["cited_titles"][0])[:MAX_QUERY_CHARS]
        if turn.get("role") == "user":
            text = strip_reasoning(str(turn.get("content") or ""))
            found = _phrases(text) or _content_words(text)[:1]
            if found:
                return found[0][:MAX_QUERY_CHARS]
    return None


# words that point back into the conversation instead of naming a subject
_BACK_REFERENCE = re.compile(
    r"\b(?:he|she|it|they|him|her|his|hers|its|their|them|this|that|these|those|there)\b"
    r"|彼女?|それ|その|そこ|これ|この|あれ|あの|同(?:氏|社|市|町|村|寺|校|年)",
    re.I,
)


def leans_on_context(question: str) -> bool:
    """Whether a chat's question needs its earlier turns to be understood ("When did he
    die?", 「その後どうなった？」): the case where the model's plan may find more than the
    question's own words (design.md §38.1)."""
    text = strip_reasoning(question)
    return _leans_on_context(text, _phrases(text))


def _leans_on_context(text: str, phrases: list[str]) -> bool:
    """A follow-up needs the conversation's subject if it points back (he, その) or names
    nothing itself (no phrase, no Japanese name)."""
    from chiezo.core.words import japanese_names

    return bool(_BACK_REFERENCE.search(text)) or not (phrases or japanese_names(text))


def _phrases(text: str) -> list[str]:
    phrases: list[str] = []
    for match in _QUOTED.finditer(text):
        phrases.append(next(g for g in match.groups() if g))
    for match in _CAPITALISED.finditer(text):
        words = match.group(0).split()
        while words and words[0].lower() in _STOP:  # "When", "What is" opening a sentence
            words.pop(0)
        while words and words[-1].lower() in _STOP:
            words.pop()
        if words:
            phrases.append(" ".join(words))
    return phrases


def _content_words(text: str) -> list[str]:
    words = [w for w in _CONTENT_RUN.findall(text) if _is_content(w)]
    if not words:  # all kana (ひまわり): the hiragana runs are all there is
        words = [w for w in re.findall(r"[\u3041-\u309f]{2,}", text) if w not in _STOP]
    return words


def _limited(candidates: list[str]) -> list[str]:
    out: list[str] = []
    for query in candidates:
        query = query.strip()[:MAX_QUERY_CHARS]
        if query and query not in out:
            out.append(query)
    return out[:MAX_QUERIES]


_WEAK_KANJI = frozenset("何誰年月日時後前中上下内外的等")


def _is_content(word: str) -> bool:
    """Not a stop word; a lone kanji only if it can be a name (桂, 京), not 生 of 生まれ."""
    if word.lower() in _STOP:
        return False
    return not (len(word) == 1 and (word in _WEAK_KANJI or _is_verb_stem(word)))


def _is_verb_stem(char: str) -> bool:
    # a kanji followed by okurigana in the question was split off it; such stems (生, 書, 建)
    # are verbs. Without the context we keep lone kanji except the commonest verb stems.
    return char in "生書建作言見行来出入有在成始終読"
