"""What the answer layer reads from the library (answer/lookups.py ``Lookups``), given by the
operations: a search runs as ``search`` does for any surface, a document is read as ``doc``
reads one."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from chiezo.answer.here_answers import Around
from chiezo.answer.support import Embed
from chiezo.answer.websearch import WebResult
from chiezo.core.config import Settings
from chiezo.core.errors import ChiezoError
from chiezo.core.here import HERE
from chiezo.core.models import SearchResult
from chiezo.ops import browse, web
from chiezo.ops.context import Context
from chiezo.ops.requests import SearchRequest
from chiezo.ops.searching import search
from chiezo.search import counterparts, languages
from chiezo.search.languages import language_code
from chiezo.search.lookup import find_doc, has_title
from chiezo.search.retrieval import default_retrieval


class LibraryLookups:
    """``Lookups`` over a context (it satisfies answer/lookups.py's Protocol)."""

    def __init__(self, ctx: Context):
        self.ctx = ctx

    @property
    def settings(self) -> Settings:
        return self.ctx.settings

    def web(self, query: str, limit: int) -> list[WebResult]:
        return web.results(self.ctx.settings, query, limit)

    def search(
        self, query: str, source: str | None, limit: int, around: Around | None = None
    ) -> SearchResult:
        if around is None:
            return search(self.ctx, SearchRequest.of(query=query, source=source, limit=limit))
        return search(
            self.ctx,
            SearchRequest.of(
                query=query,
                source=source,
                limit=limit,
                near=HERE,
                location=around.location.text(),
                radius_km=around.radius_km,
                feature=list(around.feature) or None,
            ),
        )

    def has_article(self, name: str, source: str | None = None) -> bool:
        library = self.ctx.library
        sources = [library.get(source)] if source else library.sources()
        return any(has_title(src, name) for src in sources)

    def read(self, source: str, doc_id: int, fields: list[str]) -> dict[str, Any]:
        return read_document(self.ctx, source, doc_id=doc_id, fields=fields)[0]

    def source_names(self) -> list[str]:
        return [info.name for info in self.ctx.library.infos()]

    def counterparts(self, names: list[str], source: str | None) -> list[str]:
        found = counterparts.titled(self.ctx.library.sources(), names, source)
        return list(dict.fromkeys(title for _, title in found))

    def by_meaning_only(self, question: str, source: str | None) -> bool:
        asked = [self.ctx.library.get(source)] if source else self.ctx.library.default_sources()[0]
        searched = [s for s in asked if not s.live and default_retrieval(s) == "hybrid"]
        return bool(searched) and all(languages.crosses(s, question) for s in searched)

    def source_language(self, name: str) -> str | None:
        try:
            return language_code(self.ctx.library.get(name).meta.get("language"))
        except ChiezoError:  # one that does not open is listed without
            return None

    def check_source(self, name: str) -> None:
        self.ctx.library.get(name)

    def reference_link(
        self, source: str, doc_id: int, key: str | None, url: str | None
    ) -> tuple[str | None, str]:
        return self.ctx.reference_link(source, doc_id, key, url)

    def claim_embedder(self, names: Iterable[str]) -> Embed | None:
        return self.ctx.claim_embedder(names)

    def chunk_ids(self, source: str, doc_id: int) -> dict[int, int]:
        return self.ctx.chunk_ids(source, doc_id)

    def passage_closeness(
        self, source: str, chunk_ids: list[int], question: str
    ) -> dict[int, float]:
        return self.ctx.passage_closeness(source, chunk_ids, question)


def read_document(
    ctx: Context,
    source: str,
    *,
    title: str | None = None,
    doc_id: int | None = None,
    key: str | None = None,
    fields: list[str] | None = None,
    max_chars: int | None = None,
) -> tuple[dict[str, Any], int, list[dict[str, Any]]]:
    """(the document's ``fields``, its doc_id, other documents of that title): found by id,
    key or title; a live source reads it from its server first (store/library.py LiveSource)."""
    wanted = browse.check_fields(fields)
    src, deadline = ctx.read(source, "doc")
    src.ensure_doc(doc_id=doc_id, key=key, title=title, timeout=ctx.settings.query_timeout)
    with deadline:
        found, alternatives = find_doc(src, title=title, doc_id=doc_id, key=key)
        out = browse.read_doc(src, found, wanted, max_chars, ctx.doc_link)
    return out, found, alternatives
