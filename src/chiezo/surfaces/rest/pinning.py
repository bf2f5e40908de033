"""One generation per source for the whole of a request, and the response says which.

A source switched in while a request runs (a rebuild, a rollback, a rolling switch across the
replicas of a cluster) must not mix into it: a search that opens the source again for its
snippets would otherwise read two generations. ``Library.pinned`` holds, for the request, the
generation each source was first opened at; the response names them in ``X-Chiezo-Generation``
(``jawiki=gen-20261201T061500-1a2b3c.db, osm=…``), so a client — or a test of a rolling
switch — can tell which data answered.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chiezo.store.library import Library, Source

HEADER = b"x-chiezo-generation"


class PinnedGenerations:
    """ASGI middleware: each HTTP request inside ``library.pinned()``; the generations it
    opened go into the response header. A streamed answer keeps its pins until its last byte,
    but its header can only name what was opened before the first one."""

    def __init__(self, app: ASGIApp, library: Library) -> None:
        self.app, self.library = app, library

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with self.library.pinned() as used:

            async def send_named(message: Message) -> None:
                if message["type"] == "http.response.start":
                    named = header_value(used)
                    if named:
                        message = {
                            **message,
                            "headers": [*message.get("headers", []), (HEADER, named)],
                        }
                await send(message)

            await self.app(scope, receive, send_named)


def header_value(used: dict[str, Source]) -> bytes:
    """``name=generation`` of each read-only source opened, by name (the writable notes have
    no generations). Names and generation files are ASCII (generations.NAME_PATTERN)."""
    return ", ".join(
        f"{name}={source.path.name}" for name, source in sorted(used.items()) if not source.writable
    ).encode("ascii")
