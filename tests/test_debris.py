"""What builds killed with -9 and stopped imports leave under ``corpus/`` (issue: 13 kills, 13
scratch folders; 10 refused imports, 10 empty folders): ``chiezo gc`` reclaims it, nothing of it
is listed as a source, and what a running build uses is never touched — real builds of the
fixtures in real processes, killed or stopped with real signals, and the real CLI."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

import chiezo
from chiezo.core.config import Settings
from chiezo.ingest.geonames import GeoNamesOptions, Lookups
from chiezo.ingest.wikilookups import WikiLookups
from chiezo.ops.jobs import exclusive
from chiezo.ops.service import Service
from chiezo.store import generations
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, build_docs, data_file, write_files

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


@pytest.mark.parametrize("kind", ["geonames", "wikipedia"])
def test_gc_reclaims_what_a_killed_build_left_and_lists_none_of_it_as_a_source(tmp_path, kind):
    data = tmp_path / "data"
    build_docs(Service(Settings(data_dir=data)), write_files(tmp_path / "docs", DOCS), "kb")
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
    places = Service(Settings(data_dir=data))
    assert places.search("京都市", "places").hits[0].title == "京都市"
    assert not os.listdir(corpus / generations.SCRATCH)  # the build deleted its own


HOLD_LOCK = """
import sys, time
from pathlib import Path
from chiezo import generations
directory = Path(sys.argv[1])
directory.mkdir(parents=True)
generations.BuildLock(directory).__enter__()
print("locked", flush=True)
time.sleep(600)
"""


def test_a_source_folder_with_no_generation_is_reclaimed_once_its_lock_holder_is_gone(tmp_path):
    """What a refused or killed import leaves: the source's folder and its build lock."""
    data = tmp_path / "data"
    build_docs(Service(Settings(data_dir=data)), write_files(tmp_path / "docs", DOCS), "kb")
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


def test_scratch_folders_of_the_layout_before_are_reclaimed_only_while_no_build_runs(tmp_path):
    """Builds before ``generations.scratch_dir`` made their scratch folders beside the sources
    (osm.py still does): such a folder names no owner, so any running build may be using it."""
    settings = Settings(data_dir=tmp_path / "data")
    service = Service(settings)
    geo = GeoNamesOptions(admin1=data_file(ADMIN1))
    # a real source whose name looks like such a folder: never touched
    service.ingest("geonames", data_file(CITIES), "geonames-cities15", options=geo)
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
    assert service.search("京都市", "geonames-cities15").hits[0].title == "京都市"
