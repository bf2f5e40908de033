"""What each parameter and body of the API accepts, stated so that /openapi.json tells the
truth: types, ranges, lengths, enumerations, the patterns of api/patterns.py, and the errors
each kind of route gives. Routes (app.py, jobs_routes.py) only name these."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import Path, Query
from pydantic import BaseModel, ConfigDict, Field, StrictBool

from ..browse import DOC_FIELDS
from ..inputs import MAX_OFFSET, MAX_SQL_INT, MAX_TEXT_CHARS
from ..notes import MAX_NOTE_CHARS, MAX_TAG_CHARS, MAX_TAGS
from ..search.fts import MAX_WINDOW
from ..search.query import MAX_QUERY_CHARS
from ..service import MAX_LIMIT, MAX_QUESTION_CHARS
from .openapi import errors as documented
from .patterns import ATTR, BOX, FEATURES, FIELD_LIST, ISO_MOMENT, NEAR_DOC, NOT_BLANK, POINT

SOURCE_RESPONSES = documented(404, 409, 504)
ANSWER_RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the answer; with `stream` the events instead (text/event-stream)",
        "content": {"application/json": {}, "text/event-stream": {"schema": {
            "type": "object", "required": ["data"],
            "properties": {"event": {"enum": ["references", "delta", "step", "done", "error"]},
                           "data": {"type": "string", "description": "JSON"}}}}},
    },
    **documented(404, 409, 422, 503, 504),
}


def stated(**constraints) -> dict[str, Any]:
    """Constraints the OpenAPI document states but the service checks, so that a request
    breaking one gets the service's reason ("near '91,0' is outside ±90 latitude / ±180
    longitude", "title is 50,000 characters long; the limit is 1,000") instead of a bare
    regex."""
    names = {"min_length": "minLength", "max_length": "maxLength"}
    return {"json_schema_extra": {names.get(k, k): v for k, v in constraints.items()}}


Box = Annotated[str | None, Query(description="south,west,north,east", **stated(pattern=BOX))]
Near = Annotated[str | None, Query(description="lat,lon: nearest first", **stated(pattern=POINT))]
NearDoc = Annotated[
    str | None,
    Query(description="source:title, e.g. jawiki:浅草寺: near its point",
          **stated(max_length=MAX_TEXT_CHARS, pattern=NEAR_DOC)),
]  # fmt: skip
Radius = Annotated[float | None, Query(gt=0, le=20_000, description="km; needs near or near_doc")]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description=f"1-{MAX_LIMIT}")]
ListLimit = Annotated[int, Query(ge=1, le=500)]
Offset = Annotated[int, Query(ge=0, le=MAX_OFFSET)]
# a search's offset + limit stays within its window (fts.MAX_WINDOW) whatever the limit
SearchOffset = Annotated[int, Query(ge=0, le=MAX_WINDOW - MAX_LIMIT)]
Fields = Annotated[
    list[str] | None,
    Query(description="comma-separated: " + ", ".join(DOC_FIELDS),
          json_schema_extra={"items": {"type": "string", "pattern": FIELD_LIST}}),  # fmt: skip
]
Feature = Annotated[
    list[str] | None,
    Query(description="key=value, e.g. tourism=museum (places; comma = OR)",
          json_schema_extra={"items": {"type": "string", "pattern": FEATURES}}),
]  # fmt: skip
Attr = Annotated[
    list[str] | None,
    Query(description="name=value", json_schema_extra={"items": {"type": "string",
                                                                 "pattern": ATTR}}),
]  # fmt: skip
Since = Annotated[str | None, Query(description="ISO date or date-time",
                                    json_schema_extra=ISO_MOMENT)]  # fmt: skip
Until = Annotated[str | None, Query(description="ISO date or date-time, inclusive",
                                    json_schema_extra=ISO_MOMENT)]  # fmt: skip
SearchText = Annotated[
    str, Query(**stated(min_length=1, max_length=MAX_QUERY_CHARS, pattern=NOT_BLANK))
]
ShortText = Annotated[str | None, Query(**stated(max_length=MAX_TEXT_CHARS))]
RecallText = Annotated[str | None, Query(**stated(max_length=MAX_QUERY_CHARS))]
Question = Annotated[
    str, Query(**stated(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=NOT_BLANK))
]
# a document, note or job id: within SQLite's integers (beyond them an id names nothing)
PathId = Annotated[int, Path(ge=0, le=MAX_SQL_INT)]
QueryId = Annotated[int | None, Query(ge=0, le=MAX_SQL_INT)]
SourceName = Annotated[str, Path(description="a source name from /v1/sources")]
Mode = Annotated[
    Literal["keyword", "semantic", "hybrid"] | None,
    Query(description="default: hybrid where the source has vectors, keyword elsewhere"),
]
KeywordWeight = Annotated[
    float | None, Query(ge=0, le=1, description="hybrid: weight of the keyword side, 0..1")
]
Fusion = Annotated[
    Literal["minmax", "rrf"] | None, Query(description="hybrid: minmax (weighted) or rrf")
]
TopN = Annotated[
    int | None, Query(ge=1, le=1000, description="candidates from each side (and before near)")
]
Explain = Annotated[bool, Query(description="each hit's keyword rank, semantic rank, fused score")]
MinScore = Annotated[
    float | None, Query(description="semantic: cosine floor (default: the model's own)")
]


NoteText = Annotated[
    str,
    Field(min_length=1, max_length=MAX_NOTE_CHARS, pattern=NOT_BLANK,
          description="the content itself: names, numbers, dates, items"),
]  # fmt: skip
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


class ChatIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[ChatMessage] = Field(
        min_length=1, max_length=200, description="the conversation; the last is the question"
    )
    source: str | None = None
    # JSON true/false only: 0 and "no" are not false here (lax parsing accepted them)
    strict: StrictBool = False
    stream: StrictBool = False
    budget: int | None = Field(default=None, ge=300, description="characters of excerpts")
    mode: Literal["rag", "agent"] = "rag"
    grounded: StrictBool = Field(default=True, description="false: may answer beyond the sources")
    steps: int = Field(default=6, ge=1, le=20, description="agent: tool-call steps")


class NotePatch(BaseModel):
    """Only the fields sent change (at least one); null is not a value of any of them."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"minProperties": 1})
    text: NoteText = None  # type: ignore[assignment] - absent, never null
    title: str = None  # type: ignore[assignment]
    tags: NoteTagList = None  # type: ignore[assignment]
