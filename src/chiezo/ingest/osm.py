"""Source kind ``osm``: an OpenStreetMap extract (``.osm.pbf``, ``.osm``) → ``osm_<region>``.

Named features only (``name`` required): shops, amenities, tourism, leisure, historic sites,
places, natural features, offices, admin boundaries — and transport infrastructure by listed
*values* (stations, airports, ports…), never by key, so ``railway=rail`` lines stay out.

One pass with pyosmium (node locations kept in a pyosmium index: in memory for small extracts,
in a file on disk for big ones):

* nodes and ways become documents as they come (a way's point is the mean of its nodes);
* multipolygon relations become documents from their assembled area (the mean of the outer
  rings); other relations, which have no geometry of their own, are skipped;
* admin boundaries of the configured levels are kept as polygons; after the last feature, each
  document's ``area`` is found by **point-in-polygon** against them (a bbox is not enough: it
  puts a town's neighbours inside it).

Each document: ``feature`` values as ``key=value``, ``area``, ``wikidata``, the address, phone,
website and opening hours in the text, every tag in ``extra``; popularity by feature type
(airports and stations above shops), raised by population where tagged.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chiezo.core import db, schema
from chiezo.core.addresses import Address
from chiezo.core.config import Settings
from chiezo.core.errors import InputError
from chiezo.core.geometry import point_in_ring
from chiezo.core.models import Chunk, Doc
from chiezo.core.progress import NullProgress, Progress
from chiezo.ingest.download import mtime
from chiezo.store import generations
from chiezo.store.build import (
    BuildOptions,
    BuildReport,
    GenerationBuilder,
    check_disk,
    check_memory,
)
from chiezo.store.kinds import Attribution, Capabilities, Fetched, SourceKind, option_field

if TYPE_CHECKING:
    from osmium.osm import Area, Node, TagList, Way

    from chiezo.store.source_info import SourceInfo

KIND = "osm"
GENERAL_KEYS = (
    "place",
    "amenity",
    "shop",
    "tourism",
    "historic",
    "leisure",
    "natural",
    "office",
    "craft",
    "man_made",
    "building:use",
)
TRANSPORT_VALUES = {
    "railway": {"station", "halt", "tram_stop", "subway_entrance"},
    "public_transport": {"station"},
    "aeroway": {"aerodrome", "terminal", "heliport"},
    "amenity": {"ferry_terminal", "bus_station"},
    "landuse": {"port"},
    "harbour": {"yes"},
    "station": {"subway", "light_rail", "train"},
}
RANK_BY_FEATURE = {
    "aeroway=aerodrome": 0.9,
    "place=city": 0.9,
    "boundary=administrative": 0.85,
    "railway=station": 0.8,
    "public_transport=station": 0.8,
    "place=town": 0.75,
    "amenity=ferry_terminal": 0.7,
    "amenity=bus_station": 0.65,
    "landuse=port": 0.65,
    "place=suburb": 0.6,
    "place=village": 0.55,
    "railway=halt": 0.55,
    "tourism=museum": 0.5,
    "tourism=attraction": 0.5,
    "natural=peak": 0.5,
    "railway=tram_stop": 0.45,
}
RANK_BY_KEY = {
    "place": 0.45,
    "tourism": 0.4,
    "historic": 0.4,
    "natural": 0.35,
    "leisure": 0.3,
    "amenity": 0.25,
    "shop": 0.2,
    "office": 0.15,
    "craft": 0.15,
    "man_made": 0.15,
}
ALIAS_KEYS = ("name:ja", "name:en", "alt_name", "official_name", "short_name", "int_name")
DISK_INDEX_ABOVE = 256 * 2**20  # extracts larger than this keep node locations on disk
MIN_MEMORY = 1 * 2**30


@dataclass
class OsmOptions:
    admin_levels: tuple[str, ...] = option_field(
        ("4",), help="Admin levels whose boundaries give 'area', comma-separated (e.g. 4,7)."
    )
    fetch: str | None = option_field(
        None,
        metavar="REGION",
        recorded=False,
        for_fetch=True,
        help="Without EXTRACT: a region of the extract server, e.g. asia/japan/kanto.",
    )
    mirror: str | None = option_field(
        None, recorded=False, for_fetch=True, help="Extract server URL (default: Geofabrik)."
    )
    # set by fetch(): what was downloaded and how, so `chiezo rebuild --fetch` can do it again
    fetched: dict | None = option_field(None, cli=False)


@dataclass
class AdminArea:
    name: str
    level: str
    bbox: tuple[float, float, float, float]  # min_lon, min_lat, max_lon, max_lat
    outers: list[list[tuple[float, float]]] = field(default_factory=list)
    inners: list[list[tuple[float, float]]] = field(default_factory=list)

    def contains(self, lon: float, lat: float) -> bool:
        x0, y0, x1, y1 = self.bbox
        if not (x0 <= lon <= x1 and y0 <= lat <= y1):
            return False
        inside = any(point_in_ring(lon, lat, ring) for ring in self.outers)
        return inside and not any(point_in_ring(lon, lat, ring) for ring in self.inners)


def features(tags: TagList) -> list[str]:
    """``key=value`` features of a tagged object; transport only by listed values."""
    out = []
    for key in GENERAL_KEYS:
        value = tags.get(key)
        if value and value != "no":
            out.append(f"{key}={value}")
    for key, values in TRANSPORT_VALUES.items():
        value = tags.get(key)
        if value in values:
            out.append(f"{key}={value}")
    if tags.get("boundary") == "administrative":
        out.append("boundary=administrative")
    return list(dict.fromkeys(out))


def rank_for(found: list[str], tags: TagList) -> float:
    base = max(
        (RANK_BY_FEATURE.get(f, RANK_BY_KEY.get(f.split("=", 1)[0], 0.1)) for f in found),
        default=0.1,
    )
    population = (tags.get("population") or "").replace(",", "").replace(" ", "")
    if population.isdigit() and int(population) > 0:
        base = max(base, min(1.0, math.log10(int(population)) / 7))
    return base


def _tag_dict(tags: TagList) -> dict[str, str]:
    return {t.k: t.v for t in tags}


class _Handler:
    """pyosmium callbacks; built lazily so importing this module does not need osmium."""

    def __init__(self, builder: GenerationBuilder, levels: tuple[str, ...]):
        self.builder = builder
        self.levels = set(levels)
        self.admin: list[AdminArea] = []

    def emit(self, kind: str, oid: int, tags: TagList, point: tuple[float, float] | None) -> None:
        name = tags.get("name")
        if not name or point is None:
            return
        found = features(tags)
        if not found:
            return
        raw = _tag_dict(tags)
        attrs: dict[str, list[str]] = {"feature": found}
        if raw.get("wikidata"):
            attrs["wikidata"] = [raw["wikidata"]]
        if raw.get("admin_level") and "boundary=administrative" in found:
            attrs["admin_level"] = [raw["admin_level"]]
        aliases = [raw[k] for k in ALIAS_KEYS if raw.get(k) and raw[k] != name]
        self.builder.add(
            Doc(
                key=f"{kind[0]}{oid}",
                title=name,
                body=describe_place(name, found, raw),
                opening=describe_place(name, found, raw).split("\n", 1)[0],
                url=f"https://www.openstreetmap.org/{kind}/{oid}",
                rank_score=rank_for(found, tags),
                aliases=aliases,
                attrs=attrs,
                point=point,
                extra={"osm": f"{kind}/{oid}", "tags": raw},
                chunks=[Chunk(text=place_passage(name, found, raw))],
            )
        )

    def node(self, n: Node) -> None:
        if "name" in n.tags and n.location.valid():
            self.emit("node", n.id, n.tags, (n.location.lat, n.location.lon))

    def way(self, w: Way) -> None:
        if "name" not in w.tags:
            return
        lats, lons = [], []
        for node in w.nodes:
            if node.location.valid():
                lats.append(node.location.lat)
                lons.append(node.location.lon)
        if w.is_closed() and len(lats) > 1:
            lats, lons = lats[:-1], lons[:-1]
        point = (sum(lats) / len(lats), sum(lons) / len(lons)) if lats else None
        self.emit("way", w.id, w.tags, point)

    def area(self, a: Area) -> None:
        tags = a.tags
        is_admin = (
            tags.get("boundary") == "administrative" and tags.get("admin_level") in self.levels
        )
        wanted_relation = not a.from_way() and "name" in tags
        if not (is_admin or wanted_relation):
            return
        outers, inners = [], []
        for outer in a.outer_rings():
            outers.append([(n.lon, n.lat) for n in outer if n.location.valid()])
            for inner in a.inner_rings(outer):
                inners.append([(n.lon, n.lat) for n in inner if n.location.valid()])
        outers = [r for r in outers if len(r) >= 3]
        if not outers:
            return
        if is_admin and tags.get("name"):
            lons = [x for r in outers for x, _ in r]
            lats = [y for r in outers for _, y in r]
            self.admin.append(
                AdminArea(
                    tags["name"],
                    tags["admin_level"],
                    (min(lons), min(lats), max(lons), max(lats)),
                    outers,
                    inners,
                )
            )
        if wanted_relation:
            points = [p for r in outers for p in r]
            centre = (
                sum(y for _, y in points) / len(points),
                sum(x for x, _ in points) / len(points),
            )
            self.emit("relation", a.orig_id(), tags, centre)


def describe_place(name: str, found: list[str], tags: dict[str, str]) -> str:
    lines = [f"{name}: " + ", ".join(found)]
    address = " ".join(
        tags[k]
        for k in (
            "addr:postcode",
            "addr:province",
            "addr:city",
            "addr:suburb",
            "addr:street",
            "addr:housenumber",
            "addr:full",
        )
        if tags.get(k)
    )
    for label, value in (
        ("Address", address),
        ("Phone", tags.get("phone") or tags.get("contact:phone")),
        ("Website", tags.get("website") or tags.get("contact:website")),
        ("Opening hours", tags.get("opening_hours")),
        ("Cuisine", tags.get("cuisine")),
        ("Operator", tags.get("operator")),
        ("Description", tags.get("description")),
        ("Population", tags.get("population")),
    ):
        if value:
            lines.append(f"{label}: {value}")
    others = [f"{k}={v}" for k, v in tags.items() if k.startswith("name:")][:20]
    if others:
        lines.append("Names: " + ", ".join(others))
    return "\n".join(lines)


def ingest_osm(
    settings: Settings,
    path: Path,
    name: str | None = None,
    *,
    osm: OsmOptions | None = None,
    options: BuildOptions | None = None,
    progress: Progress | None = None,
) -> BuildReport:
    import osmium

    osm = osm or OsmOptions()
    progress = progress or NullProgress()
    path = Path(path)
    if not path.is_file():
        raise InputError(f"no such OSM file: {path}")
    name = name or "osm_" + path.name.split(".")[0].replace("-latest", "").replace("-", "_")
    size = path.stat().st_size
    check_memory(MIN_MEMORY, name)
    settings.corpus_dir.mkdir(parents=True, exist_ok=True)
    on_disk = size > DISK_INDEX_ABOVE
    # the node index on disk takes ~16 bytes per node, about 2.5x the .pbf
    check_disk(settings.corpus_dir, size * (3 if on_disk else 1), name)
    builder = GenerationBuilder(
        settings,
        name,
        KIND,
        input_identity=_identity(path, osm),
        options=options,
        progress=progress,
        expected_bytes=size,
    )
    with generations.scratch_dir(settings.corpus_dir, "osm-") as tmp, builder:
        handler = _Handler(builder, osm.admin_levels)
        runner = type(
            "Runner",
            (osmium.SimpleHandler,),
            {
                "node": lambda self, n: handler.node(n),
                "way": lambda self, w: handler.way(w),
                "area": lambda self, a: handler.area(a),
            },
        )()
        idx = f"sparse_file_array,{Path(tmp) / 'nodes.idx'}" if on_disk else "flex_mem"
        builder.start_reading(None)
        try:
            runner.apply_file(str(path), locations=True, idx=idx)
        except RuntimeError as exc:
            raise InputError(f"cannot read {path.name} as OpenStreetMap data: {exc}") from exc
        if handler.admin:
            builder.before_ordering(lambda conn: assign_areas(conn, handler.admin))
            builder.before_ordering(lambda conn: store_shapes(conn, handler.admin))
        else:
            builder.warn(
                f"no complete admin boundary of level {','.join(osm.admin_levels)} in "
                f"{path.name}: documents get no 'area'"
            )
        return builder.finish()


def place_passage(name: str, found: list[str], tags: dict[str, str]) -> str:
    """The short text a place is embedded as: what it is in words, where, and what it says of
    itself — so "a museum near the harbour" has something to match. Its admin areas are
    appended by assign_areas()."""
    kinds = ", ".join(
        f"{v.replace('_', ' ')} ({k}={v})" for k, v in (f.split("=", 1) for f in found)
    )
    lines = [f"{name}: {kinds}."]
    for key in ("description", "addr:street", "addr:suburb", "addr:city", "operator", "cuisine"):
        if tags.get(key):
            lines.append(f"{key.removeprefix('addr:').capitalize()}: {tags[key]}")
    return "\n".join(lines)


def assign_areas(conn: db.Connection, areas: list[AdminArea]) -> None:
    """Point-in-polygon for every staged point, against the admin polygons; candidates come
    from an in-memory R*Tree of the polygons' bounding boxes."""
    index = db.open_for_build(Path(":memory:"))
    index.execute("CREATE VIRTUAL TABLE boxes USING rtree(id, x0, x1, y0, y1)")
    index.executemany(
        "INSERT INTO boxes VALUES (?, ?, ?, ?, ?)",
        [(i, a.bbox[0], a.bbox[2], a.bbox[1], a.bbox[3]) for i, a in enumerate(areas)],
    )
    rows: list[tuple[int, str, str]] = []
    for seq, lat, lon in conn.execute("SELECT seq, lat, lon FROM stage.points").fetchall():
        for (i,) in index.execute(
            "SELECT id FROM boxes WHERE x0 <= ? AND x1 >= ? AND y0 <= ? AND y1 >= ?",
            (lon, lon, lat, lat),
        ):
            if areas[i].contains(lon, lat):
                rows.append((seq, "area", areas[i].name))
    conn.executemany("INSERT INTO stage.attrs VALUES (?, ?, ?)", rows)
    index.close()
    within: dict[int, list[str]] = {}
    for seq, _, area in rows:
        within.setdefault(seq, []).append(area)
    conn.executemany(
        "UPDATE stage.chunks SET text = text || ? WHERE seq = ? AND ord = 0 AND spans IS NULL",
        [("\nIn: " + ", ".join(names), seq) for seq, names in within.items()],
    )


SHAPE_DIGITS = 6  # about 0.1 m: OSM's own precision is 7 digits, a boundary needs no more


def store_shapes(conn: db.Connection, areas: list[AdminArea]) -> None:
    """The admin polygons, kept in the source for ``within`` and the map (core/schema.py)."""
    for statement in db.statements(schema.AREA_SHAPES):
        conn.execute(statement)
    conn.executemany(
        "INSERT INTO area_shapes VALUES (?, ?, ?, ?, ?, ?, ?)",
        [
            (
                area.name,
                area.level,
                *area.bbox,
                json.dumps(
                    [
                        [[round(x, SHAPE_DIGITS), round(y, SHAPE_DIGITS)] for x, y in ring]
                        for ring in (*area.outers, *area.inners)
                    ],
                    separators=(",", ":"),
                ),
            )
            for area in areas
        ],
    )


def _identity(path: Path, osm: OsmOptions) -> dict[str, Any]:
    identity = {
        "path": str(path.resolve()),
        "bytes": path.stat().st_size,
        "mtime": mtime(path),
        "admin_levels": list(osm.admin_levels),
    }
    return {**identity, "fetched": osm.fetched} if osm.fetched else identity


def osm_build_room(settings: Settings, size: int) -> tuple[Path, int]:
    """The disk an OSM build of a ``size``-byte extract takes: the source (the download's
    estimate) and, above DISK_INDEX_ABOVE, the node index on disk (~3x the extract) — checked
    before the extract is downloaded."""
    from chiezo.ingest.download import build_room

    folder, needed = build_room(settings.corpus_dir, size)
    return folder, needed + (size * 3 if size > DISK_INDEX_ABOVE else 0)


# -- the kind -------------------------------------------------------------------------------------


class OsmKind(SourceKind):
    name = KIND
    summary = """Build an osm_<region> source from an OpenStreetMap extract (.osm.pbf). Without
    EXTRACT, --fetch REGION downloads it from the extract server (checked against its .md5)."""
    Options = OsmOptions
    argument = "EXTRACT"
    fetches = True
    names_itself = True  # osm_<file name>
    capabilities = Capabilities(places=True)

    def build(
        self,
        settings: Settings,
        inputs: list[Path],
        name: str | None,
        options: OsmOptions,
        build: BuildOptions,
        progress: Progress,
    ) -> BuildReport:
        return ingest_osm(settings, inputs[0], name, osm=options, options=build, progress=progress)

    def fetch(self, settings: Settings, options: OsmOptions, progress: Progress) -> Fetched:
        if not options.fetch:
            raise InputError("give an EXTRACT file or --fetch REGION (e.g. asia/japan)")
        from dataclasses import replace

        from chiezo.ingest.placefetch import fetch_osm, osm_base

        region = options.fetch.rstrip("/").rsplit("/", 1)[-1].replace("-", "_")
        check_memory(MIN_MEMORY, "osm_" + region)  # before any download (the disk: placefetch)
        extract = fetch_osm(
            settings,
            options.fetch,
            mirror=options.mirror,
            progress=progress,
            room_for_build=lambda size: osm_build_room(settings, size),
        )
        record = {
            "input": True,
            "filled": [],
            "options": {
                "fetch": options.fetch,
                "mirror": Address.parse(osm_base(options.mirror)).url,
            },
        }
        return Fetched([extract], replace(options, fetched=record), name="osm_" + region)

    def attribution(self, info: SourceInfo) -> Attribution:
        return Attribution(
            "© OpenStreetMap contributors", "ODbL 1.0", "https://www.openstreetmap.org/copyright"
        )


SOURCE_KIND = OsmKind()
