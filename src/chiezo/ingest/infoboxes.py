"""Infoboxes → labelled facts a person can read, and the numbers among them as typed attributes.

An infobox's parameters are the template's *inputs*: ``nomcommune``, ``sans``, ``x``/``y`` (a
map marker's position), ``人口の時点 = 年月日`` (the placeholder the template's boilerplate
leaves), a hundred ``Jan record high C`` lines. What the reader of the page sees are labels:
人口, 面積, 市長. So each parameter goes through, in order:

* **layout and pictures** (images, maps, sizes, colours, single-letter positions, reference
  slots, the ``-`` rows of data/infobox_labels.tsv) → nothing;
* **placeholders** (``年月日``, ``YYYY-MM-DD``, a value equal to its label) → nothing;
* **pairs** (``leader_title1``/``leader_name1``, ``元首等肩書``/``元首等氏名``,
  ``established_event2``/``established_date2``) → one line, the first value as the label:
  ``President: Abdelmadjid Tebboune``;
* a parameter in data/infobox_labels.tsv → its label in the wiki's language;
* any other Japanese parameter name → itself (jawiki's 基礎情報 templates name their
  parameters by the label they show: 首都, 木, 郵便番号), a trailing number dropped;
* any other ASCII name → on an English wiki its words capitalised (``birth_place`` → Birth
  place, which is how Infobox templates label it); on another wiki nothing: an untranslated
  parameter name is debris there, not a label.

Weather boxes become one line per measure (``平均最高気温 (°C): 1月 7.9, 2月 9.2, … 年 17.0``)
instead of 13 lines each. A number in a population, area, elevation or founding fact is also
kept as a typed attribute (``population=2148271``), so ``filter --attr 'population>=1000000'``
and the answer layer can read it without parsing prose.
"""

from __future__ import annotations

import csv
import functools
import re
from dataclasses import dataclass, field
from importlib import resources

from chiezo.ingest.wikitemplates import DROP

LABELS_FILE = "infobox_labels.tsv"
HIDDEN = "-"  # the label of a parameter that is layout or a picture

# layout, pictures, raw coordinates (read by wikicoords.py) and reference slots
NOISE_KEY = re.compile(
    r"緯度|経度|^lat|^lon|^long|coord|画像|image|img|map|位置図|ロゴ|logo|旗|flag|紋章|seal|"
    r"サイズ|size|width|height|幅|caption|キャプション|alt$|色|colou?r|style|module|embed|"
    r"^name$|名称$|北緯|南緯|東経|西経|^[a-z]$|pushpin|zoom|^dot|marker|position|^float$|"
    r"align|border|perrow|spacing|^bars$|titlebar|collapsed|_ref$|^refs?$|^footnotes?$|"
    r"の説明$|^qid$|^wikidata$",
    re.I,
)
# a template's boilerplate left unfilled: 年月日, YYYY-MM-DD, ?, …
PLACEHOLDER = re.compile(r"^(?:[年月日時点〇○\s/\-.]|YYYY|yyyy|MM|mm|DD|dd|\?|？|…|\.\.\.)+$")
# label / value pairs: (ending of the key whose value is the label, ending of the value's key)
PAIRS = (
    ("肩書", "氏名"),
    ("形態", "年月日"),
    ("種類", "名"),
    ("シンボル名", "歌など"),
    ("title", "name"),
    ("event", "date"),
    ("type", "name"),
    ("_type", ""),  # languages_type = Other languages / languages = …
)
_TRAILING_NUMBER = re.compile(r"\s*\d+$")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uf900-\ufaff]")
_ASCII_WORDS = re.compile(r"^[A-Za-z][A-Za-z0-9 _\-]*$")

WEATHER_TEMPLATES = {"weather box", "気候表"}
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_WEATHER_KEY = re.compile(
    r"^(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|year)\s+(.+?)\s+"
    r"(c|f|mm|cm|inch|in|days|hours|percent|%)?$",
    re.I,
)
# measure → (en, ja), in the order a weather box shows them
WEATHER_MEASURES = {
    "record high": ("Record high", "最高気温記録"),
    "high": ("Average high", "平均最高気温"),
    "mean": ("Daily mean", "日平均気温"),
    "low": ("Average low", "平均最低気温"),
    "record low": ("Record low", "最低気温記録"),
    "precipitation": ("Precipitation", "降水量"),
    "rain": ("Rainfall", "降雨量"),
    "snow": ("Snowfall", "降雪量"),
    "precipitation days": ("Precipitation days", "降水日数"),
    "rain days": ("Rain days", "降雨日数"),
    "snow days": ("Snow days", "降雪日数"),
    "humidity": ("Humidity", "平均湿度"),
    "sun": ("Sunshine hours", "日照時間"),
    "percentsun": ("Percent sunshine", "日照率"),
    "d sun": ("Daily sunshine hours", "日照時間（日平均）"),
    "uv": ("UV index", "紫外線指数"),
    "dew point": ("Dew point", "露点温度"),
}
UNITS = {"c": "°C", "f": "°F", "mm": "mm", "cm": "cm", "inch": "in", "in": "in", "%": "%"}
IMPERIAL = {"f", "inch", "in"}  # shown only when the box gives no metric value


@dataclass(frozen=True)
class Label:
    en: str
    ja: str
    attr: str = ""  # the typed attribute a number in the value is kept as

    def shown(self, language: str) -> str:
        return self.ja if language == "ja" else self.en


@dataclass
class Facts:
    """An infobox read: its lines and the typed attributes among them."""

    lines: list[str] = field(default_factory=list)
    attrs: dict[str, str] = field(default_factory=dict)
    _last: str = ""

    def add(self, label: str, value: str) -> None:
        """A fact; numbered parameters under one label (ancestor, ancestor2…) join one line."""
        if self.lines and label == self._last:
            self.lines[-1] += f", {value}"
        else:
            self.lines.append(f"{label}: {value}")
        self._last = label


@functools.cache
def labels() -> dict[str, Label]:
    text = resources.files("chiezo.ingest").joinpath("data", LABELS_FILE).read_text("utf-8")
    rows = csv.DictReader(
        (line for line in text.splitlines() if line and not line.startswith("#")),
        delimiter="\t",
    )
    return {fold_key(r["key"]): Label(r["en"], r["ja"], r.get("attr") or "") for r in rows}


def fold_key(key: str) -> str:
    """``Population_Total`` → ``population total``: how the label table is keyed."""
    return " ".join(key.replace("_", " ").replace("-", " ").split()).casefold()


def label_of(key: str, language: str) -> tuple[str | None, str]:
    """The label shown for parameter ``key`` (None: not a fact) and its typed attribute."""
    if NOISE_KEY.search(key):
        return None, ""
    folded = fold_key(key)  # iso3 as it is, then ancestor2 as ancestor, timezone1 dst
    known = labels().get(folded) or labels().get(fold_key(_NUMBERED.sub("", key)))
    if known is not None:
        shown = known.shown(language)
        return (None if shown == HIDDEN else shown), known.attr
    if _CJK.search(key):
        return _TRAILING_NUMBER.sub("", key.strip()) or key.strip(), ""
    if language in ("en", "simple", "") and _ASCII_WORDS.match(key):
        return humanised(key) or None, ""
    return None, ""


_CAMEL = re.compile(r"(?<=[a-z])(?=[A-Z])")
_NUMBERED = re.compile(r"(?<=[A-Za-z])\d+(?![0-9A-Za-z])")
_UNIT_END = re.compile(r"\s+(km2|sq mi|km|mi|m|ft|percent)$")
_UNIT_SHOWN = {"km2": "km²", "percent": "%"}


def humanised(key: str) -> str:
    """An English parameter name as Infobox templates label it: ``LargestCity`` → Largest
    city, ``timezone1_DST`` → Timezone DST, ``area_land_sq_mi`` → Area land (sq mi)."""
    words = _CAMEL.sub(" ", _NUMBERED.sub("", key)).replace("_", " ").replace("-", " ")
    words = " ".join(w if w.isupper() and len(w) > 1 else w.lower() for w in words.split())
    unit = _UNIT_END.search(words)
    if unit and unit.start() > 0:
        words = f"{words[: unit.start()]} ({_UNIT_SHOWN.get(unit.group(1), unit.group(1))})"
    return words[:1].upper() + words[1:]


def read_infobox(params: list[tuple[str, str]], language: str) -> Facts:
    """``(parameter, rendered value)`` pairs of one infobox → its facts (see the docstring)."""
    facts = Facts()
    values = {key: value for key, value in params if value}
    used: set[str] = set()
    for key, value in params:
        if key in used or not value:
            continue
        partner = _partner(key, values)
        if partner is not None:
            used.add(partner)
            for shown, fact in _paired(values[key], values[partner]):
                facts.add(shown, fact)
            continue
        label, attr = label_of(key, language)
        value = " ".join(value.split())
        if label is None or is_placeholder(value):
            continue
        facts.add(label, value)
        if attr and attr not in facts.attrs and DROP not in value:
            number = first_number(value, year=attr == "founded")
            if number is not None:
                facts.attrs[attr] = number
    return facts


def is_placeholder(value: str) -> bool:
    return bool(PLACEHOLDER.match(value.strip()))


def _partner(key: str, values: dict[str, str]) -> str | None:
    """The key holding the value for label key ``key`` (``leader_title1`` → ``leader_name1``)."""
    number = re.search(r"\d*$", key).group(0)  # type: ignore[union-attr]
    stem = key[: len(key) - len(number)] if number else key
    for label_end, value_end in PAIRS:
        if stem.casefold().endswith(label_end):
            other = stem[: len(stem) - len(label_end)] + value_end + number
            other = other if value_end else other.rstrip("_ ")
            if other in values and other != key:
                return other
    return None


def _paired(label: str, value: str) -> list[tuple[str, str]]:
    """One ``(label, value)``, or one per line when both list as many (シンボル名/歌など)."""
    labels_, values_ = label.split("\n"), value.split("\n")
    if len(labels_) == 1 or len(labels_) != len(values_):
        labels_, values_ = [label], [value]
    pairs = [
        (" ".join(a.split()), " ".join(b.split())) for a, b in zip(labels_, values_, strict=True)
    ]
    return [(a, b) for a, b in pairs if a and b and not is_placeholder(a) and not is_placeholder(b)]


_NUMBER = re.compile(r"(\d[\d,]*(?:\.\d+)?)\s*(億|万)?")
_RANK = re.compile(r"\s*(?:位|st\b|nd\b|rd\b|th\b)")  # 3位, 24th: a rank, not an amount
_YEAR = re.compile(r"(?<!\d)(\d{3,4})(?:\s*年|(?!\d))")


def first_number(text: str, *, year: bool = False) -> str | None:
    """The first number of ``text`` as a plain decimal: ``市：2,148,271人`` → 2148271,
    ``約1億2,500万人`` → 125000000, ``1889年4月1日`` → 1889 (``year``)."""
    if year:
        match = _YEAR.search(text)
        return match.group(1) if match else None
    match = next((m for m in _NUMBER.finditer(text) if not _RANK.match(text, m.end())), None)
    if not match:
        return None
    value = float(match.group(1).replace(",", ""))
    rest = text[match.end() :]
    if match.group(2) == "億":
        value *= 1e8
        more = _NUMBER.match(rest)  # 1億2,500万
        if more and more.group(2) == "万":
            value += float(more.group(1).replace(",", "")) * 1e4
    elif match.group(2) == "万":
        value *= 1e4
        more = re.match(r"(\d{1,4})(?!\d)", rest)  # 54万7800
        if more:
            value += float(more.group(1))
    return f"{value:.0f}" if value == int(value) else f"{value:g}"


# -- weather boxes --------------------------------------------------------------------------


def read_weather(params: list[tuple[str, str]], language: str) -> list[str]:
    """A weather box as one line per measure, months in order, metric units when given."""
    by_measure: dict[tuple[str, str], dict[str, str]] = {}
    place = ""
    for key, value in params:
        if fold_key(key) == "location":
            place = value
        match = _WEATHER_KEY.match(" ".join(key.split()))
        if not match or not value or not re.match(r"^[−\-+]?\d", value.strip()):
            continue
        month, measure, unit = match.group(1).casefold(), match.group(2).casefold(), match.group(3)
        if measure in WEATHER_MEASURES:
            unit = (unit or "").casefold()
            by_measure.setdefault((measure, unit), {})[month] = value.strip().replace("−", "-")
    metric = {m for m, u in by_measure if u not in IMPERIAL}
    lines = []
    for (measure, unit), months in by_measure.items():
        if unit in IMPERIAL and measure in metric:
            continue
        label = WEATHER_MEASURES[measure][1 if language == "ja" else 0]
        shown = f"{label} ({UNITS.get(unit, unit)})" if unit in UNITS else label
        cells = [f"{_month(m, language)} {months[m]}" for m in (*MONTHS, "year") if m in months]
        lines.append(f"- {shown}: {', '.join(cells)}")
    if not lines:
        return []
    heading = (
        (f"{place}の気候" if place else "気候")
        if language == "ja"
        else (f"Climate of {place}" if place else "Climate")
    )
    return [f"{heading}:", *lines]


def _month(month: str, language: str) -> str:
    if month == "year":
        return "年" if language == "ja" else "Year"
    number = MONTHS.index(month) + 1
    return f"{number}月" if language == "ja" else month.capitalize()
