"""Request size: a body larger than any real request is refused (413) before it is read.

The largest real body is a note at its 200,000-character limit: up to 1.2 MB as JSON with
every character escaped (``\\uXXXX``). Without a limit a 47 MB body of 4,000,000 tags is
parsed for 72 s and then holds the notes write lock.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chiezo.surfaces.rest.error_responses import error_response

MAX_BODY_BYTES = 2 * 2**20


class BodyLimit:
    """ASGI middleware: a declared ``Content-Length`` over the limit is refused at once; a
    chunked body is read up to the limit and handed on only if it fits. Everything else (most
    requests: a GET has no body) passes untouched."""

    def __init__(self, app: ASGIApp, limit: int = MAX_BODY_BYTES) -> None:
        self.app, self.limit = app, limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.limit):
            await self._refuse(scope, receive, send)
            return
        if b"chunked" not in headers.get(b"transfer-encoding", b"").lower():
            await self.app(scope, receive, send)  # no body, or one of a declared length that fits
            return
        body = b""
        message: Message = {"more_body": True}
        while message.get("more_body"):
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away
            body += message.get("body", b"")
            if len(body) > self.limit:
                await self._refuse(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            f"the request body is larger than {self.limit // 2**20} MiB",
            hint="a note holds at most 200,000 characters; send less",
        )
        response.headers["connection"] = "close"  # the unread body must not be parsed as a request
        await response(scope, receive, send)
