"""Helpers shared by the tests (fixtures live in conftest.py)."""

from __future__ import annotations

import contextlib
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from chiezo.ops import building
from chiezo.ops.context import Context
from chiezo.store.build import BuildOptions

# Real public data the tests build from, carried in the repository with its licences
# (tests/data/README.md): a clone alone runs every test. ../shared/data is for benchmarks.
TEST_DATA = Path(__file__).resolve().parent / "data"


def data_file(relative: str) -> Path:
    """A file or folder under tests/data. A missing one is an error, never a skip: the data
    is part of the repository, and a skip would hide a test that no longer runs."""
    path = TEST_DATA / relative
    if not path.exists():
        raise FileNotFoundError(f"no test data {path}: tests/data/make_fixtures.py writes it")
    return path


def write_files(folder: Path, files: dict[str, str | bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return folder


def build_docs(service: Context, folder: Path, name: str, **options):
    from chiezo.ingest.documents import DocsOptions

    strict = options.pop("strict", False)
    return building.ingest(
        service,
        "docs",
        folder,
        name,
        options=DocsOptions(strict=strict),
        build=BuildOptions(**options),
    )


def build_source(
    settings, name: str, kind: str, docs, *, input_identity=None, options=None, progress=None
):
    """Build source ``name`` from ``docs`` (Doc records) and switch it in, as every source
    kind's build does (store/build.py ``GenerationBuilder``): for tests that need exactly these
    documents."""
    from chiezo.store.build import GenerationBuilder

    builder = GenerationBuilder(
        settings, name, kind, input_identity=input_identity, options=options, progress=progress
    )
    with builder:
        builder.start_reading(None)
        for doc in docs:
            builder.add(doc)
        return builder.finish()


def switch_in_an_old_schema(settings, name: str) -> None:
    """Switch in a copy of source ``name`` marked with schema version 0, as a build by an
    older Chiezo would have left it."""
    import sqlite3

    from chiezo.store import generations

    directory = settings.corpus_dir / name
    old = directory / "gen-29990101T000000-ffffff.db"
    with sqlite3.connect(generations.current_path(directory)) as src, sqlite3.connect(old) as dst:
        src.backup(dst)
        dst.execute("UPDATE meta SET value = '0' WHERE key = 'schema_version'")
    src.close()
    dst.close()
    generations.switch_current(directory, old)


# What an in-process TestClient must name as its host: its default, "testserver", is a host
# name the server does not answer to (DNS-rebinding protection, surfaces/rest/security.py).
LOCAL = "http://127.0.0.1"
# A test client's peer on this machine (TestClient's own default peer, "testclient", is not an
# address: the server then shows it no path of this machine — surfaces/rest/disclosure.py)
ON_THIS_MACHINE = ("127.0.0.1", 50000)


def titles(result) -> list[str]:
    return [h.title for h in result.hits]


def trigram_side(source, text: str, limit: int = 10):
    """The trigram planner alone, as keyword search runs it for its trigram side
    (search/keyword.plan_keyword → search/fts.plan_search), and its first ``limit`` hits read
    as a search reads them: ``(plan, hits)``."""
    from chiezo.search.fts import plan_search, read_hits

    plan = plan_search(source, text, want=limit)
    return plan, read_hits(source, plan.ordered[:limit], plan.needles)


def generations_of(header: str | None) -> dict[str, str]:
    """``X-Chiezo-Generation`` (surfaces/rest/pinning.py) read back as a client reads it:
    {source: generation file name}."""
    pairs = (item.strip().partition("=") for item in (header or "").split(","))
    return {name: gen for name, sep, gen in pairs if sep}


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RunningServer:
    """The real app under uvicorn on a free loopback port, in a background thread."""

    def __init__(self, app, host: str = "127.0.0.1", port: int | None = None):
        import threading

        import uvicorn

        self.port = port or free_port()  # given: one its settings name (``public_url``)
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> RunningServer:
        import time

        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)


# Two temples of Tokyo with coordinates, links and a category, in the real wikitext form
TEMPLE_PAGES = [
    (
        1,
        "浅草寺",
        "'''浅草寺'''は東京都台東区浅草にある寺。{{Coord|35|42|53|N|139|47|48|E}}"
        "[[雷門]]が有名である。\n== 歴史 ==\n628年に創建された。\n[[Category:東京都の寺]]",
    ),
    (
        2,
        "雷門",
        "'''雷門'''は[[浅草寺]]の山門。{{Coord|35|42|39|N|139|47|47|E}}\n[[Category:東京都の寺]]",
    ),
]


# An indexed HTML page that would write a note through the API if its script ran on Chiezo's origin
PAGE_WITH_A_SCRIPT = (
    "<html><head><title>Special offer</title></head><body><h1>Special offer</h1>"
    "<p>Everything half price this week.</p><script>document.title = 'ran';"
    "fetch('/v1/notes', {method: 'POST', headers: {'content-type': 'application/json'},"
    " body: JSON.stringify({text: 'written by an indexed page'})});</script></body></html>"
)

# A small source of three formats, named "book" by the ``server`` fixture (conftest.py): the
# hostile-input, security, HTTP-edge, notes and jobs tests run against it.
BOOK_FILES = {
    "guide.md": "# Getting started\n\nChiezo keeps each source in one SQLite file.\n",
    "offer.html": PAGE_WITH_A_SCRIPT,
    "prices.csv": "item,price\ntea,120\n",
}


def error_body(response, *statuses: int) -> dict:
    """The response is one of ``statuses`` and carries the one error shape."""
    assert response.status_code in statuses, (response.status_code, response.text[:300])
    body = response.json()
    assert body["status"] == response.status_code and body["error"]
    return body


def capped(open_function, pages: int):
    """SQLite's own SQLITE_FULL, as a full disk gives it: the file may not grow past ``pages``."""

    def opened(path, *args, **kwargs):
        conn = open_function(path, *args, **kwargs)
        conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    return opened


def wiki_library(root: Path, pages: list[tuple[int, str, str]], name: str = "jawiki") -> Path:
    """A data directory under ``root`` holding one Wikipedia source built from ``pages``
    (written as a real-format dump); returns ``root`` (the data is ``root / "data"``)."""
    from chiezo.core.config import Settings
    from chiezo.ops.context import Context

    dump = root / "wiki.xml"
    dump.write_text(wiki_dump(pages))
    building.ingest(Context(Settings(data_dir=root / "data")), "wikipedia", dump, name, embed=False)
    return root


def wiki_dump(pages: list[tuple[int, str, str]], redirects: list[tuple[int, str, str]] = ()) -> str:
    """A small MediaWiki export in the real format."""
    out = [
        '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10" '
        'xml:lang="ja"><siteinfo><sitename>Wikipedia</sitename><dbname>testwiki</dbname>'
        "<base>https://ja.wikipedia.org/wiki/Main</base><namespaces>"
        '<namespace key="0" case="first-letter" /><namespace key="6" case="first-letter">'
        'ファイル</namespace><namespace key="14" case="first-letter">Category</namespace>'
        "</namespaces></siteinfo>"
    ]
    for page_id, title, text in pages:
        out.append(
            f"<page><title>{title}</title><ns>0</ns><id>{page_id}</id><revision><id>1</id>"
            "<timestamp>2023-05-01T00:00:00Z</timestamp>"
            f'<text xml:space="preserve">{text}</text></revision></page>'
        )
    for page_id, title, target in redirects:
        out.append(
            f'<page><title>{title}</title><ns>0</ns><id>{page_id}</id><redirect title="{target}" />'
            f"<revision><id>1</id><text>#REDIRECT [[{target}]]</text></revision></page>"
        )
    out.append("</mediawiki>")
    return "".join(out)


class DumpSite:
    """A static file server with byte ranges and directory listings, like dumps.wikimedia.org,
    download.geonames.org or Geofabrik."""

    def __init__(self, root):
        self.root = root
        self.requests: list[tuple[str, str | None]] = []
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - http.server's naming
                site.requests.append((self.path, self.headers.get("Range")))
                path = site.root / self.path.lstrip("/")
                if path.is_dir():
                    names = sorted(p.name + ("/" if p.is_dir() else "") for p in path.iterdir())
                    body = "".join(f'<a href="{n}">{n}</a>\n' for n in names).encode()
                    return self._send(200, body, {})
                if not path.is_file():
                    return self._send(404, b"not found", {})
                data = path.read_bytes()
                match = re.match(r"bytes=(\d+)-", self.headers.get("Range") or "")
                if match:
                    start = int(match.group(1))
                    headers = {"Content-Range": f"bytes {start}-{len(data) - 1}/{len(data)}"}
                    return self._send(206, data[start:], headers)
                return self._send(200, data, {})

            def _send(self, status, body, headers):
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = Path(__file__).resolve().parents[1] / "test-output" / "screenshots"


@contextlib.contextmanager
def chromium():
    """Debian's headless Chromium through Playwright (never a downloaded browser)."""
    if not CHROMIUM.exists():
        pytest.skip(f"no Chromium at {CHROMIUM}: `make browser` installs Debian's chromium")
    from playwright.sync_api import sync_playwright

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=str(CHROMIUM), args=["--no-sandbox", "--disable-gpu"]
        )
        yield browser
        browser.close()


def browser_page(browser, base: str, **context_options):
    """A Japanese-locale page at a fixed size whose script errors are collected in
    ``page.errors``; ``page.base`` is the server's URL. ``context_options``: Playwright's
    (another locale, a geolocation and its permission)."""
    options = {"locale": "ja-JP", "viewport": {"width": 1100, "height": 900}, **context_options}
    context = browser.new_context(**options)
    page = context.new_page()
    page.set_default_timeout(15_000)
    page.errors = []
    page.on("pageerror", lambda error: page.errors.append(str(error)))
    page.base = base
    return page


def plain_tar(data: bytes) -> bytes:
    """An export's tar, uncompressed: exports are zstd streams (ops/transfer.py); a plain tar
    (an export of an earlier version) is returned as it is."""
    import io

    import zstandard

    from chiezo.ops.transfer import ZSTD_MAGIC

    if not data.startswith(ZSTD_MAGIC):
        return data
    return zstandard.ZstdDecompressor().stream_reader(io.BytesIO(data)).read()


def stored_vectors(generation: Path) -> dict[tuple[int, int, int], bytes]:
    """(chunk_id, span_start, span_end) → the float16 vector the generation's index holds for
    it (the index is the vectors' one store: store/vectors.py)."""
    from chiezo.core import db
    from chiezo.store.vectors import VectorIndex, vector_info

    conn = db.open_readonly(generation)
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta"))
        rows = conn.execute(
            "SELECT vec_id, chunk_id, span_start, span_end FROM chunk_vectors ORDER BY vec_id"
        ).fetchall()
    finally:
        conn.close()
    found, matrix = VectorIndex(generation, vector_info(meta)).vectors([r[0] for r in rows])
    assert len(found) == len(rows), "every row's vector is in the index"
    return {tuple(r[1:]): v.astype("<f2").tobytes() for r, v in zip(rows, matrix, strict=True)}


def zim_page(path: str, title: str, html: str):
    """An HTML article for libzim's writer (``Creator.add_item``), listed as a front article."""
    from libzim.writer import Hint, Item, StringProvider

    class Page(Item):
        def get_path(self) -> str:
            return path

        def get_title(self) -> str:
            return title

        def get_mimetype(self) -> str:
            return "text/html"

        def get_contentprovider(self):
            return StringProvider(html)

        def get_hints(self):
            return {Hint.FRONT_ARTICLE: True}

    return Page()
