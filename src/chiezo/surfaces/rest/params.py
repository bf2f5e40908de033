"""What each parameter and body of the API accepts, stated so that /openapi.json tells the
truth: types, ranges, lengths, enumerations, the patterns of ops/patterns.py, and the errors
each kind of route gives. Routes (app.py, jobs_routes.py) only name these; the operations of
ops/registry.py take theirs from ops/requests.py (``query_parameters``)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field

from chiezo.core.validation import MAX_SQL_INT
from chiezo.ops.notes import MAX_TAG_CHARS, MAX_TAGS
from chiezo.ops.patterns import NOT_BLANK
from chiezo.ops.requests import (
    MAX_QUESTION_CHARS,
    AnswerRequest,
    ChatRequest,
    NoteText,
    Param,
    Request,
    params,
    stated,
)
from chiezo.surfaces.rest.openapi import errors as documented

SOURCE_RESPONSES = documented(404, 409, 502, 504)
ANSWER_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the answer; with `stream` the events instead (text/event-stream)",
        "content": {
            "application/json": {},
            "text/event-stream": {
                "schema": {
                    "type": "object",
                    "required": ["data"],
                    "properties": {
                        "event": {"enum": ["references", "delta", "step", "done", "error"]},
                        "data": {"type": "string", "description": "JSON"},
                    },
                }
            },
        },
    },
    **documented(404, 409, 422, 502, 503, 504),
}


def query_parameters(
    model: type[Request],
    *,
    omit: Iterable[str] = (),
    in_query: Iterable[str] = (),
    path: str | None = None,
    paths: Sequence[str] = (),
) -> Callable[..., Any]:
    """A dependency reading ``model``'s parameters (ops/requests.py) from the query string
    and the path, returning the model: routes declare none of them, and /openapi.json states
    each with its bounds and patterns. ``omit``: parameters this route does not take;
    ``in_query``: path parameters this route takes in its query string. With the route's
    ``path`` (and the operation's other ``paths``), both follow from the paths (``route_shape``)."""
    in_path: set[str] = set()
    if path is not None:
        omitted, queried, in_path = route_shape(model, path, paths)
        omit, in_query = {*omit, *omitted}, {*in_query, *queried}
    declared = [p for p in params(model) if p.name not in set(omit)]
    names = {rest_name(p): p.name for p in declared}
    queried_names = set(in_query)

    def read(**values: Any) -> Request:
        return model.model_validate({names[k]: v for k, v in values.items()})

    read.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [_rest_parameter(p, p.name in queried_names, p.name in in_path) for p in declared]
    )
    return read


def route_shape(
    model: type[Request], path: str, paths: Sequence[str]
) -> tuple[set[str], set[str], set[str]]:
    """(omitted, in the query, in the path) for a route of ``model`` at ``path``: a
    parameter another route of the operation takes in its path is taken only there
    (``doc_id`` in ``/doc/{doc_id}``), and a path naming a document one way takes none of
    the others (``model.ways_to_name``); a path parameter this path lacks is taken in the
    query (``/v1/search?source=a,b``)."""
    named = set(_PATH_NAMES.findall(path))
    elsewhere = {n for other in paths for n in _PATH_NAMES.findall(other)} - named
    by_rest = {rest_name(p): p for p in params(model)}
    omitted = {
        by_rest[n].name for n in elsewhere if n in by_rest and not by_rest[n].surface.rest_path
    }
    if named & set(model.ways_to_name):
        omitted |= set(model.ways_to_name) - named
    queried = {
        p.name for p in by_rest.values() if p.surface.rest_path and rest_name(p) not in named
    }
    in_path = {by_rest[n].name for n in named if n in by_rest}
    return omitted, queried, in_path


def typed_path(model: type[Request], path: str) -> str:
    """``path`` with a number's converter (``{doc_id:int}``): /doc/abc is then no route (404),
    not a document named abc."""
    kinds = {rest_name(p): p.kind for p in params(model)}
    return _PATH_NAMES.sub(
        lambda m: f"{{{m.group(1)}:int}}" if kinds.get(m.group(1)) is int else m.group(0), path
    )


_PATH_NAMES = re.compile(r"\{(\w+)\}")


def model_query(model: type[BaseModel]) -> Callable[..., Any]:
    """A dependency reading a plain pydantic model's fields from the query string (each
    with its bounds and description in /openapi.json), returning the model."""

    def read(**values: Any) -> BaseModel:
        return model.model_validate(values)

    read.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [
            inspect.Parameter(
                name,
                inspect.Parameter.KEYWORD_ONLY,
                default=field.default,
                annotation=Annotated[
                    field.annotation, *field.metadata, Query(description=field.description)
                ],
            )
            for name, field in model.model_fields.items()
        ]
    )
    return read


def rest_name(param: Param) -> str:
    return param.rest


def _rest_parameter(param: Param, in_query: bool = False, path: bool = False) -> inspect.Parameter:
    in_path = path or (param.surface.rest_path and not in_query)
    if in_path:
        annotation: Any = Annotated[param.kind, Path(**param.constraints())]
    else:
        annotation = Annotated[param.annotation, Query(**param.constraints())]
    required = param.required or in_path
    default = inspect.Parameter.empty if required else param.default
    return inspect.Parameter(
        rest_name(param), inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
    )


Question = Annotated[
    str, Query(**stated(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=NOT_BLANK))
]
# a document, note or job id: within SQLite's integers (beyond them an id names nothing)
PathId = Annotated[int, Path(ge=0, le=MAX_SQL_INT)]
NoteTagList = Annotated[
    list[Annotated[str, Field(max_length=MAX_TAG_CHARS)]],
    Field(max_length=MAX_TAGS, description=f"at most {MAX_TAGS} short labels"),
]


STREAM_DESCRIPTION = "server-sent events as the answer is written"


class AskParams(AnswerRequest):
    """``/v1/ask``'s choices in its query string (the question is ``q``): a query string has no
    JSON booleans, so ?strict=1 and ?grounded=0 are the documented forms."""

    stream: bool = Field(default=False, description=STREAM_DESCRIPTION)


class ChatIn(ChatRequest):
    """``/v1/chat``'s body: JSON true/false only (0 and "no" are not false here, as pydantic's
    lax parsing of a query string's values would take them)."""

    model_config = ConfigDict(strict=True)
    stream: bool = Field(default=False, description=STREAM_DESCRIPTION)


class NotePatch(BaseModel):
    """Only the fields sent change (at least one); null is not a value of any of them."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})
    text: NoteText = None  # type: ignore[assignment]  # absent, never null
    title: str = None  # type: ignore[assignment]
    tags: NoteTagList = None  # type: ignore[assignment]
