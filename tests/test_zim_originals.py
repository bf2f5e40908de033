"""A ZIM source's articles as Kiwix shows them (surfaces/web/archive_pages.py): the article's
HTML from the file, its picture and style resolved inside the same file, redirects followed —
and, as an attacker would try it, a ZIM whose page and SVG carry scripts that would write a
note through the API: served sandboxed, in a real Chromium, nothing runs."""

from __future__ import annotations

import shutil
import struct
import zlib
from pathlib import Path

import httpx
import pytest

from chiezo.core.config import Settings
from chiezo.ops import building, reading
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest
from chiezo.surfaces.rest import create_app
from chiezo.surfaces.web.archive_pages import ARCHIVE_SANDBOX

from helpers import (
    BOOK_FILES,
    SCREENSHOTS,
    RunningServer,
    browser_page,
    build_docs,
    chromium,
    write_files,
)

WRITES_A_NOTE = (
    "fetch('/v1/notes', {method: 'POST', headers: {'content-type': 'application/json'},"
    " body: JSON.stringify({text: 'written by a zim page'})});"
)
OFFER = (
    "<html><head><title>Offer</title>"
    '<link rel="stylesheet" href="../-/style.css"></head><body>'
    "<h1>Offer</h1><p>Everything half price in the archive shop.</p>"
    '<img id="pic" src="../I/dot.png" alt="a dot">'
    '<p><a id="other" href="Other">the other page</a></p>'
    f"<script>document.title = 'ran'; {WRITES_A_NOTE}</script>"
    '<img src="missing" onerror="document.title = \'ran\'"></body></html>'
)
OTHER = (
    "<html><head><title>Other</title></head><body><h1>Other</h1>"
    "<p>The other page of the archive shop.</p></body></html>"
)
EVIL_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
    f"<script>{WRITES_A_NOTE}</script></svg>"
)


def png_dot() -> bytes:
    """A 1×1 PNG, written out here (a real image a browser decodes)."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        body = kind + data
        return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\xff\x00\x00")
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")
    )


def make_zim(path: Path) -> Path:
    from libzim.writer import Creator, Hint, Item, StringProvider

    class Entry(Item):
        def __init__(self, path: str, title: str, mimetype: str, content: str | bytes):
            super().__init__()
            self.path, self.title, self.mimetype, self.content = path, title, mimetype, content

        def get_path(self) -> str:
            return self.path

        def get_title(self) -> str:
            return self.title

        def get_mimetype(self) -> str:
            return self.mimetype

        def get_contentprovider(self):
            return StringProvider(self.content)

        def get_hints(self):
            return {Hint.FRONT_ARTICLE: self.mimetype == "text/html"}

    with Creator(str(path)).config_indexing(False, "eng") as creator:
        creator.set_mainpath("A/Offer")
        for name, value in (("Title", "Archive shop"), ("Name", "shop"), ("Language", "eng")):
            creator.add_metadata(name, value)
        for entry in (
            Entry("A/Offer", "Offer", "text/html", OFFER),
            Entry("A/Other", "Other", "text/html", OTHER),
            Entry("-/style.css", "", "text/css", "h1 { color: rgb(1, 2, 3); }"),
            Entry("I/dot.png", "", "image/png", png_dot()),
            Entry("I/evil.svg", "", "image/svg+xml", EVIL_SVG),
        ):
            creator.add_item(entry)
        creator.add_redirection("A/Old_Offer", "Old Offer", "A/Offer", {Hint.FRONT_ARTICLE: True})
        creator.add_redirection(  # a chain: answered with one redirect to its end
            "A/Oldest_Offer", "Oldest Offer", "A/Old_Offer", {Hint.FRONT_ARTICLE: True}
        )
    return path


@pytest.fixture(scope="module")
def shop(tmp_path_factory):
    root = tmp_path_factory.mktemp("zim_originals")
    zim = make_zim(root / "shop.zim")
    settings = Settings(data_dir=root / "data")
    service = Context(settings)
    report = building.ingest(service, "zim", zim, None)
    build_docs(service, write_files(root / "book", BOOK_FILES), "book")
    with RunningServer(create_app(settings)) as server:
        yield {"url": server.url, "source": report.name, "zim": zim, "service": service}


def test_an_article_its_picture_and_style_come_from_the_archive(shop):
    base = f"{shop['url']}/doc/{shop['source']}/archive"
    page = httpx.get(f"{base}/A/Offer")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert page.headers["content-security-policy"] == ARCHIVE_SANDBOX
    assert page.headers["x-content-type-options"] == "nosniff"
    assert "<h1>Offer</h1>" in page.text
    assert httpx.get(f"{base}/-/style.css").headers["content-type"].startswith("text/css")
    picture = httpx.get(f"{base}/I/dot.png")
    assert picture.content == png_dot() and picture.headers["content-type"] == "image/png"
    for old in ("A/Old_Offer", "A/Oldest_Offer"):
        moved = httpx.get(f"{base}/{old}")
        assert moved.status_code == 302 and moved.headers["location"].endswith("/archive/A/Offer")
    missing = httpx.get(f"{base}/A/Nothing_here")
    assert missing.status_code == 404 and "no entry" in missing.text


def test_the_document_page_and_the_search_link_the_article_as_the_archive_shows_it(shop):
    source = shop["source"]
    found = httpx.get(f"{shop['url']}/", params={"q": "archive shop", "source": source})
    assert f'href="/doc/{source}/archive/A/Offer"' in found.text
    service = shop["service"]
    doc_id = reading.doc(service, DocRequest.of(source=source, title="Offer", fields=["doc_id"]))[
        "doc_id"
    ]
    page = httpx.get(f"{shop['url']}/doc/{source}/{doc_id}")
    assert f'class="original" href="/doc/{source}/archive/A/Offer"' in page.text
    assert (
        "Old Offer"
        in reading.doc(service, DocRequest.of(source=source, title="Offer", fields=["aliases"]))[
            "aliases"
        ]
    )
    admin = httpx.get(f"{shop['url']}/admin")  # what the file says of itself, under its input
    assert "Archive shop · eng · " in admin.text


def test_a_citation_opens_the_article_or_has_no_link_without_a_server(shop):
    service = shop["service"]
    source = shop["source"]
    doc = reading.doc(
        service,
        DocRequest.of(source=source, title="Offer", fields=["doc_id", "key", "url", "source_url"]),
    )
    link, cite = service.reference_link(source, doc["doc_id"], doc["key"], doc["source_url"])
    # no server known to this process: no link (a file and an entry were none; issue #44)
    assert link is None and doc["url"] is None and cite == f"{source}:A/Offer"
    served = Context(Settings(data_dir=service.settings.data_dir, public_url=shop["url"]))
    link, _ = served.reference_link(source, doc["doc_id"], doc["key"], doc["source_url"])
    assert link == f"{shop['url']}/doc/{source}/archive/A/Offer"  # the server's


def test_only_the_recorded_unchanged_archive_of_an_archive_source_is_served(shop, tmp_path):
    url, source = shop["url"], shop["source"]
    book = httpx.get(f"{url}/doc/book/archive/guide.md")
    assert book.status_code == 404 and "not built from an archive" in book.text
    assert httpx.get(f"{url}/doc/no_such_source/archive/A/Offer").status_code == 404
    for hostile in ("../../etc/passwd", "/etc/passwd", "A/Offer%00.png"):
        answer = httpx.get(f"{url}/doc/{source}/archive/{hostile}")
        assert answer.status_code == 404, hostile
    zim, kept = shop["zim"], tmp_path / "kept.zim"
    shutil.copy(zim, kept)
    try:
        with zim.open("ab") as grown:
            grown.write(b"\0")
        changed = httpx.get(f"{url}/doc/{source}/archive/A/Offer")
        assert changed.status_code == 404 and "changed since" in changed.text
        zim.unlink()
        gone = httpx.get(f"{url}/doc/{source}/archive/A/Offer")
        assert gone.status_code == 404 and "not there any more" in gone.text
    finally:
        shutil.copy(kept, zim)
    assert httpx.get(f"{url}/doc/{source}/archive/A/Offer").status_code == 200


@pytest.mark.slow
def test_in_chromium_the_article_shows_its_picture_and_style_and_no_script_runs(shop):
    source = shop["source"]
    with chromium() as browser:
        page = browser_page(browser, shop["url"])
        doc_id = reading.doc(
            shop["service"], DocRequest.of(source=source, title="Offer", fields=["doc_id"])
        )["doc_id"]
        page.goto(f"{page.base}/doc/{source}/{doc_id}")
        page.locator("a.original").click()
        page.wait_for_selector("h1")
        page.wait_for_function("document.getElementById('pic').complete")
        assert page.evaluate("document.getElementById('pic').naturalWidth") == 1  # the picture
        color = page.evaluate("getComputedStyle(document.querySelector('h1')).color")
        assert color == "rgb(1, 2, 3)"  # the archive's own style
        page.wait_for_timeout(500)  # time enough for its fetch, had a script run
        assert page.title() == "Offer"  # neither the script nor the onerror handler ran
        page.screenshot(path=str(SCREENSHOTS / "zim-original.png"), full_page=True)
        page.locator("#other").click()  # a link inside the archive stays inside it
        page.wait_for_selector("h1:text('Other')")
        assert page.url.endswith(f"/doc/{source}/archive/A/Other")
        page.goto(f"{page.base}/doc/{source}/archive/I/evil.svg")  # opened on its own
        page.wait_for_timeout(500)
        page.context.close()
    notes = httpx.get(f"{shop['url']}/v1/notes/recall", params={"q": "zim page"}).json()
    assert notes["total"] == 0
