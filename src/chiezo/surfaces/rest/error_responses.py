"""One JSON error shape for every failure: ``{"error", "status", ...extras}``.

ChiezoError carries its own status and extras (known sources, candidates, allowed fields,
hint); FastAPI's own errors (bad parameter types, unknown routes) are reshaped to match, and
anything unexpected is logged and reported without a traceback — by a middleware rather than
an exception handler, because Starlette re-raises after its last-resort handler has answered
and uvicorn then resets the keep-alive connection (the client's *next* request failed: 68
dropped connections in 6,000 fuzzed requests).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chiezo.core.errors import REST, ChiezoError, InternalError

log = logging.getLogger("chiezo.api")


def error_response(status: int, message: str, **extras: object) -> JSONResponse:
    body = {
        "error": message,
        "status": status,
        **{k: v for k, v in extras.items() if v is not None},
    }
    return JSONResponse(body, status_code=status)


def install(app: FastAPI) -> None:
    @app.exception_handler(ChiezoError)
    async def chiezo_error(request: Request, exc: ChiezoError) -> JSONResponse:
        # the route's {source} completes a hint naming an operation on it (GET /v1/osm/features)
        body = exc.to_dict(REST, source=request.path_params.get("source"))
        return JSONResponse(body, status_code=exc.status)

    @app.exception_handler(RequestValidationError)
    async def invalid_request(request: Request, exc: RequestValidationError) -> JSONResponse:
        problems = []
        for err in exc.errors():
            where = ".".join(
                str(p) for p in err.get("loc", ()) if p not in ("query", "body", "path")
            )
            problems.append(f"{where or 'request'}: {err.get('msg')}")
        return error_response(400, "invalid request: " + "; ".join(problems), details=problems)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            return error_response(
                404,
                f"no such endpoint: {request.url.path}",
                hint="the API is described at /docs and /openapi.json",
            )
        response = error_response(exc.status_code, str(exc.detail))
        response.headers.update(exc.headers or {})
        if exc.status_code == 405:
            response.headers["allow"] = _allowed_methods(request)
        return response


def _allowed_methods(request: Request) -> str:
    """Every method some route takes at this path: Starlette names only the first route's
    (GET for /v1/jobs, which is also POST)."""
    from starlette.routing import Match

    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE and getattr(route, "methods", None):
            methods |= set(route.methods)
    return ", ".join(sorted(methods))


class UnexpectedErrors:
    """A bug answers 500 in the one error shape and the connection stays open for the next
    request. (Once the response has started, only closing the connection can end it.)"""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            log.exception("unexpected error on %s", scope.get("path"))
            if started:
                raise
            response = JSONResponse(InternalError.wrapping(exc).to_dict(), status_code=500)
            await response(scope, receive, send)
