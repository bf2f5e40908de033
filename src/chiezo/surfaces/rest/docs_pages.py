"""``/docs`` (Swagger UI) and ``/redoc`` from files installed on this machine — never a CDN.

FastAPI's own pages load Swagger UI from a CDN and a favicon from fastapi's site, so offline
``/docs`` would be a blank page. The script, style sheet and favicon here come from the
``fastapi-offline`` package (MIT; Swagger UI 5 — which reads OpenAPI 3.1, unlike the 4.x
bundled elsewhere — and ReDoc 2, each under its own licence), served from its installed folder.

The pages have no inline script: Swagger UI is started by ``/docs/init.js``, a file of ours,
so the page runs under a Content-Security-Policy that allows scripts from this origin only
and lets the page talk to nothing but this server (``connect-src 'self'``: "Try it out" calls
the API here). Styles may be inline — Swagger UI and ReDoc set style attributes and ReDoc
writes its style sheet at run time — which lets no script run. ReDoc also searches in a
worker it starts from a ``blob:`` URL.
"""

from __future__ import annotations

from html import escape

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

from chiezo.surfaces.web.pages import PAGE_HEADERS

ASSETS = "/docs/assets"  # the package's files: swagger-ui-bundle.js, swagger-ui.css, redoc…
ASSETS_PACKAGE = ("fastapi_offline", "static")
CSP = "; ".join(
    (
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self' data:",
        "connect-src 'self'",
        "worker-src 'self' blob:",
        "base-uri 'none'",
        "form-action 'none'",
        "frame-ancestors 'none'",
    )
)
HEADERS = {**PAGE_HEADERS, "Content-Security-Policy": CSP}

# validatorUrl null: Swagger UI would otherwise send the whole document to validator.swagger.io
INIT_JS = """\
"use strict";
(function () {
  var root = document.getElementById("swagger-ui");
  window.ui = SwaggerUIBundle({
    url: root.getAttribute("data-openapi"),
    dom_id: "#swagger-ui",
    layout: "BaseLayout",
    deepLinking: true,
    showExtensions: true,
    showCommonExtensions: true,
    validatorUrl: null,
    presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset]
  });
})();
"""

SWAGGER_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{title} — API</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" type="image/png" href="{root}{assets}/favicon.png">
<link rel="stylesheet" href="{root}{assets}/swagger-ui.css">
</head><body>
<div id="swagger-ui" data-openapi="{openapi}"></div>
<script src="{root}{assets}/swagger-ui-bundle.js"></script>
<script src="{root}/docs/init.js"></script>
</body></html>
"""

REDOC_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>{title} — API (ReDoc)</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<link rel="icon" type="image/png" href="{root}{assets}/favicon.png">
</head><body>
<redoc spec-url="{openapi}"></redoc>
<script src="{root}{assets}/redoc.standalone.js"></script>
</body></html>
"""


def install(app: FastAPI) -> None:
    """``/docs``, ``/redoc``, ``/docs/init.js`` and the package's files under ``/docs/assets``
    (the app is made with ``docs_url=None, redoc_url=None``)."""
    app.mount(ASSETS, StaticFiles(packages=[ASSETS_PACKAGE]), name="docs-assets")

    @app.get("/docs", include_in_schema=False)
    def swagger(request: Request) -> HTMLResponse:
        return HTMLResponse(_page(SWAGGER_PAGE, app, request), headers=HEADERS)

    @app.get("/redoc", include_in_schema=False)
    def redoc(request: Request) -> HTMLResponse:
        return HTMLResponse(_page(REDOC_PAGE, app, request), headers=HEADERS)

    @app.get("/docs/init.js", include_in_schema=False)
    def init_js() -> Response:
        return Response(
            INIT_JS,
            media_type="text/javascript; charset=utf-8",
            headers={"X-Content-Type-Options": "nosniff"},
        )


def _page(template: str, app: FastAPI, request: Request) -> str:
    root = request.scope.get("root_path", "").rstrip("/")  # behind a proxy under a prefix
    return template.format(
        title=escape(app.title),
        root=escape(root),
        assets=ASSETS,
        openapi=escape(root + (app.openapi_url or "/openapi.json")),
    )
