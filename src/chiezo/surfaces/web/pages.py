"""The web UI's pages: search (``/``), a document (``/doc/...``), admin and chat.

Pages are rendered on the server from the same Context the API uses, so search and reading
work without any script and show exactly what the API would return. Scripts add only what
needs a live connection: chat streaming, build progress, note editing — and they call the
public REST API, so the UI has no private back door (and obeys the same token rule).
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from chiezo import __version__
from chiezo.core.errors import ChiezoError, NotFound
from chiezo.ops import operating, reading, remembering, searching
from chiezo.ops.context import Context
from chiezo.ops.jobs import JobRunner
from chiezo.ops.requests import DocRequest, LinksRequest, RandomRequest, RecallRequest
from chiezo.surfaces.web.archive_pages import archive_entry, archive_response
from chiezo.surfaces.web.disk import install as install_disk
from chiezo.surfaces.web.disk import page_survey
from chiezo.surfaces.web.document_pages import (
    DOC_BODY_CHARS,
    body_parts,
    headed_pages,
    original_href,
    original_path,
    original_response,
)
from chiezo.surfaces.web.formatting import (
    describe_how,
    highlight,
    human_size,
    model_label,
    safe_url,
    say,
)
from chiezo.surfaces.web.i18n import COOKIE, LANGUAGES, Translator, pick_language
from chiezo.surfaces.web.search_results import (
    NEARBY_KM,
    PAGE_SIZE,
    SearchForm,
    browse_results,
    doc_map,
    read_offset,
    search_results,
    suggestions,
)

SHOWN_LINKS = 300
NOTES_PAGE = 50
# No other site may frame a page (a framed admin page could be clicked into a rebuild or a
# forget), and following a link out does not tell the other site what was searched here.
PAGE_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}


def install(app: FastAPI, service: Context) -> None:
    templates = Environment(
        loader=PackageLoader("chiezo.surfaces.web", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters.update(
        highlight=highlight,
        size=human_size,
        say=say,
        number=lambda n: f"{n:,}",
        describe_how=describe_how,
        safe_url=safe_url,
        model_label=model_label,
    )

    def render(
        request: Request,
        name: str,
        status: int = 200,
        script_words: tuple[str, ...] = (),
        **context: object,
    ) -> HTMLResponse:
        """``script_words``: prefixes of the messages the page's script needs (only those are
        sent: the whole catalog would be most of a small page)."""
        language = pick_language(request)
        t = Translator(language)
        security = request.app.state.security
        page = templates.get_template(name).render(
            request=request,
            t=t,
            lang=language,
            other_lang=_other(language),
            version=__version__,
            url_with=lambda **changes: _url_with(request, **changes),
            config={
                "lang": language,
                "messages": t.catalog(script_words),
                "token_required": security.token_required,
                "writes_enabled": security.writes_enabled,
                # how long "use my location" holds a location (core/here.py): the page counts
                # down the time the server will still accept it
                "location_ttl": service.settings.location_ttl,
            },
            **context,
        )
        response = HTMLResponse(page, status_code=status, headers=PAGE_HEADERS)
        if request.query_params.get("lang") in LANGUAGES:
            response.set_cookie(COOKIE, language, max_age=365 * 86400, samesite="lax")
        return response

    @app.get("/", include_in_schema=False)
    def search_page(request: Request) -> HTMLResponse:
        form = SearchForm.read(request)
        infos = _ready(operating.sources(service))
        chosen = next((i for i in infos if i["name"] == form.source), None)
        context: dict[str, Any] = {
            "form": form,
            "sources": infos,
            "chosen": chosen,
            "page_size": PAGE_SIZE,
            "suggestions": {},
            "result": None,
            "items": [],
            "map_svg": "",
            "error": None,
        }
        status = 200
        try:
            if form.source and chosen is None:
                service.library.get(form.source)  # raises the 404 listing the known sources
            if form.q:
                context.update(search_results(service, form))
            elif chosen and form.has_filters:
                context.update(browse_results(service, form))
            if chosen:
                context["suggestions"] = suggestions(service, chosen)
        except ChiezoError as exc:
            context["error"], status = exc.to_dict(), exc.status
        return render(request, "search.html", status, script_words=("here.",), **context)

    @app.get("/doc/{source}", include_in_schema=False)
    def doc_by_title(request: Request, source: str) -> Response:
        title, key = request.query_params.get("title"), request.query_params.get("key")
        try:
            found = reading.doc(
                service,
                DocRequest.of(
                    source=source, title=None if key else title or "", key=key, fields=["doc_id"]
                ),
            )
        except ChiezoError as exc:
            return render(
                request, "doc.html", exc.status, doc=None, error=exc.to_dict(), source=source
            )
        target = f"/doc/{source}/{found['doc_id']}"
        if request.query_params.get("lang"):
            target += "?" + urlencode({"lang": request.query_params["lang"]})
        return RedirectResponse(target, status_code=303)

    @app.get("/random/{source}", include_in_schema=False)
    def random_doc(request: Request, source: str) -> Response:
        """A random document's page (as kiwix-serve's random article), drawn from the source
        or from the conditions in the query string (``?tag=…&area=…``, as the API's)."""
        lists = {"tag", "feature", "area", "wikidata", "attr"}
        asked = {
            k: request.query_params.getlist(k) if k in lists else v
            for k, v in request.query_params.items()
            if k in RandomRequest.model_fields and k not in ("source", "count", "fields")
        }
        try:
            drawn = searching.random(service, RandomRequest.of(source=source, **asked))
            if not drawn["docs"]:
                raise NotFound(f"no document of {source!r} meets these conditions")
        except ChiezoError as exc:
            return render(
                request, "doc.html", exc.status, doc=None, error=exc.to_dict(), source=source
            )
        return RedirectResponse(f"/doc/{quote(source)}/{drawn['docs'][0]['doc_id']}", 303)

    @app.get("/doc/{source}/{doc_id:int}", include_in_schema=False)
    def doc_page(request: Request, source: str, doc_id: int) -> HTMLResponse:
        full = request.query_params.get("full") == "1"
        try:
            doc = reading.doc(
                service,
                DocRequest.of(
                    source=source,
                    doc_id=doc_id,
                    fields=[
                        "source",
                        "doc_id",
                        "key",
                        "title",
                        "url",
                        "source_url",  # what the "Original" link is made from
                        "aliases",
                        "opening",
                        "tags",
                        "extra",
                        "attrs",
                        "point",
                        "body",
                    ],
                    max_chars=None if full else DOC_BODY_CHARS,
                ),
            )
            opened = service.library.get(source)
            info = opened.info().to_dict()
            outgoing = incoming = None  # a live source's links are on its server's page
            if not opened.live:
                outgoing = reading.links(
                    service,
                    LinksRequest.of(
                        source=source, doc_id=doc_id, direction="out", limit=SHOWN_LINKS
                    ),
                )
                incoming = reading.links(
                    service, LinksRequest.of(source=source, doc_id=doc_id, direction="in", limit=30)
                )
        except ChiezoError as exc:
            return render(
                request, "doc.html", exc.status, doc=None, error=exc.to_dict(), source=source
            )
        map_svg, nearby = doc_map(service, doc)
        return render(
            request,
            "doc.html",
            doc=doc,
            info=info,
            **body_parts(doc, headed_pages(opened)),
            original=original_href(doc, archived=opened.archived),
            full=full,
            map_svg=map_svg,
            nearby=nearby,
            nearby_km=NEARBY_KM,
            outgoing=outgoing,
            incoming=incoming,
            error=None,
            source=source,
        )

    @app.get("/doc/{source}/{doc_id:int}/original", include_in_schema=False)
    def original_file(request: Request, source: str, doc_id: int):
        """The file a document was read from (a browser will not open ``file://`` links from
        an http page): only for a documents source, only inside the folder it was built from."""
        try:
            path = original_path(service, source, doc_id)
        except ChiezoError as exc:
            return render(
                request, "doc.html", exc.status, doc=None, error=exc.to_dict(), source=source
            )
        return original_response(path)

    @app.get("/doc/{source}/archive/{path:path}", include_in_schema=False)
    def archived_entry(request: Request, source: str, path: str):
        """An entry of the archive (a ZIM) a source was built from: an article as the archive
        shows it, or a picture or style it names (surfaces/web/archive_pages.py)."""
        try:
            entry = archive_entry(service, source, path)
        except ChiezoError as exc:
            return render(
                request, "doc.html", exc.status, doc=None, error=exc.to_dict(), source=source
            )
        return archive_response(source, path, entry)

    @app.get("/admin", include_in_schema=False)
    def admin_page(request: Request) -> HTMLResponse:
        infos = operating.sources(service)
        notes_q = (request.query_params.get("notes_q") or "").strip()
        notes_offset = read_offset(request.query_params.get("notes_offset"))
        try:
            notes = remembering.recall(
                service,
                RecallRequest.of(
                    q=notes_q or None, limit=NOTES_PAGE, offset=notes_offset, max_chars=None
                ),
            )
        except ChiezoError as exc:  # e.g. a search text over the limit: said above the list
            notes = {"total": 0, "offset": 0, "notes": [], "error": exc.message}
        runner = getattr(request.app.state, "jobs", None)
        models, default_model = _embedding_models(runner)
        jobs = runner.list() if runner is not None else []
        return render(
            request,
            "admin.html",
            script_words=("admin.", "note."),
            sources=[i for i in infos if not i.get("writable")],
            notes=notes,
            notes_q=notes_q,
            notes_page=NOTES_PAGE,
            jobs=[j.to_dict() for j in jobs][:10],
            models=models,
            default_model=default_model,
            disk=page_survey(service),
        )

    install_disk(app, service)  # POST /admin/disk: reclaim space (a write)

    @app.get("/chat", include_in_schema=False)
    def chat_page(request: Request) -> HTMLResponse:
        s = service.settings
        return render(
            request,
            "chat.html",
            script_words=("chat.", "here."),
            configured=bool(s.llm_url),
            configured_model=s.llm_model,
            sources=_ready(operating.sources(service)),
        )


def _ready(infos: list[dict]) -> list[dict]:
    return [i for i in infos if i.get("status") == "ok"]


def _embedding_models(runner: JobRunner | None) -> tuple[list[str], str]:
    """The models a re-embed job may use (the server's list), and the one preselected."""
    from chiezo.store.embedders import BUILT_IN, DEFAULT_MODEL

    return (runner.models() if runner is not None else sorted(BUILT_IN)), DEFAULT_MODEL


def _url_with(request: Request, **changes: object) -> str:
    """This page's address with ``changes``; never with the current location (a page's links
    are kept in its HTML and the browser's history: the script adds it to a ``near=here``
    link when followed while the location is still attached)."""
    params = dict(request.query_params)
    params.pop("location", None)
    for key, value in changes.items():
        if value in (None, ""):
            params.pop(key, None)
        else:
            params[key] = str(value)
    return request.url.path + ("?" + urlencode(params) if params else "")


def _other(language: str) -> str:
    return "en" if language == "ja" else "ja"
