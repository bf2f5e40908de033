"""An OpenAPI document that says what the API really answers.

FastAPI's default declares a 422 on every route (never sent: validation errors are reshaped
into 400s) and none of the errors the routes do send, so a client generated from it, or a
fuzzer checking against it, is told the wrong thing (schemathesis found 32 undocumented status
codes). Here every route names its own errors with ``errors(...)``, all in the one
error shape — with the route's own reasons (``why``) where a schema-valid request can still
get one, as an embed job of a source without vectors does — and ``install`` adds those every
route can give and drops the phantom 422. The search routes also declare what they answer
(``SearchBody``): hits with their coordinates, distance and section.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field

from chiezo.surfaces.rest.http_server import MAX_FIELD_BYTES, MAX_TARGET_BYTES

WHEN = {
    400: "a bad parameter or body: unknown parameter or field, a value out of range, an empty "
    "query, a filter the source cannot apply (`allowed_parameters`, `allowed_fields`, "
    "`candidates`, `details`); on any route, a Host header that is not one host[:port] (or "
    "two of them), or a request the HTTP parser cannot read",
    401: "a write without the bearer token CHIEZO_TOKEN requires",
    403: "writes are disabled (beyond loopback without a token), or the browser Origin is "
    "another site",
    404: "unknown source (`known_sources`), document (`candidates`: the closest titles), note "
    "or job",
    409: "the source needs a rebuild for this version (`schema_version`), a job is running "
    "(`running_job`), a live source was imported and its server is to be registered here, "
    "or an answer from the web was asked where no web search is set up (CHIEZO_WEB_SEARCH)",
    413: "the request body is larger than 2 MiB",
    414: f"the request target (path and query string) is longer than {MAX_TARGET_BYTES:,} bytes",
    421: "the Host names this server by a name it does not answer to (DNS-rebinding "
    "protection; see CHIEZO_ALLOWED_HOSTS)",
    422: "only with `strict`: the model's answer has a sentence that cites no source or that "
    "its sources do not support (`answer`, `references`, `cited`, `claims`, `unsupported`, "
    "`uncited`); whether it comes depends on the answer, not on the request's form",
    431: f"the request's header fields (its head beyond the target, or the trailer of a chunked "
    f"body) are longer than {MAX_FIELD_BYTES:,} bytes",
    502: "a source searched live (a kiwix-serve book) could not be asked: its server is down, "
    "too slow or answered something that is not a search feed or an article",
    503: "the model endpoint is not configured or not reachable (the excerpts found are "
    "included), or the notes are locked by another writer (retry)",
    504: "the query ran past CHIEZO_QUERY_TIMEOUT and was stopped",
    507: "the disk is full; nothing was written",
}
# a malformed, too long or foreign request, refused before any route (http_server.py, hosts)
EVERY_ROUTE = (400, 414, 421, 431)
API_ROUTE = (400,)  # /v1 routes refuse unknown query parameters
WITH_BODY = (413,)


class ErrorBody(BaseModel):
    """The one error shape of every surface: the reason, the status, and what helps the
    caller take the next step."""

    model_config = ConfigDict(extra="allow")
    error: str = Field(description="what went wrong, in words")
    status: int = Field(description="the HTTP status, repeated")
    hint: str | None = Field(default=None, description="what to do instead")


class PointBody(BaseModel):
    """Coordinates, in degrees (WGS 84), as ``doc`` and ``filter`` give them too."""

    lat: float
    lon: float


class HitBody(BaseModel):
    """One search hit. ``distance_km``, ``point``, ``section`` and ``explain`` are present only
    when they apply."""

    model_config = ConfigDict(extra="allow")
    source: str
    doc_id: int
    key: str = Field(description="the source's own id of the document")
    title: str
    snippet: str = Field(
        description="plain text where the query's words are, or the passage that matched by meaning"
    )
    score: float
    rank_score: float = Field(description="popularity, 0..1")
    url: str | None = Field(
        description="where a person opens the document: its public page (Wikipedia, OSM, "
        "GeoNames), else this server's page for it (a PDF at its page, a ZIM article as the "
        "archive shows it); null when it has no public page and no server address is known"
    )
    source_url: str | None = Field(
        default=None,
        description="the address the source stores: a public page, a local file's "
        "`file://` url, or an entry's path inside an archive (a ZIM's `A/Ray_Charles`)",
    )
    title_match: bool = Field(description="the title (or an alias) equals the query")
    distance_km: float | None = Field(
        default=None, description="with `near` or `near_doc`: great-circle distance from that point"
    )
    point: PointBody | None = Field(
        default=None, description="the document's coordinates, where it has them"
    )
    section: str | None = Field(
        default=None,
        description="where in the document the snippet "
        "is: the heading path of its passage without the title "
        "(`歴史 > 近代`), or a PDF page (`p. 12`)",
    )
    explain: dict[str, Any] | None = Field(
        default=None, description="with `explain`: ranks and scores on each side"
    )


class SearchBody(BaseModel):
    """A page of hits and how they were found."""

    model_config = ConfigDict(extra="allow")
    query: str
    hits: list[HitBody]
    total: int
    total_is_lower_bound: bool
    mode: str = Field(description="the full-text plan, e.g. `words+fts`, or `semantic`")
    retrieval: str = Field(
        description="keyword, semantic, hybrid, keyword-fallback (joined with + across sources)"
    )
    order: str
    offset: int
    limit: int
    sources: list[str]
    notes: list[str]
    notices: list[dict[str, Any]] = Field(description="the notes as `{code, params, text}`")


# the answers declared beyond errors: what a client generated from the document can read
ANSWERS = {"/v1/search": SearchBody, "/v1/{source}/search": SearchBody}


def errors(*statuses: int, why: dict[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """``responses=`` for a route: the errors it can answer, each with the error shape.
    ``why``: a route's own reasons for a status, where WHEN's general ones would not say what
    a client needs to know (a 400 that a schema-valid request gets, and when)."""
    why = why or {}
    return {
        status: {"model": ErrorBody, "description": why.get(status, WHEN[status])}
        for status in statuses
    }


def install(app: FastAPI) -> None:
    """Replace ``app.openapi`` with the honest document (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            schema = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
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
                responses.setdefault(
                    str(status),
                    {
                        "description": WHEN[status],
                        "content": {"application/json": {"schema": error_ref}},
                    },
                )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components["ErrorBody"] = ErrorBody.model_json_schema()
    _declare_answers(schema, components)
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)
    return schema


def _declare_answers(schema: dict[str, Any], components: dict[str, Any]) -> None:
    """The 200 body of each route in ANSWERS (the routes answer with a JSONResponse, so
    FastAPI declares an empty schema), its models among the components."""
    for path, model in ANSWERS.items():
        operation = schema.get("paths", {}).get(path, {}).get("get")
        if operation is None:
            continue
        body = model.model_json_schema(ref_template="#/components/schemas/{model}")
        components.update(body.pop("$defs", {}))
        components[model.__name__] = body
        ok = operation["responses"].setdefault("200", {"description": "Successful Response"})
        ref = {"$ref": f"#/components/schemas/{model.__name__}"}
        ok.setdefault("content", {}).setdefault("application/json", {})["schema"] = ref
