"""The web UI's pages: search (``/``), a document (``/doc/...``), admin and chat.

Pages are rendered on the server from the same Service the API uses, so search and reading
work without any script and show exactly what the API would return. Scripts add only what
needs a live connection: chat streaming, build progress, note editing — and they call the
public REST API, so the UI has no private back door (and obeys the same token rule).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlencode, urlsplit

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup, escape

from .. import __version__
from ..errors import ChiezoError, NotFound
from ..library import NOTES
from ..service import Service
from .i18n import COOKIE, LANGUAGES, MESSAGES, Translator, pick_language
from .mapview import MapPoint, render_map
from .markdown_view import render_markdown

PAGE_SIZE = 10
DOC_BODY_CHARS = 60_000  # a long article is cut here unless asked for whole (``?full=1``)
SHOWN_LINKS = 300
NOTES_PAGE = 50
MAP_POINTS = 500  # filtered places drawn beyond the page's own (as small unnumbered dots)
_POINT = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*,\s*(-?\d+(?:\.\d+)?)\s*$")


def install(app: FastAPI, service: Service) -> None:
    templates = Environment(
        loader=PackageLoader("chiezo.web", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    templates.filters.update(highlight=highlight, size=human_size, number=lambda n: f"{n:,}",
                             describe_how=describe_how, safe_url=safe_url)  # fmt: skip

    def render(request: Request, name: str, status: int = 200, script_words: tuple[str, ...] = (),
               **context) -> HTMLResponse:  # fmt: skip
        """``script_words``: prefixes of the messages the page's script needs (only those are
        sent: the whole catalog would be most of a small page)."""
        language = pick_language(request)
        t = Translator(language)
        security = request.app.state.security
        page = templates.get_template(name).render(
            request=request, t=t, lang=language, other_lang=_other(language), version=__version__,
            url_with=lambda **changes: _url_with(request, **changes),
            config={"lang": language, "messages": t.catalog(script_words),
                    "token_required": security.token_required,
                    "writes_enabled": security.writes_enabled},
            **context,
        )  # fmt: skip
        response = HTMLResponse(page, status_code=status)
        if request.query_params.get("lang") in LANGUAGES:
            response.set_cookie(COOKIE, language, max_age=365 * 86400, samesite="lax")
        return response

    @app.get("/", include_in_schema=False)
    def search_page(request: Request) -> HTMLResponse:
        form = SearchForm.read(request)
        infos = _ready(service.sources())
        chosen = next((i for i in infos if i["name"] == form.source), None)
        context: dict[str, Any] = {"form": form, "sources": infos, "chosen": chosen,
                                   "page_size": PAGE_SIZE, "suggestions": {},
                                   "result": None, "items": [], "map_svg": "", "error": None}  # fmt: skip
        status = 200
        try:
            if form.source and chosen is None:
                service.library.get(form.source)  # raises the 404 listing the known sources
            if form.q:
                context.update(_search(service, form))
            elif chosen and form.has_filters:
                context.update(_browse(service, form))
            if chosen:
                context["suggestions"] = _suggestions(service, chosen)
        except ChiezoError as exc:
            context["error"], status = exc.to_dict(), exc.status
        return render(request, "search.html", status, **context)

    @app.get("/doc/{source}", include_in_schema=False)
    def doc_by_title(request: Request, source: str) -> HTMLResponse:
        title, key = request.query_params.get("title"), request.query_params.get("key")
        try:
            found = service.doc(source, title=None if key else title or "", key=key,
                                fields=["doc_id"])  # fmt: skip
        except ChiezoError as exc:
            return render(request, "doc.html", exc.status, doc=None, error=exc.to_dict(),
                          source=source)  # fmt: skip
        target = f"/doc/{source}/{found['doc_id']}"
        if request.query_params.get("lang"):
            target += "?" + urlencode({"lang": request.query_params["lang"]})
        return RedirectResponse(target, status_code=303)

    @app.get("/doc/{source}/{doc_id:int}", include_in_schema=False)
    def doc_page(request: Request, source: str, doc_id: int) -> HTMLResponse:
        full = request.query_params.get("full") == "1"
        try:
            doc = service.doc(source, doc_id=doc_id, fields=[
                "source", "doc_id", "key", "title", "url", "aliases", "opening", "tags", "extra",
                "attrs", "point", "chunks", "body"],
                max_chars=None if full else DOC_BODY_CHARS)  # fmt: skip
            info = service.library.get(source).info()
            outgoing = service.links(source, doc_id=doc_id, direction="out", limit=SHOWN_LINKS)
            incoming = service.links(source, doc_id=doc_id, direction="in", limit=30)
        except ChiezoError as exc:
            return render(request, "doc.html", exc.status, doc=None, error=exc.to_dict(),
                          source=source)  # fmt: skip
        # chunks carry the headings; a document stored without chunks shows its body
        chunks = doc.get("chunks") or [{"heading_path": "", "text": doc.get("body") or ""}]
        sections, shown, total = _sections(chunks, None if full else DOC_BODY_CHARS)
        if not doc.get("chunks"):
            total = doc.get("body_chars", total)
        body_html = None
        if (doc.get("extra") or {}).get("format") == "markdown":
            body_html = render_markdown(doc.get("body") or "", source, doc["key"])
            total = doc.get("body_chars", 0)
            shown = min(total, DOC_BODY_CHARS) if not full else total
        point = doc.get("point")
        map_svg = ""
        if point:
            map_svg = Markup(render_map([MapPoint(point["lat"], point["lon"], doc["title"])],
                                        title=doc["title"], width=440, max_height=300))  # fmt: skip
        return render(request, "doc.html", doc=doc, info=info, sections=sections, body_html=body_html,
                      original=original_href(doc),
                      shown_chars=shown, total_chars=total, full=full, map_svg=map_svg,
                      outgoing=outgoing, incoming=incoming, error=None, source=source)  # fmt: skip

    @app.get("/doc/{source}/{doc_id:int}/original", include_in_schema=False)
    def original_file(request: Request, source: str, doc_id: int):
        """The file a document was read from (a browser will not open ``file://`` links from
        an http page): only for a documents source, only inside the folder it was built from."""
        try:
            path = original_path(service, source, doc_id)
        except ChiezoError as exc:
            return render(request, "doc.html", exc.status, doc=None, error=exc.to_dict(),
                          source=source)  # fmt: skip
        return FileResponse(path, content_disposition_type="inline")

    @app.get("/admin", include_in_schema=False)
    def admin_page(request: Request) -> HTMLResponse:
        infos = service.sources()
        notes_q = (request.query_params.get("notes_q") or "").strip()
        notes_offset = _offset(request.query_params.get("notes_offset"))
        jobs = request.app.state.jobs.list() if hasattr(request.app.state, "jobs") else []
        return render(request, "admin.html", script_words=("admin.", "note."),
                      sources=[_admin_facts(service, i) for i in infos
                               if i.get("kind") != "notes" and i.get("name") != NOTES],
                      notes=service.recall(q=notes_q or None, limit=NOTES_PAGE,
                                           offset=notes_offset, max_chars=None),
                      notes_q=notes_q, notes_page=NOTES_PAGE,
                      jobs=[j.to_dict() for j in jobs][:10],
                      models=_embedding_models(), default_model=_default_model())  # fmt: skip

    @app.get("/chat", include_in_schema=False)
    def chat_page(request: Request) -> HTMLResponse:
        s = service.settings
        return render(request, "chat.html", script_words=("chat.",), configured=bool(s.llm_url),
                      configured_model=s.llm_model, sources=_ready(service.sources()))  # fmt: skip


class SearchForm:
    """The search page's query string, read once and checked for shape."""

    FIELDS = ("q", "source", "mode", "tag", "feature", "area", "near", "radius_km")

    def __init__(self, values: dict[str, str], offset: int):
        self.values = values
        self.offset = offset

    @classmethod
    def read(cls, request: Request) -> SearchForm:
        params = request.query_params
        values = {f: (params.get(f) or "").strip() for f in cls.FIELDS}
        return cls(values, _offset(params.get("offset")))

    def __getattr__(self, name: str) -> str:
        if name in SearchForm.FIELDS:
            return self.values[name]
        raise AttributeError(name)

    @property
    def has_filters(self) -> bool:
        return any(self.values[f] for f in ("tag", "feature", "area", "near"))

    def near_arguments(self) -> dict[str, Any]:
        """``near`` is a point (``lat,lon``), ``source:title`` or a title in this source."""
        text = self.near
        if not text:
            return {}
        radius = float(self.radius_km) if _is_number(self.radius_km) else None
        if _POINT.match(text):
            return {"near": text, "radius_km": radius}
        reference = text if ":" in text else f"{self.source}:{text}"
        return {"near_doc": reference, "radius_km": radius}

    def filter_arguments(self) -> dict[str, Any]:
        return {
            "feature": [self.feature] if self.feature else None,
            "area": [self.area] if self.area else None,
            **self.near_arguments(),
        }


def _search(service: Service, form: SearchForm) -> dict[str, Any]:
    extra = form.filter_arguments() if form.source else {}
    result = service.search(form.q, form.source or None, limit=PAGE_SIZE, offset=form.offset,
                            mode=form.mode or None, tags=[form.tag] if form.tag else None,
                            **extra)  # fmt: skip
    points = service.points([(h.source, h.doc_id) for h in result.hits])
    items = []
    for number, hit in enumerate(result.hits, start=form.offset + 1):
        point = points.get((hit.source, hit.doc_id))
        original = None
        if (hit.url or "").startswith("file://"):  # a local file: served, at the hit's page
            original = original_href({"source": hit.source, "doc_id": hit.doc_id, "url": hit.url})
        items.append({"number": number, "source": hit.source, "doc_id": hit.doc_id,
                      "title": hit.title, "snippet": hit.snippet, "url": hit.url,
                      "distance_km": hit.distance_km, "point": point,
                      "original": original})  # fmt: skip
    summary = {"total": result.total, "at_least": result.total_is_lower_bound,
               "notes": result.notes, "how": result.retrieval, "order": result.order}  # fmt: skip
    return {"result": summary, "items": items, "map_svg": _map(items, extra)}


def _browse(service: Service, form: SearchForm) -> dict[str, Any]:
    """Filters without words: every document meeting them (exact total), as the API's filter."""
    found = service.filter(form.source, tags=[form.tag] if form.tag else None,
                           fields=["doc_id", "key", "title", "url", "point", "opening"],
                           limit=PAGE_SIZE, offset=form.offset,
                           **form.filter_arguments())  # fmt: skip
    items = []
    for number, doc in enumerate(found["docs"], start=form.offset + 1):
        point = doc.get("point")
        items.append({"number": number, "source": form.source, "doc_id": doc["doc_id"],
                      "title": doc["title"], "snippet": _cut(doc.get("opening") or "", 160),
                      "url": doc.get("url"), "distance_km": doc.get("distance_km"),
                      "point": (point["lat"], point["lon"]) if point else None})  # fmt: skip
    summary = {"total": found["total"], "at_least": found["total_is_lower_bound"],
               "notes": found["notes"], "how": "filter", "order": found["order"],
               "browse": True}  # fmt: skip
    near = found.get("near")
    center = (near["lat"], near["lon"]) if near else None
    others = _more_points(service, form, found["total"], {i["doc_id"] for i in items})
    return {"result": summary, "items": items, "map_more": len(others),
            "map_svg": _map(items, {"center": center}, others)}  # fmt: skip


def _more_points(service: Service, form: SearchForm, total: int, shown: set[int]) -> list:
    """Beyond the page: up to MAP_POINTS of the other matches, so the map shows the spread."""
    if total <= len(shown):
        return []
    found = service.filter(form.source, tags=[form.tag] if form.tag else None,
                           fields=["doc_id", "title", "point"], limit=MAP_POINTS,
                           **form.filter_arguments())  # fmt: skip
    return [MapPoint(d["point"]["lat"], d["point"]["lon"], d["title"],
                     href=f"/doc/{form.source}/{d['doc_id']}")
            for d in found["docs"] if d.get("point") and d["doc_id"] not in shown]  # fmt: skip


def _map(items: list[dict], extra: dict | None, others: list[MapPoint] = ()) -> Markup:
    points = list(others) + [MapPoint(i["point"][0], i["point"][1], i["title"],
                       href=f"/doc/{i['source']}/{i['doc_id']}", number=i["number"])
              for i in items if i.get("point")]  # fmt: skip
    center = (extra or {}).get("center")
    if center is None and (extra or {}).get("near"):
        lat, lon = _POINT.match(extra["near"]).groups()
        center = (float(lat), float(lon))
    return Markup(render_map(points, center=center))


def _suggestions(service: Service, info: dict) -> dict[str, list[dict]]:
    """The source's commonest tags and features with their counts: the filter boxes'
    drop-downs, and the ways into a source before anything is searched."""
    out: dict[str, list[dict]] = {"tags": [], "features": []}
    if info.get("tags"):
        out["tags"] = service.tags(info["name"], limit=200)["tags"]
    if "feature" in info.get("attributes", []):
        out["features"] = service.features(info["name"], limit=200).get("features", [])
    return out


def _sections(chunks: list[dict], limit: int | None) -> tuple[list[dict], int, int]:
    """Chunks grouped under their headings, cut after ``limit`` characters."""
    total = sum(len(c["text"]) for c in chunks)
    sections: list[dict] = []
    shown = 0
    for chunk in chunks:
        if limit is not None and shown >= limit:
            break
        heading = chunk.get("heading_path") or ""
        if not sections or sections[-1]["heading"] != heading:
            sections.append({"heading": heading, "paragraphs": []})
        text = chunk["text"]
        shown += len(text)
        sections[-1]["paragraphs"].extend(p for p in re.split(r"\n\s*\n", text) if p.strip())
    return sections, min(shown, total), total


def _offset(text: str | None) -> int:
    try:
        return max(0, int(text or 0))
    except ValueError:
        return 0


def original_path(service: Service, source: str, doc_id: int) -> Path:
    """The file behind a document of a documents source, checked to lie inside the folder the
    source was built from (its url is build output, but a page must never serve other files)."""
    doc = service.doc(source, doc_id=doc_id, fields=["url"])
    info = service.library.get(source).info()
    url = doc.get("url") or ""
    root = (info.get("input") or {}).get("path")
    if info.get("kind") != "docs" or not url.startswith("file://") or not root:
        raise NotFound(f"{source} document {doc_id} has no original file to show")
    path = Path(unquote(urlsplit(url).path)).resolve()
    if not path.is_relative_to(Path(root).resolve()) or not path.is_file():
        raise NotFound(f"the original file of {source} document {doc_id} is not there any more",
                       hint="rebuild the source if its folder changed")  # fmt: skip
    return path


def original_href(doc: dict) -> str | None:
    """Where the page's "Original" link goes: the served file (keeping ``#page=N``) for a
    local file, the document's own url otherwise (when it is safe to link)."""
    url = doc.get("url") or ""
    if url.startswith("file://"):
        fragment = urlsplit(url).fragment
        return f"/doc/{doc['source']}/{doc['doc_id']}/original" + (
            f"#{fragment}" if fragment.startswith("page=") else ""
        )
    return safe_url(url)


def _admin_facts(service: Service, info: dict) -> dict:
    """A source that needs a rebuild still shows what it was built from (its raw meta)."""
    if info.get("status") == "ok":
        return info
    from ..jobs import source_info

    try:
        return {**source_info(service, info["name"]), "hint": info.get("hint")}
    except ChiezoError:
        return info


def _ready(infos: list[dict]) -> list[dict]:
    return [i for i in infos if i.get("status") == "ok"]


def _embedding_models() -> list[str]:
    from ..embedders import BUILT_IN

    return sorted(BUILT_IN)


def _default_model() -> str:
    from ..embedders import DEFAULT_MODEL

    return DEFAULT_MODEL


def _url_with(request: Request, **changes) -> str:
    params = dict(request.query_params)
    for key, value in changes.items():
        if value in (None, ""):
            params.pop(key, None)
        else:
            params[key] = str(value)
    return request.url.path + ("?" + urlencode(params) if params else "")


def _other(language: str) -> str:
    return "en" if language == "ja" else "ja"


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _cut(text: str, chars: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= chars else text[: chars - 1] + "…"


def safe_url(url: str | None) -> str | None:
    """A document's own url as a link only when it is one a page may open (never
    ``javascript:``: a document's metadata must not run in the page)."""
    if not url:
        return None
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    return url if scheme in ("http", "https", "file") else None


def describe_how(how: str, t: Translator) -> str:
    """``hybrid+keyword`` → the words for each way the sources were searched."""
    return " + ".join(t(f"how.{part}") if f"how.{part}" in MESSAGES else part
                      for part in how.split("+"))  # fmt: skip


def highlight(text: str, query: str) -> Markup:
    """``text`` escaped, with the query's words marked: Latin words whole (from their start,
    three letters or more: "a" and "I" everywhere is noise), other scripts as substrings of
    two characters or more."""
    patterns = []
    for word in sorted(set(re.split(r"[\s\u3000]+", query or "")), key=len, reverse=True):
        escaped_word = re.escape(str(escape(word)))
        if re.fullmatch(r"[\w'-]+", word, re.ASCII):
            if len(word) >= 3:
                patterns.append(rf"\b{escaped_word}\w*")
        elif len(word) >= 2:
            patterns.append(escaped_word)
    escaped = str(escape(text))
    if not patterns:
        return Markup(escaped)
    pattern = re.compile("|".join(patterns), re.IGNORECASE)
    return Markup(pattern.sub(lambda m: f"<mark>{m.group(0)}</mark>", escaped))


def human_size(n: int | None) -> str:
    if not isinstance(n, int | float):  # None, or missing for a source that needs a rebuild
        return "—"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:,.0f} {unit}" if unit == "B" else f"{size:,.1f} {unit}"
        size /= 1024
    return f"{size:,.1f} GiB"
