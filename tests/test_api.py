"""The REST API, served for real by uvicorn on a loopback port and called over HTTP."""

import os
import re

import httpx
import pytest

from chiezo.core.config import Settings
from chiezo.core.models import Doc
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, build_docs, build_source, switch_in_an_old_schema, write_files

FILES = {
    "sensoji.md": "---\ntitle: 浅草寺\naliases: [せんそうじ]\ntags: [寺院, 東京]\nrank: 0.9\n"
    "version: 2\n---\n東京都台東区にある寺。[台東区](taito.md) の名所。\n",
    "sensoji-2.md": "---\ntitle: 浅草寺\ntags: [寺院]\nrank: 0.1\n---\n同名の別の寺。\n",
    "taito.md": "---\ntags: [東京]\n---\n# 台東区\n\n台東区には[浅草寺](sensoji.md)がある。\n",
    "kyoto.md": "---\ntitle: 清水寺\ntags: [寺院, 京都]\n---\n京都市東山区の寺。\n",
}


@pytest.fixture
def api(settings, service, tmp_path):
    build_docs(service, write_files(tmp_path / "docs", FILES), "temples")
    with (
        RunningServer(create_app(settings)) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        yield client


def test_health_and_openapi(api):
    assert api.get("/healthz").json()["status"] == "ok"
    spec = api.get("/openapi.json").json()
    for path in ("/v1/sources", "/v1/{source}/search", "/v1/notes", "/v1/notes/recall"):
        assert path in spec["paths"]
    assert api.get("/docs").status_code == 200


@pytest.mark.slow
def test_sources_describe_what_each_source_has(api):
    (src,) = api.get("/v1/sources").json()["sources"]
    assert src["name"] == "temples" and src["kind"] == "docs" and src["docs"] == 4
    assert src["attributes"] == ["version"] and src["schema_version"] == 2
    assert src["input"]["files"] == 4 and src["built_at"]


def test_search_one_source_and_all(api):
    one = api.get("/v1/temples/search", params={"q": "浅草寺"}).json()
    assert one["hits"][0]["title"] == "浅草寺" and one["hits"][0]["title_match"]
    assert one["mode"].endswith("fts") and one["total"] == 3
    every = api.get("/v1/search", params={"q": "浅草寺", "limit": 2}).json()
    assert len(every["hits"]) == 2 and every["sources"] == ["temples"]


@pytest.mark.slow
def test_search_with_a_tag_filter(api):
    result = api.get("/v1/temples/search", params={"q": "区の寺", "tag": "京都"}).json()
    assert [h["title"] for h in result["hits"]] == ["清水寺"]


@pytest.mark.slow
def test_a_tag_nobody_has_returns_zero_with_the_reason(api):
    result = api.get("/v1/temples/search", params={"q": "浅草寺", "tag": "大阪"}).json()
    assert result["total"] == 0 and "no document has the tag '大阪'" in result["notes"][0]


@pytest.mark.slow
def test_an_attribute_the_source_does_not_have_is_a_400_with_the_reason(api):
    response = api.get("/v1/temples/search", params={"q": "浅草寺", "attr": "feature=shop"})
    body = response.json()
    assert response.status_code == 400
    assert "has no attribute 'feature'" in body["error"]
    assert body["known_attributes"] == ["version"]


@pytest.mark.slow
def test_doc_by_title_with_alternatives_fields_and_max_chars(api):
    doc = api.get(
        "/v1/temples/doc", params={"title": "浅草寺", "fields": "title,body,tags", "max_chars": 5}
    ).json()
    assert doc["title"] == "浅草寺" and doc["body"] == "東京都台東" and doc["truncated"]
    # the answer as a whole keeps to max_chars: the tags did not fit, and say so
    assert doc["tags"] == [] and doc["tags_total"] == 2 and "tags" in doc["more"]
    roomier = api.get(
        "/v1/temples/doc", params={"title": "浅草寺", "fields": "title,body,tags", "max_chars": 40}
    ).json()
    assert roomier["tags"] == ["寺院", "東京"] and "more" not in roomier
    assert set(doc) >= {"alternatives"} and len(doc["alternatives"]) == 1
    again = api.get(f"/v1/temples/doc/{doc['alternatives'][0]['doc_id']}").json()
    assert again["body"].startswith("同名")


@pytest.mark.slow
def test_doc_not_found_is_404_with_candidates(api):
    response = api.get("/v1/temples/doc", params={"title": "浅草"})
    assert response.status_code == 404
    assert "浅草寺" in response.json()["candidates"]


@pytest.mark.slow
def test_unknown_field_is_400_with_allowed_fields(api):
    response = api.get("/v1/temples/doc", params={"title": "浅草寺", "fields": "title,colour"})
    assert response.status_code == 400
    assert "colour" in response.json()["error"] and "body" in response.json()["allowed_fields"]


@pytest.mark.slow
def test_unknown_parameters_are_refused_naming_the_allowed_ones(api):
    response = api.get("/v1/temples/search", params={"q": "浅草寺", "lmit": 3})
    assert response.status_code == 400
    assert "lmit" in response.json()["error"] and "limit" in response.json()["allowed_parameters"]


@pytest.mark.slow
def test_unknown_source_is_404_listing_known_sources(api):
    response = api.get("/v1/nowhere/search", params={"q": "x"})
    assert response.status_code == 404
    assert response.json()["known_sources"] == ["temples"]


@pytest.mark.slow
def test_bad_parameter_values_are_400_in_the_same_shape(api):
    for params in ({"q": "x", "limit": 500}, {"q": "x", "limit": "many"}, {"q": ""}, {}):
        response = api.get("/v1/temples/search", params=params)
        assert response.status_code == 400, params
        assert set(response.json()) >= {"error", "status"}


@pytest.mark.slow
def test_unknown_endpoint_is_a_json_404(api):
    response = api.get("/v2/whatever")
    assert response.status_code == 404 and response.json()["status"] == 404


@pytest.mark.slow
def test_titles_tags_links_filter(api):
    titles = api.get("/v1/temples/titles", params={"prefix": "浅"}).json()["titles"]
    assert [t["title"] for t in titles] == ["浅草寺", "浅草寺"]
    tags = api.get("/v1/temples/tags", params={"prefix": "寺"}).json()
    assert tags["tags"] == [{"tag": "寺院", "docs": 3}]
    assert api.get("/v1/temples/tags", params={"contains": "京"}).json()["total"] == 2
    out = api.get("/v1/temples/links", params={"title": "台東区"}).json()
    assert out["links"] == [{"target": "sensoji.md", "doc_id": 1}]
    into = api.get("/v1/temples/links", params={"doc_id": 1, "direction": "in"}).json()
    assert [link["title"] for link in into["links"]] == ["台東区"]
    members = api.get("/v1/temples/filter", params={"tag": "寺院"}).json()
    assert members["total"] == 3 and [d["title"] for d in members["docs"]][0] == "浅草寺"
    both = api.get("/v1/temples/filter", params=[("tag", "寺院"), ("tag", "東京")]).json()
    assert both["total"] == 1


@pytest.mark.slow
def test_a_new_generation_and_new_sources_are_served_without_restart(api, settings, tmp_path):
    build_source(settings, "extra", "test", [Doc(key="a", title="追加の記事", body="新しい本文")])
    assert "extra" in [s["name"] for s in api.get("/v1/sources").json()["sources"]]
    assert api.get("/v1/extra/search", params={"q": "追加の記事"}).json()["total"] == 1
    build_source(settings, "extra", "test", [Doc(key="b", title="差し替えた記事", body="更新")])
    assert api.get("/v1/extra/search", params={"q": "差し替えた記事"}).json()["total"] == 1
    assert api.get("/v1/extra/search", params={"q": "追加の記事"}).json()["total"] == 0
    directory = settings.corpus_dir / "extra"
    os.unlink(directory / "current")  # a source removed by hand disappears too
    assert "extra" not in [s["name"] for s in api.get("/v1/sources").json()["sources"]]


@pytest.mark.slow
def test_a_source_with_an_old_schema_is_a_409(api, settings):
    """A generation written by an older schema is switched in (as an old build would be):
    the server refuses to read it and says how to rebuild."""
    switch_in_an_old_schema(settings, "temples")
    response = api.get("/v1/temples/search", params={"q": "浅草寺"})
    assert response.status_code == 409
    assert response.json()["schema_version"] == 0
    assert "chiezo ingest docs" in response.json()["hint"]


@pytest.mark.slow
def test_a_query_past_its_deadline_is_a_504(tmp_path):
    settings = Settings(data_dir=tmp_path / "data", query_timeout=1e-9)
    items = [Doc(key=f"k{i}", title=f"記事{i}", body=f"共通の語と番号{i}") for i in range(3000)]
    build_source(settings, "big", "test", items)
    with RunningServer(create_app(settings)) as server:
        response = httpx.get(f"{server.url}/v1/big/search", params={"q": "共通の語"}, timeout=30)
    assert response.status_code == 504
    assert response.json()["status"] == 504


def test_notes_round_trip(api):
    created = api.post("/v1/notes", json={"text": "浅草寺の最寄り駅は浅草駅。", "tags": ["旅行"]})
    assert created.status_code == 201
    note = created.json()
    assert (
        note["id"] == 1
        and note["tags"] == ["旅行"]
        and note["title"] == "浅草寺の最寄り駅は浅草駅。"
    )
    recalled = api.get("/v1/notes/recall", params={"q": "浅草駅"}).json()
    assert recalled["total"] == 1 and recalled["notes"][0]["id"] == 1
    patched = api.patch("/v1/notes/1", json={"title": "浅草寺への行き方"}).json()
    assert patched["title"] == "浅草寺への行き方" and patched["text"] == note["text"]
    assert patched["tags"] == ["旅行"]  # not sent: unchanged
    found = api.get("/v1/notes/search", params={"q": "浅草駅"}).json()
    assert found["hits"][0]["title"] == "浅草寺への行き方"
    assert "notes" in [s["name"] for s in api.get("/v1/sources").json()["sources"]]
    assert api.delete("/v1/notes/1").json() == {"deleted": 1}
    assert api.get("/v1/notes/1").status_code == 404
    assert api.patch("/v1/notes/1", json={"title": "x"}).status_code == 404


@pytest.mark.slow
def test_recall_by_time_alone_and_max_chars(api):
    api.post("/v1/notes", json={"text": "a" * 50, "title": "long"})
    recalled = api.get("/v1/notes/recall", params={"since": "2000-01-01", "max_chars": 10}).json()
    assert recalled["mode"] == "time"
    assert recalled["notes"][0]["text"] == "a" * 10 and recalled["notes"][0]["truncated"]
    future = api.get("/v1/notes/recall", params={"since": "2999-01-01"}).json()
    assert future["total"] == 0
    bad = api.get("/v1/notes/recall", params={"since": "last tuesday"})
    assert bad.status_code == 400 and "ISO" in bad.json()["error"]


@pytest.mark.slow
def test_bad_note_bodies_are_400(api):
    assert api.post("/v1/notes", json={"text": "   "}).status_code == 400
    assert api.post("/v1/notes", json={"txt": "typo"}).status_code == 400
    assert (
        api.post(
            "/v1/notes", content=b"not json", headers={"content-type": "application/json"}
        ).status_code
        == 400
    )


@pytest.mark.slow
def test_filter_errors_say_why(api):
    nothing = api.get("/v1/temples/filter")
    assert nothing.status_code == 400 and "at least one condition" in nothing.json()["error"]
    no_feature = api.get("/v1/temples/filter", params={"feature": "tourism=museum"})
    assert no_feature.status_code == 400 and "no attribute 'feature'" in no_feature.json()["error"]
    no_points = api.get("/v1/temples/filter", params={"near": "35,139"})
    assert no_points.status_code == 400 and "no coordinates" in no_points.json()["error"]
    bad_box = api.get("/v1/temples/filter", params={"bbox": "north-ish"})
    assert bad_box.status_code == 400
    features = api.get("/v1/temples/features")
    assert features.status_code == 400 and "no features" in features.json()["error"]
    ok = api.get("/v1/temples/filter", params={"tag": "寺院,京都", "fields": "title"}).json()
    assert ok["total"] == 3 and ok["order"] == "rank" and set(ok["docs"][0]) == {"title"}


def test_the_llm_status_names_models_without_their_paths_beyond_loopback():
    from chiezo.surfaces.rest.app import labelled_models

    status = {
        "configured": True,
        "model": "/srv/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf",
        "endpoints": [
            {
                "url": "http://127.0.0.1:8081/v1",
                "ok": False,
                "models": ["/srv/models/Qwen2.5-7B-Instruct-Q4_K_M.gguf", "smollm2"],
                "problem": "no model named '/srv/models/other-Q8_0.gguf' here",
            }
        ],
    }
    shown = labelled_models(status)
    assert "/srv" not in str(shown)
    assert shown["model"] == "Qwen2.5-7B-Instruct (Q4_K_M)"
    assert shown["endpoints"][0]["models"] == ["Qwen2.5-7B-Instruct (Q4_K_M)", "smollm2"]
    assert shown["endpoints"][0]["problem"] == "no model named 'other (Q8_0)' here"


def test_passages_for_a_question_with_fields_that_leave_out_the_id(api):
    """Found by a fresh fuzz seed (issue #42): ``fields`` without ``source`` and ``doc_id``
    made the passages for a question a KeyError, a 500."""
    first = api.get("/v1/temples/doc", params={"title": "浅草寺"}).json()
    asked = api.get(
        f"/v1/temples/doc/{first['doc_id']}", params={"question": "どこ", "fields": "body"}
    )
    assert asked.status_code == 200, asked.text
    assert asked.json()["passages_for"] == "どこ" and asked.json()["body"]


def test_a_blank_time_bound_is_no_bound_as_the_schema_says(api):
    """``since=%0D`` was answered 200 while the schema allowed only "" (a fresh fuzz seed)."""
    api.post("/v1/notes", json={"text": "a note"})
    for blank in ("", " ", "\r", "\t "):
        recalled = api.get("/v1/notes/recall", params={"since": blank})
        assert recalled.status_code == 200 and recalled.json()["total"] == 1
    schema = api.get("/openapi.json").json()["paths"]["/v1/notes/recall"]["get"]["parameters"]
    (since,) = [p for p in schema if p["name"] == "since"]
    blank_rule = [a for a in since["schema"]["anyOf"] if "pattern" in a]
    assert blank_rule and re.match(blank_rule[0]["pattern"], "\r")
