"""One generation per source for a whole request, named in the response (surfaces/rest/pinning.py):
what keeps a rolling switch — a rebuild here, a new generation reaching the replicas of a
cluster — from mixing two generations into one answer."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from chiezo.core.config import Settings
from chiezo.ops import searching
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest
from chiezo.store import generations
from chiezo.surfaces.rest import create_app

from helpers import LOCAL, build_docs, generations_of, write_files

OLD = {"a.md": "---\ntitle: 雷門\n---\n浅草寺の総門。赤い提灯が下がる。\n"}
NEW = {"a.md": "---\ntitle: 雷門\n---\n浅草寺の総門。風神と雷神の像が立つ。\n"}


def current(settings: Settings, name: str = "kb") -> str:
    return generations.current_path(settings.corpus_dir / name).name


def test_a_switch_inside_a_request_does_not_reach_it(service: Context, tmp_path: Path):
    build_docs(service, write_files(tmp_path / "old", OLD), "kb")
    old = current(service.settings)
    with service.library.pinned() as used:
        first = service.library.get("kb")
        build_docs(service, write_files(tmp_path / "new", NEW), "kb")
        assert service.library.get("kb") is first  # still the generation the request began with
        hits = searching.search(service, SearchRequest.of(query="提灯", source="kb")).hits
        assert [h.title for h in hits] == ["雷門"]
        assert used["kb"].path.name == old
    assert current(service.settings) != old
    assert service.library.get("kb").path.name == current(service.settings)  # outside: the new
    assert searching.search(service, SearchRequest.of(query="提灯", source="kb")).hits == []


def test_responses_name_the_generation_they_read(service: Context, tmp_path: Path):
    build_docs(service, write_files(tmp_path / "old", OLD), "kb")
    build_docs(service, write_files(tmp_path / "other", NEW), "other")
    with TestClient(create_app(service.settings), base_url=LOCAL) as client:
        one = client.get("/v1/kb/search", params={"q": "雷門"})
        assert generations_of(one.headers["x-chiezo-generation"]) == {
            "kb": current(service.settings)
        }
        both = client.get("/v1/search", params={"q": "雷門"})
        assert generations_of(both.headers["x-chiezo-generation"]) == {
            "kb": current(service.settings),
            "other": current(service.settings, "other"),
        }
        build_docs(service, write_files(tmp_path / "new", NEW), "kb")
        again = client.get("/v1/kb/search", params={"q": "雷門"})
        assert generations_of(again.headers["x-chiezo-generation"])["kb"] == current(
            service.settings
        )
        # what reads no source names none; errors too
        assert "x-chiezo-generation" not in client.get("/healthz").headers
        assert "x-chiezo-generation" not in client.get("/v1/nosuch/search?q=x").headers
