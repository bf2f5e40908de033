"""The web UI (``/``, ``/doc/...``, ``/admin``, ``/chat``) and its offline assets."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from ..service import Service


def install(app: FastAPI, service: Service) -> None:
    """Add the pages and ``/static`` to ``app`` (every asset ships inside the package)."""
    from . import pages

    app.mount("/static", StaticFiles(packages=[("chiezo.web", "static")]), name="static")
    pages.install(app, service)
