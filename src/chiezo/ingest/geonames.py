"""Source kind ``geonames``: the GeoNames exports (``allCountries``, ``XX``, ``citiesNNNN``; zip
or txt, the 19-column ``geoname`` table).

Each place becomes a document: a Japanese display title where one exists (ニューヨーク, 京都市;
for Japan a form written in JIS X 0208, never the Chinese 神户市 GeoNames also lists — see
``japanese_name``), every other name as an alias (so 東京, Tokyo and Tōkyō all find it),
coordinates, the attributes ``feature`` (``class=code``, e.g. ``P=PPLA``), ``country``,
``area`` (the admin1 name — Japanese for Japan's prefectures, from the alternate-names file or
else the package's table ``data/jp_prefectures.tsv``), ``area_alias`` (its other names:
English, ASCII, the short 東京 of 東京都; a filter on ``area`` matches either), ``timezone`` and
``wikidata``; popularity from population on a log scale. Places sharing a display title get
the area and country appended, so duplicates stay distinguishable.

Optional inputs: ``admin1CodesASCII.txt`` (admin1 names) and ``alternateNamesV2`` or one
country's ``alternatenames/XX`` (per-language names and Wikidata ids), read into a temporary
on-disk SQLite — flat memory whatever their size.
"""

from __future__ import annotations

import functools
import io
import math
import re
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO, TYPE_CHECKING

from chiezo.core import db
from chiezo.core.addresses import Address
from chiezo.core.config import Settings
from chiezo.core.errors import InputError
from chiezo.core.models import Chunk, Doc
from chiezo.core.progress import NullProgress, Progress
from chiezo.ingest.download import mtime
from chiezo.store import generations
from chiezo.store.build import BuildOptions, BuildReport, GenerationBuilder
from chiezo.store.kinds import Attribution, Capabilities, Fetched, SourceKind, option_field

if TYPE_CHECKING:
    from chiezo.store.source_info import SourceInfo

KIND = "geonames"
COLUMNS = 19
_HAN = re.compile(r"[\u4e00-\u9fff]")
_KATAKANA = re.compile(r"[\u30a0-\u30ff]")
# Kana and kanji only (with the iteration marks 々〆 and the small ヶ of 茅ヶ崎): a name in
# Japanese script, not a romanisation or a mixed label.
_JA_SCRIPT = re.compile(r"^[\u3041-\u309f\u30a0-\u30ff\u4e00-\u9fff々〆]+$")
_KANJI = re.compile(r"[\u4e00-\u9fff々〆]")
# The kanji that end the name of an administrative unit (prefecture, municipality, district,
# and the 州/省 of foreign states and provinces): 新宮 and 新宮市 in one row say that 市 is
# the unit's suffix, not part of the name.
_UNIT_SUFFIXES = "都道府県市区町村郡州省"
# A municipality is promoted 村 → 町 → 市 and GeoNames keeps the older names (厚木町 beside
# 厚木市), so of two otherwise equal names the higher status is the current one.
_MUNICIPAL_ORDER = "市区町村"
# The English name's own suffix, romanised: Honchō is 本町 (not 船橋市), Ushibukamachi 牛深町.
# -shi/-ku/-son only after a hyphen: Zushi and Chōshi end in "shi" without being cities' names.
_ROMANISED_SUFFIXES = (
    (re.compile(r"(?:machi|cho|chou)\b"), "町"),
    (re.compile(r"mura\b|-son\b"), "村"),
    (re.compile(r"-shi\b"), "市"),
    (re.compile(r"-ku\b"), "区"),
)
FEATURE_CLASSES = {
    "A": "administrative division",
    "H": "water",
    "L": "area",
    "P": "populated place",
    "R": "road or railroad",
    "S": "spot or building",
    "T": "mountain or terrain",
    "U": "undersea",
    "V": "vegetation",
}


@dataclass
class GeoNamesOptions:
    admin1: Path | None = option_field(
        None, help="admin1CodesASCII.txt: names of first-level areas."
    )
    alternate_names: Path | None = option_field(
        None,
        help="alternateNamesV2 or a country's alternatenames/XX (zip/txt): Japanese names of "
        "places and areas, Wikidata ids.",
    )
    fetch: str | None = option_field(
        None,
        metavar="NAME",
        recorded=False,
        for_fetch=True,
        help="Without EXPORT: the export to fetch, e.g. cities15000 or JP.",
    )
    fetch_alternate_names: str | None = option_field(
        None,
        metavar="CC",
        recorded=False,
        help="Fetch a country's alternate names (e.g. JP: Japanese titles and Wikidata ids; "
        "Japan's prefectures are Japanese without it).",
    )
    mirror: str | None = option_field(
        None, recorded=False, help="GeoNames download URL (default: geonames.org)."
    )
    # set by fetch(): what was downloaded and how, so `chiezo rebuild --fetch` can do it again
    fetched: dict | None = option_field(None, cli=False)


@dataclass
class Place:
    geonameid: int
    name: str
    asciiname: str
    alternates: list[str]
    lat: float
    lon: float
    fclass: str
    fcode: str
    country: str
    admin1: str
    population: int
    elevation: int | None
    timezone: str


@contextmanager
def open_export(path: Path) -> Iterator[IO[str]]:
    """The text of a GeoNames export, inside its zip or not."""
    if not path.is_file():
        raise InputError(f"no such file: {path}")
    if path.suffix.lower() == ".zip":
        try:
            archive = zipfile.ZipFile(path)
        except zipfile.BadZipFile as exc:
            raise InputError(f"{path.name} is not a valid zip file") from exc
        names = [n for n in archive.namelist() if n.endswith(".txt") and "readme" not in n.lower()]
        if not names:
            raise InputError(f"{path.name} holds no .txt export")
        with archive, archive.open(names[0]) as raw:
            yield io.TextIOWrapper(raw, encoding="utf-8")
    else:
        with open(path, encoding="utf-8") as fh:
            yield fh


def read_places(path: Path, warn: Callable[[str], None]) -> Iterator[Place]:
    with open_export(path) as fh:
        for number, line in enumerate(fh, 1):
            fields = line.rstrip("\n").split("\t")
            if len(fields) != COLUMNS:
                if line.strip():
                    warn(
                        f"{path.name} line {number}: {len(fields)} columns, not {COLUMNS}; skipped"
                    )
                continue
            try:
                yield Place(
                    geonameid=int(fields[0]),
                    name=fields[1],
                    asciiname=fields[2],
                    alternates=[a for a in fields[3].split(",") if a],
                    lat=float(fields[4]),
                    lon=float(fields[5]),
                    fclass=fields[6],
                    fcode=fields[7],
                    country=fields[8],
                    admin1=fields[10],
                    population=int(fields[14] or 0),
                    elevation=int(fields[15]) if fields[15].lstrip("-").isdigit() else None,
                    timezone=fields[17],
                )
            except ValueError:
                warn(f"{path.name} line {number}: unreadable numbers; skipped")


@dataclass(frozen=True)
class AreaNames:
    """An admin1 area: the name shown (Japanese where the alternate-names file has one) and
    its other names (English, ASCII, other Japanese forms), stored so either finds it."""

    shown: str
    others: tuple[str, ...] = ()


@dataclass(frozen=True)
class Prefecture:
    """One row of ``data/jp_prefectures.tsv``: a prefecture's names by its GeoNames code."""

    english: str  # admin1CodesASCII's ASCII name, to check the code still means this prefecture
    japanese: str  # 東京都
    short: str  # 東京: how people write it; "" for 北海道, which has no suffix to drop


@functools.cache
def jp_prefectures() -> dict[str, Prefecture]:
    """admin1 code (``JP.40``) → the prefecture's names. A packaged table, so a build without
    the alternate-names file (tens of MB, one more download) still shows Japanese areas."""
    table = resources.files("chiezo.ingest") / "data" / "jp_prefectures.tsv"
    rows: dict[str, Prefecture] = {}
    for line in table.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            code, english, japanese, short = line.split("\t")
            rows[code] = Prefecture(english, japanese, short)
    return rows


def known_area_names() -> list[tuple[str, ...]]:
    """Groups of names that denote the same area (東京都, 東京, Tokyo): what the search layer
    suggests when an area asked in one language is stored only in the other."""
    return [
        tuple(n for n in (p.japanese, p.short, p.english) if n) for p in jp_prefectures().values()
    ]


class Lookups:
    """Admin1 names and alternate names, on disk."""

    def __init__(self, path: Path):
        self.conn = db.open_for_build(path)
        self.conn.executescript(
            "CREATE TABLE admin1 (code TEXT PRIMARY KEY, name TEXT, ascii TEXT, geonameid INTEGER);"
            "CREATE TABLE names (geonameid INTEGER, lang TEXT, name TEXT, preferred INTEGER,"
            " short INTEGER);"
            "CREATE TABLE seen (title TEXT PRIMARY KEY, n INTEGER) WITHOUT ROWID;"
        )
        self._areas: dict[str, AreaNames | None] = {}  # a few thousand areas, asked per place

    def load_admin1(self, path: Path) -> None:
        rows = []
        with open_export(path) as fh:
            for line in fh:
                fields = line.rstrip("\n").split("\t")
                if len(fields) >= 4 and fields[3].isdigit():
                    rows.append((fields[0], fields[1], fields[2], int(fields[3])))
        self.conn.executemany("INSERT OR REPLACE INTO admin1 VALUES (?, ?, ?, ?)", rows)

    def load_alternate_names(self, path: Path) -> None:
        """Keep only what is used: Japanese names and Wikidata ids ('wkdt'); historic and
        colloquial names (平安京, slang) are never a place's name today."""
        batch, rows = [], 0
        with open_export(path) as fh:
            for line in fh:
                fields = line.rstrip("\n").split("\t")
                if not _alternate_name_row(fields):
                    continue
                rows += 1
                if fields[2] not in ("ja", "wkdt") or "1" in (fields[6], fields[7]):
                    continue
                batch.append(
                    (
                        int(fields[1]),
                        fields[2],
                        fields[3],
                        int(fields[4] == "1"),
                        int(fields[5] == "1"),
                    )
                )
                if len(batch) >= 50_000:
                    self.conn.executemany("INSERT INTO names VALUES (?, ?, ?, ?, ?)", batch)
                    batch = []
        if not rows:
            raise InputError(
                f"{path.name} is not an alternate-names file: no row of alternateNameId, "
                "geonameid, isolanguage, name, isPreferredName, isShortName, isColloquial, "
                "isHistoric",
                hint="alternateNamesV2.zip or alternatenames/XX.zip from GeoNames",
            )
        self.conn.executemany("INSERT INTO names VALUES (?, ?, ?, ?, ?)", batch)
        self.conn.execute("CREATE INDEX idx_names ON names(geonameid, lang)")

    def japanese_names(self, geonameid: int) -> list[str]:
        """The file's Japanese names, preferred ones first, then full names before short ones."""
        rows = self.conn.execute(
            "SELECT name FROM names WHERE geonameid = ? AND lang = 'ja' "
            "ORDER BY preferred DESC, short, rowid",
            (geonameid,),
        )
        return [r[0] for r in rows]

    def japanese(self, geonameid: int, romanised: str = "") -> str | None:
        """The file's Japanese name for a place: of the preferred (else all) names, the one
        ``japanese_name`` picks."""
        rows = self.conn.execute(
            "SELECT name, preferred, short FROM names WHERE geonameid = ? AND lang = 'ja' "
            "ORDER BY rowid",
            (geonameid,),
        ).fetchall()
        tiers: dict[tuple[bool, bool], list[str]] = {}
        for name, preferred, short in rows:
            tiers.setdefault((not preferred, bool(short)), []).append(name)
        for tier in sorted(tiers):
            picked = japanese_name(tiers[tier], romanised)
            if picked:
                return picked
        return None

    def wikidata(self, geonameid: int) -> str | None:
        row = self.conn.execute(
            "SELECT name FROM names WHERE geonameid = ? AND lang = 'wkdt' LIMIT 1", (geonameid,)
        ).fetchone()
        return row[0] if row else None

    def area(self, country: str, admin1: str) -> AreaNames | None:
        code = f"{country}.{admin1}"
        if code not in self._areas:
            self._areas[code] = self._area(code)
        return self._areas[code]

    def _area(self, code: str) -> AreaNames | None:
        row = self.conn.execute(
            "SELECT name, ascii, geonameid FROM admin1 WHERE code = ?", (code,)
        ).fetchone()
        if row is None:
            return None
        name, ascii_name, geonameid = row
        table = _prefecture_names(code, ascii_name)
        shown = self.japanese(geonameid, ascii_name) or (table[0] if table else name)
        names = [name, ascii_name, *self.japanese_names(geonameid), *table]
        return AreaNames(shown, tuple(n for n in dict.fromkeys(names) if n and n != shown))

    def count_title(self, title: str) -> None:
        self.conn.execute(
            "INSERT INTO seen VALUES (?, 1) ON CONFLICT(title) DO UPDATE SET n = n + 1", (title,)
        )

    def duplicated(self, title: str) -> bool:
        row = self.conn.execute("SELECT n FROM seen WHERE title = ?", (title,)).fetchone()
        return bool(row and row[0] > 1)

    def close(self) -> None:
        self.conn.close()


def _prefecture_names(code: str, ascii_name: str) -> list[str]:
    """The packaged Japanese names of a prefecture (full, short), or none: also none when the
    admin1 file names the code otherwise, for an admin1 file whose codes GeoNames renumbered
    would otherwise give a place in Aichi the name of another prefecture."""
    prefecture = jp_prefectures().get(code)
    if prefecture is None or prefecture.english.casefold() != ascii_name.casefold():
        return []
    return [n for n in (prefecture.japanese, prefecture.short) if n]


def _alternate_name_row(fields: list[str]) -> bool:
    """A row of alternateNamesV2 (10 columns) or the older alternateNames (8)."""
    return len(fields) in (8, 10) and fields[0].isdigit() and fields[1].isdigit()


def display_name(place: Place, lookups: Lookups) -> str:
    """A Japanese name where one exists: the alternate-names file's, else, for Japan, the
    row's own Japanese form (``japanese_name``), elsewhere a katakana name (ニューヨーク);
    else the place's own name."""
    preferred = lookups.japanese(place.geonameid, place.asciiname)
    if preferred:
        return preferred
    if place.country == "JP":
        return japanese_name(place.alternates, place.asciiname) or place.name
    katakana = [a for a in place.alternates if _KATAKANA.search(a) and not _HAN.search(a)]
    return katakana[0] if katakana else place.name


def is_japanese(name: str) -> bool:
    """Written in kana/kanji that Japanese uses: JIS X 0208, the character set of every
    Japanese encoding. The Chinese forms in GeoNames' names fail it (神户市, 鹿儿岛市, 松戶市,
    吳市). ISO-2022-JP is JIS X 0208 alone; Python's EUC-JP also takes JIS X 0212, which holds
    Chinese simplified forms (丰田市)."""
    if not _JA_SCRIPT.match(name):
        return False
    try:
        name.encode("iso2022_jp")
    except UnicodeEncodeError:
        return False
    return True


def japanese_name(names: Iterable[str], romanised: str = "") -> str | None:
    """The name a Japanese reader expects among ``names`` (a row's alternate names, or the
    file's Japanese names), or None. Of the names ``is_japanese`` accepts, in order:

    1. one with kanji (横浜市 before よこはまし; さいたま where only kana exists);
    2. one with the suffix its romanised name ends in (Honchō → 本町, not 船橋市);
    3. one that is another of the names plus a unit suffix (新宮 + 新宮市 → 新宮市; 東京 +
       東京都 → 東京都; 豊岡 + 豊岡市 beats the old form 豐岡市, whose bare form is absent);
    4. a municipality's suffix, by status: 市, 区, 町, 村 (厚木市 before 厚木町), then others;
    5. GeoNames' own order.

    Measured on the 901 Japanese rows of cities5000: 568 have two or more candidates; the
    rule changes 34 titles of the former first-kanji rule (Chinese forms gone: 神户市 → 神戸市;
    大村 → 大村市), and steps 2 and 5 leave a few wrong (鹿島市 for Ibaraki's 鹿嶋市)."""
    candidates = [n for n in dict.fromkeys(names) if is_japanese(n)]
    if not candidates:
        return None
    pool = set(candidates)
    hints = [kanji for pattern, kanji in _ROMANISED_SUFFIXES if pattern.search(romanised.lower())]

    def rank(indexed: tuple[int, str]) -> tuple:
        index, name = indexed
        last = name[-1]
        return (
            not _KANJI.search(name),
            bool(hints) and not any(k in name for k in hints),
            not (last in _UNIT_SUFFIXES and name[:-1] in pool),
            _MUNICIPAL_ORDER.index(last) if last in _MUNICIPAL_ORDER else len(_MUNICIPAL_ORDER),
            index,
        )

    return min(enumerate(candidates), key=rank)[1]


def ingest_geonames(
    settings: Settings,
    path: Path,
    name: str | None = None,
    *,
    geo: GeoNamesOptions | None = None,
    options: BuildOptions | None = None,
    progress: Progress | None = None,
) -> BuildReport:
    geo = geo or GeoNamesOptions()
    progress = progress or NullProgress()
    path = Path(path)
    name = name or KIND
    settings.corpus_dir.mkdir(parents=True, exist_ok=True)
    with generations.scratch_dir(settings.corpus_dir, "geonames-") as tmp:
        lookups = Lookups(Path(tmp) / "lookups.db")
        try:
            if geo.admin1:
                lookups.load_admin1(Path(geo.admin1))
            if geo.alternate_names:
                progress.phase("reading alternate names", None, "rows")
                lookups.load_alternate_names(Path(geo.alternate_names))
            builder = GenerationBuilder(
                settings,
                name,
                KIND,
                input_identity=_identity(path, geo),
                options=options,
                progress=progress,
                expected_bytes=path.stat().st_size * (4 if path.suffix == ".zip" else 1),
            )
            with builder:
                top = _first_pass(path, lookups, builder.warn)
                builder.start_reading(top.count)
                for place in read_places(path, lambda m: None):
                    builder.add(_doc(place, lookups, top.population))
                return builder.finish()
        finally:
            lookups.close()


@dataclass
class _Totals:
    count: int = 0
    population: int = 0


def _first_pass(path: Path, lookups: Lookups, warn: Callable[[str], None]) -> _Totals:
    """Count display titles (to tell duplicates apart) and find the largest population."""
    totals = _Totals()
    lookups.conn.execute("BEGIN")
    for place in read_places(path, warn):
        totals.count += 1
        totals.population = max(totals.population, place.population)
        lookups.count_title(display_name(place, lookups))
    lookups.conn.execute("COMMIT")
    return totals


AREA_ALIAS = "area_alias"  # the area's other names: filters match either (search/filters.py)


def _doc(place: Place, lookups: Lookups, top_population: int) -> Doc:
    display = display_name(place, lookups)
    names = lookups.area(place.country, place.admin1) if place.admin1 else None
    area = names.shown if names else None
    title = display
    if lookups.duplicated(display):
        where = ", ".join(p for p in (area, place.country) if p)
        title = f"{display} ({where})" if where else f"{display} ({place.geonameid})"
    every = [
        display,
        place.name,
        place.asciiname,
        *place.alternates,
        *lookups.japanese_names(place.geonameid),
    ]
    aliases = [n for n in dict.fromkeys(every) if n and n != title]
    feature = f"{place.fclass}={place.fcode}" if place.fcode else place.fclass
    attrs = {"feature": [feature], "country": [place.country] if place.country else []}
    if names:
        attrs["area"] = [names.shown]
        attrs[AREA_ALIAS] = list(names.others)
    if place.timezone:
        attrs["timezone"] = [place.timezone]
    qid = lookups.wikidata(place.geonameid)
    if qid:
        attrs["wikidata"] = [qid]
    rank = math.log1p(place.population) / math.log1p(top_population) if top_population else 0.0
    description = _describe(place, display, area)
    opening = description.split("\n", 1)[0]
    # What it is and where, for vectors: not the coordinates or the 60 other names.
    passage = f"{opening}\nPopulation {place.population:,}." if place.population else opening
    return Doc(
        key=str(place.geonameid),
        title=title,
        body=description,
        opening=opening,
        chunks=[Chunk(text=passage)],
        url=f"https://www.geonames.org/{place.geonameid}",
        rank_score=rank,
        aliases=aliases,
        attrs={k: v for k, v in attrs.items() if v},
        point=(place.lat, place.lon),
        extra={
            "population": place.population,
            "elevation": place.elevation,
            "timezone": place.timezone,
            "admin1_code": place.admin1,
        },
    )


def _describe(place: Place, display: str, area: str | None) -> str:
    kind = FEATURE_CLASSES.get(place.fclass, "place")
    where = ", ".join(p for p in (area, place.country) if p)
    lines = [f"{display} ({place.name}): {kind} ({place.fclass}.{place.fcode}) in {where}."]
    if place.population:
        lines.append(f"Population {place.population:,}.")
    if place.elevation is not None:
        lines.append(f"Elevation {place.elevation} m.")
    lines.append(f"Coordinates {place.lat:.5f}, {place.lon:.5f}. Time zone {place.timezone}.")
    others = [a for a in place.alternates if a != display][:60]
    if others:
        lines.append("Other names: " + ", ".join(others))
    return "\n".join(lines)


def _identity(path: Path, geo: GeoNamesOptions) -> dict:
    """What the source is built from, paths absolute (a rebuild may run from anywhere)."""
    identity = {
        "path": str(path.resolve()),
        "bytes": path.stat().st_size,
        "mtime": mtime(path),
        "admin1": str(Path(geo.admin1).resolve()) if geo.admin1 else None,
        "alternate_names": str(Path(geo.alternate_names).resolve())
        if geo.alternate_names
        else None,
    }
    return {**identity, "fetched": geo.fetched} if geo.fetched else identity


def _with_alternate_names(
    settings: Settings, options: GeoNamesOptions, progress: Progress
) -> GeoNamesOptions:
    """``--fetch-alternate-names CC``: the options with the country's file fetched, recorded
    in ``fetched`` so a ``rebuild --fetch`` fetches it again."""
    from dataclasses import replace

    from chiezo.ingest.placefetch import fetch_alternate_names, geonames_base

    country = options.fetch_alternate_names
    assert country is not None  # called only when it is given
    record = dict(options.fetched or {"input": False, "options": {}, "filled": []})
    # fetched for this source before (rebuild --fetch): ask whether the server's file changed
    again = "fetch_alternate_names" in record.get("options", {})
    path = fetch_alternate_names(
        settings, country, mirror=options.mirror, progress=progress, refresh=again
    )
    record["options"] = {
        **record.get("options", {}),
        "fetch_alternate_names": country.upper(),
        "mirror": Address.parse(geonames_base(options.mirror)).url,
    }
    record["filled"] = list(dict.fromkeys([*record.get("filled", []), "alternate_names"]))
    return replace(options, alternate_names=path, fetch_alternate_names=None, fetched=record)


# -- the kind -------------------------------------------------------------------------------------


class GeoNamesKind(SourceKind):
    name = KIND
    summary = """Build a place source from a GeoNames export (allCountries, XX, citiesNNNN; .zip or
    .txt). Without EXPORT, --fetch NAME downloads it (with admin1 names);
    --fetch-alternate-names JP downloads Japan's alternate names."""
    Options = GeoNamesOptions
    argument = "EXPORT"
    fetches = True
    default_name = KIND
    capabilities = Capabilities(places=True)

    def build(
        self,
        settings: Settings,
        inputs: list[Path],
        name: str | None,
        options: GeoNamesOptions,
        build: BuildOptions,
        progress: Progress,
    ) -> BuildReport:
        if options.fetch_alternate_names:
            if options.alternate_names:
                raise InputError("give --alternate-names FILE or --fetch-alternate-names, not both")
            options = _with_alternate_names(settings, options, progress)
        return ingest_geonames(
            settings, inputs[0], name, geo=options, options=build, progress=progress
        )

    def fetch(self, settings: Settings, options: GeoNamesOptions, progress: Progress) -> Fetched:
        if not options.fetch:
            raise InputError("give an EXPORT file or --fetch NAME (e.g. cities15000)")
        from dataclasses import replace

        from chiezo.ingest.placefetch import fetch_geonames, geonames_base
        from chiezo.store.build import MIN_FREE_MEMORY, check_memory

        check_memory(MIN_FREE_MEMORY, KIND)  # before any download (the disk: placefetch)
        before = options.fetched or {}  # a record: fetched again (rebuild --fetch)
        # the same file names as last time, so ask whether the server's copies changed
        export, admin1 = fetch_geonames(
            settings, options.fetch, mirror=options.mirror, progress=progress, refresh=bool(before)
        )
        # what else was fetched before (alternate names) stays recorded: build() fetches it
        record = {
            "input": True,
            "options": {
                **before.get("options", {}),
                "fetch": options.fetch,
                "mirror": Address.parse(geonames_base(options.mirror)).url,
            },
            "filled": list(
                dict.fromkeys([*before.get("filled", []), *([] if options.admin1 else ["admin1"])])
            ),
        }
        return Fetched([export], replace(options, admin1=options.admin1 or admin1, fetched=record))

    def attribution(self, info: SourceInfo) -> Attribution:
        return Attribution("GeoNames", "CC BY 4.0", "https://www.geonames.org/")


SOURCE_KIND = GeoNamesKind()
