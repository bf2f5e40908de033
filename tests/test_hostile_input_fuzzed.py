"""Fuzzing every GET route of the real server, and the CLI's search, with hostile input.

Hypothesis draws each request from what broke servers like this one before (issue #14):
FTS5 syntax, control characters, invalid UTF-8 and lone surrogates, integers beyond 64 bits,
long strings, impossible coordinates and boxes, dates at the calendar's ends. Whatever comes
in, the answer is a 2xx, 3xx or 4xx — never a 500 — and an API error has the one JSON shape.
The longer, schema-driven run (schemathesis against /openapi.json) is ``make fuzz``.
"""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from chiezo.core.config import Settings
from chiezo.ops import building, remembering
from chiezo.ops.context import Context
from chiezo.ops.requests import RememberRequest
from chiezo.surfaces.cli.main import cli
from chiezo.surfaces.rest import create_app
from llm_stub import ScriptedLLM

from helpers import TEMPLE_PAGES, RunningServer, build_docs, wiki_dump, write_files

# thousands of fuzzed requests: left out of `make test-fast`
pytestmark = pytest.mark.slow

PAGES = [
    *TEMPLE_PAGES,
    (3, "Helsinki", "'''Helsinki''' is the capital of Finland. {{Coord|60|10|N|24|56|E}}"),
]
FILES = {
    "guide.md": "---\ntitle: Getting started\ntags: [intro, 入門]\n---\nChiezo keeps sources "
    "in SQLite. See [the FAQ](faq.md).\n",
    "faq.md": "# FAQ\n\nWhat is a generation? A whole new file, switched in atomically.\n",
    "page.html": '<html><body><h1>Page</h1><p>AT&amp;T &lt;script&gt; "quoted"</p></body></html>',
}

FTS_SYNTAX = [
    '"',
    '""',
    "*",
    "NEAR(",
    "NEAR/2",
    "AND",
    "OR",
    "NOT",
    "-",
    "^",
    "(",
    ")",
    ":",
    "{title}",
    "title:",
    "'",
    "\\",
    "%",
    "_",
    "--",
    ";",
    "DROP TABLE docs",
]
CONTROL = [chr(c) for c in range(0x20)] + ["\x7f", "\u2028", "\ufeff", "\u3000"]
RAW = ["%ED%A0%80", "%ED%BF%BF", "%FF", "%C3", "%00", "%", "%zz", "%E3%81"]  # bad UTF-8 / escapes
NUMBERS = [
    "0",
    "-1",
    "1e309",
    "nan",
    "inf",
    "-inf",
    "1.5",
    "0x10",
    str(2**63),
    str(2**63 - 1),
    "99999999999999999999",
    "-99999999999999999999",
    "",
    " ",
]
PLACES = [
    "91,0",
    "0,181",
    "-90,-180",
    "90,180",
    "nan,nan",
    "1e309,0",
    "35.7,139.8",
    "a,b",
    "1,2,3",
    "35,139,36,140",
    "-90,-180,90,180",
    "36,140,35,139",
    "0,170,10,-170",
    "1e-400,0",
    ",",
    " , ",
]
DATES = [
    "9999-12-31",
    "0001-01-01",
    "0001-01-01T00:00:00+01:00",
    "9999-12-31T23:59:59-05:00",
    "2026-13-45",
    "2026-11-30T25:00",
    "yesterday",
    "2026-11-30Z",
    "+002026-01-01",
]

text = st.one_of(
    st.text(max_size=40),
    st.lists(
        st.sampled_from(FTS_SYNTAX + CONTROL + ["浅草寺", "chiezo", "a", "雷"]), max_size=12
    ).map("".join),
    st.sampled_from(NUMBERS + PLACES + DATES),
    st.sampled_from(
        [("x", 50_000), ("浅", 1001), ("a ", 999), ('"', 1001), ("\x00", 2000), ("浅草寺 OR ", 100)]
    ).map(lambda pair: pair[0] * pair[1]),  # long texts
)
# a query-string value: percent-encoded text, or raw bytes no decoder expects
value = st.one_of(
    text.map(lambda t: quote(t.encode("utf-8", "surrogatepass"), safe="")),
    st.lists(st.sampled_from(RAW), min_size=1, max_size=3).map("".join),
)
source = st.sampled_from(["book", "wiki", "notes"]) | st.sampled_from(
    ["nope", "..", "%00", "notes.db", "a" * 300, "%ED%A0%80", "current"]
)
number = st.sampled_from(NUMBERS).map(lambda n: quote(n, safe="")) | st.integers(-5, 20).map(str)
# each parameter mostly gets the kind of value it expects to parse, hostile or not
KINDS = {
    number: [
        "limit",
        "offset",
        "doc_id",
        "max_chars",
        "top_n",
        "log_from",
        "steps",
        "budget",
        "notes_offset",
        "radius_km",
        "keyword_weight",
        "min_score",
    ],
    st.sampled_from(PLACES).map(lambda p: quote(p, safe="")): ["bbox", "near"],
    st.sampled_from(DATES).map(lambda d: quote(d, safe="")): ["since", "until"],
}
STRATEGY = {name: kind | value for kind, names in KINDS.items() for name in names}

ROUTES = {  # path template → the parameters it takes
    "/v1/search": [
        "q",
        "limit",
        "offset",
        "mode",
        "keyword_weight",
        "fusion",
        "top_n",
        "explain",
        "min_score",
    ],
    "/v1/{source}/search": [
        "q",
        "limit",
        "offset",
        "tag",
        "feature",
        "area",
        "wikidata",
        "attr",
        "bbox",
        "near",
        "near_doc",
        "radius_km",
        "mode",
        "keyword_weight",
        "fusion",
        "top_n",
        "explain",
        "min_score",
    ],
    "/v1/{source}/doc": ["title", "key", "fields", "max_chars"],
    "/v1/{source}/doc/{id}": ["fields", "max_chars"],
    "/v1/{source}/titles": ["prefix", "limit"],
    "/v1/{source}/tags": ["prefix", "contains", "limit", "offset"],
    "/v1/{source}/links": ["title", "doc_id", "key", "direction", "limit", "offset"],
    "/v1/{source}/filter": [
        "tag",
        "feature",
        "area",
        "wikidata",
        "attr",
        "bbox",
        "near",
        "radius_km",
        "near_doc",
        "fields",
        "limit",
        "offset",
    ],
    "/v1/{source}/features": ["prefix", "contains", "limit", "offset"],
    "/v1/notes/recall": ["q", "since", "until", "tag", "limit", "offset", "max_chars"],
    "/v1/notes/{id}": ["max_chars"],
    "/v1/jobs/plan": ["source", "action", "model"],
    "/v1/jobs/{id}": ["log_from"],
    "/v1/ask": [
        "q",
        "source",
        "strict",
        "stream",
        "budget",
        "excerpts",
        "max_tokens",
        "mode",
        "grounded",
        "steps",
    ],
    "/": ["q", "source", "mode", "tag", "feature", "area", "near", "radius_km", "offset"],
    "/doc/{source}": ["title", "key"],
    "/doc/{source}/{id}": ["full"],
    "/doc/{source}/{id}/original": [],
    "/admin": ["notes_q", "notes_offset"],
    "/chat": [],
}


@st.composite
def requests(draw) -> str:
    template = draw(st.sampled_from(sorted(ROUTES)))
    path = template.replace("{source}", draw(source)).replace("{id}", draw(number))
    names = draw(st.lists(st.sampled_from(ROUTES[template] or ["lang"]), max_size=4))
    params = [f"{name}={draw(STRATEGY.get(name, value))}" for name in names]
    if draw(st.booleans()) and template.startswith("/v1/"):
        params.append(f"{draw(st.sampled_from(['colour', 'q%00', '%FF']))}={draw(value)}")
    return path + ("?" + "&".join(params) if params else "")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz")
    service = Context(Settings(data_dir=root / "data"))
    dump = root / "wiki.xml"
    dump.write_text(wiki_dump(PAGES))
    building.ingest(service, "wikipedia", dump, "wiki", embed=False)
    build_docs(service, write_files(root / "book", FILES), "book")
    remembering.remember(service, RememberRequest.of(text="The backup runs at 02:00", tags=["ops"]))
    with ScriptedLLM(lambda body: {"content": "It is in Taito [1]."}) as llm:
        settings = Settings(
            data_dir=root / "data", llm_url=llm.url, llm_model="stub-model", query_timeout=10
        )
        with RunningServer(create_app(settings)) as running, httpx.Client(timeout=30) as client:
            running.client = client
            yield running


@settings(
    max_examples=2500,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(request=requests())
def test_no_get_route_answers_500_whatever_it_is_sent(server, request):
    assume(len(request) < 60_000)  # httpx's own limit on a URL
    response = server.client.get(server.url + request)
    assert response.status_code < 500, (request, response.status_code, response.text[:400])
    if response.status_code >= 400 and not response.headers["content-type"].startswith("text/html"):
        body = response.json()
        assert body["status"] == response.status_code and isinstance(body["error"], str)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("fuzz-cli")
    build_docs(Context(Settings(data_dir=root / "data")), write_files(root / "book", FILES), "book")
    return str(root / "data")


argument = st.one_of(text, st.sampled_from(["\udcff", "caf\udce9", "\ud800"]))  # argv surrogates


@settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    words=st.lists(argument, min_size=1, max_size=3),
    options=st.lists(
        st.sampled_from(
            [
                ["--source", "book"],
                ["--source", "x"],
                ["-n", "50"],
                ["--offset", "99999999999999999999"],
                ["--json"],
                ["--mode", "semantic"],
                ["--explain"],
            ]
        ),
        max_size=3,
    ),
)
def test_the_cli_search_exits_with_a_code_not_a_traceback(data_dir, words, options):
    args = ["--data", data_dir, "search", *[a for option in options for a in option], "--", *words]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code in (0, 2, 3), (args, result.output[-800:], result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
