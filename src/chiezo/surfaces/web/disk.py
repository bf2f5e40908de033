"""The admin page's disk section: what each source and cache takes, and a button that reclaims
what is not needed (ops/maintenance.py — the same survey and the same deletions as ``chiezo gc``).

Reclaiming is a write: ``POST /admin/disk`` passes the check every write passes
(surfaces/rest/security.py ``Security.check_write``: another site's ``Origin`` refused, the bearer token
beyond loopback), so a page elsewhere cannot make a visitor's browser delete anything here.
"""

from __future__ import annotations

from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from chiezo.ops.context import Context
from chiezo.ops.maintenance import Survey, reclaim, survey


class ReclaimIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    caches: bool = Field(
        default=False, description="also caches no source uses (chiezo gc --caches)"
    )


def page_survey(service: Context) -> Survey:
    """The survey the page shows: stale document-cache entries are not counted (that reads
    those caches whole, on every page view); reclaiming counts them."""
    return survey(service.settings, count_entries=False)


def _write(request: Request) -> None:
    request.app.state.security.check_write(request)


def install(app: FastAPI, service: Context) -> None:
    @app.post("/admin/disk", include_in_schema=False, dependencies=[Depends(_write)])
    def reclaim_disk(body: ReclaimIn) -> JSONResponse:
        """Reclaim space (maintenance.reclaim): surveyed again now, each source under its
        build lock; the answer says what was freed, deleted, converted and skipped."""
        return JSONResponse(reclaim(service.settings, caches=body.caches).to_dict())
