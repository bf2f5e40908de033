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
from typing import Annotated, Any, ClassVar, Literal, Self

import annotated_types
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.fields import FieldInfo

from chiezo.answer.options import BOUNDS as ANSWER_BOUNDS
from chiezo.answer.options import DEFAULT_STEPS, AnswerOptions
from chiezo.core import here
from chiezo.core.config import ANSWER_MODES, PLANNERS
from chiezo.core.errors import BadQuery
from chiezo.core.here import Here
from chiezo.core.query import MAX_QUERY_CHARS, has_terms
from chiezo.core.validation import (
    MAX_OFFSET,
    MAX_SQL_INT,
    MAX_TEXT_CHARS,
    check_length,
    check_unicode,
)
from chiezo.ops.browse import DOC_FIELDS
from chiezo.ops.notes import MAX_NOTE_CHARS, MAX_TAG_CHARS, MAX_TAGS
from chiezo.ops.patterns import (
    ATTR,
    BOX,
    FACET_LIST,
    FEATURES,
    FIELD_LIST,
    ISO_MOMENT,
    LOCATION,
    NEAR,
    NEAR_DOC,
    NOT_BLANK,
    WITHIN,
)
from chiezo.search.facets import FACETS
from chiezo.search.fts import MAX_WINDOW
from chiezo.search.retrieval import DEFAULT_TOP_N, FUSIONS, RETRIEVAL_MODES
from chiezo.search.shapes import MAX_WITHIN_CHARS

DEFAULT_LIMIT = 10
MAX_QUESTION_CHARS = 20_000  # a question, or a chat message; a longer one is a document
MAX_LIMIT = 50  # hits of one search page
MAX_FILTER_LIMIT = 500  # documents of one filter page (cheap rows, no ranking)
MAX_LIST_LIMIT = 500  # names of one list page (titles, tags, links, features)
MAX_TOP_N = 1000  # candidates from each side of a hybrid search (search/retrieval.py checks it)
MAX_RADIUS_KM = 20_000  # half the Earth's circumference: any point is within it


def check_question(question: str | None) -> None:
    """A question in words (not spaces or control characters only), within its length."""
    if question is None or not has_terms(question):
        raise BadQuery("the question is empty", hint="ask something in words")
    check_length(question, "the question", MAX_QUESTION_CHARS)


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
    cli_name: str | None = None  # the long CLI flag where it is not --NAME, e.g. --id
    # a positional CLI argument rather than an option: "value", or "words" (several, joined
    # by spaces, so that a query needs no quotes)
    cli_argument: Literal["value", "words"] | None = None
    rest_path: bool = False  # REST: part of the path (/v1/{source}/...), not the query
    # what a model reads of it (MCP and agent mode) where the help, written for a person
    # reading --help or the API docs, is longer than a small model's context can spare on
    # every step ("": the name, type and bounds say it all). With the help alone the tools'
    # schemas measured 28.4 KB, most of it help.
    brief: str | None = None
    cli_off: str | None = None  # a boolean's CLI flag that sets it false, e.g. --ungrounded
    # MCP: text that is JSON may also be given as the JSON value itself (within's GeoJSON):
    # a model writes the object, and the MCP SDK turns a JSON string into one before the tool
    # sees it; ops/tools.py takes either and hands the service the JSON text
    mcp_json: bool = False
    # attached by the surface, never typed by the caller nor seen by a model: MCP and the agent
    # take it from the conversation (ops/tools.py), the CLI from this environment variable
    attached: str | None = None


# Conditions on documents, the same in search and filter (search/filters.py reads them).
Tag = Annotated[
    list[str] | None,
    Field(
        description="a category the documents must have, e.g. 日本の寺院 (see tags); "
        "'A,B' in one value: either of them; several values: all of them"
    ),
    Surface(brief="a category (see tags); 'A,B': either; several: all"),
]
Attr = Annotated[
    list[str] | None,
    Field(
        description="an attribute the documents must have: name=value, or a number "
        "compared: name>N, name>=N, name<N, name<=N, e.g. population>=1000000; several "
        "values: all of them",
        **stated_items(ATTR),
    ),
    Surface(brief="name=value, or name>=N (<, <=, >), e.g. population>=1000000"),
]
Feature = Annotated[
    list[str] | None,
    Field(
        description="places of a kind, as key=value, e.g. tourism=museum or railway=station "
        "(see features); 'a=b,c=d' in one value: either of them",
        **stated_items(FEATURES),
    ),
    Surface(brief="key=value, e.g. tourism=museum (see features)"),
]
Area = Annotated[
    list[str] | None,
    Field(
        description="one or more prefecture, city or other area names the places lie in, "
        "e.g. 京都府 or Kyoto"
    ),
    Surface(brief="e.g. 京都府 or Kyoto"),
]
Wikidata = Annotated[
    list[str] | None,
    Field(description="a Wikidata id, e.g. Q90 (Paris)"),
    Surface(brief="e.g. Q90"),
]
Box = Annotated[str | None, Field(description="south,west,north,east", **stated(pattern=BOX))]
NearDoc = Annotated[
    str | None,
    Field(
        description="source:title of a document with coordinates, e.g. jawiki:浅草寺: as "
        "near, at its point",
        **stated(max_length=MAX_TEXT_CHARS, pattern=NEAR_DOC),
    ),
    Surface(brief="source:title, e.g. jawiki:浅草寺: near its point"),
]
Within = Annotated[
    str | None,
    Field(
        description="only documents inside an area: a GeoJSON Polygon or MultiPolygon "
        "(lon,lat), a box south,west,north,east, or source:name of an admin area of an OSM "
        "source (osm_kanto:東京都)",
        **stated(max_length=MAX_WITHIN_CHARS, pattern=WITHIN),
    ),
    # GeoJSON: an object over MCP as well as text
    Surface(mcp_json=True, brief="GeoJSON polygon (lon,lat), a box, or osm_source:area name"),
]
# near=here's point (core/here.py): refused once older than CHIEZO_LOCATION_TTL
Location = Annotated[
    str | None,
    Field(
        description="with near=here: the current location, LAT,LON,TAKEN_AT[,ACCURACY_M] "
        "(TAKEN_AT in ISO 8601 with its zone), as the browser took it; used for this request "
        "only and kept nowhere",
        **stated(max_length=200, pattern=LOCATION),
    ),
    Surface(attached=here.ENVIRONMENT),
]
RadiusKm = Annotated[
    float | None,
    Field(gt=0, le=MAX_RADIUS_KM, description="km; with near or near_doc: only within it"),
    Surface(brief="with near or near_doc"),
]


def comma_separated(value: list[str] | None) -> list[str] | None:
    """``fields=a,b`` and ``fields=a&fields=b`` (``--fields a,b``) mean the same."""
    if value is None:
        return None
    return [f.strip() for item in value for f in item.split(",") if f.strip()] or None


# counts of the matching documents (search/facets.py)
FacetNames = Annotated[
    list[str] | None,
    Field(
        description="count the matching documents by these, comma-separated: " + ", ".join(FACETS),
        **stated_items(FACET_LIST),
    ),
    AfterValidator(comma_separated),
    Surface(brief="count matches by: " + ", ".join(FACETS)),
]

# the fields of each document a filter lists or doc returns
Fields = Annotated[
    list[str] | None,
    Field(
        description="fields per document, comma-separated: " + ", ".join(DOC_FIELDS),
        **stated_items(FIELD_LIST),
    ),
    AfterValidator(comma_separated),
    Surface(brief="e.g. title,url,opening,tags,point,body"),
]


class Request(BaseModel):
    """What search and filter share: how their values reach the service."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    # the parameters that each name one document (a title, an id, a key): one is given
    ways_to_name: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def of(cls, **values: Any) -> Self:
        """The request from Python values, as the web pages, the answer layer and programs
        build it: a value out of bounds is a BadQuery naming the field, as on the surfaces."""
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(part) for part in first["loc"])
            if first["type"] == "string_unicode":  # a lone surrogate: the one reason every
                check_unicode(str(first["input"]), where)  # surface gives for it
            raise BadQuery(f"{where}: {first['msg']}", field=where) from exc

    @classmethod
    def default(cls, name: str) -> Any:
        """A field's declared default, for a Python signature that offers the same one."""
        return cls.model_fields[name].default


class ConditionsRequest(Request):
    """The conditions on documents that search, filter and random share (search/where.py
    resolves them; ``near``, which each reads its own way, is declared by each). A list of
    conditions with no items is no condition."""

    tag: Tag = None
    feature: Feature = None
    area: Area = None
    wikidata: Wikidata = None
    attr: Attr = None
    bbox: Box = None
    near_doc: NearDoc = None
    radius_km: RadiusKm = None
    within: Within = None
    location: Location = None

    @field_validator("*", mode="before")
    @classmethod
    def _no_items_is_no_condition(cls, value: Any) -> Any:
        # a form or client may send [] for a condition left empty
        return None if isinstance(value, list | tuple) and not value else value


class SearchRequest(ConditionsRequest):
    query: Annotated[
        str,
        Field(
            description="words separated by spaces, or a question",
            **stated(min_length=1, max_length=MAX_QUERY_CHARS, pattern=NOT_BLANK),
        ),
        Surface(rest="q", cli_argument="words", brief="words or a question"),
    ]
    source: Annotated[
        str | None,
        Field(
            description="a source, or several separated by commas (jawiki,osm_kanto); "
            "omitted: every source searched by default"
        ),
        Surface(
            cli_flags=("-s",), rest_path=True, brief="source(s), comma-separated; default: all"
        ),
    ] = None
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_LIMIT, description=f"results per page (1-{MAX_LIMIT})"),
        Surface(cli_flags=("-n",), brief=""),
    ] = DEFAULT_LIMIT
    # a search's offset + limit stays within its window (fts.MAX_WINDOW) whatever the limit
    offset: Annotated[
        int,
        Field(ge=0, le=MAX_WINDOW - MAX_LIMIT, description="results to skip, for paging"),
        Surface(brief=""),
    ] = 0
    near: Annotated[
        str | None,
        Field(
            description="lat,lon, an address or place name found in the library's places "
            "(香川県高松市番町一丁目10-16, Kamppi), or here (the current location given with "
            "location): the top_n most relevant, nearest first",
            **stated(max_length=MAX_TEXT_CHARS, pattern=NEAR),
        ),
        Surface(brief="lat,lon, an address or here: nearest first"),
    ] = None
    facets: FacetNames = None
    mode: Annotated[
        Literal[RETRIEVAL_MODES] | None,  # type: ignore[valid-type]
        Field(
            description="keyword, semantic (by meaning), hybrid, or auto (hybrid unless the "
            "query is a document's title: then by words alone); default: hybrid where the "
            "source has vectors, keyword elsewhere"
        ),
        Surface(brief=""),
    ] = None
    keyword_weight: Annotated[
        float | None,
        Field(
            ge=0,
            le=1,
            description="hybrid: weight of the keyword side, 0..1 (default: "
            "the model's, or CHIEZO_HYBRID_KEYWORD_WEIGHT)",
        ),
        Surface(brief="hybrid: the keyword side's weight"),
    ] = None
    fusion: Annotated[
        Literal[FUSIONS] | None,  # type: ignore[valid-type]
        Field(description="hybrid: minmax (weighted scores) or rrf (reciprocal rank)"),
        Surface(brief=""),
    ] = None
    top_n: Annotated[
        int | None,
        Field(
            ge=1,
            le=MAX_TOP_N,
            description="candidates from each side, and how many near "
            f"reorders (default {DEFAULT_TOP_N})",
        ),
        Surface(brief="candidates per side"),
    ] = None
    explain: Annotated[
        bool,
        Field(description="each hit's keyword rank, semantic rank and fused score"),
        Surface(brief="ranks and scores per hit"),
    ] = False
    min_score: Annotated[
        float | None,
        Field(description="semantic: cosine floor (default: the model's own)"),
        Surface(brief="semantic: cosine floor"),
    ] = None


class OneSourceConditions(ConditionsRequest):
    """The documents of one source that meet conditions: what filter lists and random draws
    from."""

    source: Annotated[
        str,
        Field(description="a source name (see sources)"),
        Surface(cli_argument="value", rest_path=True),
    ]
    near: Annotated[
        str | None,
        Field(
            description="lat,lon, an address or place name found in the library's places, "
            "or here (the current location given with location): within radius_km of it, or "
            "(filter) nearest first",
            **stated(max_length=MAX_TEXT_CHARS, pattern=NEAR),
        ),
        Surface(brief="lat,lon, an address or here: nearest first"),
    ] = None
    fields: Fields = None


class FilterRequest(OneSourceConditions):
    source: Annotated[
        str,
        Field(
            description="a source, or several separated by commas (osm_kanto,geonames): one "
            "list, nearest first with near"
        ),
        Surface(cli_argument="value", rest_path=True, brief="source(s), comma-separated"),
    ]
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_FILTER_LIMIT, description=f"documents per page (1-{MAX_FILTER_LIMIT})"),
        Surface(cli_flags=("-n",), brief=""),
    ] = DEFAULT_LIMIT
    offset: Annotated[
        int,
        Field(ge=0, le=MAX_OFFSET, description="documents to skip, for paging"),
        Surface(brief=""),
    ] = 0
    facets: FacetNames = None


MAX_RANDOM = 20  # documents of one draw: each is a page of the filter's set


class RandomRequest(OneSourceConditions):
    """Documents drawn at random, from the whole source or from those meeting conditions (as
    kiwix-serve's random article and the reference design's ``/random``)."""

    count: Annotated[
        int,
        Field(ge=1, le=MAX_RANDOM, description=f"documents to draw (1-{MAX_RANDOM}), no repeats"),
        Surface(cli_flags=("-n",), brief=""),
    ] = 1
    seed: Annotated[
        int | None,
        Field(ge=0, le=2**31 - 1, description="the same seed draws the same documents"),
    ] = None


MAX_GEOCODE = 20  # candidates of one geocode: the best and its alternatives


class GeocodeRequest(Request):
    """An address or a place name → points, from the library's own places (search/geocode.py)."""

    address: Annotated[
        str,
        Field(
            description="an address or place name in any script: 香川県高松市番町一丁目10-16, "
            "京都市, Kamppi, Helsinki",
            **stated(min_length=1, max_length=MAX_TEXT_CHARS, pattern=NOT_BLANK),
        ),
        Surface(rest="q", cli_argument="words", brief="an address or a place name"),
    ]
    source: Annotated[
        str | None,
        Field(
            description="the place sources to look in, separated by commas; omitted: every "
            "source searched by default that has coordinates"
        ),
        Surface(cli_flags=("-s",), brief="place source(s), comma-separated; default: all"),
    ] = None
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_GEOCODE, description=f"candidates, best first (1-{MAX_GEOCODE})"),
        Surface(cli_flags=("-n",), brief=""),
    ] = 5


# -- browsing and reading: the other operations on one source ------------------------------------

# declared once for every operation that takes them, so that its tool and its route agree
SourceName = Annotated[
    str,
    Field(description="a source name (see sources)"),
    Surface(cli_argument="value", rest_path=True),
]
ListOffset = Annotated[
    int, Field(ge=0, le=MAX_OFFSET, description="skip this many, for paging"), Surface(brief="")
]
ShortText = Annotated[str | None, Field(**stated(max_length=MAX_TEXT_CHARS))]
# An id is stated within SQLite's integers but checked by the service: one beyond them names
# nothing, so it is "not found" (404, exit 3) like any other id that names nothing.
IDS = stated(minimum=0, maximum=MAX_SQL_INT)
DocId = Annotated[
    int | None,
    Field(description="the document by doc_id", **IDS),
    Surface(cli_name="--id", brief=""),
]
Key = Annotated[
    str | None,
    Field(description="the document by the source's own key", **stated(max_length=MAX_TEXT_CHARS)),
    Surface(brief=""),
]


# a list page's limit: the bound is shared, the default is the operation's own (`= 50`)
ListLimit = Annotated[
    int,
    Field(ge=1, le=MAX_LIST_LIMIT, description=f"at most this many (1-{MAX_LIST_LIMIT})"),
    Surface(cli_flags=("-n",), brief=""),
]


class CountsRequest(Request):
    """A page of one source's names with their document counts, most used first."""

    source: SourceName
    prefix: Annotated[ShortText, Field(description="names starting with this")] = None
    contains: Annotated[ShortText, Field(description="names containing this")] = None
    limit: ListLimit = 50
    offset: ListOffset = 0


class TagsRequest(CountsRequest):
    """Tag (category) names."""


class FeaturesRequest(CountsRequest):
    """Feature values (key=value) of a place source, e.g. railway=station."""


class TitlesRequest(Request):
    source: SourceName
    prefix: Annotated[
        str,
        Field(
            description="the start of a title",
            **stated(min_length=1, max_length=MAX_QUERY_CHARS, pattern=NOT_BLANK),
        ),
        Surface(cli_argument="words"),
    ]
    limit: ListLimit = 20


class LinksRequest(Request):
    source: SourceName
    title: Annotated[
        ShortText,
        Field(description="the document by exact title"),
        Surface(cli_argument="words", brief=""),
    ] = None
    doc_id: DocId = None
    key: Key = None
    direction: Annotated[
        Literal["out", "in"], Field(description="out: what it links to; in: what links to it")
    ] = "out"
    limit: ListLimit = 50
    offset: ListOffset = 0


class DocRequest(Request):
    """One document by title (or alias), doc_id or key: one of them is needed."""

    ways_to_name = ("title", "doc_id", "key")

    source: Annotated[
        str,
        Field(description="a source name (see sources)"),
        Surface(cli_flags=("-s",), rest_path=True),
    ]
    title: Annotated[
        ShortText, Field(description="exact title (or alias)"), Surface(cli_argument="words")
    ] = None
    doc_id: DocId = None
    key: Key = None
    fields: Fields = None
    max_chars: Annotated[
        int | None,
        Field(
            ge=0,
            description="keep the answer within about this many characters: the body is cut "
            "to it, the opening (the body's start) gets what the body leaves, and the lists "
            "(aliases, tags, attributes, links) share the rest — at least a quarter of it — "
            "with their totals and how to read more",
        ),
    ] = None  # a tool's answer has its profile's (ops/tools.py), for a model's context
    question: Annotated[
        str | None,
        Field(
            description="the question being answered: the body is then the passages of the "
            "document that best answer it (what `ask` reads), within max_chars (default: the "
            "answer budget)",
            **stated(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=NOT_BLANK),
        ),
        Surface(cli_flags=("-q",), brief="read the passages that answer it"),
    ] = None


# -- notes, the writable source ------------------------------------------------------------------

NoteText = Annotated[
    str,
    Field(
        min_length=1,
        max_length=MAX_NOTE_CHARS,
        pattern=NOT_BLANK,
        description="the content itself: names, numbers, dates, list items, written so it makes "
        "sense later without this conversation — never a summary label",
    ),
]
NoteTags = Annotated[
    list[Annotated[str, Field(max_length=MAX_TAG_CHARS)]] | None,
    Field(max_length=MAX_TAGS, description=f"at most {MAX_TAGS} short labels"),
    Surface(cli_name="--tag"),  # repeated: one tag each
]
NoteId = Annotated[int, Field(description="the note's id", **IDS), Surface(cli_argument="value")]


class RememberRequest(Request):
    text: Annotated[
        NoteText,
        Surface(cli_argument="words", brief="the content itself in full sentences, never a label"),
    ]
    title: Annotated[
        str | None,
        Field(description="a short title; default: the first line (cut at 200)"),
        Surface(brief="default: the first line"),
    ] = None
    tags: NoteTags = None


class RecallRequest(Request):
    q: Annotated[
        str | None,
        Field(description="words the note contains", **stated(max_length=MAX_QUERY_CHARS)),
        Surface(cli_argument="words"),
    ] = None
    since: Annotated[
        str | None,
        Field(
            description="ISO date/time: changed at or after (e.g. 2026-11-01)",
            json_schema_extra=ISO_MOMENT,
        ),
        Surface(brief="ISO date: changed since"),
    ] = None
    until: Annotated[
        str | None,
        Field(description="ISO date/time: changed up to, inclusive", json_schema_extra=ISO_MOMENT),
        Surface(brief="ISO date: changed until"),
    ] = None
    tag: Annotated[str | None, Field(description="only notes with this tag")] = None
    limit: Annotated[
        int,
        Field(ge=1, le=MAX_LIMIT, description=f"notes per page (1-{MAX_LIMIT})"),
        Surface(cli_flags=("-n",), brief=""),
    ] = 10
    offset: ListOffset = 0
    max_chars: Annotated[
        int | None, Field(ge=0, description="cut each note's text to this many characters")
    ] = 2000


class UpdateRequest(Request):
    """Only the fields given change."""

    note_id: NoteId
    text: Annotated[
        str | None,
        Field(description="the new content", min_length=1, max_length=MAX_NOTE_CHARS),
    ] = None
    title: Annotated[str | None, Field(description="the new title")] = None
    tags: Annotated[NoteTags, Field(description="replaces the tags")] = None


class ForgetRequest(Request):
    note_id: NoteId


# -- a source as a whole -------------------------------------------------------------------------


class SourcesRequest(Request):
    """Every source of the library: it takes nothing."""


class SourceRequest(Request):
    """One built source, named."""

    source: Annotated[
        str, Field(description="a source name (see sources)"), Surface(cli_argument="value")
    ]


class RemoveRequest(SourceRequest):
    dry_run: Annotated[
        bool, Field(description="only say what would be deleted; delete nothing")
    ] = False


class ConfigureRequest(SourceRequest):
    in_default: Annotated[
        bool | None,
        Field(
            description="whether a search of all sources reads it (a source left out is still "
            "searched when named; the hits' notes say which were left out)"
        ),
        Surface(cli_off="--not-in-default"),
    ] = None


class RollbackRequest(SourceRequest):
    """Serve the source's kept previous generation again."""


# -- answers -------------------------------------------------------------------------------------


def _answer_bound(name: str) -> dict[str, float]:
    low, high = ANSWER_BOUNDS[name]
    return {"ge": low, "le": high}


class AnswerRequest(Request):
    """How ``ask`` and ``chat`` answer; unset choices take the configured defaults
    (CHIEZO_ANSWER_*). The bounds are answer/options.py's, which enforces them again."""

    source: Annotated[
        str | None, Field(description="answer from this source only"), Surface(cli_flags=("-s",))
    ] = None
    mode: Annotated[
        Literal[ANSWER_MODES] | None,  # type: ignore[valid-type]
        Field(
            description="rag: plan, search, excerpts, answer; agent: the model calls the tools "
            "(default CHIEZO_ANSWER_MODE, else rag)"
        ),
    ] = None
    plan: Annotated[
        Literal[PLANNERS] | None,  # type: ignore[valid-type]
        Field(
            description="who plans the searches: auto (the question's words; the model only "
            "for a follow-up leaning on earlier turns), keywords, or model: one more model "
            "call (CHIEZO_ANSWER_PLAN, else auto)"
        ),
    ] = None
    grounded: Annotated[
        bool | None,
        Field(
            description="only from the sources (the default), or false: the model may go beyond "
            "them, marked so (CHIEZO_ANSWER_GROUNDED)"
        ),
        Surface(cli_off="--ungrounded"),
    ] = None
    budget: Annotated[
        int | None,
        Field(
            description="characters of excerpts given to the model (CHIEZO_ANSWER_BUDGET)",
            **_answer_bound("budget"),
        ),
    ] = None
    excerpts: Annotated[
        int | None,
        Field(
            description="documents read for an answer (CHIEZO_ANSWER_EXCERPTS, else 5)",
            **_answer_bound("excerpts"),
        ),
    ] = None
    max_tokens: Annotated[
        int | None,
        Field(
            description="the answer's length cap (CHIEZO_ANSWER_MAX_TOKENS, else 512)",
            **_answer_bound("max_tokens"),
        ),
    ] = None
    steps: Annotated[int, Field(description="agent: tool-call steps", **_answer_bound("steps"))] = (
        DEFAULT_STEPS
    )
    strict: Annotated[
        bool,
        Field(
            description="fail on any sentence that cites no source or that its sources do not "
            "support (the CLI exits 4, REST answers 422)"
        ),
    ] = False
    web: Annotated[
        bool | None,
        Field(
            description="rag: with no basis in the library, answer from a web search (the "
            "configured CHIEZO_WEB_SEARCH), each result cited as source web "
            "(CHIEZO_ANSWER_WEB, else off)"
        ),
        Surface(cli_off="--no-web"),
    ] = None
    location: Location = None

    def options(self, *, writable: bool = False) -> AnswerOptions:
        """The choices as the answer layer takes them (ops/answering.py resolves the unset
        ones once); ``writable``: the caller may let the model ``remember`` (chat)."""
        values = self.model_dump(include=_ANSWER_CHOICES - {"location"})
        return AnswerOptions.of(writable=writable, location=self.here(), **values)

    def here(self) -> Here | None:
        """The attached location, checked (a 400 that does not repeat it) — not yet for its
        age: each use checks that against the clock of its moment."""
        given = self.location
        if not given:  # a form or client may send an empty one: none given
            return None
        return Here.of(given if isinstance(given, str) else given.model_dump())


class AskRequest(AnswerRequest):
    """One question, answered from the library."""

    question: Annotated[
        str,
        Field(
            description="the question, in words",
            **stated(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=NOT_BLANK),
        ),
        Surface(rest="q", cli_argument="words"),
    ]


class WebSearchRequest(Request):
    """A web search (ops/web.py): the configured engine's titles, snippets and URLs."""

    query: Annotated[
        str,
        Field(
            description="what to search the web for, in words",
            **stated(min_length=1, max_length=400, pattern=NOT_BLANK),
        ),
    ]
    limit: Annotated[int, Field(description="results", ge=1, le=10)] = 5


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["user", "assistant"]
    content: str = Field(min_length=1, max_length=MAX_QUESTION_CHARS, pattern=NOT_BLANK)
    cited_titles: list[Annotated[str, Field(max_length=300)]] | None = Field(
        default=None,
        max_length=20,
        description="an assistant turn: the titles it cited (a follow-up's subject)",
    )


class LocationIn(BaseModel):
    """The current location as the web chat attaches it (core/here.py checks it)."""

    model_config = ConfigDict(extra="forbid")
    lat: float
    lon: float
    taken_at: Annotated[str, Field(max_length=64, description="ISO 8601 with its zone")]
    accuracy_m: float | None = None


class ChatRequest(AnswerRequest):
    """A conversation turn: the last message is the question, the ones before it the history
    (the CLI's chat reads them line by line)."""

    location: Annotated[
        str | LocationIn | None,
        Field(
            description="the current location for questions about where the person is "
            "(near me, 最寄り): {lat, lon, accuracy_m, taken_at}, or its text form; used for "
            "this turn only, refused once older than CHIEZO_LOCATION_TTL, kept nowhere"
        ),
        Surface(attached=here.ENVIRONMENT),
    ] = None  # type: ignore[assignment]  # the chat's JSON body may send the object too

    messages: Annotated[
        list[ChatMessage],
        Field(
            min_length=1, max_length=200, description="the conversation; the last is the question"
        ),
    ]

    def question(self) -> str:
        if self.messages[-1].role != "user":
            raise BadQuery("the last message must be the user's question")
        return self.messages[-1].content

    def history(self) -> list[dict[str, Any]]:
        return [m.model_dump(exclude_none=True) for m in self.messages[:-1]]


# what the answer layer takes of an answer request: strict is the surfaces' (an exit code, a 422)
_ANSWER_CHOICES = set(AnswerRequest.model_fields) - {"strict"}


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

    @property
    def rest(self) -> str:
        """Its name in a REST query string."""
        return self.surface.rest or self.name

    @property
    def brief(self) -> str:
        """What a model reads of it: the brief where one is declared, else the help."""
        return self.help if self.surface.brief is None else self.surface.brief

    def enforced(self) -> dict[str, Any]:
        """Keyword arguments for a ``Field`` with the help and the enforced bounds only."""
        return {"description": self.help, **self.bounds}

    def constraints(self) -> dict[str, Any]:
        """Keyword arguments for a FastAPI ``Query``/``Path`` or a pydantic ``Field``."""
        return {"description": self.help, "json_schema_extra": self.schema_extra, **self.bounds}


def params(model: type[Request]) -> list[Param]:
    """The parameters ``model`` declares, in declaration order."""
    return [_param(name, info) for name, info in model.model_fields.items()]


def _param(name: str, info: FieldInfo) -> Param:
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
