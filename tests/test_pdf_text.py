"""PDF text (issue 17, part 4), on the real PDFs in tests/data/docs/pdf: a masthead set
letter by letter reads as its word, characters whose font has no real Unicode mapping are
dropped rather than indexed as ™—›œ, and pages that were mostly such text are reported.
Issue 31: Japanese text reads as the page does — no space where two characters touch, no
break where a line only wraps — while a gap the page shows and a line the document ends stay."""

import re
import shutil
import unicodedata

import pytest

from chiezo.core.config import Settings
from chiezo.ingest import formats
from chiezo.ops import searching
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest

from helpers import build_docs, data_file


def _text(name: str) -> str:
    return formats.pdf(data_file(f"docs/pdf/{name}"))[0].text


def _pdfminer_text(name: str) -> str:
    """The text as pdfminer lays it out, box by box, with nothing joined or dropped."""
    from pdfminer.high_level import extract_pages
    from pdfminer.layout import LAParams, LTTextContainer

    pages = []
    for number, layout in enumerate(
        extract_pages(str(data_file(f"docs/pdf/{name}")), laparams=LAParams(detect_vertical=True)),
        1,
    ):
        text = formats._clean(
            "".join(e.get_text() for e in layout if isinstance(e, LTTextContainer))
        )
        pages.append(f"## p. {number}\n\n{text}")
    return "\n\n".join(pages)


def test_the_gazette_masthead_reads_as_one_word():
    lines = _text("kampo.pdf").splitlines()
    assert "官報" in lines  # 12 pt letters 36 pt apart over an 8 pt body; were "官" and "報"
    assert "官" not in lines and "報" not in lines


def test_digits_of_a_font_without_a_real_unicode_map_are_dropped():
    lines = _text("kampo.pdf").splitlines()
    assert "平成 年 月 日 金曜日" in lines  # was 平成 ™— 年 › 月 ™œ 日 金曜日
    assert "第 号" in lines  # was 第 ›Ÿ˜(cid:1) 号
    text = "\n".join(lines)
    assert not set("™—›œŸ˜") & set(text) and "(cid:" not in text
    assert "政令第百四十九号\n道路交通法施行令の一部を改正する政令" in text  # its neighbours stay


def _japanese(char: str) -> bool:
    return unicodedata.east_asian_width(char) in ("W", "F") and not char.isspace()


def _joined_breaks(theirs: str, ours: str) -> list[str]:
    """The line breaks of ``theirs`` that ``ours`` leaves out (each with the characters
    around it), asserting that nothing else differs."""
    joined, i, j = [], 0, 0
    while i < len(theirs) or j < len(ours):
        if j < len(ours) and i < len(theirs) and theirs[i] == ours[j]:
            i, j = i + 1, j + 1
        else:
            assert theirs[i] == "\n", (theirs[i - 20 : i + 20], ours[j - 20 : j + 20])
            joined.append(theirs[i - 1 : i + 2])
            i += 1
    return joined


@pytest.mark.slow
@pytest.mark.parametrize(
    "name, wraps",
    [
        ("issue-449-vertical.pdf", 0),
        ("jo.pdf", 0),
        ("markitdown-test.pdf", 0),
        ("nlp2004slides.pdf", 20),
        ("simple3.pdf", 0),
        ("yaizu-opendatacatalog-kiyaku.pdf", 14),
    ],
)
def test_every_other_pdf_reads_as_pdfminer_lays_it_out_but_for_wraps(name, wraps):
    # no other PDF here has large one-letter lines, a font without a real mapping or a space
    # between touching characters: 縦書き columns (issue-449-vertical.pdf, jo.pdf's verse and
    # its one-letter title 序) stay as read; a Japanese line that wraps goes on without a break
    joined = _joined_breaks(_pdfminer_text(name), _text(name))
    assert len(joined) == wraps
    assert all(_japanese(text[0]) and _japanese(text[2]) for text in joined), joined


def test_japanese_characters_that_touch_read_as_one_word():
    # kampo.pdf's turned glyphs (ー「」、) sit 0.24 of a character off its vertical columns'
    # rhythm, and pdfminer put a space after each of them (183 on the page)
    text = _text("kampo.pdf")
    assert "第一条の二第四項第三号中「一・五メートル」を「一メートル」に改め" in text
    assert not re.search(r"(?<=[ー「」、（）]) (?=[^ -~])", text)
    # a gap of a whole character on the page stays: an item's number and its text
    assert "\n一 歩行者は、道路を横断してはならないこ" in text


def test_a_wrapped_japanese_line_goes_on_and_a_paragraph_end_stays():
    kampo = _text("kampo.pdf")
    # a vertical column cut at the page's edge, in one text box (並び / に) and across two
    assert "の一部の施行に伴い、並びに道路交通法（昭和三十五年法律第百五号）" in kampo
    assert "同条第五項第三号中「第六十三条の四第一項」を" in kampo
    assert "この政令を制定する。\n道路交通法施行令（" in kampo  # a paragraph ends short
    # lines set 1.08 characters apart, each a text box of its own
    kiyaku = _text("yaizu-opendatacatalog-kiyaku.pdf")
    assert "変更することがありますので、サービスのご利用に際しては、" in kiyaku
    assert "本規約の内容を承諾したものとみなします。\nまた、本規約の内容は" in kiyaku
    slides = _text("nlp2004slides.pdf")
    assert "複数の異なる新聞社による同一日の新聞記事は、コンパラブルな記事を" in slides
    # a date centred over its caption ends at its box's edge, but no column's
    assert "1995年11月4日\nラビン首相暗殺" in slides


def test_vertical_text_and_a_normal_size_letter_stay_as_they_are():
    assert _text("issue-449-vertical.pdf").endswith("Layout\nVertical\nTest")
    assert _text("jo.pdf").startswith("## p. 1\n\n序\nわたくしといふ現象は\n")


@pytest.mark.slow
def test_only_the_gazette_digit_font_is_judged_unmapped():
    judged = {}
    for path in sorted(data_file("docs/pdf").glob("*.pdf")):
        fonts: dict = {}
        for layout in formats._layouts(path, fonts):
            formats._page_runs(layout)
        judged.update({(path.name, font.fontname): use.unmapped for font, use in fonts.items()})
    assert len(judged) > 30
    assert [key for key, unmapped in judged.items() if unmapped] == [
        ("kampo.pdf", "GMALPM+DFHSMincho-W3G014")
    ]


def _jo_without_unicode_map(folder):
    """jo.pdf with its CID font's character collection renamed (Japan1 → Japanx, same
    length): the same glyphs and codes, but no map from them to Unicode, as in a PDF whose
    font carries none — pdfminer reads every character as (cid:N)."""
    data = data_file("docs/pdf/jo.pdf").read_bytes()
    assert data.count(b"/Ordering(Japan1)") == 1
    (folder / "jo-nomap.pdf").write_bytes(data.replace(b"/Ordering(Japan1)", b"/Ordering(Japanx)"))


def test_a_pdf_with_no_unicode_mapping_is_reported_as_needing_ocr(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    _jo_without_unicode_map(folder)
    shutil.copy(data_file("docs/pdf/kampo.pdf"), folder / "kampo.pdf")
    service = Context(Settings(data_dir=tmp_path / "data"))
    report = build_docs(service, folder, "pdf")
    assert report.docs == 1  # the build goes on with the readable file
    (warning,) = [w for w in report.warnings if "jo-nomap.pdf" in w]
    assert "898 of 898 characters have no Unicode mapping" in warning
    assert "p. 1 is mostly such text and needs OCR" in warning and warning.endswith("skipped")
    assert (
        searching.search(service, SearchRequest.of(query="官報", source="pdf")).hits[0].title
        == "kampo"
    )


@pytest.mark.slow
def test_a_page_mostly_without_mapping_is_named_and_its_document_kept(tmp_path, monkeypatch):
    # kampo.pdf's page loses 10 of its 2,635 characters; with the bar below that share the
    # same drop is reported, and the page is still indexed
    monkeypatch.setattr(formats, "MOSTLY_UNMAPPED", 0.001)
    folder = tmp_path / "docs"
    folder.mkdir()
    shutil.copy(data_file("docs/pdf/kampo.pdf"), folder / "kampo.pdf")
    service = Context(Settings(data_dir=tmp_path / "data"))
    report = build_docs(service, folder, "pdf")
    assert report.docs == 1
    (warning,) = [w for w in report.warnings if "kampo.pdf" in w]
    assert "10 of 2635 characters have no Unicode mapping" in warning and "p. 1" in warning
    assert (
        searching.search(service, SearchRequest.of(query="官報", source="pdf")).hits[0].title
        == "kampo"
    )
    again = build_docs(service, folder, "pdf")  # from the conversion cache: said again
    assert again.conversions == {"converted": 0, "reused": 1} and again.warnings == [warning]
