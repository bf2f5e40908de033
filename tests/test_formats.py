"""Office, PDF, HTML and CSV files in `ingest docs`, built from the real files in
tests/data/docs and asserted on their real content."""

import zipfile

import pytest

from chiezo.core.config import Settings
from chiezo.ingest import formats
from chiezo.ops import reading, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest, SearchRequest

from helpers import build_docs, data_file, write_files


@pytest.fixture(scope="module")
def office(tmp_path_factory):
    service = Context(Settings(data_dir=tmp_path_factory.mktemp("office") / "data"))
    report = build_docs(service, data_file("docs/office"), "office")
    return service, report


@pytest.fixture(scope="module")
def pdfs(tmp_path_factory):
    service = Context(Settings(data_dir=tmp_path_factory.mktemp("pdf") / "data"))
    report = build_docs(service, data_file("docs/pdf"), "pdf")
    return service, report


@pytest.mark.slow
def test_a_gazette_pdf_is_read_as_japanese_text(pdfs):
    service, _ = pdfs
    (hit,) = searching.search(
        service, SearchRequest.of(query="道路交通法施行令の一部を改正する政令", source="pdf")
    ).hits[:1]
    assert hit.title == "kampo" and hit.source_url.endswith("/kampo.pdf#page=1")
    body = reading.doc(service, DocRequest.of(source="pdf", doc_id=hit.doc_id, fields=["body"]))[
        "body"
    ]
    assert "政令第百四十九号" in body


@pytest.mark.slow
def test_a_pdf_hit_knows_its_page(pdfs):
    service, _ = pdfs
    doc = searching.search(service, SearchRequest.of(query="固有表現", source="pdf")).hits[0]
    assert doc.title == "nlp2004slides"
    chunks = reading.doc(
        service, DocRequest.of(source="pdf", doc_id=doc.doc_id, fields=["chunks"])
    )["chunks"]
    assert chunks[0]["heading_path"] == "p. 1"  # the page, for a citation that says "p. 1"
    pages = [c["heading_path"] for c in chunks]
    assert pages[:3] == ["p. 1", "p. 2", "p. 3"]  # one page, one chunk: citable


@pytest.mark.slow
def test_a_spreadsheet_row_is_found_by_a_place_in_it(office):
    service, _ = office
    hit = searching.search(service, SearchRequest.of(query="高松市番町", source="office")).hits[0]
    assert hit.title == "yaizu-aed location — Sheet1" and hit.source_url.endswith(
        "aed_location.xlsx#Sheet1"
    )
    body = reading.doc(service, DocRequest.of(source="office", doc_id=hit.doc_id, fields=["body"]))[
        "body"
    ]
    assert "name: 健康増進施設サラマンダー" in body  # a row reads as header: value lines


@pytest.mark.slow
def test_a_slide_deck_and_a_word_file_keep_their_titles(office):
    service, _ = office
    titles = {
        h.title
        for h in searching.search(
            service, SearchRequest.of(query="AutoGen", source="office", limit=10)
        ).hits
    }
    assert "AutoGen: Enabling Next-Gen LLM Applications via Multi-Agent Conversation" in titles
    deck = next(
        h
        for h in searching.search(
            service, SearchRequest.of(query="AutoGen", source="office", limit=10)
        ).hits
        if h.source_url.endswith(".pptx")
    )
    chunks = reading.doc(
        service, DocRequest.of(source="office", doc_id=deck.doc_id, fields=["chunks"])
    )["chunks"]
    slides = [c["heading_path"] for c in chunks if c["heading_path"].startswith("Slide")]
    assert slides[0].startswith("Slide 1") and len(set(slides)) == len(slides)  # one per chunk


@pytest.mark.slow
def test_a_shift_jis_csv_is_decoded(office):
    service, _ = office
    hit = searching.search(service, SearchRequest.of(query="髙橋淳", source="office")).hits[0]
    assert hit.source_url.endswith("mskanji.csv")
    assert (
        "住所: 名古屋"
        in reading.doc(service, DocRequest.of(source="office", doc_id=hit.doc_id, fields=["body"]))[
            "body"
        ]
    )
    # named by its file, as a workbook's sheet is, not by its first block's "rows 2–4"
    assert hit.title == "markitdown-test mskanji"


def test_a_deck_without_a_title_is_named_by_its_file(tmp_path):
    from pptx import Presentation
    from pptx.util import Inches

    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[6])  # blank: no title placeholder
    slide.shapes.add_textbox(Inches(1), Inches(1), Inches(4), Inches(1)).text_frame.text = "本文"
    deck.save(tmp_path / "untitled_deck.pptx")
    (part,) = formats.convert(tmp_path / "untitled_deck.pptx")
    assert part.title == "untitled deck" and part.text.startswith("## Slide 1\n\n本文")


def test_a_column_a_marker_heads_that_numbers_the_rows_is_left_out():
    rows = [["#property", "name", "#note"], ["1", "A館", "7"], ["2", "B館", "3"], ["5", "C館", "9"]]
    text = formats._rows_text(iter(rows))
    assert (
        text == "## rows 2–4\n\nname: A館\n#note: 7\n\nname: B館\n#note: 3\n\nname: C館\n#note: 9"
    )
    labelled = formats._rows_text(iter([["No", "name"], ["1", "A館"], ["2", "B館"]]))
    assert "No: 1\nname: A館" in labelled  # a label, not a marker: the numbers stay
    # chosen on the first block of rows; a later row's words in that column are kept
    many = [["#", "name"], *([str(n), f"館{n}"] for n in range(1, 51)), ["別館", "館51"]]
    assert formats._rows_text(iter(many)).endswith("## rows 52–52\n\n#: 別館\nname: 館51")


@pytest.mark.slow
def test_every_document_records_its_file_facts(office):
    service, _ = office
    hit = searching.search(service, SearchRequest.of(query="高松市番町", source="office")).hits[0]
    extra = reading.doc(service, DocRequest.of(source="office", doc_id=hit.doc_id))["extra"]
    assert extra["format"] == "xlsx" and extra["size"] > 0 and len(extra["sha1"]) == 40
    assert extra["modified"].startswith("20")


def test_broken_files_are_reported_and_the_rest_is_built(tmp_path):
    folder = write_files(
        tmp_path / "docs",
        {
            "ok.md": "# 使える文書\n\n本文。\n",
            "broken.docx": b"PK\x03\x04 not really a zip",
            "page.html": "<html><head><title>案内</title></head><body><nav>menu</nav>"
            "<main><h1>利用案内</h1><p>開館時間は九時から。</p></main></body></html>",
        },
    )
    with zipfile.ZipFile(folder / "empty.xlsx", "w") as z:
        z.writestr("nothing.txt", "not a workbook")
    service = Context(Settings(data_dir=tmp_path / "data"))
    report = build_docs(service, folder, "mixed")
    assert report.docs == 2
    assert any("broken.docx" in w for w in report.warnings)
    assert any("empty.xlsx" in w for w in report.warnings)
    hit = searching.search(service, SearchRequest.of(query="開館時間", source="mixed")).hits[0]
    assert hit.title == "案内"
    assert (
        "menu"
        not in reading.doc(
            service, DocRequest.of(source="mixed", doc_id=hit.doc_id, fields=["body"])
        )["body"]
    )


@pytest.mark.slow
def test_a_rebuild_converts_only_the_files_that_changed(tmp_path):
    import shutil

    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("kampo.pdf", "nlp2004slides.pdf"):
        shutil.copy(data_file(f"docs/pdf/{name}"), folder / name)
    shutil.copy(data_file("docs/office/yaizu-aed_location.xlsx"), folder / "aed.xlsx")
    service = Context(Settings(data_dir=tmp_path / "data"))
    first = build_docs(service, folder, "mine")
    assert first.conversions == {"converted": 3, "reused": 0}
    (folder / "aed.xlsx").unlink()  # deleted files disappear
    shutil.copy(data_file("docs/office/markitdown-test.docx"), folder / "new.docx")
    second = build_docs(service, folder, "mine", allow_shrink=True)
    assert second.conversions == {"converted": 1, "reused": 2}
    assert (
        second.docs == 3
        and searching.search(service, SearchRequest.of(query="高松市番町", source="mine")).hits
        == []
    )
    assert (
        searching.search(service, SearchRequest.of(query="政令第百四十九号", source="mine"))
        .hits[0]
        .title
        == "kampo"
    )


def test_watch_rebuilds_once_after_a_change_settles(tmp_path):
    from chiezo.ingest.watch import snapshot, watch

    folder = write_files(tmp_path / "docs", {"a.md": "# A\n\n一。\n"})
    ticks = iter(range(100))
    clock = lambda: float(next(ticks))  # noqa: E731 - one second per poll
    rebuilt = []

    def sleep(_seconds):  # the user edits between polls 2 and 4, then stops
        step = len(stamps)
        stamps.append(step)
        if step == 2:
            (folder / "b.md").write_text("# B\n\n二。\n", encoding="utf-8")
        if step == 3:
            (folder / "b.md").write_text("# B\n\n二、改。\n", encoding="utf-8")

    stamps: list[int] = []
    count = watch(
        lambda: snapshot(folder),
        lambda: rebuilt.append(True),
        interval=0,
        debounce=1.5,
        sleep=sleep,
        clock=clock,
        rounds=10,
    )
    assert count == 1 and rebuilt == [True]


@pytest.mark.slow
def test_a_pdf_hit_links_to_its_page(pdfs):
    service, _ = pdfs
    hit = searching.search(
        service, SearchRequest.of(query="字句的な知識を構築する方法", source="pdf")
    ).hits[0]
    assert hit.title == "nlp2004slides" and hit.source_url.endswith("nlp2004slides.pdf#page=3")
    other = searching.search(service, SearchRequest.of(query="固有表現", source="pdf")).hits[0]
    assert other.source_url.endswith("#page=1")


def test_an_html_file_keeps_words_apart_at_blocks_and_cells(tmp_path):
    page = tmp_path / "page.html"
    page.write_text(
        "<html><head><title>Ray</title></head><body><h1>Ray</h1>"
        "<table class='infobox'><tr><th>Occupation</th><td><div class='hlist'><ul>"
        "<li>musician</li><li>singer</li></ul></div></td></tr>"
        "<tr><th>Born</th><td><span style='display:none'>(1930-09-23)</span>September 23, 1930"
        "<br>Albany, Georgia</td></tr></table><p>Ray was a pianist.</p></body></html>",
        encoding="utf-8",
    )
    (converted,) = formats.html(page)
    assert converted.title == "Ray"
    assert "Occupation: musician, singer" in converted.text
    assert "musiciansinger" not in converted.text and "1930Albany" not in converted.text
    assert "(1930-09-23)" not in converted.text and "# Ray" not in converted.text
