"""What the answer layer reads from the library, as one small typed interface.

rag, agent and passages sit below ops/ and may not import it: the layer above hands them an
object with these members (ops/answering.py gives one), and they ask nothing else of it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from chiezo.answer.here_answers import Around
from chiezo.answer.support import Embed
from chiezo.answer.websearch import WebResult
from chiezo.core.config import Settings
from chiezo.core.models import SearchResult


class Lookups(Protocol):
    """What the answer layer reads from the library (ops/answering.py gives it)."""

    @property
    def settings(self) -> Settings: ...

    def search(
        self, query: str, source: str | None, limit: int, around: Around | None = None
    ) -> SearchResult:
        """One planned query's search (``source`` None: the default sources); ``around``:
        within the radius of the person's location, nearest first."""
        ...

    def has_article(self, name: str, source: str | None = None) -> bool:
        """Whether ``source`` (else any source) has a document titled ``name``."""
        ...

    def read(self, source: str, doc_id: int, fields: list[str]) -> dict[str, Any]:
        """These fields of one document (a ChiezoError when it cannot be read)."""
        ...

    def source_names(self) -> list[str]:
        """The names of the library's sources, for the planner's prompt."""
        ...

    def counterparts(self, names: list[str], source: str | None) -> list[str]:
        """Titles, in ``source`` (else any source), of the same Wikidata items as documents
        titled or aliased one of ``names`` in another source; [] where no two sources record
        ids."""
        ...

    def by_meaning_only(self, question: str, source: str | None) -> bool:
        """Whether every source ``question`` is asked of (``source``, else the default ones)
        that has vectors is in another script than the question: its words can find
        nothing there, meaning does the finding (search/languages.py)."""
        ...

    def source_language(self, name: str) -> str | None:
        """The language a source records (``ja``, ``en``), None where it records none."""
        ...

    def check_source(self, name: str) -> None:
        """Raises UnknownSource (a 404 naming the known ones) for a source not in the library."""
        ...

    def reference_link(
        self, source: str, doc_id: int, key: str | None, url: str | None
    ) -> tuple[str | None, str]:
        """(where a person can open the document, or None; its stable ``source:key``)."""
        ...

    def claim_embedder(self, names: Iterable[str]) -> Embed | None:
        """``texts → unit vectors`` (float32 rows) with the embedder of the first of these
        sources that has vectors, or None: claims are compared in their source's space."""
        ...

    def chunk_ids(self, source: str, doc_id: int) -> dict[int, int]:
        """A document's passages, ``ord`` → chunk_id."""
        ...

    def passage_closeness(
        self, source: str, chunk_ids: list[int], question: str
    ) -> dict[int, float]:
        """chunk_id → how close its best vector is to ``question`` (empty without vectors)."""
        ...

    def web(self, query: str, limit: int) -> list[WebResult]:
        """The configured web search's results (a Conflict when it is off; a
        WebSearchError when it cannot answer)."""
        ...
