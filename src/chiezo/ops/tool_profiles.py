"""Tool profiles: which of the library's tools (ops/tools.py) a client or agent is offered, with
which parameters, how long each answer may be by default, and the instructions that go with
them.

MCP clients and agent mode put every tool description and every tool result into the model's
context. Measured by bench/mcp_sizes.py (design §39): with every tool's full help,
``tools/list`` was 28.4 KB for 14 tools plus 2.5 KB of instructions — about 9k tokens before a
first question, more than a 4k-context model holds. The ``full`` profile offers every tool and
parameter within 12 KB; the ``compact`` one what a small model's first questions need (search,
doc, filter, notes) within 5 KB, with instructions a quarter as long. Agent mode chooses compact by itself for a small
context (answer/agent.py); MCP clients ask for it (``chiezo mcp --profile compact``, or
``/mcp?profile=compact``).

This module imports nothing heavy: the CLI reads the profile names from it for its options.
"""

from __future__ import annotations

from dataclasses import dataclass

from chiezo.core.errors import BadQuery

INSTRUCTIONS = """\
Chiezo is an offline library: encyclopedias, place databases, the user's documents, and
`notes`, a memory you can write. Look facts up here instead of guessing dates, places, names
or numbers, and cite the source and title (with its `url`) you used.

- `sources` once: what exists, each source's kind and attributes (tags, attr names, points).
- `search`, then `doc` for the documents you need (`question` reads the parts that answer it).
  An exact title comes first; sources with vectors also match by meaning. Every answer keeps
  within `max_chars`: a list cut short says in `more` how to read on (e.g. offset=10).
- Keyword queries: distinctive words separated by spaces; words under 3 characters (京都) only
  match titles starting with them and documents containing them.
- To list or count a category's members use `filter` with `tag` (exact total; find the tag
  with `tags`), not a search for the category's name.
- Places (osm_*, geonames): `filter` with `feature` "key=value" (find values with `features`),
  `area` (京都府 or Kyoto), `bbox`, `near` ("lat,lon" or an address), `near_doc`
  ("jawiki:浅草寺") for "nearest X to Y". Wikipedia sources have tags, points and infobox
  numbers (`attr` "population>=1000000").
- "Near me", 最寄り, 現在地: `near` "here" is the person's own location when they attached one
  (never ask for coordinates; `radius_km` only when they said how far). Keep their own words
  as the `query`; a category a source requires is taken from their words or from a result.
- A condition a source cannot have is an error naming the sources that have it: switch source
  or drop it rather than retrying. A `live` source (kiwix-serve) takes `search` and `doc` only.
- `remember` the content itself (names, numbers, dates, list items) in sentences that make
  sense later, never a label ("looked up X"); `recall` with `since` alone for vague
  references ("last week").
"""

# The compact profile's instructions: the same rules, for the tools it offers, in a third.
COMPACT_INSTRUCTIONS = """\
An offline library: look facts up instead of guessing, and cite source, title and url.
`search` (words or a question), then `doc` with `question` to read what answers it. List a
category or places with `filter` (tag, feature key=value, area, near "lat,lon", an address or
"here": the person's own place).
Answers keep within `max_chars`; `more` says how to read on. `recall` reads the user's notes.
"""


@dataclass(frozen=True)
class Profile:
    """A tool set sized for a model: which tools with which of their parameters, each answer's
    default ``max_chars``, and the instructions that go with them."""

    name: str
    about: str
    tools: dict[str, tuple[str, ...]] | None  # tool → its parameters; None: all of both
    max_chars: int
    instructions: str

    def names(self, every: list[str]) -> list[str]:
        """The tools it offers, of ``every`` tool there is."""
        return list(every) if self.tools is None else [t for t in self.tools if t in every]

    def offers(self, tool: str, param: str) -> bool:
        return self.tools is None or param in self.tools[tool]


PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            "full",
            "every tool and parameter",
            None,
            4000,
            INSTRUCTIONS,
        ),
        Profile(
            "compact",
            "search, doc, filter and notes with their main parameters, for a model of a 2k-8k "
            "context",
            {
                "sources": (),
                "search": ("query", "source", "near", "limit", "offset"),
                "doc": ("source", "title", "doc_id", "question"),
                "filter": (
                    "source",
                    "tag",
                    "feature",
                    "area",
                    "attr",
                    "near",
                    "near_doc",
                    "radius_km",
                    "limit",
                    "offset",
                ),  # fmt: skip
                "recall": ("q", "since"),
                "remember": ("text",),
                "web_search": ("query",),  # offered only where a web search is set up
            },
            1500,
            COMPACT_INSTRUCTIONS,
        ),
    )
}
DEFAULT_PROFILE = "full"


def profile_named(name: str | None) -> Profile:
    """The profile called ``name`` (None: the default); another name is a BadQuery naming the
    profiles there are."""
    found = PROFILES.get(name or DEFAULT_PROFILE)
    if found is None:
        raise BadQuery(
            f"no tool profile named {name!r}",
            field="profile",
            candidates=sorted(PROFILES),
        )
    return found
