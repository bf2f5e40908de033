"""What each parameter and body of the API accepts, stated so that /openapi.json tells the
truth: types, ranges, lengths, enumerations, the patterns of ops/patterns.py, and the errors
each kind of route gives. Routes (app.py, jobs_routes.py) only name these; search and filter
take theirs from ops/requests.py (``query_parameters``)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from chiezo.answer.options import MAX_EXCERPTS, MAX_TOKENS, AnswerOptions
from chiezo.core.query import MAX_QUERY_CHARS
from chiezo.core.validation import MAX_OFFSET, MAX_SQL_INT, MAX_TEXT_CHARS
from chiezo.ops.browse import DOC_FIELDS
from chiezo.ops.notes import MAX_NOTE_CHARS, MAX_TAG_CHARS, MAX_TAGS
from chiezo.ops.patterns import FIELD_LIST, ISO_MOMENT, NOT_BLANK
from chiezo.ops.requests import MAX_LIMIT, MAX_LIST_LIMIT, Param, Request, params, stated
from chiezo.ops.service import MAX_QUESTION_CHARS
from chiezo.surfaces.rest.openapi import errors as documented

SOURCE_RESPONSES = documented(404, 409, 504)
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
    **documented(404, 409, 422, 503, 504),
}


def query_parameters(model: type[Request], *, omit: Iterable[str] = ()) -> Callable[..., Any]:
    """A dependency reading ``model``'s parameters (ops/requests.py) from the query string
    and the path, returning the model: routes declare none of them, and /openapi.json states
    each with its bounds and patterns. ``omit``: parameters this route does not take."""
    declared = [p for p in params(model) if p.name not in set(omit)]
    names = {rest_name(p): p.name for p in declared}

    def read(**values: Any) -> Request:
        return model.model_validate({names[k]: v for k, v in values.items()})

    read.__signature__ = inspect.Signature([_rest_parameter(p) for p in declared])  # type: ignore[attr-defined]
    return read


def model_query(model: type[BaseModel]) -> Callable[..., Any]:
    """A dependency reading a plain pydantic model's fields from the query string (each
    with its bounds and description in /openapi.json), returning the model."""

    def read(**values: Any) -> BaseModel:
        return model.model_validate(values)

    read.__signature__ = inspect.Signature(
        [  # type: ignore[attr-defined]
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
    return param.surface.rest or param.name


def _rest_parameter(param: Param) -> inspect.Parameter:
    if param.surface.rest_path:
        annotation: Any = Annotated[str, Path(**param.constraints())]
    else:
        annotation = Annotated[param.annotation, Query(**param.constraints())]
    required = param.required or param.surface.rest_path
    default = inspect.Parameter.empty if required else param.default
    return inspect.Parameter(
        rest_name(param), inspect.Parameter.KEYWORD_ONLY, annotation=annotation, default=default
    )


Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"1-{MAX_LIMIT}")]
ListLimit = Annotated[int, Query(ge=1, le=MAX_LIST_LIMIT)]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
Fields = Annotated[
    list[str] | None,
    Query(
        description="comma-separated: " + ", ".join(DOC_FIELDS),
        json_schema_extra={"items": {"type": "string", "pattern": FIELD_LIST}},
    ),
]
Since = Annotated[
    str | None, Query(description="ISO date or date-time", json_schema_extra=ISO_MOMENT)
]
Until = Annotated[
    str | None, Query(description="ISO date or date-time, inclusive", json_schema_extra=ISO_MOMENT)
]
SearchText = Annotated[
    str, Query(**stated(min_length=1, max_length=MAX_QUERY_CHARS, pattern=NOT_BLANK))
]
ShortText = Annotated[str | None, Query(**stated(max_length=MAX_TEXT_CHARS))]
RecallText = Annotated[str | None, Query(**stated(max_length=MAX_QUERY_CHARS))]
Question = Annotated[
    str, Query(**stated(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=NOT_BLANK))
]
DocQuestion = Annotated[
    str | None,
    Query(
        **stated(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=NOT_BLANK),
        description="the body becomes the passages that best answer this question (what `ask` "
        "reads of the document), within max_chars (default: the answer budget)",
    ),
]
# a document, note or job id: within SQLite's integers (beyond them an id names nothing)
PathId = Annotated[int, Path(ge=0, le=MAX_SQL_INT)]
QueryId = Annotated[int | None, Query(ge=0, le=MAX_SQL_INT)]
SourceName = Annotated[str, Path(description="a source name from /v1/sources")]

NoteText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_NOTE_CHARS,
        pattern=NOT_BLANK,
        description="the content itself: names, numbers, dates, items",
    ),
]
NoteTagList = Annotated[
    list[Annotated[str, Field(max_length=MAX_TAG_CHARS)]],
    Field(max_length=MAX_TAGS, description=f"at most {MAX_TAGS} short labels"),
]
NoteTags = Annotated[NoteTagList | None, Field(default=None)]


class NoteIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: NoteText
    title: str | None = Field(default=None, description="default: the first line (cut at 200)")
    tags: NoteTags = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=NOT_BLANK)
    cited_titles: list[Annotated[str, Field(max_length=300)]] | None = Field(
        default=None,
        max_length=20,
        description="an assistant turn: the titles it cited (a follow-up's subject)",
    )


class AnswerChoices(BaseModel):
    """How to answer; unset fields take the configured defaults (CHIEZO_ANSWER_*)."""

    model_config = ConfigDict(extra="forbid")
    source: str | None = Field(default=None, description="answer from this source only")
    # JSON true/false only: 0 and "no" are not false here (lax parsing accepted them)
    strict: StrictBool = Field(
        default=False, description="422 on an uncited or unsupported sentence"
    )
    stream: StrictBool = False
    budget: int | None = Field(
        default=None, ge=300, le=200_000, description="characters of excerpts"
    )
    excerpts: int | None = Field(default=None, ge=1, le=MAX_EXCERPTS, description="documents read")
    max_tokens: int | None = Field(
        default=None, ge=16, le=MAX_TOKENS, description="the answer's length cap"
    )
    mode: Literal["rag", "agent"] | None = None
    grounded: StrictBool | None = Field(
        default=None, description="false: may answer beyond the sources"
    )
    steps: int = Field(default=6, ge=1, le=20, description="agent: tool-call steps")

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
    text: NoteText = None  # type: ignore[assignment] - absent, never null
    title: str = None  # type: ignore[assignment]
    tags: NoteTagList = None  # type: ignore[assignment]
