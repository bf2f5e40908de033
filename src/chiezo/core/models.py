"""Records shared by every layer: what sources emit, what searches return."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Chunk:
    """A passage of a document, cut along its structure (headings, paragraphs)."""

    text: str
    heading_path: str = ""


@dataclass
class Doc:
    """One document as a source kind emits it, before it has a doc_id.

    ``key`` is the source's own stable identifier (a file path, a page id); ``rank_score`` is
    popularity in 0..1; ``attrs`` maps an attribute name to its values.
    """

    key: str
    title: str
    body: str = ""
    opening: str = ""
    url: str | None = None
    rank_score: float = 0.0
    aliases: list[str] = field(default_factory=list)
    tags: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)
    attrs: dict[str, list[str]] = field(default_factory=dict)
    point: tuple[float, float] | None = None  # (lat, lon)
    chunks: list[Chunk] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Point:
    """A document's coordinates, as ``doc`` and ``filter`` give them: ``{"lat", "lon"}``."""

    lat: float
    lon: float


@dataclass
class Hit:
    """One search result. ``point``: the document's coordinates, where it has them;
    ``distance_km``: with ``near``; ``section``: the heading path, inside the document, of the
    passage the snippet shows (search/sections.py). Each is left out of ``to_dict`` when
    absent."""

    source: str
    doc_id: int
    key: str
    title: str
    snippet: str
    score: float
    rank_score: float
    url: str | None = None
    title_match: bool = False
    distance_km: float | None = None  # with near: great-circle distance
    point: Point | None = None
    section: str | None = None  # e.g. "歴史 > 近代", "p. 12"
    explain: dict[str, Any] | None = None  # with explain: ranks and scores on each side
    # what the source stores as its address (a file:// url, a ZIM entry's path); ``url`` is
    # where a person opens the document (ops/links.py), set by the search's Context
    source_url: str | None = None
    # found by meaning: how far above the source's semantic floor, 0..1 (search/evidence.py)
    semantic: float | None = field(default=None, repr=False)
    # the same subject in other sources, by Wikidata id (search/counterparts.py)
    counterparts: list[dict[str, str]] | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["semantic"]
        for optional in ("distance_km", "point", "section", "explain", "counterparts"):
            if out[optional] is None:
                del out[optional]
        return out


@dataclass
class SearchResult:
    """A page of hits plus how they were found.

    ``retrieval`` says which side(s) found them (keyword, semantic, hybrid, or keyword-fallback
    when semantic search ran out of time); ``mode`` names the full-text plan (see
    search/fts.py) or "semantic"; ``total_is_lower_bound`` is true when counting every match
    would have cost more than the answer is worth.
    """

    query: str
    hits: list[Hit]
    total: int
    mode: str
    offset: int = 0
    limit: int = 10
    total_is_lower_bound: bool = False
    notes: list[str] = field(default_factory=list)
    sources: list[str] = field(default_factory=list)
    retrieval: str = "keyword"  # keyword, semantic, hybrid, keyword-fallback
    order: str = "relevance"
    facets: dict[str, Any] | None = None  # with facets= (search/facets.py)
    # the doc_ids the search weighed, best first (at least the page): what facets count
    weighed: list[int] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        del out["weighed"]
        if out["facets"] is None:
            del out["facets"]
        out["hits"] = [h.to_dict() for h in self.hits]
        # the notes as codes with parameters (search/notices.py), for programs and translations
        out["notices"] = [n.to_dict() for n in self.notes if hasattr(n, "to_dict")]
        return out
