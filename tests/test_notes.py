"""The notes source: same core schema as built sources, durable and safe under concurrent
writers, recall by time (to the calendar's ends), text and tag; tags bounded; a note on a full
disk refused with a 507 and nothing lost."""

import multiprocessing
import sqlite3
import threading

import httpx
import pytest

from chiezo.core import db
from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, NotFound
from chiezo.core.schema import TABLES
from chiezo.ops import remembering, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import (
    ForgetRequest,
    RecallRequest,
    RememberRequest,
    SearchRequest,
    UpdateRequest,
)
from chiezo.store import generations
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, build_docs, capped, error_body, write_files


def _core_schema(path) -> dict[str, str]:
    core = {line.split()[2] for line in TABLES.splitlines() if line.startswith("CREATE ")}
    with sqlite3.connect(path) as conn:
        rows = conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL").fetchall()
    conn.close()
    return {name: " ".join(sql.split()) for name, sql in rows if name in core}


def test_notes_have_the_same_core_schema_as_built_sources(service, settings, tmp_path):
    build_docs(service, write_files(tmp_path / "d", {"a.md": "# A\n\ntext\n"}), "built")
    remembering.remember(service, RememberRequest.of(text="something to keep"))
    built = _core_schema(generations.current_path(settings.corpus_dir / "built"))
    notes = _core_schema(settings.notes_path)
    assert built == notes
    assert len(built) >= 10


def test_notes_live_outside_the_corpus_and_the_name_is_reserved(service, settings, tmp_path):
    remembering.remember(service, RememberRequest.of(text="x"))
    assert settings.notes_path.parent != settings.corpus_dir
    assert not (settings.corpus_dir / "notes").exists()
    with pytest.raises(BadQuery, match="reserved"):
        build_docs(service, write_files(tmp_path / "d", {"a.md": "# A\n"}), "notes")


def test_remember_recall_update_forget(service):
    first = remembering.remember(
        service, RememberRequest.of(text="会議は毎週火曜の10時から。", tags=["仕事"])
    )
    second = remembering.remember(
        service, RememberRequest.of(text="The backup runs at 02:00 every night.", title="Backup")
    )
    assert [n["id"] for n in remembering.recall(service, RecallRequest.of())["notes"]] == [
        second["id"],
        first["id"],
    ]
    assert remembering.recall(service, RecallRequest.of(q="火曜"))["notes"][0]["id"] == first["id"]
    assert remembering.recall(service, RecallRequest.of(tag="仕事"))["total"] == 1
    assert (
        remembering.recall(service, RecallRequest.of(q="backup"))["notes"][0]["title"] == "Backup"
    )
    changed = remembering.update(
        service, UpdateRequest.of(note_id=first["id"], text="会議は毎週水曜の10時から。")
    )
    assert changed["tags"] == ["仕事"]  # not sent: unchanged
    assert changed["title"] == "会議は毎週水曜の10時から。"  # derived from the text: follows it
    assert changed["updated_at"] > first["updated_at"]
    assert remembering.recall(service, RecallRequest.of(q="火曜"))["total"] == 0
    assert remembering.recall(service, RecallRequest.of(q="水曜"))["total"] == 1
    remembering.forget(service, ForgetRequest.of(note_id=second["id"]))
    with pytest.raises(NotFound):
        remembering.note(service, second["id"])
    assert remembering.recall(service, RecallRequest.of())["total"] == 1


def test_ids_are_never_reused(service):
    a = remembering.remember(service, RememberRequest.of(text="one"))
    remembering.forget(service, ForgetRequest.of(note_id=a["id"]))
    b = remembering.remember(service, RememberRequest.of(text="two"))
    assert b["id"] == a["id"] + 1


def test_recall_by_time_window(service):
    note = remembering.remember(service, RememberRequest.of(text="a plan"))
    stamp = note["updated_at"]
    day = stamp[:10]
    assert remembering.recall(service, RecallRequest.of(since=day))["total"] == 1
    assert (
        remembering.recall(service, RecallRequest.of(until=day))["total"] == 1
    )  # a bare date includes the whole day
    assert remembering.recall(service, RecallRequest.of(until=stamp))["total"] == 1  # inclusive
    assert remembering.recall(service, RecallRequest.of(since="2999-01-01"))["total"] == 0
    assert (
        remembering.recall(
            service, RecallRequest.of(since=f"{day}T00:00:00+09:00", until="2999-12-31")
        )["total"]
        == 1
    )


def test_a_vague_question_finds_notes_through_shared_pieces(service):
    remembering.remember(
        service, RememberRequest.of(text="浅草寺の最寄り駅は浅草駅で、雷門から徒歩1分。")
    )
    found = remembering.recall(service, RecallRequest.of(q="浅草寺の近くの駅はどこだっけ"))
    assert found["mode"] == "trigram_or" and found["total"] == 1


def test_notes_are_searchable_like_any_source(service):
    remembering.remember(
        service, RememberRequest.of(text="清水寺の舞台は高さ約13メートル。", title="清水寺メモ")
    )
    result = searching.search(service, SearchRequest.of(query="清水寺メモ", source="notes"))
    assert result.hits[0].title_match
    assert (
        searching.search(
            service, SearchRequest.of(query="清水寺の舞台の高さは", source="notes")
        ).mode
        == "trigram_or"
    )


def test_the_trigram_counts_follow_updates_and_deletes(service, settings):
    note = remembering.remember(service, RememberRequest.of(text="固有の語句ですぞ"))
    src = service.library.get("notes")
    df = dict(src.conn.execute("SELECT gram, df FROM gram_df WHERE gram = '固有の'"))
    assert df == {"固有の": 1}
    remembering.update(service, UpdateRequest.of(note_id=note["id"], text="別の内容"))
    assert not src.conn.execute("SELECT 1 FROM gram_df WHERE gram = '固有の'").fetchone()


def test_an_acknowledged_note_is_on_disk(service, settings):
    note = remembering.remember(service, RememberRequest.of(text="durable"))
    with sqlite3.connect(settings.notes_path) as conn:  # another connection, as after a crash
        assert conn.execute("SELECT body FROM docs WHERE doc_id = ?", (note["id"],)).fetchone()
    conn.close()
    mode = service.notes._writer().execute("PRAGMA synchronous").fetchone()[0]
    assert mode == 2  # FULL: every commit reaches the disk


def test_concurrent_writers_in_threads_lose_nothing(service):
    def write(worker):
        for i in range(20):
            remembering.remember(service, RememberRequest.of(text=f"thread {worker} note {i}"))

    threads = [threading.Thread(target=write, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert remembering.recall(service, RecallRequest.of(limit=1))["total"] == 80


def _write_from_process(data_dir: str, worker: int) -> None:
    service = Context(Settings(data_dir=__import__("pathlib").Path(data_dir)))
    for i in range(15):
        remembering.remember(service, RememberRequest.of(text=f"process {worker} note {i}"))


@pytest.mark.slow
def test_concurrent_writer_processes_lose_nothing(settings, service):
    remembering.remember(service, RememberRequest.of(text="first"))
    ctx = multiprocessing.get_context("spawn")
    procs = [
        ctx.Process(target=_write_from_process, args=(str(settings.data_dir), w)) for w in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert remembering.recall(service, RecallRequest.of(limit=1))["total"] == 46
    ids = [n["id"] for n in remembering.recall(service, RecallRequest.of(limit=50))["notes"]]
    assert len(set(ids)) == 46


def test_bad_notes_are_refused(service):
    with pytest.raises(BadQuery):
        remembering.remember(service, RememberRequest.of(text="   "))
    with pytest.raises(BadQuery):
        remembering.update(service, UpdateRequest.of(note_id=1))
    with pytest.raises(NotFound):
        remembering.update(service, UpdateRequest.of(note_id=999, text="x"))
    with pytest.raises(BadQuery, match="ISO"):
        remembering.recall(service, RecallRequest.of(since="yesterday"))


# -- over REST, at the edges -------------------------------------------------------------------


@pytest.mark.slow
def test_recall_accepts_dates_at_the_ends_of_the_calendar(server):
    httpx.post(f"{server.url}/v1/notes", json={"text": "the backup runs at 02:00"})
    for params in (
        {"until": "9999-12-31"},
        {"since": "0001-01-01T00:00:00+01:00"},
        {"until": "9999-12-31T23:59:59-05:00"},
    ):
        found = httpx.get(f"{server.url}/v1/notes/recall", params=params)
        assert found.status_code == 200 and found.json()["total"] == 1, params
    assert (
        httpx.get(f"{server.url}/v1/notes/recall", params={"until": "0001-01-01"}).json()["total"]
        == 0
    )


@pytest.mark.slow
def test_tags_are_bounded_in_number_and_length(server):
    many = httpx.post(
        f"{server.url}/v1/notes", json={"text": "x", "tags": [f"t{i}" for i in range(51)]}
    )
    error_body(many, 400)
    long = httpx.post(f"{server.url}/v1/notes", json={"text": "x", "tags": ["t" * 101]})
    error_body(long, 400)
    ok = httpx.post(
        f"{server.url}/v1/notes", json={"text": "x", "tags": [f"t{i}" for i in range(50)]}
    )
    assert ok.status_code == 201 and len(ok.json()["tags"]) == 50


def test_the_notes_store_bounds_tags_too(service):
    """Below the request model (which refuses them first, on every surface), the store itself
    keeps the bound: a program writing notes directly cannot pass 4,000 tags either."""
    with pytest.raises(BadQuery, match="at most 50 tags"):
        service.notes.remember("x", tags=[str(i) for i in range(4_000)])
    with pytest.raises(BadQuery, match="tags"):
        remembering.remember(
            service, RememberRequest.of(text="x", tags=[str(i) for i in range(4_000)])
        )


@pytest.mark.slow
def test_a_note_on_a_full_disk_is_a_507_and_nothing_is_lost(settings, tmp_path, monkeypatch):
    with RunningServer(create_app(settings)) as running:
        kept = httpx.post(f"{running.url}/v1/notes", json={"text": "kept"})
        assert kept.status_code == 201
    monkeypatch.setattr(db, "open_for_writing", capped(db.open_for_writing, 1))
    with RunningServer(create_app(settings)) as running:
        full = httpx.post(f"{running.url}/v1/notes", json={"text": "big " * 50_000})
        assert error_body(full, 507)["error"].endswith("the disk is full")
        assert [n["text"] for n in httpx.get(f"{running.url}/v1/notes/recall").json()["notes"]] == [
            "kept"
        ]
