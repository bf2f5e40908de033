"""Where a person opens a document: the one mapping from what a source stores as a document's
``url`` to a link.

What a source stores is not always something a browser can open: Wikipedia, OSM and GeoNames
store their public page (``https://…``), a live kiwix source its server's page; a folder of
documents the file (``file:///…/a.pdf``, a PDF hit at its page: ``#page=12``); a ZIM the entry's
path inside the archive (``A/Ray_Charles``); notes and place tables nothing. Without one mapping
each surface shows what is stored: the CLI cited a ZIM article as
``/…/raycharles.zim › A/Ray_Charles`` and REST and MCP hits carried ``url: "A/Ray_Charles"`` —
only the web UI, which mapped each kind itself, linked.

Two forms, from the same mapping:

* :func:`original_href` — the web page's "Original" link: the public page, an archive entry as
  the archive shows it, a local file as this server serves it (at its page). Relative, so the
  page works under whatever address the reader reached the server by.
* :func:`open_url` — an absolute URL for REST, MCP, the CLI and answer citations: the public
  page as it is, else the server's page for it under ``base`` (a local file that is no PDF page
  opens as its document page: its text reads in a browser, where an Office file would only
  download), else None when no server is known.

``base`` is :func:`server_base`: ``CHIEZO_PUBLIC_URL`` (``chiezo serve`` sets its own address),
else — in a process that is not the server (a CLI command, ``chiezo mcp`` over stdio) — the
server running on the same data directory, as ``chiezo search`` already finds it
(store/model_host.py ``own_server_url``).
"""

from __future__ import annotations

import re
import threading
import time
from itertools import pairwise
from pathlib import Path
from urllib.parse import quote, urlsplit

from chiezo.core.config import Settings
from chiezo.store import model_host

PUBLIC_SCHEMES = ("https://", "http://")
DOT_SEGMENTS = {".", ".."}  # the path segments a URL resolver removes (RFC 3986 and WHATWG)
# How long a found (or missing) server is trusted before asking again. A lookup beside a
# running server took 9.5 ms median (50 calls; 8.4 ms of it reading /proc/net/tcp for the port's
# owner), 0.09 ms with none: paid on every hit list it would slow each search, so a CLI command
# makes one, and a long ``chiezo mcp`` session sees a server started (or stopped) within this.
LOOK_AGAIN_SECONDS = 30.0


def is_public(url: str | None) -> bool:
    """Whether ``url`` is a web address anyone's browser opens as it is."""
    return url is not None and url.lower().startswith(PUBLIC_SCHEMES)


def doc_path(source: str, doc_id: int) -> str:
    """The server's page of a document."""
    return f"/doc/{quote(source, safe='')}/{doc_id}"


def archive_href(source: str, path: str) -> str:
    """Where this server serves the entry ``path`` of an archive source (a ZIM's article as
    its archive shows it: surfaces/web/archive_pages.py).

    A ZIM may name an entry ``A/../x`` or ``.``; written as they are, a browser removes such
    dot segments and asks for another entry, and ``%2E`` does not help (WHATWG URL counts
    ``%2e`` as a dot). So the ``/`` on either side of a dot segment is written ``%2F``: the
    dots sit inside a longer segment no browser touches, and the server, which decodes the
    path before routing, reads back the very path. Other slashes stay, so the article's
    relative links (``../I/photo.jpg``) still resolve as the archive means them."""
    segments = ["archive", *path.split("/")]
    href = segments[0]
    for before, segment in pairwise(segments):
        joint = "%2F" if {before, segment} & DOT_SEGMENTS else "/"
        href += joint + quote(segment, safe="")
    return f"/doc/{quote(source, safe='')}/{href}"


def _archive_entry(url: str | None, archived: bool) -> str | None:
    """The entry's path when ``url`` is one inside an archive source (a ZIM's documents store
    their path in it), else None."""
    return url if archived and url and "://" not in url else None


def _page(url: str) -> str:
    """``#page=N`` of a local file's url (a PDF hit's page), else ''."""
    fragment = urlsplit(url).fragment
    return f"#{fragment}" if fragment.startswith("page=") else ""


def original_href(source: str, doc_id: int, url: str | None, archived: bool) -> str | None:
    """Where the document's own original opens, as the web links it: its public page; an
    archive entry as the archive shows it; a local file as this server serves it, keeping
    ``#page=N``; None for anything else (a ``javascript:`` url among them)."""
    entry = _archive_entry(url, archived)
    if entry is not None:
        return archive_href(source, entry)
    if url and url.startswith("file://"):
        return f"{doc_path(source, doc_id)}/original{_page(url)}"
    return url if is_public(url) else None


def open_url(
    base: str | None, source: str, doc_id: int, url: str | None, archived: bool
) -> str | None:
    """An absolute URL a person can open for the document: its public page as it is; else,
    under ``base`` (the server's address), the archive entry's page, a PDF at its page, or
    the document's page; None without a public page or a server."""
    if is_public(url):
        return url
    if not base:
        return None
    href = original_href(source, doc_id, url, archived)
    shown_there = _archive_entry(url, archived) is not None or bool(url and _page(url))
    return base.rstrip("/") + (href if href and shown_there else doc_path(source, doc_id))


# -- the server's address ------------------------------------------------------------------------

_found: dict[Path, tuple[float, str | None]] = {}
_found_lock = threading.Lock()


def server_base(settings: Settings) -> str | None:
    """The address this process's links point at: ``settings.public_url``, else the server
    on the same data directory (checked to listen as this user), else None. Looked up at most
    once per ``LOOK_AGAIN_SECONDS`` per data directory."""
    if settings.public_url:
        return settings.public_url.rstrip("/")
    key = Path(settings.data_dir).resolve()
    now = time.monotonic()
    with _found_lock:
        seen = _found.get(key)
        if seen is not None and now - seen[0] < LOOK_AGAIN_SECONDS:
            return seen[1]
    url = model_host.own_server_url(key)
    with _found_lock:
        _found[key] = (now, url)
    return url


def forget_servers() -> None:
    """Look the server up again on the next link (a test that starts one mid-process)."""
    with _found_lock:
        _found.clear()


def readable(url: str) -> str:
    """``url`` with its percent-encoded non-ASCII characters written out, as a browser's
    address bar shows it (an IRI, which browsers and MCP clients open alike):
    ``https://ja.wikipedia.org/wiki/日本語``, not ``…/wiki/%E6%97%A5%E6%9C%AC%E8%AA%9E``.
    Encoded, a Japanese title costs three times its characters, and more tokens than that
    (SmolLM2's tokenizer: 1 token per ``%XX`` piece or so), in every hit a model reads. An
    encoded space, slash, ``?`` or ``#`` stays encoded: decoded, it would change the address."""
    return _ENCODED_RUN.sub(_decoded_if_letters, url)


_ENCODED_RUN = re.compile(r"(?:%[0-9A-Fa-f]{2})+")


def _decoded_if_letters(match: re.Match[str]) -> str:
    try:
        text = bytes.fromhex(match.group().replace("%", "")).decode("utf-8")
    except UnicodeDecodeError:
        return match.group()
    return "".join(c if _letter(c) else quote(c, safe="") for c in text)


def _letter(c: str) -> bool:
    return ord(c) > 0x7F and c.isprintable() and not c.isspace()


def encoded(url: str) -> str:
    """``url`` with every character a URI may not hold percent-encoded, as sources store
    their public pages: the inverse of :func:`readable` (an agent reads the readable form, its
    references give the stored one)."""
    return quote(url, safe=_URI_CHARACTERS)


_URI_CHARACTERS = ":/?#[]@!$&'()*+,;=%-._~"
