"""The parameters of the ``search`` and ``filter`` operations, declared once.

Each parameter's name, type, default, bounds and help text live here; every surface derives
its own from these models: the REST query parameters (surfaces/rest/app.py), the CLI options (surfaces/cli/main.py),
the MCP tool arguments (ops/tools.py) and the web form's choices. tests/test_request_models.py
reads the live surfaces and checks that each offers exactly these parameters with these
bounds, so a parameter added here reaches every surface or fails that test.

Two kinds of constraint:

* numeric ranges and choices (``ge``/``gt``/``le``, ``Literal``) are enforced by every surface
  before the service is called (FastAPI, click, the MCP SDK's validation);
* text shapes (lengths, the patterns of ops/patterns.py) are only *stated* (``stated()``): the
  service checks them itself and answers with its own reason, which a bare regex failure
  would not give.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import BaseModel, ConfigDict, Field, field_validator

from chiezo.core.query import MAX_QUERY_CHARS
from chiezo.core.validation import MAX_OFFSET, MAX_TEXT_CHARS
from chiezo.ops.browse import DOC_FIELDS
from chiezo.ops.patterns import ATTR, BOX, FEATURES, FIELD_LIST, NEAR_DOC, NOT_BLANK, POINT
from chiezo.search.fts import MAX_WINDOW
from chiezo.search.retrieval import DEFAULT_TOP_N, FUSIONS, MODES

DEFAULT_LIMIT = 10
MAX_LIMIT = 50  # hits of one search page
MAX_FILTER_LIMIT = 500  # documents of one filter page (cheap rows, no ranking)
MAX_LIST_LIMIT = 500  # names of one list page (titles, tags, links, features)
MAX_TOP_N = 1000  # candidates from each side of a hybrid search (search/retrieval.py checks it)
MAX_RADIUS_KM = 20_000  # half the Earth's circumference: any point is within it


def stated(**constraints: Any) -> dict[str, Any]:
    """Constraints the schemas state but the service checks, so that a request breaking one
    gets the service's reason ("near '91,0' is outside ±90 latitude / ±180 longitude", "title
    is 50,000 characters long; the limit is 1,000") instead of a bare regex."""
    names = {"min_length": "minLength", "max_length": "maxLength"}
    return {"json_schema_extra": {names.get(k, k): v for k, v in constraints.items()}}


def stated_items(pattern: str) -> dict[str, Any]:
    """The pattern each item of a list parameter is stated to match."""
    return {"json_schema_extra": {"items": {"type": "string", "pattern": pattern}}}


@dataclass(frozen=True)
class Surface:
    """Where a surface departs from the mechanical spelling (REST and MCP ``near_doc``, CLI
    ``--near-doc``), because clients already rely on it; and what needs one source."""

    rest: str | None = None  # REST's name, e.g. q for query
    cli_flags: tuple[str, ...] = ()  # short CLI flags besides the long one, e.g. -n
    # a positional CLI argument rather than an option: "value", or "words" (several, joined
    # by spaces, so that a query needs no quotes)
    cli_argument: Literal["value", "words"] | None = None
    rest_path: bool = False  # REST: part of the path (/v1/{source}/...), not the query
    one_source: bool = False  # a condition on one source's documents (not in /v1/search)


CONDITION = Surface(one_source=True)

# Conditions on documents, the same in search and filter (search/filters.py reads them).
Tag = Annotated[
    list[str] | None,
    Field(description="only documents with this tag (comma = OR; repeat for AND)"),
    CONDITION,
]
Attr = Annotated[
    list[str] | None,
    Field(description="only documents with this name=value attribute", **stated_items(ATTR)),
    CONDITION,
]
Feature = Annotated[
    list[str] | None,
    Field(
        description="places: key=value, e.g. tourism=museum (comma = OR)", **stated_items(FEATURES)
    ),
    CONDITION,
]
Area = Annotated[list[str] | None, Field(description="places: admin area name"), CONDITION]
Wikidata = Annotated[list[str] | None, Field(description="Wikidata Q-id, e.g. Q90"), CONDITION]
Box = Annotated[
    str | None, Field(description="south,west,north,east", **stated(pattern=BOX)), CONDITION
]
NearDoc = Annotated[
    str | None,
    Field(
        description="source:title of a document with coordinates, e.g. jawiki:浅草寺: as "
        "near, at its point",
        **stated(max_length=MAX_TEXT_CHARS, pattern=NEAR_DOC),
    ),
    CONDITION,
]
RadiusKm = Annotated[
    float | None,
    Field(gt=0, le=MAX_RADIUS_KM, description="km; with near or near_doc: only within it"),
    CONDITION,
]


class Request(BaseModel):
    """What search and filter share: how their values reach the service."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # the service's own names (its keyword arguments predate these models)
    SERVICE_NAMES: typing.ClassVar[dict[str, str]] = {"query": "q", "tag": "tags", "attr": "attrs"}

    @field_validator("*", mode="before")
    @classmethod
    def _no_items_is_no_condition(cls, value: Any) -> Any:
        # the CLI gives () for an option never repeated, a form or client may send []
        return None if isinstance(value, list | tuple) and not value else value

    def arguments(self) -> dict[str, Any]:
        """Keyword arguments for the Service method of this operation."""
        return {self.SERVICE_NAMES.get(name, name): value for name, value in self}


class SearchRequest(Request):
    query: Annotated[
        str,
        Field(
            description="words separated by spaces, or a question",
            **stated(min_length=1, max_length=MAX_QUERY_CHARS, pattern=NOT_BLANK),
        ),
        Surface(rest="q", cli_argument="words"),
    ]
    source: Annotated[
        str | None,
        Field(description="one source; omitted: every source, rankings fused"),
        Surface(cli_flags=("-s",), rest_path=True),
    ] = None
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_LIMIT, description=f"results per page (1-{MAX_LIMIT})"),
        Surface(cli_flags=("-n",)),
    ] = DEFAULT_LIMIT
    # a search's offset + limit stays within its window (fts.MAX_WINDOW) whatever the limit
    offset: Annotated[
        int, Field(ge=0, le=MAX_WINDOW - MAX_LIMIT, description="results to skip, for paging")
    ] = 0
    tag: Tag = None
    feature: Feature = None
    area: Area = None
    wikidata: Wikidata = None
    attr: Attr = None
    bbox: Box = None
    near: Annotated[
        str | None,
        Field(
            description="lat,lon: the top_n most relevant, nearest first", **stated(pattern=POINT)
        ),
        CONDITION,
    ] = None
    near_doc: NearDoc = None
    radius_km: RadiusKm = None
    mode: Annotated[
        Literal[MODES] | None,  # type: ignore[valid-type]
        Field(
            description="keyword, semantic (by meaning) or hybrid; default: hybrid where "
            "the source has vectors, keyword elsewhere"
        ),
    ] = None
    keyword_weight: Annotated[
        float | None,
        Field(
            ge=0,
            le=1,
            description="hybrid: weight of the keyword side, 0..1 (default: "
            "the model's, or CHIEZO_HYBRID_KEYWORD_WEIGHT)",
        ),
    ] = None
    fusion: Annotated[
        Literal[FUSIONS] | None,  # type: ignore[valid-type]
        Field(description="hybrid: minmax (weighted scores) or rrf (reciprocal rank)"),
    ] = None
    top_n: Annotated[
        int | None,
        Field(
            ge=1,
            le=MAX_TOP_N,
            description="candidates from each side, and how many near "
            f"reorders (default {DEFAULT_TOP_N})",
        ),
    ] = None
    explain: Annotated[
        bool, Field(description="each hit's keyword rank, semantic rank and fused score")
    ] = False
    min_score: Annotated[
        float | None, Field(description="semantic: cosine floor (default: the model's own)")
    ] = None


class FilterRequest(Request):
    source: Annotated[
        str,
        Field(description="a source name (see sources)"),
        Surface(cli_argument="value", rest_path=True),
    ]
    tag: Tag = None
    feature: Feature = None
    area: Area = None
    wikidata: Wikidata = None
    attr: Attr = None
    bbox: Box = None
    near: Annotated[
        str | None,
        Field(description="lat,lon: nearest first", **stated(pattern=POINT)),
        CONDITION,
    ] = None
    near_doc: NearDoc = None
    radius_km: RadiusKm = None
    fields: Annotated[
        list[str] | None,
        Field(
            description="fields per document, comma-separated: " + ", ".join(DOC_FIELDS),
            **stated_items(FIELD_LIST),
        ),
    ] = None
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_FILTER_LIMIT, description=f"documents per page (1-{MAX_FILTER_LIMIT})"),
        Surface(cli_flags=("-n",)),
    ] = DEFAULT_LIMIT
    offset: Annotated[
        int, Field(ge=0, le=MAX_OFFSET, description="documents to skip, for paging")
    ] = 0

    @field_validator("fields", mode="after")
    @classmethod
    def _comma_separated(cls, value: list[str] | None) -> list[str] | None:
        """``fields=a,b`` and ``fields=a&fields=b`` (``--fields a,b``) mean the same."""
        if value is None:
            return None
        return [f.strip() for item in value for f in item.split(",") if f.strip()] or None


# -- what the surfaces read ---------------------------------------------------------------------

_BOUNDS = {annotated_types.Ge: "ge", annotated_types.Gt: "gt", annotated_types.Le: "le"}


@dataclass(frozen=True)
class Param:
    """One declared parameter, as the surfaces need it."""

    name: str
    annotation: Any  # as declared, e.g. int | None; the REST and MCP signatures use it
    kind: type  # the type of one value: int, float, str or bool
    many: bool  # a list: a repeated option or query parameter
    required: bool
    default: Any
    help: str
    bounds: dict[str, float]  # ge, gt, le: enforced by every surface
    choices: tuple[str, ...] | None
    schema_extra: dict[str, Any] | None  # stated, not enforced (checked by the service)
    surface: Surface

    def constraints(self) -> dict[str, Any]:
        """Keyword arguments for a FastAPI ``Query``/``Path`` or a pydantic ``Field``."""
        return {"description": self.help, "json_schema_extra": self.schema_extra, **self.bounds}


def params(model: type[Request]) -> list[Param]:
    """The parameters ``model`` declares, in declaration order."""
    return [_param(name, info) for name, info in model.model_fields.items()]


def _param(name: str, info) -> Param:
    surface = next((m for m in info.metadata if isinstance(m, Surface)), Surface())
    # annotated_types.Ge(ge=1) and so on: the attribute is named as the keyword
    bounds = {
        _BOUNDS[type(m)]: getattr(m, _BOUNDS[type(m)]) for m in info.metadata if type(m) in _BOUNDS
    }
    single, many = _item_type(info.annotation)
    literal = typing.get_origin(single) is Literal
    extra = info.json_schema_extra
    return Param(
        name=name,
        annotation=info.annotation,
        kind=str if literal else single,
        many=many,
        required=info.is_required(),
        default=None if info.is_required() else info.default,
        help=info.description or "",
        bounds=bounds,
        choices=typing.get_args(single) if literal else None,
        schema_extra=dict(extra) if isinstance(extra, dict) else None,
        surface=surface,
    )


def _item_type(annotation: Any) -> tuple[Any, bool]:
    """(the type of one value, whether it is a list) of ``X``, ``X | None``, ``list[X] | None``."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) is list:
        return typing.get_args(annotation)[0], True
    return annotation, False


def one_source_names(model: type[Request]) -> set[str]:
    """The conditions on one source's documents: an all-source search takes none of them."""
    return {p.name for p in params(model) if p.surface.one_source}
