"""Hostile input, tried the way an attacker or a fuzzer would (issue #14): every reproduction
of that report, each of which was a 500, a traceback or a hole before its fix."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import anyio
import httpx
import pytest
from click.testing import CliRunner
from mcp import Client

from chiezo.core import db
from chiezo.core.errors import BadQuery, BuildError
from chiezo.store import generations
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app
from chiezo.surfaces.web.formatting import highlight

from helpers import PAGE_WITH_A_SCRIPT, RunningServer, build_docs, free_port, write_files

HUGE = "99999999999999999999"  # beyond SQLite's 64-bit integers
FILES = {
    "guide.md": "# Getting started\n\nChiezo keeps each source in one SQLite file.\n",
    "offer.html": PAGE_WITH_A_SCRIPT,
    "prices.csv": "item,price\ntea,120\n",
}


@pytest.fixture
def server(settings, service, tmp_path):
    build_docs(service, write_files(tmp_path / "book", FILES), "book")
    with RunningServer(create_app(settings)) as running:
        yield running


def _error(response: httpx.Response, *statuses: int) -> dict:
    """The response is one of ``statuses`` and carries the one error shape."""
    assert response.status_code in statuses, (response.status_code, response.text[:300])
    body = response.json()
    assert body["status"] == response.status_code and body["error"]
    return body


def _doc_id(server, title: str) -> int:
    return httpx.get(f"{server.url}/v1/book/doc", params={"title": title}).json()["doc_id"]


# -- 1. integers beyond 2**63 - 1 --------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path",
    [
        ("GET", f"/v1/notes/{HUGE}"),
        ("PATCH", f"/v1/notes/{HUGE}"),
        ("DELETE", f"/v1/notes/{HUGE}"),
        ("GET", f"/v1/book/doc/{HUGE}"),
        ("GET", f"/v1/book/links?doc_id={HUGE}"),
        ("GET", f"/v1/book/tags?offset={HUGE}"),
        ("GET", f"/v1/book/features?offset={HUGE}"),
        ("GET", f"/v1/notes/recall?offset={HUGE}"),
        ("GET", f"/v1/jobs/{HUGE}"),
        ("GET", f"/v1/jobs/1?log_from={HUGE}"),
    ],
)
def test_huge_integers_are_refused_not_a_500(server, method, path):
    response = httpx.request(
        method, server.url + path, json={"text": "x"} if method == "PATCH" else None
    )
    _error(response, 400, 404)


@pytest.mark.parametrize("path", [f"/doc/book/{HUGE}", f"/doc/book/{HUGE}/original"])
def test_huge_document_ids_on_pages_are_a_404_page(server, path):
    response = httpx.get(server.url + path)
    assert response.status_code == 404 and "<html" in response.text


def test_a_huge_notes_offset_on_the_admin_page_shows_the_page(server):
    assert httpx.get(f"{server.url}/admin", params={"notes_offset": HUGE}).status_code == 200


def test_huge_ids_in_the_cli_are_errors_not_tracebacks(settings, service, tmp_path):
    build_docs(service, write_files(tmp_path / "book", FILES), "book")
    data = str(settings.data_dir)
    for args in (["doc", "--id", HUGE, "-s", "book"], ["notes", "forget", HUGE]):
        result = CliRunner().invoke(cli, ["--data", data, *args])
        assert result.exit_code == 3, (args, result.output)
        assert "Traceback" not in result.output and "there is no" in result.output


# -- 2. NUL in a title lookup ------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/book/doc", "/v1/book/links"])
def test_a_nul_in_a_title_lookup_is_a_404_with_candidates(server, path):
    body = _error(httpx.get(server.url + path, params={"title": "Getting\x00"}), 404)
    assert body["candidates"] == ["Getting started"]


def test_a_nul_in_a_title_on_the_doc_page_is_a_404_page(server):
    assert httpx.get(f"{server.url}/doc/book", params={"title": "abc\x00"}).status_code == 404


def test_mcp_tools_answer_hostile_input_with_the_error_json(server):
    async def go():
        async with Client(f"{server.url}/mcp") as client:
            return await client.call_tool("doc", {"source": "book", "title": "abc\x00"})

    result = anyio.run(go)
    assert result.is_error
    payload = json.loads(result.content[0].text.split(": ", 1)[1])
    assert payload["status"] == 404 and "candidates" in payload


# -- 3. lone surrogates ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/v1/notes", '{"text": "a \\ud800"}'),
        ("POST", "/v1/notes", '{"text": "a", "tags": ["\\udfff"]}'),
        ("PATCH", "/v1/notes/1", '{"text": "b \\ud800"}'),
        ("POST", "/v1/chat", '{"messages": [{"role": "user", "content": "x \\ud800"}]}'),
    ],
)
def test_lone_surrogates_in_json_are_a_400(server, method, path, body):
    httpx.post(f"{server.url}/v1/notes", json={"text": "a note to patch"})
    response = httpx.request(
        method, server.url + path, content=body, headers={"content-type": "application/json"}
    )
    _error(response, 400)


def test_the_service_refuses_surrogates_from_any_surface(service, settings, tmp_path):
    build_docs(service, write_files(tmp_path / "book", FILES), "book")
    for call in (
        lambda: service.search("a\udcff", "book"),
        lambda: service.doc("book", title="\ud800"),
        lambda: service.remember("text", tags=["\udc80"]),
        lambda: service.recall(q="\ud800"),
    ):
        with pytest.raises(BadQuery, match="not valid Unicode"):
            call()


def test_invalid_utf8_in_argv_is_a_usage_error_not_a_traceback(settings, service, tmp_path):
    build_docs(service, write_files(tmp_path / "book", FILES), "book")
    env = {**os.environ, "CHIEZO_DATA": str(settings.data_dir), "LC_ALL": "C.UTF-8"}
    done = subprocess.run(
        [sys.executable, "-m", "chiezo", "search", b"caf\xe9 \xff"],
        env=env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert b"Traceback" not in done.stderr and b"not valid Unicode" in done.stderr


# -- 4. dates at the calendar's ends -----------------------------------------------------------


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


# -- 5. a 500 does not take the connection down -------------------------------------------------


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


# -- 6. an honest OpenAPI document --------------------------------------------------------------


def test_the_openapi_document_declares_the_errors_the_api_returns(server):
    schema = httpx.get(f"{server.url}/openapi.json").json()
    assert "ErrorBody" in schema["components"]["schemas"]
    assert "HTTPValidationError" not in schema["components"]["schemas"]
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            codes = set(operation["responses"])
            assert "421" in codes and (path.startswith("/v1/") <= ("400" in codes)), path
            assert ("422" in codes) == (path in ("/v1/ask", "/v1/chat")), (path, method)
            if path.startswith("/v1/{source}/"):
                assert {"404", "409", "504"} <= codes, path
            if method in ("post", "patch", "delete") and "notes" in path:
                assert {"401", "403", "507"} <= codes, (path, method)
            if "requestBody" in operation:
                assert "413" in codes, (path, method)
    search = schema["paths"]["/v1/{source}/search"]["get"]["parameters"]
    mode = next(p for p in search if p["name"] == "mode")["schema"]
    assert "hybrid" in json.dumps(mode)  # an enum, not any string
    q = next(p for p in search if p["name"] == "q")["schema"]
    assert q["minLength"] == 1 and q["maxLength"] == 1000


def test_a_405_names_the_allowed_methods(server):
    response = httpx.put(f"{server.url}/v1/sources")
    assert _error(response, 405) and response.headers["allow"] == "GET"


# -- 7. DNS rebinding ---------------------------------------------------------------------------


REBINDING = {"host": "evil.example:8080", "origin": "http://evil.example:8080"}


@pytest.mark.parametrize(
    "method, path, body",
    [
        ("POST", "/v1/notes", {"text": "x"}),
        ("POST", "/v1/jobs", {"source": "book", "action": "rebuild"}),
        ("GET", "/v1/notes/recall", None),
        ("GET", "/v1/book/search?q=chiezo", None),
        ("GET", "/admin", None),
        ("GET", "/", None),
        ("POST", "/mcp", {}),
    ],
)
def test_a_rebound_host_name_is_refused_on_every_route(server, method, path, body):
    response = httpx.request(method, server.url + path, json=body, headers=REBINDING)
    assert _error(response, 421)["hint"].startswith("a page under another name")
    assert httpx.get(f"{server.url}/v1/notes/recall").json()["total"] == 0  # nothing written
    assert httpx.get(f"{server.url}/v1/jobs").json()["jobs"] == []  # nothing started


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1:8080",
        "localhost:8080",
        "[::1]:8080",
        "localhost.",
        "app.localhost:8080",
        "192.168.1.20",
    ],
)
def test_loopback_names_and_addresses_are_answered(server, host):
    assert httpx.get(f"{server.url}/v1/sources", headers={"host": host}).status_code == 200


def test_allowed_hosts_and_the_bound_name_are_answered(settings):
    from dataclasses import replace

    from chiezo.surfaces.rest.security import Security

    configured = Security("127.0.0.1", None, ("kb.lan:*", "proxy.example:8443"))
    assert configured.host_allowed("kb.lan:9999") and configured.host_allowed("KB.LAN")
    assert configured.host_allowed("proxy.example:8443")
    assert not configured.host_allowed("proxy.example:8444")
    assert not configured.host_allowed("kb.lan.evil.example")
    assert Security("kb.example.com", "t").host_allowed("kb.example.com:8080")
    lan = Security("0.0.0.0", "t")
    assert lan.host_allowed(f"{socket.gethostname()}:8080") and lan.host_allowed("10.0.0.5:80")
    assert not lan.host_allowed("evil.example")
    with RunningServer(create_app(replace(settings, allowed_hosts=("kb.lan",)))) as running:
        assert httpx.get(f"{running.url}/healthz", headers={"host": "kb.lan:1"}).status_code == 200


def test_mcp_refuses_a_request_from_another_sites_page(server):
    response = httpx.post(f"{server.url}/mcp", json={}, headers={"origin": "https://evil.example"})
    _error(response, 403)


# -- 8. originals are sandboxed -----------------------------------------------------------------


def test_an_html_original_is_served_in_a_sandbox(server):
    response = httpx.get(f"{server.url}/doc/book/{_doc_id(server, 'Special offer')}/original")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    policy = response.headers["content-security-policy"]
    assert policy.startswith("sandbox") and "default-src 'none'" in policy
    assert "allow-scripts" not in policy and "allow-same-origin" not in policy
    assert response.headers["x-content-type-options"] == "nosniff"


def test_text_originals_are_plain_text_and_pages_may_not_be_framed(server):
    prices = _doc_id(server, "Getting started")  # guide.md
    response = httpx.get(f"{server.url}/doc/book/{prices}/original")
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    assert "sandbox" in response.headers["content-security-policy"]
    page = httpx.get(f"{server.url}/doc/book/{prices}")
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["referrer-policy"] == "no-referrer"


# -- 9. limits ----------------------------------------------------------------------------------


def test_tags_are_bounded_in_number_and_length(server):
    many = httpx.post(
        f"{server.url}/v1/notes", json={"text": "x", "tags": [f"t{i}" for i in range(51)]}
    )
    _error(many, 400)
    long = httpx.post(f"{server.url}/v1/notes", json={"text": "x", "tags": ["t" * 101]})
    _error(long, 400)
    ok = httpx.post(
        f"{server.url}/v1/notes", json={"text": "x", "tags": [f"t{i}" for i in range(50)]}
    )
    assert ok.status_code == 201 and len(ok.json()["tags"]) == 50


def test_the_service_bounds_tags_too(service):
    with pytest.raises(BadQuery, match="at most 50 tags"):
        service.remember("x", tags=[str(i) for i in range(4_000)])


def test_a_body_over_the_limit_is_a_413_declared_or_chunked(server):
    body = json.dumps({"text": "あ" * 1_100_000}).encode()
    declared = httpx.post(
        f"{server.url}/v1/notes", content=body, headers={"content-type": "application/json"}
    )
    assert _error(declared, 413)["error"].startswith("the request body is larger")

    def chunks():
        for start in range(0, len(body), 65536):
            yield body[start : start + 65536]

    chunked = httpx.post(
        f"{server.url}/v1/notes", content=chunks(), headers={"content-type": "application/json"}
    )
    _error(chunked, 413)
    small = httpx.post(
        f"{server.url}/v1/notes",
        content=(b'{"text": "chunked"}' for _ in [0]),
        headers={"content-type": "application/json"},
    )
    assert small.status_code == 201


@pytest.mark.parametrize("path", ["/v1/book/doc", "/v1/book/links"])
def test_a_long_title_lookup_is_refused(server, path):
    body = _error(httpx.get(server.url + path, params={"title": "x" * 50_000}), 400)
    assert body["error"] == "title is 50,000 characters long; the limit is 1,000"


def test_jobs_take_only_the_servers_models_and_reveal_no_paths(server, tmp_path):
    existing = httpx.get(
        f"{server.url}/v1/jobs/plan",
        params={"source": "book", "action": "embed", "model": f"onnx:{tmp_path}"},
    )
    missing = httpx.get(
        f"{server.url}/v1/jobs/plan",
        params={"source": "book", "action": "embed", "model": "onnx:/no/such"},
    )
    first, second = _error(existing, 400), _error(missing, 400)
    assert first["known_models"] == second["known_models"] == ["e5-small", "use-m"]
    assert first["error"].replace(str(tmp_path), "P") == second["error"].replace("/no/such", "P")
    started = httpx.post(
        f"{server.url}/v1/jobs",
        json={"source": "book", "action": "embed", "model": f"st:{tmp_path}"},
    )
    _error(started, 400)


def test_an_operator_can_offer_more_models_to_jobs(settings):
    from dataclasses import replace

    from chiezo.ops.jobs import JobRunner
    from chiezo.ops.service import Service

    runner = JobRunner(Service(replace(settings, job_models=("onnx:/srv/models/e5",))))
    assert runner.models() == ["e5-small", "onnx:/srv/models/e5", "use-m"]


def test_links_out_of_a_docs_folder_are_not_indexed_and_said(service, tmp_path):
    outside = write_files(tmp_path / "outside", {"secret.md": "# Secret\n\nnot to be shared\n"})
    folder = write_files(tmp_path / "docs", {"inside.md": "# Inside\n\nshared\n"})
    (folder / "secret.md").symlink_to(outside / "secret.md")
    (folder / "elsewhere").symlink_to(outside, target_is_directory=True)
    (folder / "alias.md").symlink_to(folder / "inside.md")  # inside the folder: indexed
    report = build_docs(service, folder, "docs")
    assert report.docs == 2
    said = " ".join(report.warnings)
    assert "secret.md: a link to" in said and "outside the folder; not indexed" in said
    assert "elsewhere: a link to" in said
    assert service.search("Secret", "docs").total == 0


# -- 10. workers stop with their server ----------------------------------------------------------


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


# -- 11. full disks, durability, highlighting -------------------------------------------------


def _capped(open_function, pages: int):
    """SQLite's own SQLITE_FULL, as a full disk gives it: the file may not grow past ``pages``."""

    def opened(path, *args, **kwargs):
        conn = open_function(path, *args, **kwargs)
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    return opened


def test_a_full_disk_fails_the_build_clearly_and_the_old_generation_serves(
    service, settings, tmp_path, monkeypatch
):
    folder = write_files(tmp_path / "docs", FILES)
    first = build_docs(service, folder, "book")
    write_files(folder, {f"more{i}.md": f"# More {i}\n\n" + "text " * 4000 for i in range(30)})
    monkeypatch.setattr(db, "open_for_build", _capped(db.open_for_build, 40))
    with pytest.raises(BuildError, match="the disk is full; the current generation keeps serving"):
        build_docs(service, folder, "book")
    directory = settings.corpus_dir / "book"
    assert generations.current_path(directory) == first.path
    assert not list(directory.glob("*.building*"))
    assert service.search("Chiezo", "book").total >= 1

    result = CliRunner().invoke(
        cli, ["--data", str(settings.data_dir), "ingest", "docs", str(folder), "--name", "book"]
    )
    assert result.exit_code == 1 and "the disk is full" in result.output
    assert "Traceback" not in result.output and "OperationalError" not in result.output


def test_a_note_on_a_full_disk_is_a_507_and_nothing_is_lost(settings, tmp_path, monkeypatch):
    with RunningServer(create_app(settings)) as running:
        kept = httpx.post(f"{running.url}/v1/notes", json={"text": "kept"})
        assert kept.status_code == 201
    monkeypatch.setattr(db, "open_for_writing", _capped(db.open_for_writing, 1))
    with RunningServer(create_app(settings)) as running:
        full = httpx.post(f"{running.url}/v1/notes", json={"text": "big " * 50_000})
        assert _error(full, 507)["error"].endswith("the disk is full")
        assert [n["text"] for n in httpx.get(f"{running.url}/v1/notes/recall").json()["notes"]] == [
            "kept"
        ]


def test_a_generation_is_on_disk_before_current_points_to_it(service, tmp_path, monkeypatch):
    events: list[str] = []
    real_fsync, real_replace, real_switch = os.fsync, os.replace, generations.switch_current

    def fsync(fd):
        events.append("fsync " + os.readlink(f"/proc/self/fd/{fd}"))
        return real_fsync(fd)

    def replace(source, target):
        events.append(f"rename {os.path.basename(source)}")
        return real_replace(source, target)

    def switch(directory, generation):
        events.append("switch")
        return real_switch(directory, generation)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    monkeypatch.setattr(generations, "switch_current", switch)
    report = build_docs(service, write_files(tmp_path / "docs", FILES), "book")
    building = report.path.name + generations.BUILDING_SUFFIX
    order = [
        e for e in events if building in e or e == "switch" or e.endswith(str(report.path.parent))
    ]
    assert order[:4] == [
        f"fsync {report.path.parent / building}",
        f"rename {building}",
        f"fsync {report.path.parent}",
        "switch",
    ]


def test_highlighting_never_marks_inside_an_entity():
    assert str(highlight("fish & chips", "amp")) == "fish &amp; chips"
    assert str(highlight('say "hello"', "quot hello")) == "say &#34;<mark>hello</mark>&#34;"
    assert str(highlight("<b>浅草寺</b>", "浅草")) == "&lt;b&gt;<mark>浅草</mark>寺&lt;/b&gt;"


# -- the document states what the service accepts ------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "35.7,139.8",
        "90,180",
        "-0090.000,-180",
        "90.01,0",
        "0,180.5",
        "1e1,0",
        "5.,3",
        "1_0,2",
        "inf,0",
        " 4 , 5 ",
        "\x1e4\u3000,5\x85",
        "\x0c4,5",
        "a,b",
        "1,2,3",
        "+1,+2",
        "00,00",
    ],
)
def test_the_stated_point_pattern_accepts_what_near_accepts(text):
    import re

    from chiezo.ops.patterns import POINT
    from chiezo.search.filters import parse_near

    try:
        parse_near(text)
        accepted = True
    except BadQuery:
        accepted = False
    assert bool(re.search(POINT, text)) == accepted


@pytest.mark.parametrize("text", ["a", " a ", "\x85\x85", "\u3000", "\x19", "\u200b", "\x1c x"])
def test_the_stated_not_blank_pattern_is_what_the_service_calls_empty(text):
    import re

    from chiezo.core.query import has_terms
    from chiezo.ops.patterns import NOT_BLANK

    assert bool(re.search(NOT_BLANK, text)) == has_terms(text)
