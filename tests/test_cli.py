"""The CLI: output, JSON, and exit codes scripts can rely on; `chiezo serve` runs until stopped,
and killed, takes its workers with it."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import httpx
import pytest
from click.testing import CliRunner

from chiezo.surfaces.cli.main import cli

from helpers import free_port, write_files

FILES = {
    "a.md": "# 浅草寺\n\n東京都台東区にある寺。\n",
    "b.md": "# 台東区\n\n台東区には浅草寺がある。\n",
}


@pytest.fixture
def runner(tmp_path):
    data = tmp_path / "data"
    folder = write_files(tmp_path / "docs", FILES)
    runner = CliRunner()
    result = runner.invoke(cli, ["--data", str(data), "ingest", "docs", str(folder), "--name", "t"])
    assert result.exit_code == 0, result.output

    def run(*args):
        return runner.invoke(cli, ["--data", str(data), *args])

    return run


def test_ingest_reports_what_it_built(tmp_path):
    folder = write_files(tmp_path / "docs", FILES)
    result = CliRunner().invoke(
        cli, ["--data", str(tmp_path / "d"), "ingest", "docs", str(folder), "--name", "t", "--json"]
    )
    assert result.exit_code == 0
    report = json.loads(result.stdout)
    assert report["docs"] == 2 and report["name"] == "t"


def test_search_prints_hits_and_exits_zero(runner):
    result = runner("search", "浅草寺")
    assert result.exit_code == 0
    assert "浅草寺" in result.stdout and "2 matches, by keyword" in result.stdout
    assert "mode" not in result.stdout  # the plan's name only with --explain
    assert "match mode" in runner("search", "浅草寺", "--explain").stdout


def test_search_json_has_hits_total_and_mode(runner):
    result = runner("search", "浅草寺", "--source", "t", "--json")
    data = json.loads(result.stdout)
    assert data["total"] == 2 and data["mode"].endswith("fts")
    assert data["hits"][0]["title"] == "浅草寺" and data["hits"][0]["title_match"]


def test_nothing_found_exits_3(runner):
    result = runner("search", "存在しない語句です", "-s", "t")
    assert result.exit_code == 3


def test_unknown_source_exits_2_and_lists_known_sources(runner):
    result = runner("search", "浅草寺", "-s", "nope")
    assert result.exit_code == 2
    assert "known sources: t" in result.stderr
    as_json = runner("search", "浅草寺", "-s", "nope", "--json")
    assert json.loads(as_json.stdout)["known_sources"] == ["t"]


def test_usage_errors_exit_2(runner):
    assert runner("search").exit_code == 2
    assert runner("search", "x", "--limit", "500").exit_code == 2
    assert runner("doc", "-s", "t").exit_code == 2


def test_doc_by_title_and_by_id(runner):
    result = runner("doc", "浅草寺", "-s", "t", "--json")
    data = json.loads(result.stdout)
    assert data["title"] == "浅草寺" and "台東区" in data["body"]
    by_id = json.loads(runner("doc", "-s", "t", "--id", str(data["doc_id"]), "--json").stdout)
    assert by_id["key"] == "a.md"


def test_doc_not_found_exits_3_with_candidates(runner):
    result = runner("doc", "浅草", "-s", "t")
    assert result.exit_code == 3
    assert "did you mean: 浅草寺" in result.stderr


def test_doc_with_unknown_fields_lists_the_allowed_ones(runner):
    result = runner("doc", "浅草寺", "-s", "t", "--fields", "title,nonsense", "--json")
    assert result.exit_code == 2
    assert "title" in json.loads(result.stdout)["allowed_fields"]


def test_sources_lists_counts(runner):
    data = json.loads(runner("sources", "--json").stdout)
    assert data[0]["name"] == "t" and data[0]["docs"] == 2 and data[0]["kind"] == "docs"


@pytest.mark.slow
def test_the_installed_command_runs_end_to_end(tmp_path):
    """The real entry point in a separate process: build, search, exit codes."""
    env = {**os.environ, "CHIEZO_DATA": str(tmp_path / "data")}
    folder = write_files(tmp_path / "docs", FILES)

    def chiezo(*args):
        return subprocess.run(
            [sys.executable, "-m", "chiezo", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    built = chiezo("ingest", "docs", str(folder), "--name", "t")
    assert built.returncode == 0, built.stderr
    assert chiezo("search", "台東区", "--json").returncode == 0
    assert chiezo("search", "見つからない語句", "--json").returncode == 3
    missing = chiezo("ingest", "docs", str(tmp_path / "missing"), "--name", "t")
    assert missing.returncode == 2 and "no such folder" in missing.stderr
    assert chiezo("search", "台東区", "-s", "t").returncode == 0  # still serving


def test_notes_commands(runner):
    stored = json.loads(
        runner("notes", "remember", "会議は火曜10時", "--tag", "仕事", "--json").stdout
    )
    assert stored["tags"] == ["仕事"]
    found = runner("notes", "recall", "火曜", "--json")
    assert found.exit_code == 0 and json.loads(found.stdout)["total"] == 1
    assert runner("notes", "recall", "存在しない語句").exit_code == 3
    updated = json.loads(
        runner("notes", "update", str(stored["id"]), "--text", "会議は水曜10時", "--json").stdout
    )
    assert updated["text"] == "会議は水曜10時" and updated["tags"] == ["仕事"]
    assert runner("notes", "forget", str(stored["id"])).exit_code == 0
    assert runner("notes", "forget", str(stored["id"])).exit_code == 3
    assert runner("notes", "remember", "   ").exit_code == 2


def test_mcp_config_prints_a_snippet(runner):
    result = runner("mcp", "config", "--client", "claude-desktop")
    config = json.loads(result.stdout)
    assert config["mcpServers"]["chiezo"]["args"] == ["mcp"]
    http = runner("mcp", "config", "--client", "vscode", "--http", "http://127.0.0.1:8080/mcp")
    assert json.loads(http.stdout)["servers"]["chiezo"]["url"] == "http://127.0.0.1:8080/mcp"


def test_serve_runs_the_api_until_stopped(tmp_path):
    """`chiezo serve` as a user starts it: a separate process answering on loopback."""
    import time

    import httpx

    from helpers import free_port

    env = {**os.environ, "CHIEZO_DATA": str(tmp_path / "data")}
    folder = write_files(tmp_path / "docs", FILES)
    subprocess.run(
        [sys.executable, "-m", "chiezo", "ingest", "docs", str(folder), "--name", "t"],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "chiezo", "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                health = httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2)
                break
            except httpx.HTTPError:
                assert proc.poll() is None, proc.stderr.read().decode()
                assert time.monotonic() < deadline, "the server did not come up"
                time.sleep(0.2)
        assert health.json()["sources"] == 1
        found = httpx.get(f"http://127.0.0.1:{port}/v1/t/search", params={"q": "浅草寺"}).json()
        assert found["hits"][0]["title"] == "浅草寺"
    finally:
        proc.terminate()
        proc.wait(timeout=15)


@pytest.mark.slow
def test_killing_the_server_stops_its_workers(tmp_path):
    port = free_port()
    env = {**os.environ, "CHIEZO_DATA": str(tmp_path / "data")}
    server = subprocess.Popen(
        [sys.executable, "-m", "chiezo", "serve", "--port", str(port), "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    workers: list[int] = []
    try:
        _wait_until(lambda: _answers(port), 60)
        workers = _children(server.pid)
        assert len(workers) >= 2
        server.send_signal(signal.SIGKILL)
        server.wait(10)
        _wait_until(lambda: not any(_alive(pid) for pid in workers), 20)
        with socket.socket() as again:  # the port is free for the restart
            again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            again.bind(("127.0.0.1", port))
    finally:
        server.kill()
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _answers(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    fields = stat.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid and fields[0] != "Z":
                found.append(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _wait_until(condition, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.2)


ORPHANED_WORKER = """
import multiprocessing, os, sys, time
from chiezo.surfaces.rest.supervision import SUPERVISOR_ENV, follow_supervisor

def worker(ready):
    time.sleep(1.0)  # still importing when the supervisor dies
    print(os.getpid(), flush=True)
    print(follow_supervisor(), flush=True)  # its watch may stop this process at once
    time.sleep(30)

if __name__ == "__main__":
    os.environ[SUPERVISOR_ENV] = str(os.getpid())
    child = multiprocessing.get_context("spawn").Process(target=worker, args=(None,))
    child.start()
    os._exit(0)  # kill -9 of the supervisor, before the worker looked
"""


@pytest.mark.slow
def test_a_worker_whose_supervisor_died_before_it_looked_stops(tmp_path):
    script = tmp_path / "orphan.py"
    script.write_text(ORPHANED_WORKER)
    run = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True)
    assert run.stdout is not None
    pid = run.stdout.readline().strip()
    try:
        assert pid.isdigit()
        _wait_until(lambda: not _alive(int(pid)), 10)
    finally:
        if _alive(int(pid)):
            os.kill(int(pid), signal.SIGKILL)
