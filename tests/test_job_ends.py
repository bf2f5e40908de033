"""Every job ends (issue #28): a cancelled job that does not stop, a job whose process dies and
a Wikipedia build whose parser process is killed mid-task all end within a bounded time, their
processes gone, and the next build is not blocked; a killed build's parser processes die with it.

A job runs in a process of its own (ops/job_process.py): the tests find it and its parser processes
through /proc, as ``ps`` would, and kill them for real."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from chiezo.ops import building, job_process
from chiezo.store.kinds import register, unregister
from chiezo.surfaces.rest import create_app
from job_kinds import HeldKind

from helpers import LOCAL, data_file, wiki_dump

# Wikipedia builds and their parser processes, killed for real: left out of `make test-fast`
pytestmark = pytest.mark.slow

JAWIKI = "wikipedia/jawiki-20230501-excerpt.xml.bz2"
BOUND_S = 30.0  # "a bounded time": far above what each end takes, far below a hang


def descendants(pid: int) -> list[int]:
    """Every living process below ``pid`` (children, their children…), from /proc."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if fields[0] != "Z":  # a zombie has ended; only its exit status is left
                parents.setdefault(int(fields[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def job_processes() -> list[int]:
    """This test process's job processes (``python -m chiezo.ops.job_process``)."""
    return [p for p in descendants(os.getpid()) if b"chiezo.ops.job_process" in _cmdline(p)]


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


def wait_for(what, timeout: float = BOUND_S, every: float = 0.02):
    deadline = time.monotonic() + timeout
    while not (found := what()):
        assert time.monotonic() < deadline, f"not within {timeout} s"
        time.sleep(every)
    return found


def finished(client, job_id: int) -> dict:
    return wait_for(
        lambda: (j := client.get(f"/v1/jobs/{job_id}").json())["state"] != "running" and j
    )


@pytest.fixture
def client(settings, service):
    return TestClient(create_app(settings), base_url=LOCAL)


@pytest.fixture
def held(service, tmp_path):
    kind = register(HeldKind())
    lines = tmp_path / "lines.txt"
    lines.write_text("古池や\n蛙飛び込む\n水の音\n", encoding="utf-8")
    building.ingest(service, "held", lines, "slow")
    yield lines
    unregister(kind.name)


def _stuck(service, name: str) -> None:
    """Record source ``name`` as built with ``stuck``: its rebuild waits without a word."""
    import json
    import sqlite3

    source = service.library.get(name)
    recorded = source.info().input
    with sqlite3.connect(source.path) as conn:
        conn.execute(
            "UPDATE meta SET value = ? WHERE key = 'input'",
            (json.dumps({**recorded, "options": {"stuck": True}}),),
        )
    conn.close()
    service.library.forget(name)


def test_a_cancelled_job_that_does_not_stop_is_killed_and_the_next_build_runs(
    client, service, held, monkeypatch
):
    monkeypatch.setattr(job_process, "CANCEL_GRACE_S", 1.0)
    _stuck(service, "slow")
    hold = held.with_name(held.name + ".hold")
    hold.touch()  # held for good: the build reports nothing, as one blocked in a join
    before = client.get("/v1/sources").json()["sources"][0]["generation"]
    job = client.post("/v1/jobs", json={"source": "slow", "action": "rebuild"}).json()
    (pid,) = wait_for(job_processes)
    wait_for(
        lambda: (client.get(f"/v1/jobs/{job['id']}").json()["phase"] or {}).get("name") == "waiting"
    )
    assert client.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202

    started = time.monotonic()
    ended = finished(client, job["id"])
    assert ended["state"] == "cancelled" and time.monotonic() - started < BOUND_S
    assert any("did not stop within 1 s" in line["text"] for line in ended["log"])
    assert "nothing was switched in" in ended["log"][-1]["text"]
    wait_for(lambda: not job_processes() and not descendants(pid), timeout=5)
    assert client.get("/v1/sources").json()["sources"][0]["generation"] == before

    hold.unlink()
    after = client.post("/v1/jobs", json={"source": "slow", "action": "rebuild"})
    assert after.status_code == 202  # not blocked by the killed one
    assert finished(client, after.json()["id"])["state"] == "done"


def test_a_job_whose_process_is_killed_fails_saying_so(client, held):
    hold = held.with_name(held.name + ".hold")
    hold.touch()
    job = client.post("/v1/jobs", json={"source": "slow", "action": "rebuild"}).json()
    (pid,) = wait_for(job_processes)
    os.kill(pid, signal.SIGKILL)
    ended = finished(client, job["id"])
    assert ended["state"] == "failed"
    assert ended["error"]["error"].startswith("the job's process was killed by signal 9")
    hold.unlink()
    again = client.post("/v1/jobs", json={"source": "slow", "action": "rebuild"})
    assert again.status_code == 202 and finished(client, again.json()["id"])["state"] == "done"


@pytest.fixture
def jawiki(service):
    building.ingest(service, "wikipedia", data_file(JAWIKI), "jawiki")
    return service


def _parsers(pid: int) -> list[int]:
    """The parser processes (spawned multiprocessing children) below ``pid``."""
    return [p for p in descendants(pid) if b"spawn_main" in _cmdline(p)]


def test_a_wiki_rebuild_whose_parser_is_killed_mid_task_fails_and_ends(client, jawiki):
    before = client.get("/v1/sources").json()["sources"][0]["generation"]
    job = client.post("/v1/jobs", json={"source": "jawiki", "action": "rebuild"}).json()
    (pid,) = wait_for(job_processes)
    workers = wait_for(lambda: _parsers(pid), every=0.005)
    os.kill(workers[0], signal.SIGKILL)

    ended = finished(client, job["id"])
    assert ended["state"] == "failed", ended
    assert "a wikitext parser process ended unexpectedly" in ended["error"]["error"]
    wait_for(lambda: not job_processes() and not descendants(pid), timeout=5)
    assert client.get("/v1/sources").json()["sources"][0]["generation"] == before
    again = client.post("/v1/jobs", json={"source": "jawiki", "action": "rebuild"})
    assert again.status_code == 202 and finished(client, again.json()["id"])["state"] == "done"


def test_a_cancelled_wiki_rebuild_ends_with_its_parsers(client, jawiki):
    job = client.post("/v1/jobs", json={"source": "jawiki", "action": "rebuild"}).json()
    (pid,) = wait_for(job_processes)
    wait_for(lambda: _parsers(pid), every=0.005)
    assert client.post(f"/v1/jobs/{job['id']}/cancel").status_code == 202
    ended = finished(client, job["id"])
    assert ended["state"] == "cancelled", ended
    wait_for(lambda: not job_processes() and not descendants(pid), timeout=5)


def _long_pages(count: int, sections: int) -> list[tuple[int, str, str]]:
    """Articles that take a parser seconds each (measured: 8,000 sections, 2.2 s)."""
    body = "".join(
        f"== 節{i} ==\n[[リンク{i}|表示{i}]]の{{{{lang|en|word{i}}}}}と'''太字{i}'''。\n"
        for i in range(sections)
    )
    return [(n, f"長い記事{n}", body) for n in range(1, count + 1)]


def test_a_killed_build_takes_its_parser_processes_with_it(tmp_path):
    """``kill -9`` of ``chiezo ingest wikipedia`` while its parsers are busy: they were seen
    parsing on for 1–5 s, for nobody; now they die with it."""
    dump = tmp_path / "long.xml"
    dump.write_text(wiki_dump(_long_pages(4, 20_000)), encoding="utf-8")
    env = {**os.environ, "CHIEZO_DATA": str(tmp_path / "data")}
    build = subprocess.Popen(
        [sys.executable, "-m", "chiezo", "ingest", "wikipedia", str(dump), "--name", "long"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        workers = wait_for(lambda: _parsers(build.pid), every=0.005)
        wait_for(lambda: any(_cpu_ticks(w) > 50 for w in workers), every=0.05)  # parsing
        build.kill()
        build.wait()
        wait_for(lambda: not any(_state(w) not in ("Z", "gone") for w in workers), timeout=1.0)
    finally:
        build.kill()


def _cpu_ticks(pid: int) -> int:
    """User + system clock ticks a process has run (1/100 s each)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return int(fields[11]) + int(fields[12])


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"
