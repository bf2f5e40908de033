"""What a client beyond loopback may learn of this machine (issue #28, SECURITY.md rule 3): no
credentials — an endpoint URL's user, password and query string are never shown, to anyone —
and no paths: not the data folder, a source's input folder, the notes database or a model's
file. Tried as a tester would: every page and route that shows sources, jobs, the answer layer
or a document, read through a real server by a client that is not on this machine (a request
a reverse proxy forwarded, and one from another address), then searched for every secret."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from chiezo.ops import remembering
from chiezo.ops.context import Context
from chiezo.ops.requests import RememberRequest
from chiezo.surfaces.rest import create_app
from llm_stub import ScriptedLLM

from helpers import LOCAL, RunningServer, build_docs, write_files

PASSWORD, KEY, USER = "s3cretpw", "k3y-0f-the-llm", "llmuser"
MODEL_FILE = "/srv/private/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf"
FORWARDED = {"x-forwarded-for": "203.0.113.9"}  # what a reverse proxy adds for its client


@pytest.fixture
def llm():
    reply = {"content": "浅草寺は東京都台東区にある寺です [1]。"}
    with ScriptedLLM(lambda body: reply, models=(MODEL_FILE,)) as stub:
        yield stub


@pytest.fixture
def library(tmp_path, settings, llm):
    folder = write_files(
        tmp_path / "private-folder",
        {"sensoji.md": "---\ntitle: 浅草寺\n---\n浅草寺は東京都台東区浅草にある寺。\n"},
    )
    service = Context(settings)
    build_docs(service, folder, "kb")
    remembering.remember(service, RememberRequest.of(text="a note"))
    host = llm.url.removeprefix("http://")
    configured = replace(
        settings, llm_url=f"http://{USER}:{PASSWORD}@{host}?api_key={KEY}", llm_model=MODEL_FILE
    )
    return configured, folder


def _secrets(settings, folder: Path) -> list[str]:
    return [
        PASSWORD,
        KEY,
        f"{USER}:",
        MODEL_FILE,
        "/srv/private",
        str(folder.resolve()),
        str(settings.data_dir.resolve()),
        str(settings.notes_path.resolve()),
        folder.resolve().as_uri(),
    ]


ROUTES = [
    "/v1/sources",
    "/v1/llm",
    "/admin",
    "/",
    "/chat",
    "/doc/kb/1",
    "/v1/kb/doc?id=1",
    "/v1/kb/search?q=浅草寺",
    "/v1/search?q=浅草寺",
    "/v1/jobs/plan?source=kb",
    "/v1/jobs/plan?source=kb&action=embed&model=use-m",
    "/v1/jobs",
    "/v1/kb/titles?prefix=浅",
    "/v1/ask?q=浅草寺はどこ？",
    "/v1/ask?q=浅草寺はどこ？&stream=1",
    "/search?q=浅草寺",
    "/v1/notes/recall",
    "/openapi.json",
    "/v1/jobs/plan?source=gone",
]


def _read_all(get) -> dict[str, str]:
    return {route: get(route).text for route in ROUTES}


@pytest.mark.slow
def test_a_forwarded_client_learns_no_credentials_and_no_paths(library):
    settings, folder = library
    with RunningServer(create_app(settings)) as server:
        pages = _read_all(lambda r: httpx.get(server.url + r, headers=FORWARDED, timeout=30))
        local = _read_all(lambda r: httpx.get(server.url + r, timeout=30))
    for route, text in pages.items():
        for secret in _secrets(settings, folder):
            assert secret not in text, f"{route} shows {secret!r}"
    assert "Qwen2.5-7B-Instruct" in pages["/v1/llm"]  # the model by its name
    llm = json.loads(pages["/v1/llm"])
    assert llm["endpoints"][0]["ok"] and llm["endpoints"][0]["url"].endswith("/v1?api_key=***")
    # on this machine the paths are shown (the admin page names the input folder) — but
    # credentials are not, to anyone
    assert str(folder.resolve()) in local["/admin"] and MODEL_FILE in local["/v1/llm"]
    for text in local.values():
        assert PASSWORD not in text and KEY not in text


@pytest.mark.slow
def test_a_client_at_another_address_learns_no_paths(library):
    settings, folder = library
    remote = TestClient(create_app(settings), base_url=LOCAL, client=("203.0.113.9", 40000))
    for route, text in _read_all(remote.get).items():
        for secret in _secrets(settings, folder):
            assert secret not in text, f"{route} shows {secret!r}"


@pytest.mark.slow
def test_errors_and_job_logs_name_no_path_beyond_loopback(library):
    settings, folder = library
    import shutil

    shutil.rmtree(folder)  # the rebuild's input is gone: its refusal names the folder
    with RunningServer(create_app(settings)) as server:
        plan = httpx.get(f"{server.url}/v1/jobs/plan", params={"source": "kb"}, headers=FORWARDED)
        refused = httpx.post(
            f"{server.url}/v1/jobs", json={"source": "kb", "action": "rebuild"}, headers=FORWARDED
        )
        here = httpx.get(f"{server.url}/v1/jobs/plan", params={"source": "kb"})
    assert plan.status_code == 200 and plan.json()["input"]["exists"] is False
    assert refused.status_code in (400, 403)
    for text in (plan.text, refused.text):
        assert str(folder.resolve()) not in text and str(settings.data_dir.resolve()) not in text
    assert "private-folder" in plan.text  # the folder by its name: enough to know which
    assert str(folder.resolve()) in here.text  # on this machine, the whole path


@pytest.mark.slow
def test_a_name_is_replaced_only_where_it_ends_and_files_keep_their_length(library):
    from chiezo.surfaces.rest.disclosure import Table

    table = Table([(b"/root", b"~"), (b"/root/data", b"DATA")])
    assert table.scrub(b"/root/data/x /rootfs /root, a/root") == b"DATA/x /rootfs ~, a/root"
    settings, _ = library
    with RunningServer(create_app(settings)) as server:
        for asset in ("/static/chiezo.css", "/static/chiezo.js", "/static/admin.js"):
            served = httpx.get(server.url + asset, headers=FORWARDED)  # httpx checks the length
            assert served.status_code == 200 and len(served.content) > 1000
        head = httpx.head(f"{server.url}/v1/sources", headers=FORWARDED)
        assert head.status_code in (200, 405)


def _events(stream: str) -> list[tuple[str, dict]]:
    """(name, data) of each server-sent event."""
    found = []
    for block in stream.split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            found.append((lines["event"], json.loads(lines["data"])))
    return found


@pytest.mark.slow
def test_a_path_streamed_in_pieces_reaches_no_client_elsewhere_whole(tmp_path, settings):
    """The model's answer streams in 4-character deltas; a path cut across them was scrubbed
    piece by piece, so no piece held it — and the client joined them (issue #42 item 11)."""
    folder = write_files(
        tmp_path / "kb", {"a.md": "---\ntitle: 浅草寺\n---\n浅草寺は東京にある。\n"}
    )
    service = Context(settings)
    build_docs(service, folder, "kb")
    data = str(settings.data_dir.resolve())
    said = f"浅草寺の記録は {data}/corpus/kb にある [1]。ほかに {data} も [1]。"
    with ScriptedLLM(lambda body: {"content": said}) as llm:
        configured = replace(settings, llm_url=llm.url)
        with RunningServer(create_app(configured)) as server:
            asked = {"q": "浅草寺はどこ？", "stream": "1"}
            away = httpx.get(f"{server.url}/v1/ask", params=asked, headers=FORWARDED, timeout=30)
            here = httpx.get(f"{server.url}/v1/ask", params=asked, timeout=30)
    shown = _events(away.text)
    deltas = [d["text"] for name, d in shown if name == "delta"]
    assert len(deltas) > 3 and data not in "".join(deltas) and data not in away.text
    assert "DATA/corpus/kb" in "".join(deltas)
    (done,) = [d for name, d in shown if name == "done"]
    assert done["answer"] == "".join(deltas)  # what streamed is what the answer says
    assert data in "".join(d["text"] for name, d in _events(here.text) if name == "delta")


@pytest.mark.slow
def test_a_data_folder_reached_through_a_link_is_hidden_in_both_forms(tmp_path):
    """Only the resolved form of the data folder was hidden: a data folder given through a
    symbolic link showed ``…/d1link/corpus/…`` in job plans and logs (issue #42 item 10)."""
    from chiezo.core.config import Settings

    real = tmp_path / "real-data"
    real.mkdir()
    link = tmp_path / "d1link"
    link.symlink_to(real)
    settings = Settings(data_dir=link, query_timeout=10)
    folder = write_files(tmp_path / "private-folder", {"a.md": "# A\n\nText.\n"})
    build_docs(Context(settings), folder, "kb")
    with RunningServer(create_app(settings)) as server:
        job = httpx.post(f"{server.url}/v1/jobs", json={"source": "kb", "action": "rebuild"})
        assert job.status_code in (200, 201, 202), job.text
        for _ in range(200):
            jobs = httpx.get(f"{server.url}/v1/jobs", headers=FORWARDED).json()
            if all(j["state"] not in ("queued", "running") for j in jobs["jobs"]):
                break
            time.sleep(0.1)
        pages = {r: httpx.get(server.url + r, headers=FORWARDED).text for r in
                 ("/v1/jobs", "/v1/jobs/plan?source=kb", "/v1/sources", "/admin")}  # fmt: skip
        here = httpx.get(f"{server.url}/v1/jobs/plan", params={"source": "kb"}).text
    for route, text in pages.items():
        for form in (str(link), str(real), str(folder)):
            assert form not in text, f"{route} shows {form}"
    assert "DATA/" in pages["/v1/jobs"] + pages["/v1/jobs/plan?source=kb"]
    assert str(folder) in here  # on this machine, the paths as they are
