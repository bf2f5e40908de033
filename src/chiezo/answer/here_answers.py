"""Questions about where the person is ("the nearest shelter", 「2km以内の避難場所」): what they
need before anything is looked up, when a tool's refusal must become a question to the person,
and the plain words every place answer ends with — in code, so a small model cannot skip them.

* **Ask back, don't guess.** A question about "here" with no location attached asks for one
  (press "use my location"); one asking what lies *around* with no distance asks how far — but
  "the nearest" needs no radius. A tool refusing for want of a category a source requires (a
  shelter is designated per disaster type) is turned into a question unless the category is in
  the person's words or in what the library already returned (the chained question: the
  monument's disaster type), where the model is left to pick it.
* **Honest place answers.** An answer that rests on places with distances ends with them, in
  code: the ones it cites ("matching") and the others seen ("for reference"), each nearest
  first, every distance labelled straight-line; the first match's own text quoted; and that the
  library cannot say whether a place is open, how much room it has or whether the way is safe,
  nor that a place not found does not exist.

The question is read by patterns of how people ask about their surroundings in Japanese and
English, not by lists of known questions.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from chiezo.core.here import Here, Need, need
from chiezo.core.textnorm import language_of

# the person's own place, said outright
_HERE_WORDS = re.compile(
    r"現在地|今いる|いまいる|ここから|ここの近く|この辺|このへん|このあたり|この辺り|近所|"
    r"(?:私|わたし|自分)の(?:近く|周り|まわり|周辺)|"
    r"\bnear (?:me|here|us)\b|\bnearby\b|\baround (?:me|here|us)\b|\bclose to (?:me|here)\b|"
    r"\bwhere i am\b|\bmy (?:location|position)\b",
    re.IGNORECASE,
)
# "the nearest": a radius is not needed
_NEAREST = re.compile(
    r"最寄り|一番近|いちばん近|最も近|もっとも近|\bnearest\b|\bclosest\b", re.IGNORECASE
)
# a distance stated: 2km, 500 m, 2キロ, 1.5 kilometres
_UNIT = r"(km|kilomet(?:er|re)s?|キロメートル|キロ|m(?![a-z])|met(?:er|re)s?|メートル)"
_DISTANCE = re.compile(r"(\d+(?:\.\d+)?)\s*" + _UNIT, re.IGNORECASE)
# what lies around: a radius is needed unless stated or "nearest". A distance alone is no
# sign (the 100 m record, 3776 m tall), nor 以内 after a time (3日以内), nor "around 1900"
_AROUND = re.compile(
    r"\d(?:\.\d+)?\s*"
    + _UNIT
    + r"\s*(?:以内|圏内|の範囲)|周辺|付近|近辺|周り|まわり|近くの|近くに|"
    r"\bwithin\s+(?:\d|a few|a couple)|\bnearby\b|\bin the (?:area|neighbou?rhood)\b",
    re.IGNORECASE,
)
# a named centre instead of "here": 東京駅の近く, 東京駅周辺, 浅草寺から, near Kyoto,
# nearest … to Tokyo, within 2 km of Tokyo Station
_ANCHOR_JA = re.compile(
    r"([^\s、。？?！!]+?)(?:の(?:近く|周辺|付近|周り|まわり|最寄り)|周辺|付近|近辺|から)"
)
_NOT_ANCHOR_JA = re.compile(r"^(?:ここ|現在地|今いる|いまいる|この|その|あの|私|わたし|自分|\d)")
_ANCHOR_EN = re.compile(
    r"\b(?:near|around|close to|next to)\s+(?!me\b|here\b|us\b|my\b|you\b)[a-z]|"
    r"\b(?:nearest|closest)\b[\w\s-]{0,40}?\b(?:to|from)\s+(?!me\b|here\b|us\b|my\b)[a-z]|"
    r"\b\d+(?:\.\d+)?\s*(?:km|m|kilomet\w*|met\w*|miles?)\s+(?:of|from)\s+(?!me\b|here\b)[a-z]",
    re.IGNORECASE,
)


# how a question says where, with the particles that tie it to the rest (without_place_words)
_PLACE_WORDS = re.compile(
    "|".join(
        (
            f"(?:{_HERE_WORDS.pattern})(?:から|の)?",
            r"\d+(?:\.\d+)?\s*" + _UNIT + r"\s*(?:以内|圏内|の範囲)?(?:で|の|に)?",
            f"(?:{_NEAREST.pattern})(?:い|く)?の?",
            r"(?:周辺|付近|近辺|周り|まわり)の?|近くの|近くに",
            r"\bwithin\b|\bin the (?:area|neighbou?rhood)\b",
        )
    ),
    re.IGNORECASE,
)


@dataclass(frozen=True)
class PlaceQuestion:
    """How a question asks about places around the person."""

    about_here: bool  # it asks about where the person is
    nearest: bool  # it asks for the nearest (no radius needed)
    radius_km: float | None  # the distance it states
    around: bool  # it asks what lies around (a radius needed unless nearest)


def read(question: str) -> PlaceQuestion:
    """The question's place reading (full-width digits and units folded first)."""
    text = unicodedata.normalize("NFKC", question)
    nearest = bool(_NEAREST.search(text))
    radius = _radius_km(text)
    around = bool(_AROUND.search(text))
    spatial = nearest or around
    about_here = bool(_HERE_WORDS.search(text)) or (spatial and not _anchored(text))
    return PlaceQuestion(about_here, nearest, radius, around)


def _radius_km(text: str) -> float | None:
    found = _DISTANCE.search(text)
    if found is None:
        return None
    value, unit = float(found.group(1)), found.group(2).lower()
    metres = unit in ("m", "メートル") or unit.startswith("met")
    return value / 1000 if metres else value


def _anchored(text: str) -> bool:
    """The question names a centre of its own (a station, a city) rather than "here"."""
    if _ANCHOR_EN.search(text):
        return True
    return any(not _NOT_ANCHOR_JA.match(m.group(1)) for m in _ANCHOR_JA.finditer(text))


def needs(question: str, location: Here | None, ttl: float) -> list[Need]:
    """What the person must give before a question about here can be looked up: a location
    (none attached, or too old), and a distance where it asks what lies around."""
    asked = read(question)
    if not asked.about_here:
        return []
    lang = language_of(question)
    wanted: list[Need] = []
    if location is None:
        wanted.append(need("location", lang))
    elif location.age() > ttl:
        wanted.append(need("expired", lang, age=int(location.age()), ttl=int(ttl)))
    if asked.around and not asked.nearest and asked.radius_km is None:
        wanted.append(need("radius", lang))
    return wanted


@dataclass(frozen=True)
class Around:
    """Where a question about here is looked up: the attached location, the radius the
    question states (None: nearest first, unbounded) and the kinds its words name where a
    source requires one (``feature=key=value``)."""

    location: Here
    radius_km: float | None
    question: str
    feature: tuple[str, ...] = ()


def around(question: str, location: Here | None) -> Around | None:
    """The searches of a question about here, when a location is attached (answer/rag.py
    searches around it instead of by words alone)."""
    asked = read(question)
    if not asked.about_here or location is None:
        return None
    return Around(location, asked.radius_km, question)


def narrowed(searched: Around, refused: Sequence[Need]) -> Around | None:
    """``searched`` with the kind a source required, where the question names one of its
    choices (「洪水のときの避難場所」); None when only the person can say."""
    folded = unicodedata.normalize("NFKC", searched.question)
    kinds = []
    for item in refused:
        named = [c for c in item.choices if unicodedata.normalize("NFKC", c) in folded]
        if item.what != "feature" or not named:
            return None
        kinds.append(f"{item.key}={named[0]}")
    return replace(searched, feature=(*searched.feature, *kinds))


def without_place_words(question: str) -> str:
    """The question without how it says where (現在地から, 一番近い, 2km以内の, near me): what
    is asked for, for the words side of a search around the person (「一番近い公園は？」 →
    「公園は？」: the place words would match no document)."""
    text = _PLACE_WORDS.sub(" ", unicodedata.normalize("NFKC", question))
    return " ".join(text.split()) or question


def asking(wanted: list[Need]) -> str:
    """The reply that asks for ``wanted``, one line each."""
    return "\n".join(n.ask for n in wanted)


# -- a tool refusing for want of something ------------------------------------------------------


def tool_refusal(text: str) -> dict[str, Any]:
    """The error body of a tool's refusal (the REST error body, maybe after the MCP SDK's
    "Error executing tool NAME: "), or {}."""
    start = text.find("{")
    if start < 0:
        return {}
    try:
        body = json.loads(text[start:])
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def tool_needs(text: str) -> list[dict[str, Any]]:
    """The ``needs`` of a tool's refusal."""
    found = tool_refusal(text).get("needs")
    return [n for n in found if isinstance(n, dict)] if isinstance(found, list) else []


def needs_of(found: list[dict[str, Any]]) -> list[Need]:
    """A tool error's ``needs`` as :class:`Need` values."""
    return [
        Need(str(n.get("what")), str(n.get("ask") or ""), n.get("key"),
             tuple(str(c) for c in n.get("choices") or ()), bool(n.get("expired")))
        for n in found
    ]  # fmt: skip


def to_ask(found: list[dict[str, Any]], known: str, lang: str) -> list[Need]:
    """Which of a tool's ``needs`` only the person can give: a location always; a category
    when none of its choices is in ``known`` (the person's words and what the library
    returned so far) — else the model, shown the choices in the error, picks it."""
    folded = unicodedata.normalize("NFKC", known)
    asked: list[Need] = []
    for item in found:
        what = item.get("what")
        if what == "location":  # asked again in the question's language
            asked.append(need("expired_again" if item.get("expired") else "location", lang))
        elif what == "feature":
            choices = [str(c) for c in item.get("choices") or []]
            if not any(unicodedata.normalize("NFKC", c) in folded for c in choices):
                asked.append(need("feature", lang, choices=choices, key=item.get("key")))
    return asked


# -- what every place answer ends with ----------------------------------------------------------

_WORDS = {
    "matching": ("該当", "Matching"),
    "reference": ("参考", "For reference"),
    "quote": ("原文", "In its own words"),
    "straight": (
        "距離はいずれも直線距離で、道のりや徒歩の距離ではありません。",
        "Every distance is a straight line, not by road or on foot.",
    ),
    "unknown": (
        "開設状況・収容の余力・経路の安全は、この図書館には分かりません。"
        "見つからないことは、存在しないことを意味しません。",
        "Whether a place is open, how much room it has and whether the way there is safe are "
        "not known to this library; a place not found here may still exist.",
    ),
}
QUOTE_CHARS = 160
_HEADER_CHARS = 20  # "伝承内容: …": a column's name before its value, in a place row's body


def _said(word: str, lang: str) -> str:
    ja, en = _WORDS[word]
    return ja if lang == "ja" else en


def place_footer(
    references: list[dict[str, Any]],
    body_of: Callable[[dict[str, Any]], str],
    cited: list[int],
    lang: str,
) -> str:
    """The places an answer rests on, nearest first, grouped into the ones it cites and the
    others seen, each distance labelled straight-line, the first match's own text quoted
    (``body_of``: a reference's document text, from the library), and what the library
    cannot say; "" when no reference has a distance."""
    placed = [r for r in references if isinstance(r.get("distance_km"), int | float)]
    if not placed:
        return ""
    placed.sort(key=lambda r: r["distance_km"])
    matching = [r for r in placed if r["n"] in cited]
    others = [r for r in placed if r["n"] not in cited]
    lines: list[str] = []
    for word, group in (("matching", matching), ("reference", others)):
        if group:
            lines.append(f"{_said(word, lang)}:")
            lines += [
                f"- [{r['n']}] {r['title']} — {_distance(r['distance_km'], lang)}" for r in group
            ]
    if matching:
        quoted = _quote(body_of(matching[0]))
        if quoted:
            lines.append(f"{_said('quote', lang)} [{matching[0]['n']}]: 「{quoted}」")
    lines += [_said("straight", lang), _said("unknown", lang)]
    return "\n".join(lines)


def _distance(km: float, lang: str) -> str:
    shown = f"{km * 1000:.0f} m" if km < 1 else f"{km:.1f} km"
    return f"直線{shown}" if lang == "ja" else f"{shown} straight-line"


def _quote(body: str) -> str:
    """The document's own words: its longest line (a place table's description column, a
    page's first paragraph), without a ``header:`` in front, cut at a sentence end within
    ``QUOTE_CHARS``."""
    lines = [line.strip() for line in body.splitlines() if line.strip()]
    if not lines:
        return ""
    longest = max(lines, key=len)
    head, sep, rest = longest.partition(": ")
    one = " ".join((rest if sep and len(head) <= _HEADER_CHARS else longest).split())
    if len(one) <= QUOTE_CHARS:
        return one
    cut = one[:QUOTE_CHARS]
    end = max(cut.rfind("。"), cut.rfind(". "))
    return cut[: end + 1] if end > QUOTE_CHARS // 3 else cut + "…"
