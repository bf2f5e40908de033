"""A CLI search answered by the server on the same data (surfaces/cli/via_server.py): the
request crosses as the server reads it and the answer comes back as the command would have
made it; an address nobody of ours listens on is not asked. The whole path (a real
``chiezo serve`` and its model host, a new ``chiezo search`` process) is in
test_model_host.py."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

import pytest

from chiezo.core.models import Doc
from chiezo.ops import searching
from chiezo.ops.requests import SearchRequest
from chiezo.store import model_host
from chiezo.surfaces.cli import via_server
from chiezo.surfaces.cli.main import _loopback_address
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, build_source, free_port

TEMPLES = [
    Doc(
        key=f"t{i}",
        title=title,
        body=f"{title}は{area}にある寺。門と庭で知られる。",
        tags=[f"{area}の寺", *extra],
        attrs={"founded": [str(600 + 50 * i)]},
        point=point,
        rank_score=1 - i / 10,
    )
    for i, (title, area, extra, point) in enumerate(
        [
            ("浅草寺", "東京都", ["観音"], (35.7148, 139.7967)),
            ("寛永寺", "東京都", [], (35.7219, 139.7744)),
            ("清水寺", "京都府", ["観音"], (34.9949, 135.7850)),
            ("金閣寺", "京都府", [], (35.0394, 135.7292)),
        ]
    )
]


@pytest.fixture
def temples(settings):
    build_source(settings, "temples", "test", TEMPLES)
    with RunningServer(create_app(settings)) as running:
        yield running


def test_a_request_crosses_as_parsed_and_comes_back_as_made_here(temples, service):
    for request in [
        SearchRequest.of(query="寺", source="temples"),
        SearchRequest.of(query="寺 庭", source="temples", limit=2, offset=1, explain=True),
        SearchRequest.of(query="寺", tag=["東京都の寺,京都府の寺", "観音"], facets=["tag"]),
        SearchRequest.of(query="門", source="temples", near="35.71,139.79", radius_km=5.5),
        SearchRequest.of(query="寺", source="temples", attr=["founded>=650"], mode="keyword"),
        SearchRequest.of(query="no such words anywhere", source="temples"),
        SearchRequest.of(query="寺", tag=["存在しないタグ"]),  # notes with codes and params
    ]:
        here = searching.search(service, request)
        target = "/v1/search?" + urllib.parse.urlencode(via_server.query_pairs(request))
        with urllib.request.urlopen(temples.url + target) as answer:
            served = json.load(answer)
        assert served == json.loads(json.dumps(here.to_dict())), request
        back = via_server.result_from_dict(served)
        assert back.to_dict() == served
        assert [n.code for n in back.notes] == [n.code for n in here.notes]


def test_only_loopback_addresses_are_handed_to_commands():
    assert _loopback_address("127.0.0.1", 8080) == "http://127.0.0.1:8080"
    assert _loopback_address("0.0.0.0", 8080) == "http://127.0.0.1:8080"
    assert _loopback_address("::", 8080) == "http://[::1]:8080"
    assert _loopback_address("localhost", 8080) == "http://localhost:8080"
    assert _loopback_address("192.168.1.20", 8080) is None  # a command would be a remote client
    assert _loopback_address("127.0.0.1", 0) is None


def test_a_port_someone_else_listens_on_is_not_ours():
    with socket.socket() as ours:
        ours.bind(("127.0.0.1", 0))
        ours.listen()
        assert model_host.listens_as_us(ours.getsockname()[1])
    assert not model_host.listens_as_us(free_port())  # nobody listens


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to listen as another user")
def test_a_port_another_user_took_is_not_asked():
    port = free_port()
    script = (
        "import os, socket, time; os.setuid(65534); s = socket.socket(); "
        f"s.bind(('127.0.0.1', {port})); s.listen(); print('up', flush=True); time.sleep(30)"
    )
    other = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "up"
        assert not model_host.listens_as_us(port)
    finally:
        other.kill()
        other.wait()


@pytest.fixture
def host_telling(tmp_path, monkeypatch):
    """A model host of this test's own that tells callers the address it is given."""
    base = tempfile.mkdtemp()  # short: a socket's path is at most ~100 bytes
    monkeypatch.setenv("TMPDIR", base)
    monkeypatch.setattr("tempfile.tempdir", None)
    monkeypatch.delenv(model_host.HOST_ENV, raising=False)
    started = []

    def start(url: str):
        data = tmp_path / "data"
        path = model_host.socket_path(data)
        assert path is not None
        process = subprocess.Popen(
            [sys.executable, "-m", "chiezo.store.model_host", str(path), str(os.getpid()), url]
        )
        started.append(process)
        deadline = time.monotonic() + 30
        while not path.exists():
            assert time.monotonic() < deadline, "the host did not start"
            time.sleep(0.05)
        return data

    yield start
    for process in started:
        process.terminate()
        process.wait(10)
    shutil.rmtree(base, ignore_errors=True)


def test_a_server_that_answers_garbage_or_nothing_leaves_the_search_here(host_telling, settings):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Garbage(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - the standard library's name
            body = b'{"hits": "not a list", "total": []}'
            self.send_response(200)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    request = SearchRequest.of(query="寺")
    with ThreadingHTTPServer(("127.0.0.1", 0), Garbage) as fake:
        threading.Thread(target=fake.serve_forever, daemon=True).start()
        data = host_telling(f"http://127.0.0.1:{fake.server_address[1]}")
        mine = dataclasses.replace(settings, data_dir=data)
        assert model_host.server_url(data) == f"http://127.0.0.1:{fake.server_address[1]}"
        assert via_server.search(mine, request) is None  # the answer does not parse
        fake.shutdown()
    assert via_server.search(mine, request) is None  # nobody listens there now
