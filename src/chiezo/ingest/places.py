"""The user's own lists of places — shops, AED locations, survey points — as documents for the
source kind ``places``: CSV/TSV/TXT exports, Excel workbooks (.xlsx/.xlsm, every sheet or one),
GeoJSON (.geojson/.json) and GPX.

One document per data row (GeoJSON feature, GPX waypoint):

* **point** from the latitude/longitude columns, found by header in Japanese or English
  (緯度/経度, lat/latitude, lon/lng/longitude, x/y, and forms such as ``緯度（世界測地系）``,
  ``Latitude_WGS84``, ``geo_lat``) and checked by value; columns evidently swapped are read
  swapped, with a warning. Values may be written with full-width digits, a degree sign,
  hemisphere letters (N/S/E/W, 北緯/東経) or as degrees-minutes-seconds (35°40'52"N,
  35度40分52秒). A row whose coordinates are missing, unreadable, out of range or 0,0 is kept
  without a point, and the rows are reported (collapsed into ranges) — never dropped.
* **title** from a name column (名称, 施設名, name…, or ``--title``), else the first text
  column, else ``<file> row N``.
* **key**, stable across rebuilds: ``<file>#<id>`` when an id column (id, No, 番号, #property…)
  has unique values, else ``<file>:<row>``; a workbook's sheet follows the file
  (``aed.xlsx:Sheet1:5``). ``<file>`` is the file name, or its path from the files' common
  folder when two files share a name, so keys stay unique across files.
* **body**: every non-empty column as a ``header: value`` line, so any value is found by
  keyword — but the coordinates, once read into the point; the one chunk is the body; **opening**: ``title — category, address``.
* **attrs**: every column but latitude, longitude and title, named by its header as written
  (spaces collapsed; values over ``MAX_ATTR_CHARS`` stay in the body only). A header the
  filters could not name is changed: ``=`` becomes ``_`` (``attr=name=value`` splits at the
  first ``=``), and the names the filters give a meaning of their own (``feature``, ``area``,
  ``area_alias``) get `` (column)`` appended.
* **feature**: category-like columns (種別, 分類, カテゴリ, 業種, category, type, kind, class,
  amenity…, or ``--feature``; GPX ``type`` and ``sym``) give ``header=value`` features, the
  ``key=value`` form OSM and GeoNames use and the ``feature`` filter requires (``種別=病院``,
  ``amenity=cafe``); a cell listing several (``病院、診療所``, ``洪水・土砂災害``,
  ``洪水/津波``) gives one each.
* **flags**: yes/no columns — two or more whose filled cells hold one yes mark only (``1``,
  ``○``, ``✓``, ``あり``…; ``YES_MARKS``), such as the disaster columns of GSI's
  指定緊急避難場所 (洪水, 津波…, ``1`` or empty) — are one feature key (``flag``, or
  ``--flag-key``) whose values are the headers of the marked columns: ``災害種別=洪水``. A
  marked cell is that feature and one ``KEY: 洪水 / 津波`` body line, not an attribute.
* **area**: from a Japanese address column (住所, 所在地, address), the prefecture when written
  and the municipality (``香川県``, ``高松市``; ``綾歌郡綾川町`` → ``綾川町``). A town,
  village or Tokyo ward is taken only after a prefecture or a district (郡): a bare
  ``番町一丁目`` is a street, not a municipality.
* **url** from a URL column (http/https only).

Rows stream (csv reader, openpyxl read-only); detection reads the first ``DETECT_ROWS`` data
rows. Text files are decoded by the project's one policy (``textdecode``), under its size
limit. A file or sheet without usable coordinates is an InputError naming the headers seen —
except a sheet of a workbook whose other sheets have them (a legend or notes sheet), which is
skipped with a warning; a sheet chosen with ``--sheet`` never is.

``--require-feature KEY`` is recorded with the source: its owner declares that a search or
filter of it around a point must name a value of feature KEY (a shelter is designated per
disaster); store/requirements.py reads it back for the operations. A KEY no document has as a
feature key is refused at build time.
"""

from __future__ import annotations

import csv
import hashlib
import io
import itertools
import json
import math
import os
import re
import unicodedata
import xml.etree.ElementTree as ET
import zipfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chiezo.core.errors import BadQuery, InputError
from chiezo.core.models import Chunk, Doc
from chiezo.ingest.textdecode import Unreadable, read_text
from chiezo.store.kinds import Attribution, Capabilities, SourceKind, option_field, recorded_options

if TYPE_CHECKING:
    from chiezo.core.config import Settings
    from chiezo.core.progress import Progress
    from chiezo.ingest.conversions import DocCache
    from chiezo.store.build import BuildOptions, BuildReport
    from chiezo.store.source_info import SourceInfo

KIND = "places"
TEXT_SUFFIXES = (".csv", ".tsv", ".txt")
WORKBOOK_SUFFIXES = (".xlsx", ".xlsm")
GEOJSON_SUFFIXES = (".geojson", ".json")
SUFFIXES = (*TEXT_SUFFIXES, *WORKBOOK_SUFFIXES, *GEOJSON_SUFFIXES, ".gpx")
DETECT_ROWS = 200  # data rows read to choose columns
HEADER_SEARCH = 20  # non-empty rows searched for the header (title rows above it)
MOST = 0.8  # share of a column's values that must read as degrees in range
MAX_ATTR_CHARS = 200  # a longer value is text to find, not a value to filter by
DEFAULT_FLAG_KEY = "flag"
RESERVED_ATTRIBUTES = ("feature", "area", "area_alias")

Warn = Callable[[str], None]


@dataclass
class PlaceOptions:
    lat: str | None = option_field(
        None, metavar="COLUMN", help="The latitude column (default: found by its header)."
    )
    lon: str | None = option_field(
        None, metavar="COLUMN", help="The longitude column (default: found by its header)."
    )
    title: str | None = option_field(
        None, metavar="COLUMN", help="The column that names each place (default: 名称, name…)."
    )
    feature: tuple[str, ...] = option_field(
        (),
        metavar="COLUMN",
        help="A column whose values are categories (feature filter); "
        "repeatable. Default: 種別, カテゴリ, category, type… columns.",
    )
    sheet: str | None = option_field(
        None, metavar="NAME", help="Only this sheet of a workbook (default: every sheet)."
    )
    flag_key: str | None = option_field(
        None,
        metavar="KEY",
        help="The feature key of yes/no columns (two or more columns marked only 1, ○, ✓, "
        "あり…): each marked column's header is a value, KEY=header. Default: flag; given, "
        "a file whose every row is marked still has its flags.",
    )
    require_feature: str | None = option_field(
        None,
        metavar="KEY",
        help="Declare that a search or filter of this source around a point must name a value "
        "of feature KEY (e.g. 災害種別 for shelters designated per disaster); a KEY no "
        "document has is refused.",
    )


class PlaceTables:
    """The files of one ``places`` source; ``docs(warn)`` reads them, one Doc per row."""

    def __init__(self, paths: Sequence[Path], options: PlaceOptions | None = None) -> None:
        self.options = options or PlaceOptions()
        for option, key in (
            ("--flag-key", self.options.flag_key),
            ("--require-feature", self.options.require_feature),
        ):
            _check_feature_key(option, key)
        resolved = list(dict.fromkeys(Path(p).expanduser().resolve() for p in paths))
        if not resolved:
            raise InputError("no files given", hint=f"give files ending in {', '.join(SUFFIXES)}")
        for path in resolved:
            _check_file(path)
        self.paths = resolved
        self.labels = _labels(resolved)
        self.total_bytes = sum(p.stat().st_size for p in resolved)

    def identity(self) -> dict:
        """What the source was built from, recorded in it and used to rebuild it."""
        newest = max(p.stat().st_mtime for p in self.paths)
        return {
            "path": str(self.paths[0]),
            "paths": [str(p) for p in self.paths],
            "files": len(self.paths),
            "bytes": self.total_bytes,
            "newest_mtime": datetime.fromtimestamp(newest, UTC).isoformat(timespec="seconds"),
            "options": recorded_options(self.options),
        }

    def docs(self, warn: Warn, cache: DocCache | None = None) -> Iterator[Doc]:
        """The documents of every file; with a ``DocCache`` (ingest/conversions.py), a file
        whose bytes, label and options are unchanged is not read again. With
        ``--require-feature KEY``, an InputError after the last when no document has KEY."""
        keys: set[str] = set()
        for path, label in zip(self.paths, self.labels, strict=True):
            if cache is None:
                docs = self._file_docs(path, label, warn)
            else:
                key = self._cache_key(path, label)
                docs = cache.read(key, partial(self._file_docs, path, label), warn)
            for doc in docs:
                keys.update(f.split("=", 1)[0] for f in doc.attrs.get("feature", ()))
                yield doc
        _check_required(self.options.require_feature, keys)

    def _cache_key(self, path: Path, label: str) -> str:
        from chiezo.ingest.conversions import PLACE_READER_VERSION

        digest = hashlib.sha1()
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
        given = json.dumps([label, recorded_options(self.options)], ensure_ascii=False)
        return f"places/{PLACE_READER_VERSION}/{digest.hexdigest()}/{given}"

    def _file_docs(self, path: Path, label: str, warn: Warn) -> Iterator[Doc]:
        suffix = path.suffix.lower()
        if suffix in WORKBOOK_SUFFIXES:
            yield from self._workbook_docs(path, label, warn)
            return
        if suffix in TEXT_SUFFIXES:
            table = _text_table(path, label)
        elif suffix in GEOJSON_SUFFIXES:
            table = _geojson_table(path, label)
        else:
            table = _gpx_table(path, label)
        layout = _layout(table, self.options)
        if isinstance(layout, Unusable):
            raise InputError(layout.message, headers=table.header, hint=layout.hint)
        yield from _table_docs(table, layout, warn)

    def _workbook_docs(self, path: Path, label: str, warn: Warn) -> Iterator[Doc]:
        """Every sheet (or the one chosen); a sheet without coordinates is skipped with a
        warning when another sheet has them, and is an error when none has."""
        unusable: list[tuple[Table, Unusable]] = []
        used = 0
        for table in _workbook_tables(path, label, self.options.sheet):
            layout = _layout(table, self.options)
            if isinstance(layout, Unusable):
                if table.header:  # an empty sheet is nothing to report
                    unusable.append((table, layout))
                continue
            used += 1
            yield from _table_docs(table, layout, warn)
        if not used:
            _raise_unusable(label, unusable)
        for _, layout in unusable:
            warn(f"{layout.message}; sheet skipped")


def _check_feature_key(option: str, key: str | None) -> None:
    """A feature key as the ``feature`` filter can name it: ``=`` ends the key there and a
    comma separates alternatives."""
    if key is not None and (not key.strip() or "=" in key or "," in key):
        raise BadQuery(
            f"{option} takes a feature key without '=' or ',', got {key!r}",
            hint=f"e.g. {option} 災害種別",
        )


def _check_required(required: str | None, keys: set[str]) -> None:
    if required is None or required.strip() in keys:
        return
    raise InputError(
        f"--require-feature {required!r}: no place of this source has a feature {required}=…",
        feature_keys=sorted(keys),
        hint="name one of the feature keys the source has ("
        + (", ".join(sorted(keys)) or "none")
        + "), or set --flag-key to name its yes/no columns",
    )


def _check_file(path: Path) -> None:
    if not path.exists():
        raise InputError(f"no such file: {path}")
    if not path.is_file():
        raise InputError(f"{path} is not a file", hint="name the files of places one by one")
    if path.suffix.lower() not in SUFFIXES:
        raise InputError(
            f"{path.name}: unsupported file type {path.suffix or '(none)'!r}",
            supported=list(SUFFIXES),
            hint=f"place tables are {', '.join(SUFFIXES)}",
        )


def _labels(paths: list[Path]) -> list[str]:
    """The file names, or — when two share a name — paths from the common folder."""
    names = [p.name for p in paths]
    if len(set(names)) == len(names):
        return names
    common = Path(os.path.commonpath([str(p.parent) for p in paths]))
    return [p.relative_to(common).as_posix() for p in paths]


def _raise_unusable(label: str, unusable: list) -> None:
    if not unusable:
        raise InputError(f"{label} has no sheet with cells", hint="check the workbook's sheets")
    if len(unusable) == 1:
        table, layout = unusable[0]
        raise InputError(layout.message, headers=table.header, hint=layout.hint)
    reasons = "; ".join(layout.message for _, layout in unusable)
    raise InputError(
        f"no sheet of {label} has usable coordinates: {reasons}", hint=unusable[0][1].hint
    )


# -- tables: a header and rows, whatever the format ----------------------------------------------


@dataclass
class Row:
    number: int  # as the user sees it: a spreadsheet's row, a CSV record, a feature's ordinal
    cells: list[str]
    point: tuple[float, float] | None = None  # GeoJSON/GPX: from the geometry
    problem: str | None = None  # GeoJSON/GPX: why the geometry gives no point
    noun: str = "row"  # in messages: row, feature, waypoint, route point, track point
    key: str | None = None  # GPX: its own key (points are numbered per kind)


@dataclass
class Table:
    label: str  # the file as keys and messages name it
    sheet: str | None
    header: list[str]
    sample: list[Row]  # the first DETECT_ROWS data rows: detection reads them
    rest: Iterator[Row]  # the rows after the sample
    geometry: bool = False  # GeoJSON/GPX: rows carry their point; no coordinate columns
    feature_headers: tuple[str, ...] = ()  # the format's own category columns (GPX type, sym)

    @property
    def where(self) -> str:
        return f"{self.label} [{self.sheet}]" if self.sheet else self.label

    @property
    def prefix(self) -> str:
        return f"{self.label}:{self.sheet}" if self.sheet else self.label

    def rows(self) -> Iterator[Row]:
        return itertools.chain(self.sample, self.rest)


_BREAKS = re.compile(r"\s*[\r\n\t\v\f\x1c-\x1e\x85\u2028\u2029]+\s*")


def one_line(text: str) -> str:
    """A cell on one line (a ``header: value`` line of the body): line breaks and tabs inside
    it become one space; other spaces (the ideographic space in 株式会社　三和) stay."""
    return _BREAKS.sub(" ", text).strip()


def _cell_text(value: Any) -> str:
    """A spreadsheet value as text: 12.0 → 12, dates in ISO form, on one line."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    if isinstance(value, datetime | date | time):
        return value.isoformat()
    if isinstance(value, list | dict):
        return json.dumps(value, ensure_ascii=False)
    return one_line(str(value))


def _headed(label: str, sheet: str | None, raw: Iterator[tuple[int, list[str]]]) -> Table:
    """The header row — the first of the leading non-empty rows that looks like one — and the
    data rows after it."""
    leading: list[tuple[int, list[str]]] = []
    for number, cells in raw:
        if any(cells):
            leading.append((number, cells))
            if len(leading) >= HEADER_SEARCH:
                break
    if not leading:
        return Table(label, sheet, [], [], iter(()))
    at = _header_position([cells for _, cells in leading])
    after = (Row(n, c) for n, c in itertools.chain(leading[at + 1 :], raw))
    sample = list(itertools.islice(after, DETECT_ROWS))
    width = max(len(r.cells) for r in [Row(0, leading[at][1]), *sample])
    return Table(label, sheet, _header(leading[at][1], width), sample, after)


def _header_position(rows: list[list[str]]) -> int:
    """The first row whose filled cells are at least half the widest row's and mostly text: a
    title row above the table ("AED設置場所一覧", one cell) is passed over."""
    widest = max(sum(1 for c in r if c) for r in rows)
    for index, cells in enumerate(rows):
        filled = [c for c in cells if c]
        texts = sum(1 for c in filled if degrees(c) is None)
        if len(filled) >= max(2, math.ceil(widest / 2)) and texts >= 0.6 * len(filled):
            return index
    return 0


def _header(cells: list[str], width: int) -> list[str]:
    cells = [*cells, *[""] * (width - len(cells))]
    return [" ".join(c.split()) or f"column {i + 1}" for i, c in enumerate(cells)]  # a name


def _text_table(path: Path, label: str) -> Table:
    try:
        text = read_text(path)
    except Unreadable as exc:
        raise InputError(f"{label}: {exc}") from exc
    delimiter = "\t" if path.suffix.lower() == ".tsv" else _sniff_delimiter(text)
    records = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    raw = ((n, [one_line(c) for c in cells]) for n, cells in enumerate(records, 1))
    return _headed(label, None, raw)


def _sniff_delimiter(text: str) -> str:
    """The delimiter that splits the first records into the most columns most consistently;
    comma on a tie."""
    head = text[: 64 * 1024]
    best, best_score = ",", (0.0, 0)
    for delimiter in (",", "\t", ";", "|"):
        rows = [r for r in csv.reader(io.StringIO(head, newline=""), delimiter=delimiter) if r]
        rows = rows[:-1] if len(head) < len(text) and len(rows) > 1 else rows  # cut mid-record
        widths = [len(r) for r in rows[:50]]
        if not widths:
            continue
        common = max(set(widths), key=widths.count)
        score = (widths.count(common) / len(widths), common) if common > 1 else (0.0, 0)
        if score > best_score:
            best, best_score = delimiter, score
    return best


def _workbook_tables(path: Path, label: str, sheet: str | None) -> Iterator[Table]:
    from openpyxl import load_workbook
    from openpyxl.utils.exceptions import InvalidFileException

    try:
        workbook = load_workbook(str(path), read_only=True, data_only=True)
    except (zipfile.BadZipFile, InvalidFileException, KeyError, OSError, ValueError) as exc:
        raise InputError(f"{label} is not a readable Excel workbook ({exc})") from exc
    try:
        sheets = workbook.worksheets
        if sheet is not None:
            sheets = [_chosen_sheet(sheets, sheet, label)]
        for worksheet in sheets:
            rows = worksheet.iter_rows(values_only=True)  # read-only: missing rows come empty
            raw = ((n, [_cell_text(v) for v in row]) for n, row in enumerate(rows, 1))
            yield _headed(label, worksheet.title, raw)
    finally:
        workbook.close()


def _chosen_sheet(sheets: list, name: str, label: str):
    for match in (lambda t: t == name, lambda t: _fold(t) == _fold(name)):
        for worksheet in sheets:
            if match(worksheet.title):
                return worksheet
    titles = [w.title for w in sheets]
    raise InputError(
        f"{label} has no sheet {name!r} (sheets: {', '.join(titles)})",
        sheets=titles,
        hint="name one of the sheets with --sheet",
    )


# -- GeoJSON and GPX: the geometry gives the point -----------------------------------------------

_WGS84_CRS = re.compile(r"(crs84|[^0-9](4326|4612|6668)$)", re.IGNORECASE)


def _geojson_table(path: Path, label: str) -> Table:
    features = _geojson_features(path, label)
    header: dict[str, None] = {}
    if any(isinstance(f, dict) and f.get("id") is not None for f in features):
        header["id"] = None
    for feature in features:
        props = feature.get("properties") if isinstance(feature, dict) else None
        header.update(dict.fromkeys(str(k) for k in (props or {})))
    names = list(header)
    rows = (_geojson_row(n, f, names) for n, f in enumerate(features, 1))
    sample = list(itertools.islice(rows, DETECT_ROWS))
    return Table(label, None, _header(names, len(names)), sample, rows, geometry=True)


def _geojson_features(path: Path, label: str) -> list:
    try:
        data = json.loads(read_text(path))
    except Unreadable as exc:
        raise InputError(f"{label}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"{label} is not valid JSON: {exc}") from exc
    kind = data.get("type") if isinstance(data, dict) else None
    if kind == "Feature":
        return [data]
    if kind != "FeatureCollection" or not isinstance(data.get("features"), list):
        raise InputError(
            f"{label} is not GeoJSON: no FeatureCollection",
            hint='a GeoJSON file is {"type": "FeatureCollection", "features": [...]}',
        )
    crs = _crs_name(data.get("crs"))
    if crs and not _WGS84_CRS.search(str(crs)):
        raise InputError(
            f"{label} declares the coordinate system {crs}; only longitude and "
            "latitude in degrees (WGS 84, RFC 7946) are read",
            hint="export the file as GeoJSON in EPSG:4326",
        )
    return data["features"]


def _crs_name(crs: Any) -> str | None:
    """The name of a (pre-RFC 7946) ``crs`` member, if the file has one."""
    properties = crs.get("properties") if isinstance(crs, dict) else None
    name = properties.get("name") if isinstance(properties, dict) else None
    return str(name) if name else None


def _geojson_row(number: int, feature: Any, names: list[str]) -> Row:
    if not isinstance(feature, dict):
        return Row(number, [""] * len(names), problem="not a feature", noun="feature")
    props = dict(feature.get("properties") or {})
    if feature.get("id") is not None and "id" not in props:
        props["id"] = feature["id"]
    point, problem = _geometry_point(feature.get("geometry"))
    return Row(number, [_cell_text(props.get(n)) for n in names], point, problem, "feature")


def _geometry_point(geometry: Any) -> tuple[tuple[float, float] | None, str | None]:
    """A Point's position, a MultiPoint's first; other geometries give none (and say which)."""
    if not isinstance(geometry, dict):
        return None, "no geometry"
    kind, coordinates = geometry.get("type"), geometry.get("coordinates")
    if kind == "MultiPoint" and isinstance(coordinates, list):
        coordinates = coordinates[0] if coordinates else None
    elif kind != "Point":
        return None, f"a {kind or 'geometry without type'}, not a point"
    if not isinstance(coordinates, list) or len(coordinates) < 2:
        return None, "missing"
    lon, lat = coordinates[0], coordinates[1]
    if not all(isinstance(v, int | float) and not isinstance(v, bool) for v in (lat, lon)):
        return None, "not a number"
    return _checked(float(lat), float(lon))


GPX_COLUMNS = ["name", "type", "sym", "desc", "cmt", "ele", "time", "link", "route", "track"]
GPX_NOUNS = {"wpt": "waypoint", "rtept": "route point", "trkpt": "track point"}


def _gpx_table(path: Path, label: str) -> Table:
    rows = _gpx_rows(path, label)
    sample = list(itertools.islice(rows, DETECT_ROWS))
    return Table(
        label, None, list(GPX_COLUMNS), sample, rows, geometry=True, feature_headers=("type", "sym")
    )


def _gpx_rows(path: Path, label: str) -> Iterator[Row]:
    """Waypoints, and route and track points that have a name, as they come (iterparse: a
    long track is never held whole)."""
    counts = dict.fromkeys(GPX_NOUNS, 0)
    stack: list[str] = []
    names = {"rte": "", "trk": ""}
    try:
        for event, element in ET.iterparse(str(path), events=("start", "end")):
            tag = element.tag.rsplit("}", 1)[-1]
            if event == "start":
                if not stack and tag != "gpx":
                    raise InputError(f"{label} is not GPX: its root element is <{tag}>")
                stack.append(tag)
                continue
            stack.pop()
            if tag == "name" and stack and stack[-1] in names:
                names[stack[-1]] = (element.text or "").strip()
            elif tag in GPX_NOUNS:
                counts[tag] += 1
                row = _gpx_row(element, tag, counts[tag], names, label)
                element.clear()
                if row is not None:
                    yield row
            elif tag in names:
                names[tag] = ""
    except ET.ParseError as exc:
        raise InputError(f"{label} is not well-formed XML: {exc}") from exc


def _gpx_row(
    element: ET.Element, tag: str, number: int, names: dict[str, str], label: str
) -> Row | None:
    values = {c.tag.rsplit("}", 1)[-1]: c for c in element}
    text = {k: one_line(v.text or "") for k, v in values.items()}
    if tag != "wpt" and not text.get("name"):
        return None  # an unnamed track point is a breadcrumb, not a place
    if "link" in values:
        text["link"] = values["link"].get("href", "")
    text["route"] = names["rte"] if tag == "rtept" else ""
    text["track"] = names["trk"] if tag == "trkpt" else ""
    point, problem = _checked_text(element.get("lat", ""), element.get("lon", ""))
    return Row(
        number,
        [text.get(c, "") for c in GPX_COLUMNS],
        point,
        problem,
        GPX_NOUNS[tag],
        key=f"{label}:{tag}:{number}",
    )


# -- degrees ---------------------------------------------------------------------------------------

_HEMISPHERE_WORDS = {"北緯": 1, "東経": 1, "南緯": -1, "西経": -1}
_HEMISPHERE_LETTERS = {"N": 1, "E": 1, "S": -1, "W": -1}
_DECIMAL = re.compile(r"\d+(?:\.\d*)?|\.\d+")
_DECIMAL_COMMA = re.compile(r"\d{1,3},\d+")
_DMS = re.compile(
    r"(?P<d>\d+(?:\.\d+)?)\s*(?:°|度|:|\s)\s*"
    r"(?:(?P<m>\d+(?:\.\d+)?)\s*(?:'|′|’|分|:)?\s*"
    r"(?:(?P<s>\d+(?:\.\d+)?)\s*(?:\"|″|”|''|′′|’’|秒)?)?)?"
)
_MINUS = str.maketrans({"\u2212": "-", "\u2010": "-", "\u2012": "-", "\u2013": "-", "\u30fc": "-"})


def degrees(text: str) -> float | None:
    """``text`` as signed decimal degrees, or None: 35.6812, ３５．６８１２, 35.6812°, N35.68,
    35°40'52"N, 北緯35度40分52秒, -0.5, 35,6812 (a decimal comma). No range check."""
    value = unicodedata.normalize("NFKC", text).translate(_MINUS).strip().upper()
    sign = 1
    for word, hemisphere in _HEMISPHERE_WORDS.items():
        if value.startswith(word):
            value, sign = value[len(word) :].strip(), hemisphere
    if value[:1] in _HEMISPHERE_LETTERS:
        value, sign = value[1:].strip(), _HEMISPHERE_LETTERS[value[:1]]
    elif value[-1:] in _HEMISPHERE_LETTERS:
        value, sign = value[:-1].strip(), _HEMISPHERE_LETTERS[value[-1:]]
    if value[:1] in "+-" and value:
        sign, value = sign * (-1 if value[0] == "-" else 1), value[1:].strip()
    value = value.removesuffix("°").removesuffix("度").strip()
    if _DECIMAL.fullmatch(value):
        return sign * float(value)
    if _DECIMAL_COMMA.fullmatch(value):
        return sign * float(value.replace(",", "."))
    return _dms(value, sign)


def _dms(value: str, sign: int) -> float | None:
    found = _DMS.fullmatch(value)
    if not found:
        return None
    minutes, seconds = float(found["m"] or 0), float(found["s"] or 0)
    if minutes >= 60 or seconds >= 60:
        return None
    return sign * (float(found["d"]) + minutes / 60 + seconds / 3600)


def _checked(lat: float, lon: float) -> tuple[tuple[float, float] | None, str | None]:
    if not (math.isfinite(lat) and math.isfinite(lon)):
        return None, "not a number"
    if not (-90 <= lat <= 90 and -180 <= lon <= 180):
        return None, "out of range"
    if lat == 0 and lon == 0:
        return None, "0,0 (null island)"
    return (lat, lon), None


def _checked_text(lat_text: str, lon_text: str) -> tuple[tuple[float, float] | None, str | None]:
    if not lat_text.strip() or not lon_text.strip():
        return None, "missing"
    lat, lon = degrees(lat_text), degrees(lon_text)
    if lat is None or lon is None:
        return None, "not a number"
    return _checked(lat, lon)


# -- choosing the columns --------------------------------------------------------------------------


@dataclass
class Unusable:
    message: str
    hint: str = "name them with --lat COLUMN --lon COLUMN"


@dataclass
class Layout:
    header: list[str]
    names: list[str]  # attribute name per column
    lat: int | None = None
    lon: int | None = None
    swapped: bool = False
    title: int | None = None
    id: int | None = None
    counter: int | None = None  # the id column, when it only numbers the rows (1, 2, 3 …)
    urls: list[int] = field(default_factory=list)
    address: int | None = None
    features: list[int] = field(default_factory=list)
    flags: list[int] = field(default_factory=list)  # yes/no columns: one feature key
    flag_key: str = DEFAULT_FLAG_KEY
    notes: list[str] = field(default_factory=list)  # said once, before the rows


def _fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _squeezed(header: str) -> str:
    """A header compared as a whole: NFKC, lower case, no spaces (Ｎｏ． → no., 施設 名 → 施設名)."""
    return "".join(_fold(header).split())


def _words(header: str) -> list[str]:
    """A header's words: camelCase and snake_case split, NFKC, lower case (geoLat → geo, lat)."""
    spaced = re.sub(r"(?<=[a-z])(?=[A-Z])", " ", unicodedata.normalize("NFKC", header))
    return re.findall(r"[a-z]+|[0-9]+|[^\W\d_a-z]+", spaced.casefold())


def _layout(table: Table, options: PlaceOptions) -> Layout | Unusable:
    header = table.header
    if not header and not table.geometry:
        return Unusable(f"{table.where} has no rows")
    layout = Layout(header, _attribute_names(header))
    if not table.geometry:
        found = _coordinates(table, options)
        if isinstance(found, Unusable):
            return found
        layout.lat, layout.lon, layout.swapped, layout.notes = found
    taken = {layout.lat, layout.lon}
    layout.id = _id_column(table, taken)
    layout.counter = layout.id if _counts_rows(table, layout.id) else None
    layout.urls = _url_columns(table, taken)
    layout.title = _title_column(table, options, taken | {layout.id, *layout.urls})
    layout.address = _first(header, is_address_header, taken)
    layout.features = _feature_columns(table, options, taken | {layout.title, layout.id})
    taken |= {layout.title, layout.id, layout.address, *layout.urls, *layout.features}
    layout.flags = _flag_columns(table, taken, declared=options.flag_key is not None)
    layout.flag_key = (options.flag_key or DEFAULT_FLAG_KEY).strip()
    if options.flag_key is not None and not layout.flags:
        layout.notes.append(
            f"{table.where} has no yes/no columns (two or more marked only 1, ○, ✓, あり…); "
            f"--flag-key {options.flag_key} gives no feature there"
        )
    return layout


def _find(header: list[str], name: str) -> int | None:
    """The column headed ``name``: as written, else compared without case and width."""
    for match in (lambda h: h == name, lambda h: _fold(h) == _fold(name)):
        for index, text in enumerate(header):
            if match(text):
                return index
    return None


def _no_column(table: Table, name: str, option: str) -> str:
    return f"{table.where} has no column {name!r} for {option} (headers: {', '.join(table.header)})"


def _column(table: Table, name: str, option: str) -> int:
    index = _find(table.header, name)
    if index is None:
        raise InputError(
            _no_column(table, name, option),
            headers=table.header,
            hint=f"{option} takes a header as the file writes it",
        )
    return index


_LAT_EXACT, _LON_EXACT = (
    {"lat", "latitude", "y", "緯度"},
    {"lon", "lng", "long", "longitude", "x", "経度"},
)
_LAT_WORDS, _LON_WORDS = {"lat", "latitude"}, {"lon", "lng", "longitude"}
_OLD_DATUM = ("日本測地系", "tokyo", "旧測地系")


def _axis_rank(header: str, exact: set, words: set, kanji: tuple[str, ...]) -> tuple | None:
    """How well a header names one axis: whole header first, then a word or the kanji inside
    it; a column in the old Tokyo datum after any other. None: not this axis."""
    folded = _squeezed(header)
    if folded in exact:
        return (0, 0)
    if any(k in folded for k in kanji) or words & set(_words(header)):
        return (1, any(o in folded for o in _OLD_DATUM))
    return None


def _candidates(header: list[str], axis: str) -> list[int]:
    mine = (
        (_LAT_EXACT, _LAT_WORDS, ("緯度", "北緯"))
        if axis == "lat"
        else (_LON_EXACT, _LON_WORDS, ("経度", "東経"))
    )
    other = (
        (_LON_EXACT, _LON_WORDS, ("経度", "東経"))
        if axis == "lat"
        else (_LAT_EXACT, _LAT_WORDS, ("緯度", "北緯"))
    )
    ranked = []
    for index, text in enumerate(header):
        rank = _axis_rank(text, *mine)
        if rank is not None and _axis_rank(text, *other) is None:  # not 緯度経度 in one cell
            ranked.append((rank, index))
    return [index for _, index in sorted(ranked)]


def _pick(candidates: list[int], sample: list[Row]) -> int:
    """The best-named column whose values read as degrees; else the best-named one with values
    (the check that follows says what is wrong with them); else the best-named one."""
    for test in (
        lambda c: _values(sample, c) and _share(sample, c, 180) >= MOST,
        lambda c: _values(sample, c),
    ):
        found = next((c for c in candidates if test(c)), None)
        if found is not None:
            return found
    return candidates[0]


def _share(sample: list[Row], column: int, limit: float) -> float:
    """Of the column's non-empty values, the share that reads as degrees within ±limit."""
    values = [r.cells[column] for r in sample if column < len(r.cells) and r.cells[column]]
    if not values:
        return 0.0
    good = sum(1 for v in values if (d := degrees(v)) is not None and abs(d) <= limit)
    return good / len(values)


def _coordinates(table: Table, options: PlaceOptions):
    """(lat column, lon column, swapped, notes) or why there are none."""
    header, sample = table.header, table.sample
    lats, lons = _candidates(header, "lat"), _candidates(header, "lon")
    for option, name in (("--lat", options.lat), ("--lon", options.lon)):
        index = _find(header, name) if name else None
        if name and index is None:
            return Unusable(
                _no_column(table, name, option),
                hint=f"{option} takes a header as the file writes it",
            )
        if index is not None:
            lats, lons = ([index], lons) if option == "--lat" else (lats, [index])
    if not lats or not lons:
        missing = (
            "latitude/longitude columns"
            if not lats and not lons
            else ("latitude column" if not lats else "longitude column")
        )
        return Unusable(f"no {missing} in {table.where} (headers: {', '.join(header)})")
    lat, lon = _pick(lats, sample), _pick(lons, sample)
    if not _values(sample, lat) or not _values(sample, lon):
        return lat, lon, False, []  # nothing to judge yet: each row says for itself
    if _share(sample, lat, 90) >= MOST and _share(sample, lon, 180) >= MOST:
        return lat, lon, False, []
    if _share(sample, lat, 180) >= MOST and _share(sample, lon, 90) >= MOST:
        note = (
            f"{table.where}: column {header[lat]!r} holds longitudes and {header[lon]!r} "
            f"latitudes (values beyond ±90 in {header[lat]!r}); read them swapped"
        )
        return lat, lon, True, [note]
    return Unusable(
        f"columns {header[lat]!r} and {header[lon]!r} of {table.where} hold no "
        f"usable degrees: most values are not numbers within ±90 and ±180 "
        f"(e.g. {_example(sample, lat, lon)})",
        hint="projected coordinates (metres) are not read: export degrees, WGS 84",
    )


def _example(sample: list[Row], lat: int, lon: int) -> str:
    for row in sample:
        pair = [row.cells[c] if c < len(row.cells) else "" for c in (lat, lon)]
        if any(pair):
            return f"{pair[0]!r}, {pair[1]!r} in row {row.number}"
    return "no values in the first rows"


def _values(sample: list[Row], column: int) -> list[str]:
    return [r.cells[column] for r in sample if column < len(r.cells) and r.cells[column]]


def _first(header: list[str], test: Callable[[str], bool], taken: set) -> int | None:
    return next((i for i, h in enumerate(header) if i not in taken and test(h)), None)


_ID_EXACT = {
    "id",
    "no",
    "no.",
    "#",
    "#property",
    "番号",
    "通し番号",
    "識別子",
    "識別番号",
    "管理番号",
    "施設番号",
    "施設id",
    "コード",
    "code",
    "fid",
    "objectid",
    "@id",
    "gid",
}
_NOT_ID = ("電話", "郵便", "fax", "tel", "部屋", "番地", "内線")


def _is_id(header: str) -> bool:
    folded = _squeezed(header)
    if folded in _ID_EXACT:
        return True
    if any(n in folded for n in _NOT_ID):
        return False
    return "id" in _words(header) or folded.endswith("番号")


def _id_column(table: Table, taken: set) -> int | None:
    """An id column whose values, in the rows read, are all present and distinct."""
    for index, text in enumerate(table.header):
        if index in taken or not _is_id(text):
            continue
        values = [r.cells[index] if index < len(r.cells) else "" for r in table.sample]
        if values and all(values) and len(set(values)) == len(values):
            return index
    return None


def _counts_rows(table: Table, index: int | None) -> bool:
    """Whether the column numbers the rows: in the rows read, whole numbers from 0 or 1 up,
    each greater than the one before (gaps where rows were taken out: the AED table counts
    1–31, 33, … to 538 over 455 rows). A row's place in a list says nothing about the place;
    the shared Kagawa tables (yaizu-*.xlsx) head theirs ``#property``, the marker of their
    header row, and every body began ``#property: N``. A code (A-0123, 13201) is kept."""
    if index is None:
        return False
    numbers = [unicodedata.normalize("NFKC", _cell(r.cells, index)) for r in table.sample]
    if not numbers or not all(n.isdecimal() for n in numbers):
        return False
    values = [int(n) for n in numbers]
    return values[0] <= 1 and all(a < b for a, b in itertools.pairwise(values))


_URL = re.compile(r"https?://\S+", re.IGNORECASE)
_URL_HEADERS = {
    "url",
    "uri",
    "website",
    "web",
    "homepage",
    "hp",
    "link",
    "href",
    "ホームページ",
    "ウェブサイト",
    "サイト",
    "リンク",
    "webサイト",
    "contact:website",
}


def _url_columns(table: Table, taken: set) -> list[int]:
    """Columns headed as a URL (the first non-empty one gives a row's url), else the first
    whose values are all http(s) URLs."""

    def urls(index: int) -> bool:
        values = _values(table.sample, index)
        return bool(values) and sum(1 for v in values if _URL.fullmatch(v)) >= MOST * len(values)

    named = [
        i
        for i, text in enumerate(table.header)
        if i not in taken
        and (_squeezed(text) in _URL_HEADERS or {"url", "website"} & set(_words(text)))
    ]
    if named:
        return named
    return [i for i in range(len(table.header)) if i not in taken and urls(i)][:1]


_TITLE_EXACT = [
    "name",
    "title",
    "名称",
    "施設名",
    "名前",
    "店名",
    "店舗名",
    "施設名称",
    "地点名",
    "事業所名",
    "place",
    "placename",
    "label",
    "名",
]
# a reading or translation of the name: the name itself first
_READING = (
    "カナ",
    "かな",
    "フリガナ",
    "ふりがな",
    "よみ",
    "読み",
    "kana",
    "yomi",
    "ローマ字",
    "英語",
    "english",
)
# names of something else than the place: its municipality, its contact person, its line
_NOT_TITLE = (
    "都道府県",
    "市区町村",
    "市町村",
    "区名",
    "町名",
    "県名",
    "市名",
    "担当",
    "氏名",
    "路線",
)


def _title_rank(header: str) -> tuple | None:
    folded = _squeezed(header)
    reading = any(r in folded for r in _READING)
    if folded in _TITLE_EXACT:
        return (0, _TITLE_EXACT.index(folded), 0)
    if ":" in folded and folded.split(":")[0] in _TITLE_EXACT:  # OSM name:en
        return (2, 0, 1)
    if any(n in folded for n in _NOT_TITLE):
        return None
    if "名称" in folded or "name" in _words(header) or "title" in _words(header):
        return (1, reading, 0)
    if folded.endswith("名"):
        return (1, reading, 1)
    return None


def _title_column(table: Table, options: PlaceOptions, taken: set) -> int | None:
    if options.title:
        return _column(table, options.title, "--title")
    ranked = [
        (r, i)
        for i, h in enumerate(table.header)
        if i not in taken and (r := _title_rank(h)) is not None
    ]
    if ranked:
        return min(ranked)[1]
    for index in range(len(table.header)):
        values = _values(table.sample, index)
        if (
            index not in taken
            and values
            and sum(degrees(v) is None for v in values) >= MOST * len(values)
        ):
            return index
    return None


_ADDRESS_EXACT = {"住所", "所在地", "address", "addr", "所在", "住所地", "設置住所", "addr:full"}


def is_address_header(header: str) -> bool:
    folded = _squeezed(header)
    return (
        folded in _ADDRESS_EXACT
        or "住所" in folded
        or "所在地" in folded
        or ("address" in _words(header))
    )


_CATEGORY_EXACT = {
    "種別",
    "分類",
    "種類",
    "カテゴリ",
    "カテゴリー",
    "業種",
    "業態",
    "ジャンル",
    "区分",
    "用途",
    "category",
    "categories",
    "type",
    "kind",
    "class",
    "genre",
    "amenity",
    "shop",
    "tourism",
    "leisure",
    "historic",
    "natural",
    "office",
    "craft",
    "railway",
    "aeroway",
    "public_transport",
    "healthcare",
    "highway",
}
_CATEGORY_KANJI = ("種別", "分類", "種類", "カテゴリ", "業種", "ジャンル")
_CATEGORY_WORDS = {"category", "type", "kind", "class", "genre"}


def _is_category(header: str) -> bool:
    folded = _squeezed(header)
    return (
        folded in _CATEGORY_EXACT
        or any(k in folded for k in _CATEGORY_KANJI)
        or bool(_CATEGORY_WORDS & set(_words(header)))
    )


def _feature_columns(table: Table, options: PlaceOptions, taken: set) -> list[int]:
    """``--feature`` columns; else the format's own (GPX type, sym) or category-like headers
    whose values are short labels, not sentences."""
    if options.feature:
        return list(dict.fromkeys(_column(table, n, "--feature") for n in options.feature))
    found = []
    for index, text in enumerate(table.header):
        if index in taken or not (text in table.feature_headers or _is_category(text)):
            continue
        values = _values(table.sample, index)
        if not values or sum(len(v) for v in values) / len(values) <= 40:
            found.append(index)
    return found


# Yes marks, compared after NFKC and case folding (１ → 1, TRUE → true): the ones Japanese open
# data and spreadsheets write for "applies" — GSI's 指定緊急避難場所 write 1 or leave the cell
# empty; 〇 (the kanji zero) stands for ○ in many workbooks. No "no" mark (0, ×, なし) is read:
# a column of 0 and 1 is as often a count, and a mark outside this set keeps the column an
# attribute.
YES_MARKS = frozenset({"1", "○", "◯", "〇", "●", "✓", "✔", "true", "yes", "有", "あり"})


def _yes_mark(value: str) -> str | None:
    folded = unicodedata.normalize("NFKC", value).strip().casefold()
    return folded if folded in YES_MARKS else None


def _marked_only(sample: list[Row], column: int) -> bool:
    """Whether the column's filled cells, in the rows read, all hold one and the same yes mark."""
    marks = {_yes_mark(v) for v in _values(sample, column)}
    return len(marks) == 1 and None not in marks


def _flag_columns(table: Table, taken: set, *, declared: bool) -> list[int]:
    """Yes/no columns: two or more holding one yes mark only (one such column alone is an
    attribute), and a column empty in the rows read that lies between two of them (火山現象
    where no shelter of the town is designated for volcanoes). Unless ``--flag-key`` declared
    them, columns filled in every row read are not taken: a column of 1 in every row is as
    likely a count (設置台数) as a mark."""
    sample = table.sample
    marked = [i for i in range(len(table.header)) if i not in taken and _marked_only(sample, i)]
    if len(marked) < 2:
        return []
    if not declared and all(_cell(r.cells, i) for r in sample for i in marked):
        return []
    between = range(marked[0], marked[-1] + 1)
    return [i for i in between if i in marked or (i not in taken and not _values(sample, i))]


def _attribute_names(header: list[str]) -> list[str]:
    names = []
    for text in header:
        name = text.replace("=", "_")
        names.append(f"{name} (column)" if name in RESERVED_ATTRIBUTES else name)
    return names


# -- rows into documents ---------------------------------------------------------------------------


@dataclass
class _Problems:
    """Rows without a point, by kind of row and reason, for one warning per kind."""

    rows: dict[str, dict[str, list[int]]] = field(default_factory=dict)  # noun → reason → rows

    def add(self, noun: str, number: int, reason: str) -> None:
        self.rows.setdefault(noun, {}).setdefault(reason, []).append(number)

    def messages(self, where: str) -> Iterator[str]:
        for noun, by_reason in self.rows.items():
            numbers = [n for found in by_reason.values() for n in found]
            reasons = "; ".join(f"{reason}: {ranges(found)}" for reason, found in by_reason.items())
            many = len(numbers) > 1
            yield (
                f"{where}: {noun}{'s' if many else ''} {ranges(numbers)} "
                f"{'have' if many else 'has'} no usable coordinates; kept without a point "
                f"({reasons})"
            )


def ranges(numbers: Iterable[int]) -> str:
    """4, 9, 12–20: consecutive numbers as one range."""
    out: list[str] = []
    ordered = sorted(set(numbers))
    start = prev = None
    for n in [*ordered, None]:
        if n is not None and prev is not None and n == prev + 1:
            prev = n
            continue
        if start is not None:
            out.append(str(start) if start == prev else f"{start}–{prev}")
        start = prev = n
    return ", ".join(out)


def _table_docs(table: Table, layout: Layout, warn: Warn) -> Iterator[Doc]:
    for note in layout.notes:
        warn(note)
    problems = _Problems()
    seen_ids: set[str] = set()
    repeated: list[int] = []
    for row in table.rows():
        if not any(row.cells) and row.point is None:
            continue  # an empty row is layout, not a place (a bare GeoJSON point is one)
        point, problem = _row_point(row, layout)
        if problem:
            problems.add(row.noun, row.number, problem)
        key = row.key or _row_key(table, layout, row, seen_ids, repeated)
        yield _doc(table, layout, row, key, point)
    for message in problems.messages(table.where):
        warn(message)
    if repeated:
        assert layout.id is not None  # only rows keyed by an id column are counted
        warn(
            f"{table.where}: rows {ranges(repeated)} repeat or lack the id in column "
            f"{table.header[layout.id]!r}; keyed by their row number instead"
        )


def _row_point(row: Row, layout: Layout) -> tuple[tuple[float, float] | None, str | None]:
    if layout.lat is None or layout.lon is None:
        return row.point, row.problem
    cell = lambda i: row.cells[i] if i < len(row.cells) else ""  # noqa: E731
    lat, lon = cell(layout.lat), cell(layout.lon)
    return _checked_text(lon, lat) if layout.swapped else _checked_text(lat, lon)


def _row_key(table: Table, layout: Layout, row: Row, seen: set[str], repeated: list[int]) -> str:
    if layout.id is not None:
        value = row.cells[layout.id] if layout.id < len(row.cells) else ""
        if value and value not in seen:
            seen.add(value)
            return f"{table.prefix}#{value}"
        repeated.append(row.number)
    return f"{table.prefix}:{row.number}"


def _doc(
    table: Table, layout: Layout, row: Row, key: str, point: tuple[float, float] | None
) -> Doc:
    cells = row.cells
    header = layout.header
    title = cells[layout.title] if layout.title is not None and layout.title < len(cells) else ""
    if not title:
        title = f"{table.where} {row.noun} {row.number}"
    # the coordinates are the point, not words: as body lines they would be what a snippet shows
    # ("緯度: 34.35215833 経度: …"); unreadable ones stay, so the user sees what was written.
    # A column that only numbers the rows gives the key, not a fact (it stays an attribute);
    # what is not a number there, in a row after those read to choose it, is kept.
    # A marked yes/no cell is said once, as the flag key's line where the first one stands
    # (災害種別: 洪水 / 地震): "洪水: 1" reads as a count to a reader and a model alike.
    flags = _flags(layout, cells)
    flag_line = f"{layout.flag_key}: {' / '.join(flags)}" if flags else ""
    lines = []
    for i, v in enumerate(cells):
        if not v or (point is not None and i in (layout.lat, layout.lon)):
            continue
        if i == layout.counter and unicodedata.normalize("NFKC", v).isdecimal():
            continue
        if i in layout.flags and _yes_mark(v):
            lines.append(flag_line)
            flag_line = ""  # said once
        else:
            lines.append(f"{_name(header, i)}: {v}")
    body = "\n".join(line for line in lines if line)
    features = _features(layout, cells)
    features += [f"{layout.flag_key}={value}" for value in flags if value]
    features = list(dict.fromkeys(features))
    address = _cell(cells, layout.address)
    url = next((u for i in layout.urls if _URL.fullmatch(u := _cell(cells, i))), None)
    summary = ", ".join(
        v for v in (*dict.fromkeys(f.split("=", 1)[1] for f in features), address) if v
    )
    attrs = _attrs(layout, cells)
    if features:
        attrs["feature"] = features
    areas = address_areas(address) if address else []
    if areas:
        attrs["area"] = areas
    extra = {"file": table.label, "row": row.number}
    if table.sheet:
        extra["sheet"] = table.sheet
    return Doc(
        key=key,
        title=title,
        body=body,
        opening=f"{title} — {summary}" if summary else title,
        url=url,
        attrs=attrs,
        point=point,
        chunks=[Chunk(text=body)] if body else [],
        extra=extra,
    )


def _name(header: list[str], index: int) -> str:
    return header[index] if index < len(header) else f"column {index + 1}"


def _cell(cells: list[str], index: int | None) -> str:
    return cells[index] if index is not None and index < len(cells) else ""


def _attrs(layout: Layout, cells: list[str]) -> dict[str, list[str]]:
    """Every column but the coordinates and the title; a marked yes/no cell is left out: its
    feature says the same (``feature=災害種別=洪水`` rather than ``attr=洪水=1``), and eight
    attributes that only ever say 1 would crowd the source's attribute list."""
    skip = {layout.lat, layout.lon, layout.title}
    attrs: dict[str, list[str]] = {}
    for index, value in enumerate(cells):
        if index in layout.flags and _yes_mark(value):
            continue
        if value and index not in skip and len(value) <= MAX_ATTR_CHARS:
            name = layout.names[index] if index < len(layout.names) else f"column {index + 1}"
            attrs.setdefault(name, []).append(value)
    return attrs


def _flags(layout: Layout, cells: list[str]) -> list[str]:
    """The headers of the yes/no columns marked in this row, as feature values (a comma
    would split the filter's value into alternatives)."""
    return [layout.header[i].replace(",", "_") for i in layout.flags if _yes_mark(_cell(cells, i))]


# Between list items: 、 , ; | and / (GSI's 自然災害伝承碑 write 災害種別 洪水・土砂災害 or
# 洪水/土砂災害), and ・ unless katakana stand on both sides: there it joins the words of one
# foreign name (ショッピング・センター), while between kanji it lists (地震・津波).
_KATAKANA = "\u30a1-\u30fa\u30fc\uff66-\uff9f"
_LIST_SEPARATORS = re.compile(rf"[、,，;；|｜/／]|(?<![{_KATAKANA}])[・･]|[・･](?![{_KATAKANA}])")
_OPENING, _CLOSING = "(（[［「『【〔", ")）]］」』】〕"
_BRACKET_OR_SEPARATOR = re.compile(f"[{re.escape(_OPENING + _CLOSING)}]|{_LIST_SEPARATORS.pattern}")


def split_list(text: str) -> list[str]:
    """The items of a cell that lists several (病院、診療所; 洪水・土砂災害); a separator inside
    brackets is part of its item (土砂災害（土石流・がけ崩れ） is one)."""
    items, depth, start = [], 0, 0
    for found in _BRACKET_OR_SEPARATOR.finditer(text):
        char = found.group(0)
        if char in _OPENING:
            depth += 1
        elif char in _CLOSING:
            depth = max(0, depth - 1)
        elif depth == 0:
            items.append(text[start : found.start()])
            start = found.end()
    items.append(text[start:])
    return [item.strip() for item in items if item.strip()]


def _features(layout: Layout, cells: list[str]) -> list[str]:
    """``header=value`` per category value; a cell may list several (病院、診療所)."""
    out = []
    for index in layout.features:
        key = re.sub(r"[=,]", "_", layout.header[index])
        out += [f"{key}={value}" for value in split_list(_cell(cells, index))]
    return list(dict.fromkeys(out))


# -- areas from Japanese addresses -----------------------------------------------------------------

PREFECTURES = (
    "北海道",
    "青森県",
    "岩手県",
    "宮城県",
    "秋田県",
    "山形県",
    "福島県",
    "茨城県",
    "栃木県",
    "群馬県",
    "埼玉県",
    "千葉県",
    "東京都",
    "神奈川県",
    "新潟県",
    "富山県",
    "石川県",
    "福井県",
    "山梨県",
    "長野県",
    "岐阜県",
    "静岡県",
    "愛知県",
    "三重県",
    "滋賀県",
    "京都府",
    "大阪府",
    "兵庫県",
    "奈良県",
    "和歌山県",
    "鳥取県",
    "島根県",
    "岡山県",
    "広島県",
    "山口県",
    "徳島県",
    "香川県",
    "愛媛県",
    "高知県",
    "福岡県",
    "佐賀県",
    "長崎県",
    "熊本県",
    "大分県",
    "宮崎県",
    "鹿児島県",
    "沖縄県",
)
_POSTCODE = re.compile(r"^〒?\s*\d{3}-?\d{4}\s*")
# 郡 (a district) not followed by 市: 小郡市 is a city
_DISTRICT = re.compile(r"^[^\d\s市区町村郡]{1,5}郡(?!市)")
# the city: up to 7 characters and 市, not 市場 (a market) and not the first 市 of 四日市市
_CITY = re.compile(r"^[^\d\s]{1,7}?市(?![市場])")
# a ward, town or village: not the first 町 of 大町町 or 村 of 玉村町
_TOWN = re.compile(r"^[^\d\s]{1,6}?[区町村](?![区町村])")


def address_areas(address: str) -> list[str]:
    """The prefecture (when written) and the municipality at the start of a Japanese address:
    香川県高松市番町 → [香川県, 高松市]; 綾歌郡綾川町萱原 → [綾川町]; 四日市市 and 大町市 whole.
    A ward, town or village only after a prefecture or a district (郡): 番町一丁目 alone is a
    street. Anything else → []."""
    text = _POSTCODE.sub("", unicodedata.normalize("NFKC", address).strip())
    prefecture = next((p for p in PREFECTURES if text.startswith(p)), None)
    rest = text[len(prefecture) :] if prefecture else text
    district = _DISTRICT.match(rest)
    rest = rest[district.end() :] if district else rest
    city = _CITY.match(rest)
    if city is None and (prefecture or district):
        city = _TOWN.match(rest)
    return [a for a in (prefecture, city.group(0) if city else None) if a]


# -- the kind -------------------------------------------------------------------------------------


class PlacesKind(SourceKind):
    name = KIND
    summary = """Build source NAME from your own lists of places — CSV/TSV, Excel (every sheet or
    --sheet), GeoJSON points, GPX waypoints: one document per row, its coordinates from the
    latitude/longitude columns (found by header: 緯度/経度, lat/lon…, or --lat/--lon),
    category columns as features, every other column an attribute."""
    Options = PlaceOptions
    argument = "FILE"
    many_inputs = True
    build_flags = ("allow_shrink", "min_docs", "language")
    capabilities = Capabilities(places=True, watchable=True)

    def build(
        self,
        settings: Settings,
        inputs: list[Path],
        name: str | None,
        options: PlaceOptions,
        build: BuildOptions,
        progress: Progress,
    ) -> BuildReport:
        if name is None:  # a folder's or a file's source takes no name of its own
            raise BadQuery(f"name the {KIND} source (--name)")
        from chiezo.ingest.conversions import DocCache
        from chiezo.store.build import GenerationBuilder

        tables = PlaceTables(inputs, options)
        builder = GenerationBuilder(
            settings,
            name,
            KIND,
            input_identity=tables.identity(),
            options=build,
            progress=progress,
            expected_bytes=tables.total_bytes,
        )
        cache = DocCache(settings.data_dir / "cache")
        try:
            with builder:
                builder.start_reading(None)
                for doc in tables.docs(builder.warn, cache):
                    builder.add(doc)
                report = builder.finish()
        finally:
            cache.close()
        report.conversions = {"converted": cache.misses, "reused": cache.hits}
        return report

    def attribution(self, info: SourceInfo) -> Attribution:
        paths = info.input.get("paths") or [info.input.get("path") or ""]
        named = ", ".join(Path(p).name for p in paths[:3]) + (" …" if len(paths) > 3 else "")
        return Attribution(f"your places ({named})" if named else "your places")


SOURCE_KIND = PlacesKind()
