"""An optional web search for the answer layer: a self-hosted SearXNG or the Brave Search API,
off unless ``CHIEZO_WEB_SEARCH`` names one. The knowledge base never uses it.

Only what a search engine's answer says of each result is used: its title, address and
snippet; no result page is ever fetched. Everything the engine answers is untrusted: the
exchange is bounded in time and bytes (core/outbound.py), redirects stay on the engine's own
host, the JSON is refused before parsing when nested deeper than any real answer, and each
field is type-checked, stripped of markup and clipped.

The engine's key (``CHIEZO_WEB_SEARCH_KEY``) and a user and password in its address are sent
with each request only: never in ``repr``, ``shown()``, an error or a log line.

Calls are spaced by ``CHIEZO_WEB_SEARCH_INTERVAL`` seconds across every process that shares a
state folder (the server's workers): a public API counts calls per key, and a SearXNG
forwards each call to engines that block an address asking too often.
"""

from __future__ import annotations

import contextlib
import fcntl
import html
import json
import logging
import math
import os
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from itertools import accumulate
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx

from chiezo.core import outbound
from chiezo.core.addresses import Address, Credentials, has_credentials
from chiezo.core.errors import BadQuery, ConfigError, SourceUnavailable

ENVIRONMENT = "CHIEZO_WEB_SEARCH"
KEY_ENVIRONMENT = "CHIEZO_WEB_SEARCH_KEY"
INTERVAL_ENVIRONMENT = "CHIEZO_WEB_SEARCH_INTERVAL"

SEARXNG, BRAVE = "searxng", "brave"
BRAVE_API = "https://api.search.brave.com/res/v1/web/search"
FORMS = f"searxng:http://HOST:PORT (a SearXNG) or brave: (the Brave Search API, its key in {KEY_ENVIRONMENT})"

WEB = "web"  # the source every web result names: never a source of the library
USER_AGENT = "chiezo"  # the project only: no version, system or Python to tell a server
DEFAULT_SECONDS = 8.0
DEFAULT_INTERVAL = 1.0
MAX_INTERVAL = 3600.0  # an interval longer than an hour is a typo
MAX_BYTES = 2 * 2**20  # a page of tens of results; kept far above, as a bound, not a size
MAX_REDIRECTS = 3
MAX_DEPTH = 20  # both engines' answers nest a few levels (an answer, a list, a result, a field)
MAX_RESULTS = 2000  # results looked at; an engine gives tens per page
MAX_LIMIT = 20  # the most results Brave's API gives per request (its ``count``)
MAX_QUERY_CHARS = 400  # the longest query Brave's API documents
MAX_TITLE, MAX_SNIPPET, MAX_URL = 200, 500, 2048
STATE_FILE = "web_search.last"
# a last call recorded further ahead than this is a clock set back, or no record of ours
MAX_AHEAD = MAX_INTERVAL + 600.0
LOCK_POLL = 0.01

log = logging.getLogger("chiezo.websearch")


class WebSearchError(SourceUnavailable):
    """The web search could not be done: its engine is down, slow, refused, or answered
    something that is not a search's answer (502; extras ``timed_out``, ``rate_limited``)."""


@dataclass(frozen=True)
class WebResult:
    """One result as the engine gave it: text only, no markup, clipped."""

    title: str
    url: str
    snippet: str

    def to_dict(self) -> dict[str, str]:
        return {"title": self.title, "url": self.url, "snippet": self.snippet}


@dataclass(frozen=True)
class WebSearch:
    """A configured engine: ``url`` (never with a user or password: those are
    ``credentials``) is SearXNG's base address or Brave's API endpoint."""

    provider: str
    url: str
    key: str | None = field(repr=False)
    interval: float = DEFAULT_INTERVAL
    credentials: Credentials | None = field(default=None, repr=False)

    @classmethod
    def parse(
        cls, setting: str | None, key: str | None, interval: float = DEFAULT_INTERVAL
    ) -> WebSearch | None:
        """The engine ``setting`` (``CHIEZO_WEB_SEARCH``) names, None when it is unset or
        empty; ``ConfigError`` when it names none this module knows."""
        if setting is None or not setting.strip():
            return None
        provider, _, rest = setting.strip().partition(":")
        provider, rest, key = provider.strip().lower(), rest.strip(), (key or "").strip() or None
        if provider not in (SEARXNG, BRAVE):
            raise ConfigError(
                f"{ENVIRONMENT} names no web search this program knows ({provider!r})",
                hint=f"give {FORMS}, or leave it empty for none",
            )
        if provider == SEARXNG and not rest:
            raise ConfigError(
                f"{ENVIRONMENT}=searxng: needs SearXNG's address",
                hint="e.g. searxng:http://127.0.0.1:8888",
            )
        if provider == BRAVE and key is None:
            raise ConfigError(
                f"{ENVIRONMENT}=brave: needs the API's key in {KEY_ENVIRONMENT}",
                hint="the key of a Brave Search API subscription (https://brave.com/search/api/)",
            )
        address = _address(rest or BRAVE_API)
        return cls(provider, address.url, key, _interval(interval), address.credentials)

    def shown(self) -> str:
        """The engine as a person may read it (``chiezo doctor``, errors): no user,
        password or key."""
        if self.provider == BRAVE:
            where = "" if self.url == BRAVE_API else f" at {self.url}"
            return f"brave{where} (key set)"
        return f"{self.provider} at {self.url}"

    def search(
        self, query: str, *, limit: int = 5, deadline: float | None = None, state_dir: Path
    ) -> list[WebResult]:
        """Up to ``limit`` (1..20) results for ``query``, all of it (the wait for the
        interval included) within ``deadline`` seconds (default 8); ``WebSearchError`` when
        the engine cannot answer in time or answers something that is no search's answer.
        ``state_dir`` keeps the time of the last call, shared by every process using it."""
        words = " ".join(query.split())[:MAX_QUERY_CHARS].strip()
        if not words:
            raise BadQuery("a web search needs words to search for")
        limit = min(max(limit, 1), MAX_LIMIT)
        seconds = DEFAULT_SECONDS if deadline is None else deadline
        if not (seconds > 0 and math.isfinite(seconds)):
            raise ValueError(f"a deadline is a number of seconds above 0, not {seconds!r}")
        until = outbound.Deadline.after(seconds)
        _take_turn(state_dir, self, until)
        data = self._json(self._get(self._request_url(words, limit), until))
        results = _results(_listed(data, self), limit)
        log.debug("web search at %s: %d results", self.shown(), len(results))
        return results

    # -- the exchange ------------------------------------------------------------------------

    def _request_url(self, words: str, limit: int) -> str:
        if self.provider == BRAVE:
            return f"{self.url}?{urlencode({'q': words, 'count': limit})}"
        return f"{self.url}/search?{urlencode({'q': words, 'format': 'json'})}"

    def _headers(self) -> dict[str, str]:
        headers = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        if self.key is not None:
            headers["X-Subscription-Token"] = self.key
        return headers

    def _get(self, url: str, until: outbound.Deadline) -> httpx.Response:
        auth = self.credentials.auth if self.credentials else None
        try:
            response = outbound.get_within(url, deadline=until, limit=MAX_BYTES, auth=auth,
                                           headers=self._headers(), follow=self._same_server,
                                           redirects=MAX_REDIRECTS)  # fmt: skip
        except outbound.Unanswered as exc:
            hint = (f"check that it runs at that address, or set {ENVIRONMENT} to another"
                    if exc.unreachable else None)  # fmt: skip
            raise WebSearchError(
                exc.said(f"the web search ({self.shown()})"),
                **({"timed_out": True} if exc.timed_out else {}),
                **({"hint": hint} if hint else {}),
            ) from exc
        return self._checked(response)

    def _same_server(self, url: str) -> str:
        """A redirect is followed only on the engine's own scheme, host and port: never
        elsewhere, where the key and credentials sent with each request would go too."""
        if _origin(url) != _origin(self.url):
            raise WebSearchError(
                f"the web search ({self.shown()}) redirected to another server; refused"
            )
        return url

    def _checked(self, response: httpx.Response) -> httpx.Response:
        status = response.status_code
        if status == 200:
            return response
        said = f"the web search ({self.shown()}) answered HTTP {status}"
        if self.provider == SEARXNG and status == 403:
            raise WebSearchError(
                said + ": its JSON format is likely not enabled",
                hint="add json to SearXNG's formats in its settings.yml "
                "(search: formats: [html, json]) and restart it",
            )
        if status in (401, 403):
            raise WebSearchError(
                said + ": it refused the credentials sent",
                hint=f"check {KEY_ENVIRONMENT}, or the user and password in {ENVIRONMENT}",
            )
        if status == 429:
            raise WebSearchError(said + ": too many searches", rate_limited=True)
        raise WebSearchError(said)

    def _json(self, response: httpx.Response) -> Any:
        """The answer parsed, refused unparsed when it nests deeper than ``MAX_DEPTH``."""
        body = response.content
        try:
            if _depth(body) > MAX_DEPTH:
                raise WebSearchError(
                    f"the web search ({self.shown()}) answered JSON nested deeper than "
                    f"{MAX_DEPTH}; refused"
                )
            return json.loads(body)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
            raise WebSearchError(
                f"the web search ({self.shown()}) answered with no JSON ({type(exc).__name__})",
                hint="is the address that of the search engine's API?",
            ) from exc


# -- the setting ---------------------------------------------------------------------------------


def _address(given: str) -> Address:
    """An engine's address, its user and password taken apart (never shown)."""
    address = Address.parse(given)
    try:
        parts = urlsplit(given)
        usable = parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
        parts.port  # noqa: B018 - read to refuse one that is no number here, not when sending
    except ValueError:  # a port that is no number, an unclosed [
        parts, usable = urlsplit(""), False
    if not usable:
        raise ConfigError(
            f"{ENVIRONMENT} needs an http:// or https:// address, not {_said(given, address)}",
            hint=f"give {FORMS}",
        )
    if parts.query or parts.fragment or "?" in given or "#" in given:
        raise ConfigError(
            f"{ENVIRONMENT} needs the engine's address without a query or fragment, not "
            f"{_said(given, address)}",
            hint=f"give {FORMS}",
        )
    return Address(address.url.rstrip("/"), address.credentials)


def _said(given: str, address: Address) -> str:
    """The address given as an error may quote it: without its user, password and query,
    or not at all when it could not be taken apart."""
    if address.url == given.strip() and has_credentials(given):
        return "the address given (not shown: it holds a user or password)"
    return repr(address.url)


def _interval(interval: float) -> float:
    if not 0 <= interval <= MAX_INTERVAL:  # NaN too
        raise ConfigError(
            f"{INTERVAL_ENVIRONMENT} must be seconds within 0..{MAX_INTERVAL:g}, got {interval!r}"
        )
    return float(interval)


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    default = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), parts.port or default


# -- the answer ----------------------------------------------------------------------------------

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SAME = bytes.maketrans(b"", b"")
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def _depth(body: bytes) -> int:
    """How deep ``body``'s arrays and objects nest, counted outside its strings, without
    parsing it (which would recurse as deep as it goes): measured 0.08 s for 2 MiB of
    brackets, 0.34 s for a 2 MiB string of escapes (the slowest form found)."""
    brackets = _STRING.sub(b"", body).translate(_SAME, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


def _listed(data: Any, engine: WebSearch) -> list[Any]:
    """The answer's list of results: SearXNG's ``results``, Brave's ``web.results`` (no
    ``web`` at all when nothing was found)."""
    listed: Any = None
    if isinstance(data, dict) and engine.provider == SEARXNG:
        listed = data.get("results")
    elif isinstance(data, dict):
        web = data.get("web")
        listed = web.get("results") if isinstance(web, dict) else None
        if web is None and data.get("type") == "search":
            listed = []
    if not isinstance(listed, list):
        raise WebSearchError(
            f"the web search ({engine.shown()}) answered JSON that holds no list of results"
        )
    return listed


def _results(listed: list[Any], limit: int) -> list[WebResult]:
    found: dict[str, WebResult] = {}
    for item in _items(listed):
        result = _result(item)
        if result is not None:
            found.setdefault(result.url.partition("#")[0], result)
            if len(found) == limit:
                break
    return list(found.values())


def _items(listed: list[Any]) -> Iterator[dict[str, Any]]:
    for item in listed[:MAX_RESULTS]:
        if isinstance(item, dict):
            yield item


def _result(item: dict[str, Any]) -> WebResult | None:
    """A result whose title and address are text and whose address is a web page's; the
    snippet is SearXNG's ``content`` or Brave's ``description``."""
    title, url = item.get("title"), item.get("url")
    if not isinstance(title, str) or not isinstance(url, str) or not _web_address(url):
        return None
    snippet = item.get("content", item.get("description"))
    return WebResult(
        _text(title, MAX_TITLE),
        url.strip(),
        _text(snippet, MAX_SNIPPET) if isinstance(snippet, str) else "",
    )


def _web_address(url: str) -> bool:
    url = url.strip()
    if len(url) > MAX_URL or not url.isprintable() or " " in url:
        return False
    try:
        parts = urlsplit(url)
        return parts.scheme.lower() in ("http", "https") and bool(parts.hostname)
    except ValueError:
        return False


_TAG = re.compile(r"<[^<>]*>")
_SPACE = re.compile(r"\s+")
# control characters, and those that turn text right to left (a result that reads otherwise
# than it is)
_HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _text(markup: str, chars: int) -> str:
    """``markup`` as plain text on one line (engines mark the words found with
    ``<strong>``), at most ``chars`` long."""
    text = _SPACE.sub(" ", html.unescape(_TAG.sub("", markup)))
    text = _HIDDEN.sub("", text).strip()
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "…"


# -- the interval between calls ------------------------------------------------------------------


def _take_turn(state_dir: Path, engine: WebSearch, until: outbound.Deadline) -> None:
    """Wait for this call's turn: ``interval`` after the last call any process sharing
    ``state_dir`` made or has taken a turn for. The turn is reserved under the lock and
    waited for outside it, so that callers queue one interval apart and none holds the lock
    while it sleeps; a turn after the deadline is ``WebSearchError`` at once."""
    if engine.interval <= 0:
        return
    state_dir.mkdir(parents=True, exist_ok=True)
    with _locked(state_dir / STATE_FILE, engine, until) as fd:
        now = time.time()
        last = _last_call(fd, now)
        turn = max(now, last + engine.interval)
        wait = turn - now
        if time.monotonic() + wait > until.at:
            raise WebSearchError(
                f"the web search ({engine.shown()}) is rate limited: the next call may be "
                f"made in {wait:.1f} s, after this one's {until.seconds:g} s",
                rate_limited=True,
                hint=f"{INTERVAL_ENVIRONMENT} sets the seconds between calls",
            )
        os.pwrite(fd, f"{turn:.6f}\n".encode().ljust(32), 0)
    time.sleep(wait)


def _last_call(fd: int, now: float) -> float:
    try:
        last = float(os.pread(fd, 64, 0).decode("ascii"))
    except ValueError:  # empty, or not written by this module
        return 0.0
    return last if math.isfinite(last) and last <= now + MAX_AHEAD else 0.0


@contextlib.contextmanager
def _locked(path: Path, engine: WebSearch, until: outbound.Deadline) -> Iterator[int]:
    """``path`` open and locked (``flock``, released when the descriptor closes, so by a
    process that dies too), tried until the deadline: a lock is held for microseconds."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() + LOCK_POLL > until.at:
                    raise WebSearchError(
                        f"the web search ({engine.shown()}) is rate limited: its record of "
                        f"calls stayed locked for {until.seconds:g} s",
                        rate_limited=True,
                    ) from None
                time.sleep(LOCK_POLL)
        yield fd
    finally:
        os.close(fd)
