"""Geocoding latency at 1M place documents, against a plain title lookup in the same run.

    python bench/geocode_scale.py [--size 1000000] [--reuse]

Builds two place sources the way bench/filter_scale.py builds its one (GenerationBuilder,
seeded, no word index: geocoding reads titles and attributes only):

* ``gazetteer``, GeoNames-like: the 47 prefectures (ingest/data/jp_prefectures.tsv), ~1,900
  municipalities whose made-up names repeat across prefectures as 府中市 does (romanised
  aliases: Kitayama), and 30 districts in each, from a pool where 本町 is in most cities and
  中央 in many — ``area``/``area_alias`` the prefecture only, as GeoNames' admin1, so a
  district is found inside its city by distance;
* ``shops``, a place table: the rest, each with an address column (住所) written in four
  styles (一丁目 or 1丁目 or 1-, 番/号, full-width digits, with or without the prefecture),
  ``area`` [prefecture when written, municipality] as ingest/places.py reads it, and names
  that repeat: 20 chains (the largest ~80,000 stores) and ~9,000 names of ~100 stores each.

Times ``geocode`` per class of input (the sources as a server passes them) and, in the same
run, the baseline: the titles-index lookup ``browse.find_doc`` makes for a title (the whole
input, in every source) — the floor any name lookup pays; for addresses also the naive plan
(``LIKE`` over the address column). Writes JSON to bench/results/.

Target: every class p99 ≤ 20 ms.
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from chiezo.core import db  # noqa: E402
from chiezo.core.config import Settings  # noqa: E402
from chiezo.core.models import Doc  # noqa: E402
from chiezo.core.progress import RichProgress  # noqa: E402
from chiezo.core.textnorm import normalise_title  # noqa: E402
from chiezo.ingest.geonames import jp_prefectures  # noqa: E402
from chiezo.search.filters import haversine_km  # noqa: E402
from chiezo.search.geocode import geocode  # noqa: E402
from chiezo.store.build import BuildOptions, GenerationBuilder  # noqa: E402
from chiezo.store.library import Library  # noqa: E402
from filter_scale import percentile  # noqa: E402

console = Console(width=160)
SAMPLES = 100  # timed geocodes per class
QUERIES = 20  # distinct inputs per class
# kanji of made-up place names, with their readings; none of 市区町村郡 (the suffixes)
KANJI = dict(
    re.findall(
        r"(\S)([a-z]+)",
        "北kita 南minami 東higashi 西nishi 山yama 川kawa 田ta 中naka 本moto 大oo 小ko 高taka "
        "松matsu 原hara 野no 島shima 沢sawa 岡oka 宮miya 崎saki 井i 石ishi 木ki 森mori 谷tani "
        "橋hashi 浜hama 坂saka 江e 吉yoshi 富tomi 長naga 平hira 福fuku 豊toyo 若waka 桜sakura "
        "藤fuji 清kiyo",
    )
)
COMMON_DISTRICTS = [("本町", 0.6), ("中央", 0.4), ("栄町", 0.3), ("旭町", 0.25), ("緑町", 0.2)]
COMMON_DISTRICTS += [("幸町", 0.15), ("元町", 0.15), ("新町", 0.12), ("末広町", 0.1), ("寿町", 0.1)]
CHAINS = [
    a + b
    for a in ("セブン", "ファミリー", "ローズ", "ミニ")
    for b in ("マート", "ストア", "ショップ", "商店", "薬局")
]
CATEGORIES = re.findall(r"\S+", "医院 歯科 薬局 書店 食堂 商店 美容室 接骨院 不動産 工務店")
WIDE = str.maketrans("0123456789-", "０１２３４５６７８９－")
KANJI_DIGITS = "〇一二三四五六七八九"


def kanji_number(n: int) -> str:
    return KANJI_DIGITS[n] if n < 10 else "十" + (KANJI_DIGITS[n - 10] if n > 10 else "")


class World:
    """The made-up places: prefectures → municipalities → districts, with points."""

    def __init__(self, seed: int = 5):
        rng = random.Random(seed)
        self.prefectures = []
        for code, p in sorted(jp_prefectures().items()):
            self.prefectures.append(
                {
                    "code": code,
                    "name": p.japanese,
                    "names": [n for n in (p.short, p.english) if n],
                    "point": (rng.uniform(31.5, 44.0), rng.uniform(130.0, 145.0)),
                }
            )
        self.municipalities = []
        for pref in self.prefectures:
            for _ in range(rng.randint(25, 55)):
                a, b = rng.sample(list(KANJI), 2)
                suffix = rng.choices("市町村", weights=(5, 4, 1))[0]
                lat, lon = pref["point"]
                point = (rng.gauss(lat, 0.3), rng.gauss(lon, 0.3))
                self.municipalities.append(
                    {
                        "pref": pref,
                        "name": a + b + suffix,
                        "latin": (KANJI[a] + KANJI[b]).title(),
                        "point": point,
                        "weight": rng.paretovariate(1.2),
                        "districts": self._districts(rng, point),
                    }
                )
        pool = list(KANJI)
        self.shop_names = [a + b + c for a in pool[:30] for b in pool[:30] for c in CATEGORIES]
        self.rng = rng

    def _districts(self, rng: random.Random, point: tuple[float, float]) -> list[dict]:
        names = [n for n, p in COMMON_DISTRICTS if rng.random() < p]
        while len(names) < 30:
            a, b = rng.sample(list(KANJI), 2)
            name = a + b + rng.choice(("町", "", "台", "通"))
            if name not in names:
                names.append(name)
        lat, lon = point
        return [
            {
                "name": n,
                "latin": _latin(n),
                "point": (rng.gauss(lat, 0.03), rng.gauss(lon, 0.03)),
            }
            for n in names
        ]


READINGS = {"本町": "Honcho", "中央": "Chuo", "栄町": "Sakaemachi", "旭町": "Asahimachi"}
READINGS |= {"緑町": "Midorimachi", "幸町": "Saiwaicho", "元町": "Motomachi", "新町": "Shinmachi"}
READINGS |= {"末広町": "Suehirocho", "寿町": "Kotobukicho"}
SUFFIX_READINGS = {"町": "machi", "台": "dai", "通": "dori"}


def _latin(name: str) -> str:
    if name in READINGS:
        return READINGS[name]
    return "".join(KANJI.get(c) or SUFFIX_READINGS.get(c, "") for c in name).title()


def gazetteer(world: World):
    rng = random.Random(7)
    for pref in world.prefectures:
        yield Doc(
            key=pref["code"],
            title=pref["name"],
            body=pref["name"],
            rank_score=1.0,
            aliases=pref["names"],
            attrs={"feature": ["A=ADM1"], "area": [pref["name"]], "area_alias": pref["names"]},
            point=pref["point"],
        )
    for i, m in enumerate(world.municipalities):
        pref = m["pref"]
        yield Doc(
            key=f"m{i}",
            title=m["name"],
            body=m["name"],
            rank_score=min(m["weight"] / 20, 0.99),
            aliases=[m["latin"]],
            attrs={"feature": ["A=ADM2"], "area": [pref["name"]], "area_alias": pref["names"]},
            point=m["point"],
        )
        for j, d in enumerate(m["districts"]):
            yield Doc(
                key=f"m{i}d{j}",
                title=d["name"],
                body=d["name"],
                rank_score=rng.random() * 0.3,
                aliases=[d["latin"]],
                attrs={
                    "feature": ["P=PPLX"],
                    "area": [pref["name"]],
                    "area_alias": pref["names"],
                },
                point=d["point"],
            )


def address(pref: str, muni: str, district: str, chome: int, a: int, b: int, style: int) -> str:
    if style == 0:
        return f"{pref}{muni}{district}{kanji_number(chome)}丁目{a}-{b}"
    if style == 1:
        return f"{muni}{district}{chome}丁目{a}番{b}号"
    if style == 2:
        return f"{pref}{muni}{district}{chome}-{a}-{b}"
    return f"{muni}{district}{chome}-{a}-{b}".translate(WIDE)


def shops(world: World, count: int, samples: list[dict]):
    """``count`` shops; those whose index is in ``samples`` have their parts recorded there."""
    rng = random.Random(9)
    weights = [m["weight"] for m in world.municipalities]
    chain_weights = [1 / (k + 1) for k in range(len(CHAINS))]
    wanted = {s["index"]: s for s in samples}
    for i in range(count):
        m = rng.choices(world.municipalities, weights)[0]
        d = rng.choice(m["districts"])
        chome, a, b = rng.randint(1, 5), rng.randint(1, 30), rng.randint(1, 20)
        style = rng.randrange(4)
        pref = m["pref"]["name"]
        if rng.random() < 0.3:
            title = rng.choices(CHAINS, chain_weights)[0]
        else:
            title = rng.choice(world.shop_names)
        written = address(pref, m["name"], d["name"], chome, a, b, style)
        lat, lon = d["point"]
        point = (rng.gauss(lat, 0.005), rng.gauss(lon, 0.005))
        if i in wanted:
            wanted[i].update(
                pref=pref, muni=m["name"], district=d["name"], chome=chome, a=a, b=b, style=style
            )
            wanted[i].update(title=title, point=point, district_point=d["point"])
        yield Doc(
            key=f"s{i}",
            title=title,
            body=f"{title}\n住所: {written}",
            rank_score=rng.random() ** 3,
            attrs={
                "住所": [written],
                "area": [pref, m["name"]] if style in (0, 2) else [m["name"]],
                "feature": [f"種別={title[-2:]}"],
            },
            point=point,
        )


def build(settings: Settings, name: str, docs, size: int | None) -> float:
    started = time.perf_counter()
    options = BuildOptions(allow_shrink=True, full_validation=False, word_index=False)
    progress = RichProgress(console)
    builder = GenerationBuilder(settings, name, "bench", options=options, progress=progress)
    with builder:
        builder.start_reading(size)
        for doc in docs:
            builder.add(doc)
        builder.finish()
    progress.close()
    return time.perf_counter() - started


Check = Callable[[Any], bool]  # on the best candidate (None when there is none)


def near(point: tuple[float, float], km: float, **fields) -> Check:
    """The best candidate lies within ``km`` of ``point`` and has these field values."""

    def check(best) -> bool:
        if best is None or any(getattr(best, k) != v for k, v in fields.items()):
            return False
        return haversine_km(best.lat, best.lon, *point) <= km

    return check


def any_of(checks: list[Check]) -> Check:
    """Right when the input is ambiguous (two 沢原 with a 橋江台 each): any of the places."""
    return lambda best: any(check(best) for check in checks)


def nothing(best) -> bool:
    return best is None


def classes(world: World, samples: list[dict]) -> dict[str, list[tuple[str, Check]]]:
    """Inputs per class, each with what a right answer is."""
    rng = random.Random(3)
    munis = world.municipalities
    by_name: dict[str, int] = {}
    for m in munis:
        by_name[m["name"]] = by_name.get(m["name"], 0) + 1
    shared = [m for m in munis if by_name[m["name"]] > 1]
    honcho = [m for m in munis if m["districts"][0]["name"] == "本町"]
    named: dict[str, list[dict]] = {}  # a municipality's name or reading → those so named
    for m in munis:
        named.setdefault(m["name"], []).append(m)
        named.setdefault(m["latin"], []).append(m)

    def districts_of(name: str, district: str) -> Check:
        return any_of(
            [
                near(d["point"], 0.1, title=district)
                for m in named[name]
                for d in m["districts"]
                if d["name"] == district
            ]
        )

    def pick(items, n=QUERIES):
        return [rng.choice(items) for _ in range(n)]

    def restyled(s: dict) -> str:
        style = (s["style"] + 1 + rng.randrange(3)) % 4  # written another way than stored
        return address(s["pref"], s["muni"], s["district"], s["chome"], s["a"], s["b"], style)

    def in_muni(m: dict, d: dict, suffix: str = "") -> tuple[str, Check]:
        text = f"{m['pref']['name']}{m['name']}{d['name']}{suffix}"
        return text, near(d["point"], 0.1, title=d["name"], level="district")

    out: dict[str, list[tuple[str, Check]]] = {}
    out["prefecture"] = [
        (p["name"], near(p["point"], 0.1, level="prefecture")) for p in pick(world.prefectures)
    ]
    out["municipality in prefecture"] = [
        (m["pref"]["name"] + m["name"], near(m["point"], 0.1, title=m["name"])) for m in pick(munis)
    ]
    out["municipality, shared name"] = [
        (m["name"], lambda best, name=m["name"]: best is not None and best.title == name)
        for m in pick(shared)
    ]
    out["district 本町 (in most cities)"] = [in_muni(m, m["districts"][0]) for m in pick(honcho)]
    out["district + 丁目"] = [
        in_muni(m, rng.choice(m["districts"]), f"{kanji_number(rng.randint(1, 5))}丁目")
        for m in pick(munis)
    ]
    out["full address (exact)"] = [
        (restyled(s), near(s["point"], 0.01, title=s["title"], level="exact"))
        for s in samples[:QUERIES]
    ]
    out["address, no such number"] = [
        (
            f"{s['pref']}{s['muni']}{s['district']}{s['chome']}丁目99-99",
            near(s["district_point"], 3, level="district"),
        )
        for s in samples[QUERIES : 2 * QUERIES]
    ]
    # a store of the chain near the city, or, where it has none, the city and the name unmatched
    out["chain name in a city (80k stores)"] = [
        (
            m["name"] + CHAINS[0],
            any_of(
                [near(o["point"], 40, title=CHAINS[0]) for o in named[m["name"]]]
                + [near(o["point"], 0.1, unmatched=CHAINS[0]) for o in named[m["name"]]]
            ),
        )
        for m in pick(munis)
    ]
    out["shop name alone (~100 stores)"] = [
        (s["title"], lambda best, t=s["title"]: best is not None and best.title == t)
        for s in samples[:QUERIES]
    ]
    out["Latin: municipality, prefecture"] = [
        (
            f"{m['latin']}, {m['pref']['names'][-1]}",
            any_of(
                [
                    near(o["point"], 0.1, title=o["name"])
                    for o in named[m["latin"]]
                    if o["pref"] is m["pref"]
                ]
            ),
        )
        for m in pick(munis)
    ]
    latin_districts = [(m, rng.choice(m["districts"])) for m in pick(munis)]
    out["Latin: district, municipality"] = [
        (f"{d['latin']}, {m['latin']}", districts_of(m["latin"], d["name"]))
        for m, d in latin_districts
    ]
    out["nonsense (Latin)"] = [
        ("".join(rng.choice("qxzjvkw") for _ in range(rng.randint(5, 30))), nothing)
        for _ in range(QUERIES)
    ]
    out["nonsense (1000 kanji)"] = [
        ("".join(rng.choice("市区町村郡丁目本中北山川") for _ in range(1000)), nothing)
        for _ in range(QUERIES)
    ]
    out["digits / emoji"] = [
        (t, nothing) for t in ["12345", "🙂🙂🙂", "0-0-0", "🏯 1", "---"] * (QUERIES // 5)
    ]
    return out


def title_lookup(sources, text: str) -> None:
    """The baseline: browse.find_doc's exact-title lookup of the whole input, per source."""
    norm = normalise_title(text)
    for source in sources:
        source.conn.execute(
            "SELECT doc_id FROM titles WHERE norm = ? ORDER BY is_alias, doc_id LIMIT 50", (norm,)
        ).fetchall()


def naive_address(conn: db.Connection, text: str) -> None:
    """The plan without an address index: every address compared."""
    conn.execute(
        "SELECT doc_id FROM doc_attrs WHERE name = '住所' AND value LIKE ? LIMIT 5",
        (f"%{text[-8:]}%",),
    ).fetchall()


def timed(fn, inputs: list[str], samples: int) -> list[float]:
    out = []
    for k in range(samples):
        text = inputs[k % len(inputs)]
        started = time.perf_counter()
        fn(text)
        out.append((time.perf_counter() - started) * 1000)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--work", default=str(HERE / "work" / "geocode"))
    parser.add_argument("--reuse", action="store_true")
    args = parser.parse_args()
    settings = Settings(data_dir=Path(args.work), query_timeout=120)
    library = Library(settings)
    world = World()
    gazetteer_docs = 47 + sum(1 + len(m["districts"]) for m in world.municipalities)
    shop_count = args.size - gazetteer_docs
    sidecar, built = Path(args.work) / "samples.json", Path(args.work) / "build.json"
    report: dict = {"size": args.size, "gazetteer": gazetteer_docs, "shops": shop_count}
    if not (args.reuse and sidecar.exists() and {"gazetteer", "shops"} <= set(library.names())):
        rng = random.Random(1)
        samples = [{"index": i} for i in rng.sample(range(shop_count), 2 * QUERIES)]
        report["build_seconds"] = {
            "gazetteer": round(build(settings, "gazetteer", gazetteer(world), gazetteer_docs), 1),
            "shops": round(build(settings, "shops", shops(world, shop_count, samples), None), 1),
        }
        sidecar.write_text(json.dumps(samples, ensure_ascii=False))
        built.write_text(json.dumps(report["build_seconds"]))
    samples = json.loads(sidecar.read_text())
    if built.exists():  # a reused build's, as measured when it was made
        report["build_seconds"] = json.loads(built.read_text())
    sources = [library.get("gazetteer"), library.get("shops")]
    rows = {}
    for cls, cases in classes(world, samples).items():
        inputs = [text for text, _ in cases]
        for text in inputs:  # warm-up: the pages each input reads, once
            geocode(sources, text)
        results = [geocode(sources, text) for text in inputs]
        right = sum(1 for r, (_, check) in zip(results, cases, strict=True) if check(r.best))
        found = sum(1 for r in results if r.candidates)
        levels = sorted({r.best.level for r in results if r.best})
        ms = timed(lambda t: geocode(sources, t), inputs, SAMPLES)
        base = timed(lambda t: title_lookup(sources, t), inputs, SAMPLES)
        row = {
            "example": inputs[0][:40],
            "best": f"{results[0].best.level} {results[0].best.title}" if results[0].best else "-",
            "found": f"{found}/{len(inputs)}",
            "right": f"{right}/{len(inputs)}",
            "levels": levels,
            "p50_ms": round(percentile(ms, 50), 2),
            "p99_ms": round(percentile(ms, 99), 2),
            "max_ms": round(max(ms), 2),
            "title_p50_ms": round(percentile(base, 50), 3),
            "title_p99_ms": round(percentile(base, 99), 3),
        }
        if "address (exact)" in cls or "no such number" in cls:
            shops_conn = sources[1].conn
            with db.deadline(shops_conn, 120):
                naive = timed(functools.partial(naive_address, shops_conn), inputs, 3)
            row["naive_like_ms"] = round(statistics.median(naive), 1)
        rows[cls] = row
        console.print(f"{cls}: {row}")
    report["classes"] = rows
    table = Table(title=f"geocode at {args.size:,} place documents (ms)")
    for col in ("class", "example", "best", "right", "p50", "p99", "title p50", "title p99"):
        table.add_column(
            col, justify="right" if col not in ("class", "example", "best") else "left"
        )
    for cls, r in rows.items():
        table.add_row(
            cls,
            r["example"],
            r["best"],
            r["right"],
            str(r["p50_ms"]),
            str(r["p99_ms"]),
            str(r["title_p50_ms"]),
            str(r["title_p99_ms"]),
        )
    console.print(table)
    out = HERE / "results" / f"geocode_scale-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(report, ensure_ascii=False, indent=2))
    console.print(f"wrote {out}")


if __name__ == "__main__":
    main()
