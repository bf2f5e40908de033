"""The API docs pages (/docs, /redoc) work with no network: every file they load comes from this
server, under a Content-Security-Policy without inline scripts — checked in a real browser
(Debian's Chromium through Playwright) that refuses every request that would leave loopback."""

import re
from urllib.parse import urlsplit

import httpx
import pytest

from chiezo.core.config import Settings
from chiezo.ops import building
from chiezo.ops.context import Context
from chiezo.surfaces.rest import create_app
from chiezo.surfaces.rest.docs_pages import CSP

from helpers import SCREENSHOTS, TEMPLE_PAGES, RunningServer, browser_page, chromium, wiki_dump

# a real browser against a real server: left out of `make test-fast`
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("docs")
    dump = root / "wiki.xml"
    dump.write_text(wiki_dump(TEMPLE_PAGES))
    building.ingest(
        Context(Settings(data_dir=root / "data")), "wikipedia", dump, "jawiki", embed=False
    )
    with RunningServer(create_app(Settings(data_dir=root / "data"))) as running:
        yield running


def test_the_pages_load_only_files_of_this_server_and_run_no_inline_script(server):
    for path in ("/docs", "/redoc"):
        response = httpx.get(server.url + path)
        assert response.status_code == 200
        assert response.headers["content-security-policy"] == CSP
        assert response.headers["x-frame-options"] == "DENY"
        html = response.text
        assert "cdn.jsdelivr" not in html and "fastapi.tiangolo.com" not in html
        for url in re.findall(r'(?:src|href)="([^"]+)"', html):
            assert url.startswith("/"), f"{path} loads {url} from elsewhere"
            assert httpx.get(server.url + url).status_code == 200, url
        # every <script> has a src: nothing inline for the policy to allow
        assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == []
    assert "script-src 'self'" in CSP and "'unsafe-inline'" not in CSP.split("style-src")[0]
    init = httpx.get(server.url + "/docs/init.js")
    assert init.headers["content-type"].startswith("text/javascript")
    assert "validatorUrl: null" in init.text  # the document is never sent to a validator


def offline_page(browser, base: str):
    """A page that lets nothing leave loopback (refused requests are kept in ``page.left``)
    and keeps console errors, where Chromium reports CSP refusals, in ``page.console``."""
    page = browser_page(browser, base)
    page.left, page.console = [], []

    def only_loopback(route):
        if urlsplit(route.request.url).hostname == "127.0.0.1":
            route.continue_()
        else:
            page.left.append(route.request.url)
            route.abort()

    page.route("**/*", only_loopback)
    page.on("console", lambda m: page.console.append(m.text) if m.type == "error" else None)
    return page


@pytest.fixture(scope="module")
def browser(server):
    with chromium() as launched:
        yield launched


def test_swagger_ui_lists_the_operations_and_tries_one_offline(server, browser):
    page = offline_page(browser, server.url)
    page.goto(server.url + "/docs")
    search = page.locator('.opblock-summary-path[data-path="/v1/search"]')
    search.wait_for(state="visible")
    assert page.locator(".information-container .title").inner_text().startswith("Chiezo")
    paths = page.locator(".opblock-summary-path").evaluate_all(
        "els => els.map(e => e.dataset.path)"
    )
    assert {"/v1/sources", "/v1/{source}/search", "/v1/notes"} <= set(paths)
    # "Try it out" reaches this server from the page (connect-src 'self')
    block = page.locator("#operations-sources-sources_v1_sources_get")
    block.locator(".opblock-summary").click()
    block.get_by_role("button", name="Try it out").click()
    block.get_by_role("button", name="Execute").click()
    answer = block.locator(".live-responses-table tbody .response-col_status").first
    answer.wait_for()
    assert answer.inner_text().strip() == "200"
    assert "jawiki" in block.locator(".live-responses-table .microlight").first.inner_text()
    page.screenshot(path=str(SCREENSHOTS / "api-docs-offline.png"), full_page=False)
    assert page.left == [], f"requests left loopback: {page.left}"
    assert not [m for m in page.console if "Content Security Policy" in m], page.console
    assert page.errors == []
    page.context.close()


def test_redoc_renders_offline(server, browser):
    page = offline_page(browser, server.url)
    page.goto(server.url + "/redoc")
    page.locator("h2", has_text="Search All").first.wait_for(state="visible")
    assert page.locator("h1").first.inner_text().startswith("Chiezo")
    page.screenshot(path=str(SCREENSHOTS / "api-redoc-offline.png"), full_page=False)
    assert page.left == [], f"requests left loopback: {page.left}"
    # ReDoc's "powered by" logo is an <img> from its CDN (hidden when it fails to load): the
    # policy refuses it before any request is made, and nothing else is refused
    refused = [m for m in page.console if "Content Security Policy" in m]
    assert all("https://cdn.redoc.ly/redoc/logo-mini.svg" in m for m in refused), refused
    assert page.errors == []
    page.context.close()
