"""``/v1/jobs``: background rebuild and embed jobs (ops/jobs.py), their live progress and log.

Starting and cancelling a job are writes (the token beyond loopback, like note writes);
reading jobs and plans is not. Cancelling is ``POST /v1/jobs/{id}/cancel`` rather than a
``DELETE``: the job is not removed — it stays listed, as "cancelled". The runner lives on
``app.state.jobs`` so other surfaces of the app (the web UI) share its one-job-at-a-time rule
and its list.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import fastapi.params
from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from chiezo.core.validation import MAX_SQL_INT, MAX_TEXT_CHARS
from chiezo.ops.context import Context
from chiezo.ops.jobs import JobRunner
from chiezo.store.library import NOTES
from chiezo.surfaces.rest.openapi import errors
from chiezo.surfaces.rest.params import PathId

# The notes (the one writable source, its name reserved) have no rebuild and no embed: the
# document says so as the schema of `source`, so that no client takes "notes" for a valid job.
NOT_NOTES: dict[str, Any] = {"not": {"const": NOTES}}
JobSource = Annotated[
    str,
    Query(
        max_length=MAX_TEXT_CHARS,
        json_schema_extra=NOT_NOTES,
        description="a source name, not the notes (written in place: no jobs)",
    ),
]
Action = Annotated[
    Literal["rebuild", "embed"], Query(description="rebuild (from the recorded input) or embed")
]
Model = Annotated[
    str | None,
    Query(
        max_length=MAX_TEXT_CHARS,
        description="embed: the model (default: the source's — so required while the source "
        "has no vectors yet: 400 without it); rebuild: embed after with it; one of the "
        "server's models (built-in, already in use, or CHIEZO_JOB_MODELS)",
    ),
]
Fetch = Annotated[
    bool,
    Query(
        description="rebuild: download the input again first (a source that was fetched: "
        "a newer dump, checked against its checksum) instead of reading the recorded file; "
        "with action=embed a 400"
    ),
]


class JobIn(BaseModel):
    # `fetch` is for a rebuild: with "embed" it must be false (a 400 otherwise)
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "if": {"properties": {"action": {"const": "embed"}}, "required": ["action"]},
            "then": {"properties": {"fetch": {"const": False}}},
        },
    )
    source: str = Field(
        description="a source name from /v1/sources, not the notes (written in place: no jobs)",
        json_schema_extra=NOT_NOTES,
    )
    action: Literal["rebuild", "embed"]
    model: str | None = Field(
        default=None,
        max_length=MAX_TEXT_CHARS,
        description="embed: the model (default: the source's — so required while the source "
        "has no vectors yet: 400 without it); rebuild: the model to embed with afterwards "
        "(default: the previous generation's, if it had vectors); one of the server's models",
    )
    fetch: bool = Field(
        default=False,
        description="rebuild: download the input again first (a source that was fetched); "
        "false for an embed",
    )


# The 400s a well-formed job gets: they depend on the source named (its vectors, its kind, its
# recorded input), which no schema of the request can state — so the document says them here.
REFUSED = {
    400: "a job this source cannot run, or a bad parameter or body: `embed` without `model` "
    "while the source has no vectors yet — the model must be named then (`known_models`); a "
    "`model` not among the server's (`known_models`); the notes (written in place: no rebuild, "
    "no embed); a rebuild whose input was never recorded, or is gone (`path`, `missing`; a "
    "plan states that as its `problem` instead); `fetch` for a source that was not downloaded, "
    "or with `embed`; an unknown parameter or field, a value out of range "
    "(`allowed_parameters`, `details`)",
}


def install(
    app: FastAPI, service: Context, write_dependencies: list[fastapi.params.Depends]
) -> None:
    jobs = JobRunner(service)
    app.state.jobs = jobs

    @app.get("/v1/jobs", tags=["jobs"])
    def list_jobs() -> JSONResponse:
        """The last jobs of every worker process, newest first (without their logs), and the
        id of the one running in this process."""
        running = jobs.running()
        return JSONResponse(
            {
                "jobs": [job.to_dict(with_log=False) for job in jobs.list()],
                "running": running.id if running else None,
            }
        )

    @app.get("/v1/jobs/plan", tags=["jobs"], responses=errors(400, 404, 409, why=REFUSED))
    def plan_job(
        source: JobSource, action: Action = "rebuild", model: Model = None, fetch: Fetch = False
    ) -> JSONResponse:
        """What starting this job would do: the input and whether it is still there (or where
        it is fetched again from), the current generation, the embedding model that runs,
        whether a job is running."""
        return JSONResponse(jobs.plan(source, action, model, fetch))

    @app.get("/v1/jobs/{job_id:int}", tags=["jobs"], responses=errors(404))
    def get_job(
        job_id: PathId,
        log_from: Annotated[
            int,
            Query(
                ge=0,
                le=MAX_SQL_INT,
                description="log lines from this number on (log_next of the last)",
            ),
        ] = 0,
    ) -> JSONResponse:
        """One job: state, current phase with its progress, the log from ``log_from``,
        the report when done, the error when failed."""
        return JSONResponse(jobs.get(job_id).to_dict(log_from))

    @app.post(
        "/v1/jobs",
        status_code=202,
        tags=["jobs"],
        dependencies=write_dependencies,
        responses=errors(400, 401, 403, 404, 409, why=REFUSED),
    )
    def start_job(body: JobIn) -> JSONResponse:
        """Start a rebuild or embed job in the background: 202 with the job to poll; 409
        while another job runs; 400 for a job the source cannot run (an embed of a source
        without vectors names its ``model``)."""
        job = jobs.start(body.source, body.action, body.model, fetch=body.fetch)
        return JSONResponse(job.to_dict(), status_code=202)

    @app.post(
        "/v1/jobs/{job_id:int}/cancel",
        status_code=202,
        tags=["jobs"],
        dependencies=write_dependencies,
        responses=errors(401, 403, 404, 409),
    )
    def cancel_job(job_id: PathId) -> JSONResponse:
        """Ask a running job to stop: 202 with the job (``cancel_requested``); it stops at its
        next progress update, removes what it wrote and ends "cancelled" — the current
        generation keeps serving. 409 when the job has already ended."""
        return JSONResponse(jobs.cancel(job_id).to_dict(with_log=False), status_code=202)
