"""``create_app()``: the REST API (``/v1``), the MCP endpoint (``/mcp``) and health, in one app.

Routes are thin: parse parameters, call the service, return its data. Parameters a route does
not know are refused (400 with the allowed ones) rather than silently ignored — a misspelt
filter that is ignored returns wrong results with a straight face.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from enum import Enum
from typing import TYPE_CHECKING, Annotated, Any

import anyio.to_thread
from fastapi import Depends, FastAPI, Query, Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from chiezo import __version__
from chiezo.core.config import Settings
from chiezo.core.errors import BadQuery, Uncited
from chiezo.core.models import SearchResult
from chiezo.ops import answering, operating, remembering
from chiezo.ops.context import Context
from chiezo.ops.registry import BINDINGS, Binding
from chiezo.ops.requests import (
    AskRequest,
    ForgetRequest,
    RecallRequest,
    RememberRequest,
    UpdateRequest,
)
from chiezo.ops.requests import Request as OperationRequest
from chiezo.surfaces import web
from chiezo.surfaces.mcp.server import http_endpoint
from chiezo.surfaces.rest import docs_pages, jobs_routes, metrics, openapi
from chiezo.surfaces.rest import error_responses as errors
from chiezo.surfaces.rest.disclosure import Disclosure, on_this_machine
from chiezo.surfaces.rest.limits import BodyLimit
from chiezo.surfaces.rest.openapi import errors as documented
from chiezo.surfaces.rest.params import (
    ANSWER_RESPONSES,
    SOURCE_RESPONSES,
    AskParams,
    ChatIn,
    NotePatch,
    PathId,
    Question,
    model_query,
    query_parameters,
    route_shape,
    typed_path,
)
from chiezo.surfaces.rest.pinning import PinnedGenerations
from chiezo.surfaces.rest.security import HostGuard, Security

if TYPE_CHECKING:
    from fastapi._compat import ModelField

    from chiezo.answer.rag import Answer

# the notes' recall reads the parameters ops/requests.py declares (surfaces/rest/params.py)
Recall = Annotated[RecallRequest, Depends(query_parameters(RecallRequest))]


def reject_unknown_parameters(request: Request) -> None:
    """A query parameter the route does not declare is an error naming the allowed ones."""
    if not request.url.path.startswith("/v1/"):
        return  # web pages read their own query strings (and keep ?lang= on every link)
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    allowed = {p.alias or p.name for p in _all_query_params(dependant)}
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        raise BadQuery(
            f"unknown parameter{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}",
            allowed_parameters=sorted(allowed),
        )


def _all_query_params(dependant: Dependant) -> list[ModelField]:
    params = list(dependant.query_params)
    for sub in dependant.dependencies:
        params += _all_query_params(sub)
    return params


def _json(data: Any, status: int = 200) -> JSONResponse:
    """Answer with the service's data as is: it is plain JSON already, so FastAPI's response
    validation and encoding walk (about a third of a small request's time) is skipped."""
    return JSONResponse(data, status_code=status)


def _answer(
    asked: Callable[..., Answer | Iterator[tuple[str, Any]]],
    strict: bool,
    stream: bool,
    request: Request,
    settings: Settings,
) -> Response:
    """One answer as JSON, or as server-sent events (``stream``): rag sends ``references``,
    ``delta``…, ``done``; agent a ``step`` per tool call, then ``done``. Kept in the record of
    answers when asked from this machine, or when the server has a token (SECURITY.md)."""
    local = on_this_machine(request.scope) or bool(settings.token)
    answered = asked(log_as="api" if local else None, stream=stream)
    if isinstance(answered, Iterator):
        return StreamingResponse(
            (_sse(name, data) for name, data in answered), media_type="text/event-stream"
        )
    if strict and not answered.no_basis and not answered.needs and not answered.grounded:
        body = answered.to_dict()
        raise Uncited(
            "the answer has sentences that cite no source or that their sources do "
            "not support (strict)",
            **{
                k: body[k]
                for k in ("answer", "references", "cited", "claims", "unsupported", "uncited")
            },
        )
    return _json(answered.to_dict())


def _sse(name: str, data: Any) -> str:
    return f"event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def create_app(
    settings: Settings | None = None, *, bind_host: str = "127.0.0.1", worker: str | None = None
) -> FastAPI:
    """``worker``: the label of this process's metrics, where several serve (default: the
    process id under ``serve --workers N``; a Ray replica gives its host and process)."""
    settings = settings or Settings.from_env()
    counted = metrics.Metrics(worker=worker or metrics.worker_label())
    service = Context(settings)
    service.search_observers.append(counted.searched)
    security = Security(bind_host, settings.token, settings.allowed_hosts)
    mcp_endpoint, mcp_servers = http_endpoint(
        service,
        writable=security.writes_enabled,
        transport_security=security.transport_security(),
    )

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # Each worker thread keeps a connection per source: bound the threads, bound memory.
        anyio.to_thread.current_default_thread_limiter().total_tokens = settings.serve_threads
        # Models loaded and vector indexes read before the first request, not during it.
        app.state.warmed = await anyio.to_thread.run_sync(operating.warm, service)
        service.library.watch()  # and each generation switched in later (store/library.py)
        async with contextlib.AsyncExitStack() as running:
            for server in mcp_servers:
                await running.enter_async_context(server.session_manager.run())
            yield
        service.library.stop_watching()
        service.notes.close()

    app = FastAPI(
        title="Chiezo",
        version=__version__,
        description="An offline knowledge base for AI: search, read and remember.",
        lifespan=lifespan,
        dependencies=[Depends(reject_unknown_parameters)],
        docs_url=None,  # FastAPI's pages load from a CDN: docs_pages serves installed files
        redoc_url=None,
    )
    app.state.service = service
    app.state.security = security
    errors.install(app)
    openapi.install(app)
    docs_pages.install(app)
    # Outermost last: a bug anywhere answers 500 without dropping the connection; no answer
    # tells a credential, or a path to a client elsewhere (disclosure.py); a foreign Host is
    # refused before anything else runs; an oversized body before it is read; each request
    # reads one generation per source (pinning.py).
    app.add_middleware(PinnedGenerations, library=service.library)
    app.add_middleware(BodyLimit)
    app.add_middleware(HostGuard, security=security)
    app.add_middleware(
        Disclosure,
        settings=settings,
        input_paths=functools.partial(operating.input_paths, service),
        credentials=functools.partial(operating.credentials, service),
    )
    app.add_middleware(errors.UnexpectedErrors)

    def writer(request: Request) -> None:
        security.check_write(request)

    _routes(app, service, writer)
    web.install(app, service)
    guarded = _TokenGuard(mcp_endpoint, security) if security.token_required else mcp_endpoint
    app.router.routes.append(Route("/mcp", endpoint=guarded))
    metrics.install(app, service, counted, security)  # its middleware outermost: sees every answer
    return app


def app_from_env() -> FastAPI:
    """Factory for uvicorn worker processes (``chiezo serve --workers N``): each worker builds
    its own app from the environment the CLI prepared."""
    from chiezo.core.processes import limit_malloc_arenas
    from chiezo.surfaces.rest.supervision import follow_supervisor

    follow_supervisor()
    limit_malloc_arenas()  # before the request threads start (core/processes.py says why)
    return create_app(
        Settings.from_env(), bind_host=os.environ.get("CHIEZO_BIND_HOST", "127.0.0.1")
    )


class _TokenGuard:
    """An ASGI app in front of the MCP endpoint that lets only bearer-token requests through."""

    def __init__(self, app: ASGIApp, security: Security):
        self.app, self.security = app, security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        header = dict(scope.get("headers") or []).get(b"authorization", b"").decode("latin-1")
        if not self.security.authorized(header):
            response = errors.error_response(
                401, "the MCP endpoint needs Authorization: Bearer <CHIEZO_TOKEN>"
            )
            await response(scope, receive, send)
            return
        await self.app(scope, receive, send)


def _routes(app: FastAPI, service: Context, writer: Callable[[Request], None]) -> None:
    write = [Depends(writer)]

    @app.get("/healthz", tags=["meta"])
    def healthz() -> JSONResponse:
        return _json(
            {"status": "ok", "version": __version__, "sources": len(service.library.names())}
        )

    @app.get(
        "/v1/sources",
        tags=["sources"],
        responses=documented(409),
        description=BINDINGS["sources"].help,
    )
    def sources() -> JSONResponse:
        return _json({"sources": operating.sources(service)})

    # -- answers -------------------------------------------------------------------------------

    @app.get("/v1/ask", tags=["answers"], responses=ANSWER_RESPONSES)
    def ask(
        q: Question,
        choices: Annotated[AskParams, Depends(model_query(AskParams))],
        request: Request,
    ):
        """Answer ``q`` only from the library, citing numbered sources (needs CHIEZO_LLM_URL);
        every sentence is checked against the excerpts it cites (``claims``, ``unsupported``,
        ``uncited``). Nothing found: a fixed "no basis" reply (``no_basis``), the model not
        called. ``strict``: an answer with an uncited or unsupported sentence is a 422.
        ``stream``: server-sent events ``references``, ``delta``…, ``done`` — planning and
        retrieval finish before the first byte. Never offers the model a tool that writes."""
        asked = AskRequest.of(question=q, **choices.model_dump(exclude={"stream"}))
        handler = functools.partial(answering.ask_question, service, asked)
        return _answer(handler, asked.strict, choices.stream, request, service.settings)

    @app.post("/v1/chat", tags=["answers"], responses=ANSWER_RESPONSES)
    def chat(body: ChatIn, request: Request):
        """A conversation turn: the last message is the question; the recent turns inform the
        plan and the answer (their sources are not replayed; an assistant turn's
        ``cited_titles`` tell a follow-up what "he" or 「その」 refers to). In agent mode the
        model may ``remember`` only where this request could write notes itself."""
        security = request.app.state.security
        if body.location is not None:  # the query string's is checked by HostGuard
            refused = security.location_refusal(request.scope)
            if refused is not None:
                return refused
        writable = security.may_write(request)
        handler = functools.partial(answering.chat_turn, service, body, writable=writable)
        return _answer(handler, body.strict, body.stream, request, service.settings)

    @app.get("/v1/llm", tags=["answers"])
    def llm_status(request: Request) -> JSONResponse:
        """The answer layer: configured or not, and for each endpoint whether it answers, the
        models it lists and the one that answers the configured name (``note`` says so where
        that name is not listed but answered all the same, as llama.cpp's server does). Model
        names are shown as names, not paths on this machine, to a client beyond loopback."""
        status = operating.llm_status(service)
        return _json(status if on_this_machine(request.scope) else labelled_models(status))

    # -- notes (declared before /v1/{source}/... so that /v1/notes/recall is not a source) ---

    @app.post(
        "/v1/notes",
        status_code=201,
        tags=["notes"],
        dependencies=write,
        responses=documented(401, 403, 503, 507),
    )
    def remember(note: RememberRequest) -> JSONResponse:
        """Store a note; the answer is the note as stored (durable once acknowledged)."""
        return _json(BINDINGS["remember"].handle(service, note), 201)

    @app.get("/v1/notes/recall", tags=["notes"], responses=documented(504))
    def recall(request: Recall) -> JSONResponse:
        """Notes newest first; narrow by time (``since`` alone works for vague references),
        tag and/or words."""
        return _json(BINDINGS["recall"].handle(service, request))

    @app.get("/v1/notes/{note_id:int}", tags=["notes"], responses=documented(404, 504))
    def get_note(
        note_id: PathId, max_chars: Annotated[int | None, Query(ge=0)] = None
    ) -> JSONResponse:
        return _json(remembering.note(service, note_id, max_chars=max_chars))

    @app.patch(
        "/v1/notes/{note_id:int}",
        tags=["notes"],
        dependencies=write,
        responses=documented(401, 403, 404, 503, 507),
    )
    def update_note(note_id: PathId, patch: NotePatch) -> JSONResponse:
        """Change a note: only the fields sent change."""
        sent = UpdateRequest(note_id=note_id, **patch.model_dump(exclude_unset=True))
        return _json(BINDINGS["update"].handle(service, sent))

    @app.delete(
        "/v1/notes/{note_id:int}",
        tags=["notes"],
        dependencies=write,
        responses=documented(401, 403, 404, 503, 507),
    )
    def forget(note_id: PathId) -> JSONResponse:
        return _json(BINDINGS["forget"].handle(service, ForgetRequest(note_id=note_id)))

    jobs_routes.install(app, service, write)  # /v1/jobs: background rebuild and embed jobs

    # -- the library's operations: their routes as the catalogue names them --------------------
    for name in ("search", "doc", "filter", "titles", "tags", "links", "features", "random"):
        _bound_routes(app, service, BINDINGS[name])
    _bound_routes(app, service, BINDINGS["geocode"])

    # -- one source ---------------------------------------------------------------------------

    @app.head("/healthz", include_in_schema=False)
    def healthz_head() -> Response:
        return Response(status_code=200)


# the OpenAPI tag of an operation's routes (the others: "documents")
_REST_TAGS = {"search": "search", "filter": "search"}


def _bound_routes(app: FastAPI, service: Context, binding: Binding) -> None:
    """The routes of a bound operation, as the catalogue names them (core/operations.py): the
    request model's parameters read from each route's path and query (``query_parameters``),
    the binding's help as its description, the handler's answer as JSON."""
    for route_text in binding.entry.rest:
        method, path = route_text.split(" ", 1)
        paths = [r.split(" ", 1)[1] for r in binding.entry.rest]
        reading = query_parameters(binding.request, path=path, paths=paths)
        taken = Annotated[Any, Depends(reading)]
        route = _route(service, binding)
        route.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [inspect.Parameter("request", inspect.Parameter.KEYWORD_ONLY, annotation=taken)],
            return_annotation=JSONResponse,
        )
        route.__name__ = _route_name(binding, path, paths)
        route.__doc__ = binding.help
        tags: list[str | Enum] = [_REST_TAGS.get(binding.name, "documents")]
        app.add_api_route(
            typed_path(binding.request, path),
            route,
            methods=[method],
            tags=tags,
            responses=SOURCE_RESPONSES,
        )


def _route_name(binding: Binding, path: str, paths: list[str]) -> str:
    """The route's name (its title in /docs and /redoc): the operation's, with what sets this
    route apart from the operation's others: ``search_all`` (the sources in the query),
    ``doc_by_doc_id`` (the document in the path)."""
    _, queried, in_path = route_shape(binding.request, path, paths)
    by_path = [n for n in sorted(in_path) if n not in {"source"}]
    return binding.name + ("_all" if queried else "") + "".join(f"_by_{n}" for n in by_path)


def _route(service: Context, binding: Binding) -> Callable[[OperationRequest], JSONResponse]:
    def route(request: OperationRequest) -> JSONResponse:
        result = binding.handle(service, request)
        return _json(result.to_dict() if isinstance(result, SearchResult) else result)

    return route


def labelled_models(status: dict[str, Any]) -> dict[str, Any]:
    """``/v1/llm`` with every model name as ``model_label`` shows it (a ``.gguf`` path is a
    fact of this machine, not of the answer layer)."""
    from chiezo.surfaces.web.formatting import model_label

    def named(text: object) -> object:
        return model_label(text) if isinstance(text, str) else text

    endpoints = []
    for endpoint in status.get("endpoints") or []:
        shown = {
            **endpoint,
            "model": named(endpoint.get("model")),
            "models": [named(m) for m in endpoint.get("models") or []],
        }
        for said in ("problem", "note"):  # "no model named '/models/x.gguf' here"
            if endpoint.get(said):
                shown[said] = re.sub(
                    r"'([^']*)'", lambda m: repr(named(m.group(1))), endpoint[said]
                )
        endpoints.append(shown)
    return {**status, "model": named(status.get("model")), "endpoints": endpoints}
