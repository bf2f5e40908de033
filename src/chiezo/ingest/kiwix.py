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
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit
from xml.etree import ElementTree

import httpx

from chiezo.core import outbound
from chiezo.core.addresses import Address, Credentials, load_credentials, save_credentials
from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, InputError, SourceUnavailable
from chiezo.core.isolation import Isolated, IsolatedFailure
from chiezo.core.models import Doc, Hit, SearchResult
from chiezo.core.outbound import Deadline
from chiezo.core.progress import NullProgress, Progress
from chiezo.ingest.htmltext import markup_words
from chiezo.ingest.zim import article_document, book_line
from chiezo.store.build import BuildOptions, BuildReport, GenerationBuilder
from chiezo.store.kinds import Attribution, Capabilities, LiveCall, SourceKind, option_field

if TYPE_CHECKING:
    from chiezo.store.source_info import SourceInfo

KIND = "kiwix"
MAX_ANSWER_BYTES = 4 * 2**20  # a search page or a catalog; an article may be larger
MAX_ARTICLE_BYTES = 16 * 2**20
MAX_SUGGESTIONS_BYTES = 256 * 2**10  # ten titles and paths: a few KB
MAX_TEXT = 1000  # a title or a passage kiwix-serve gives (its passages run ~400 characters)
MAX_PATH = 2000  # an entry's path; a longer one names no entry a book would hold
MAX_COUNT_DIGITS = 15  # a count of articles or results: more digits than any book has
MAX_PASSAGES = 20_000  # a real article has hundreds; 800,000 headings make as many
# The converting process's address space. Measured (design.md §37.3): 129 MiB after its
# imports; the largest article of the Ray Charles ZIM (157 KiB of HTML) repeated 16 times
# (2.5 MiB) peaked at 165 MiB, in 0.18 s. A real 16 MiB article fits; one built to expand
# finds the limit (a MemoryError there, a 502 here).
CONVERT_MEMORY = 1024 * 2**20
MAX_REDIRECTS = 5  # an entry redirecting to its article, kiwix-serve's old URLs to its new
log = logging.getLogger("chiezo.kiwix")
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


@dataclass(frozen=True)
class Server:
    """A kiwix-serve as a source asks it: its address (never with a user or password: those
    are kept apart, core/addresses.py) and the credentials to send it."""

    url: str
    credentials: Credentials | None = None

    def __str__(self) -> str:
        return self.url

    def get(self, target: str, deadline: Deadline, limit: int) -> httpx.Response:
        """GET ``target`` (a path and query on the server), whole by ``deadline`` and within
        ``limit`` bytes, following redirects within the server; a server that is down, slow,
        or answers too much is ``SourceUnavailable`` (a 502), saying which."""
        url = self.url + target
        auth = self.credentials.auth if self.credentials else None
        try:
            return outbound.get_within(url, deadline=deadline, limit=limit, auth=auth,
                                       follow=self._same_server, redirects=MAX_REDIRECTS,
                                       check=self._refused)  # fmt: skip
        except outbound.Unanswered as exc:
            hint = ("start kiwix-serve, or check the address the source was registered with"
                    if exc.unreachable else None)  # fmt: skip
            raise SourceUnavailable(
                exc.said(f"kiwix-serve at {self}"),
                **({"timed_out": True} if exc.timed_out else {}),
                **({"hint": hint} if hint else {}),
            ) from exc

    def _refused(self, response: httpx.Response) -> None:
        if response.status_code == 401:
            raise SourceUnavailable(
                f"kiwix-serve at {self} asks for a user and password"
                + (", and refused the ones sent" if self.credentials else ""),
                hint="register the book again with them in the address, "
                "http://USER:PASSWORD@host:port (they are kept apart from it, never shown)",
            )

    def _same_server(self, url: str) -> str:
        """A redirect is followed only within the server (an entry redirecting to its
        article): never to another host, which a server could otherwise make this one ask."""
        there, here = urlsplit(url), urlsplit(self.url)
        if (there.scheme, there.netloc) != (here.scheme, here.netloc):
            raise SourceUnavailable(f"kiwix-serve at {self} redirected to another server; refused")
        return url


def server_address(given: Path | str) -> Address:
    """The server's address as given on the command line, its user and password (if any)
    taken apart. It arrives as a path (every kind's input is one), which folds ``http://``
    to ``http:/``: unfolded here."""
    address = Address.parse(re.sub(r"^(https?):/(?!/)", r"\1://", str(given)).rstrip("/"))
    parts = urlsplit(address.url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InputError(
            f"{address.url!r} is not a kiwix-serve address",
            hint="give the address kiwix-serve listens on, e.g. http://127.0.0.1:8090",
        )
    if address.params or "#" in str(given):
        raise InputError(f"give kiwix-serve's address without a query: {address.shown()!r}")
    return address


def _xml(response: httpx.Response, server: Server, what: str) -> ElementTree.Element:
    """The answer as XML, refused when it is not XML or declares a DTD (entities are how an
    XML answer is made to expand without bound)."""
    text = response.content
    if b"<!DOCTYPE" in text[:4096].upper() or b"<!ENTITY" in text.upper():
        raise SourceUnavailable(f"kiwix-serve at {server} answered {what} with a DTD; refused")
    try:
        return ElementTree.fromstring(text)
    except (ElementTree.ParseError, RecursionError) as exc:
        raise SourceUnavailable(
            f"kiwix-serve at {server} answered {what} with no XML ({type(exc).__name__})"
        ) from exc


def _count(text: str, server: Server, what: str) -> int:
    """A count kiwix-serve gives (results, articles), read with bounds: ``abc`` or 5,000
    digits is a garbled answer (a 502), not a ValueError (a 500) — nor a number to compute
    with."""
    text = text.strip()
    if not text:
        return 0
    if not (text.isascii() and text.isdigit() and len(text) <= MAX_COUNT_DIGITS):
        raise SourceUnavailable(
            f"kiwix-serve at {server} answered {what} with a count that is none ({_clip(text)!r})"
        )
    return int(text)


def _clip(text: str, chars: int = 40) -> str:
    return text if len(text) <= chars else text[:chars] + "…"


def catalog(server: Server, deadline: Deadline) -> list[Book]:
    """Every book the server serves (``/catalog/v2/entries``, OPDS)."""
    response = server.get("/catalog/v2/entries?count=-1", deadline, MAX_ANSWER_BYTES)
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
                articles=_count(_text(entry, "atom:articleCount"), server, "its catalog"),
                description=_text(entry, "atom:summary"),
            )
        )
    return books


def _text(element: ElementTree.Element, path: str) -> str:
    """The text of the child at ``path``, marked-up parts included (a search answer's
    ``<description>`` holds ``<b>`` elements)."""
    found = element.find(path, NS)
    return "".join(found.itertext()).strip() if found is not None else ""


def choose_book(books: list[Book], wanted: str | None, server: Server) -> Book:
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
    server: Server, book: str, query: str, start: int, count: int, deadline: Deadline
) -> tuple[int, list[Found]]:
    """(the total kiwix-serve counts, the hits from ``start``, 0-based) for ``query``: at
    most ``count`` of them, whatever the server sent (a hostile feed of 43,449 items once
    answered ``limit=1`` whole, and all of it went to the cache)."""
    target = (
        f"/search?content={quote(book, safe='')}&pattern={quote(query, safe='')}"
        f"&start={start + 1}&pageLength={count}&format=xml"
    )
    response = server.get(target, deadline, MAX_ANSWER_BYTES)
    if response.status_code == 404:  # no match, or a book without a full-text index
        return 0, []
    if response.status_code != 200:
        raise SourceUnavailable(
            f"kiwix-serve at {server} answered the search with HTTP {response.status_code}"
        )
    channel = _xml(response, server, "a search").find("channel")
    if channel is None:
        raise SourceUnavailable(f"kiwix-serve at {server} answered a search with no results feed")
    total = _count(_text(channel, "opensearch:totalResults"), server, "a search")
    found: list[Found] = []
    prefix = _book_prefix(book)
    for item in channel.iterfind("item"):
        if len(found) >= count:
            break
        link = _text(item, "link")
        path = _entry_path(link, prefix)
        if path is None:
            continue
        snippet = _plain(_text(item, "description"))
        found.append(
            Found(path, _plain(_text(item, "title")) or path, snippet, _page(server, book, path))
        )
    return total, found


def _book_prefix(book: str) -> tuple[str, ...]:
    """How a link into the book starts: ``/BOOK/`` (kiwix-serve 3.3) or ``/content/BOOK/``."""
    quoted = quote(book)
    return (f"/{quoted}/", f"/content/{quoted}/", f"/{book}/", f"/content/{book}/")


def _entry_path(link: str, prefixes: tuple[str, ...]) -> str | None:
    for prefix in prefixes:
        if link.startswith(prefix):
            path = unquote(link[len(prefix) :].split("#", 1)[0])
            return path if 0 < len(path) <= MAX_PATH else None
    return None


def _plain(text: str) -> str:
    """A snippet or a title kiwix-serve marked up (``<b>piano</b>``), as plain text."""
    return markup_words(text[: MAX_TEXT * 16])[:MAX_TEXT]


def article(server: Server, book: str, path: str, deadline: Deadline) -> str:
    """An entry's HTML as the book holds it (``/raw/BOOK/content/PATH``)."""
    target = f"/raw/{quote(book, safe='')}/content/{quote(path)}"
    response = server.get(target, deadline, MAX_ARTICLE_BYTES)
    if response.status_code == 404:
        raise LookupError(path)
    if response.status_code != 200 or "html" not in response.headers.get("content-type", ""):
        raise SourceUnavailable(
            f"kiwix-serve at {server} answered {path!r} with HTTP {response.status_code} "
            f"({response.headers.get('content-type', 'no type')})"
        )
    return response.content.decode(response.encoding or "utf-8", "replace")


def suggested_path(server: Server, book: str, title: str, deadline: Deadline) -> str | None:
    """The path of the entry titled ``title`` by kiwix-serve's title suggestions."""
    target = f"/suggest?content={quote(book, safe='')}&term={quote(title, safe='')}&count=10"
    response = server.get(target, deadline, MAX_SUGGESTIONS_BYTES)
    if response.status_code != 200:
        return None
    try:  # nested without end (``[`` a million times) is a RecursionError, not a ValueError
        offered = json.loads(response.content)
    except (ValueError, RecursionError) as exc:
        raise SourceUnavailable(
            f"kiwix-serve at {server} answered a title look-up with no JSON"
        ) from exc
    wanted = " ".join(title.split())
    # {title as offered: its path}, the first of each; kiwix-serve 3.3 escapes paths as HTML
    paths: dict[str, str] = {}
    for item in offered if isinstance(offered, list) else []:
        if not (isinstance(item, dict) and item.get("kind") == "path"):
            continue
        path, value = item.get("path"), item.get("value")
        if isinstance(path, str) and 0 < len(path) <= MAX_PATH and isinstance(value, str):
            paths.setdefault(_plain(value), html.unescape(path))
    if wanted in paths:  # the very title first: "Georgia On My Mind" is a redirect's
        return paths[wanted]
    folded = {t.casefold(): p for t, p in reversed(paths.items())}
    return folded.get(wanted.casefold())


def _titled_first(server: Server, book: str, query: str, found: list[Found], deadline: Deadline):
    """``found`` with the entry titled as the query first: kiwix-serve ranks by its text
    index alone (for "Ray Charles", "Ray Charles in Person" before the article), so its title
    suggestions are asked for the entry of that very title (one request more, ~ms).

    Best effort: the search has answered, and a look-up that fails — kiwix-serve 3.3.0's own
    ``/suggest`` answers invalid JSON for a term with a TAB or a backslash — leaves its order
    as it is rather than failing the search."""
    try:
        path = suggested_path(server, book, query, deadline)
    except SourceUnavailable as exc:
        log.info("the title look-up failed; the search keeps kiwix-serve's order: %s", exc)
        return found
    if path is None:
        return found
    same = [f for f in found if f.path == path]
    titled = (
        same[0] if same else Found(path, " ".join(query.split()), "", _page(server, book, path))
    )
    return [titled, *(f for f in found if f.path != path)]


def _page(server: Server, book: str, path: str) -> str:
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


def document(server: Server, book: str, path: str, title: str, deadline: Deadline) -> Doc | None:
    """The entry at ``path`` as a document, its text made as a ZIM source's is — in a process
    of its own (core/isolation.py), by the same deadline as the reading and within
    ``CONVERT_MEMORY``: an article built to be expensive costs that process, not the server."""
    markup = article(server, book, path, deadline)
    try:
        doc = _converter().run(_converted, path, markup, title, deadline=deadline.at)
    except IsolatedFailure as exc:
        if exc.reason == "timeout":
            raise SourceUnavailable(
                f"kiwix-serve at {server} answered {_clip(path)!r} with an article that could "
                f"not be read within {deadline.seconds:g} s",
                timed_out=True,
            ) from exc
        raise SourceUnavailable(
            f"kiwix-serve at {server} answered {_clip(path)!r} with an article that could not "
            f"be read ({exc})"
        ) from exc
    if doc is None:
        return None
    if len(doc.chunks) > MAX_PASSAGES:
        raise SourceUnavailable(
            f"kiwix-serve at {server} answered {_clip(path)!r} with an article of "
            f"{len(doc.chunks):,} passages (at most {MAX_PASSAGES:,} are read)"
        )
    doc.url = _page(server, book, path)
    return doc


def _converted(path: str, markup: str, title: str) -> Doc | None:
    """(in the converting process) The document of an article's HTML."""
    made = article_document(path, markup, title)
    return made[0] if made is not None else None


@functools.lru_cache(maxsize=1)
def _converters(pid: int) -> Isolated:
    return Isolated(CONVERT_MEMORY)


def _converter() -> Isolated:
    """This process's converting processes (a forked worker makes its own)."""
    return _converters(os.getpid())


def register(
    settings: Settings,
    given: Path | str,
    name: str | None,
    options: KiwixOptions,
    progress: Progress | None = None,
) -> BuildReport:
    """Register the book: its address recorded without user or password, which are kept in
    the source's folder instead (core/addresses.py) — those given now, or, registering again
    (a rebuild), those kept there."""
    address = server_address(given)
    credentials = address.credentials
    if credentials is None and name:
        credentials = load_credentials(settings.corpus_dir / name)
    server = Server(address.url, credentials)
    deadline = Deadline.after(settings.query_timeout)
    book = choose_book(catalog(server, deadline), options.book, server)
    name = name or source_name(book)
    builder = GenerationBuilder(
        settings,
        name,
        KIND,
        input_identity=book.identity(server.url),
        # a registration: where the book is, no documents of its own
        options=BuildOptions(min_docs=0, word_index=False, language=book.language[:3] or None),
        progress=progress or NullProgress(),
    )
    with builder:
        builder.start_reading(0)
        if address.credentials is not None:  # before the switch: no call goes without them
            save_credentials(settings.corpus_dir / name, address.credentials)
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

    def build(
        self,
        settings: Settings,
        inputs: list[Path],
        name: str | None,
        options: KiwixOptions,
        build: BuildOptions,
        progress: Progress,
    ) -> BuildReport:
        return register(settings, inputs[0], name, options, progress)

    def inputs_from_record(self, recorded: dict[str, Any]) -> list[Path]:
        return [Path(recorded["url"])] if recorded.get("url") else []

    def options_from_record(self, recorded: dict[str, Any]) -> Any:
        return KiwixOptions(book=recorded.get("book"))

    def missing_inputs(self, inputs: list[Path]) -> list[str]:
        return []  # an address, not a file: a server that is down says so when asked

    def about(self, info: SourceInfo) -> str | None:
        return book_line(info.input, f"live from {info.input.get('url')}")

    def attribution(self, info: SourceInfo) -> Attribution:
        given = info.input
        return Attribution(
            f"{given.get('title') or given.get('book')} (kiwix-serve at {given.get('url')})",
            url=given.get("url"),
        )

    # -- live --------------------------------------------------------------------------------

    def search_live(
        self, info: SourceInfo, query: str, *, limit: int, offset: int, call: LiveCall
    ) -> SearchResult:
        if not query.strip():
            raise BadQuery("a search of a kiwix-serve book needs words")
        server, book = _server(info, call), info.input["book"]
        total, found = search(server, book, query, offset, limit, call.deadline)
        if offset == 0:  # title-exact first, as every source ranks (kiwix-serve does not)
            found = _titled_first(server, book, query, found, call.deadline)
        return as_result(info.name, query, total, found, offset, limit)

    def read_live(self, info: SourceInfo, path: str, title: str, call: LiveCall) -> Doc | None:
        try:
            return document(_server(info, call), info.input["book"], path, title, call.deadline)
        except LookupError:
            return None

    def find_live(self, info: SourceInfo, title: str, call: LiveCall) -> Hit | None:
        server, book = _server(info, call), info.input["book"]
        path = suggested_path(server, book, title, call.deadline)
        if path is None:
            return None
        return as_hit(info.name, title, Found(path, title, "", _page(server, book, path)), 0)


def _server(info: SourceInfo, call: LiveCall) -> Server:
    return Server(info.input["url"], call.credentials)


SOURCE_KIND = KiwixKind()
