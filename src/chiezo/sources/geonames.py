"""Source kind ``geonames``: the GeoNames exports (``allCountries``, ``XX``, ``citiesNNNN``; zip
or txt, the 19-column ``geoname`` table).

Each place becomes a document: a Japanese display title where one exists (ニューヨーク, 京都市),
every other name as an alias (so 東京, Tokyo and Tōkyō all find it), coordinates, the
attributes ``feature`` (``class=code``, e.g. ``P=PPLA``), ``country``, ``area`` (the admin1
name — Japanese when the alternate-names file gives one), ``timezone`` and ``wikidata``;
popularity from population on a log scale. Places sharing a display title get the area and
country appended, so duplicates stay distinguishable.

Optional inputs: ``admin1CodesASCII.txt`` (admin1 names) and ``alternateNamesV2`` (per-language
names and Wikidata ids), read into a temporary on-disk SQLite — flat memory whatever their size.
"""

from __future__ import annotations

import io
import math
import re
import tempfile
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .. import db
from ..build import BuildOptions, BuildReport, GenerationBuilder
from ..config import Settings
from ..errors import InputError
from ..models import Chunk, Doc
from ..progress import NullProgress, Progress

KIND = "geonames"
COLUMNS = 19
_HAN = re.compile(r"[\u4e00-\u9fff]")
_KANA = re.compile(r"[\u3040-\u30ff]")
_KATAKANA = re.compile(r"[\u30a0-\u30ff]")
_JA_ONLY = re.compile(r"^[\u3040-\u30ff\u4e00-\u9fff々ヶ]+$")
# A municipality's name (京都市) before a prefecture-like one (東京都): 京都 ends in 都 too.
_JA_SUFFIXES = (re.compile(r"[市区町村]$"), re.compile(r"[都道府県]$"))
FEATURE_CLASSES = {
    "A": "administrative division", "H": "water", "L": "area", "P": "populated place",
    "R": "road or railroad", "S": "spot or building", "T": "mountain or terrain",
    "U": "undersea", "V": "vegetation",
}  # fmt: skip


@dataclass
class GeoNamesOptions:
    admin1: Path | None = None
    alternate_names: Path | None = None


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


def read_places(path: Path, warn) -> Iterator[Place]:
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


class Lookups:
    """Admin1 names and alternate names, on disk."""

    def __init__(self, path: Path):
        self.conn = db.open_for_build(path)
        self.conn.executescript(
            "CREATE TABLE admin1 (code TEXT PRIMARY KEY, name TEXT, geonameid INTEGER);"
            "CREATE TABLE names (geonameid INTEGER, lang TEXT, name TEXT, preferred INTEGER);"
            "CREATE TABLE seen (title TEXT PRIMARY KEY, n INTEGER) WITHOUT ROWID;"
        )

    def load_admin1(self, path: Path) -> None:
        rows = []
        with open_export(path) as fh:
            for line in fh:
                fields = line.rstrip("\n").split("\t")
                if len(fields) >= 4 and fields[3].isdigit():
                    rows.append((fields[0], fields[1], int(fields[3])))
        self.conn.executemany("INSERT OR REPLACE INTO admin1 VALUES (?, ?, ?)", rows)

    def load_alternate_names(self, path: Path) -> None:
        """Keep only what is used: Japanese names and Wikidata ids ('wkdt')."""
        batch = []
        with open_export(path) as fh:
            for line in fh:
                fields = line.rstrip("\n").split("\t")
                if len(fields) < 8 or fields[2] not in ("ja", "wkdt"):
                    continue
                if fields[7] == "1":  # historic
                    continue
                batch.append((int(fields[1]), fields[2], fields[3], int(fields[4] == "1")))
                if len(batch) >= 50_000:
                    self.conn.executemany("INSERT INTO names VALUES (?, ?, ?, ?)", batch)
                    batch = []
        self.conn.executemany("INSERT INTO names VALUES (?, ?, ?, ?)", batch)
        self.conn.execute("CREATE INDEX idx_names ON names(geonameid, lang)")

    def japanese(self, geonameid: int) -> str | None:
        row = self.conn.execute(
            "SELECT name FROM names WHERE geonameid = ? AND lang = 'ja' "
            "ORDER BY preferred DESC, length(name) LIMIT 1",
            (geonameid,),
        ).fetchone()
        return row[0] if row else None

    def wikidata(self, geonameid: int) -> str | None:
        row = self.conn.execute(
            "SELECT name FROM names WHERE geonameid = ? AND lang = 'wkdt' LIMIT 1", (geonameid,)
        ).fetchone()
        return row[0] if row else None

    def area(self, country: str, admin1: str) -> str | None:
        row = self.conn.execute(
            "SELECT name, geonameid FROM admin1 WHERE code = ?", (f"{country}.{admin1}",)
        ).fetchone()
        if row is None:
            return None
        return self.japanese(row[1]) or row[0]

    def count_title(self, title: str) -> None:
        self.conn.execute(
            "INSERT INTO seen VALUES (?, 1) ON CONFLICT(title) DO UPDATE SET n = n + 1", (title,)
        )

    def duplicated(self, title: str) -> bool:
        row = self.conn.execute("SELECT n FROM seen WHERE title = ?", (title,)).fetchone()
        return bool(row and row[0] > 1)

    def close(self) -> None:
        self.conn.close()


def display_name(place: Place, lookups: Lookups) -> str:
    """A Japanese name where one exists: the alternate-names file's, else, for Japan, a name in
    kanji (one with an administrative suffix — 京都市, 東京都 — first), elsewhere a katakana
    name (ニューヨーク); else the place's own name."""
    preferred = lookups.japanese(place.geonameid)
    if preferred:
        return preferred
    if place.country == "JP":
        han = [a for a in place.alternates if _HAN.search(a) and _JA_ONLY.match(a)]
        for suffix in _JA_SUFFIXES:
            suffixed = [a for a in han if suffix.search(a)]
            if suffixed:
                return suffixed[0]
        if han:
            return han[0]
    katakana = [a for a in place.alternates if _KATAKANA.search(a) and not _HAN.search(a)]
    return katakana[0] if katakana else place.name


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
    with tempfile.TemporaryDirectory(prefix="geonames-", dir=settings.corpus_dir) as tmp:
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


def _first_pass(path: Path, lookups: Lookups, warn) -> _Totals:
    """Count display titles (to tell duplicates apart) and find the largest population."""
    totals = _Totals()
    lookups.conn.execute("BEGIN")
    for place in read_places(path, warn):
        totals.count += 1
        totals.population = max(totals.population, place.population)
        lookups.count_title(display_name(place, lookups))
    lookups.conn.execute("COMMIT")
    return totals


def _doc(place: Place, lookups: Lookups, top_population: int) -> Doc:
    display = display_name(place, lookups)
    area = lookups.area(place.country, place.admin1) if place.admin1 else None
    title = display
    if lookups.duplicated(display):
        where = ", ".join(p for p in (area, place.country) if p)
        title = f"{display} ({where})" if where else f"{display} ({place.geonameid})"
    names = [display, place.name, place.asciiname, *place.alternates]
    aliases = [n for n in dict.fromkeys(names) if n and n != title]
    feature = f"{place.fclass}={place.fcode}" if place.fcode else place.fclass
    attrs = {"feature": [feature], "country": [place.country] if place.country else []}
    if area:
        attrs["area"] = [area]
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
    return {
        "path": str(path.resolve()),
        "bytes": path.stat().st_size,
        "admin1": str(geo.admin1) if geo.admin1 else None,
        "alternate_names": str(geo.alternate_names) if geo.alternate_names else None,
    }
