"""Kiwix ZIM files (tests/data/zim): both namespace schemes, redirects as aliases,
metadata, and the ray-charles file's searches."""

import pytest

from chiezo.core.config import Settings
from chiezo.core.errors import InputError
from chiezo.ops.requests import SearchRequest
from chiezo.ops.service import Service

from helpers import data_file

RAY = "zim/libkiwix_zimfile_raycharles.zim"


@pytest.fixture(scope="module")
def zims(tmp_path_factory):
    service = Service(Settings(data_dir=tmp_path_factory.mktemp("zim") / "data"))
    report = service.ingest("zim", data_file(RAY), None)
    return service, report


@pytest.mark.slow
def test_every_article_becomes_a_document(zims):
    service, report = zims
    assert report.name == "zim_wikipedia_en_ray_charles" and report.docs == 129
    (info,) = [s for s in service.sources() if s["name"] == report.name]
    assert info["kind"] == "zim" and info["language"] == "eng"


def test_ray_charles_comes_first_and_piano_finds_his_music(zims):
    service, report = zims
    first = service.search(SearchRequest.of(query="Ray Charles", source=report.name)).hits[0]
    assert first.title == "Ray Charles" and first.url == "A/Ray_Charles" and first.title_match
    piano = service.search(SearchRequest.of(query="piano", source=report.name, limit=50))
    assert piano.total >= 5 and "Ray Charles" in {h.title for h in piano.hits}
    for hit in piano.hits[:5]:  # relevant: each really mentions the piano
        body = service.doc(report.name, doc_id=hit.doc_id, fields=["body"])["body"]
        assert "piano" in body.lower()


def test_redirects_are_aliases_and_links_are_titles(zims):
    service, report = zims
    doc = service.doc(report.name, title="Ray Charles", fields=["aliases", "links", "opening"])
    assert "Ray Charles Robinson" in " ".join(doc["aliases"]) or len(doc["aliases"]) > 3
    assert "Georgia on My Mind" in doc["links"]
    assert doc["opening"].startswith("Ray Charles Robinson")
    # an alias finds the article as a title match
    alias = doc["aliases"][0]
    assert (
        service.search(SearchRequest.of(query=alias, source=report.name)).hits[0].title
        == "Ray Charles"
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    "file", ["wikibooks_be_all_nopic_2017-02_nons.zim", "wikibooks_be_all_nopic_2017-02_withns.zim"]
)
def test_both_namespace_schemes_build(tmp_path, file):
    service = Service(Settings(data_dir=tmp_path / "data"))
    report = service.ingest("zim", data_file(f"zim/{file}"), "books")
    assert report.docs == 66
    assert (
        service.search(SearchRequest.of(query="Першая старонка", source="books")).hits[0].title
        == "Першая старонка"
    )


def test_a_file_that_is_not_a_zim_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.zim"
    bad.write_bytes(b"not a zim file at all")
    with pytest.raises(InputError, match="not a readable ZIM"):
        Service(Settings(data_dir=tmp_path / "data")).ingest("zim", bad, "bad")
