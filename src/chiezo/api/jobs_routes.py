"""``/v1/jobs``: background rebuild and embed jobs (jobs.py), their live progress and log.

Starting a job is a write (the token beyond loopback, like note writes); reading jobs and plans
is not. The runner lives on ``app.state.jobs`` so other surfaces of the app (the web UI) share
its one-job-at-a-time rule and its list.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import FastAPI, Query
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from ..jobs import JobRunner

Action = Annotated[str, Query(description="rebuild (from the recorded input) or embed")]
Model = Annotated[
    str | None,
    Query(description="embed: the model (default: the source's); rebuild: embed after with it"),
]


class JobIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str = Field(description="a source name from /v1/sources")
    action: str = Field(description="rebuild or embed")
    model: str | None = Field(
        default=None,
        description="embed: the model (default: the source's); rebuild: the model to embed "
        "with afterwards (default: the previous generation's, if it had vectors)",
    )


def install(app: FastAPI, service, write_dependencies: list) -> None:
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

    @app.get("/v1/jobs/plan", tags=["jobs"])
    def plan_job(source: str, action: Action = "rebuild", model: Model = None) -> JSONResponse:
        """What starting this job would do: the input and whether it is still there, the
        current generation, the embedding model that runs, whether a job is running."""
        return JSONResponse(jobs.plan(source, action, model))

    @app.get("/v1/jobs/{job_id:int}", tags=["jobs"])
    def get_job(
        job_id: int,
        log_from: Annotated[
            int, Query(ge=0, description="log lines from this number on (log_next of the last)")
        ] = 0,
    ) -> JSONResponse:
        """One job: state, current phase with its progress, the log from ``log_from``,
        the report when done, the error when failed."""
        return JSONResponse(jobs.get(job_id).to_dict(log_from))

    @app.post("/v1/jobs", status_code=202, tags=["jobs"], dependencies=write_dependencies)
    def start_job(body: JobIn) -> JSONResponse:
        """Start a rebuild or embed job in the background: 202 with the job to poll; 409
        while another job runs."""
        job = jobs.start(body.source, body.action, body.model)
        return JSONResponse(job.to_dict(), status_code=202)
