"""What each parameter and body of the API accepts, stated so that /openapi.json tells the
truth: types, ranges, lengths, enumerations, the patterns of ops/patterns.py, and the errors
each kind of route gives. Routes (app.py, jobs_routes.py) only name these; the operations of
ops/registry.py take theirs from ops/requests.py (``query_parameters``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from chiezo.answer.options import AnswerOptions
from chiezo.core.validation import MAX_SQL_INT
from chiezo.ops.notes import MAX_TAG_CHARS, MAX_TAGS
from chiezo.ops.patterns import NOT_BLANK
from chiezo.ops.requests import (
    MAX_QUESTION_CHARS,
    AnswerRequest,
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
    model: type[Request], *, omit: Iterable[str] = (), in_query: Iterable[str] = ()
) -> Callable[..., Any]:
    """A dependency reading ``model``'s parameters (ops/requests.py) from the query string
    and the path, returning the model: routes declare none of them, and /openapi.json states
    each with its bounds and patterns. ``omit``: parameters this route does not take;
    ``in_query``: path parameters this route takes in its query string (``/v1/search``'s
    ``source=a,b``)."""
    declared = [p for p in params(model) if p.name not in set(omit)]
    names = {rest_name(p): p.name for p in declared}
    queried = set(in_query)

    def read(**values: Any) -> Request:
        return model.model_validate({names[k]: v for k, v in values.items()})

    read.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [_rest_parameter(p, p.name in queried) for p in declared]
    )
    return read


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


def _rest_parameter(param: Param, in_query: bool = False) -> inspect.Parameter:
    in_path = param.surface.rest_path and not in_query
    if in_path:
        annotation: Any = Annotated[str, Path(**param.constraints())]
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


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=NOT_BLANK)
    cited_titles: list[Annotated[str, Field(max_length=300)]] | None = Field(
        default=None,
        max_length=20,
        description="an assistant turn: the titles it cited (a follow-up's subject)",
    )


class AnswerChoices(AnswerRequest):
    """How to answer (ops/requests.py), and how the answer comes back."""

    # JSON true/false only: 0 and "no" are not false here (pydantic's lax bool takes them)
    strict: StrictBool = Field(
        default=False, description="422 on an uncited or unsupported sentence"
    )
    stream: StrictBool = False
    grounded: StrictBool | None = Field(
        default=None, description="false: may answer beyond the sources"
    )

    def options(self) -> AnswerOptions:
        return AnswerOptions.of(**self.model_dump(exclude={"stream", "messages"}))


class AskParams(AnswerChoices):
    """``/v1/ask``'s query parameters (the same choices as a chat's body)."""

    # a query string has no JSON booleans: ?strict=1 and ?grounded=0 are the documented forms
    strict: bool = Field(default=False, description="422 on an uncited or unsupported sentence")
    stream: bool = False
    grounded: bool | None = Field(default=None, description="0: may answer beyond the sources")


class ChatIn(AnswerChoices):
    messages: list[ChatMessage] = Field(
        min_length=1, max_length=200, description="the conversation; the last is the question"
    )


class NotePatch(BaseModel):
    """Only the fields sent change (at least one); null is not a value of any of them."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})
    text: NoteText = None  # type: ignore[assignment]  # absent, never null
    title: str = None  # type: ignore[assignment]
    tags: NoteTagList = None  # type: ignore[assignment]
