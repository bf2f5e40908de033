"""The HTTP edges of a real `chiezo serve` on loopback, spoken to over raw sockets: what the HTTP
parser refuses answers in the one JSON error shape (414 for a request target that is too long,
431 for header fields that are, 400 with the parser's reason otherwise) and the connection ends
cleanly, without the server holding what was sent beyond the limit; a Host header no
browser sends is refused; the address line is printed only once the server answers. Each runs
against a single-process server and a two-worker one (the supervisor's path). Then, on a server
in this process: a 500 keeps its connection, a 405 names the allowed methods, a body over the
limit is a 413 whether its length is declared or it comes chunked."""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from chiezo.surfaces.rest import create_app

from helpers import RunningServer, error_body, free_port

ADDRESS_LINE = "Chiezo on http://"
MAX_TARGET_BYTES = 65_535  # the longest request target answered (SECURITY.md rule 6)
MAX_FIELD_BYTES = 65_536  # the most bytes of header fields a request may send (rule 6)
MAX_BODY_BYTES = 2 * 2**20  # the largest body answered


@dataclass
class Served:
    port: int
    first_answer: object  # what a request sent the moment the address line appeared got
    pid: int  # `chiezo serve`: the server, or the supervisor of its workers
    log: list[str] = field(default_factory=list)


@pytest.fixture(scope="module", params=[1, 2], ids=["one-process", "two-workers"])
def served(request, tmp_path_factory):
    port = free_port()
    env = {**os.environ, "CHIEZO_DATA": str(tmp_path_factory.mktemp("data"))}
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "chiezo",
            "serve",
            "--port",
            str(port),
            "--workers",
            str(request.param),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        log = _read_until_the_address_line(process, 120)
        first_answer = _status_or_error(port)
        threading.Thread(target=lambda: log.extend(process.stderr), daemon=True).start()
        _wait_until_answering(port, 120)  # the other tests need a server, even one that lied
        yield Served(port, first_answer, process.pid, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()


def _read_until_the_address_line(process: subprocess.Popen, seconds: float) -> list[str]:
    lines: list[str] = []
    deadline = time.monotonic() + seconds
    while not (lines and lines[-1].startswith(ADDRESS_LINE)):
        left = deadline - time.monotonic()
        assert left > 0, f"no address line in {seconds} s: {lines}"
        if select.select([process.stderr], [], [], left)[0]:
            line = process.stderr.readline()
            assert line, f"the server ended before printing its address: {lines}"
            lines.append(line)
    return lines


def _status_or_error(port: int) -> object:
    try:  # no retry: the line promised a server that answers now
        timeout = httpx.Timeout(3.0, connect=1.0)
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=timeout).status_code
    except httpx.HTTPError as exc:
        return repr(exc)


def _wait_until_answering(port: int, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while isinstance(_status_or_error(port), str):
        assert time.monotonic() < deadline, "the server never answered"
        time.sleep(0.2)


# -- raw HTTP --------------------------------------------------------------------------------


def _exchange(port: int, request: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    """Send ``request`` as it is and read every response until the server closes: a server
    that keeps the connection open after a refusal fails here (the socket times out)."""
    with socket.create_connection(("127.0.0.1", port), timeout=15) as sock:
        sock.sendall(request)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return _responses(received)


def _responses(data: bytes) -> list[tuple[int, dict[str, str], bytes]]:
    found = []
    while data:
        head, _, data = data.partition(b"\r\n\r\n")
        status_line, *lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines)}
        length = int(headers["content-length"])
        found.append((int(status_line.split()[1]), headers, data[:length]))
        data = data[length:]
    return found


def _request(target: str = "/healthz", *, host: str | list[str] = "localhost") -> bytes:
    hosts = [host] if isinstance(host, str) else host
    head = [f"GET {target} HTTP/1.1", *(f"Host: {h}" for h in hosts), "Connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n").encode()  # a non-ASCII Host as UTF-8


def _error(response: tuple[int, dict[str, str], bytes], status: int) -> dict:
    """The one error shape of SECURITY.md rule 7."""
    got, headers, body = response
    assert got == status, body[:300]
    assert headers["content-type"] == "application/json"
    error = json.loads(body)
    assert error["status"] == status and isinstance(error["error"], str)
    return error


# -- 1. what the HTTP parser refuses --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("length", [MAX_TARGET_BYTES + 1, 70_000, 2_000_000])
def test_a_request_target_too_long_is_a_json_414(served, length):
    target = "/v1/search?q=" + "a" * (length - len("/v1/search?q="))
    [response] = _exchange(served.port, _request(target))
    error = _error(response, 414)
    assert f"{MAX_TARGET_BYTES:,} bytes" in error["error"]
    assert response[1]["connection"] == "close"


@pytest.mark.slow
def test_a_request_target_of_the_limit_reaches_the_app(served):
    target = "/" + "a" * (MAX_TARGET_BYTES - 1)
    [response] = _exchange(served.port, _request(target))
    assert _error(response, 404)["error"].startswith("no such endpoint")


@pytest.mark.slow
@pytest.mark.parametrize(
    "request_bytes, reason",
    [
        (b"G@T / HTTP/1.1\r\nHost: localhost\r\n\r\n", "Invalid method"),
        (b"GET / HTTP/1.1\r\nHost: localhost\r\nno colon here\r\n\r\n", "Invalid header"),
        (b"GET / HTTQ/1.1\r\nHost: localhost\r\n\r\n", "Expected HTTP/"),
        (b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", "Invalid method"),  # TLS to plain HTTP
        (
            b"POST /v1/notes HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            b"Transfer-Encoding: chunked\r\n\r\nzz\r\n",
            "chunk size",
        ),
    ],
    ids=["method", "header", "version", "tls", "chunked-body"],
)
def test_a_request_the_parser_refuses_is_a_json_400_with_its_reason(served, request_bytes, reason):
    [response] = _exchange(served.port, request_bytes)
    error = _error(response, 400)
    assert error["error"].startswith("invalid HTTP request: ") and reason in error["error"]


@pytest.mark.slow
def test_a_broken_request_after_a_good_one_is_answered_after_it(served):
    pipelined = _request().replace(b"Connection: close\r\n", b"") + b"G@T / HTTP/1.1\r\n\r\n"
    first, second = _exchange(served.port, pipelined)
    assert first[0] == 200 and json.loads(first[2])["status"] == "ok"
    assert "Invalid method" in _error(second, 400)["error"]


@pytest.mark.slow
def test_the_server_still_answers_after_refusals(served):
    _exchange(served.port, _request("/" + "a" * 100_000))
    [response] = _exchange(served.port, _request())
    assert response[0] == 200


# -- 1b. header fields: at most MAX_FIELD_BYTES, counted as they arrive -------------------------


def _with_fields(fields: list[str], target: str = "/healthz") -> bytes:
    head = [f"GET {target} HTTP/1.1", "Host: localhost", *fields, "Connection: close"]
    return ("\r\n".join(head) + "\r\n\r\n").encode()


ONE_HUGE_HEADER = ["X-Big: " + "a" * 10_000_000]
MANY_HEADERS = [f"X-Field-{i}: " + "a" * 1000 for i in range(80)]  # 80 KiB in all


@pytest.mark.slow
@pytest.mark.parametrize("fields", [ONE_HUGE_HEADER, MANY_HEADERS], ids=["10-MB-header", "80-KB"])
def test_header_fields_too_long_are_a_json_431(served, fields):
    [response] = _exchange(served.port, _with_fields(fields))
    error = _error(response, 431)
    assert f"{MAX_FIELD_BYTES:,} bytes" in error["error"]
    assert response[1]["connection"] == "close"
    [after] = _exchange(served.port, _request())  # the next connection is served
    assert after[0] == 200


@pytest.mark.slow
def test_header_fields_too_long_after_a_good_request_are_answered_after_it(served):
    pipelined = _request().replace(b"Connection: close\r\n", b"") + _with_fields(ONE_HUGE_HEADER)
    first, second = _exchange(served.port, pipelined)
    assert first[0] == 200 and json.loads(first[2])["status"] == "ok"
    assert f"{MAX_FIELD_BYTES:,} bytes" in _error(second, 431)["error"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "fields",
    [["X-Big: " + "a" * 60 * 1024], [f"X-Field-{i}: " + "a" * 1000 for i in range(60)]],
    ids=["one-60-KiB-header", "60-headers-of-1-KB"],
)
def test_header_fields_within_the_limit_reach_the_app(served, fields):
    [response] = _exchange(served.port, _with_fields(fields))
    assert response[0] == 200 and json.loads(response[2])["status"] == "ok"


@pytest.mark.slow
def test_header_fields_are_counted_apart_from_the_target(served):
    target = "/" + "a" * (MAX_TARGET_BYTES - 1)
    [response] = _exchange(served.port, _with_fields(["X-Big: " + "a" * 60 * 1024], target))
    assert _error(response, 404)["error"].startswith("no such endpoint")


def _note_post(body: bytes, *, chunk: int = 0, trailer: bytes = b"") -> bytes:
    """POST /v1/notes, head and body in one piece; ``chunk``: sent chunked in pieces of that
    size, ending with ``trailer`` (header fields after the body)."""
    head = "POST /v1/notes HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
    if not chunk:
        return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
    pieces = [body[i : i + chunk] for i in range(0, len(body), chunk)]
    framed = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces)
    return (
        f"{head}Transfer-Encoding: chunked\r\n\r\n".encode() + framed + b"0\r\n" + trailer + b"\r\n"
    )


def _note_of_the_body_limit() -> bytes:
    """The longest note (200,000 characters, each escaped: 1.2 MB), padded with JSON's
    whitespace to exactly the body limit."""
    body = json.dumps({"text": "あ" * 200_000}).encode()
    return body[:-1] + b" " * (MAX_BODY_BYTES - len(body)) + b"}"


@pytest.mark.slow
@pytest.mark.parametrize("chunk", [0, 65536], ids=["declared", "chunked"])
def test_a_body_of_the_limit_with_its_head_and_a_request_after_it_are_answered(served, chunk):
    body = _note_of_the_body_limit()
    assert len(body) == MAX_BODY_BYTES
    created, after = _exchange(served.port, _note_post(body, chunk=chunk) + _request())
    assert created[0] == 201, created[2][:300]
    assert json.loads(created[2])["text"] == "あ" * 200_000
    assert after[0] == 200


@pytest.mark.slow
def test_a_trailer_too_long_is_a_json_431(served):
    trailer = b"X-Big: " + b"a" * 10_000_000 + b"\r\n"
    request = _note_post(json.dumps({"text": "a trailer"}).encode(), chunk=4, trailer=trailer)
    [response] = _exchange(served.port, request)
    assert f"{MAX_FIELD_BYTES:,} bytes" in _error(response, 431)["error"]


def _rss_kib(pid: int) -> int:
    """VmRSS of ``pid`` and every process under it (the workers), in KiB."""
    status = Path(f"/proc/{pid}/status").read_text()
    rss = int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))
    for task in Path(f"/proc/{pid}/task").iterdir():
        for child in (task / "children").read_text().split():
            rss += _rss_kib(int(child))
    return rss


@pytest.mark.slow
def test_huge_headers_do_not_grow_the_server(served):
    _exchange(served.port, _request())  # anything a first request loads is loaded
    before = _rss_kib(served.pid)
    connections = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(8)]
    try:
        for conn in connections:  # 8 unfinished headers of 16 MiB, left open
            conn.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nX-Big: ")
            with contextlib.suppress(OSError):  # the server may close after it refused
                for _ in range(16):
                    conn.sendall(b"a" * 2**20)
        time.sleep(1)  # the server reads what is still in its socket buffers
        grown = _rss_kib(served.pid) - before
    finally:
        for conn in connections:
            conn.close()
    assert grown < 16 * 1024, f"the server grew by {grown:,} KiB for 128 MiB of headers"


# -- 2. Host headers no browser sends -------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "host",
    [
        "localhost:42@evil.example",
        "evil.example@localhost",
        "localhost:8080:80",
        "localhost:8o",
        "localhost:123456",
        "local host",
        "[::1",
        "[localhost]:80",
        "[127.0.0.1]",
        "localhost/evil",
        "localhost\\@evil.example",
        "ｌocalhost",
    ],
)
def test_a_host_that_is_not_one_host_and_port_is_a_400(served, host):
    [response] = _exchange(served.port, _request(host=host))
    error = _error(response, 400)
    assert "is not a host name or address" in error["error"] and error["hint"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "hosts",
    [["evil.example", "localhost"], ["localhost", "evil.example"], ["localhost", "localhost"]],
)
def test_more_than_one_host_header_is_a_400(served, hosts):
    [response] = _exchange(served.port, _request(host=hosts))
    assert _error(response, 400)["error"] == "a request has one Host header; this one has 2"


@pytest.mark.slow
@pytest.mark.parametrize(
    "host",
    [
        "localhost",
        "localhost:8080",
        "LOCALHOST.",
        "app.localhost:1",
        "127.0.0.1:80",
        "[::1]:8080",
        "[::1]",
        "10.0.0.5",
        "localhost:",
    ],
)
def test_hosts_browsers_send_are_still_answered(served, host):
    [response] = _exchange(served.port, _request(host=host))
    assert response[0] == 200


@pytest.mark.slow
def test_a_foreign_name_is_still_a_421(served):
    [response] = _exchange(served.port, _request(host="evil.example:8080"))
    _error(response, 421)


# -- 3. the address line -------------------------------------------------------------------


@pytest.mark.slow
def test_the_address_line_comes_once_the_server_answers(served):
    assert served.first_answer == 200


# -- 4. errors, methods and bodies, on a server in this process --------------------------------


@pytest.mark.slow
def test_an_unexpected_error_answers_500_and_keeps_the_connection(settings):
    app = create_app(settings)

    @app.get("/v1/broken")
    def broken():
        raise RuntimeError("a bug")

    with (
        RunningServer(app) as running,
        socket.create_connection(("127.0.0.1", running.port)) as conn,
    ):
        conn.settimeout(10)
        replies = []
        for path in ("/v1/broken", "/healthz"):  # both on one keep-alive connection
            conn.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
            replies.append(_read_response(conn))
    (status, headers, body), (next_status, _, _) = replies
    assert status == 500 and json.loads(body)["error"] == "internal error (RuntimeError)"
    assert headers.get("connection") != "close"
    assert next_status == 200  # the next request on that connection is answered


def _read_response(conn: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        assert chunk, "the server closed the connection"
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    while len(body) < int(headers.get("content-length", 0)):
        body += conn.recv(65536)
    return int(lines[0].split()[1]), headers, body


@pytest.mark.slow
def test_a_405_names_the_allowed_methods(server):
    response = httpx.put(f"{server.url}/v1/sources")
    assert error_body(response, 405) and response.headers["allow"] == "GET"


@pytest.mark.slow
def test_a_body_over_the_limit_is_a_413_declared_or_chunked(server):
    body = json.dumps({"text": "あ" * 1_100_000}).encode()
    declared = httpx.post(
        f"{server.url}/v1/notes", content=body, headers={"content-type": "application/json"}
    )
    assert error_body(declared, 413)["error"].startswith("the request body is larger")

    def chunks():
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    chunked = httpx.post(
        f"{server.url}/v1/notes", content=chunks(), headers={"content-type": "application/json"}
    )
    error_body(chunked, 413)
    small = httpx.post(
        f"{server.url}/v1/notes",
        content=(b'{"text": "chunked"}' for _ in [0]),
        headers={"content-type": "application/json"},
    )
    assert small.status_code == 201
