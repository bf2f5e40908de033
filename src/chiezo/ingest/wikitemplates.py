"""What a template becomes in stored text: its prose, or nothing — never a wrong fact.

A dump has the articles' wikitext, not what their templates compute: ``{{formatnum:
{{自治体面積/岩手県|岩手県}}}}`` is an area in square kilometres on the web page, and the
article text around it says so (「面積は…km2で」). Rendering such a template as its parameter
values — what the renderer did before — stored 「面積は岩手県km2で」: a false statement a model
then repeats. So templates fall in three groups:

* **prose** templates render their text: language tags and ruby (the words), nihongo (the
  name and its Japanese form), convert (the value and its unit, not the conversion), dates
  (``{{birth date|1930|9|23}}`` → 1930-09-23, on jawiki 1930年9月23日), inline lists;
* **data** templates — what the dump cannot compute: a parser function or magic word
  (``#expr``, ``#invoke``, ``CURRENTYEAR``), a template nested in ``formatnum``, a lookup
  subpage (``自治体人口/岩手県``), Wikidata, ages (they change with today's date), and any
  template standing where a number must be (before 平方キロメートル, km2, 人…) that does not
  render to a number — become :data:`DROP`, and the *sentence* holding it is dropped
  (``drop_marked``): better a missing sentence than a false one;
* everything else renders its **positional** parameters only: named ones are options and
  metadata (``x=147|y=145``, ``section=``, ``date=``), not prose.
"""

from __future__ import annotations

import re

DROP = "\x01"  # marks text whose sentence must go (see drop_marked)

PARSER_DATA = (
    "#expr",
    "#invoke",
    "#time",
    "#property",
    "#statements",
    "#if",
    "#ifeq",
    "#ifexpr",
    "#iferror",
    "#switch",
    "padleft",
    "padright",
    "#timel",
)
MAGIC_DATA = re.compile(r"^(?:current|local)\w*$|^numberof\w+$|^revision\w+$", re.I)
DATA_TEMPLATES = {
    "wd",
    "wikidata",
    "age",
    "age in years",
    "age in years and days",
    "age in days",
    "年数",
    "満年齢",
    "inflation",
    "formatprice",
}
LIST_TEMPLATES = {
    "bulleted list",
    "unbulleted list",
    "ubl",
    "plainlist",
    "flatlist",
    "hlist",
    "enum",
    "ordered list",
    "collapsible list",
    "nowrap",
    "nobr",
    "small",
    "big",
    "smaller",
    "larger",
}
DATE_TEMPLATES = re.compile(
    r"(?:birth|death|start|end|film|release)[ -]date|^dts$|^date$"
    r"|生年月日|没年月日|死亡年月日|年月日",
    re.I,
)
# a date and the age at it: the other date is only there to compute the age
_WITH_AGE = re.compile(r"and age|年齢", re.I)
PROSE_KEYS = {"text", "quote", "content"}  # named parameters that hold prose
# what only ever follows a number: a template before it must render to one
UNIT_AFTER = re.compile(
    r"^\s*(?:\[\[[^|\]]*\|)?\s*(?:平方キロメートル|平方メートル|平方キロ|ヘクタール|km|m<sup>|"
    r"km2|km²|㎢|メートル|キロメートル|人|世帯|戸|円|ドル|%|パーセント|ha\b|sq\b|square|"
    r"acres?|mi\b|ft\b|kg\b|t\b)"
)
_NUMERIC = re.compile(r"^[\d０-９,.，．\s〜~–\-約およそ百千万億兆]+$")
_CONVERT_UNITS = {
    "sqmi": "sq mi",
    "km2": "km2",
    "e6acre": "million acres",
    "acre": "acres",
    "e6sqmi": "million sq mi",
    "e6km2": "million km2",
    "ft": "ft",
    "m": "m",
    "mi": "mi",
    "km": "km",
    "in": "in",
    "cm": "cm",
    "lb": "lb",
    "kg": "kg",
    "F": "°F",
    "C": "°C",
    "sqft": "sq ft",
    "m2": "m2",
    "ha": "ha",
}
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]  # noqa: SIM905 - a word list reads better as text


def is_numeric(text: str) -> bool:
    return bool(text.strip()) and bool(_NUMERIC.match(text.strip()))


def parser_function(head: str, argument: str) -> str:
    """A parser function or magic word (``head`` folded): what it renders to here."""
    if head in ("formatnum",):
        return argument if is_numeric(argument) else DROP
    if head in ("lc", "uc", "lcfirst", "ucfirst"):
        return argument
    if head in PARSER_DATA:
        return DROP
    return ""  # #tag:ref, #language, DISPLAYTITLE and the like: not prose


def is_data(name: str) -> bool:
    """A template whose output is data the dump cannot compute."""
    return "/" in name or name in DATA_TEMPLATES or bool(MAGIC_DATA.match(name))


def is_prose(name: str) -> bool:
    """A template :func:`prose` shapes (convert, nihongo, inline lists, dates)."""
    return (
        name.startswith(("convert", "nihongo"))
        or name == "cvt"
        or name in LIST_TEMPLATES
        or bool(DATE_TEMPLATES.search(name))
    )


def prose(name: str, values: list[str], language: str) -> str | None:
    """The text of a known prose template from its positional values, or None when ``name``
    is not one."""
    if name.startswith("convert") or name in ("cvt",):
        return _convert(values)
    if name.startswith("nihongo"):
        return _nihongo(values)
    if name in LIST_TEMPLATES:
        return ("、" if language == "ja" else ", ").join(values)
    if DATE_TEMPLATES.search(name):
        if _WITH_AGE.search(name) and values and not values[0].isdigit():
            return values[0]  # "22 November 1963|26 July 1894": the second date is for the age
        return _date(values, language)
    return None


def _convert(values: list[str]) -> str:
    """``{{convert|333|m|ft}}`` → 333 m; ``{{convert|1|to|2|km}}`` → 1 to 2 km: the value as
    written in the article, never the computed conversion."""
    if not values:
        return ""
    number, rest = values[0], values[1:]
    if len(rest) >= 2 and rest[0] in ("to", "-", "–", "and", "or", "x", "by", "+/-"):
        number, rest = f"{number} {rest[0]} {rest[1]}", rest[2:]
    unit = _CONVERT_UNITS.get(rest[0], rest[0]) if rest else ""
    return f"{number} {unit}".strip()


def _nihongo(values: list[str]) -> str:
    """``{{nihongo|Tokyo Tower|東京タワー|Tōkyō tawā}}`` → Tokyo Tower (東京タワー)."""
    if not values:
        return ""
    if len(values) == 1:
        return values[0]
    return f"{values[0]} ({values[1]})"


def _date(values: list[str], language: str) -> str:
    """Year, month, day parameters as a date; anything else as written."""
    numbers = [v for v in values if v.isdigit()][:3]
    if len(numbers) < 2 or not 1 <= int(numbers[1]) <= 12:
        return " ".join(values)
    year, month = int(numbers[0]), int(numbers[1])
    day = int(numbers[2]) if len(numbers) == 3 and 1 <= int(numbers[2]) <= 31 else None
    if language == "ja":
        return f"{year}年{month}月" + (f"{day}日" if day else "")
    return f"{day} {_MONTHS[month - 1]} {year}" if day else f"{_MONTHS[month - 1]} {year}"


# -- dropping what cannot be said --------------------------------------------------------------

_SENTENCES = re.compile(r"[^。！？!?\n]*?(?:[。！？]|[.!?](?=\s|$)|$)")


def drop_marked(text: str) -> str:
    """``text`` without the sentences holding a :data:`DROP` mark (a heading only loses the
    mark; an infobox ``key: value`` line goes whole)."""
    if DROP not in text:
        return text
    lines = []
    for line in text.split("\n"):
        if DROP not in line:
            lines.append(line)
        elif line.lstrip().startswith("#"):
            lines.append(line.replace(DROP, ""))
        else:
            kept = "".join(s for s in _SENTENCES.findall(line) if DROP not in s)
            if kept.strip() and not kept.rstrip().endswith((":", "：")):
                lines.append(kept.rstrip())
    return "\n".join(lines)
