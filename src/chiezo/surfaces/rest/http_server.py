"""The HTTP server under ``chiezo serve``: uvicorn, with Chiezo's own answers where uvicorn would
give its own, and a way to know when it really serves.

* A request the HTTP parser cannot take apart got uvicorn's ``400 text/plain "Invalid HTTP
  request received."`` — the one failure outside the JSON error shape (SECURITY.md rule 7).
  ``ChiezoHttpProtocol`` answers it in that shape, with the parser's reason, and a request
  target longer than ``MAX_TARGET_BYTES`` with 414, and header fields longer than
  ``MAX_FIELD_BYTES`` with 431: each is refused as soon as the parser has read that much of it,
  rather than buffered to its end (uvicorn keeps the whole of a request line in memory, and
  httptools the whole of a header, however long).
* ``chiezo serve`` printed its address before uvicorn had even built the app (10-18 s on a
  real library), so a script that waited for the line found the port closed. ``serve`` calls
  ``on_ready`` only once every worker has started listening.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.synchronize
import sys
import threading
from collections.abc import Callable

import httptools
import uvicorn
from uvicorn.config import STARTUP_FAILURE
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

# The longest request target (path and query string) answered. httptools cannot split a longer
# URL into path and query (its offsets are 16-bit), so beyond this uvicorn could only fail;
# a GET that needs more (a very long question) belongs in a POST body.
MAX_TARGET_BYTES = 65_535
# The most bytes of header fields a request may send: its head beyond the request target (whose
# own limit is above), or the trailer of a chunked body. httptools keeps a header's name and
# value in memory until the next header begins, however long: one 10 MB header was answered
# 200, and twenty connections sending 25 MB headers took both workers from 0.4 to 1.0 GB. So
# the bytes are counted as they are fed to the parser (see ``data_received``), not per header.
MAX_FIELD_BYTES = 65_536
# After a refusal, how long the rest of the request is read and dropped before the connection
# is closed: closing with unread data makes the kernel reset the connection, and the client
# may then lose the answer it was sent.
LINGER_SECONDS = 5.0
# Counts the server processes that are ready: shared with the worker processes when there are
# several, a thread's own when this process serves alone (see ``serve``).
ReadyCount = threading.Semaphore | multiprocessing.synchronize.Semaphore


class _TargetTooLong(Exception):
    pass


FIELDS_TOO_LONG = (431, f"the request's header fields are longer than {MAX_FIELD_BYTES:,} bytes")


class ChiezoHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, answering what its parser refuses in the JSON error shape."""

    _refused = False
    _deferred: tuple[int, str] | None = None
    _linger: asyncio.TimerHandle | None = None
    # Bytes fed since the parser last left header fields (passed the end of a head, a body byte
    # or the end of a message): while a head or a trailer is unfinished, what it has taken so
    # far; ``_target_bytes`` of them are the request target's, which has a limit of its own.
    _field_bytes = 0
    _target_bytes = 0
    _left_fields = False  # during one feed: the parser left header fields

    def on_url(self, url: bytes) -> None:
        if len(self.url) + len(url) > MAX_TARGET_BYTES:
            raise _TargetTooLong  # the parser stops here: the rest of the URL is never kept
        self._target_bytes += len(url)
        super().on_url(url)

    def on_headers_complete(self) -> None:
        self._left_fields = True
        super().on_headers_complete()

    def on_body(self, body: bytes) -> None:
        self._left_fields = True
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._left_fields = True
        super().on_message_complete()

    def data_received(self, data: bytes) -> None:
        """uvicorn's own, but fed to the parser in pieces no longer than the header fields may
        still grow: header fields that reach ``MAX_FIELD_BYTES`` unfinished are refused before
        the parser holds more of them. A piece in which the parser leaves the fields may end
        with the start of the next pipelined head, which is not counted: never a refusal of a
        head within the limit, and at most one piece (64 KiB) more of one beyond it."""
        if self._refused:
            return  # the rest of a refused request, read only so that the answer arrives
        self._unset_keepalive_if_required()
        rest = memoryview(data)
        while rest:
            room = MAX_FIELD_BYTES - (self._field_bytes - self._target_bytes)
            if room <= 0:
                self._refuse(*FIELDS_TOO_LONG)
                return
            piece, rest = rest[:room], rest[room:]
            if not self._feed(piece):
                return

    def _feed(self, piece: memoryview) -> bool:
        """Parse ``piece``; False when the rest of what arrived is not to be parsed."""
        self._left_fields = False
        try:
            self.parser.feed_data(piece)
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return False
        except httptools.HttpParserError as exc:
            self._refuse(*_refusal(exc))
            return False
        finally:  # an upgrade leaves the head too: what follows is counted from there
            if self._left_fields:
                self._field_bytes = self._target_bytes = 0
            else:
                self._field_bytes += len(piece)
        return True

    def send_400_response(self, msg: str) -> None:
        self._refuse(400, "invalid HTTP request")  # should uvicorn call it from elsewhere

    def _refuse(self, status: int, message: str) -> None:
        """Answer ``status`` in the JSON error shape and read no more requests from this
        connection: the parser has lost its place in the stream."""
        self.logger.warning("refused a request: %s", message)
        self._refused = True
        self.flow.resume_reading()  # what follows is read and dropped (pipelining paused it)
        cycle = self.cycle
        if cycle is None or cycle.response_complete:
            self._answer(status, message)
        elif not cycle.more_body:  # sent after requests whose answers are still being written
            self._deferred = (status, message)
        elif cycle.response_started or self.pipeline:  # nothing can cut into an answer
            self.transport.close()
        else:  # the body of the request being served is broken: its handler sees the client go
            cycle.disconnected = True
            cycle.message_event.set()
            self._answer(status, message)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._deferred and self.cycle.response_complete and not self.transport.is_closing():
            self._unset_keepalive_if_required()
            self._answer(*self._deferred)

    def _answer(self, status: int, message: str) -> None:
        from chiezo.surfaces.rest.error_responses import (
            error_response,  # FastAPI: in a worker, already loaded by the app
        )

        body = error_response(status, message).body
        head = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:  # date, server: as every answer
            head.append(name + b": " + value + b"\r\n")
        head += [
            b"content-type: application/json\r\n",
            b"content-length: %d\r\n" % len(body),
            b"x-content-type-options: nosniff\r\n",
            b"connection: close\r\n\r\n",
        ]
        self.transport.write(b"".join(head) + body)
        if self.transport.can_write_eof():
            self.transport.write_eof()  # the client sees the end at once; its close ends ours
        self._linger = self.loop.call_later(LINGER_SECONDS, self.transport.close)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._linger is not None:
            self._linger.cancel()
        super().connection_lost(exc)


def _refusal(exc: httptools.HttpParserError) -> tuple[int, str]:
    """The status and message for what the parser refused. The reasons are llhttp's own fixed
    texts ("Invalid header token"), never bytes of the request."""
    cause = exc.__context__ if isinstance(exc, httptools.HttpParserCallbackError) else exc
    if isinstance(cause, _TargetTooLong):
        return 414, f"the request target is longer than {MAX_TARGET_BYTES:,} bytes"
    if isinstance(cause, httptools.HttpParserError):
        return 400, f"invalid HTTP request: {cause}"
    return 400, "invalid HTTP request"


class _Ready:
    """uvicorn's ``callback_notify``, which each server process calls from its main loop — so
    first right after it started listening with the app built: counts that process as ready,
    once. Passed to worker processes inside their config (the semaphore is inherited)."""

    def __init__(self, semaphore: ReadyCount) -> None:
        self.semaphore, self.told = semaphore, False

    async def __call__(self) -> None:
        if not self.told:
            self.told = True
            self.semaphore.release()


def serve(app: str, *, host: str, port: int, workers: int, on_ready: Callable[[], None]) -> None:
    """Serve the app factory ``app`` ("module:function") until stopped, in ``workers``
    processes (1: in this one); ``on_ready`` is called once all of them answer."""
    # worker processes inherit a process-shared semaphore; one process needs no more than a
    # thread's (a named one would outlive a process killed by SIGTERM, and be reported leaked)
    ready = (
        multiprocessing.get_context("spawn").Semaphore(0) if workers > 1 else threading.Semaphore(0)
    )
    config = uvicorn.Config(
        app,
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level="warning",
        # no access log at any level: a request line can carry a person's location
        # (near=here&location=…) or words they searched; /metrics counts by route template
        access_log=False,
        http=ChiezoHttpProtocol,
        callback_notify=_Ready(ready),
    )
    threading.Thread(target=_announce, args=(ready, workers, on_ready), daemon=True).start()
    try:
        if workers > 1:
            _supervise(config)
        else:
            server = uvicorn.Server(config)
            server.run()
            if not server.started:  # the port was taken or the app failed: uvicorn said why
                sys.exit(STARTUP_FAILURE)
    except KeyboardInterrupt:  # Ctrl-C: uvicorn has already shut down
        pass


def _announce(ready: ReadyCount, workers: int, on_ready: Callable[[], None]) -> None:
    for _ in range(workers):
        ready.acquire()
    on_ready()


def _supervise(config: uvicorn.Config) -> None:
    """uvicorn.run's path for several workers, with this config (uvicorn.run takes no
    ``callback_notify``): one socket bound here, shared by the worker processes."""
    from uvicorn.supervisors import Multiprocess

    Multiprocess(config, sockets=[config.bind_socket()]).run()  # each worker builds its Server
