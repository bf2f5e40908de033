"""An OpenAPI document that says what the API really answers.

FastAPI's default declares a 422 on every route (never sent: validation errors are reshaped
into 400s) and none of the errors the routes do send, so a client generated from it, or a
fuzzer checking against it, is told the wrong thing (schemathesis found 32 undocumented status
codes, issue #14). Here every route names its own errors with ``errors(...)``, all in the one
error shape, and ``install`` adds those every route can give and drops the phantom 422.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field

WHEN = {
    400: "a bad parameter or body: unknown parameter or field, a value out of range, an empty "
    "query, a filter the source cannot apply (`allowed_parameters`, `allowed_fields`, "
    "`candidates`, `details`)",
    401: "a write without the bearer token CHIEZO_TOKEN requires",
    403: "writes are disabled (beyond loopback without a token), or the browser Origin is "
    "another site",
    404: "unknown source (`known_sources`), document (`candidates`: the closest titles), note "
    "or job",
    409: "the source needs a rebuild for this version (`schema_version`), or a job is running "
    "(`running_job`)",
    413: "the request body is larger than 2 MiB",
    421: "the Host names this server by a name it does not answer to (DNS-rebinding "
    "protection; see CHIEZO_ALLOWED_HOSTS)",
    422: "`strict`: a sentence cites no source or its sources do not support it (`answer`, "
         "`references`, `cited`, `claims`, `unsupported`, `uncited`)",
    503: "the model endpoint is not configured or not reachable (the excerpts found are "
    "included), or the notes are locked by another writer (retry)",
    504: "the query ran past CHIEZO_QUERY_TIMEOUT and was stopped",
    507: "the disk is full; nothing was written",
}
EVERY_ROUTE = (421,)  # a foreign Host
API_ROUTE = (400,)  # /v1 routes refuse unknown query parameters
WITH_BODY = (413,)


class ErrorBody(BaseModel):
    """The one error shape of every surface: the reason, the status, and what helps the
    caller take the next step."""

    model_config = ConfigDict(extra="allow")
    error: str = Field(description="what went wrong, in words")
    status: int = Field(description="the HTTP status, repeated")
    hint: str | None = Field(default=None, description="what to do instead")


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: the errors it can answer, each with the error shape."""
    return {status: {"model": ErrorBody, "description": WHEN[status]} for status in statuses}


def install(app: FastAPI) -> None:
    """Replace ``app.openapi`` with the honest document (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(title=app.title, version=app.version,
                                 description=app.description, routes=app.routes)  # fmt: skip
            app.openapi_schema = _honest(schema)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _honest(schema: dict[str, Any]) -> dict[str, Any]:
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            phantom = responses.get("422", {}).get("content", {}).get("application/json", {})
            if phantom.get("schema", {}).get("$ref", "").endswith("/HTTPValidationError"):
                del responses["422"]
            added = EVERY_ROUTE + (API_ROUTE if path.startswith("/v1/") else ())
            added += WITH_BODY if "requestBody" in operation else ()
            for status in added:
                responses.setdefault(str(status), {
                    "description": WHEN[status],
                    "content": {"application/json": {"schema": error_ref}},
                })  # fmt: skip
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorBody"] = ErrorBody.model_json_schema()
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return schema
