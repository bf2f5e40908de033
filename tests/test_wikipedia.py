"""The Wikipedia source, built from real dump excerpts (and small real-format files the tests
write themselves where no real file is available)."""

import bz2
import gzip
import re

import pytest

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, InputError
from chiezo.ingest.wikidump import WikiDump
from chiezo.ingest.wikipedia import WikiOptions, ingest_wikipedia
from chiezo.ops import reading, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest, FilterRequest, SearchRequest
from chiezo.store import generations
from chiezo.store.build import BuildOptions

from helpers import data_file, wiki_dump

# the jawiki and enwiki excerpts built whole: left out of `make test-fast`
pytestmark = pytest.mark.slow

JA = "wikipedia/jawiki-20230501-excerpt.xml.bz2"
EN = "wikipedia/enwiki-202207-excerpt.xml.bz2"


@pytest.fixture(scope="module")
def jawiki(tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("ja") / "data")
    report = ingest_wikipedia(settings, data_file(JA))
    return Context(settings), report


@pytest.fixture(scope="module")
def raw_pages():
    dump = WikiDump(data_file(JA))
    pages = {p.title: p for p in dump.pages() if p.ns == 0 and p.redirect is None}
    dump.close()
    return pages


def test_the_build_keeps_articles_of_namespace_zero(jawiki, raw_pages):
    service, report = jawiki
    assert (
        report.name == "jawiki" and report.docs == len(raw_pages) == 71
    )  # 189 in the whole excerpt
    info = service.library.get("jawiki").info().to_dict()
    assert info["kind"] == "wikipedia" and info["language"] == "ja"
    assert info["input"]["dump_date"] == "20230501"


def test_searching_a_title_returns_that_article_first(jawiki):
    service, _ = jawiki
    result = searching.search(service, SearchRequest.of(query="日本語", source="jawiki"))
    assert result.hits[0].title == "日本語" and result.hits[0].title_match
    assert result.hits[0].url == "https://ja.wikipedia.org/wiki/%E6%97%A5%E6%9C%AC%E8%AA%9E"


def test_a_redirect_title_resolves_to_its_target(jawiki):
    service, _ = jawiki
    doc = reading.doc(
        service,
        DocRequest.of(source="jawiki", title="スメクティック相", fields=["title", "aliases"]),
    )
    assert doc["title"] == "液晶" and "スメクティック相" in doc["aliases"]
    hit = searching.search(
        service, SearchRequest.of(query="スメクティック相", source="jawiki")
    ).hits[0]
    assert hit.title == "液晶" and hit.title_match


def test_category_membership_is_complete(jawiki, raw_pages):
    service, _ = jawiki
    pattern = re.compile(r"\[\[\s*(?:Category|カテゴリ)\s*:\s*([^|\]]+)", re.I)
    for title in ("日本語", "パリ", "アンパサンド", "北海道", "哲学"):
        expected = {
            " ".join(c.replace("_", " ").split()) for c in pattern.findall(raw_pages[title].text)
        }
        tags = set(
            reading.doc(service, DocRequest.of(source="jawiki", title=title, fields=["tags"]))[
                "tags"
            ]
        )
        assert expected and expected <= tags, title
    members = searching.filter(service, FilterRequest.of(source="jawiki", tag=["日本の言語"]))
    assert "日本語" in [d["title"] for d in members["docs"]]


def test_prose_is_clean(jawiki):
    service, _ = jawiki
    for title in ("パリ", "日本語", "アンパサンド", "兵庫県"):
        doc = reading.doc(
            service, DocRequest.of(source="jawiki", title=title, fields=["body", "opening"])
        )
        for junk in ("<ref", "thumb|", "__NOTOC__", "{{", "}}", "[[", "px|"):
            assert junk not in doc["body"], (title, junk)
        assert doc["opening"] and "{{" not in doc["opening"]
    paris = reading.doc(
        service, DocRequest.of(source="jawiki", title="パリ", fields=["opening", "body"])
    )
    assert paris["opening"].startswith("パリ（Paris、巴里）は、フランスの首都")
    # infobox facts under the labels the template shows, not its parameter names
    assert "市長: アンヌ・イダルゴ" in paris["body"]
    assert "人口: 市：2,148,271人" in paris["body"]
    for debris in ("maire:", "nomcommune", "\nx: 140", "\ny: 65", ": 年月日", "record high C"):
        assert debris not in paris["body"], debris
    # the weather box: one line per measure, months in order
    assert "- 平均最高気温 (°C): 1月 7.9, 2月 9.2," in paris["body"]


def test_an_article_takes_only_its_own_point(jawiki, raw_pages):
    """The point shown at the title, else the infobox's, else a coordinate named after the
    subject's office — never an extremity-table row, a list of other places or a map frame."""
    service, report = jawiki
    titled = [
        t
        for t, p in raw_pages.items()
        if re.search(r"\{\{\s*[Cc]oord\s*\|\s*-?\d[^}]*display\s*=\s*[a-z,]*title", p.text)
    ]
    assert titled
    for title in titled:
        assert reading.doc(service, DocRequest.of(source="jawiki", title=title, fields=["point"]))[
            "point"
        ], title
    paris = reading.doc(service, DocRequest.of(source="jawiki", title="パリ", fields=["point"]))[
        "point"
    ]
    assert paris == {
        "lat": pytest.approx(48.8622, abs=1e-3),
        "lon": pytest.approx(2.3511, abs=1e-3),
    }
    # 兵庫県 states its point only through Wikidata; its first coordinate is the centroid row
    # of an extremity table, which is not the article's point: no point rather than that one
    assert "{{Coord|format=dms" in raw_pages["兵庫県"].text
    assert (
        reading.doc(service, DocRequest.of(source="jawiki", title="兵庫県", fields=["point"])).get(
            "point"
        )
        is None
    )
    points = report.tallies["article points"]
    assert points["title"] >= len(titled) and points["wikidata"] >= 1


def test_infobox_numbers_are_typed_attributes_a_filter_compares(jawiki):
    service, _ = jawiki
    big = searching.filter(
        service,
        FilterRequest.of(
            source="jawiki", attr=["population>=1000000"], limit=50, fields=["title", "attrs"]
        ),
    )
    assert "パリ" in {d["title"] for d in big["docs"]}
    assert all(float(d["attrs"]["population"][0]) >= 1e6 for d in big["docs"])
    assert big["total"] == len(big["docs"])
    for not_a_number in ("population>many", "population>1e99"):
        with pytest.raises(BadQuery, match="compares with a number"):
            searching.filter(service, FilterRequest.of(source="jawiki", attr=[not_a_number]))
    with pytest.raises(BadQuery, match="no attribute 'populaton'"):
        searching.filter(service, FilterRequest.of(source="jawiki", attr=["populaton>5"]))
    too_big = searching.filter(
        service, FilterRequest.of(source="jawiki", attr=["population>9000000000"])
    )
    assert too_big["total"] == 0 and "its values run from" in str(too_big)


def test_the_six_disambiguation_pages_are_flagged(jawiki):
    service, _ = jawiki
    flagged = searching.filter(
        service, FilterRequest.of(source="jawiki", attr=["flag=disambiguation"], limit=50)
    )
    assert {d["title"] for d in flagged["docs"]} == {
        "EU (曖昧さ回避)",
        "地理",
        "タイ",
        "サンバ",
        "フォスター",
        "ゴスペル",
    }


def test_popularity_comes_from_incoming_links_without_pageviews(jawiki):
    service, _ = jawiki
    conn = service.library.get("jawiki").conn
    top = [r[0] for r in conn.execute("SELECT title FROM docs ORDER BY doc_id LIMIT 10")]
    assert "日本語" in top
    flagged = conn.execute(
        "SELECT max(d.rank_score) FROM docs d JOIN doc_attrs a ON a.doc_id = d.doc_id "
        "WHERE a.name = 'flag'"
    ).fetchone()[0]
    assert flagged < 0.1  # pushed down


def test_chunks_follow_the_article_sections(jawiki):
    service, _ = jawiki
    chunks = reading.doc(
        service, DocRequest.of(source="jawiki", title="日本語", fields=["chunks"])
    )["chunks"]
    assert len(chunks) > 10
    # The article title leads every breadcrumb, so a chunk read alone still says what it is about.
    assert all(c["heading_path"].startswith("日本語") for c in chunks)
    assert any(c["heading_path"].startswith("日本語 > 歴史") for c in chunks)


def test_the_english_excerpt_builds(tmp_path):
    service = Context(Settings(data_dir=tmp_path / "data"))
    report = ingest_wikipedia(service.settings, data_file(EN))
    assert report.name == "enwiki" and report.docs == 42  # 139 in the whole excerpt
    assert (
        searching.search(service, SearchRequest.of(query="Albedo", source="enwiki")).hits[0].title
        == "Albedo"
    )
    doc = reading.doc(
        service, DocRequest.of(source="enwiki", title="Alabama", fields=["point", "tags", "body"])
    )
    assert doc["point"]["lat"] == pytest.approx(33, abs=1.5)
    assert "States of the United States" in doc["tags"]
    assert "{{" not in doc["body"] and "<ref" not in doc["body"]
    flagged = searching.filter(
        service, FilterRequest.of(source="enwiki", attr=["flag=disambiguation"], limit=50)
    )
    assert "Austin (disambiguation)" in {d["title"] for d in flagged["docs"]}


def test_a_truncated_dump_fails_and_the_previous_generation_keeps_serving(jawiki, tmp_path):
    service, _ = jawiki
    truncated = data_file("wikipedia/jawiki-20230501-truncated.xml.xz")
    settings = service.settings
    before = generations.current_path(settings.corpus_dir / "jawiki")
    with pytest.raises(InputError) as info:
        ingest_wikipedia(settings, truncated)
    message = info.value.message
    assert "truncated" in message and "complete pages" in message and "the last:" in message
    assert generations.current_path(settings.corpus_dir / "jawiki") == before
    assert (
        searching.search(service, SearchRequest.of(query="日本語", source="jawiki")).hits[0].title
        == "日本語"
    )
    leftovers = [p.name for p in (settings.corpus_dir / "jawiki").glob("*.building*")]
    assert leftovers == []


def test_a_truncated_dump_can_be_built_from_its_complete_pages(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    truncated = data_file("wikipedia/jawiki-20230501-truncated.xml.xz")
    report = ingest_wikipedia(settings, truncated, "cut", wiki=WikiOptions(allow_truncated=True))
    assert report.docs > 10
    info = Context(settings).library.get("cut").info().to_dict()
    assert "truncated" in info["input"]
    assert any("truncated" in w for w in report.warnings)


def test_pageviews_and_page_props_give_rank_and_wikidata_ids(tmp_path):
    dump = tmp_path / "testwiki-20230501-pages-articles.xml.bz2"
    pages = [
        (1, "東京", "東京は日本の首都。"),
        (2, "大阪", "大阪は日本の都市。"),
        (3, "京都", "京都は日本の古都。"),
    ]
    dump.write_bytes(bz2.compress(wiki_dump(pages, [(9, "トーキョー", "東京")]).encode()))
    views = tmp_path / "pageviews-202304-user.bz2"
    views.write_bytes(
        bz2.compress(
            "ja.wikipedia 東京 1 desktop 900 A900\n"
            "ja.wikipedia 東京 1 mobile-web 100 A100\n"
            "ja.wikipedia 京都 3 desktop 50 A50\n"
            "en.wikipedia Tokyo 1 desktop 99999 A1\n"
            "ja.wikipedia 大阪 2 desktop 10 A10\n".encode()
        )
    )
    props = tmp_path / "testwiki-20230501-page_props.sql.gz"
    props.write_bytes(
        gzip.compress(
            b"-- MySQL dump\nINSERT INTO `page_props` VALUES (1,'wikibase_item','Q1490',NULL),"
            b"(1,'page_image_free','Tokyo.jpg',NULL),(2,'wikibase_item','Q35765',NULL),"
            b"(3,'defaultsort','\\'Kyoto\\'',NULL);\n"
        )
    )
    settings = Settings(data_dir=tmp_path / "data")
    ingest_wikipedia(settings, dump, wiki=WikiOptions(pageviews=views, page_props=props))
    service = Context(settings)
    conn = service.library.get("testwiki").conn
    assert [r[0] for r in conn.execute("SELECT title FROM docs ORDER BY doc_id")] == [
        "東京",
        "京都",
        "大阪",
    ]
    assert (
        reading.doc(service, DocRequest.of(source="testwiki", title="東京", fields=["rank_score"]))[
            "rank_score"
        ]
        == 1.0
    )
    assert (
        searching.filter(service, FilterRequest.of(source="testwiki", attr=["wikidata=Q35765"]))[
            "docs"
        ][0]["title"]
        == "大阪"
    )
    assert (
        reading.doc(
            service, DocRequest.of(source="testwiki", title="トーキョー", fields=["title"])
        )["title"]
        == "東京"
    )
    assert "wikidata" in service.library.get("testwiki").attributes


def test_broken_markup_keeps_the_article(tmp_path):
    broken = "{{Infobox|name=x|[[未閉じ]] {{入れ子|&lt;ref&gt;ここで終わる"
    dump = tmp_path / "broken.xml"
    dump.write_text(wiki_dump([(1, "壊れた記事", broken), (2, "普通の記事", "普通の本文です。")]))
    settings = Settings(data_dir=tmp_path / "data")
    report = ingest_wikipedia(settings, dump, "broken", options=BuildOptions())
    assert report.docs == 2
    assert (
        searching.search(
            Context(settings), SearchRequest.of(query="普通の本文", source="broken")
        ).total
        == 1
    )


def test_multistream_bz2_dumps_are_read_whole(tmp_path):
    pages = [(i, f"記事{i}", f"本文{i}です。") for i in range(1, 7)]
    text = wiki_dump(pages)
    cut = text.index("<page>", text.index("<page>") + 1)
    dump = tmp_path / "multi.xml.bz2"
    dump.write_bytes(bz2.compress(text[:cut].encode()) + bz2.compress(text[cut:].encode()))
    settings = Settings(data_dir=tmp_path / "data")
    assert ingest_wikipedia(settings, dump, "multi").docs == 6


def test_not_a_dump_is_a_clear_error(tmp_path):
    bogus = tmp_path / "notes.xml"
    bogus.write_text("<html><body>hello</body></html>")
    with pytest.raises(InputError, match="not a MediaWiki XML dump"):
        ingest_wikipedia(Settings(data_dir=tmp_path / "data"), bogus)
    with pytest.raises(InputError, match="no such dump"):
        ingest_wikipedia(Settings(data_dir=tmp_path / "data"), tmp_path / "missing.xml.bz2")


def test_too_little_disk_is_refused_before_reading(tmp_path, monkeypatch):
    import shutil

    from chiezo.core.errors import BuildError

    real = shutil.disk_usage
    monkeypatch.setattr(shutil, "disk_usage", lambda p: real(p)._replace(free=1024))
    with pytest.raises(BuildError, match="not enough disk"):
        ingest_wikipedia(Settings(data_dir=tmp_path / "data"), data_file(JA))
    assert not list((tmp_path / "data" / "corpus").glob("*/*.building*"))


def test_a_multistream_dump_reads_back_stream_by_stream(tmp_path):
    """wikistreams (what the workers of `--ray` read): the ranges of the index give back every
    page of the dump, in order."""
    from chiezo.ingest import wikistreams

    dump = wikistreams.write_multistream(data_file(JA), tmp_path, per_stream=10)
    ranges = wikistreams.stream_ranges(dump, wikistreams.index_beside(dump))
    assert len(ranges) == 11  # 107 pages in streams of 10
    read = [p.title for start, end in ranges for p in wikistreams.read_pages(dump, start, end)]
    whole = WikiDump(data_file(JA))
    assert read == [p.title for p in whole.pages()]
    whole.close()


def test_a_hostile_multistream_index_or_stream_is_refused(tmp_path, monkeypatch):
    import bz2

    from chiezo.ingest import wikistreams

    dump = wikistreams.write_multistream(data_file(JA), tmp_path, per_stream=10)
    index = wikistreams.index_beside(dump)
    good = bz2.decompress(index.read_bytes()).decode()

    def refused(text: str, match: str) -> None:
        index.write_bytes(bz2.compress(text.encode()))
        with pytest.raises(InputError, match=match):
            wikistreams.stream_ranges(dump, index)

    refused("not an index\n", "not offset:page_id:title")
    refused("900:1:a\n500:2:b\n", "offsets go backwards")
    refused(f"{10**12}:1:a\n", "does not match")
    index.write_bytes(bz2.compress(good.encode()))
    monkeypatch.setattr(wikistreams, "MAX_RANGE_BYTES", 100)
    with pytest.raises(InputError, match="lists a stream of"):
        wikistreams.stream_ranges(dump, index)
    # a range whose text is far beyond a stream's (a bz2 bomb) is not read into memory
    bomb = tmp_path / "bomb-multistream.xml.bz2"
    bomb.write_bytes(bz2.compress(b" " * 5_000_000))
    monkeypatch.setattr(wikistreams, "MAX_XML_BYTES", 1_000_000)
    with pytest.raises(InputError, match="more than 1,000,000 bytes"):
        wikistreams.read_pages(bomb, 0, bomb.stat().st_size)
    # a range that cuts a stream short
    with pytest.raises(InputError, match="ends early"):
        wikistreams.read_pages(dump, 0, 50)
