"""Entries of a ZIM whose paths hold dot segments (``A/../../etc/passwd``, ``..``, ``A/./b``):
the links Chiezo writes to them (the document page's "Original", a search hit, a redirect's
Location) survive a browser's resolution — WHATWG URL, which also reads ``%2e`` as a dot — and
reach that very entry; and a request spelt with dot segments never reads past the archive."""

from __future__ import annotations

import http.client
import re
from html import unescape
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import httpx
import pytest

from chiezo.core.config import Settings
from chiezo.ops import building, reading
from chiezo.ops.context import Context
from chiezo.ops.requests import DocRequest
from chiezo.surfaces.rest import create_app

from helpers import RunningServer, browser_page, chromium, zim_page

# entry path → (title, a sentence only that entry holds)
DOTTED = {
    "A/../../etc/passwd": ("Climbing entry", "The entry whose path climbs twice."),
    "..": ("Parent entry", "The entry named by two dots alone."),
    "A/./here": ("Dot entry", "The entry with a single dot inside its path."),
}
SECRET = "a file beside the archive, never served"


def make_zim(path: Path) -> Path:
    from libzim.writer import Creator, Hint

    def page(entry: str, title: str, text: str):
        return zim_page(entry, title, f"<html><body><h1>{title}</h1><p>{text}</p></body>")

    with Creator(str(path)).config_indexing(False, "eng") as creator:
        creator.add_metadata("Name", "dots")
        creator.add_item(page("A/Start", "Start", "The first page of the dotted archive."))
        for entry, (title, text) in DOTTED.items():
            creator.add_item(page(entry, title, text))
        creator.add_redirection("A/Old", "Old", "A/../../etc/passwd", {Hint.FRONT_ARTICLE: True})
    return path


@pytest.fixture(scope="module")
def dots(tmp_path_factory):
    root = tmp_path_factory.mktemp("dots")
    (root / "books").mkdir()
    zim = make_zim(root / "books" / "dots.zim")
    # where the dotted paths would land were they taken as file paths beside the archive
    for leaked in (root / "etc" / "passwd", root / "secret.txt", root / "books" / "secret.txt"):
        leaked.parent.mkdir(exist_ok=True)
        leaked.write_text(SECRET)
    settings = Settings(data_dir=root / "data")
    service = Context(settings)
    report = building.ingest(service, "zim", zim, None)
    with RunningServer(create_app(settings)) as server:
        yield {"url": server.url, "source": report.name, "service": service}


def browser_dot_segments(href: str) -> list[str]:
    """The segments of ``href``'s path a browser removes or climbs: WHATWG URL counts ``.``
    and ``..`` spelt with any mix of ``.`` and ``%2e`` (urljoin knows only the plain ones)."""
    path = urlsplit(href).path
    return [s for s in path.split("/") if s.lower().replace("%2e", ".") in (".", "..")]


def followed(page_url: str, href: str) -> httpx.Response:
    """The link ``href`` of the page at ``page_url`` followed as a browser follows it."""
    assert browser_dot_segments(href) == [], href  # else a browser would ask for another path
    return httpx.get(urljoin(page_url, href), follow_redirects=True)


def original_link(page: str) -> str:
    found = re.search(r'class="original" href="([^"]+)"', page)
    assert found is not None
    return unescape(found.group(1))


@pytest.mark.parametrize("entry", sorted(DOTTED))
def test_the_document_page_links_the_entry_with_dot_segments_it_shows(dots, entry):
    title, text = DOTTED[entry]
    source, service = dots["source"], dots["service"]
    doc = reading.doc(
        service, DocRequest.of(source=source, title=title, fields=["doc_id", "source_url"])
    )
    assert doc["source_url"] == entry  # what the ZIM stores: the entry's path
    page_url = f"{dots['url']}/doc/{source}/{doc['doc_id']}"
    page = httpx.get(page_url)
    assert page.status_code == 200
    reached = followed(page_url, original_link(page.text))
    assert reached.status_code == 200 and text in reached.text
    assert SECRET not in reached.text


def test_a_search_hit_links_the_entry_with_dot_segments(dots):
    search_url = f"{dots['url']}/?q=climbs+twice&source={dots['source']}"
    page = httpx.get(search_url)
    hrefs = [unescape(h) for h in re.findall(r'href="(/doc/[^"]*/archive[^"]*)"', page.text)]
    assert hrefs, page.text
    reached = followed(search_url, hrefs[0])
    assert reached.status_code == 200 and DOTTED["A/../../etc/passwd"][1] in reached.text


def test_a_redirect_to_an_entry_with_dot_segments_lands_on_it(dots):
    old = f"{dots['url']}/doc/{dots['source']}/archive/A/Old"
    moved = httpx.get(old)
    assert moved.status_code == 302
    reached = followed(old, moved.headers["location"])
    assert reached.status_code == 200 and DOTTED["A/../../etc/passwd"][1] in reached.text


@pytest.mark.parametrize(
    "path",
    [
        "../../secret.txt",  # as a client that does not normalise sends it
        "../secret.txt",
        "..%2F..%2Fsecret.txt",
        "%2e%2e/%2e%2e/secret.txt",
        "A%2F..%2F..%2F..%2Fetc%2Fpasswd",  # one climb more than the entry's own path
        "A/../../etc/passwd",  # the entry's path unencoded: a server that normalised would 200
    ],
)
def test_a_request_spelt_with_dot_segments_reads_nothing_beside_the_archive(dots, path):
    host = urlsplit(dots["url"])
    connection = http.client.HTTPConnection(host.hostname, host.port, timeout=10)
    try:  # http.client sends the path byte for byte, dot segments and all
        connection.request("GET", f"/doc/{dots['source']}/archive/{path}")
        answer = connection.getresponse()
        body = answer.read().decode()
    finally:
        connection.close()
    assert SECRET not in body
    if path == "A/../../etc/passwd":  # the server reads the path as given: that very entry
        assert answer.status == 200 and DOTTED[path][1] in body
    else:
        assert answer.status == 404, (path, body[:200])


@pytest.mark.slow
def test_in_chromium_the_original_link_opens_the_entry_with_dot_segments(dots):
    source, service = dots["source"], dots["service"]
    doc_id = reading.doc(
        service, DocRequest.of(source=source, title="Climbing entry", fields=["doc_id"])
    )["doc_id"]
    with chromium() as browser:
        page = browser_page(browser, dots["url"])
        page.goto(f"{page.base}/doc/{source}/{doc_id}")
        page.locator("a.original").click()
        page.wait_for_selector("h1")
        assert page.locator("h1").inner_text() == "Climbing entry"
        assert DOTTED["A/../../etc/passwd"][1] in page.locator("body").inner_text()
