"""Pages a person reads (issue 17): a document page shows its stored body once — headings as
headings, no ``##`` text, no passage twice, the opening once, no HTML comment — and search
snippets are plain text that still marks the words searched for. Issue 31: so do the pages of
PDF, Office and place-table documents (a PDF's pages as headings, a place's facts as lines),
and a section's label is plain text.

Built from real files in tests/data: the jawiki excerpt dump and the Rust book's Japanese
translation (whose chapters keep the English original in ``<!-- … -->`` blocks and name files
in ``<span class="filename">``). Which article, chapter and words are used is read from the
data by what they contain, never named. The browser is the system's headless Chromium, driven
by Playwright against the real server on loopback (as in test_web_browser.py).
"""

import re
from collections import Counter

import httpx
import pytest

from chiezo.core.config import Settings
from chiezo.ingest.wikipedia import ingest_wikipedia
from chiezo.ops import building, reading
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest
from chiezo.search.snippet import SNIPPET_CHARS
from chiezo.store.build import BuildOptions
from chiezo.surfaces.rest import create_app
from chiezo.surfaces.web.document_pages import DOC_BODY_CHARS

from helpers import SCREENSHOTS, RunningServer, browser_page, build_docs, chromium, data_file

# the jawiki excerpt and the Rust book built, in a real browser: left out of `make test-fast`
pytestmark = pytest.mark.slow

JA = "wikipedia/jawiki-20230501-excerpt.xml.bz2"
RUST_BOOK = "docs/markdown/rust-book-ja"
AED = "docs/office/yaizu-aed_location.xlsx"
HEADING_LINE = re.compile(r"^(#{1,6}) (.+)$")
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    settings = Settings(data_dir=tmp_path_factory.mktemp("doc-pages") / "data")
    # The word index and the full integrity check serve search and safety, not what a page
    # reads; without them the excerpt builds in about half the time.
    ingest_wikipedia(
        settings,
        data_file(JA),
        "jawiki",
        options=BuildOptions(word_index=False, full_validation=False),
    )
    service = Context(settings)
    build_docs(service, data_file(RUST_BOOK), "rustbook")
    build_docs(service, data_file("docs/pdf"), "pdf")
    build_docs(service, data_file("docs/office"), "office")
    building.ingest(service, "places", [data_file(AED)], "aed")
    return service


@pytest.fixture(scope="module")
def server(library):
    with RunningServer(create_app(library.settings)) as running:
        yield running


@pytest.fixture(scope="module")
def web(server):
    with httpx.Client(base_url=server.url, timeout=30) as client:
        yield client


@pytest.fixture(scope="module")
def browser(server):
    with chromium() as launched:
        yield launched


@pytest.fixture
def page(browser, server, request):
    page = browser_page(browser, server.url)
    yield page
    # the top of the page: a whole long article takes seconds to capture
    top = {"x": 0, "y": 0, "width": 1100, "height": 2400}
    page.screenshot(path=str(SCREENSHOTS / f"{request.node.name}.png"), full_page=True, clip=top)
    page.context.close()
    assert not page.errors, f"script errors on the page: {page.errors}"


# -- what the data holds (the oracles, read from the stored text, not from the page code) --------


def stored(service: Context, source: str, doc_id: int) -> dict:
    return reading.doc(
        service,
        DocRequest.of(
            source=source, doc_id=doc_id, fields=["doc_id", "title", "opening", "body", "chunks"]
        ),
    )


def repeated_passages(chunks: list[dict]) -> int:
    """How many chunks start with lines the chunk before ended with (the chunker's overlap)."""
    repeats = 0
    for before, after in zip(chunks, chunks[1:], strict=False):
        first = next((line for line in after["text"].splitlines() if line.strip()), "")
        repeats += before["heading_path"] == after["heading_path"] and first in before["text"]
    return repeats


def article_with_overlap(service: Context) -> dict:
    """The article with the most passages repeated between its chunks, among those with a
    lead, headings of two levels and a body the page shows uncut."""
    conn = service.library.get("jawiki").conn
    ids = [
        r[0]
        for r in conn.execute(
            "SELECT doc_id FROM docs WHERE opening != '' AND length(body) < ? AND body LIKE ? "
            "AND body LIKE ?",
            (DOC_BODY_CHARS, "%\n## %", "%\n### %"),
        )
    ]
    docs = [stored(service, "jawiki", i) for i in ids]
    best = max(docs, key=lambda d: repeated_passages(d["chunks"]))
    assert repeated_passages(best["chunks"]) > 0, "no article of the excerpt has a repeated passage"
    return best


def chapter_with_comments(service: Context) -> dict:
    """The Rust-book chapter with the most HTML comments among those naming a file."""
    conn = service.library.get("rustbook").conn
    doc_id = conn.execute(
        "SELECT doc_id FROM docs WHERE body LIKE '%<span class=\"filename\">%' "
        "ORDER BY length(body) - length(replace(body, '<!--', '')) DESC LIMIT 1"
    ).fetchone()[0]
    return stored(service, "rustbook", doc_id)


def filename_label(service: Context) -> str:
    """The label of the chapter's file names: words that stand right inside the markup."""
    body = re.sub(r"<!--.*?-->", "", chapter_with_comments(service)["body"], flags=re.S)
    return re.search(r'<span class="filename">([^:<]+):', body).group(1).strip()


def wiki_paragraphs(body: str) -> list[str]:
    """The stored article's paragraphs: blocks between blank lines and heading lines."""
    blocks, current = [], []
    for line in body.splitlines():
        if HEADING_LINE.match(line) or not line.strip():
            blocks.append(current)
            current = []
        else:
            current.append(line)
    blocks.append(current)
    return [squeeze("\n".join(b)) for b in blocks if b]


def wiki_headings(body: str) -> list[tuple[str, str]]:
    """(element, text) of the heading lines: the page title is the h1, so ``#`` shows as h2."""
    found = [HEADING_LINE.match(line) for line in body.splitlines()]
    return [(f"h{max(len(m.group(1)), 2)}", m.group(2).strip()) for m in found if m]


def markdown_lines(body: str) -> tuple[list[str], list[str]]:
    """(heading lines, first lines of the comments' prose) outside code fences."""
    headings, comment_lines = [], []
    fence, comment = None, None
    for line in body.splitlines():
        if comment is not None:
            if "-->" in line:
                comment_lines.append(comment)
                comment = None
            elif not comment and line.strip():
                comment = line.strip()
        elif fence:
            fence = None if line.strip().startswith(fence) else fence
        elif opened := FENCE.match(line):
            fence = opened.group(1)
        elif line.startswith("<!--") and "-->" not in line:
            comment = ""
        elif HEADING_LINE.match(line):
            headings.append(line)
    return headings, [c for c in comment_lines if c.count(" ") >= 5 and len(c) > 40]


def squeeze(text: str) -> str:
    return " ".join(text.split())


def page_parts(page, selector: str) -> list[str]:
    return page.eval_on_selector_all(selector, "els => els.map(e => e.innerText)")


# -- the pages, in a browser -------------------------------------------------------------------


def test_an_article_page_shows_its_body_once_with_its_headings(page, library):
    doc = article_with_overlap(library)
    page.goto(f"{page.base}/doc/jawiki/{doc['doc_id']}")
    assert page.locator("h1#doc-title").inner_text() == doc["title"]
    text = page.locator("article.doc").inner_text()
    assert "##" not in text and "<!--" not in text
    headings = page.eval_on_selector_all(
        "section.body :is(h2, h3, h4, h5, h6)", "els => els.map(e => [e.localName, e.innerText])"
    )
    assert [tuple(h) for h in headings] == wiki_headings(doc["body"])
    assert {"h2", "h3"} <= {h[0] for h in headings}
    # every paragraph of the stored body exactly as often as it is stored: the chunks'
    # repeated passages are not shown again, and the opening (the lead) stands once, in its box
    shown = page_parts(page, "section.opening p") + page_parts(page, "section.body p")
    assert Counter(map(squeeze, shown)) == Counter(wiki_paragraphs(doc["body"]))
    lead = squeeze(doc["opening"].split("\n")[0])
    assert squeeze(text).count(lead) == 1 and lead in page.locator("section.opening").inner_text()


def test_a_book_chapter_shows_no_comment_and_its_headings(page, library):
    doc = chapter_with_comments(library)
    headings, english = markdown_lines(doc["body"])
    assert english, "the chapter keeps its English original in comments"
    page.goto(f"{page.base}/doc/rustbook/{doc['doc_id']}")
    text = page.locator("article.doc").inner_text()
    assert "<!--" not in text and "<span" not in text
    prose = "\n".join(page_parts(page, "section.body > :not(pre)"))  # code may print "-->"
    assert "-->" not in prose
    assert not [line for line in english if squeeze(line) in squeeze(text)]  # the original
    shown = page_parts(page, "section.body :is(h1, h2, h3, h4, h5, h6)")
    assert len(shown) == len(headings) and not [h for h in shown if h.startswith("#")]
    assert page.locator("section.body h2").count() and page.locator("section.body h3").count()
    long_paragraphs = [p for p in map(squeeze, page_parts(page, "section.body p")) if len(p) > 40]
    assert len(long_paragraphs) == len(set(long_paragraphs))  # nothing shown twice
    first_sentence = re.sub(r"[`*\s]", "", doc["opening"]).split("。")[0]
    assert re.sub(r"\s", "", text).count(first_sentence) == 1  # the opening once


def test_search_snippets_are_plain_text_that_marks_the_words(page, library):
    word = filename_label(library)
    page.goto(f"{page.base}/?source=rustbook&q={word}")
    snippets = page.locator("li.hit p.snippet")
    assert snippets.count() >= 3
    for i in range(snippets.count()):
        snippet = snippets.nth(i)
        assert_plain(snippet.inner_text())
        assert word in snippet.locator("mark").all_inner_texts()


# -- snippets in the API -------------------------------------------------------------------------


def test_api_snippets_of_tables_and_tags_are_plain_text(web, library):
    conn = library.library.get("rustbook").conn
    body = conn.execute(
        "SELECT body FROM docs WHERE body LIKE '%' || char(10) || '|%' ORDER BY doc_id LIMIT 1"
    ).fetchone()[0]
    row = next(
        line
        for line in body.splitlines()
        if line.startswith("|") and "-|-" not in line and "`" not in line
    )
    cell = max((c.strip() for c in row.strip("|").split("|")), key=len)  # a table cell's words
    for query in (cell, filename_label(library)):
        for path in ("/v1/rustbook/search", "/v1/search"):  # one source; every source, fused
            hits = web.get(path, params={"q": query}).json()["hits"]
            assert any(hit["source"] == "rustbook" for hit in hits), (path, query)
            for hit in hits:
                assert_plain(hit["snippet"])
            assert any(query in hit["snippet"] for hit in hits)


def assert_plain(snippet: str) -> None:
    assert len(snippet) <= SNIPPET_CHARS + 2  # its width, and a "…" either side
    assert not re.search(r"<!--|-->|</?[a-z]+[ >]|`|\||(^|\s)#{1,6}\s|-{3,}", snippet), snippet


# -- converted files and place tables (issue 31) -----------------------------------------------


def doc_id_of(service: Context, source: str, key: str) -> int:
    conn = service.library.get(source).conn
    return conn.execute("SELECT doc_id FROM docs WHERE key = ?", (key,)).fetchone()[0]


def page_of(web, source: str, doc_id: int):
    """The page's article, a line break the page shows as a newline of its text."""
    import lxml.html

    response = web.get(f"/doc/{source}/{doc_id}")
    assert response.status_code == 200
    article = lxml.html.fromstring(response.text).xpath("//article")[0]
    for br in article.iter("br"):
        br.tail = "\n" + (br.tail or "")
    return article


def shown_lines(article) -> list[str]:
    """The lines of the page's opening and body, as a reader sees them."""
    blocks = article.xpath(
        ".//section[contains(@class, 'body') or @class = 'opening']"
        "/*[self::p or self::h2 or self::h3 or self::h4 or self::h5 or self::h6]"
    )
    return [line.strip() for block in blocks for line in block.text_content().splitlines()]


def test_a_pdf_page_shows_its_pages_as_headings_and_its_lines(web, library):
    doc = stored(library, "pdf", doc_id_of(library, "pdf", "kampo.pdf"))
    article = page_of(web, "pdf", doc["doc_id"])
    assert article.xpath(".//section[contains(@class, 'body')]/h2/text()") == ["p. 1"]
    lines = shown_lines(article)
    assert not [line for line in lines if line.startswith("#")]
    # the page's lines as the PDF sets them, a word across a touching glyph unbroken
    assert "第一条の二第四項第三号中「一・五メートル」を「一メートル」に改め、" in "\n".join(lines)
    assert "政令第百四十九号" in lines and "道路交通法施行令の一部を改正する政令" in lines
    # the first paragraph is the body's, under its page heading: no box repeats it
    assert not article.xpath(".//section[@class = 'opening']")
    assert "".join(article.text_content().split()).count("政令第百四十九号") == 1


def test_a_word_file_shows_its_title_and_first_paragraph_once(web, library):
    doc = stored(library, "office", doc_id_of(library, "office", "markitdown-test.docx"))
    article = page_of(web, "office", doc["doc_id"])
    assert article.xpath(".//h1/text()") == [doc["title"]]
    headings = article.xpath(".//section[contains(@class, 'body')]/*[self::h2 or self::h3]")
    assert headings and doc["title"] not in [h.text_content() for h in headings]
    text = "".join(article.text_content().split())
    assert text.count("".join(doc["opening"].split())) == 1  # the authors' line
    assert not [line for line in shown_lines(article) if line.startswith("#")]


def test_a_sheet_and_a_csv_show_rows_under_their_labels_once(web, library):
    for key in ("markitdown-test.xlsx#Sheet1", "markitdown-test_mskanji.csv"):
        doc = stored(library, "office", doc_id_of(library, "office", key))
        article = page_of(web, "office", doc["doc_id"])
        assert article.xpath(".//section[contains(@class, 'body')]/h2/text()")[0].startswith(
            "rows 2–"
        )
        rows = page_parts_of(article, "section.body p")
        assert rows[0] == "\n".join(doc["body"].split("\n\n")[1].splitlines())
        assert "".join(article.text_content().split()).count("".join(rows[0].split())) == 1
    assert doc["title"] == "markitdown-test mskanji"


def test_a_place_page_reads_as_labelled_facts(web, library):
    doc = stored(library, "aed", 1)
    article = page_of(web, "aed", doc["doc_id"])
    body = page_parts_of(article, "section.body p")
    assert body == [doc["body"]]  # one fact a line, none a row's number
    assert not [line for line in body[0].splitlines() if not re.match(r"[^#\s][^:]*: ", line)]


def test_a_book_section_label_reads_as_text(library):
    conn = library.library.get("rustbook").conn
    labels = [r[0] for r in conn.execute("SELECT DISTINCT heading_path FROM chunks")]
    ruby = [label for label in labels if "ユニット" in label and "構造体" in label]
    assert ruby and all(re.search(r"ユニット様構造体$", label) for label in ruby)
    assert not [label for label in labels if re.search(r"<(ruby|rt|rp|span)\b", label)]


def page_parts_of(article, selector: str) -> list[str]:
    from lxml.cssselect import CSSSelector

    return [e.text_content().strip() for e in CSSSelector(selector)(article)]


def test_a_first_heading_that_is_the_title_is_not_shown_again():
    from chiezo.surfaces.web.document_pages import body_parts

    doc = {
        "source": "wiki",
        "key": "A/Ray_Charles",
        "title": "Ray Charles",
        "opening": "An American singer.",
        "body": "# Ray Charles\n\nAn American singer.\n\n## Life\n\nBorn in 1930.",
        "extra": {"format": "zim"},
    }
    parts = body_parts(doc, headed=False)
    assert parts["opening"] == []  # the lead stands where the body has it
    assert [(s["heading"], s["paragraphs"]) for s in parts["sections"]] == [
        ("", ["An American singer."]),
        ("Life", ["Born in 1930."]),
    ]
    plain = body_parts({**doc, "extra": {"format": "text"}}, headed=False)
    assert plain["sections"][0]["paragraphs"][0] == "# Ray Charles"  # a text file's own #


def test_a_markdown_page_joins_a_japanese_line_wrap_without_a_space():
    from chiezo.surfaces.web.markdown_view import render_markdown

    html = str(
        render_markdown(
            "所有権は\nRustの特徴です。\n日本語の\n文です。\nAn English\nline.", "s", "k"
        )
    )
    assert "日本語の文です。" in html  # a browser draws a newline as a space
    assert "An English\nline." in html and "所有権は\nRust" in html
