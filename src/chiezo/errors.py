"""One error hierarchy for every surface.

Each error knows its HTTP status and its CLI exit code, and carries extras (known sources,
candidate titles, a hint) that help a person or a model take the next step. Surfaces never
invent their own error shapes: they render ``ChiezoError.to_dict()``.
"""

from __future__ import annotations

from typing import Any

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNCITED = 4
EXIT_NO_MODEL = 5


class ChiezoError(Exception):
    status = 500
    exit_code = EXIT_FAILURE

    def __init__(self, message: str, **extras: Any):
        super().__init__(message)
        self.message = message
        self.extras = {k: v for k, v in extras.items() if v is not None}

    def to_dict(self) -> dict[str, Any]:
        return {"error": self.message, "status": self.status, **self.extras}


class ConfigError(ChiezoError):
    """A setting or environment variable is wrong."""

    status = 500
    exit_code = EXIT_USAGE


class BadQuery(ChiezoError):
    """The request itself is wrong: empty query, unknown field, offset too deep..."""

    status = 400
    exit_code = EXIT_USAGE


class NotFound(ChiezoError):
    """Nothing matches (a title, a doc id); ``candidates`` lists close alternatives."""

    status = 404
    exit_code = EXIT_NOT_FOUND


class UnknownSource(NotFound):
    """The named source does not exist; ``known_sources`` lists the ones that do."""

    exit_code = EXIT_USAGE


class SchemaMismatch(ChiezoError):
    """A source file was built by another schema version and must be rebuilt."""

    status = 409
    exit_code = EXIT_USAGE


class Conflict(ChiezoError):
    """The request collides with work in progress (a build job is already running)."""

    status = 409
    exit_code = EXIT_FAILURE


class QueryTimeout(ChiezoError):
    """The query ran past its deadline and was interrupted."""

    status = 504
    exit_code = EXIT_FAILURE


class StorageFull(ChiezoError):
    """The disk filled up during a write; nothing acknowledged is lost, the write is not done."""

    status = 507
    exit_code = EXIT_FAILURE


class Busy(ChiezoError):
    """Another writer held the lock past the wait; retrying later succeeds."""

    status = 503
    exit_code = EXIT_FAILURE


class BuildError(ChiezoError):
    """An ingest failed; the previous generation keeps serving."""

    status = 500
    exit_code = EXIT_FAILURE


class InputError(BuildError):
    """The input to an ingest is missing or unusable (missing folder, malformed dump)."""

    exit_code = EXIT_USAGE


class Uncited(ChiezoError):
    """A strict answer that cites none of its sources."""

    status = 422
    exit_code = EXIT_UNCITED
