"""One error hierarchy for every surface.

Each error knows its HTTP status and its CLI exit code, and carries extras (known sources,
candidate titles, a hint) that help a person or a model take the next step. Surfaces never
invent their own error shapes: they render ``ChiezoError.to_dict()``.

A hint that sends the reader somewhere names it as the surface they are on spells it: the
raiser gives a template and the operations it names (``see=``), and each surface renders them
(``to_dict(surface)``): ``chiezo features osm`` on the command line, ``GET /v1/osm/features``
over REST, ``features(source="osm")`` to an MCP client.
"""

from __future__ import annotations

import json
import shlex
from typing import Any
from urllib.parse import quote

from chiezo.core.operations import BY_NAME, CATALOGUE, hint_spellings

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NOT_FOUND = 3
EXIT_UNCITED = 4
EXIT_NO_MODEL = 5


# -- hints that name an operation ---------------------------------------------------------------

CLI, REST, MCP = "cli", "rest", "mcp"
SURFACES = (CLI, REST, MCP)


class Operation:
    """Something a hint sends the reader to do, e.g. ``Operation("features", "osm")``: list a
    source's features. ``source`` may be left to the error's ``source`` extra or to the request
    the surface is answering (``to_dict(source=...)``); ``args`` are an operation's own values
    (``kind``/``path`` of ``ingest``, ``model`` of ``embed``)."""

    # what every surface offers: (the command after "chiezo ", the REST route, the MCP tool
    # call), spelt from the catalogue of operations (core/operations.py)
    EVERYWHERE = {e.name: hint_spellings(e) for e in CATALOGUE if e.everywhere}
    # what the server's operator does on its machine; REST also starts these as jobs
    OPERATOR = {
        name: hint_spellings(BY_NAME[name])[0] for name in ("embed", "rebuild", "ingest", "remove")
    }
    JOBS = ("embed", "rebuild")

    def __init__(self, name: str, source: str | None = None, **args: Any):
        if name not in self.EVERYWHERE and name not in self.OPERATOR:
            raise ValueError(f"no such operation: {name!r}")
        self.name, self.source = name, source
        self.args = {k: str(v) for k, v in args.items() if v is not None}

    def render(self, surface: str, source: str | None = None) -> str:
        """The operation as the surface spells it (the error's ``see``)."""
        surface, fields = _surface(surface), self._fields(self.source or source)
        if self.name in self.EVERYWHERE:
            cli, rest, mcp = self.EVERYWHERE[self.name]
            return {CLI: "chiezo " + cli, REST: rest, MCP: mcp}[surface].format(**fields)
        if surface == REST and self.name in self.JOBS:
            body = {"source": self.source or source or "…", "action": self.name, **self.args}
            return "POST /v1/jobs " + _json(body)
        return self._command(fields)

    def phrase(self, surface: str, source: str | None = None) -> str:
        """The operation inside a hint's sentence: code in backticks, and where the surface
        cannot do it itself, that it is done on the server."""
        said = f"`{self.render(surface, source)}`"
        if surface == CLI or self.name in self.EVERYWHERE:
            return said
        command = f"`{self._command(self._fields(self.source or source))}`"
        if said != command:  # a REST job
            return f"{said} (or {command} on the server)"
        return f"{command} on the server"

    def _fields(self, source: str | None) -> dict[str, str]:
        path = self.args.get("path")
        return {
            "cli": shlex.quote(source)
            if source
            else ("NAME" if self.name == "ingest" else "SOURCE"),
            "rest": quote(source, safe="") if source else "{source}",
            "mcp": _json(source) if source else "…",
            "kind": self.args.get("kind", "KIND"),
            "path": shlex.quote(path) if path else "PATH",
        }

    def _command(self, fields: dict[str, str]) -> str:
        options = "".join(
            f" --{k.replace('_', '-')} {shlex.quote(v)}"
            for k, v in self.args.items()
            if k not in ("kind", "path")
        )
        return "chiezo " + self.OPERATOR[self.name].format(**fields) + options

    def __repr__(self) -> str:
        return f"Operation({self.name!r}, {self.source!r}, **{self.args!r})"


class Option:
    """A parameter of the request in hand, as the surface spells it: ``--mode keyword`` on the
    command line, ``mode=keyword`` in a query string, ``mode="keyword"`` in a tool call."""

    def __init__(self, name: str, value: str | None = None):
        self.name, self.value = name, value

    def render(self, surface: str, source: str | None = None) -> str:
        surface, value = _surface(surface), self.value
        if surface == CLI:
            flag = "--" + self.name.replace("_", "-")
            return flag if value is None else f"{flag} {shlex.quote(value)}"
        if surface == MCP:
            return self.name if value is None else f"{self.name}={_json(value)}"
        return f"{self.name}={value or ''}"

    def phrase(self, surface: str, source: str | None = None) -> str:
        return f"`{self.render(surface, source)}`"

    def __repr__(self) -> str:
        return f"Option({self.name!r}, {self.value!r})"


def _json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _surface(surface: str) -> str:
    if surface not in SURFACES:
        raise ValueError(f"no such surface: {surface!r} (one of {', '.join(SURFACES)})")
    return surface


class ChiezoError(Exception):
    """``hint`` with ``see``: a template whose ``{see}`` (the first) or ``{0}``, ``{1}``...
    are the operations ``see`` names (one, or a tuple), each surface spelling them its way;
    ``extras["hint"]`` holds the REST spelling, for whoever reads the extras directly."""

    status = 500
    exit_code = EXIT_FAILURE

    def __init__(self, message: str, **extras: Any):
        super().__init__(message)
        self.message = message
        see = extras.pop("see", None)
        self.see: tuple[Operation | Option, ...] = (
            tuple(see) if isinstance(see, list | tuple) else () if see is None else (see,)
        )
        self.extras = {k: v for k, v in extras.items() if v is not None}
        self._hint = self.extras.get("hint") if self.see else None
        if self.see:
            self.extras.update(self._rendered(REST, None))

    def to_dict(self, surface: str = REST, *, source: str | None = None) -> dict[str, Any]:
        """The one error shape, its hint naming operations as ``surface`` spells them;
        ``source``: the source of the request (for operations that name none themselves)."""
        surface = _surface(surface)
        body = {"error": self.message, "status": self.status, **self.extras}
        if self.see:
            body.update(self._rendered(surface, source))
        return body

    def _rendered(self, surface: str, source: str | None) -> dict[str, Any]:
        source = self.extras.get("source") or source
        out: dict[str, Any] = {"see": [s.render(surface, source) for s in self.see]}
        if self._hint:
            phrases = [s.phrase(surface, source) for s in self.see]
            out["hint"] = self._hint.format(*phrases, see=phrases[0])
        return out


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


# -- failures of one layer, kept here with the rest so that every status and exit code is in one
# place and importing an error never imports the layer that raises it


class LLMUnavailable(ChiezoError):
    """No configured language model endpoint could answer (or one stopped mid-answer)."""

    status = 503
    exit_code = EXIT_NO_MODEL


class ModelMissing(LLMUnavailable):
    """An endpoint answered, but it has no model of the configured name."""


class ContextExceeded(LLMUnavailable):
    """What the model was to read does not fit its context window, even cut to fit (or the
    question alone is longer than it): extras ``prompt_tokens``, ``context_tokens`` and the
    ``setting`` to change. 413: the request is larger than the model can take (exit 1, the
    code a streamed answer's 413 gets too)."""

    status = 413
    exit_code = EXIT_FAILURE


class LLMTimeout(LLMUnavailable):
    """The model did not finish a stage (planning, the answer, the agent's run) within its
    deadline: extras ``stage``, ``seconds`` and the ``setting`` that sets it. 504, exit 1
    (the code a streamed answer's 504 gets too)."""

    status = 504
    exit_code = EXIT_FAILURE


class SourceUnavailable(ChiezoError):
    """A source searched live (a kiwix-serve book) could not be asked: its server is down,
    too slow, or answered something that is not what it should (extra ``timed_out``). 502:
    the server behind this one failed."""

    status = 502
    exit_code = EXIT_FAILURE


class LLMNotConfigured(ChiezoError):
    """Answering is off: no endpoint is configured (a configuration matter, exit 2)."""

    status = 503
    exit_code = EXIT_USAGE


class WebSearchOff(ChiezoError):
    """A web search was asked for (``--web``, the ``web_search`` tool) where none is set up
    (``CHIEZO_WEB_SEARCH``): the request is valid, this installation is not set up for it —
    409, not 400 — and a configuration matter (exit 2)."""

    status = 409
    exit_code = EXIT_USAGE


class ModelUnavailable(ChiezoError):
    """An embedding model cannot be used: unknown, or its files or packages are missing."""

    status = 400
    exit_code = EXIT_USAGE


class VectorsUnavailable(ChiezoError):
    """A search by meaning cannot run on this source (no vectors, another dimension...)."""

    status = 400
    exit_code = EXIT_USAGE


class Unauthorized(ChiezoError):
    """A write without the bearer token it needs."""

    status = 401
    exit_code = EXIT_USAGE


class Forbidden(ChiezoError):
    """A write this server refuses whatever the token: from another site's page, or with
    writes disabled (serving beyond loopback with no token set)."""

    status = 403
    exit_code = EXIT_USAGE


class InternalError(ChiezoError):
    """A bug: an exception no ChiezoError describes, in the one shape (status 500). Whoever
    catches it logs the traceback; the client is told the exception's type only, unless the
    place it is shown is the operator's own (a job's record: ``detail``)."""

    status = 500
    exit_code = EXIT_FAILURE

    @classmethod
    def wrapping(cls, exc: BaseException, *, detail: bool = False) -> InternalError:
        said = f": {exc}" if detail and str(exc) else ""
        return cls(
            f"internal error ({type(exc).__name__}){said}",
            hint="this is a bug; the server log has the details",
        )


class Cancelled(ChiezoError):
    """A job stopped at the request of whoever may run jobs (``JobRunner.cancel``); the
    current generation keeps serving."""

    status = 409
    exit_code = EXIT_FAILURE
