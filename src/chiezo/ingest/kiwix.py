"""Source kind ``kiwix``: a book a running kiwix-serve serves, searched live through its own
full-text index — nothing re-indexed (the InfoForge way; design.md §36.5).

``chiezo ingest kiwix http://127.0.0.1:8090 --book NAME`` registers the book: it asks the
server's catalog for it (title, language, date, article count) and switches in a generation of
no documents that records where the book is. A search asks the server
(``/search?content=BOOK&pattern=…&format=xml``, OpenSearch RSS); a document is read from it
when first asked for (``/raw/BOOK/content/PATH``, the entry as the ZIM holds it, turned into
text as a ZIM source's is) and kept in the source's cache (store/library.py ``LiveSource``).
Citations open the page on kiwix-serve itself.

Everything kiwix-serve answers is untrusted: bounded in size and time, parsed without
entities, its HTML turned into text (no markup of it reaches a page).
"""

from __future__ import annotations

import functools
import hashlib
import html
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlsplit
from xml.etree import ElementTree

import httpx

from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, InputError, SourceUnavailable
from chiezo.core.models import Doc, Hit, SearchResult
from chiezo.core.progress import NullProgress, Progress
from chiezo.ingest.htmltext import markup_words
from chiezo.ingest.zim import article_document, book_line
from chiezo.store.build import BuildOptions, BuildReport, GenerationBuilder
from chiezo.store.kinds import Attribution, Capabilities, SourceKind, option_field

KIND = "kiwix"
MAX_ANSWER_BYTES = 4 * 2**20  # a search page or a catalog; an article may be larger
MAX_ARTICLE_BYTES = 16 * 2**20
MAX_TEXT = 1000  # a title or a passage kiwix-serve gives (its passages run ~400 characters)
CONNECT_SECONDS = 2.0  # a server on loopback or the LAN connects at once, or is not there
MAX_REDIRECTS = 5  # an entry redirecting to its article, kiwix-serve's old URLs to its new
NS = {
    "atom": "http://www.w3.org/2005/Atom",
    "opensearch": "http://a9.com/-/spec/opensearch/1.1/",
}


@dataclass(frozen=True)
class Book:
    """A book in kiwix-serve's catalog: ``url_name`` is what its URLs use (the ZIM's file
    name), ``name`` its Name metadata."""

    url_name: str
    name: str
    title: str = ""
    language: str = ""
    date: str = ""
    articles: int = 0
    description: str = ""

    def identity(self, server: str) -> dict[str, Any]:
        return {
            "url": server,
            "book": self.url_name,
            "name": self.name,
            "title": self.title,
            "language": self.language,
            "date": self.date,
            "articles": self.articles,
            "description": self.description,
        }


@dataclass
class KiwixOptions:
    book: str | None = option_field(
        None,
        "--book",
        help="The book's name in kiwix-serve's catalog (its file name without .zim, or its "
        "Name); may be left out when the server serves one book.",
    )


# -- talking to kiwix-serve -----------------------------------------------------------------------


def server_url(given: Path | str) -> str:
    """The server's address as given on the command line. It arrives as a path (every kind's
    input is one), which folds ``http://`` to ``http:/``: unfolded here."""
    text = re.sub(r"^(https?):/(?!/)", r"\1://", str(given)).rstrip("/")
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            f"{text!r} is not a kiwix-serve address",
            hint="give the address kiwix-serve listens on, e.g. http://127.0.0.1:8090",
        )
    if parts.query or parts.fragment:
        raise InputError(f"give kiwix-serve's address without a query: {text!r}")
    return text


def _get(url: str, timeout: float, limit: int, server: str) -> httpx.Response:
    """GET ``url`` within ``timeout`` seconds and ``limit`` bytes, following redirects within
    the server; a server that is down, slow, or answers an error or too much is
    ``SourceUnavailable`` (a 502), saying which."""
    deadline = time.monotonic() + timeout
    timeouts = httpx.Timeout(timeout, connect=min(CONNECT_SECONDS, timeout))
    try:
        for _ in range(MAX_REDIRECTS + 1):
            response = _read(url, timeouts, deadline, limit, server)
            if not response.is_redirect:
                return response
            url = _same_server(str(response.url.join(response.headers["location"])), server)
    except httpx.TimeoutException as exc:
        raise SourceUnavailable(
            f"kiwix-serve at {server} did not answer within {timeout:g} s", timed_out=True
        ) from exc
    except httpx.HTTPError as exc:
        raise SourceUnavailable(
            f"kiwix-serve at {server} cannot be reached ({type(exc).__name__})",
            hint="start kiwix-serve, or check the address the source was registered with",
        ) from exc
    raise SourceUnavailable(f"kiwix-serve at {server} redirected more than {MAX_REDIRECTS} times")


@functools.lru_cache(maxsize=1)
def _client(pid: int) -> httpx.Client:
    """One client per process (keyed by its pid: a forked worker makes its own), its
    connections kept alive: a new client per request built a TLS context each time, 22 ms —
    most of a live search's time (design.md §36.5)."""
    return httpx.Client(follow_redirects=False)


def _read(url: str, timeouts: httpx.Timeout, deadline: float, limit: int, server: str):
    with _client(os.getpid()).stream("GET", url, timeout=timeouts) as response:
        body = bytearray()
        for piece in response.iter_bytes():
            body += piece
            if len(body) > limit:
                raise SourceUnavailable(
                    f"kiwix-serve at {server} answered more than {limit:,} bytes"
                )
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout("too slow")
        response._content = bytes(body)
    return response


def _same_server(url: str, server: str) -> str:
    """A redirect is followed only within the server (an entry redirecting to its article):
    never to another host, which a server could otherwise make this one ask."""
    there, here = urlsplit(url), urlsplit(server)
    if (there.scheme, there.netloc) != (here.scheme, here.netloc):
        raise SourceUnavailable(f"kiwix-serve at {server} redirected to another server; refused")
    return url


def _xml(response: httpx.Response, server: str, what: str) -> ElementTree.Element:
    """The answer as XML, refused when it is not XML or declares a DTD (entities are how an
    XML answer is made to expand without bound)."""
    text = response.content
    if b"<!DOCTYPE" in text[:4096].upper() or b"<!ENTITY" in text.upper():
        raise SourceUnavailable(f"kiwix-serve at {server} answered {what} with a DTD; refused")
    try:
        return ElementTree.fromstring(text)
    except ElementTree.ParseError as exc:
        raise SourceUnavailable(
            f"kiwix-serve at {server} answered {what} with no XML ({exc})"
        ) from exc


def catalog(server: str, timeout: float) -> list[Book]:
    """Every book the server serves (``/catalog/v2/entries``, OPDS)."""
    response = _get(f"{server}/catalog/v2/entries?count=-1", timeout, MAX_ANSWER_BYTES, server)
    if response.status_code != 200:
        raise SourceUnavailable(
            f"kiwix-serve at {server} has no catalog (HTTP {response.status_code}); is it "
            "kiwix-serve?"
        )
    books = []
    for entry in _xml(response, server, "its catalog").iterfind("atom:entry", NS):
        link = next(
            (
                a.get("href", "")
                for a in entry.iterfind("atom:link", NS)
                if a.get("type") == "text/html"
            ),
            "",
        )
        url_name = unquote(link.rstrip("/").rsplit("/", 1)[-1])
        if not url_name:
            continue
        books.append(
            Book(
                url_name=url_name,
                name=_text(entry, "atom:name"),
                title=_text(entry, "atom:title"),
                language=_text(entry, "atom:language"),
                date=_text(entry, "atom:updated")[:10],
                articles=int(_text(entry, "atom:articleCount") or 0),
                description=_text(entry, "atom:summary"),
            )
        )
    return books


def _text(element: ElementTree.Element, path: str) -> str:
    """The text of the child at ``path``, marked-up parts included (a search answer's
    ``<description>`` holds ``<b>`` elements)."""
    found = element.find(path, NS)
    return "".join(found.itertext()).strip() if found is not None else ""


def choose_book(books: list[Book], wanted: str | None, server: str) -> Book:
    if not books:
        raise InputError(f"kiwix-serve at {server} serves no book")
    if wanted is None and len(books) == 1:
        return books[0]
    names = sorted(b.url_name for b in books)
    if wanted is None:
        raise InputError(
            f"kiwix-serve at {server} serves {len(books)} books: say which with --book",
            books=names,
            hint="one of: " + ", ".join(names[:20]),
        )
    for book in books:
        if wanted in (book.url_name, book.name):
            return book
    raise InputError(
        f"kiwix-serve at {server} serves no book {wanted!r}",
        books=names,
        hint="one of: " + ", ".join(names[:20]),
    )


@dataclass(frozen=True)
class Found:
    """One hit as kiwix-serve gave it: the entry's path in the book, its title, the passage."""

    path: str
    title: str
    snippet: str
    url: str


def search(
    server: str, book: str, query: str, start: int, count: int, timeout: float
) -> tuple[int, list[Found]]:
    """(the total kiwix-serve counts, the hits from ``start``, 0-based) for ``query``."""
    url = (
        f"{server}/search?content={quote(book, safe='')}&pattern={quote(query, safe='')}"
        f"&start={start + 1}&pageLength={count}&format=xml"
    )
    response = _get(url, timeout, MAX_ANSWER_BYTES, server)
    if response.status_code == 404:  # no match, or a book without a full-text index
        return 0, []
    if response.status_code != 200:
        raise SourceUnavailable(
            f"kiwix-serve at {server} answered the search with HTTP {response.status_code}"
        )
    channel = _xml(response, server, "a search").find("channel")
    if channel is None:
        raise SourceUnavailable(f"kiwix-serve at {server} answered a search with no results feed")
    total = int(_text(channel, "opensearch:totalResults") or 0)
    found = []
    prefix = _book_prefix(book)
    for item in channel.iterfind("item"):
        link = _text(item, "link")
        path = _entry_path(link, prefix)
        if path is None:
            continue
        snippet = _plain(_text(item, "description"))
        found.append(Found(path, _plain(_text(item, "title")) or path, snippet, server + link))
    return total, found


def _book_prefix(book: str) -> tuple[str, ...]:
    """How a link into the book starts: ``/BOOK/`` (kiwix-serve 3.3) or ``/content/BOOK/``."""
    quoted = quote(book)
    return (f"/{quoted}/", f"/content/{quoted}/", f"/{book}/", f"/content/{book}/")


def _entry_path(link: str, prefixes: tuple[str, ...]) -> str | None:
    for prefix in prefixes:
        if link.startswith(prefix):
            return unquote(link[len(prefix) :].split("#", 1)[0]) or None
    return None


def _plain(text: str) -> str:
    """A snippet or a title kiwix-serve marked up (``<b>piano</b>``), as plain text."""
    return markup_words(text)[:MAX_TEXT]


def article(server: str, book: str, path: str, timeout: float) -> str:
    """An entry's HTML as the book holds it (``/raw/BOOK/content/PATH``)."""
    url = f"{server}/raw/{quote(book, safe='')}/content/{quote(path)}"
    response = _get(url, timeout, MAX_ARTICLE_BYTES, server)
    if response.status_code == 404:
        raise LookupError(path)
    if response.status_code != 200 or "html" not in response.headers.get("content-type", ""):
        raise SourceUnavailable(
            f"kiwix-serve at {server} answered {path!r} with HTTP {response.status_code} "
            f"({response.headers.get('content-type', 'no type')})"
        )
    return response.content.decode(response.encoding or "utf-8", "replace")


def suggested_path(server: str, book: str, title: str, timeout: float) -> str | None:
    """The path of the entry titled ``title`` by kiwix-serve's title suggestions."""
    url = f"{server}/suggest?content={quote(book, safe='')}&term={quote(title, safe='')}&count=10"
    response = _get(url, timeout, MAX_ANSWER_BYTES, server)
    if response.status_code != 200:
        return None
    try:
        offered = response.json()
    except ValueError as exc:
        raise SourceUnavailable(
            f"kiwix-serve at {server} answered a title look-up with no JSON"
        ) from exc
    wanted = " ".join(title.split())
    # {title as offered: its path}, the first of each; kiwix-serve 3.3 escapes paths as HTML
    paths: dict[str, str] = {}
    for item in offered if isinstance(offered, list) else []:
        if isinstance(item, dict) and item.get("kind") == "path" and item.get("path"):
            paths.setdefault(_plain(str(item.get("value") or "")), html.unescape(str(item["path"])))
    if wanted in paths:  # the very title first: "Georgia On My Mind" is a redirect's
        return paths[wanted]
    folded = {t.casefold(): p for t, p in reversed(paths.items())}
    return folded.get(wanted.casefold())


def _titled_first(server: str, book: str, query: str, found: list[Found], timeout: float):
    """``found`` with the entry titled as the query first: kiwix-serve ranks by its text
    index alone (for "Ray Charles", "Ray Charles in Person" before the article), so its title
    suggestions are asked for the entry of that very title (one request more, ~ms)."""
    path = suggested_path(server, book, query, timeout)
    if path is None:
        return found
    same = [f for f in found if f.path == path]
    titled = (
        same[0] if same else Found(path, " ".join(query.split()), "", _page(server, book, path))
    )
    return [titled, *(f for f in found if f.path != path)]


def _page(server: str, book: str, path: str) -> str:
    """An entry's page on kiwix-serve: ``/BOOK/PATH``, which kiwix-serve 3.3 serves and later
    versions redirect to ``/content/BOOK/PATH``."""
    return f"{server}/{quote(book)}/{quote(path)}"


# -- as a source ------------------------------------------------------------------------------


def doc_id_of(path: str) -> int:
    """A document's id from its path: the same in every process (a worker reads a document
    another found), 48 bits (exact in JSON numbers), never 0."""
    digest = hashlib.blake2b(path.encode("utf-8"), digest_size=6).digest()
    return int.from_bytes(digest, "big") or 1


def as_result(source: str, query: str, total: int, found: list[Found], offset: int, limit: int):
    """kiwix-serve's hits as a search result: its order kept, scores falling with the rank
    (what the merge across sources reads), the exact title marked as a title match."""
    hits = [as_hit(source, query, f, offset + rank) for rank, f in enumerate(found)]
    return SearchResult(
        query=query.strip(),
        hits=hits,
        total=max(total, offset + len(hits)),
        mode="kiwix-serve",
        offset=offset,
        limit=limit,
        sources=[source],
        retrieval="keyword",
    )


def as_hit(source: str, query: str, found: Found, rank: int) -> Hit:
    return Hit(
        source=source,
        doc_id=doc_id_of(found.path),
        key=found.path,
        title=found.title,
        snippet=found.snippet,  # cut to the width of every snippet by the search (retrieval.py)
        score=round(1.0 / (rank + 1), 6),
        rank_score=0.0,
        url=found.url,
        title_match=found.title.casefold() == query.strip().casefold(),
    )


def document(server: str, book: str, path: str, title: str, timeout: float) -> Doc | None:
    """The entry at ``path`` as a document, its text made as a ZIM source's is."""
    made = article_document(path, article(server, book, path, timeout), title)
    if made is None:
        return None
    doc = made[0]
    doc.url = _page(server, book, path)
    return doc


def register(
    settings: Settings,
    given: Path | str,
    name: str | None,
    options: KiwixOptions,
    progress: Progress | None = None,
) -> BuildReport:
    server = server_url(given)
    book = choose_book(catalog(server, settings.query_timeout), options.book, server)
    builder = GenerationBuilder(
        settings,
        name or source_name(book),
        KIND,
        input_identity=book.identity(server),
        # a registration: where the book is, no documents of its own
        options=BuildOptions(min_docs=0, word_index=False, language=book.language[:3] or None),
        progress=progress or NullProgress(),
    )
    with builder:
        builder.start_reading(0)
        return builder.finish()


def source_name(book: Book) -> str:
    named = "".join(c if c.isalnum() else "_" for c in book.url_name)
    return "kiwix_" + named.strip("_").lower()


class KiwixKind(SourceKind):
    name = KIND
    summary = """Register a book a running kiwix-serve serves: searched through kiwix-serve's
    own full-text index and read from it, nothing re-indexed; citations open its pages."""
    Options = KiwixOptions
    argument = "URL"
    names_itself = True  # kiwix_<the book's file name>, known once the catalog is read
    build_flags = ()
    capabilities = Capabilities(live=True)

    def build(self, settings, inputs, name, options, build, progress):
        return register(settings, inputs[0], name, options, progress)

    def inputs_from_record(self, recorded: dict[str, Any]) -> list[Path]:
        return [Path(recorded["url"])] if recorded.get("url") else []

    def options_from_record(self, recorded: dict[str, Any]) -> Any:
        return KiwixOptions(book=recorded.get("book"))

    def missing_inputs(self, inputs: list[Path]) -> list[str]:
        return []  # an address, not a file: a server that is down says so when asked

    def about(self, info) -> str | None:
        return book_line(info.input, f"live from {info.input.get('url')}")

    def attribution(self, info):
        given = info.input
        return Attribution(
            f"{given.get('title') or given.get('book')} (kiwix-serve at {given.get('url')})",
            url=given.get("url"),
        )

    # -- live --------------------------------------------------------------------------------

    def search_live(self, info, query: str, *, limit: int, offset: int, timeout: float):
        given = info.input
        if not query.strip():
            raise BadQuery("a search of a kiwix-serve book needs words")
        server, book = given["url"], given["book"]
        total, found = search(server, book, query, offset, limit, timeout)
        if offset == 0:  # title-exact first, as every source ranks (kiwix-serve does not)
            found = _titled_first(server, book, query, found, timeout)
        return as_result(info.name, query, total, found, offset, limit)

    def read_live(self, info, path: str, title: str, timeout: float) -> Doc | None:
        given = info.input
        try:
            return document(given["url"], given["book"], path, title, timeout)
        except LookupError:
            return None

    def find_live(self, info, title: str, timeout: float) -> Hit | None:
        server, book = info.input["url"], info.input["book"]
        path = suggested_path(server, book, title, timeout)
        if path is None:
            return None
        return as_hit(info.name, title, Found(path, title, "", _page(server, book, path)), 0)


SOURCE_KIND = KiwixKind()
