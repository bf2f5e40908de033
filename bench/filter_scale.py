"""Filter latency at 1M documents: tags, features, boxes, nearest — against a naive plan.

    python bench/filter_scale.py [--size 1000000] [--reuse]

Builds a place-like source (points clustered like cities over Japan; tags and features of
very different sizes), then times, per class, Chiezo's planner (service.filter) and — in the
same run — the naive plan the design notes started from: join every condition, sort by rank,
OFFSET/LIMIT, count(*) separately. Writes JSON to bench/results/.

Target (issue 5): every class p99 < 100 ms. Issue #32: each new parameter against the same
query without it, in the same run (``costs``): ``within`` a polygon p99 ≤ 100 ms, ``facets``
≤ 2× the query.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from chiezo.ops import searching

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core import db  # noqa: E402
from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.models import Doc  # noqa: E402
from chiezo.core.progress import RichProgress  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.ops.requests import FilterRequest  # noqa: E402
from chiezo.store.build import BuildOptions, GenerationBuilder  # noqa: E402

console = Console(width=150)
CITIES = [(35.68, 139.76), (34.69, 135.50), (35.18, 136.91), (43.06, 141.35), (33.59, 130.40)]
FEATURES = [
    ("amenity=restaurant", 0.20),
    ("shop=convenience", 0.10),
    ("amenity=cafe", 0.05),
    ("railway=station", 0.01),
    ("tourism=museum", 0.005),
]
RUNS = 30


def docs(size: int, seed: int = 11):
    rng = random.Random(seed)
    for i in range(size):
        if rng.random() < 0.6:
            lat0, lon0 = rng.choice(CITIES)
            lat, lon = rng.gauss(lat0, 0.15), rng.gauss(lon0, 0.2)
        else:
            lat, lon = rng.uniform(31, 45), rng.uniform(129, 146)
        tags = []
        if rng.random() < 0.25:
            tags.append("big")  # ~250k members
        if rng.random() < 0.03:
            tags.append("medium")
        if i % (size // 300) == 7:
            tags.append("t300")
        if i == size // 2:
            tags.append("one")
        feature = next((f for f, p in FEATURES if rng.random() < p), "shop=other")
        yield Doc(
            key=f"p{i}",
            title=f"地点{i}",
            body=f"地点{i} {feature}",
            rank_score=rng.random() ** 3,
            tags=tags,
            attrs={"feature": [feature]},
            point=(lat, lon),
        )


def build(settings: Settings, size: int) -> float:
    started = time.perf_counter()
    options = BuildOptions(allow_shrink=True, full_validation=False)
    progress = RichProgress(console)
    builder = GenerationBuilder(settings, "places", "bench", options=options, progress=progress)
    with builder:
        builder.start_reading(size)
        for doc in docs(size):
            builder.add(doc)
        builder.finish()
    progress.close()  # the build leaves its display to whoever made it
    return time.perf_counter() - started


def classes(size: int) -> dict[str, list[dict]]:
    rng = random.Random(3)

    def around(spread: float) -> str:
        lat0, lon0 = rng.choice(CITIES)
        lat, lon = lat0 + rng.uniform(-spread, spread), lon0 + rng.uniform(-spread, spread)
        return f"{lat:.4f},{lon:.4f}"

    def box(half: float) -> str:
        lat, lon = (float(v) for v in around(0.05).split(","))
        return f"{lat - half:.4f},{lon - half:.4f},{lat + half:.4f},{lon + half:.4f}"

    n = 20
    return {
        "tag with 250k members": [
            {"tag": ["big"], "offset": rng.randrange(0, 2000)} for _ in range(n)
        ],
        "tag with 1 member": [{"tag": ["one"]} for _ in range(n)],
        "300-member tag, last page": [{"tag": ["t300"], "offset": 290} for _ in range(n)],
        "tag 250k, deep offset": [
            {"tag": ["big"], "offset": rng.randrange(50_000, 200_000)} for _ in range(n)
        ],
        "dense bbox": [{"bbox": box(0.1)} for _ in range(n)],
        "bbox + feature": [{"bbox": box(0.2), "feature": ["railway=station"]} for _ in range(n)],
        "bbox + common feature": [
            {"bbox": box(0.1), "feature": ["amenity=restaurant"]} for _ in range(n)
        ],
        "nearest 10": [{"near": around(0.3)} for _ in range(n)],
        "nearest 10 stations": [
            {"near": around(0.3), "feature": ["railway=station"]} for _ in range(n)
        ],
        "within 2 km": [{"near": around(0.1), "radius_km": 2.0} for _ in range(n)],
        "tag 250k ∩ feature 200k": [
            {"tag": ["big"], "feature": ["amenity=restaurant"]} for _ in range(n)
        ],
    }


def city_polygon(lat0: float, lon0: float, radius: float, vertices: int, rng) -> str:
    """An irregular ring around a point (a city boundary's kind of shape), as GeoJSON."""
    ring = []
    for i in range(vertices):
        angle = 2 * math.pi * i / vertices
        r = radius * (0.7 + 0.3 * rng.random())
        ring.append([round(lon0 + r * math.cos(angle), 5), round(lat0 + r * math.sin(angle), 5)])
    ring.append(ring[0])
    return json.dumps({"type": "Polygon", "coordinates": [ring]}, separators=(",", ":"))


def cost_pairs() -> dict[str, tuple[list[dict], list[dict]]]:
    """Each new parameter (issue #32) against the same query without it: (with, without)."""
    rng = random.Random(5)
    n = 20
    cities = [rng.choice(CITIES) for _ in range(n)]
    polygons = [city_polygon(lat, lon, 0.1, 200, rng) for lat, lon in cities]
    boxes = [_box_of(p) for p in polygons]
    facets = ["tag", "feature"]
    stations = ["railway=station"]
    return {
        "within a city polygon (200 vertices) vs its bbox": (
            [{"within": p} for p in polygons],
            [{"bbox": b} for b in boxes],
        ),
        "within polygon + station vs bbox + station": (
            [{"within": p, "feature": stations} for p in polygons],
            [{"bbox": b, "feature": stations} for b in boxes],
        ),
        "facets: 300-member tag": (
            [{"tag": ["t300"], "facets": facets}] * n,
            [{"tag": ["t300"]}] * n,
        ),
        "facets: bbox + station": (
            [{"bbox": b, "feature": stations, "facets": facets} for b in boxes],
            [{"bbox": b, "feature": stations} for b in boxes],
        ),
        "facets: dense bbox (~30k)": (
            [{"bbox": b, "facets": facets} for b in boxes],
            [{"bbox": b} for b in boxes],
        ),
        "facets: 250k tag (10k counted)": (
            [{"tag": ["big"], "facets": facets}] * n,
            [{"tag": ["big"]}] * n,
        ),
    }


def _box_of(polygon: str) -> str:
    ring = json.loads(polygon)["coordinates"][0]
    lats, lons = [y for _, y in ring], [x for x, _ in ring]
    return f"{min(lats)},{min(lons)},{max(lats)},{max(lons)}"


def time_queries(service: Context, queries: list[dict]) -> tuple[list[float], list]:
    for params in queries[:5]:  # warm-up
        searching.filter(service, FilterRequest.of(source="places", **params))
    samples, results = [], []
    for _ in range(RUNS // len(queries) + 1):
        for params in queries:
            started = time.perf_counter()
            results.append(searching.filter(service, FilterRequest.of(source="places", **params)))
            samples.append((time.perf_counter() - started) * 1000)
    return samples, results


def costs(service: Context) -> dict:
    rows = {}
    for name, (with_it, without) in cost_pairs().items():
        new, found = time_queries(service, with_it)
        old, _ = time_queries(service, without)
        exact = [all(f["exact"] for f in r["facets"].values()) for r in found if "facets" in r]
        rows[name] = {
            "median_total": statistics.median(r["total"] for r in found),
            "p50_ms": round(percentile(new, 50), 2),
            "p99_ms": round(percentile(new, 99), 2),
            "without_p50_ms": round(percentile(old, 50), 2),
            "without_p99_ms": round(percentile(old, 99), 2),
            "p50_ratio": round(percentile(new, 50) / max(percentile(old, 50), 1e-3), 2),
            "facets_exact": (sum(exact) / len(exact)) if exact else None,
        }
        console.print(f"{name}: {rows[name]}")
    table = Table(title="new parameters against the same query without them (ms)")
    for col in ("class", "total", "p50", "p99", "without p50", "without p99", "ratio p50"):
        table.add_column(col, justify="right")
    for name, r in rows.items():
        table.add_row(
            name,
            f"{r['median_total']:,.0f}",
            *(str(r[k]) for k in ("p50_ms", "p99_ms", "without_p50_ms", "without_p99_ms")),
            str(r["p50_ratio"]),
        )
    console.print(table)
    return rows


def naive(conn: db.Connection, params: dict) -> None:
    """Join every condition on docs, ORDER BY rank, OFFSET/LIMIT; count(*) separately."""
    joins, where, args = [], [], []
    for i, tag in enumerate(params.get("tag", [])):
        joins.append(f"JOIN doc_tags t{i} ON t{i}.doc_id = d.doc_id")
        where.append(f"t{i}.tag = ?")
        args.append(tag)
    for i, value in enumerate(params.get("feature", [])):
        joins.append(f"JOIN doc_attrs a{i} ON a{i}.doc_id = d.doc_id")
        where.append(f"a{i}.name = 'feature' AND a{i}.value = ?")
        args.append(value)
    order = "d.rank_score DESC"
    if "bbox" in params or "near" in params:
        joins.append("JOIN doc_points p ON p.doc_id = d.doc_id")
    if "bbox" in params:
        s, w, n, e = (float(v) for v in params["bbox"].split(","))
        where.append("p.lat BETWEEN ? AND ? AND p.lon BETWEEN ? AND ?")
        args += [s, n, w, e]
    if "near" in params:
        lat, lon = (float(v) for v in params["near"].split(","))
        order = f"(p.lat - {lat}) * (p.lat - {lat}) + (p.lon - {lon}) * (p.lon - {lon})"
    sql_where = (" WHERE " + " AND ".join(where)) if where else ""
    base = f"FROM docs d {' '.join(joins)}{sql_where}"
    conn.execute(
        f"SELECT d.doc_id, d.title {base} ORDER BY {order} LIMIT 10 OFFSET ?",
        (*args, params.get("offset", 0)),
    ).fetchall()
    conn.execute(f"SELECT count(*) {base}", args).fetchone()


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--work", default=str(HERE / "work" / "filters"))
    parser.add_argument("--reuse", action="store_true")
    parser.add_argument(
        "--costs-only", action="store_true", help="only the new parameters' costs (#32)"
    )
    args = parser.parse_args()
    settings = Settings(data_dir=Path(args.work), query_timeout=120)
    service = Context(settings)
    report: dict = {"size": args.size}
    if not (args.reuse and "places" in service.library.names()):
        report["build_seconds"] = round(build(settings, args.size), 1)
    conn = service.library.get("places").conn
    report["costs"] = costs(service)
    rows = {}
    for cls, queries in ({} if args.costs_only else classes(args.size)).items():
        for params in queries:  # warm-up
            searching.filter(service, FilterRequest.of(source="places", **params))
        samples, totals, plans = [], [], set()
        for _ in range(RUNS // len(queries) + 1):
            for params in queries:
                started = time.perf_counter()
                result = searching.filter(service, FilterRequest.of(source="places", **params))
                samples.append((time.perf_counter() - started) * 1000)
                totals.append(result["total"])
                plans.add(result.get("plan", "-"))
        naive_samples = []
        with db.deadline(conn, 120):
            for params in queries[:5]:
                started = time.perf_counter()
                naive(conn, params)
                naive_samples.append((time.perf_counter() - started) * 1000)
        rows[cls] = {
            "median_total": statistics.median(totals),
            "plans": sorted(plans),
            "p50_ms": round(percentile(samples, 50), 2),
            "p99_ms": round(percentile(samples, 99), 2),
            "naive_p50_ms": round(percentile(naive_samples, 50), 1),
            "naive_max_ms": round(max(naive_samples), 1),
        }
        console.print(f"{cls}: {rows[cls]}")
    report["classes"] = rows
    table = Table(title=f"filters at {args.size:,} documents (ms)")
    for col in ("class", "median total", "plan", "p50", "p99", "naive p50", "naive max"):
        table.add_column(col, justify="right")
    for cls, r in rows.items():
        table.add_row(
            cls,
            f"{r['median_total']:,.0f}",
            ",".join(r["plans"]),
            str(r["p50_ms"]),
            str(r["p99_ms"]),
            str(r["naive_p50_ms"]),
            str(r["naive_max_ms"]),
        )
    console.print(table)
    out = HERE / "results" / f"filter_scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
