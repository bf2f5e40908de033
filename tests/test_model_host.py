"""One copy of each query model per server (store/model_host.py): a real ``chiezo serve
--workers 2`` whose workers and a CLI command on the same data directory embed queries through
its host; the host as an attacker would try it."""

from __future__ import annotations

import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pytest

from chiezo.core.config import Settings
from chiezo.core.errors import ModelUnavailable
from chiezo.ops import building, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest
from chiezo.store import model_host
from chiezo.store.embedders import get_embedder

from helpers import BOOK_FILES, build_docs, free_port, write_files

pytestmark = pytest.mark.slow
MODEL = "use-m"


def _mapped(pid: int, library: str) -> bool:
    return library in Path(f"/proc/{pid}/maps").read_text()


def _children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(c) for c in (task / "children").read_text().split()]
    return found


def _wait_for(predicate, seconds: float = 60.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"not within {seconds} s")


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A library with one use-m source, served by two workers."""
    root = tmp_path_factory.mktemp("hosted")
    settings = Settings(data_dir=root / "data")
    service = Context(settings)
    build_docs(service, write_files(root / "book", BOOK_FILES), "book")
    building.embed(service, "book", MODEL)
    port = free_port()
    env = {**os.environ, "CHIEZO_DATA": str(settings.data_dir)}
    env.pop(model_host.HOST_ENV, None)
    log = root / "serve.log"  # what the server and its host said, shown when a test fails
    with log.open("wb") as said:
        process = subprocess.Popen(
            [sys.executable, "-m", "chiezo", "serve", "--port", str(port), "--workers", "2"],
            env=env,
            stdout=said,
            stderr=subprocess.STDOUT,
        )
    server = Served(process, f"http://127.0.0.1:{port}", settings, log)
    try:
        _wait_for(server.answers, 120)
        yield server
    finally:
        process.terminate()
        process.wait(20)


@dataclass
class Served:
    process: subprocess.Popen
    base: str
    settings: Settings
    log: Path

    def said(self) -> str:
        return self.log.read_text(errors="replace")

    def answers(self) -> bool:
        assert self.process.poll() is None, f"the server ended: {self.said()}"
        try:
            return httpx.get(self.base + "/healthz", timeout=2).status_code == 200
        except httpx.HTTPError:
            return False

    def hosts(self) -> list[int]:
        assert self.process.poll() is None, f"the server ended: {self.said()}"
        return [
            pid
            for pid in _children(self.process.pid)
            if b"chiezo.store.model_host" in Path(f"/proc/{pid}/cmdline").read_bytes()
        ]

    def host(self) -> int:
        """The one host process (a host being started again is waited for)."""
        try:
            (found,) = _wait_for(lambda: (h := self.hosts()) and len(h) == 1 and h, 30)
        except AssertionError as exc:
            raise AssertionError(f"no single host ({exc}): {self.said()}") from None
        return found


def test_workers_embed_through_one_host_and_load_no_model(served):
    process, base, settings = served.process, served.base, served.settings
    question = "Which file format holds each source?"
    answer = httpx.get(
        base + "/v1/book/search", params={"q": question, "mode": "semantic"}, timeout=60
    )
    assert answer.status_code == 200, answer.text
    asked = SearchRequest(query=question, source="book", mode="semantic")
    here = searching.search(Context(Settings(data_dir=settings.data_dir)), asked)
    assert here.hits and [h["doc_id"] for h in answer.json()["hits"]] == [
        h.doc_id for h in here.hits
    ]
    host = served.host()
    workers = [pid for pid in _children(process.pid) if pid != host]
    assert _mapped(host, "onnxruntime")
    # every worker answered a query by meaning (each warmed the source at start) without it
    assert workers and not any(_mapped(pid, "libonnxruntime") for pid in workers)


def test_a_cli_command_on_the_same_data_embeds_through_the_running_host(served):
    settings = served.settings
    served.host()  # running
    script = (
        "import sys; from chiezo.store import model_host as h; "
        f"h.look_for_host({str(settings.data_dir)!r}); e = h.query_embedder('use-m'); "
        "v = e.embed(['a borrowed value'], 'query'); "
        "print(type(e).__name__, 'onnxruntime' in sys.modules, v.shape[1]); "
        "import numpy; numpy.save(sys.stdout.buffer, v)"
    )
    env = {k: v for k, v in os.environ.items() if k != model_host.HOST_ENV}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, env=env, check=True)
    line, _, saved = out.stdout.partition(b"\n")
    assert line.decode().split() == ["HostedEmbedder", "False", "512"], served.said()
    import io

    hosted = np.load(io.BytesIO(saved))
    local = get_embedder(MODEL).embed(["a borrowed value"], "query")
    assert np.allclose(hosted, local, atol=1e-5)


CLI_SEARCH = """
import json, sys
from chiezo.ops import searching
from chiezo.surfaces.cli.main import main
here, search = [], searching.search
searching.search = lambda ctx, request: here.append(1) or search(ctx, request)
try:
    sys.argv[0] = "chiezo"
    main()
finally:
    said = {"searched_here": bool(here), "vectors_here": "usearch.index" in sys.modules}
    print(json.dumps(said), file=sys.stderr)
"""


def _cli_search(served, *args: str, host: bool = True) -> tuple[int, str, dict]:
    """``chiezo search ARGS --json`` as a new process on the served data: (exit status,
    stdout, whether it searched itself and opened a vector index)."""
    env = {k: v for k, v in os.environ.items() if k != model_host.HOST_ENV}
    if not host:
        env[model_host.HOST_ENV] = "off"
    data = str(served.settings.data_dir)
    run = subprocess.run(
        [sys.executable, "-c", CLI_SEARCH, "--data", data, "search", *args, "--json"],
        capture_output=True,
        text=True,
        env=env,
    )
    said = json.loads(run.stderr.strip().splitlines()[-1])
    return run.returncode, run.stdout, said


def test_a_cli_search_on_the_same_data_is_answered_by_the_server(served):
    served.host()
    for args in [
        ("which file format", "--source", "book", "--mode", "hybrid"),
        ("SQLite", "--source", "book", "--mode", "keyword", "-n", "2", "--explain"),
        ("tea prices", "--mode", "semantic"),  # every source
    ]:
        status, printed, said = _cli_search(served, *args)
        assert status == 0 and said == {"searched_here": False, "vectors_here": False}, args
        alone, printed_alone, said_alone = _cli_search(served, *args, host=False)
        assert said_alone["searched_here"]
        there, here = json.loads(printed), json.loads(printed_alone)
        # the one difference: alone, no server is known to link to (ops/links.py)
        assert all(h["url"].startswith(served.base + "/doc/") for h in there["hits"])
        assert all(h.pop("url") is None for h in here["hits"])
        assert all(h.pop("url") for h in there["hits"])
        assert (status, there) == (alone, here), args


def test_a_refused_cli_search_is_refused_as_the_command_refuses_it(served):
    # the server answers 404; the command searches itself and says so in its own words
    status, printed, said = _cli_search(served, "anything", "--source", "no_such_source")
    assert status == 2 and said["searched_here"] and json.loads(printed)["status"] == 404
    assert (status, printed) == _cli_search(
        served, "anything", "--source", "no_such_source", host=False
    )[:2]


def test_a_killed_host_is_started_again_and_queries_go_on(served):
    old = served.host()
    os.kill(old, 9)
    _wait_for(lambda: served.hosts() not in ([], [old]))
    answer = httpx.get(
        served.base + "/v1/book/search",
        params={"q": "a database file per source", "mode": "semantic"},
        timeout=60,
    )
    assert answer.status_code == 200, answer.text
    assert answer.json()["hits"]


# -- the host as an attacker would try it -------------------------------------------------------


@pytest.fixture
def temporary(monkeypatch):
    """A temporary directory of this test's own, reachable by other users (as /tmp is)."""
    base = Path(tempfile.mkdtemp())
    base.chmod(0o755)
    monkeypatch.setenv("TMPDIR", str(base))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def host(temporary):
    """A host of this test's own."""
    path = model_host.socket_path(temporary / "data")
    assert path is not None and path.parent.parent == temporary
    process = subprocess.Popen(
        [sys.executable, "-m", "chiezo.store.model_host", str(path), str(os.getpid())]
    )
    _wait_for(lambda: path.exists(), 30)
    yield path
    process.terminate()
    process.wait(10)


def _raw(path: Path, payload: bytes, *, length: int | None = None) -> bytes:
    with socket.socket(socket.AF_UNIX) as conn:
        conn.settimeout(30)
        conn.connect(str(path))
        conn.sendall(struct.pack(">I", len(payload) if length is None else length) + payload)
        conn.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def _request(**fields) -> bytes:
    return json.dumps({"model": MODEL, "kind": "query", "texts": ["x"], **fields}).encode()


def test_the_host_refuses_malformed_requests_and_goes_on_serving(host):
    assert _raw(host, b"", length=1 << 30) == b""  # a frame beyond the limit: closed
    assert _raw(host, b"{not json") == b""
    for bad, reason in [
        (_request(texts="x"), "list of strings"),
        (_request(texts=[1, 2]), "list of strings"),
        (_request(texts=["x"] * (model_host.MAX_TEXTS + 1)), "at most"),
        (_request(kind="system"), "kind must be"),
        (_request(model="no-such-model"), "unknown embedding model"),
        (json.dumps(["a list"]).encode(), "JSON object"),
    ]:
        answer = _raw(host, bad)
        assert reason in json.loads(answer[4:])["error"]
    embedder = model_host.HostedEmbedder(host, MODEL)
    assert embedder.embed(["still answering"], "query").shape == (1, 512)
    with pytest.raises(ModelUnavailable, match="unknown embedding model"):
        model_host.HostedEmbedder(host, "../../etc/passwd")


def test_no_host_where_the_socket_directory_is_not_private(temporary, tmp_path, capsys):
    planted = temporary / f"chiezo-{os.getuid()}"
    planted.mkdir(mode=0o777)
    planted.chmod(0o777)  # someone opened it up (or made it) to plant a socket
    assert model_host.host_dir() is None
    assert model_host.socket_path(tmp_path / "data") is None
    assert model_host.find_host(tmp_path / "data") is None
    with model_host.hosting(tmp_path / "data") as socket_path:
        assert socket_path is None  # the server says why, and its workers load their own
    assert f"no model host ({planted} is not a private directory" in capsys.readouterr().err
    planted.rmdir()
    planted.symlink_to(tmp_path)  # a link to a directory of someone else's choosing
    assert model_host.host_dir() is None


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another user")
def test_another_user_gets_no_answer_even_through_an_opened_directory(host):
    host.parent.chmod(0o777)
    host.chmod(0o777)
    # the host may close before the request is all sent (a broken pipe): no answer either
    script = (
        "import os, socket, struct, json; os.setuid(65534); "
        f"c = socket.socket(socket.AF_UNIX); c.connect({str(host)!r}); "
        "p = json.dumps({'model': 'use-m', 'kind': 'query', 'texts': ['x']}).encode(); "
        "\ntry:\n c.sendall(struct.pack('>I', len(p)) + p); c.shutdown(socket.SHUT_WR)"
        "\n print(len(c.recv(100)))"
        "\nexcept (ConnectionResetError, BrokenPipeError): print(0)"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert out.stdout.strip() == "0", out.stderr  # closed without an answer


def test_a_socket_left_by_a_killed_server_is_not_used_and_is_removed(temporary, tmp_path):
    directory = model_host.host_dir()
    assert directory is not None
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], text=True, capture_output=True
    ).stdout.strip()
    left = directory / f"{model_host.data_key(tmp_path / 'data')}-{dead}.sock"
    with socket.socket(socket.AF_UNIX) as s:
        s.bind(str(left))  # bound, never listening: what a SIGKILL leaves
    assert model_host.find_host(tmp_path / "data") is None
    assert not left.exists()


def test_a_model_is_loaded_here_when_no_host_serves_the_data(tmp_path):
    model_host.look_for_host(tmp_path / "nobody-serves-this")
    try:
        assert model_host.configured_host() is None
        assert type(model_host.query_embedder(MODEL)).__name__ == "UseMultilingual"
    finally:
        model_host.look_for_host(None)


def test_a_host_that_cannot_be_started_is_tried_again(monkeypatch, tmp_path):
    # CI once saw the host's exec fail (EFAULT) under load; the error ended the keeping thread
    # and the server ran on without a host
    from chiezo.store import model_host

    class Running:  # a host process that runs until stopped
        returncode = None

        def poll(self):
            return None

        def terminate(self):
            pass

        def wait(self, timeout=None):
            return 0

    tries = []

    def spawn():
        tries.append(time.monotonic())
        if len(tries) == 1:
            raise OSError(14, "Bad address")
        return Running()

    monkeypatch.setattr(model_host, "RESTART_PAUSE_SECONDS", 0.01)
    keeper = model_host._Keeper(tmp_path / "host.sock", None)
    monkeypatch.setattr(keeper, "_spawn", spawn)
    keeper.start()
    deadline = time.monotonic() + 5
    while len(tries) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    keeper.stop()
    assert len(tries) == 2 and keeper._process is not None
