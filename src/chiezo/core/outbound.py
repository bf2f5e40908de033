"""Requests to a server the user named (a kiwix-serve), each bounded whole: one deadline for
connecting, sending, the status line, every header and the body, and a cap on the body's bytes.

httpx's timeouts bound each socket operation, not an exchange: a server sending one header
line every 0.5 s never let a read wait 5 s, so a live search took ~200 s and six of them left a
server with four request threads unable to answer ``/healthz`` for 60 s. A check between the
body's chunks bounds the body but not the head. Here every socket operation waits at most what
is left of the exchange's deadline (``_DeadlineStream``), so the exchange ends by its deadline
whatever the server trickles; h11 bounds the head's size (100 KiB, httpcore's own limit).
"""

from __future__ import annotations

import contextvars
import functools
import os
import ssl
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

CONNECT_SECONDS = 2.0  # a server on loopback or the LAN connects at once, or is not there
# What is read is what was sent: a compressed answer could expand a thousandfold past the
# check of its size between pieces.
IDENTITY = {"Accept-Encoding": "identity"}

# When the exchange under way must end (time.monotonic()); None outside ``get``.
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "chiezo_outbound_deadline", default=None
)


@dataclass(frozen=True)
class Deadline:
    """When an exchange (or several: a search and its title look-up) must have ended."""

    at: float  # time.monotonic()
    seconds: float  # what it allowed in all, as messages say it

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds, seconds)


class TooLarge(Exception):
    """The server answered more than the bytes allowed."""


class Unanswered(Exception):
    """A server gave no usable answer (``get_within``): too slow, too much, not there, or
    redirecting without end. ``said(who)`` is the reason in words, its subject ``who``."""

    def __init__(self, reason: str, *, timed_out: bool = False, unreachable: bool = False):
        super().__init__(reason)
        self.reason, self.timed_out, self.unreachable = reason, timed_out, unreachable

    def said(self, who: str) -> str:
        return f"{who} {self.reason}"


def _left(timeout: float | None, error: type[Exception]) -> float | None:
    """What a socket operation may wait: its own timeout, cut to what is left of the deadline;
    ``error`` when nothing is left."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the exchange's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self.inner.read(max_bytes, _left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, _left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> _DeadlineStream:
        wait = _left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self.inner.start_tls(ssl_context, server_hostname, wait))

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class _DeadlineBackend(httpcore.SyncBackend):
    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> _DeadlineStream:
        wait = _left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(super().connect_tcp(host, port, wait, local_address, socket_options))


class _Transport(httpx.HTTPTransport):
    """httpx's transport over a pool whose sockets keep the exchange's deadline."""

    def __init__(self) -> None:
        super().__init__()
        # httpx builds its pool with the default backend; this one is the same but for it
        self._pool = httpcore.ConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            network_backend=_DeadlineBackend(),
        )


@functools.lru_cache(maxsize=1)
def _client(pid: int) -> httpx.Client:
    """One client per process (keyed by its pid: a forked worker makes its own), its
    connections kept alive: a new client per request built a TLS context each time, 22 ms —
    most of a live search's time (design.md §36.5)."""
    return httpx.Client(transport=_Transport(), follow_redirects=False)


@contextmanager
def _until(deadline: float) -> Iterator[None]:
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def get(
    url: str,
    *,
    deadline: float,
    limit: int,
    auth: tuple[str, str] | None = None,
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    """GET ``url``, whole by ``deadline`` (time.monotonic()) and at most ``limit`` bytes of
    body: ``httpx.TimeoutException`` when the deadline passes at any point of the exchange,
    ``TooLarge`` past the limit, other ``httpx.HTTPError`` as httpx raises them. Redirects
    are returned, not followed (the caller decides where it may go). ``headers`` go over
    ``IDENTITY`` (an answer encoded all the same is refused below)."""
    wait = max(deadline - time.monotonic(), 0.001)
    timeouts = httpx.Timeout(wait, connect=min(CONNECT_SECONDS, wait))
    client = _client(os.getpid())
    with _until(deadline):
        sent = {**IDENTITY, **headers} if headers else IDENTITY
        request = client.build_request("GET", url, headers=sent, timeout=timeouts)
        response = client.send(request, auth=httpx.BasicAuth(*auth) if auth else None, stream=True)
        try:
            if response.headers.get("content-encoding", "identity").lower() != "identity":
                raise httpx.DecodingError("the answer is encoded although none was asked for")
            body = bytearray()
            for piece in response.iter_raw():
                body += piece
                if len(body) > limit:
                    raise TooLarge(limit)
        finally:
            response.close()
    response._content = bytes(body)
    return response


def get_within(
    url: str,
    *,
    deadline: Deadline,
    limit: int,
    follow: Callable[[str], str],
    redirects: int,
    auth: tuple[str, str] | None = None,
    headers: dict[str, str] | None = None,
    check: Callable[[httpx.Response], None] | None = None,
) -> httpx.Response:
    """``get`` following at most ``redirects`` redirects, each to the address ``follow``
    returns for it (raising to refuse one: another server would receive the credentials
    too); ``check`` sees every response first. ``Unanswered`` says why none came: the
    deadline, the byte limit, a server not there, or redirects without end."""
    try:
        for _ in range(redirects + 1):
            response = get(url, deadline=deadline.at, limit=limit, auth=auth, headers=headers)
            if check is not None:
                check(response)
            if not response.is_redirect:
                return response
            url = follow(str(response.url.join(response.headers["location"])))
    except httpx.TimeoutException as exc:
        raise Unanswered(f"did not answer within {deadline.seconds:g} s", timed_out=True) from exc
    except TooLarge as exc:
        raise Unanswered(f"answered more than {limit:,} bytes") from exc
    # ValueError: a redirect to an address that is none (``http://[::1``)
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        raise Unanswered(f"cannot be reached ({type(exc).__name__})", unreachable=True) from exc
    raise Unanswered(f"redirected more than {redirects} times")
