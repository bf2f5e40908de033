"""The web UI (``/``, ``/doc/...``, ``/admin``, ``/chat``) and its offline assets."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from chiezo.ops.context import Context


def install(app: FastAPI, service: Context) -> None:
    """Add the pages and ``/static`` to ``app`` (every asset ships inside the package)."""
    from chiezo.surfaces.web import pages

    app.mount("/static", StaticFiles(packages=[("chiezo.surfaces.web", "static")]), name="static")
    pages.install(app, service)
