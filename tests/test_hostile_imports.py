"""An imported archive is data, not authority (issue #28): the paths it records — the folder its
documents came from, their keys and urls — never make the server read a file of this machine.
Originals of an imported source are served only from the folder the importing user names
(``chiezo import --input``), and a front-matter url never becomes a file read.

The attack as a tester ran it: a Markdown file whose front matter says ``url: file:///etc/passwd``
(or the victim's notes database), built and exported on the attacker's machine, the manifest's
and the generation's recorded folder rewritten to ``/`` (checksums recomputed), imported on the
victim's — then ``GET /doc/mal/1/original`` answered ``root:x:0:0…``."""

from __future__ import annotations

import hashlib
import io
import json
import sqlite3
import tarfile
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from chiezo.core.config import Settings
from chiezo.ops import reading, remembering
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest, RememberRequest
from chiezo.store import generations
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, build_docs, plain_tar, write_files

SECRET_FILE = Path("/etc/passwd")


def run(data: Path, *args: str):
    return CliRunner().invoke(cli, ["--data", str(data), *args])


@pytest.fixture
def victim(tmp_path) -> Settings:
    settings = Settings(data_dir=tmp_path / "victim", query_timeout=10)
    remembering.remember(
        Context(settings),
        RememberRequest.of(text="the victim's private note: the safe code is 4711"),
    )
    return settings


def _hostile_archive(tmp_path: Path, victim: Settings, *, key_of=None) -> Path:
    """Built and exported on the attacker's machine, then rewritten: recorded folder ``/``;
    ``key_of(old_key)`` gives each document a new key (default: unchanged)."""
    attacker = Settings(data_dir=tmp_path / "attacker")
    folder = write_files(
        tmp_path / "mal",
        {
            "a.md": "---\ntitle: Harmless\nurl: file:///etc/passwd\n---\nNothing to see.\n",
            "b.md": f"---\ntitle: Notes\nurl: {victim.notes_path.resolve().as_uri()}\n---\nHi.\n",
        },
    )
    build_docs(Context(attacker), folder, "mal")
    exported = tmp_path / "mal.tar"
    assert run(attacker.data_dir, "export", "mal", str(exported)).exit_code == 0
    with tarfile.open(fileobj=io.BytesIO(plain_tar(exported.read_bytes()))) as tar:
        manifest = json.loads(tar.extractfile("manifest.json").read())
        data = tar.extractfile("generation.db").read()
    db_path = tmp_path / "generation.db"
    db_path.write_bytes(data)
    with sqlite3.connect(db_path) as conn:
        recorded = json.loads(
            conn.execute("SELECT value FROM meta WHERE key = 'input'").fetchone()[0]
        )
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'input'",
            (json.dumps({**recorded, "path": "/"}),),
        )
        for doc_id, key in conn.execute("SELECT doc_id, key FROM docs").fetchall():
            conn.execute("UPDATE docs SET key = ? WHERE doc_id = ?", ((key_of or str)(key), doc_id))
    conn.close()
    data = db_path.read_bytes()
    manifest["input"]["path"] = "/"
    manifest["file"].update(bytes=len(data), sha256=hashlib.sha256(data).hexdigest())
    archive = tmp_path / "hostile.tar"
    with tarfile.open(archive, "w", format=tarfile.PAX_FORMAT) as tar:
        for name, body in (
            ("manifest.json", json.dumps(manifest).encode()),
            ("generation.db", data),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(body)
            tar.addfile(info, io.BytesIO(body))
    return archive


def _originals(settings: Settings, source: str) -> list[httpx.Response]:
    with RunningServer(create_app(settings)) as server:
        sources = httpx.get(f"{server.url}/v1/sources").json()["sources"]
        (docs,) = [s["docs"] for s in sources if s["name"] == source]
        assert docs >= 1, "the source serves its documents"
        return [httpx.get(f"{server.url}/doc/{source}/{i}/original") for i in range(1, docs + 1)]


def _reveals_nothing(responses: list[httpx.Response]) -> None:
    for response in responses:
        assert response.status_code == 404, response.text[:200]
        assert "root:x:0:0" not in response.text and "4711" not in response.text
        assert "has no original file to show" in response.text


@pytest.mark.slow
def test_an_archive_naming_root_as_its_folder_reads_no_file_here(tmp_path, victim):
    archive = _hostile_archive(tmp_path, victim)
    imported = run(victim.data_dir, "import", str(archive))
    assert imported.exit_code == 0, imported.output
    _reveals_nothing(_originals(victim, "mal"))


@pytest.mark.slow
def test_keys_pointing_at_files_of_this_machine_read_nothing_either(tmp_path, victim):
    notes = victim.notes_path.resolve()
    targets = iter([str(SECRET_FILE).lstrip("/"), str(notes).lstrip("/")])
    archive = _hostile_archive(tmp_path, victim, key_of=lambda key: next(targets))
    assert run(victim.data_dir, "import", str(archive)).exit_code == 0
    _reveals_nothing(_originals(victim, "mal"))


@pytest.mark.slow
def test_with_a_chosen_folder_keys_still_cannot_leave_it(tmp_path, victim):
    chosen = write_files(tmp_path / "chosen", {"a.md": "mine\n", "b.md": "mine too\n"})
    climb = iter(["../" * 12 + str(SECRET_FILE).lstrip("/"), "../" * 12 + "proc/self/environ"])
    archive = _hostile_archive(tmp_path, victim, key_of=lambda key: next(climb))
    assert run(victim.data_dir, "import", str(archive), "--input", str(chosen)).exit_code == 0
    for response in _originals(victim, "mal"):
        assert response.status_code == 404 and "root:x:0:0" not in response.text
        assert "is not there any more" in response.text


@pytest.mark.slow
def test_an_import_serves_originals_and_rebuilds_only_from_the_folder_chosen_here(tmp_path, victim):
    archive = _hostile_archive(tmp_path, victim)
    chosen = write_files(
        tmp_path / "copy",
        {"a.md": "---\ntitle: Harmless\n---\nThe copy on this machine.\n", "b.md": "Hi.\n"},
    )
    assert run(victim.data_dir, "import", str(archive), "--input", str(chosen)).exit_code == 0
    served = _originals(victim, "mal")
    assert sorted(r.status_code for r in served) == [200, 200]
    assert any("The copy on this machine." in r.text for r in served)
    info = Context(victim).library.info("mal")
    # the folder chosen here, and how the source was cut (options), nothing else of the archive's
    assert info.input == {"path": str(chosen.resolve()), "options": {"chunk_chars": 800}}
    assert info.imported
    meta = Context(victim).library.get("mal").meta
    assert json.loads(meta["imported_from"])["input"]["path"] == "/"  # kept as information only

    rebuilt = run(victim.data_dir, "rebuild", "mal", "--json")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert Context(victim).library.info("mal").input["path"] == str(chosen.resolve())


@pytest.mark.slow
def test_an_import_without_a_folder_has_no_input_to_rebuild_from(tmp_path, victim):
    archive = _hostile_archive(tmp_path, victim)
    assert run(victim.data_dir, "import", str(archive)).exit_code == 0
    refused = run(victim.data_dir, "rebuild", "mal", "--json")
    assert refused.exit_code == 2 and "has no recorded input path" in refused.stdout
    with RunningServer(create_app(victim)) as server:
        plan = httpx.get(f"{server.url}/v1/jobs/plan", params={"source": "mal"})
        assert plan.status_code == 400 and '"/"' not in plan.text
        job = httpx.post(f"{server.url}/v1/jobs", json={"source": "mal", "action": "rebuild"})
        assert job.status_code == 400


@pytest.mark.slow
def test_a_generation_imported_before_this_rule_is_not_trusted_either(tmp_path, victim):
    """An import by an older Chiezo kept the archive's recorded folder: it is not used."""
    folder = write_files(tmp_path / "docs", {"a.md": "---\ntitle: A\n---\nText.\n"})
    build_docs(Context(victim), folder, "old")
    current = generations.current_path(victim.corpus_dir / "old")
    with sqlite3.connect(current) as conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'input'", (json.dumps({"path": "/"}),))
        conn.execute("UPDATE docs SET key = 'etc/passwd'")
        conn.execute("INSERT INTO meta (key, value) VALUES ('imported_from', '{}')")
    conn.close()
    _reveals_nothing(_originals(victim, "old"))


@pytest.mark.slow
def test_a_front_matter_file_url_never_becomes_a_file_read(tmp_path, victim):
    folder = write_files(
        tmp_path / "docs",
        {
            "a.md": "---\ntitle: Harmless\nurl: file:///etc/passwd\n---\nNothing to see.\n",
            "web.md": "---\ntitle: Web\nurl: https://example.org/page\n---\nA page.\n",
        },
    )
    service = Context(victim)
    build_docs(service, folder, "kb")
    harmless = reading.doc(service, DocRequest.of(source="kb", title="Harmless"))
    # its own file, not passwd
    assert harmless["source_url"] == (folder / "a.md").resolve().as_uri()
    assert (
        reading.doc(service, DocRequest.of(source="kb", title="Web"))["source_url"]
        == "https://example.org/page"
    )
    with RunningServer(create_app(victim)) as server:
        served = httpx.get(f"{server.url}/doc/kb/{harmless['doc_id']}/original")
    assert served.status_code == 200 and "Nothing to see." in served.text
    assert "root:x:0:0" not in served.text


def test_a_refused_import_leaves_nothing_behind(tmp_path, victim):
    archive = _hostile_archive(tmp_path, victim)
    data = bytearray(archive.read_bytes())
    data[data.index(b"SQLite format 3") + 3000] ^= 0xFF  # the generation no longer matches
    damaged = tmp_path / "damaged.tar"
    damaged.write_bytes(data)
    for attempt in range(3):
        refused = run(victim.data_dir, "import", str(damaged), "--name", f"fresh{attempt}")
        assert refused.exit_code == 2 and "does not match its checksum" in refused.output
    assert sorted(p.name for p in victim.corpus_dir.iterdir()) == []
    assert Context(victim).library.names() == ["notes"]
