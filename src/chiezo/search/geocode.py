"""Geocoding from the library's own data: an address or a place name → a point, found in the
place sources (GeoNames, OSM, the user's place tables: any source with ``doc_points``), with no
network.

    geocode(sources, address, *, limit=5) -> GeocodeResult
    GeocodeResult: query, candidates (tuple of Candidate, best first; ``.best``), reason ("" when
        there are candidates, else why not); ``to_dict()``
    Candidate: lat, lon, level, source, doc_id, title, matched, unmatched, how, within
    address_key(text) -> str: a Japanese address as compared (香川県高松市番町一丁目10番16号 and
        高松市番町1-10-16 are one)

``level`` says how precise the point is: ``prefecture`` (a first-level area: prefecture, state,
province, region; a country too), ``municipality`` (city, ward, town, village), ``district``
(町名, 丁目, suburb, quarter) or ``exact`` (the place itself: a place-table row whose address is
the input, or a place that is no area whose name is — with ``unmatched`` empty, the whole
input). ``how``: ``title``, ``alias``, ``address`` (a place table's address column) or ``area``:
no document is the area itself, so the most popular one lying in it stands for it (高松市 for
香川県 in GeoNames' cities, a shop for 綾川町 in a place table). ``matched``/``unmatched``: the
parts of the input (NFKC, and in Japanese without spaces or postcode) used and left over;
``within``: the place of the less specific part this one was found in.

**A chain of parts.** The input is split into parts, least specific first, and each part is
looked up inside what was found for the one before:

* Japanese (kana or kanji, no comma): the prefecture by the 47 names of
  ``ingest/data/jp_prefectures.tsv``; a county (郡) skipped; the municipality ending in
  市/区/町/村 — every split within ``MUNICIPAL_CHARS`` is tried, longest first, and the first some
  source knows wins (四日市市 whole; 高松市番町 → 高松市); a ward (区) after a city; then the
  district up to its 丁目 or first digit (kanji numerals read), then the numbers. A town or
  village with neither prefecture nor county before it must be known as a municipality (番町 in
  番町一丁目 is no town). A municipality no source knows ends the chain: nothing is looked up
  inside it by name, though a place table's addresses still are.
* Otherwise (any script) a list: parts split at commas, most specific first as written
  ("Kamppi, Helsinki", "浅草, 台東区, 東京都"); one part of several words is looked up whole
  first (New York), then split in two (Springfield Illinois).

A part that nothing matches ends the chain once something has matched (the answer is what was
found, the rest ``unmatched``); before that it is skipped (an unknown country).

**Indexes only.** Names through ``titles`` (``normalise_title``, and ``fold_name`` for accents:
Kyōto, ＫＹＯＴＯ, kyoto), the name's index range walked in doc_id (= popularity) order and capped
at ``SCAN`` entries; areas through ``doc_attrs`` (area, area_alias) by exact stored spelling —
as typed, NFKC, Capitalised, and a prefecture's table names (folding every stored value would
read them all); addresses by prefix ranges of the place tables' address columns (found by the
places kind's own header test): the municipality as the input writes it and as the table does
(read off ``WRITTEN_ROWS`` of its rows: 綾歌郡綾川町 for 綾川町), the district, then the 丁目
and block in kanji, ASCII and full-width forms, compared after ``address_key``. A name borne by
more than ``SCAN`` documents (a chain's stores) is read from the other side: the documents of
the parent's area, each tested with one seek in ``titles``. Nothing reads rows no index range
led to, so the cost follows the matches, not the size of the source.

**Inside.** A more specific place must lie inside one of the (up to ``PARENTS``) places found
for the part before: its ``area``/``area_alias`` names that place (strong), or its point is
within ``RADIUS_KM`` of it (weak, for sources without areas or with areas of another level:
300 km of a prefecture's point for Hokkaido's sake, 40 km of a municipality's), looked for first
within a quarter of that. A place whose areas name another prefecture than its parent's is never
inside it, however near (Koga in Ibaraki, not near 茨木市 of Osaka). The test is pushed into
the SQL of the walk (the point at hand, then an index seek), so a name shared by thousands (本町)
still finds the one in the right city.

**Order.** More of the input matched first; then a place of the name before a stand-in (an
area's, an address row's); inside by area before by distance; nearer (to the km); inside the
likelier parent; an area before a point of interest of the same name (Helsinki the city before
Helsinki the station); fewer levels skipped (in Iwate, Sawafuji the town before a Sawafuji
district); title before alias; then popularity: ``rank_score`` across sources (0..1 each),
doc_id within one, the order of ``sources`` last.

Bad input never raises, but for what every request refuses anyway: empty, or longer than
``MAX_TEXT_CHARS`` (BadQuery). Text without a letter (digits, emoji, punctuation) and lone
surrogates give an empty result with the reason, before any lookup.

Measured (bench/geocode_scale.py, 2 CPUs: 1M place documents in two sources, a GeoNames-like
gazetteer of 58,575 and a place table of 941,425 with addresses; 14 classes of input, 100
geocodes each; 340 of 340 answers right): p99 ≤ 1 ms for a prefecture, a municipality (in its
prefecture, alone, in Latin letters) and a shop's name; 1.6 ms for 1,000 kanji of nonsense;
3.4 ms for a chain's name in a city (80k stores, read from the city's side); 5.6–6.7 ms for a
district with 丁目, a full address (exact) or one with a number no row has (district); 9.9 ms
worst, a district named 本町 in a prefecture and city (1,100 of them, the nearest to the city
taken). The floor, the one exact-title seek ``browse.find_doc`` makes, is 0.01–0.03 ms (9 ms
p99 for a name of 80k documents, whose ORDER BY is_alias sorts them all); the naive plan for
an address, LIKE over the address column, 110–180 ms.
"""

from __future__ import annotations

import functools
import math
import re
import unicodedata
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from chiezo.core.errors import BadQuery
from chiezo.core.textnorm import normalise_title
from chiezo.core.validation import MAX_TEXT_CHARS
from chiezo.ingest.places import is_address_header
from chiezo.search.filters import EARTH_KM, fold_name, haversine_km
from chiezo.store.library import Source

LEVELS = ("prefecture", "municipality", "district", "exact")
AREA_LEVELS = LEVELS[:3]
MAX_LIMIT = 50
SCAN = 2000  # index entries one spelling may walk per source: a chain store's name, not more
NEAR_SHARE = 0.25  # of RADIUS_KM looked in first: the nearest places of a name are the likeliest
KM_STEP = 1.0  # distances that differ by less rank alike (then popularity decides)
NEAR_ROWS = 20  # places of one name read inside parents, for the nearest to be among them
# places of the less specific part a more specific one may lie in: "Minamiokadori, Nohashi"
# has four 野橋 (two cities, two districts) to look in
PARENTS = 20
RADIUS_KM = {"prefecture": 300.0, "municipality": 40.0, "district": 5.0, "exact": 2.0}
AREA_SCAN = 200  # documents of an area tried for one inside the parent to stand for it
ADDRESS_ROWS = 200  # rows of one address prefix compared for the exact address (one block)
STAND_IN_ROWS = 20  # rows read for one to stand for a district or 丁目
WRITTEN_ROWS = 20  # rows of a municipality read for how a table writes its name
MUNICIPAL_CHARS = 10  # a municipality's name and suffix: つくばみらい市, 南アルプス市
MAX_WORDS = 6  # a Latin part of more words is looked up whole only
MAX_PARTS = 6  # comma-separated parts looked up: street, district, city, region, country…
AREA_ATTRS = ("area", "area_alias")
KIND_ATTRS = ("feature", "admin_level")
HOW_ORDER = {"title": 0, "address": 0, "alias": 1, "area": 2}


# -- results --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    lat: float
    lon: float
    level: str  # one of LEVELS
    source: str
    doc_id: int
    title: str
    matched: str  # the part of the (NFKC-normalised) input this point answers
    unmatched: str  # what of the input was not used
    how: str  # title, alias, area, address
    within: str = ""  # the place of the less specific part it lies in ("" for none)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class GeocodeResult:
    query: str
    candidates: tuple[Candidate, ...] = ()
    reason: str = ""  # why there is no candidate; "" when there are

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "candidates": [c.to_dict() for c in self.candidates],
            "reason": self.reason,
        }


def geocode(sources: Sequence[Source], address: str, *, limit: int = 5) -> GeocodeResult:
    """The places in ``sources`` that ``address`` names, most precise first (see module)."""
    text = _clean(address)
    limit = max(1, min(int(limit), MAX_LIMIT))
    if _SURROGATE.search(text):
        return GeocodeResult(text, reason="the input is not valid Unicode (a lone surrogate)")
    if not any(unicodedata.category(c).startswith("L") for c in text):
        return GeocodeResult(text, reason="the input has no letters, so it names no place")
    places = [_Src(s, i) for i, s in enumerate(sources) if _has_points(s)]
    if not places:
        return GeocodeResult(text, reason="none of the sources has places with coordinates")
    query = _Query(text, places, limit)
    # commas make a list of names in any script (浅草, 台東区); else kana or kanji an address
    listed = _SEPARATOR.search(text) or not _JAPANESE.search(text)
    hits = _latin(query) if listed else _japanese(query)
    candidates = _candidates(query, hits)
    if not candidates:
        names = ", ".join(s.source.name for s in places)
        return GeocodeResult(text, reason=f"no place in {names} matches {text!r}")
    return GeocodeResult(text, tuple(candidates))


_SURROGATE = re.compile("[\ud800-\udfff]")
_SEPARATOR = re.compile(r"[,、，;；]")


def _clean(address: str) -> str:
    """NFKC with single spaces; empty and over-long input refused as every request's is."""
    if not isinstance(address, str) or not address.strip():
        raise BadQuery("give an address or a place name to geocode")
    if len(address) > MAX_TEXT_CHARS:
        raise BadQuery(
            f"the address is {len(address)} characters long; the limit is {MAX_TEXT_CHARS}"
        )
    if _SURROGATE.search(address):
        return address  # NFKC cannot read it; geocode() says why
    return " ".join(unicodedata.normalize("NFKC", address).split())


def _has_points(source: Source) -> bool:
    count = source.meta.get("point_count")
    if count not in (None, ""):
        return int(count) > 0
    return source.conn.execute("SELECT 1 FROM doc_points LIMIT 1").fetchone() is not None


# -- the query and its parts ----------------------------------------------------------------------


class _Src:
    """A place source with what the lookups need of it, read once per call."""

    def __init__(self, source: Source, order: int):
        self.source, self.order = source, order
        attributes = set(source.attributes)
        self.areas = tuple(a for a in AREA_ATTRS if a in attributes)
        wanted = [a for a in (*KIND_ATTRS, *AREA_ATTRS) if a in attributes]
        self.attrs_sql = (
            "(SELECT group_concat(x.name || char(30) || x.value, char(31)) FROM doc_attrs x "
            f"WHERE x.doc_id = d.doc_id AND x.name IN ({_quoted(wanted)}))"
            if wanted
            else "NULL"
        )
        self.addresses = tuple(sorted(a for a in attributes if _is_address(a)))


def _quoted(names: Iterable[str]) -> str:
    return ",".join("'" + n.replace("'", "''") + "'" for n in names)


@dataclass
class _Query:
    text: str
    sources: list[_Src]
    limit: int
    sep: str = ""  # how matched parts are joined back: "" in Japanese, ", " in Latin


@dataclass(frozen=True)
class _Part:
    start: int
    end: int
    level: str | None = None  # what the address form makes it; None: a bare name
    spellings: tuple[str, ...] = ()  # looked up in titles and aliases
    areas: tuple[str, ...] = ()  # looked up as stored area values
    kinds: frozenset | None = None  # the kinds of place its names may find (None: any)
    prefecture: str = ""  # the table's code, for a prefecture part


@dataclass
class _Hit:
    src: _Src
    doc_id: int
    title: str
    lat: float | None
    lon: float | None
    rank: float
    how: str
    kind: str | None  # what its own feature says it is (None: unknown)
    areas: tuple[str, ...]
    part: _Part
    parent: _Hit | None = None
    parent_rank: int = 0  # its parent's place among the parents: inside the likelier first
    inside: int = 0  # 2 by area, 1 by distance, 0 not checked
    km: float = 0.0  # from its parent, when inside by distance
    area: str = ""  # for how="area": the area value it stands for

    @property
    def chain(self) -> list[_Hit]:
        hits: list[_Hit] = []
        hit: _Hit | None = self
        while hit is not None:
            hits.append(hit)
            hit = hit.parent
        return hits

    @functools.cached_property
    def names(self) -> tuple[str, ...]:
        """What a place inside this one has in its area: the part's spellings, its title."""
        title = _PARENTHESIS.sub("", self.title)
        own = (self.area,) if self.area else ()
        return tuple(dict.fromkeys((*own, *self.part.areas, *self.part.spellings, title)))

    @functools.cached_property
    def folded_names(self) -> frozenset[str]:
        return frozenset(map(_fold, self.names))

    @functools.cached_property
    def prefectures(self) -> frozenset[str]:
        """The prefectures it lies in (its areas, else those of the place it was found in:
        a shop standing for 東豊市 found in 神奈川県) or is (a prefecture part's)."""
        own = _prefecture_codes(self.areas) | ({self.part.prefecture} - {""})
        if not own and self.parent is not None:
            return self.parent.prefectures
        return frozenset(own)

    @property
    def scale(self) -> str:
        """The level its size is judged by, for the distance a place inside may be."""
        if self.how == "area":
            return self.part.level or _area_level(self.area)
        if self.kind in LEVELS:
            return self.kind
        return self.part.level or "municipality"


_PARENTHESIS = re.compile(r"\s*\([^)]*\)$")  # GeoNames' "府中市 (東京都, JP)"


def _virtual(query: _Query, part: _Part) -> _Hit:
    """A prefecture no source has a document in: a parent by its names only."""
    return _Hit(query.sources[0], 0, _text(query, part), None, None, 0.0, "area", None, (), part)


def _text(query: _Query, part: _Part) -> str:
    return query.text[part.start : part.end]


# -- Japanese addresses ---------------------------------------------------------------------------

_JAPANESE = re.compile(r"[\u3041-\u30ff\u3400-\u4dbf\u4e00-\u9fff々〆ヶ]")
_POSTCODE = re.compile(r"^〒?\s*\d{3}-?\d{4}\s*")
_COUNTY = re.compile(r"[^\d市区町村郡]{1,5}郡(?!市)")  # 綾歌郡; 小郡市 is a city
_KANJI_DIGITS = "〇一二三四五六七八九"
# a run of numerals tried only from its start, and never given back: 十 × 999 is one linear
# scan, not a quadratic one
_KANJI_NUMERAL = f"(?<![{_KANJI_DIGITS}十百千])[{_KANJI_DIGITS}十百千]++"
_CHOME = re.compile(rf"((?<![0-9])[0-9]++|{_KANJI_NUMERAL})丁目")
_DIGIT = re.compile(r"[0-9]")


@dataclass(frozen=True)
class _Prefecture:
    code: str
    names: tuple[str, ...]  # Japanese, short, English

    @property
    def japanese(self) -> str:
        return self.names[0]


@functools.cache
def _prefectures() -> tuple[_Prefecture, ...]:
    # imported here: geocoding Latin names need not load the GeoNames kind
    from chiezo.ingest.geonames import jp_prefectures

    return tuple(
        _Prefecture(code, tuple(n for n in (p.japanese, p.short, p.english) if n))
        for code, p in jp_prefectures().items()
    )


@functools.cache
def _prefecture_by_name() -> dict[str, _Prefecture]:
    """Any of a prefecture's names, folded → the prefecture."""
    return {fold_name(n): p for p in _prefectures() for n in p.names}


def _prefecture_codes(names: Iterable[str]) -> set[str]:
    index = _prefecture_by_name()
    return {index[f].code for f in map(_fold, names) if f in index}


@functools.lru_cache(maxsize=4096)
def _fold(name: str) -> str:
    """``fold_name``, remembered: the same area names are compared row after row."""
    return fold_name(name)


def _japanese(query: _Query) -> list[_Hit]:
    text = "".join(query.text.split())
    text = _POSTCODE.sub("", text) or text
    query.text = text
    finals: list[_Hit] = []
    parents: list[_Hit] = []
    pos = 0
    prefecture = next((p for p in _prefectures() if text.startswith(p.japanese)), None)
    if prefecture:
        part = _prefecture_part(prefecture)
        finals = _lookup(query, part, [])
        parents, pos = finals or [_virtual(query, part)], part.end
    county = _COUNTY.match(text, pos)
    after_county = county.end() if county else pos
    alive = True
    municipality = _municipality(query, pos, after_county, bool(prefecture or county), parents)
    if municipality is not None:
        found, end = municipality
        if found:
            parents = finals = found
            pos = end
            ward = _ward(query, end, parents) if text[end - 1] == "市" else None
            if ward:
                parents = finals = ward[0]
                pos = ward[1]
        else:
            alive, pos = False, end  # a municipality no source knows: nothing inside it either
    district = _district(text, pos)
    named: list[_Hit] = []
    if district and district.name_end > district.start and alive:
        named = _lookup(query, _district_part(query, district, whole=pos == 0), parents)
        finals = named or finals
    rows = _address_hits(query, after_county, district, parents)
    _corroborate(named, rows)
    finals += rows
    if not any(h.part.start == 0 and h.part.end == len(text) for h in finals):
        finals += _lookup(query, _Part(0, len(text), spellings=(text,), areas=(text,)), [])
    return finals


def _prefecture_part(prefecture: _Prefecture) -> _Part:
    """Found as a prefecture (GeoNames' ADM1) or a place with no kind (an article), or by
    the area's stand-in; never as the city of the same name (Tokyo's PPLC is 東京都 too)."""
    kinds = frozenset({"prefecture", None})
    end = len(prefecture.japanese)
    spellings = (prefecture.japanese,)
    return _Part(0, end, "prefecture", spellings, prefecture.names, kinds, prefecture.code)


def _corroborate(named: list[_Hit], rows: list[_Hit]) -> None:
    """Of the places named like the district, inside the municipality by distance only, the
    nearest to a place-table row whose address lies in that district (and whose area says it
    is in the municipality) comes first: of two 中央 near 南富市, the one its addresses are in."""
    row = next((r for r in rows if r.inside == 2), None)
    if row is None:
        return
    for hit in named:
        if hit.inside == 1:
            hit.km = _km(hit, row)
    named.sort(key=_rank_key)


def _municipality(
    query: _Query, start: int, name_start: int, placed: bool, parents: list[_Hit]
) -> tuple[list[_Hit], int] | None:
    """(the places found, where the municipality ends), trying each split longest first; (no
    places, the likeliest end) when no source knows any; None when nothing ends like one."""
    text = query.text
    ends = [
        i + 1
        for i in range(name_start + 1, min(len(text), name_start + MUNICIPAL_CHARS))
        if text[i] in "市区町村"
    ]
    for end in reversed(ends):
        name = text[name_start:end]
        # a town or village must be known as one where no prefecture or county says so
        loose = placed or text[end - 1] in "市区"
        kinds = (
            frozenset({"municipality", "district", None}) if loose else frozenset({"municipality"})
        )
        part = _Part(start, end, "municipality", _unique(name, text[start:end]), (name,), kinds)
        found = _lookup(query, part, parents)
        if found:
            return found, end
    likely = [e for e in ends if _likely_end(text, e, placed)]
    return ([], likely[0]) if likely else None


def _likely_end(text: str, end: int, placed: bool) -> bool:
    """The rules ``ingest/places.address_areas`` reads areas by: 市 not the first of 四日市市 or
    of 市場, a ward/town/village not the first of 大町町, and a town or village only after a
    prefecture or a county."""
    suffix, following = text[end - 1], text[end : end + 1]
    if suffix == "市":
        return following not in ("市", "場") or not following
    if not (placed or suffix == "区"):
        return False
    return not following or following not in ("区", "町", "村")


def _ward(query: _Query, start: int, parents: list[_Hit]) -> tuple[list[_Hit], int] | None:
    """A ward of a designated city (横浜市中区): a municipality inside the city."""
    text = query.text
    for end in range(min(len(text), start + 6), start + 1, -1):
        if text[end - 1] != "区":
            continue
        name = text[start:end]
        part = _Part(start, end, "municipality", (name,), (name,))
        found = _lookup(query, part, parents)
        if found:
            return found, end
    return None


@dataclass(frozen=True)
class _District:
    start: int
    name_end: int  # the name: 番町
    end: int  # with its 丁目 when written: 番町一丁目
    chome: int | None
    numbers: tuple[str, ...]  # the numbers after them: 10, 16 of 番町一丁目10-16


_NUMBER = re.compile(r"[0-9]+")


def _district(text: str, start: int) -> _District | None:
    chome = _CHOME.search(text, start)
    digit = _DIGIT.search(text, start)
    if chome and (digit is None or chome.start() <= digit.start()):
        numbers = tuple(_NUMBER.findall(text, chome.end()))
        return _District(start, chome.start(), chome.end(), _arabic(chome.group(1)), numbers)
    name_end = digit.start() if digit else len(text)
    if name_end <= start and not digit:
        return None
    return _District(start, name_end, name_end, None, tuple(_NUMBER.findall(text, name_end)))


def _district_part(query: _Query, district: _District, whole: bool) -> _Part:
    name = query.text[district.start : district.name_end]
    bare = re.sub(r"^大?字", "", name)
    spellings = [name, bare]
    if district.chome is not None:
        spellings += [f"{bare}{_kanji(district.chome)}丁目", f"{bare}{district.chome}丁目"]
    # the whole input as one name (浅草寺, ゆめタウン高松) is a name, not a district
    level = None if whole and district.end == len(query.text) else "district"
    return _Part(district.start, district.end, level, _unique(*spellings), _unique(name, bare))


def _unique(*names: str) -> tuple[str, ...]:
    return tuple(n for n in dict.fromkeys(names) if n)


# -- numbers ---------------------------------------------------------------------------------------


def _arabic(numeral: str) -> int:
    """一 → 1, 十二 → 12, 二〇 → 20, 百五 → 105, 12 → 12."""
    if numeral.isdigit():
        return int(numeral)
    if not any(c in numeral for c in "十百千"):
        return int("".join(str(_KANJI_DIGITS.index(c)) for c in numeral))
    total, digit = 0, 0
    for c in numeral:
        if c in _KANJI_DIGITS:
            digit = _KANJI_DIGITS.index(c)
        else:
            total += (digit or 1) * {"十": 10, "百": 100, "千": 1000}[c]
            digit = 0
    return total + digit


def _kanji(number: int) -> str:
    """12 → 十二: how 丁目 are written in words."""
    if number <= 0 or number >= 100:
        return "".join(_KANJI_DIGITS[int(c)] for c in str(number))
    tens, ones = divmod(number, 10)
    return ("" if tens == 0 else ("十" if tens == 1 else _KANJI_DIGITS[tens] + "十")) + (
        _KANJI_DIGITS[ones] if ones else ""
    )


_WIDE = str.maketrans("0123456789-", "０１２３４５６７８９－")
_DASH = re.compile(r"(?<=\d)[‐‑‒–—―−ーｰ－](?=\d)")
_NUMBER_WORD = re.compile(rf"{_KANJI_NUMERAL}(?=丁目|番地|番|号|地割)")
_NUMBER_MARK = re.compile(r"(?<=\d)(?:丁目|番地|番|号|の|地割)")
_GA = re.compile(r"(?<=[\u4e00-\u9fff])[ヶケがガ](?=[\u4e00-\u9fff])")  # 霞ヶ関, 霞が関


def address_key(text: str) -> str:
    """An address as compared: NFKC, no spaces, no postcode, prefecture or county, kanji
    numerals as digits, 丁目/番地/番/号 and dashes as one ``-``, 大字 gone, ヶ/が one:
    香川県高松市番町一丁目10番16号 and 高松市番町1-10-16 are both 高松市番町1-10-16."""
    s = "".join(unicodedata.normalize("NFKC", text).split())
    s = _POSTCODE.sub("", s)
    prefecture = next((p.japanese for p in _prefectures() if s.startswith(p.japanese)), "")
    s = s[len(prefecture) :]
    county = _COUNTY.match(s)
    s = s[county.end() :] if county else s
    s = s.replace("大字", "")
    s = _NUMBER_WORD.sub(lambda m: str(_arabic(m.group(0))), s)
    s = _DASH.sub("-", s)
    s = _NUMBER_MARK.sub("-", s)
    s = re.sub(r"-+", "-", s)
    s = re.sub(r"-(?=\D|$)", "", s)
    return _GA.sub("ケ", s)


_NUMERIC = set("0123456789-")


def _address_end(keys: tuple[str, str, str], stored: str, district: _District) -> tuple[int, bool]:
    """(how much of the input an address answers, whether it is the input's own address).
    ``keys`` are ``address_key`` of the input whole, to its 丁目 and to its district name;
    ``stored`` is one too. The same address, or it and then a building (10-16財団法人…): all
    of it; the same 丁目: the district with it; the same district: its name; else 0 —
    高松市… does not lie in a district 高松, nor 番町10-… in 番町一丁目."""
    asked, chome, name = keys
    if stored == asked or (
        stored.startswith(asked) and asked[-1:].isdigit() and stored[len(asked)] not in _NUMERIC
    ):
        return len(asked), True
    after = stored[len(chome) : len(chome) + 1]
    if district.chome is not None and stored.startswith(chome) and not after.isdigit():
        return district.end, False
    after = stored[len(name) : len(name) + 1]
    if stored.startswith(name) and (not after or after.isdigit()):
        return district.name_end, False
    return 0, False


_NUMBER_END = re.compile(r"[0-9](?:号|番地|番)?(?=[^0-9]*$)")


def _numbered_end(text: str, district: _District) -> int:
    """Where the address ends in the input: after its last number (and 号), before a building
    or a name the row need not share (…10-16 セントラルパーククリニック)."""
    last = _NUMBER_END.search(text, district.name_end) if district.numbers else None
    return last.end() if last else len(text)


def _common(a: str, b: str) -> int:
    common = 0
    for x, y in zip(a, b, strict=False):
        if x != y:
            break
        common += 1
    return common


def _is_address(name: str) -> bool:
    # the places kind's own test of an address header, so both read one column
    return name not in AREA_ATTRS and is_address_header(name)


def _address_hits(
    query: _Query, after_county: int, district: _District | None, parents: list[_Hit]
) -> list[_Hit]:
    """Rows of place tables whose address column begins as the input does, by prefix ranges:
    the rows of the input's block (番町一丁目10) compared for the ``exact`` address; failing
    that, a row of its 丁目, else of its district, stands for the ``district``."""
    if district is None or not any(s.addresses for s in query.sources):
        return []
    text = query.text
    heads = _heads(query, after_county, district.start, parents)
    name = text[district.start : district.name_end]
    municipality = text[after_county : district.start]
    hits: list[_Hit] = []
    for src in query.sources:
        for column in src.addresses:
            starts = [h + name for h in _written_heads(src, column, municipality, heads)]
            rows: list[tuple] = []
            for forms, most in _number_forms(district):
                rows = _address_rows(src, column, [s + f for s in starts for f in forms], most)
                if rows:
                    break
            hits += _address_hit(query, src, rows, district, parents)
    return hits


def _heads(query: _Query, after_county: int, start: int, parents: list[_Hit]) -> list[str]:
    """The municipality as an address may write it: with or without prefecture and county;
    with the prefecture of the municipality found when the input has none."""
    text = query.text
    prefecture = next((p for p in _prefectures() if text.startswith(p.japanese)), None)
    after_prefecture = len(prefecture.japanese) if prefecture else 0
    forms = [text[:start], text[after_prefecture:start], text[after_county:start]]
    if prefecture is None:
        codes = _prefecture_codes(a for p in parents[:1] for a in p.areas)
        forms += [p.japanese + text[:start] for p in _prefectures() if p.code in codes]
    return list(dict.fromkeys(forms))


def _written_heads(src: _Src, column: str, municipality: str, heads: list[str]) -> list[str]:
    """``heads``, and the municipality as this table writes it, read off a few of its rows in
    the municipality's area: 綾歌郡綾川町 for an input that left the county out."""
    if not municipality or not src.areas:
        return heads
    sql = (
        "SELECT v.value FROM (SELECT doc_id FROM doc_attrs WHERE name = ? AND value = ? "
        f"ORDER BY doc_id LIMIT {WRITTEN_ROWS}) a "
        "CROSS JOIN doc_attrs v ON v.doc_id = a.doc_id AND v.name = ?"
    )
    found = list(heads)
    for (value,) in src.source.conn.execute(sql, (src.areas[0], municipality, column)):
        at = value.find(municipality)
        if at >= 0:
            found.append(value[: at + len(municipality)])
    return list(dict.fromkeys(found))


def _number_forms(district: _District) -> list[tuple[list[str], int]]:
    """What follows the district's name in the prefixes tried, narrowest first, each with the
    rows it may read: the block (番町一丁目10, 番町1-10, １－１０…: every row compared, for
    the exact address; a first number may be the 丁目 the table writes in words: 番町1-10-16
    as 番町一丁目10-16), then the 丁目 alone and the name alone (a few rows: any one of them
    stands for the district)."""
    numbers = district.numbers
    tiers: list[tuple[list[str], int]] = []
    if district.chome is not None:
        chome = _chome_forms(district.chome)
        if numbers:
            blocks = [c + b for c in chome for b in _digit_forms(numbers[0])]
            tiers.append((_ended(blocks, len(numbers) > 1), ADDRESS_ROWS))
        tiers.append((chome, STAND_IN_ROWS))
    elif len(numbers) == 1:
        tiers.append((list(_digit_forms(numbers[0])), ADDRESS_ROWS))
    elif numbers:
        first, second = numbers[0], numbers[1]
        wide, wide_second = first.translate(_WIDE), second.translate(_WIDE)
        # 浜ノ町1-1, 1番1号, 1番地1; and 番町1-10-16 may be written 番町一丁目10-16
        blocks = [f"{first}-{second}", f"{first}番{second}", f"{wide}－{wide_second}"]
        blocks.append(f"{wide}番{wide_second}")
        if len(first) <= 2:  # 丁目 are small numbers
            blocks += [c + b for c in _chome_forms(int(first)) for b in _digit_forms(second)]
        tiers.append((_ended(blocks, len(numbers) > 2), ADDRESS_ROWS))
    tiers.append(([""], STAND_IN_ROWS))
    return tiers


def _ended(blocks: list[str], more: bool) -> list[str]:
    """The block followed by what parts it from a next number (5-2-, 5番2号… not 5-20), when
    the input has one: the rows of one block, not of ten."""
    if not more:
        return blocks
    return [b + mark for b in blocks for mark in ("-", "－", "番", "の")]


def _chome_forms(number: int) -> list[str]:
    """A 丁目 as addresses write it: 一丁目, 1丁目, １丁目, 1-, １－."""
    n, wide = str(number), str(number).translate(_WIDE)
    return [f"{_kanji(number)}丁目", f"{n}丁目", f"{wide}丁目", f"{n}-", f"{wide}－"]


def _digit_forms(number: str) -> tuple[str, ...]:
    return _unique(number, number.translate(_WIDE))


def _address_rows(src: _Src, column: str, prefixes: list[str], most: int) -> list[tuple]:
    rows: dict[int, tuple] = {}
    sql = (
        f"SELECT a.doc_id, a.value, d.title, d.rank_score, p.lat, p.lon, {src.attrs_sql} "
        "FROM (SELECT doc_id, value FROM doc_attrs WHERE name = ? AND value >= ? "
        f"AND value < ? LIMIT {most}) a "
        "CROSS JOIN docs d ON d.doc_id = a.doc_id CROSS JOIN doc_points p ON p.doc_id = a.doc_id"
    )
    for prefix in dict.fromkeys(prefixes):
        if prefix:
            for row in src.source.conn.execute(sql, (column, prefix, prefix + "\U0010ffff")):
                rows.setdefault(row[0], row)
    return list(rows.values())


def _address_hit(
    query: _Query, src: _Src, rows: list[tuple], district: _District, parents: list[_Hit]
) -> list[_Hit]:
    text = query.text
    numbered = _numbered_end(text, district)
    keys = (
        address_key(text[:numbered]),
        address_key(text[: district.end]),
        address_key(text[: district.name_end]),
    )
    scored = []
    for doc_id, value, title, rank, lat, lon, attrs in rows:
        stored = address_key(value)
        end, exact = _address_end(keys, stored, district)
        if not end:
            continue
        end = numbered if exact else end
        kind, areas = _attrs(attrs)
        part = _Part(0, end, "exact" if exact else "district")
        hit = _Hit(src, doc_id, title, lat, lon, rank, "address", kind, areas, part)
        if _place_in(hit, parents[:PARENTS]):
            scored.append((-end, -_common(keys[0], stored), doc_id, hit))
    scored.sort(key=lambda s: s[:3])
    exact_hits = [s[3] for s in scored if s[3].part.level == "exact"]
    # the rows at the same address all answer it; else the closest row stands for its district
    return exact_hits[: query.limit] if exact_hits else [s[3] for s in scored[:1]]


# -- Latin names ---------------------------------------------------------------------------------


def _latin(query: _Query) -> list[_Hit]:
    query.sep = ", "
    text = query.text
    pieces = [(m.start(), m.end()) for m in re.finditer(r"[^,、，;；]+", text)]
    pieces = [(s + _lead(text[s:e]), e - _trail(text[s:e])) for s, e in pieces]
    pieces = [(s, e) for s, e in pieces if e > s]
    if not pieces:
        return []
    if len(pieces) > 1:
        # the most specific come first; past MAX_PARTS (a list, not an address) they stay unmatched
        used = pieces[:MAX_PARTS]
        return _chain(query, [_latin_part(query, s, e) for s, e in reversed(used)])
    start, end = pieces[0]
    found = _chain(query, [_latin_part(query, start, end)])
    if found:
        return found
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text[start:end])]
    if not 1 < len(words) <= MAX_WORDS:
        return []
    hits: list[_Hit] = []
    for k in range(len(words) - 1, 0, -1):
        specific = _latin_part(query, start, start + words[k - 1][1])
        general = _latin_part(query, start + words[k][0], end)
        hits += _chain(query, [general, specific])
    return hits


def _lead(piece: str) -> int:
    return len(piece) - len(piece.lstrip())


def _trail(piece: str) -> int:
    return len(piece) - len(piece.rstrip())


def _latin_part(query: _Query, start: int, end: int) -> _Part:
    name = query.text[start:end]
    prefecture = _prefecture_by_name().get(fold_name(name))
    table = prefecture.names if prefecture else ()
    # a prefecture's English name is also its capital's (Kyoto, Fukuoka): any kind of place
    return _Part(start, end, None, (name,), _unique(name, name.title(), *table))


def _chain(query: _Query, parts: list[_Part]) -> list[_Hit]:
    """Each part looked up inside what the one before found; the deepest places reached."""
    parents: list[_Hit] = []
    reached: list[_Hit] = []
    for part in parts:
        found = _lookup(query, part, parents)
        if found:
            parents = reached = found
        elif reached:
            break  # a more specific part not inside what was found: stop at what was
    return reached


# -- lookups --------------------------------------------------------------------------------------


def _lookup(query: _Query, part: _Part, parents: list[_Hit]) -> list[_Hit]:
    """The places ``part`` names in every source, inside one of ``parents`` (when given),
    best first: up to ``limit`` (and at least ``PARENTS``, for the next part to lie in)."""
    parents = parents[:PARENTS]
    keep = max(query.limit, PARENTS)
    found: dict[tuple[int, int], _Hit] = {}
    for src in query.sources:
        for hit in (*_named(src, part, parents, keep), *_areas(src, part, parents)):
            key = (src.order, hit.doc_id)
            if key not in found or _rank_key(hit) < _rank_key(found[key]):
                found[key] = hit
    return sorted(found.values(), key=_rank_key)[:keep]


def _rank_key(hit: _Hit) -> tuple:
    return (
        _stands_in(hit),  # a place of that name before one that merely lies in the area
        -hit.inside,
        hit.parent is not None and _stands_in(hit.parent),
        round(hit.km / KM_STEP),  # of two 本町 near the city, the nearer (else popularity)
        hit.parent_rank,
        hit.kind == "exact" and hit.how != "address",  # an area before a point of interest
        _gap(hit),
        HOW_ORDER[hit.how],
        -hit.rank,
        hit.src.order,
        hit.doc_id,
    )


def _gap(hit: _Hit) -> int:
    """Levels skipped between its parent and it: in Iwate, Sawafuji the town before Sawafuji
    the district of another town."""
    if hit.parent is None or hit.kind not in AREA_LEVELS:
        return 0
    return max(0, LEVELS.index(hit.kind) - LEVELS.index(hit.parent.scale) - 1)


def _stands_in(hit: _Hit) -> bool:
    """Whether it answers for an area it lies in (an area's stand-in, an address row in the
    district asked) rather than being the place asked."""
    return hit.how == "area" or (hit.how == "address" and hit.part.level != "exact")


def _named(src: _Src, part: _Part, parents: list[_Hit], keep: int) -> Iterator[_Hit]:
    """Places whose title or alias is one of the part's spellings, inside a parent."""
    norms = _unique(*(f(s) for s in part.spellings for f in (normalise_title, fold_name)))
    for norm in norms:
        # a name borne by more than SCAN (a chain's stores) is read from its parents' areas
        # first; inside by distance the nearest wins, so more are read than kept
        crowded = bool(parents) and _crowded(src, norm)
        rows, whole = _area_walk(src, norm, parents, keep) if crowded else ([], False)
        if len(rows) < keep and not whole:
            rows += _title_walk(src, norm, parents, max(keep, NEAR_ROWS) if parents else keep)
        for doc_id, is_alias, title, rank, lat, lon, attrs in rows:
            kind, areas = _attrs(attrs)
            if part.kinds is not None and kind not in part.kinds:
                continue
            how = "alias" if is_alias else "title"
            hit = _Hit(src, doc_id, title, lat, lon, rank, how, kind, areas, part)
            if _place_in(hit, parents):
                yield hit


def _title_walk(src: _Src, norm: str, parents: list[_Hit], keep: int) -> list[tuple]:
    """The name's index range in popularity order, the first ``SCAN`` entries, each tested
    for lying in a parent by one index seek — first within a quarter of the distance allowed,
    then within all of it: of 1,100 本町 the twenty most popular within 40 km of a city are
    seldom its own, the nearest within 10 km usually are."""
    sql = (
        f"SELECT t.doc_id, t.is_alias, d.title, d.rank_score, p.lat, p.lon, {src.attrs_sql} "
        f"FROM (SELECT doc_id, is_alias FROM titles WHERE norm = ? ORDER BY doc_id LIMIT {SCAN}) t "
        "CROSS JOIN docs d ON d.doc_id = t.doc_id CROSS JOIN doc_points p ON p.doc_id = t.doc_id "
        "WHERE {where} LIMIT ?"
    )
    rows: list[tuple] = []
    for share in (NEAR_SHARE, 1.0) if parents else (1.0,):
        where, params = _inside_sql(src, parents, share)
        rows = src.source.conn.execute(sql.format(where=where), (norm, *params, keep)).fetchall()
        if rows:
            break
    return rows


def _crowded(src: _Src, norm: str) -> bool:
    """Whether more documents bear the name than ``_title_walk`` reads (a chain's stores)."""
    sql = "SELECT 1 FROM titles WHERE norm = ? LIMIT 1 OFFSET ?"
    return src.source.conn.execute(sql, (norm, SCAN)).fetchone() is not None


def _area_walk(src: _Src, norm: str, parents: list[_Hit], keep: int) -> tuple[list[tuple], bool]:
    """A crowded name from the other side: the documents of the parents' areas (those stored,
    one seek each in attr_counts), the first ``SCAN`` of each, tested for the name by one
    seek in ``titles``: セブンマート in 高松市 among 80,000 of them. Also whether that read
    every document of those areas (then the name's own walk can add nothing by area)."""
    names = _unique(*(n for p in parents for n in p.names))
    counted = [
        tuple(row)
        for attr in src.areas
        for row in src.source.conn.execute(
            "SELECT name, value, n FROM attr_counts WHERE name = ? AND value IN "
            f"({','.join('?' * len(names))})",
            (attr, *names),
        )
    ]
    pairs = [(attr, value) for attr, value, _ in counted]
    sql = (
        f"SELECT a.doc_id, t.is_alias, d.title, d.rank_score, p.lat, p.lon, {src.attrs_sql} "
        "FROM (SELECT doc_id FROM doc_attrs WHERE name = ? AND value = ? ORDER BY doc_id "
        f"LIMIT {SCAN}) a "
        "CROSS JOIN titles t ON t.norm = ? AND t.doc_id = a.doc_id "
        "CROSS JOIN docs d ON d.doc_id = a.doc_id CROSS JOIN doc_points p ON p.doc_id = a.doc_id "
        "LIMIT ?"
    )
    rows: list[tuple] = []
    for attr, value in pairs:
        rows += src.source.conn.execute(sql, (attr, value, norm, keep)).fetchall()
    return rows, bool(counted) and all(n <= SCAN for *_, n in counted)


def _areas(src: _Src, part: _Part, parents: list[_Hit]) -> Iterator[_Hit]:
    """The most popular place lying in an area of the part's name: it stands for the area.
    Without a less specific part to lie in, one for each prefecture among the first
    ``STAND_IN_ROWS`` of the area: 府中市 is an area of Tokyo and one of Hiroshima (a
    prefecture is one). Only the area's first ``AREA_SCAN`` documents are tried: an area of
    that name none of whose first ones lies in the parent (a town 北崎町 elsewhere, not the
    district 北崎町 of 高沢市) is another place."""
    if not src.areas or not part.areas:
        return
    one = bool(parents) or _fold(part.areas[0]) in _prefecture_by_name()
    where, params = _inside_sql(src, parents)
    sql = (
        f"SELECT a.doc_id, d.title, d.rank_score, p.lat, p.lon, {src.attrs_sql} "
        "FROM (SELECT doc_id FROM doc_attrs WHERE name = ? AND value = ? ORDER BY doc_id "
        f"LIMIT {AREA_SCAN}) a "
        "CROSS JOIN docs d ON d.doc_id = a.doc_id CROSS JOIN doc_points p ON p.doc_id = a.doc_id "
        f"WHERE {where} LIMIT {1 if one else STAND_IN_ROWS}"
    )
    best: dict[frozenset[str], _Hit] = {}  # by the prefectures it lies in
    for name in src.areas:
        for value in part.areas:
            for doc_id, title, rank, lat, lon, attrs in src.source.conn.execute(
                sql, (name, value, *params)
            ):
                kind, areas = _attrs(attrs)
                hit = _Hit(src, doc_id, title, lat, lon, rank, "area", kind, areas, part)
                hit.area = value
                if not _place_in(hit, parents):
                    continue
                seen = best.get(hit.prefectures)
                if seen is None or doc_id < seen.doc_id:
                    best[hit.prefectures] = hit
    yield from best.values()


def _attrs(packed: str | None) -> tuple[str | None, tuple[str, ...]]:
    """(the kind its features say, its area values) from the packed attribute column."""
    if not packed:
        return None, ()
    pairs = [item.split("\x1e", 1) for item in packed.split("\x1f")]
    areas = tuple(v for n, v in pairs if n in AREA_ATTRS)
    features = [v for n, v in pairs if n == "feature"]
    admin_level = next((v for n, v in pairs if n == "admin_level"), "")
    return _kind(features, admin_level), areas


# -- inside ---------------------------------------------------------------------------------------


def _inside_sql(src: _Src, parents: list[_Hit], share: float = 1.0) -> tuple[str, tuple]:
    """A superset of ``_place_in`` as SQL over ``d``/``p``: its area names one of the parents,
    or its point is in a parent's box (``share`` of the distance allowed). A parent without a
    point is checked in Python."""
    if not parents or any(p.lat is None for p in parents):
        return "1", ()
    clauses: list[str] = []
    params: list[Any] = []
    # the boxes first: the point is at hand, the areas cost seeks (SQLite stops at a true term)
    for parent in parents:
        assert parent.lat is not None and parent.lon is not None
        south, west, north, east = _box(parent.lat, parent.lon, RADIUS_KM[parent.scale] * share)
        clauses.append("(p.lat BETWEEN ? AND ? AND p.lon BETWEEN ? AND ?)")
        params += [south, north, west, east]
    names = _unique(*(n for p in parents for n in p.names))
    if src.areas and names:
        clauses.append(
            "EXISTS (SELECT 1 FROM doc_attrs y WHERE y.name IN "
            f"({_quoted(src.areas)}) AND y.value IN ({','.join('?' * len(names))}) "
            "AND y.doc_id = d.doc_id)"
        )
        params += names
    return "(" + " OR ".join(clauses) + ")", tuple(params)


def _box(lat: float, lon: float, km: float) -> tuple[float, float, float, float]:
    dlat = math.degrees(km / EARTH_KM)
    dlon = min(math.degrees(km / (EARTH_KM * max(math.cos(math.radians(lat)), 1e-6))), 180.0)
    return lat - dlat, lon - dlon, lat + dlat, lon + dlon


def _place_in(hit: _Hit, parents: list[_Hit]) -> bool:
    """Whether ``hit`` lies in one of ``parents`` (always, without parents); sets its parent
    and how sure that is."""
    if not parents:
        return True
    # by area; else near a place of the name (a stand-in is anywhere in its area), the
    # nearest; else the likeliest
    best: tuple | None = None
    for rank, parent in enumerate(parents):
        strength = _strength(hit, parent)
        if strength < 0:
            continue
        km = _km(hit, parent) if strength == 1 else 0.0
        key = (-strength, _stands_in(parent), round(km / KM_STEP), rank, km)
        if best is None or key < best:
            best = key
    if best is None:
        return False
    hit.inside, hit.parent_rank, hit.km = -best[0], best[3], best[4]
    hit.parent = parents[hit.parent_rank]
    return True


def _km(a: _Hit, b: _Hit) -> float:
    assert a.lat is not None and a.lon is not None and b.lat is not None and b.lon is not None
    return haversine_km(a.lat, a.lon, b.lat, b.lon)


def _strength(child: _Hit, parent: _Hit) -> int:
    """2: its area names the parent; 1: it is near enough; 0: the parent has no point to
    measure from (nothing says otherwise); -1: not inside."""
    if child.src is parent.src and child.doc_id == parent.doc_id:
        # a place is not inside itself, but it is inside the area it stands for
        return 2 if parent.how == "area" else -1
    mine, theirs = _prefecture_codes(child.areas), parent.prefectures
    if mine and theirs and not mine & theirs:
        return -1  # another prefecture, however near (Koga in Ibaraki, not near 茨木市)
    near = _near(child, parent)
    if not parent.folded_names.isdisjoint(map(_fold, child.areas)):
        # its area has the name, but where it names no prefecture and the parent has one, the
        # same name elsewhere is not excluded (府中市 of Tokyo and of Hiroshima): far is out
        return -1 if theirs and not mine and near is False else 2
    if near is None:
        return 0 if parent.lat is None else -1
    return 1 if near else -1


def _near(child: _Hit, parent: _Hit) -> bool | None:
    """Whether ``child`` is within ``RADIUS_KM`` of ``parent``; None when either has no point."""
    if parent.lat is None or child.lat is None:
        return None
    return _km(child, parent) <= RADIUS_KM[parent.scale]


# -- kinds of place -------------------------------------------------------------------------------

_GEONAMES_FEATURE = re.compile(r"^([A-Z])=([A-Z0-9]*)$")
_OSM_PLACES = {
    "prefecture": {"country", "state", "province", "region"},
    "municipality": {"county", "city", "town", "village", "municipality"},
    "district": {
        "suburb",
        "quarter",
        "neighbourhood",
        "borough",
        "hamlet",
        "locality",
        "city_block",
        "isolated_dwelling",
        "plot",
    },
}


_TAG_KEY = re.compile(r"^[a-z][a-z0-9_:]*$")  # OSM's keys: amenity, shop, railway, addr:…


def _kind(features: list[str], admin_level: str) -> str | None:
    """The level a place's own features say it is: an area's level, ``exact`` for a point of
    interest, None when its features say nothing known (a place table's 種別=病院)."""
    kinds = [k for k in (_feature_kind(f, admin_level) for f in features) if k]
    areas = [k for k in kinds if k in AREA_LEVELS]
    if areas:
        return min(areas, key=LEVELS.index)
    return kinds[0] if kinds else None


def _feature_kind(feature: str, admin_level: str) -> str | None:
    geonames = _GEONAMES_FEATURE.match(feature)
    if geonames:
        return _geonames_kind(*geonames.groups())
    key, _, value = feature.partition("=")
    if key == "place":
        return next((level for level, v in _OSM_PLACES.items() if value in v), "exact")
    if feature == "boundary=administrative" and admin_level.isdigit():
        level = int(admin_level)
        return "prefecture" if level <= 4 else "municipality" if level <= 8 else "district"
    # any other OSM-style tag (amenity=cafe, railway=station) is a point of interest; a place
    # table's own categories (種別=病院) say nothing known
    return "exact" if _TAG_KEY.match(key) and key != "boundary" else None


def _geonames_kind(fclass: str, code: str) -> str:
    if fclass == "A":
        if code.startswith(("ADM1", "PCL")):
            return "prefecture"
        return "district" if code.startswith(("ADM4", "ADM5")) else "municipality"
    if fclass == "P":
        return "district" if code == "PPLX" else "municipality"
    return "exact"


def _area_level(value: str) -> str:
    """The level of a stored area value: by its Japanese suffix, else first-level (GeoNames'
    admin1, OSM's default admin level 4)."""
    if value[-1:] in "市区町村郡":
        return "municipality"
    return "prefecture"


# -- candidates -----------------------------------------------------------------------------------


def _candidates(query: _Query, hits: list[_Hit]) -> list[Candidate]:
    best: dict[tuple[int, int], tuple[tuple, _Hit]] = {}
    for hit in hits:
        if hit.lat is None:
            continue
        key = (-_covered(hit), *_rank_key(hit))
        seen = best.get((hit.src.order, hit.doc_id))
        if seen is None or key < seen[0]:
            best[(hit.src.order, hit.doc_id)] = (key, hit)
    ranked = [hit for _, hit in sorted(best.values(), key=lambda kv: kv[0])]
    return [_candidate(query, hit) for hit in ranked[: query.limit]]


def _spans(hit: _Hit) -> list[tuple[int, int]]:
    """The stretches of the input its chain matched, merged (an address row's overlaps the
    municipality it lies in)."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted((h.part.start, h.part.end) for h in hit.chain):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _covered(hit: _Hit) -> int:
    return sum(end - start for start, end in _spans(hit))


def _candidate(query: _Query, hit: _Hit) -> Candidate:
    spans = _spans(hit)
    text, sep = query.text, query.sep
    matched = sep.join(text[s:e] for s, e in spans)
    bounds = [0, *(b for span in spans for b in span), len(text)]
    gaps = (text[bounds[i] : bounds[i + 1]] for i in range(0, len(bounds), 2))
    unmatched = sep.join(g for g in (g.strip(" ,、，;；") for g in gaps) if g)
    assert hit.lat is not None and hit.lon is not None
    return Candidate(
        lat=hit.lat,
        lon=hit.lon,
        level=_level(hit, last=hit.part.end >= len(text)),
        source=hit.src.source.name,
        doc_id=hit.doc_id,
        title=hit.title,
        matched=matched,
        unmatched=unmatched,
        how=hit.how,
        within=_name_of(hit.parent) if hit.parent else "",
    )


def _name_of(hit: _Hit) -> str:
    """A place as the one inside it names it: an area by its name, not by its stand-in's."""
    return hit.area or hit.title if hit.how == "area" else hit.title


def _level(hit: _Hit, last: bool) -> str:
    """An address row: what its part says; an area's stand-in: the area's level; a place: the
    level its features say when it is an area, else a prefecture or municipality when the
    address form says so (a place table's row 高松市), else ``exact`` — the place itself
    (Kiasma, 浅草寺, 高松市セブンマート) — when nothing of the input follows its name, and a
    district when numbers do (東京都台東区浅草2-3-1: the station 浅草 answers for the district)."""
    if hit.how == "address":
        return hit.part.level or "district"
    if hit.how == "area":
        return hit.part.level or _area_level(hit.area)
    if hit.kind in AREA_LEVELS:
        return hit.kind
    if hit.part.level in ("prefecture", "municipality"):
        return hit.part.level
    return "exact" if last else hit.part.level or "exact"
