"""Disk (issue 19, item 3): the embedding cache's compact layout and its conversion from the
first one, the previous generation an ingest keeps, and ``chiezo gc`` / the admin page's disk
section — real sources, real SQLite caches, the real CLI and a real server. And what builds
killed with -9 and stopped imports leave under ``corpus/`` (13 kills, 13 scratch folders; 10
refused imports, 10 empty folders): ``chiezo gc`` reclaims it, nothing of it is listed as a
source, and what a running build uses is never touched — real builds of the fixtures in real
processes, killed or stopped with real signals."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pytest
from click.testing import CliRunner

import chiezo
from chiezo.core.config import Settings
from chiezo.core.errors import BuildError
from chiezo.ingest.geonames import GeoNamesOptions, Lookups
from chiezo.ingest.wikilookups import WikiLookups
from chiezo.ops import building, maintenance, searching
from chiezo.ops.context import Context
from chiezo.ops.jobs import exclusive
from chiezo.ops.requests import SearchRequest
from chiezo.store import generations, vector_cache
from chiezo.store.embed import text_hash
from chiezo.store.vector_cache import VectorCache
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app

from helpers import (
    SCREENSHOTS,
    RunningServer,
    browser_page,
    build_docs,
    chromium,
    data_file,
    stored_vectors,
    write_files,
)

MODEL = "use-m"
FILES = {
    "flood.md": "---\ntitle: 昭和28年の大水害\n---\n梅雨前線による豪雨で川が氾濫し、市街地の大半が"
    "浸水した。復旧には半年を要した。\n",
    "railway.md": "---\ntitle: 鉄道の開業\n---\n明治五年、新橋と横浜の間で蒸気機関車が走り始めた。"
    "所要時間はおよそ五十分だった。\n",
    "london.md": "---\ntitle: Great Fire of London\n---\nIn September 1666 a blaze that began "
    "in a bakery on Pudding Lane swept through the City for four days.\n",
}
LEGACY_TABLE = "CREATE TABLE vec (hash TEXT PRIMARY KEY, v BLOB NOT NULL) WITHOUT ROWID"


def _vectors(count: int, dim: int = 512, seed: int = 7) -> list[tuple[str, bytes]]:
    """(text hash, float16 unit vector) pairs as the embedder stores them."""
    rng = np.random.default_rng(seed)
    matrix = rng.standard_normal((count, dim)).astype(np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    return [
        (text_hash(MODEL, f"passage {i}"), row.astype("<f2").tobytes())
        for i, row in enumerate(matrix)
    ]


def _write_legacy(path, rows) -> None:
    """A cache file in the first layout, as Chiezo before issue 19 wrote it."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(LEGACY_TABLE)
    conn.executemany("INSERT INTO vec VALUES (?, ?)", rows)
    conn.commit()
    conn.close()


# -- the embedding cache -------------------------------------------------------------------------


@pytest.mark.slow
def test_the_cache_takes_little_more_than_its_vectors(settings):
    rows = _vectors(3000)
    cache = VectorCache(settings, MODEL)
    for at in range(0, len(rows), 64):  # as embed_source writes it: a commit per batch
        cache.put(rows[at : at + 64])
    cache.close()
    raw = sum(len(v) for _, v in rows)
    assert cache.path.name == "use-m.f16.db"
    assert cache.path.stat().st_size <= 1.3 * raw  # the first layout took 4.6×
    legacy = settings.data_dir / "legacy.db"
    _write_legacy(legacy, rows)
    assert legacy.stat().st_size > 3 * raw  # what the layout change is about


def test_a_lookup_probes_the_key_index_whatever_the_cache_holds(settings):
    cache = VectorCache(settings, MODEL)
    rows = _vectors(500)
    cache.put(rows)
    plan = " ".join(
        r[3]
        for r in cache.conn.execute(
            "EXPLAIN QUERY PLAN SELECT key, v FROM vectors WHERE key IN (?, ?)", (b"a", b"b")
        )
    )
    assert "USING INDEX" in plan and "SCAN" not in plan
    wanted = [rows[3][0], rows[400][0], text_hash(MODEL, "never embedded")]
    assert cache.get(wanted) == {rows[3][0]: rows[3][1], rows[400][0]: rows[400][1]}
    assert cache.known(wanted) == {rows[3][0], rows[400][0]}
    cache.close()


def test_a_key_keeps_its_first_vector_when_builds_write_at_once(settings):
    rows = _vectors(400)
    others = _vectors(400, seed=8)  # the same keys, other vectors
    caches = [VectorCache(settings, MODEL) for _ in range(4)]
    errors: list[BaseException] = []

    def write(cache, source) -> None:
        try:
            for at in range(0, len(source), 16):
                cache.put(
                    [(rows[i][0], source[i][1]) for i in range(at, min(at + 16, len(source)))]
                )
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [
        threading.Thread(target=write, args=(c, rows if i % 2 else others))
        for i, c in enumerate(caches)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    stored = caches[0].get([h for h, _ in rows])
    assert len(stored) == len(rows)
    first = set(stored.values())
    # every key has one of the two vectors, and keeps it: a later put changes nothing
    assert all(stored[h] in (v, others[i][1]) for i, (h, v) in enumerate(rows))
    caches[1].put([(h, b"\0" * 1024) for h, _ in rows])
    assert set(caches[2].get([h for h, _ in rows]).values()) == first
    for cache in caches:
        cache.close()


@pytest.mark.slow
def test_an_old_cache_is_converted_and_every_vector_reused(tmp_path):
    service = Context(Settings(data_dir=tmp_path / "data"))
    build_docs(service, write_files(tmp_path / "docs", FILES), "kb")
    first = building.embed(service, "kb", MODEL)
    assert first.embedded == first.vectors > 0
    before = _chunk_vectors(service, "kb")
    # turn the cache into the first layout, as a data directory from before issue 19 holds it
    directory = vector_cache.directory_of(service.settings)
    rows = _held_rows(service, "kb")  # what the cache held before the generation took them
    for path in directory.glob("use-m.f16.db*"):
        path.unlink()
    _write_legacy(directory / "use-m.db", rows)

    # and the generation as one embedded before it kept the hash of each vector's text: only the
    # converted cache can give the vectors back
    path = generations.current_path(service.settings.corpus_dir / "kb")
    with sqlite3.connect(path) as conn:
        conn.execute("DROP INDEX chunk_vectors_by_hash")
        conn.execute("ALTER TABLE chunk_vectors DROP COLUMN unit_hash")
    conn.close()

    again = building.embed(service, "kb", MODEL)
    assert again.embedded == 0 and again.reused == first.vectors  # nothing computed again
    assert _chunk_vectors(service, "kb") == before  # the very same vectors
    assert not (directory / "use-m.db").exists() and (directory / "use-m.f16.db").exists()


def _held_rows(service: Context, name: str) -> list[tuple[str, bytes]]:
    """(text hash, float16 vector) of every vector the source's generation holds."""
    path = generations.current_path(service.settings.corpus_dir / name)
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        hashes = dict(conn.execute("SELECT vec_id, unit_hash FROM chunk_vectors"))
        owners = {
            r[0]: (r[1], r[2], r[3])
            for r in conn.execute(
                "SELECT vec_id, chunk_id, span_start, span_end FROM chunk_vectors"
            )
        }
    conn.close()
    stored = stored_vectors(path)
    return [(hashes[v].hex(), stored[owners[v]]) for v in hashes]


def _cache_rows(settings: Settings) -> int:
    cache = VectorCache(settings, MODEL)
    try:
        return cache.conn.execute("SELECT count(*) FROM vectors").fetchone()[0]
    finally:
        cache.close()


@pytest.mark.slow
def test_the_cache_keeps_no_copy_of_what_a_generation_holds_and_nothing_is_embedded_twice(
    tmp_path, monkeypatch
):
    """Issue #33: a vector lives in its generation's index; the cache lets go of it once the
    embed has switched in, and a re-embed, a rebuild and another source with the same text
    take it from the generation instead."""
    service = Context(Settings(data_dir=tmp_path / "data"))
    docs = write_files(tmp_path / "docs", FILES)
    build_docs(service, docs, "kb")
    first = building.embed(service, "kb", MODEL)
    assert first.embedded == first.vectors > 0
    assert _cache_rows(service.settings) == 0  # not a copy of the generation's vectors
    before = _chunk_vectors(service, "kb")

    again = building.embed(service, "kb", MODEL)  # from the generation, not the model
    assert (again.embedded, again.reused) == (0, first.vectors)
    assert _chunk_vectors(service, "kb") == before

    # a rebuild with one more document embeds that document alone
    write_files(docs, {"tea.md": "---\ntitle: 茶道\n---\n客を招いて抹茶を点て、もてなす作法。\n"})
    rebuilt = build_docs(service, docs, "kb")
    assert rebuilt.embedding["reused"] == first.vectors and rebuilt.embedding["embedded"] > 0
    assert _cache_rows(service.settings) == 0

    # another source of the same text reuses the first one's vectors
    build_docs(service, write_files(tmp_path / "copy", FILES), "copy")
    other = building.embed(service, "copy", MODEL)
    assert other.embedded == 0 and other.reused == first.vectors

    # a vector another embed let go of between counting and writing is computed again
    from chiezo.store import embed as embedding

    rebuilt_vectors = _chunk_vectors(service, "kb")
    get = embedding.StoredVectors.get
    monkeypatch.setattr(
        embedding.StoredVectors,
        "get",
        lambda self, wanted: dict(list(get(self, wanted).items())[1:]),
    )
    complete = building.embed(service, "kb", MODEL)
    monkeypatch.undo()
    assert complete.vectors == rebuilt.embedding["vectors"]  # none left out
    now = _chunk_vectors(service, "kb")
    assert now.keys() == rebuilt_vectors.keys()
    vectors = {
        k: (np.frombuffer(now[k], "<f2"), np.frombuffer(rebuilt_vectors[k], "<f2")) for k in now
    }
    closest = min(float(a.astype(np.float32) @ b.astype(np.float32)) for a, b in vectors.values())
    assert closest > 0.999  # the same model's vectors (batched otherwise: not bit for bit)
    found = searching.search(
        service, SearchRequest.of(query="蒸気機関車", source="kb", mode="semantic")
    )
    assert found.hits and found.hits[0].title == "鉄道の開業"


def test_a_cache_that_cannot_be_converted_is_kept_and_said(settings):
    directory = vector_cache.directory_of(settings)
    directory.mkdir(parents=True)
    legacy = directory / "use-m.db"
    _write_legacy(legacy, [("not a hex hash", b"\0" * 1024)])
    with pytest.raises(BuildError, match="could not be converted") as raised:
        VectorCache(settings, MODEL)
    assert "move use-m.db aside" in raised.value.to_dict()["hint"]
    assert legacy.exists() and not (directory / "use-m.f16.db").exists()
    assert not list(directory.glob("*.building"))


def test_builds_opening_an_old_cache_at_once_convert_it_once(settings):
    rows = _vectors(2000)
    directory = vector_cache.directory_of(settings)
    directory.mkdir(parents=True)
    _write_legacy(directory / "use-m.db", rows)
    opened: list[VectorCache] = []
    threads = [
        threading.Thread(target=lambda: opened.append(VectorCache(settings, MODEL)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(opened) == 4
    for cache in opened:  # each sees every vector: none opened a half-made file
        assert len(cache.get([h for h, _ in rows])) == len(rows)
        cache.close()
    assert sorted(p.name for p in directory.iterdir()) == [".use-m.lock", "use-m.f16.db"]


def test_an_old_cache_left_beside_its_conversion_is_reclaimed(settings):
    cache = VectorCache(settings, MODEL)
    cache.put(_vectors(10))
    cache.close()
    legacy = cache.path.with_name("use-m.db")  # a conversion stopped before deleting it
    _write_legacy(legacy, _vectors(10, seed=3))
    VectorCache(settings, MODEL).close()  # nothing reads it once the compact file exists
    (item,) = [i for i in maintenance.survey(settings).caches if i.path == str(legacy)]
    assert (item.action, item.state) == ("delete", "leftover")
    done = maintenance.reclaim(settings)
    assert not legacy.exists() and cache.path.exists() and done.deleted == [str(legacy)]


def _chunk_vectors(service: Context, name: str) -> dict:
    return stored_vectors(generations.current_path(service.settings.corpus_dir / name))


# -- the previous generation an ingest keeps -------------------------------------------------------


@pytest.mark.slow
def test_ingest_with_embed_keeps_the_generation_that_served_before_it(tmp_path):
    data, docs = tmp_path / "data", write_files(tmp_path / "docs", FILES)
    runner = CliRunner()
    first = runner.invoke(
        cli,
        [
            "--data",
            str(data),
            "ingest",
            "docs",
            str(docs),
            "--name",
            "kb",
            "--embed",
            MODEL,
            "--json",
        ],
    )
    assert first.exit_code == 0, first.output
    directory = data / "corpus" / "kb"
    served = generations.current_path(directory)
    # a first ingest had nothing before it: the text-only step is not kept
    assert [p.name for p in generations.generation_files(directory)] == [served.name]

    write_files(docs, {"tea.md": "---\ntitle: 茶道\n---\n客を招いて抹茶を点て、もてなす作法。\n"})
    second = runner.invoke(
        cli, ["--data", str(data), "ingest", "docs", str(docs), "--name", "kb", "--json"]
    )
    assert second.exit_code == 0, second.output
    report = json.loads(second.output)
    assert report["embedding"]["model"] == MODEL  # re-embedded, as the source had vectors
    now = generations.current_path(directory)
    assert now != served and _has_vectors(now)
    assert generations.previous_path(directory) == served and _has_vectors(served)
    assert len(generations.generation_files(directory)) == 2  # the text-only step is gone
    assert report["previous"] == str(served)

    # an embed on its own keeps what served before it: the generation it replaced
    runner.invoke(cli, ["--data", str(data), "embed", "kb"], catch_exceptions=False)
    assert generations.previous_path(directory) == now


def _has_vectors(path) -> bool:
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0] > 0


# -- chiezo gc ---------------------------------------------------------------------------------


@pytest.fixture
def cluttered(tmp_path):
    """A data directory with everything gc looks at: a source with a current, a previous and an
    older generation, a dead build's files, a removal that stopped, caches used and unused."""
    data = tmp_path / "data"
    service = Context(Settings(data_dir=data))
    docs = write_files(tmp_path / "docs", FILES)
    build_docs(service, docs, "kb")
    building.embed(service, "kb", MODEL)
    directory = data / "corpus" / "kb"
    current, previous = generations.current_path(directory), generations.previous_path(directory)
    old = directory / "gen-20000101T000000-aaaaaa.db"
    shutil.copyfile(previous, old)  # left by a build that died between its switch and prune
    (directory / "gen-20000101T000000-aaaaaa.db.usearch").write_bytes(b"\0" * 4096)
    (directory / "gen-20991231T000000-bbbbbb.db.building").write_bytes(b"\0" * 8192)
    (directory / "gen-20991231T000000-bbbbbb.db.building.stage").write_bytes(b"\0" * 8192)
    os.symlink(current.name, directory / ".current.123.abcdef")
    removed = data / "corpus" / ".removed-gone-abcdef"
    write_files(removed, {"gen-1.db": "x" * 5000})
    os.utime(removed, (time.time() - 3600, time.time() - 3600))
    vectors = vector_cache.directory_of(service.settings)
    _write_legacy(vectors / "e5-small.db", _vectors(400))  # a model no source uses
    _write_legacy(vectors / "tiny.db", _vectors(20))  # too small to be worth converting
    return {
        "data": data,
        "service": service,
        "directory": directory,
        "current": current,
        "previous": previous,
        "old": old,
        "removed": removed,
        "unused": vectors / "e5-small.db",
    }


def _gc(data, *args):
    return CliRunner().invoke(cli, ["--data", str(data), "gc", *args])


@pytest.mark.slow
def test_gc_shows_what_it_would_reclaim_and_deletes_nothing_on_a_dry_run(cluttered):
    result = _gc(cluttered["data"], "--dry-run", "--json")
    assert result.exit_code == 0, result.output
    plan = json.loads(result.output)
    assert [s["name"] for s in plan["sources"]] == ["kb"]  # a removal's leftover is no source
    (removed,) = plan["leftovers"]
    assert (removed["path"], removed["kind"], removed["action"]) == (
        str(cluttered["removed"]),
        "removed",
        "delete",
    )
    (kb,) = plan["sources"]
    actions = {os.path.basename(i["path"]): (i["kind"], i["action"]) for i in kb["items"]}
    assert actions[cluttered["current"].name] == ("current", "keep")
    assert actions[cluttered["previous"].name] == ("previous", "keep")
    assert actions[cluttered["old"].name] == ("generation", "delete")
    assert actions["gen-20991231T000000-bbbbbb.db.building"] == ("debris", "delete")
    assert actions[".current.123.abcdef"] == ("debris", "delete")
    caches = {os.path.basename(i["path"]): i for i in plan["caches"]}
    assert caches["use-m.f16.db"]["action"] == "keep" and caches["use-m.f16.db"]["users"] == ["kb"]
    assert caches["e5-small.db"]["action"] == "convert"  # unused, but --caches was not given
    assert caches["e5-small.db"]["reclaim"] > 2**20 and caches["tiny.db"]["action"] == "keep"
    assert plan["reclaimable_bytes"] >= cluttered["old"].stat().st_size + 16384
    assert cluttered["old"].exists() and cluttered["removed"].exists()
    text = _gc(cluttered["data"], "--dry-run")
    assert text.exit_code == 0 and "gen-20000101T000000-aaaaaa.db" in text.output
    assert "reclaimable" in text.output


@pytest.mark.slow
def test_gc_asks_first_and_a_script_must_say_yes(cluttered):
    refused = _gc(cluttered["data"])  # no terminal to ask on
    assert refused.exit_code == 2 and "--yes" in refused.output
    assert cluttered["old"].exists()


@pytest.mark.slow
def test_gc_reclaims_old_generations_and_debris_and_keeps_what_serves(cluttered):
    reader = sqlite3.connect(f"file:{cluttered['old']}?mode=ro", uri=True)  # a reader of it
    result = _gc(cluttered["data"], "--yes", "--json")
    assert result.exit_code == 0, result.output
    done = json.loads(result.output)["reclaimed"]
    directory = cluttered["directory"]
    kept = [cluttered["current"], cluttered["previous"]]
    kept += [s for g in kept for s in generations.sidecars(g)]
    assert cluttered["current"].with_name(cluttered["current"].name + ".usearch") in kept
    assert sorted(p.name for p in directory.iterdir()) == sorted(
        [".build.lock", "current", *(p.name for p in kept)]
    )
    assert not cluttered["removed"].exists()
    assert done["freed"] >= 16384 + 5000 and not done["skipped"]
    assert reader.execute("SELECT count(*) FROM docs").fetchone()[0] == len(FILES)  # reads on
    reader.close()
    # the unused cache was converted (not deleted), the used one kept
    vectors = vector_cache.directory_of(cluttered["service"].settings)
    assert sorted(p.name for p in vectors.glob("*.db")) == [
        "e5-small.f16.db",
        "tiny.db",
        "use-m.f16.db",
    ]
    assert any(p.endswith("e5-small.db") for p in done["converted"])
    assert (
        searching.search(cluttered["service"], SearchRequest.of(query="蒸気機関車", source="kb"))
        .hits[0]
        .title
        == "鉄道の開業"
    )
    again = _gc(cluttered["data"], "--yes")
    assert again.exit_code == 0 and "nothing to reclaim" in again.output


@pytest.mark.slow
def test_gc_with_caches_deletes_a_cache_no_source_uses_unless_it_is_open(cluttered):
    settings = cluttered["service"].settings
    holding = VectorCache(settings, "e5-small")  # an embed with that model is running
    result = _gc(cluttered["data"], "--yes", "--caches", "--json")
    assert result.exit_code == 0, result.output
    assert (vector_cache.directory_of(settings) / "e5-small.f16.db").exists()
    holding.close()
    result = _gc(cluttered["data"], "--yes", "--caches", "--json")
    done = json.loads(result.output)["reclaimed"]
    vectors = vector_cache.directory_of(settings)
    assert not (vectors / "e5-small.f16.db").exists() and (vectors / "use-m.f16.db").exists()
    assert any(p.endswith("e5-small.f16.db") for p in done["deleted"])


@pytest.mark.slow
def test_gc_skips_a_source_whose_build_is_running(cluttered):
    with generations.BuildLock(cluttered["directory"]):
        plan = maintenance.survey(cluttered["service"].settings)
        (kb,) = [s for s in plan.sources if s.name == "kb"]
        assert kb.busy and all(i.action != "delete" for i in kb.items)
        done = maintenance.reclaim(cluttered["service"].settings)
    assert cluttered["old"].exists()
    assert (cluttered["directory"] / "gen-20991231T000000-bbbbbb.db.building").exists()
    assert not cluttered["removed"].exists()  # other things were reclaimed meanwhile
    assert done.freed > 0


@pytest.mark.slow
def test_gc_never_deletes_generations_of_a_folder_without_current(cluttered):
    directory = cluttered["directory"]
    (directory / "current").unlink()  # e.g. generations copied in by hand, no link made yet
    maintenance.reclaim(cluttered["service"].settings)
    assert cluttered["old"].exists() and cluttered["previous"].exists()
    plan = maintenance.survey(cluttered["service"].settings)
    (kb,) = [s for s in plan.sources if s.name == "kb"]
    assert {i.kind for i in kb.items if i.path.endswith(".db")} == {"stray"}


# -- chiezo gc: what killed builds and stopped imports leave -----------------------------------

CITIES = "geonames/cities15000.zip"
ADMIN1 = "geonames/admin1CodesASCII.txt"
ALTERNATE = "geonames/alternateNames-JP-sample.txt"
JAWIKI = "wikipedia/jawiki-20230501-excerpt.xml.bz2"
DOCS = {
    "railway.md": "---\ntitle: 鉄道の開業\n---\n明治五年、新橋と横浜の間で蒸気機関車が走り始めた。\n"
}
# the code under test, for the processes the tests start (a worktree's, when run from one)
SRC = str(Path(chiezo.__file__).resolve().parents[1])
BUILDS = {
    "geonames": [
        "geonames",
        str(data_file(CITIES)),
        "--admin1",
        str(data_file(ADMIN1)),
        "--alternate-names",
        str(data_file(ALTERNATE)),
        "--name",
        "places",
    ],
    "wikipedia": ["wikipedia", str(data_file(JAWIKI)), "--workers", "1", "--name", "jawiki"],
}


def _chiezo(data: Path, *args: str):
    result = CliRunner().invoke(cli, ["--data", str(data), *args])
    assert result.exit_code == 0, result.output
    return json.loads(result.output) if "--json" in args else result.output


def _start_build(data: Path, kind: str) -> subprocess.Popen:
    """``chiezo ingest`` in its own process group (with its parser workers), stopped once it
    uses a scratch folder and has begun writing its generation."""
    env = {**os.environ, "PYTHONPATH": SRC}
    build = subprocess.Popen(
        [sys.executable, "-m", "chiezo", "--data", str(data), "ingest", *BUILDS[kind]],
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    corpus, deadline = data / "corpus", time.monotonic() + 120
    while not (list(corpus.rglob("lookups.db")) and list(corpus.rglob("*.building"))):
        assert build.poll() is None, build.stderr.read().decode()
        assert time.monotonic() < deadline, "the build never reached its scratch folder"
        time.sleep(0.005)
    os.killpg(build.pid, signal.SIGSTOP)
    return build


def _kill(build: subprocess.Popen) -> None:
    os.killpg(build.pid, signal.SIGKILL)
    build.wait(timeout=30)


def _names(plan: dict) -> list[str]:
    return [s["name"] for s in plan["sources"]]


def _leftovers(plan: dict) -> dict[str, str]:
    """{folder: action} of what the survey found under corpus/ that is no source."""
    return {i["path"]: i["action"] for i in plan["leftovers"]}


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["geonames", "wikipedia"])
def test_gc_reclaims_what_a_killed_build_left_and_lists_none_of_it_as_a_source(tmp_path, kind):
    data = tmp_path / "data"
    build_docs(Context(Settings(data_dir=data)), write_files(tmp_path / "docs", DOCS), "kb")
    build = _start_build(data, kind)
    _kill(build)
    corpus = data / "corpus"
    (scratch,) = [p.parent for p in corpus.rglob("lookups.db")]
    name = BUILDS[kind][BUILDS[kind].index("--name") + 1]
    assert list((corpus / name).glob("*.building"))  # its first generation, half written

    plan = _chiezo(data, "gc", "--dry-run", "--json")
    assert _names(plan) == ["kb"]  # not the scratch folder, not the folder of no generation
    assert _leftovers(plan) == {str(scratch): "delete", str(corpus / name): "delete"}
    assert plan["reclaimable_bytes"] >= (scratch / "lookups.db").stat().st_size
    assert [s["name"] for s in _chiezo(data, "sources", "--json")] == ["kb"]
    with RunningServer(create_app(Settings(data_dir=data))) as server:
        page = httpx.get(f"{server.url}/admin", headers={"accept-language": "en"}).text
    assert '<tr data-source="kb">' in page and page.count("<tr data-source=") == 1

    done = _chiezo(data, "gc", "--yes", "--json")["reclaimed"]
    assert sorted(done["deleted"]) == sorted([str(scratch), str(corpus / name)])
    assert not done["skipped"] and done["freed"] >= plan["reclaimable_bytes"]
    assert sorted(os.listdir(corpus)) == [generations.SCRATCH, "kb"]
    assert not os.listdir(corpus / generations.SCRATCH)
    assert "nothing to reclaim" in _chiezo(data, "gc", "--yes")


@pytest.mark.slow
def test_gc_leaves_what_a_running_build_uses_alone(tmp_path):
    data = tmp_path / "data"
    build = _start_build(data, "geonames")  # stopped (SIGSTOP) mid-build: alive, locks held
    try:
        corpus = data / "corpus"
        (scratch,) = [p.parent for p in corpus.rglob("lookups.db")]
        building = sorted((corpus / "places").glob("*.building*"))
        plan = _chiezo(data, "gc", "--dry-run", "--json")
        assert _names(plan) == []
        assert _leftovers(plan) == {str(scratch): "keep", str(corpus / "places"): "keep"}
        done = _chiezo(data, "gc", "--yes", "--json")
        assert "reclaimed" not in done  # nothing to reclaim: nothing was tried
        assert (scratch / "lookups.db").exists()
        assert sorted((corpus / "places").glob("*.building*")) == building
    finally:
        os.killpg(build.pid, signal.SIGCONT)
    assert build.wait(timeout=120) == 0, build.stderr.read().decode()  # it finished intact
    assert [s["name"] for s in _chiezo(data, "sources", "--json")] == ["places"]
    places = Context(Settings(data_dir=data))
    assert (
        searching.search(places, SearchRequest.of(query="京都市", source="places")).hits[0].title
        == "京都市"
    )
    assert not os.listdir(corpus / generations.SCRATCH)  # the build deleted its own


HOLD_LOCK = """
import sys, time
from pathlib import Path
from chiezo.store import generations
directory = Path(sys.argv[1])
directory.mkdir(parents=True)
generations.BuildLock(directory).__enter__()
print("locked", flush=True)
time.sleep(600)
"""


def test_a_source_folder_with_no_generation_is_reclaimed_once_its_lock_holder_is_gone(tmp_path):
    """What a refused or killed import leaves: the source's folder and its build lock."""
    data = tmp_path / "data"
    build_docs(Context(Settings(data_dir=data)), write_files(tmp_path / "docs", DOCS), "kb")
    folder = data / "corpus" / "imported"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(folder)],
        env={**os.environ, "PYTHONPATH": SRC},
        stdout=subprocess.PIPE,
    )
    try:
        assert holder.stdout.readline() == b"locked\n"
        plan = _chiezo(data, "gc", "--dry-run", "--json")
        assert _names(plan) == ["kb"] and _leftovers(plan) == {str(folder): "keep"}
        _chiezo(data, "gc", "--yes")
        assert (folder / ".build.lock").exists()  # an import may be running in it
    finally:
        holder.kill()
        holder.wait(timeout=30)
    plan = _chiezo(data, "gc", "--dry-run", "--json")
    assert _names(plan) == ["kb"] and _leftovers(plan) == {str(folder): "delete"}
    done = _chiezo(data, "gc", "--yes", "--json")["reclaimed"]
    assert done["deleted"] == [str(folder)] and not folder.exists()
    assert [s["name"] for s in _chiezo(data, "sources", "--json")] == ["kb"]


@pytest.mark.slow
def test_scratch_folders_of_the_layout_before_are_reclaimed_only_while_no_build_runs(tmp_path):
    """Builds before ``generations.scratch_dir`` made their scratch folders beside the sources
    (osm.py still does): such a folder names no owner, so any running build may be using it."""
    settings = Settings(data_dir=tmp_path / "data")
    service = Context(settings)
    geo = GeoNamesOptions(admin1=data_file(ADMIN1))
    # a real source whose name looks like such a folder: never touched
    building.ingest(service, "geonames", data_file(CITIES), "geonames-cities15", options=geo)
    corpus = settings.corpus_dir
    left = []
    for prefix, tables in (("geonames-", Lookups), ("wiki-lookups-", WikiLookups)):
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=corpus))  # as the old builds made it
        lookups = tables(folder / "lookups.db")
        if isinstance(lookups, Lookups):
            lookups.load_admin1(data_file(ADMIN1))
        lookups.close()
        left.append(str(folder))

    with exclusive(settings, "`chiezo ingest geonames`"):  # a build runs in the data directory
        plan = _chiezo(settings.data_dir, "gc", "--dry-run", "--json")
        assert _names(plan) == ["geonames-cities15"]
        assert _leftovers(plan) == dict.fromkeys(left, "keep")
        _chiezo(settings.data_dir, "gc", "--yes")
        assert all(Path(p).exists() for p in left)
    done = _chiezo(settings.data_dir, "gc", "--yes", "--json")["reclaimed"]
    assert sorted(done["deleted"]) == sorted(left)
    assert sorted(os.listdir(corpus)) == [generations.SCRATCH, "geonames-cities15"]
    assert (
        searching.search(service, SearchRequest.of(query="京都市", source="geonames-cities15"))
        .hits[0]
        .title
        == "京都市"
    )


# -- the admin page --------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_admin_page_shows_disk_use_and_reclaims_only_for_this_site(cluttered):
    settings = cluttered["service"].settings
    with RunningServer(create_app(settings)) as server:
        page = httpx.get(f"{server.url}/admin", headers={"accept-language": "en"}).text
        assert 'id="disk"' in page and "Reclaimable:" in page and '<tr data-source="kb">' in page
        assert "e5-small.db" in page and "old layout" in page
        url = f"{server.url}/admin/disk"
        attack = httpx.post(url, json={}, headers={"origin": "https://evil.example"})
        assert attack.status_code == 403 and cluttered["old"].exists()
        assert httpx.post(url, json={"caches": "maybe"}).status_code == 400
        done = httpx.post(url, json={}, headers={"origin": server.url})
        assert done.status_code == 200, done.text
        assert done.json()["freed"] > 0 and not cluttered["old"].exists()
        assert cluttered["current"].exists() and cluttered["previous"].exists()
        ja = httpx.get(f"{server.url}/admin", headers={"accept-language": "ja"}).text
        assert "回収できる容量" in ja and "kb が使っています" in ja


@pytest.mark.slow
def test_reclaiming_beyond_loopback_needs_the_token(cluttered):
    settings = replace(cluttered["service"].settings, token="s3cret")
    with RunningServer(create_app(settings, bind_host="0.0.0.0")) as server:
        url = f"{server.url}/admin/disk"
        assert httpx.post(url, json={}).status_code == 401
        assert cluttered["old"].exists()
        good = httpx.post(url, json={}, headers={"authorization": "Bearer s3cret"})
        assert good.status_code == 200 and not cluttered["old"].exists()


@pytest.mark.slow
def test_the_reclaim_button_reclaims_and_shows_what_it_freed(cluttered):
    with RunningServer(create_app(cluttered["service"].settings)) as server, chromium() as browser:
        page = browser_page(browser, server.url)
        page.goto(server.url + "/admin")
        other = page.locator('#disk tr[data-source="kb"] td.other')
        assert other.inner_text() != "—"  # the old generation and the dead build's files
        page.once("dialog", lambda dialog: dialog.accept())
        page.locator("#disk-form button").click()
        page.locator("#disk p.ok").wait_for()
        assert "回収しました" in page.locator("#disk p.ok").inner_text()
        assert other.inner_text() == "—"  # the section as the server now sees it
        page.screenshot(path=str(SCREENSHOTS / "admin-disk.png"), full_page=True)
        assert not page.errors, page.errors
        page.context.close()
    assert not cluttered["old"].exists() and cluttered["previous"].exists()
