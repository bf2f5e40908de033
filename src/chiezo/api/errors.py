"""One JSON error shape for every failure: ``{"error", "status", ...extras}``.

ChiezoError carries its own status and extras (known sources, candidates, allowed fields,
hint); FastAPI's own errors (bad parameter types, unknown routes) are reshaped to match, and
anything unexpected is logged and reported without a traceback.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..errors import ChiezoError

log = logging.getLogger("chiezo.api")


def error_response(status: int, message: str, **extras) -> JSONResponse:
    body = {
        "error": message,
        "status": status,
        **{k: v for k, v in extras.items() if v is not None},
    }
    return JSONResponse(body, status_code=status)


def install(app: FastAPI) -> None:
    @app.exception_handler(ChiezoError)
    async def chiezo_error(request: Request, exc: ChiezoError) -> JSONResponse:
        return JSONResponse(exc.to_dict(), status_code=exc.status)

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
        return error_response(exc.status_code, str(exc.detail))

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unexpected error on %s", request.url.path)
        return error_response(
            500,
            f"internal error ({type(exc).__name__})",
            hint="this is a bug; the server log has the details",
        )
