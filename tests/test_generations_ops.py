"""Generations as an operator sees them (issue 19): rollback, export and import, rebuild with a
fresh download, cancelling jobs, one build at a time across the server and the command line,
absolute recorded paths, and the memory and disk checks that run before any download.

Real sources built from real-format inputs; the real CLI; downloads from a dumps site served on
loopback (helpers.DumpSite)."""

from __future__ import annotations

import bz2
import hashlib
import io
import json
import os
import sqlite3
import subprocess
import sys
import tarfile
import textwrap
import threading
import time
import tracemalloc
import zipfile
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from chiezo.core.config import Settings
from chiezo.core.errors import Conflict
from chiezo.ops import building, reading, searching
from chiezo.ops.context import Context
from chiezo.ops.jobs import JobRunner, exclusive
from chiezo.ops.requests import DocRequest, SearchRequest
from chiezo.store import generations
from chiezo.store.kinds import kind_named, register
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app
from job_kinds import HeldDocs, Release

from helpers import (
    LOCAL,
    TEMPLE_PAGES,
    DumpSite,
    build_docs,
    plain_tar,
    stored_vectors,
    wiki_dump,
    write_files,
)

FILES = {
    "sensoji.md": "---\ntitle: 浅草寺\ntags: [寺院]\n---\n東京都台東区浅草にある寺。雷門が有名。\n",
    "kiyomizu.md": "---\ntitle: 清水寺\ntags: [寺院]\n---\n京都市東山区の寺。清水の舞台で知られる。\n",
}
TODAIJI = "---\ntitle: 東大寺\ntags: [寺院]\n---\n奈良市にある華厳宗の大本山。大仏で知られる。\n"


def run(data: Path, *args: str):
    return CliRunner().invoke(cli, ["--data", str(data), *args])


def current(settings: Settings, name: str = "kb") -> str:
    return generations.current_path(settings.corpus_dir / name).name


def titles(service: Context, q: str, source: str = "kb") -> list[str]:
    return [
        h.title for h in searching.search(service, SearchRequest.of(query=q, source=source)).hits
    ]


@pytest.fixture
def folder(tmp_path):
    return write_files(tmp_path / "docs", FILES)


@pytest.fixture
def two_builds(settings, service, folder):
    """kb built twice: 2 documents, then 3 (東大寺 added); the first generation is kept."""
    build_docs(service, folder, "kb")
    first = current(settings)
    (folder / "todaiji.md").write_text(TODAIJI, encoding="utf-8")
    build_docs(service, folder, "kb")
    return first, current(settings)


# -- rollback -----------------------------------------------------------------------------------


def test_rollback_serves_the_previous_generation_and_a_second_goes_forward(
    settings, service, two_builds
):
    first, second = two_builds
    assert titles(service, "東大寺") == ["東大寺"]  # a running server's library, opened before
    back = run(settings.data_dir, "rollback", "kb", "--json")
    assert back.exit_code == 0, back.output
    said = json.loads(back.stdout)
    assert (said["current"], said["previous"], said["docs"]) == (first, second, 2)
    assert current(settings) == first
    assert titles(service, "東大寺") == [] and service.library.get("kb").doc_count == 2
    assert sorted(
        p.name for p in generations.generation_files(settings.corpus_dir / "kb")
    ) == sorted([first, second])  # nothing deleted

    forward = run(settings.data_dir, "rollback", "kb")
    assert forward.exit_code == 0 and f"now serving {second}" in forward.stdout
    assert f"kept {first}" in forward.stdout
    assert titles(service, "東大寺") == ["東大寺"]


def test_rollback_without_a_previous_generation_is_refused(settings, service, folder):
    build_docs(service, folder, "kb")
    refused = run(settings.data_dir, "rollback", "kb", "--json")
    assert refused.exit_code == 1
    error = json.loads(refused.stdout)
    assert "no previous generation" in error["error"] and error["status"] == 409
    assert run(settings.data_dir, "rollback", "nope").exit_code == 2  # unknown source
    assert run(settings.data_dir, "rollback", "notes").exit_code == 2  # not a built source


def test_rollback_to_an_older_schema_is_refused_naming_both_versions(settings, two_builds):
    first, second = two_builds
    with sqlite3.connect(settings.corpus_dir / "kb" / first) as conn:  # as an older Chiezo wrote it
        conn.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    conn.close()
    refused = run(settings.data_dir, "rollback", "kb", "--json")
    assert refused.exit_code == 2, refused.output
    error = json.loads(refused.stdout)
    assert (
        "schema version 0" in error["error"]
        and "version 1 to 2 this Chiezo reads" in error["error"]
    )
    assert (error["schema_version"], error["expected_schema_version"]) == (0, 2)
    assert "`chiezo rebuild kb`" in error["hint"]
    assert current(settings) == second  # nothing moved


def test_rollback_waits_for_no_build_it_is_refused_while_one_runs(settings, two_builds):
    with generations.BuildLock(settings.corpus_dir / "kb"):
        refused = run(settings.data_dir, "rollback", "kb")
    assert refused.exit_code == 1 and "a build of 'kb' is running" in refused.output
    assert current(settings) == two_builds[1]


# -- export and import --------------------------------------------------------------------------


def _members(archive: Path) -> list[tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(plain_tar(archive.read_bytes()))) as tar:
        return tar.getmembers()


@pytest.mark.slow
def test_export_then_import_elsewhere_serves_the_same_source_with_its_vectors(
    settings, service, two_builds, tmp_path
):
    building.embed(service, "kb", "use-m")
    archive = tmp_path / "kb.chiezo.tar"
    exported = run(settings.data_dir, "export", "kb", str(archive), "--json")
    assert exported.exit_code == 0, exported.output
    manifest = json.loads(exported.stdout)
    generation = generations.current_path(settings.corpus_dir / "kb")
    members = ["manifest.json", "generation.db", "vectors.f16"]
    assert [m.name for m in _members(archive)] == members
    assert all(m.isreg() for m in _members(archive))
    count = manifest["vectors"]["count"]
    assert manifest["vectors"]["file"]["bytes"] == 2 * 512 * count  # float16 rows, nothing else
    assert manifest["file"] == {
        "name": "generation.db",
        "bytes": generation.stat().st_size,
        "sha256": hashlib.sha256(generation.read_bytes()).hexdigest(),
    }
    assert (manifest["source"], manifest["kind"], manifest["docs"]) == ("kb", "docs", 3)
    assert manifest["schema_version"] == 2 and manifest["generation"] == generation.name
    assert manifest["vectors"]["model"] == "use-m" and manifest["vectors"]["count"] > 0
    assert manifest["input"]["path"] == str((tmp_path / "docs").resolve())
    assert not archive.with_name(archive.name + ".part").exists()
    # compressed: zstd, and smaller than the generation it holds
    assert archive.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    assert manifest["archive_bytes"] < 0.8 * generation.stat().st_size
    again = run(settings.data_dir, "export", "kb", str(archive))
    assert again.exit_code == 2 and "--force" in again.output  # an existing file is kept

    other = Settings(data_dir=tmp_path / "other")
    imported = run(other.data_dir, "import", str(archive), "--name", "handbook", "--json")
    assert imported.exit_code == 0, imported.output
    said = json.loads(imported.stdout)
    assert said["docs"] == 3 and said["previous"] is None and said["generation"] == generation.name
    there = Context(other)
    assert [
        h.title
        for h in searching.search(
            there, SearchRequest.of(query="東大寺", source="handbook", mode="keyword")
        ).hits
    ] == ["東大寺"]
    semantic = searching.search(
        there, SearchRequest.of(query="奈良の大仏", source="handbook", mode="semantic")
    )
    assert semantic.hits and semantic.hits[0].title == "東大寺"  # the index, rebuilt here
    imported_generation = generations.current_path(other.corpus_dir / "handbook")
    assert stored_vectors(imported_generation) == stored_vectors(generation)  # bit for bit
    assert not [p for p in imported_generation.parent.iterdir() if "vectors" in p.name]
    meta = there.library.get("handbook").meta
    assert meta["generation"] == said["current"]
    assert json.loads(meta["imported_from"])["sha256"] == manifest["file"]["sha256"]


def _vector_archive(path: Path, manifest: dict, generation: bytes, vectors: bytes, **said):
    """An archive of ``generation`` with ``vectors`` as its vectors' member, the manifest
    describing them truthfully unless ``said`` overrides its vectors entry."""
    entry = {"name": "vectors.f16", "bytes": len(vectors)}
    entry["sha256"] = hashlib.sha256(vectors).hexdigest()
    told = {**manifest, "vectors": {**manifest["vectors"], "file": {**entry, **said}}}
    body = json.dumps(told).encode()
    return _archive(
        path,
        [
            (_info("manifest.json", len(body)), body),
            (_info("generation.db", len(generation)), generation),
            (_info(said.get("name", "vectors.f16"), len(vectors)), vectors),
        ],
    )


@pytest.mark.slow
def test_an_archives_vectors_are_checked_before_an_index_is_built_from_them(
    settings, service, folder, tmp_path
):
    """The vectors' member is a stranger's array: its size, checksum and values are checked
    (numpy reads it, never native index code); anything wrong changes nothing."""
    import numpy as np

    (folder / "todaiji.md").write_text(TODAIJI, encoding="utf-8")
    build_docs(service, folder, "kb")
    building.embed(service, "kb", "use-m")
    archive = tmp_path / "kb.tar"
    assert run(settings.data_dir, "export", "kb", str(archive)).exit_code == 0
    data = plain_tar(archive.read_bytes())
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
        generation = tar.extractfile("generation.db").read()
        vectors = tar.extractfile("vectors.f16").read()
    nan = bytearray(vectors)
    nan[0:2] = np.array([np.nan], dtype="<f2").tobytes()
    short = vectors[:-1024]
    cases = {
        "a value that is no number": (bytes(nan), {}, "not numbers"),
        "one vector missing": (short, {"bytes": len(vectors)}, "bytes"),
        "sizes that agree but are short of the rows": (short, {}, "2 × dim × count"),
        "another member's name": (vectors, {"name": "vectors.bin"}, "vectors.f16"),
        "altered after export": (
            bytes(nan),
            {"sha256": manifest["vectors"]["file"]["sha256"]},
            "checksum",
        ),
    }
    elsewhere = tmp_path / "elsewhere"
    for case, (body, said, reason) in cases.items():
        hostile = _vector_archive(tmp_path / "hostile.tar", manifest, generation, body, **said)
        result = run(elsewhere, "import", str(hostile), "--name", "x", "--json")
        assert result.exit_code == 2, (case, result.output)
        assert reason in json.loads(result.stdout)["error"], (case, result.stdout)
        assert Context(Settings(data_dir=elsewhere)).library.names() == [], case
        folder_x = elsewhere / "corpus" / "x"
        assert not folder_x.exists() or _files(folder_x) == [".build.lock"], case

    # an archive of an older Chiezo: the vectors in the generation's own column, no member
    old = tmp_path / "old.db"
    old.write_bytes(generation)
    with sqlite3.connect(old) as conn:
        conn.execute("ALTER TABLE chunk_vectors ADD COLUMN vec BLOB")
        ids = [r[0] for r in conn.execute("SELECT vec_id FROM chunk_vectors ORDER BY vec_id")]
        conn.executemany(
            "UPDATE chunk_vectors SET vec = ? WHERE vec_id = ?",
            [(vectors[i * 1024 : (i + 1) * 1024], v) for i, v in enumerate(ids)],
        )
    conn.close()
    legacy = old.read_bytes()
    said = {
        **manifest,
        "vectors": {k: v for k, v in manifest["vectors"].items() if k != "file"},
        "file": {
            **manifest["file"],
            "bytes": len(legacy),
            "sha256": hashlib.sha256(legacy).hexdigest(),
        },
    }
    body = json.dumps(said).encode()
    before = _archive(
        tmp_path / "before.tar",
        [(_info("manifest.json", len(body)), body), (_info("generation.db", len(legacy)), legacy)],
    )
    result = run(elsewhere, "import", str(before), "--name", "old", "--json")
    assert result.exit_code == 0, result.output
    there = Context(Settings(data_dir=elsewhere))
    found = searching.search(
        there, SearchRequest.of(query="奈良の大仏", source="old", mode="semantic")
    )
    assert found.hits and found.hits[0].title == "東大寺"
    imported = generations.current_path(elsewhere / "corpus" / "old")
    original = generations.current_path(settings.corpus_dir / "kb")
    assert stored_vectors(imported) == stored_vectors(original)


def test_an_import_over_an_existing_source_needs_replace_and_keeps_the_previous(
    settings, service, folder, tmp_path
):
    build_docs(service, folder, "kb")
    archive = tmp_path / "kb.tar"
    assert run(settings.data_dir, "export", "kb", str(archive)).exit_code == 0
    (folder / "todaiji.md").write_text(TODAIJI, encoding="utf-8")
    build_docs(service, folder, "kb")
    newer = current(settings)
    refused = run(settings.data_dir, "import", str(archive))
    assert refused.exit_code == 1 and "--replace" in refused.output
    assert current(settings) == newer
    replaced = run(settings.data_dir, "import", str(archive), "--replace", "--json")
    assert replaced.exit_code == 0, replaced.output
    assert json.loads(replaced.stdout)["previous"] == newer
    assert titles(service, "東大寺") == []
    assert run(settings.data_dir, "rollback", "kb").exit_code == 0  # the import undone
    assert titles(service, "東大寺") == ["東大寺"]


@pytest.fixture
def exported(settings, service, folder, tmp_path):
    """kb built and exported; (archive, its bytes, the generation serving)."""
    build_docs(service, folder, "kb")
    archive = tmp_path / "kb.tar"
    assert run(settings.data_dir, "export", "kb", str(archive)).exit_code == 0
    return archive, archive.read_bytes(), current(settings)


def _files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


def test_a_tampered_or_truncated_archive_is_refused_and_nothing_changes(
    settings, exported, tmp_path
):
    archive, data, serving = exported
    before = _files(settings.corpus_dir / "kb")
    plain = plain_tar(data)  # as exports were before zstd: still imported
    tampered = bytearray(plain)
    tampered[plain.index(b"SQLite format 3") + 3000] ^= 0xFF  # one byte of the generation
    (tmp_path / "tampered.tar").write_bytes(tampered)
    (tmp_path / "cut.tar").write_bytes(data[: len(data) // 2])
    flipped = bytearray(data)
    flipped[len(data) // 2] ^= 0xFF  # one byte of the compressed stream
    (tmp_path / "flipped.tar.zst").write_bytes(flipped)
    for name, said in (
        ("tampered.tar", "does not match its checksum"),
        ("cut.tar", "is not a complete Chiezo export"),
        ("flipped.tar.zst", "nothing was changed"),
    ):
        result = run(settings.data_dir, "import", str(tmp_path / name), "--replace", "--json")
        assert result.exit_code == 2, result.output
        assert said in json.loads(result.stdout)["error"]
        assert "nothing was changed" in json.loads(result.stdout)["error"]
        assert current(settings) == serving and _files(settings.corpus_dir / "kb") == before


def _archive(path: Path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> Path:
    with tarfile.open(path, "w", format=tarfile.PAX_FORMAT) as tar:
        for info, body in members:
            tar.addfile(info, io.BytesIO(body) if body is not None else None)
    return path


def _info(name: str, size: int = 0, kind: bytes = tarfile.REGTYPE, target: str = ""):
    info = tarfile.TarInfo(name)
    info.size, info.type, info.linkname = size, kind, target
    return info


def _manifest_of(archive_bytes: bytes) -> tuple[dict, bytes]:
    with tarfile.open(fileobj=io.BytesIO(plain_tar(archive_bytes))) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
        return manifest, tar.extractfile("generation.db").read()


def test_hostile_archives_are_refused_before_anything_is_written(settings, exported, tmp_path):
    _, data, _ = exported
    manifest, generation = _manifest_of(data)

    def encoded(m: dict) -> bytes:
        return json.dumps(m).encode()

    good = encoded(manifest)
    elsewhere = tmp_path / "elsewhere"
    junk = sqlite3.connect(tmp_path / "junk.db")
    junk.execute("CREATE TABLE t (x)")
    junk.commit()
    junk.close()
    not_a_source = (tmp_path / "junk.db").read_bytes()
    foreign = {
        **manifest,
        "file": {
            **manifest["file"],
            "bytes": len(not_a_source),
            "sha256": hashlib.sha256(not_a_source).hexdigest(),
        },
    }
    cases = {
        "a link as the generation": [
            (_info("manifest.json", len(good)), good),
            (_info("generation.db", 0, tarfile.SYMTYPE, "/etc/passwd"), None),
        ],
        "a path out of the folder": [
            (_info("manifest.json", len(good)), good),
            (_info("../generation.db", len(generation)), generation),
        ],
        "a manifest over 1 MiB": [(_info("manifest.json", 2 << 20), b" " * (2 << 20))],
        "no manifest first": [(_info("generation.db", len(generation)), generation)],
        "a member after the generation": [
            (_info("manifest.json", len(good)), good),
            (_info("generation.db", len(generation)), generation),
            (_info("evil.sh", 3), b"x=1"),
        ],
        "an SQLite file that is no source": [
            (_info("manifest.json", len(encoded(foreign))), encoded(foreign)),
            (_info("generation.db", len(not_a_source)), not_a_source),
        ],
    }
    for case, members in cases.items():
        archive = _archive(tmp_path / "hostile.tar", members)
        result = run(elsewhere, "import", str(archive), "--name", "x", "--json")
        assert result.exit_code == 2, (case, result.output)
        assert Context(Settings(data_dir=elsewhere)).library.names() == [], case
        folder = elsewhere / "corpus" / "x"
        assert not folder.exists() or _files(folder) == [".build.lock"], case
        assert not (elsewhere / "passwd").exists() and not (tmp_path / "generation.db").exists()

    older = encoded({**manifest, "schema_version": 0})
    archive = _archive(
        tmp_path / "old.tar",
        [
            (_info("manifest.json", len(older)), older),
            (_info("generation.db", len(generation)), generation),
        ],
    )
    result = run(elsewhere, "import", str(archive), "--json")
    assert result.exit_code == 2
    error = json.loads(result.stdout)
    assert "schema version 0" in error["error"] and "version 1 to 2" in error["error"]


@pytest.mark.slow
def test_export_and_import_stream_without_holding_the_generation_in_memory(
    settings, service, tmp_path
):
    big = {f"page{n}.md": f"# Page {n}\n\n" + f"本文 {n} の段落。" * 600 for n in range(300)}
    build_docs(service, write_files(tmp_path / "big", big), "big")
    size = generations.current_path(settings.corpus_dir / "big").stat().st_size
    assert size > 8 * 2**20
    from chiezo.ops.transfer import export_source, import_source

    tracemalloc.start()
    export_source(settings, "big", tmp_path / "big.tar")
    import_source(Settings(data_dir=tmp_path / "other"), tmp_path / "big.tar")
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    # pieces of 256 KiB, a few copies each on the way through tarfile: about 1 MiB at any size
    assert peak < 2 * 2**20, f"peak {peak / 2**20:.1f} MiB for a {size / 2**20:.1f} MiB generation"


# -- jobs: cancelling, one lock with the command line -----------------------------------------


@pytest.fixture
def hold(tmp_path):
    """``hold()``: from now on the docs kind's build — here and in a job's process — waits
    until the release it returns is set, then builds for real (a job that is running, for as
    long as the test needs)."""
    flag = tmp_path / "build.hold"
    built_in = kind_named("docs")

    def start_holding() -> Release:
        flag.touch()
        register(HeldDocs(flag))
        return Release(flag)

    yield start_holding
    flag.unlink(missing_ok=True)
    register(built_in)


def _ended(client, job_id: int) -> dict:
    deadline = time.monotonic() + 60
    while (job := client.get(f"/v1/jobs/{job_id}").json())["state"] == "running":
        assert time.monotonic() < deadline, job
        time.sleep(0.02)
    return job


@pytest.mark.slow
def test_a_cancelled_job_removes_its_unfinished_generation_and_nothing_changes(
    settings, service, folder, hold
):
    build_docs(service, folder, "kb")
    held = hold()
    serving, files = current(settings), _files(settings.corpus_dir / "kb")
    client = TestClient(create_app(settings), base_url=LOCAL)
    (folder / "todaiji.md").write_text(TODAIJI, encoding="utf-8")
    job = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild"}).json()
    asked = client.post(f"/v1/jobs/{job['id']}/cancel")
    assert asked.status_code == 202 and asked.json()["cancel_requested"] is True
    held.set()  # the build starts, and stops at its first progress update
    ended = _ended(client, job["id"])
    assert ended["state"] == "cancelled" and ended["result"] is None
    assert "cancelled" in ended["error"]["error"]
    texts = [line["text"] for line in ended["log"]]
    assert "nothing was switched in: the current generation keeps serving" in texts
    assert current(settings) == serving and _files(settings.corpus_dir / "kb") == files
    assert titles(service, "東大寺") == []
    again = client.post(f"/v1/jobs/{job['id']}/cancel")
    assert again.status_code == 409 and "already ended (cancelled)" in again.json()["error"]
    assert client.post("/v1/jobs/999/cancel").status_code == 404
    listed = client.get("/v1/jobs").json()["jobs"][0]
    assert listed["id"] == job["id"] and listed["state"] == "cancelled"
    page = client.get("/admin")
    assert "中止" in page.text  # the jobs list says it, in the page's language


@pytest.mark.slow
def test_a_job_of_another_worker_process_is_cancelled_through_its_record(
    settings, service, folder, hold
):
    build_docs(service, folder, "kb")
    held = hold()
    starter, other = JobRunner(service), JobRunner(Context(settings))
    job = starter.start("kb", "rebuild")
    asked = other.cancel(job.id).to_dict()
    assert asked["cancel_requested"] is True
    assert job.cancel_requested.wait(5)  # its process reads the marker within half a second
    held.set()
    assert job.wait(30) and job.state == "cancelled"
    assert not (settings.data_dir / "jobs" / f"{job.id}.cancel").exists()


@pytest.mark.slow
def test_beyond_loopback_cancelling_a_job_needs_the_token(settings, service, folder, hold):
    build_docs(service, folder, "kb")
    held = hold()
    guarded = TestClient(
        create_app(replace(settings, token="s3cret"), bind_host="0.0.0.0"), base_url=LOCAL
    )
    token = {"authorization": "Bearer s3cret"}
    job = guarded.post("/v1/jobs", json={"source": "kb", "action": "rebuild"}, headers=token).json()
    assert guarded.post(f"/v1/jobs/{job['id']}/cancel").status_code == 401
    assert guarded.post(f"/v1/jobs/{job['id']}/cancel", headers=token).status_code == 202
    held.set()
    assert _ended(guarded, job["id"])["state"] == "cancelled"


@pytest.mark.slow
def test_a_cli_rebuild_is_refused_while_a_server_job_runs_and_waits_with_wait(
    settings, service, folder, hold
):
    build_docs(service, folder, "kb")
    held = hold()
    client = TestClient(create_app(settings), base_url=LOCAL)
    job = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild"}).json()
    refused = run(settings.data_dir, "rebuild", "kb", "--json")
    assert refused.exit_code == 1
    error = json.loads(refused.stdout)
    assert f"job {job['id']} (rebuild kb)" in error["error"] and "--wait" in error["hint"]
    assert run(settings.data_dir, "ingest", "docs", str(folder), "--name", "kb2").exit_code == 1

    threading.Timer(0.5, held.set).start()  # the job goes on after a while; --wait waits for it
    started = time.monotonic()
    waited = run(settings.data_dir, "rebuild", "kb", "--wait", "--json")
    assert waited.exit_code == 0, waited.output
    assert time.monotonic() - started >= 0.4
    assert _ended(client, job["id"])["state"] == "done"


LOCK_HOLDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from chiezo.core.config import Settings
    from chiezo.ops.jobs import exclusive
    data, ready = Path(sys.argv[1]), Path(sys.argv[2])
    with exclusive(Settings(data_dir=data), "`chiezo rebuild kb`", source="kb", action="rebuild"):
        ready.touch()
        time.sleep(float(sys.argv[3]))
""")


@pytest.mark.slow
def test_a_server_job_is_refused_while_another_process_builds_from_the_command_line(
    settings, service, folder, tmp_path
):
    build_docs(service, folder, "kb")
    ready = tmp_path / "ready"
    holder = subprocess.Popen(
        [sys.executable, "-c", LOCK_HOLDER, str(settings.data_dir), str(ready), "1.5"]
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            assert time.monotonic() < deadline and holder.poll() is None
            time.sleep(0.02)
        client = TestClient(create_app(settings), base_url=LOCAL)
        plan = client.get("/v1/jobs/plan", params={"source": "kb"}).json()
        assert plan["ready"] is False and plan["running_job"]["by"] == "cli"
        assert f"(process {holder.pid})" in plan["running_job"]["what"]
        refused = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild"})
        assert refused.status_code == 409
        assert refused.json()["error"].startswith("`chiezo rebuild kb` (process")
        refused_here = exclusive(settings, "`chiezo ingest docs`")
        with pytest.raises(Conflict, match="is running; one build runs at a time"), refused_here:
            pass
        waited = run(settings.data_dir, "rebuild", "kb", "--wait")
        assert waited.exit_code == 0 and holder.wait(10) == 0  # it ran once the other had ended
    finally:
        holder.kill()
        holder.wait()
    started = client.post("/v1/jobs", json={"source": "kb", "action": "rebuild"})
    assert started.status_code == 202 and _ended(client, started.json()["id"])["state"] == "done"


# -- rebuild with a fresh download --------------------------------------------------------------

NEWER_PAGES = [
    *TEMPLE_PAGES,
    (3, "東大寺", "'''東大寺'''は奈良市にある寺。[[Category:奈良県の寺]]"),
]


def _publish(root: Path, date: str, pages) -> Path:
    """A finished jawiki dump of ``date`` on the site: the bz2 dump and its dumpstatus.json."""
    folder = root / "jawiki" / date
    folder.mkdir(parents=True)
    name = f"jawiki-{date}-pages-articles-multistream.xml.bz2"
    (folder / name).write_bytes(bz2.compress(wiki_dump(pages).encode()))
    data = (folder / name).read_bytes()
    status = {
        "jobs": {
            "articlesmultistreamdump": {
                "status": "done",
                "files": {
                    name: {
                        "size": len(data),
                        "sha1": hashlib.sha1(data).hexdigest(),
                        "url": f"/jawiki/{date}/{name}",
                    }
                },
            }
        }
    }
    (folder / "dumpstatus.json").write_text(json.dumps(status))
    return folder / name


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    _publish(root, "20230501", TEMPLE_PAGES)
    served = DumpSite(root)
    yield served
    served.close()


@pytest.mark.slow
def test_rebuild_fetch_downloads_a_newer_dump_and_is_a_no_op_without_one(settings, site):
    data = settings.data_dir
    built = run(
        data,
        "ingest",
        "wikipedia",
        "--lang",
        "ja",
        "--mirror",
        site.url,
        "--name",
        "jawiki",
        "--json",
    )
    assert built.exit_code == 0, built.output
    info = Context(settings).library.info("jawiki")
    assert info.docs == 2 and info.input["fetched"]["options"]["mirror"] == site.url
    assert info.input["fetched"]["date"] == "20230501"

    asked, first = len(site.requests), current(settings, "jawiki")
    same = run(data, "rebuild", "jawiki", "--fetch", "--json")
    assert same.exit_code == 0, same.output
    assert json.loads(same.stdout)["up_to_date"] is True
    assert current(settings, "jawiki") == first  # nothing rebuilt
    assert not any("pages-articles" in path for path, _ in site.requests[asked:])

    _publish(site.root, "20230601", NEWER_PAGES)
    before = current(settings, "jawiki")
    fetched = run(data, "rebuild", "jawiki", "--fetch", "--json")
    assert fetched.exit_code == 0, fetched.output
    report = json.loads(fetched.stdout)
    assert report["docs"] == 3 and report["previous"].endswith(before)
    info = Context(settings).library.info("jawiki")
    assert info.input["dump_date"] == "20230601" and info.input["fetched"]["date"] == "20230601"
    plain = run(data, "rebuild", "jawiki", "--no-embed", "--json")  # the recorded file again
    assert plain.exit_code == 0 and json.loads(plain.stdout)["docs"] == 3


@pytest.mark.slow
def test_a_fetch_job_over_rest_and_a_local_source_refused(settings, service, site, folder):
    assert (
        run(
            settings.data_dir,
            "ingest",
            "wikipedia",
            "--lang",
            "ja",
            "--mirror",
            site.url,
            "--name",
            "jawiki",
        ).exit_code
        == 0
    )
    build_docs(service, folder, "kb")
    client = TestClient(create_app(settings), base_url=LOCAL)
    plan = client.get("/v1/jobs/plan", params={"source": "jawiki", "fetch": "true"}).json()
    assert plan["fetch"]["from"] == site.url and plan["fetch"]["last"] == "20230501"
    assert plan["ready"] is True
    _publish(site.root, "20230601", NEWER_PAGES)
    job = client.post("/v1/jobs", json={"source": "jawiki", "action": "rebuild", "fetch": True})
    assert job.status_code == 202 and job.json()["fetch"] is True
    done = _ended(client, job.json()["id"])
    assert done["state"] == "done" and done["result"]["docs"] == 3, done
    assert any(line["text"].startswith("downloading jawiki-20230601") for line in done["log"])

    local = client.get("/v1/jobs/plan", params={"source": "kb", "fetch": "true"})
    assert local.status_code == 400 and "not downloaded" in local.json()["error"]
    cli_refused = run(settings.data_dir, "rebuild", "kb", "--fetch")
    assert cli_refused.exit_code == 2 and "nothing to fetch again" in cli_refused.output
    page = client.get("/admin").text
    assert page.count('class="fetch"') == 1  # offered for the fetched source only


@pytest.mark.slow
def test_the_admin_page_fetches_newer_and_cancels_a_running_job(
    settings, service, site, folder, hold
):
    """In the browser: "Fetch newer" on a fetched source says where from and runs; a held
    rebuild is cancelled from its panel and ends "中止" (static/admin.js)."""
    from helpers import RunningServer, browser_page, chromium

    assert (
        run(
            settings.data_dir,
            "ingest",
            "wikipedia",
            "--lang",
            "ja",
            "--mirror",
            site.url,
            "--name",
            "jawiki",
        ).exit_code
        == 0
    )
    build_docs(service, folder, "kb")
    held = hold()
    with RunningServer(create_app(settings)) as server, chromium() as browser:
        page = browser_page(browser, server.url)
        page.goto(server.url + "/admin")
        assert page.locator("input.fetch").count() == 1  # the fetched source only
        page.locator('.source-card[data-source="jawiki"] input.fetch').check()
        page.locator('.source-card[data-source="jawiki"] button.rebuild').click()
        page.wait_for_selector("#confirm[open]")
        assert site.url in page.locator("#confirm-text").inner_text()
        page.locator("#confirm-go").click()
        page.wait_for_function("document.querySelector('#job-state').textContent === '完了'")
        assert "nothing rebuilt" in page.locator("#job-log").inner_text()

        page.locator('.source-card[data-source="kb"] button.rebuild').click()
        page.wait_for_selector("#confirm[open]")
        page.locator("#confirm-go").click()
        page.locator("#job-cancel:not([hidden])").click()
        page.wait_for_function("document.querySelector('#job-cancel').disabled")
        held.set()
        page.wait_for_function("document.querySelector('#job-state').textContent === '中止'")
        assert page.locator("#job-cancel").is_hidden() and page.errors == []
    assert titles(service, "東大寺") == [] and service.library.get("kb").doc_count == 2


GEONAMES_ROW = (
    "{id}\t{name}\t{name}\t\t35.0\t135.7\tP\tPPL\tJP\t\t22\t\t\t\t{pop}\t\t50"
    "\tAsia/Tokyo\t2022-01-01\n"
)


def _geonames_site(root: Path, places: list[tuple[int, str, int]]) -> None:
    dump = root / "export" / "dump"
    dump.mkdir(parents=True, exist_ok=True)
    rows = "".join(GEONAMES_ROW.format(id=i, name=n, pop=p) for i, n, p in places)
    with zipfile.ZipFile(dump / "cities15000.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("cities15000.txt", rows)
    (dump / "admin1CodesASCII.txt").write_text("JP.22\tKyoto\tKyoto\t1857907\n")


@pytest.mark.slow
def test_a_geonames_source_is_fetched_again_when_the_server_has_a_new_export(settings, tmp_path):
    root = tmp_path / "geosite"
    _geonames_site(root, [(1, "Kyoto", 1459640), (2, "Uji", 180000)])
    served = DumpSite(root)
    try:
        mirror = f"{served.url}/export/dump"
        built = run(
            settings.data_dir, "ingest", "geonames", "--fetch", "cities15000", "--mirror", mirror
        )
        assert built.exit_code == 0, built.output
        _geonames_site(root, [(1, "Kyoto", 1459640), (2, "Uji", 180000), (3, "Kameoka", 87000)])
        again = run(settings.data_dir, "rebuild", "geonames", "--fetch", "--json")
        assert again.exit_code == 0, again.output
        assert json.loads(again.stdout)["docs"] == 3
        asked = [h for p, h in served.requests if p.endswith("cities15000.zip")]
        assert len(asked) == 2  # fetched again, not taken from the copy kept before
        identity = Context(settings).library.info("geonames").input
        assert identity["admin1"].startswith(str(settings.data_dir.resolve()))
    finally:
        served.close()


@pytest.mark.slow
def test_alternate_names_fetched_for_a_local_export_are_fetched_again(settings, tmp_path):
    """A local export with --fetch-alternate-names: rebuild --fetch fetches the names again
    (the export stays the local file)."""
    export = tmp_path / "JP.txt"
    export.write_text(GEONAMES_ROW.format(id=1857910, name="Kyoto", pop=1459640))
    admin1 = tmp_path / "admin1.txt"
    admin1.write_text("JP.22\tKyoto\tKyoto\t1857907\n")
    names = tmp_path / "site" / "export" / "dump" / "alternatenames"
    names.mkdir(parents=True)

    def publish(rows: str) -> None:
        with zipfile.ZipFile(names / "JP.zip", "w", zipfile.ZIP_DEFLATED) as archive:
            archive.writestr("JP.txt", rows)

    publish("1\t1857907\tja\t京都府\t1\t\t\t\t\t\n")
    served = DumpSite(tmp_path / "site")
    try:
        built = run(
            settings.data_dir,
            "ingest",
            "geonames",
            str(export),
            "--admin1",
            str(admin1),
            "--fetch-alternate-names",
            "JP",
            "--mirror",
            f"{served.url}/export/dump",
        )
        assert built.exit_code == 0, built.output
        service = Context(settings)
        assert reading.doc(
            service, DocRequest.of(source="geonames", title="Kyoto", fields=["attrs"])
        )["attrs"]["area"] == ["京都府"]
        publish("1\t1857907\tja\t京都府\t1\t\t\t\t\t\n2\t1857910\tja\t京都市\t1\t\t\t\t\t\n")
        again = run(settings.data_dir, "rebuild", "geonames", "--fetch", "--json")
        assert again.exit_code == 0, again.output
        assert json.loads(again.stdout)["docs"] == 1
        assert reading.doc(
            service, DocRequest.of(source="geonames", title="京都市", fields=["attrs"])
        )["attrs"]["area"] == ["京都府"]
        identity = service.library.info("geonames").input
        assert identity["path"] == str(export.resolve())  # still the local export
    finally:
        served.close()


# -- checks before any download ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["wikipedia", "--lang", "ja", "--mirror", "{url}"],
        ["geonames", "--fetch", "cities15000", "--mirror", "{url}/export/dump"],
        ["osm", "--fetch", "asia/japan/kanto", "--mirror", "{url}"],
    ],
)
def test_memory_is_checked_before_anything_is_downloaded(settings, site, monkeypatch, args):
    import chiezo.store.build

    monkeypatch.setattr(chiezo.store.build, "available_memory", lambda: 64 * 2**20)
    result = run(settings.data_dir, "ingest", *[a.format(url=site.url) for a in args])
    assert result.exit_code == 1, result.output
    assert "not enough memory" in result.output
    assert site.requests == [] and not (settings.data_dir / "downloads").exists()


@pytest.mark.slow
def test_disk_for_the_dump_and_its_build_is_checked_before_the_dump_is_requested(
    settings, site, monkeypatch
):
    import chiezo.store.build

    monkeypatch.setattr(chiezo.store.build, "DISK_FACTOR", 1e12)  # a build no disk can hold
    result = run(settings.data_dir, "ingest", "wikipedia", "--lang", "ja", "--mirror", site.url)
    assert result.exit_code == 1 and "not enough disk" in result.output
    assert "nothing was downloaded" in result.output
    assert not any("pages-articles" in path for path, _ in site.requests)
    assert not list((settings.data_dir / "downloads").rglob("*.bz2*"))


def test_a_download_of_unknown_size_stops_before_writing_when_the_disk_is_short(
    tmp_path, site, monkeypatch
):
    from chiezo.core.errors import BuildError
    from chiezo.ingest import download

    monkeypatch.setattr(download, "FREE_MARGIN", 1 << 62)
    dest = tmp_path / "dumpstatus.json"
    with pytest.raises(BuildError, match="not enough disk"):
        download.download(f"{site.url}/jawiki/20230501/dumpstatus.json", dest)
    assert not dest.exists() and not dest.with_name(dest.name + ".part").exists()


# -- recorded paths -----------------------------------------------------------------------------


@pytest.mark.slow
def test_recorded_paths_are_absolute_and_a_rebuild_runs_from_another_directory(
    tmp_path, monkeypatch
):
    work = tmp_path / "work"
    work.mkdir()
    (work / "jawiki-20230501-pages-articles.xml").write_text(wiki_dump(TEMPLE_PAGES))
    (work / "views.bz2").write_bytes(
        bz2.compress("ja.wikipedia 雷門 2 desktop 900 A900\n".encode())
    )
    (work / "cities.txt").write_text(GEONAMES_ROW.format(id=1, name="Kyoto", pop=1459640))
    (work / "admin1.txt").write_text("JP.22\tKyoto\tKyoto\t1857907\n")
    data = tmp_path / "data"
    monkeypatch.chdir(work)  # every path typed relative to here
    assert (
        run(
            data,
            "ingest",
            "wikipedia",
            "jawiki-20230501-pages-articles.xml",
            "--name",
            "jawiki",
            "--pageviews",
            "views.bz2",
        ).exit_code
        == 0
    )
    assert run(data, "ingest", "geonames", "cities.txt", "--admin1", "admin1.txt").exit_code == 0

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    service = Context(Settings(data_dir=data))
    wiki, geo = service.library.info("jawiki").input, service.library.info("geonames").input
    assert wiki["pageviews"] == str(work.resolve() / "views.bz2")
    assert geo["admin1"] == str(work.resolve() / "admin1.txt")
    assert all(Path(p).is_absolute() for p in (wiki["path"], geo["path"]))
    for name in ("jawiki", "geonames"):
        rebuilt = run(data, "rebuild", name, "--json")
        assert rebuilt.exit_code == 0, rebuilt.output
    assert (
        reading.doc(service, DocRequest.of(source="jawiki", title="雷門", fields=["doc_id"]))[
            "doc_id"
        ]
        == 1
    )  # page views
    attrs = reading.doc(service, DocRequest.of(source="geonames", title="Kyoto", fields=["attrs"]))[
        "attrs"
    ]  # the admin1 file
    assert attrs["area"] == ["京都府"] and "Kyoto" in attrs["area_alias"]
    assert os.getcwd() == str(elsewhere)


# -- an embedding run is refused before it starts when memory or disk is short ---------------


def test_an_embedding_run_short_of_memory_is_refused_before_the_model_loads(
    settings, service, folder, monkeypatch
):
    import chiezo.store.build
    import chiezo.store.embed

    build_docs(service, folder, "kb")
    before = generations.current_path(settings.corpus_dir / "kb")
    monkeypatch.setattr(chiezo.store.build, "available_memory", lambda: 64 * 2**20)
    monkeypatch.setattr(chiezo.store.embed, "get_embedder", lambda m: pytest.fail("loaded"))
    result = run(settings.data_dir, "embed", "kb", "--model", "use-m")
    assert result.exit_code == 1, result.output
    assert (
        "not enough memory to embed 'kb'" in result.output and "1,024 MiB needed" in result.output
    )
    assert generations.current_path(settings.corpus_dir / "kb") == before


def test_an_embedding_run_the_disk_cannot_hold_is_refused_with_its_size(
    settings, service, folder, monkeypatch
):
    import chiezo.store.build
    import chiezo.store.embed

    build_docs(service, folder, "kb")
    before = generations.current_path(settings.corpus_dir / "kb")
    needed = chiezo.store.embed.disk_for_vectors(
        service.library.get("kb"), 3, chiezo.store.embed.SENTENCE_UNIT_CHARS, 512
    )
    assert needed > before.stat().st_size + 3 * 512 * 2 * 3  # the copy and three homes of a vector
    monkeypatch.setattr(chiezo.store.build, "free_disk", lambda d: (d, needed // 2))
    result = run(settings.data_dir, "embed", "kb", "--model", "use-m")
    assert result.exit_code == 1, result.output
    assert "not enough disk to embed 'kb'" in result.output
    assert "nothing was changed" in result.output
    assert generations.current_path(settings.corpus_dir / "kb") == before
    assert service.library.get("kb").info().vectors is None
