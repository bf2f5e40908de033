"""Kiwix ZIM files (tests/data/zim): both namespace schemes, redirects as aliases,
metadata, the ray-charles file's searches, and the text stored for an article's HTML
(ingest/htmltext.py: words kept apart, hidden parts out, infobox rows, the title once)."""

import mmap
import shutil
from pathlib import Path

import pytest

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, InputError
from chiezo.ingest import zim
from chiezo.ingest.htmltext import page_text
from chiezo.ingest.zimdirectory import Directory, cluster_order
from chiezo.ingest.zimscan import scan
from chiezo.ops import building, operating, reading, searching
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest, SearchRequest

from helpers import data_file

RAY = "zim/libkiwix_zimfile_raycharles.zim"


@pytest.fixture(scope="module")
def zims(tmp_path_factory):
    service = Context(Settings(data_dir=tmp_path_factory.mktemp("zim") / "data"))
    report = building.ingest(service, "zim", data_file(RAY), None)
    return service, report


@pytest.mark.slow
def test_every_article_becomes_a_document(zims):
    service, report = zims
    # 129 HTML articles, two of them redirects rendered as copies of their target
    assert report.name == "zim_wikipedia_en_ray_charles" and report.docs == 127
    (info,) = [s for s in operating.sources(service) if s["name"] == report.name]
    assert info["kind"] == "zim" and info["language"] == "eng"


def test_ray_charles_comes_first_and_piano_finds_his_music(zims):
    service, report = zims
    first = searching.search(
        service, SearchRequest.of(query="Ray Charles", source=report.name)
    ).hits[0]
    assert first.title == "Ray Charles" and first.title_match
    assert first.source_url == "A/Ray_Charles"  # what the ZIM stores: the entry's path
    piano = searching.search(service, SearchRequest.of(query="piano", source=report.name, limit=50))
    assert piano.total >= 5 and "Ray Charles" in {h.title for h in piano.hits}
    for hit in piano.hits[:5]:  # relevant: each really mentions the piano
        body = reading.doc(
            service, DocRequest.of(source=report.name, doc_id=hit.doc_id, fields=["body"])
        )["body"]
        assert "piano" in body.lower()


def test_redirects_are_aliases_and_links_are_titles(zims):
    service, report = zims
    doc = reading.doc(
        service,
        DocRequest.of(
            source=report.name, title="Ray Charles", fields=["aliases", "links", "opening"]
        ),
    )
    assert "Ray Charles Robinson" in " ".join(doc["aliases"]) or len(doc["aliases"]) > 3
    assert "Georgia on My Mind" in doc["links"]
    assert doc["opening"].startswith("Ray Charles Robinson")
    # an alias finds the article as a title match
    alias = doc["aliases"][0]
    assert (
        searching.search(service, SearchRequest.of(query=alias, source=report.name)).hits[0].title
        == "Ray Charles"
    )


def test_a_redirect_rendered_as_a_copy_is_an_alias_not_a_second_document(zims):
    # A/The_Pages_of_My_Mind is an HTML page titled "Ray Charles" with the article's very text
    service, report = zims
    found = searching.search(
        service, SearchRequest.of(query="Ray Charles", source=report.name, limit=50)
    )
    assert [h.title for h in found.hits].count("Ray Charles") == 1
    assert found.hits[0].source_url == "A/Ray_Charles"
    doc = reading.doc(
        service, DocRequest.of(source=report.name, title="Ray Charles", fields=["aliases"])
    )
    assert "The Pages of My Mind" in doc["aliases"]
    pages = searching.search(
        service, SearchRequest.of(query="The Pages of My Mind", source=report.name)
    )
    assert pages.hits[0].source_url == "A/Ray_Charles" and pages.hits[0].title_match
    # a copy titled as an article this file does not have stays a document
    assert reading.doc(
        service, DocRequest.of(source=report.name, title="Big Baby DRAM", fields=["source_url"])
    )["source_url"] == ("A/Cash_Machine_(D.R.A.M._song)")


@pytest.mark.slow
def test_a_folder_of_zim_files_is_a_library_of_sources_built_incrementally(tmp_path):
    library = tmp_path / "kiwix"
    library.mkdir()
    for name in (RAY, "zim/wikibooks_be_all_nopic_2017-02_nons.zim"):
        shutil.copy(data_file(name), library / Path(name).name)
    (library / "notes.txt").write_text("not a ZIM: left alone")
    service = Context(Settings(data_dir=tmp_path / "data"))
    built = dict(building.ingest_each(service, "zim", [library]))
    assert set(built) == {"zim_wikipedia_en_ray_charles", "zim_kiwix_wikibooks_be_all"}
    assert all(report is not None for report in built.values())
    again = dict(building.ingest_each(service, "zim", [library]))
    assert again == dict.fromkeys(built)  # unchanged files: skipped, nothing rebuilt
    # the other Wikibooks file, same name on disk, another ZIM: that source alone is rebuilt
    shutil.copy(
        data_file("zim/wikibooks_be_all_nopic_2017-02_withns.zim"),
        library / Path("wikibooks_be_all_nopic_2017-02_nons.zim"),
    )
    third = dict(building.ingest_each(service, "zim", [library]))
    assert third["zim_wikipedia_en_ray_charles"] is None
    assert third["zim_kiwix_wikibooks_be_all"] is not None
    about = {i["name"]: i["about"] for i in operating.sources(service)}
    assert about["zim_wikipedia_en_ray_charles"] == (
        "Ray Charles · eng · 2020-03-31 · 129 articles (Wikipedia articles about Ray Charles)"
    )
    # two files that would be one source, or one --name for several: refused before a build
    shutil.copy(data_file("zim/wikibooks_be_all_nopic_2017-02_nons.zim"), library / "b.zim")
    with pytest.raises(BadQuery, match="would all be source zim_kiwix_wikibooks_be_all"):
        list(building.ingest_each(service, "zim", [library]))
    with pytest.raises(BadQuery, match="--name names one source"):
        list(building.ingest_each(service, "zim", [library], "mine"))
    with pytest.raises(BadQuery, match="make 3 zim sources"):
        building.ingest(service, "zim", library)
    with pytest.raises(InputError, match="no .zim file"):
        list(building.ingest_each(service, "zim", [tmp_path / "data"]))


@pytest.mark.slow
@pytest.mark.parametrize(
    "file", ["wikibooks_be_all_nopic_2017-02_nons.zim", "wikibooks_be_all_nopic_2017-02_withns.zim"]
)
def test_both_namespace_schemes_build(tmp_path, file):
    service = Context(Settings(data_dir=tmp_path / "data"))
    report = building.ingest(service, "zim", data_file(f"zim/{file}"), "books")
    assert report.docs == 66
    assert (
        searching.search(service, SearchRequest.of(query="Першая старонка", source="books"))
        .hits[0]
        .title
        == "Першая старонка"
    )


def _zim_written_in_order(path: Path, names: list[str]) -> Path:
    """A ZIM whose pages are added in the order given, in clusters of about one page."""
    from libzim.writer import Creator, Hint, StringProvider
    from libzim.writer import Item as ZimItem

    class Page(ZimItem):
        def __init__(self, name: str) -> None:
            super().__init__()
            self.name = name

        def get_path(self):
            return f"A/{self.name}"

        def get_title(self):
            return self.name

        def get_mimetype(self):
            return "text/html"

        def get_contentprovider(self):
            return StringProvider(f"<html><body><p>{self.name} {'本文' * 600}</p></body></html>")

        def get_hints(self):
            return {Hint.FRONT_ARTICLE: True, Hint.COMPRESS: True}

    with Creator(str(path)).config_indexing(False, "eng").config_clustersize(1024) as creator:
        for name in names:
            creator.add_item(Page(name))
    return path


def test_articles_are_read_cluster_by_cluster(tmp_path):
    # added Page_9 … Page_0: path order is the reverse of the clusters' order, as a real
    # ZIM's path order runs across its clusters (design.md §35.17)
    names = [f"Page_{i}" for i in reversed(range(10))]
    file = _zim_written_in_order(tmp_path / "order.zim", names)
    archive = zim.open_archive(file)
    with scan(archive) as scanned:
        in_clusters = cluster_order(file, archive, scanned.articles)
    assert in_clusters is not None
    assert [archive._get_entry_by_id(int(i)).path for i in in_clusters] == [f"A/{n}" for n in names]


@pytest.mark.parametrize("file", sorted(p.name for p in data_file("zim").glob("*.zim")))
def test_the_directory_read_directly_agrees_with_libzim_on_every_entry(file):
    path = data_file(f"zim/{file}")
    archive = zim.open_archive(path)
    with path.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
        directory = Directory.read(view)
        start = directory.user_start(archive)
        assert start is not None
        for i in range(archive.entry_count):
            assert directory.path(start + i) == archive._get_entry_by_id(i).path
    with scan(archive) as scanned:
        ordered = cluster_order(path, archive, scanned.articles)
        assert sorted(ordered.tolist()) == sorted(scanned.articles)


def test_a_directory_that_does_not_agree_with_libzim_is_read_in_id_order(tmp_path):
    good = data_file(f"zim/{RAY.split('/')[1]}")
    archive = zim.open_archive(good)
    data = bytearray(good.read_bytes())
    data[4] = 9  # another major version: not a layout this reader knows
    other = tmp_path / "other.zim"
    other.write_bytes(bytes(data))
    assert cluster_order(other, archive, [0, 1]) is None
    with other.open("rb") as fh, mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as view:
        assert Directory.read(view) is None


def test_a_file_that_is_not_a_zim_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.zim"
    bad.write_bytes(b"not a zim file at all")
    with pytest.raises(InputError, match="not a readable ZIM"):
        building.ingest(Context(Settings(data_dir=tmp_path / "data")), "zim", bad, "bad")


# -- the stored text: words apart, hidden parts out, the title said once (issue 31) ----------


def test_ray_charles_infobox_reads_label_value_lines_with_nothing_glued(zims):
    service, report = zims
    doc = reading.doc(
        service, DocRequest.of(source=report.name, title="Ray Charles", fields=["body", "opening"])
    )
    body = doc["body"]
    assert "Occupation(s): musician, singer, songwriter, composer" in body.splitlines()
    assert "Born: September 23, 1930; Albany, Georgia, U.S." in body.splitlines()
    assert "Died: June 10, 2004 (aged 73); Beverly Hills, California, U.S." in body.splitlines()
    # the hidden ISO dates are left out, the list and the cells are not glued
    for glued in ("(1930-09-23)", "(2004-06-10)", "musiciansinger", "1930Albany", "R&Bsoul"):
        assert glued not in body
    # the title is the document's, not a "# Ray Charles" line; the body opens with the lead
    assert not any(
        line.lstrip("#").strip() == "Ray Charles"
        for line in body.splitlines()
        if line.startswith("#")
    )
    assert body.startswith(doc["opening"].removesuffix("…"))


def test_sections_are_headings_under_the_title_in_a_wikibooks_zim():
    archive = zim.open_archive(data_file("zim/wikibooks_be_all_nopic_2017-02_nons.zim"))
    with scan(archive) as scanned:
        doc = zim._doc(archive.get_entry_by_path("Кава.html"), scanned)
    assert doc is not None and doc.title == "Кава"
    lines = doc.body.splitlines()
    assert "## Інгрэдыенты" in lines and "- 400 гр. вады" in lines
    assert "# Кава" not in lines
    # the footer Kiwix marks htdig_noindex ("This article is issued from Wikibooks…") is out
    assert "issued from" not in doc.body
    assert doc.opening.startswith("Кава — напой")
    # breadcrumbs start with the title, as they did when the body had the <h1>
    paths = [c.heading_path for c in doc.chunks]
    assert "Кава > Інгрэдыенты" in paths and all(p.startswith("Кава") for p in paths)
    # the doc page shows the "## " lines as headings
    assert zim.SOURCE_KIND.capabilities.headed_pages


def test_block_and_cell_boundaries_keep_words_apart_and_inline_elements_do_not():
    text = page_text(
        "<body><div>alpha</div><div>beta<br>gamma</div><p>Ge<b>or</b><a href='x'>gia</a>"
        "<span>n</span></p><ul><li>one</li><li>two<ul><li>two.a</li></ul></li></ul>"
        "<dl><dt>term</dt><dd>meaning</dd></dl><figure><img src=x><figcaption>cap"
        "</figcaption></figure>tail<h2>Section</h2>after<ol><li>first</li><li>second</li></ol>"
        "</body>"
    ).text
    assert text.split("\n\n") == [
        "alpha",
        "beta\ngamma",
        "Georgian",
        "- one\n- two\n  - two.a",
        "term",
        "meaning",
        "cap",
        "tail",
        "## Section",
        "after",
        "1. first\n2. second",
    ]


def test_hidden_parts_are_left_out_rather_than_glued():
    page = page_text(
        "<html><head><title>T</title><style>.x{color:red}</style></head><body>"
        "<h2>Life<span class='mw-editsection'>[<a href='e'>edit</a>]</span></h2>"
        "<p>Born<span style='display: none'>(<span class='bday'>1930-09-23</span>)</span>"
        " in 1930.<sup id='cite_ref-1'><a href='#cite_note-1'>[1]</a></sup>"
        "<script>var hidden = 1;</script> Then<span hidden>secret</span> more.</p>"
        "<table class='navbox'><tr><td><a href='Other'>Other</a> · Another</td></tr></table>"
        "<ol class='references'><li id='cite_note-1'><a href='#cite_ref-1'>↑</a> A source."
        "</li></ol></body></html>"
    )
    assert page.text == "## Life\n\nBorn in 1930. Then more.\n\n1. A source."
    assert "Other" in page.links  # the navbox's text is out, its links still link the page


def test_infobox_rows_read_label_value_and_list_cells_comma_separated():
    text = page_text(
        "<table class='infobox vcard'><tr><th colspan=2>Someone</th></tr>"
        "<tr><th>Born</th><td><span style='display:none'>(1930-09-23)</span>"
        "September 23, 1930<br>Albany, Georgia</td></tr>"
        "<tr><th>Occupation</th><td><div class='hlist'><ul><li>musician</li><li>singer</li>"
        "</ul></div></td></tr><tr><th>Writers</th><td>A (music)<br>B (lyrics)</td></tr>"
        "<tr><th>Label</th><td>Atlantic</td><td>ABC</td></tr></table>"
    ).text
    assert text.splitlines() == [
        "Someone",
        "Born: September 23, 1930; Albany, Georgia",
        "Occupation: musician, singer",
        "Writers: A (music), B (lyrics)",
        "Label: Atlantic | ABC",
    ]


def test_a_table_with_a_header_row_reads_one_record_per_row():
    text = page_text(
        "<table class='wikitable'><caption>Charts</caption>"
        "<tr><th>Year</th><th>Chart</th><th>Peak<br>position</th></tr>"
        "<tr><td rowspan=2>1960</td><td>Hot 100</td><td>1</td></tr>"
        "<tr><td>R&amp;B</td><td>3</td></tr>"
        "<tr><td colspan=3>Only the US charts</td></tr></table>"
    ).text
    assert text.split("\n\n") == [
        "Charts",
        "Year: 1960\nChart: Hot 100\nPeak position: 1",
        "Year: 1960\nChart: R&B\nPeak position: 3",
        "Only the US charts",
    ]


def test_nested_and_layout_tables_read_as_text():
    nested = page_text(
        '<table><tr><th>Chronology</th><td><table><tr><td>"A"<br>(1959)</td>'
        '<td>"B"<br>(1960)</td></tr></table></td></tr></table>'
    ).text
    assert nested == 'Chronology: "A" (1959) | "B" (1960)'
    layout = page_text(
        "<table><tr><td><h2>Welcome</h2><p>First paragraph.</p><p>Second one.</p></td>"
        "<td><h3>News</h3><ul><li>item</li></ul></td></tr></table>"
    ).text
    assert layout.split("\n\n") == [
        "## Welcome",
        "First paragraph.",
        "Second one.",
        "### News",
        "- item",
    ]


def test_only_the_h1_that_repeats_the_title_is_left_out():
    assert page_text("<h1>Ray Charles</h1><p>He sang.</p>", "Ray Charles").text == "He sang."
    assert page_text("<h1>ray_charles</h1><p>He sang.</p>", "Ray Charles").text == "He sang."
    # a <title> that names the site after the page's own
    named = page_text(
        "<title>Offline Wikipedia - Wikibooks, open books</title><h1>Offline Wikipedia</h1>"
        "<p>Text.</p><h1>Part two</h1><p>More.</p>"
    )
    assert named.title == "Offline Wikipedia - Wikibooks, open books"
    assert named.text == "Text.\n\n# Part two\n\nMore."


def test_the_lead_comes_before_an_infobox_set_before_it():
    text = page_text(
        "<table class='infobox'><tr><th>Genre</th><td>Jazz</td></tr></table>"
        "<p>The song is a standard.</p><h2>History</h2><table><tr><th>A</th><td>B</td></tr>"
        "</table><p>Later.</p>"
    ).text
    assert text.split("\n\n") == [
        "The song is a standard.",
        "Genre: Jazz",
        "## History",
        "A: B",
        "Later.",
    ]


def test_the_kiwix_footer_is_left_out_marked_or_not():
    footer = (
        "<div><div style='clear:both'>This article is issued from <a class='external text' "
        "href='http://en.wikipedia.org/wiki/X?oldid=1'>Wikipedia</a>. The text is under "
        "<a href='http://creativecommons.org/licenses/by-sa/3.0/'>CC BY-SA</a>.</div></div>"
    )
    assert page_text(f"<body><p>Article.</p>{footer}</body>").text == "Article."
    marked = f"<body><p>Article.</p><!--htdig_noindex-->{footer}<!--/htdig_noindex--></body>"
    assert page_text(marked).text == "Article."
    # a page that marks its footer keeps a last paragraph of outside links of its own
    own = "<div>See <a href='http://a.example'>a</a> and <a href='http://b.example'>b</a>.</div>"
    assert page_text(marked.replace("</body>", own + "</body>")).text.endswith("See a and b.")


def test_lines_that_would_read_as_markdown_stay_text_and_code_is_fenced():
    text = page_text(
        "<p># of votes</p><p>---</p><pre>#include &lt;stdio.h&gt;\n\nint main() {}</pre>"
    ).text
    assert text == "\\# of votes\n\n\\---\n\n```\n#include <stdio.h>\n\nint main() {}\n```"


@pytest.mark.parametrize(
    ("markup", "expected"),
    [
        ("", ""),
        ("   ", ""),
        ("<!-- only a comment -->", ""),
        ("plain text with <b>no</b> blocks", "plain text with no blocks"),
        ("<p>unclosed <i>italic <div>and a div", "unclosed italic\n\nand a div"),
        ("<table><tr><td>cell<td>next</table>", "cell | next"),
        ("<td>stray</td><tr>rows</tr>", "stray\n\nrows"),
        ("<?xml version='1.0' encoding='UTF-8'?><html><body><p>xhtml</p></body></html>", "xhtml"),
        ("<div>" * 3000 + "deep" + "</div>" * 3000, "deep"),
        ("<table><tr><td colspan='x' rowspan='-3'>odd spans</td></tr></table>", "odd spans"),
        ("<p>a NUL \x00 and \ufffd</p>", "a NUL \ufffd and \ufffd"),
    ],
)
def test_broken_or_unstructured_html_degrades_to_prose(markup, expected):
    assert page_text(markup).text == expected
