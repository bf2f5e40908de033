"""What every operation's handler shares: the settings, the library of current generations,
the notes store, the record of answers, the model client — and the few services several
families of operations use (opening a source to read, links a person can open, the sources
that have what a condition needs).

An operation is a handler ``op(ctx, request)`` in its family's module (ops/searching.py,
reading.py, answering.py, remembering.py, building.py, operating.py), bound to its request
model in ops/registry.py. The context holds state, not behaviour of its own: a new operation
adds a handler, not a method here.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, TypeVar

from chiezo.core.config import Settings
from chiezo.core.errors import ChiezoError, LLMNotConfigured
from chiezo.core.models import Hit, SearchResult
from chiezo.ops import browse, links, notes
from chiezo.ops.answers_log import AnswersLog
from chiezo.search import where
from chiezo.search.lacks import Having, SourceLacks
from chiezo.search.semantic import chunk_closeness
from chiezo.store.library import NOTES, Library, Source

if TYPE_CHECKING:
    import numpy as np

    from chiezo.answer.llm import LLMClient
    from chiezo.answer.rag import Prepared


class Context:
    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings.from_env()
        self.library = Library(self.settings)
        self.notes = notes.NotesStore(self.settings.notes_path.parent)
        self.answers_log = AnswersLog(self.settings.data_dir)  # what was asked and answered
        # told of every search's result, whichever surface asked (a server's metrics count
        # the searches whose meaning side fell back to keywords)
        self.search_observers: list[Callable[[SearchResult], None]] = []

    def read(self, source: str | Source, what: str) -> tuple[Source, AbstractContextManager[None]]:
        """(source, deadline context) for one read request."""
        return where.opened(self.library, source, what)

    def notes_source(self) -> Source:
        self.notes.ensure()  # an empty notes file is a valid, empty source
        return self.library.get(NOTES)

    # -- what a refusal names --------------------------------------------------------------

    def sources_with(self, has: Having) -> list[str] | None:
        """Every source that opens and has what ``has`` asks (search/lacks.py), by name."""
        found = []
        for info in self.library.infos():
            if info.ok and has(self.library.get(info.name)):
                found.append(info.name)
        return found or None

    # -- links a person opens --------------------------------------------------------------

    def reference_link(
        self, source: str, doc_id: int, key: str | None, url: str | None
    ) -> tuple[str | None, str]:
        """(where a person can open a cited document, its stable ``source:key``): the URL
        ops/links.py makes of its stored ``url`` — its public page, else this server's page
        for it (``CHIEZO_PUBLIC_URL``, ``chiezo serve``'s own, or the server on this data
        directory) — or None when it has neither."""
        cite = f"{source}:{key if key is not None else doc_id}"
        # a tool answer's web address is written readable (…/wiki/浅草寺): a reference gives
        # it as sources store one; an archive path or a file:// url is the stored value itself
        stored = links.encoded(url) if url is not None and links.is_public(url) else url
        return self.open_url(source, doc_id, stored), cite

    def open_url(self, source: str, doc_id: int, url: str | None) -> str | None:
        """The absolute URL a person opens the document at (ops/links.py), from its stored
        ``url`` — or from one already made so (a tool result's), which is kept."""
        return links.open_url(
            links.server_base(self.settings), source, doc_id, url, self._archived(source)
        )

    def _archived(self, source: str) -> bool:
        """Whether ``source`` was built from an archive (a ZIM: its documents' url is their
        path inside it)."""
        try:
            return self.library.get(source).archived
        except ChiezoError:
            return False

    def doc_link(self, src: Source, doc_id: int, url: str | None) -> str | None:
        """``open_url`` for a document read from ``src`` (ops/browse.py ``read_doc``)."""
        return links.open_url(links.server_base(self.settings), src.name, doc_id, url, src.archived)

    def openable(self, hits: list[Hit]) -> None:
        """Each hit's ``url`` made one a person can open; what the source stores kept as
        ``source_url`` (the web maps that to its own relative links)."""
        base = links.server_base(self.settings)
        archived = {name: self._archived(name) for name in {h.source for h in hits}}
        for hit in hits:
            if hit.source_url is None:
                hit.source_url = hit.url
            hit.url = links.open_url(
                base, hit.source, hit.doc_id, hit.source_url, archived[hit.source]
            )

    # -- the model ---------------------------------------------------------------------------

    def llm(self) -> LLMClient | None:
        """The configured model client, or None when answering is off (no CHIEZO_LLM_URL)."""
        from chiezo.answer.llm import LLMClient, endpoints_from

        s = self.settings
        endpoints = endpoints_from(s.llm_url, s.llm_model, s.llm_key)
        return LLMClient(endpoints, timeout=s.llm_timeout) if endpoints else None

    def require_llm(self, prepared: Prepared | None = None) -> LLMClient:
        """The model client, or a configuration error that still hands over what was found."""
        llm = self.llm()
        if llm is None:
            found = {} if prepared is None else prepared.findings()
            raise LLMNotConfigured(
                "answering needs a language model endpoint, and none is configured",
                hint="set CHIEZO_LLM_URL (and CHIEZO_LLM_MODEL)"
                + ("; what the library says and the excerpts found are included" if found else ""),
                **found,
            )
        return llm

    # -- what the answer layer weighs passages and claims by ---------------------------------

    def claim_embedder(self, names: Iterable[str]) -> Callable[[list[str]], np.ndarray] | None:
        """``texts → unit vectors`` with the embedder of the first of these sources that has
        vectors (claims are compared in the space their source was searched in), or None."""
        from chiezo.store.model_host import query_embedder
        from chiezo.store.vectors import vector_info

        for name in dict.fromkeys(names):
            try:
                info = vector_info(self.library.get(name).meta)
            except ChiezoError:
                continue
            if info is not None:
                model = info.model
                return lambda texts: query_embedder(model).embed(texts, "passage")
        return None

    def chunk_ids(self, source: str, doc_id: int) -> dict[int, int]:
        """A document's passages, ``ord`` → chunk_id: what answer/passages.py weighs them by."""
        return browse.chunk_ids(self.library.get(source), doc_id)

    def passage_closeness(
        self, source: str, chunk_ids: list[int], question: str
    ) -> dict[int, float]:
        """chunk_id → how close its best vector is to ``question`` (empty without vectors):
        the meaning answer/passages.py weighs a passage by."""
        return chunk_closeness(self.library.get(source), chunk_ids, question)

    def points(self, hits: list[tuple[str, int]]) -> dict[tuple[str, int], tuple[float, float]]:
        """Coordinates of the given (source, doc_id) pairs that have them (for a map)."""
        wanted: dict[str, list[int]] = {}
        for name, doc_id in hits:
            wanted.setdefault(name, []).append(doc_id)
        out: dict[tuple[str, int], tuple[float, float]] = {}
        for name, ids in wanted.items():
            src, deadline = self.read(name, "points")
            if not int(src.meta.get("point_count", 0) or 0):
                continue
            marks = ",".join("?" * len(ids))
            with deadline:
                for doc_id, lat, lon in src.conn.execute(
                    f"SELECT doc_id, lat, lon FROM doc_points WHERE doc_id IN ({marks})", ids
                ):
                    out[(name, doc_id)] = (lat, lon)
        return out


R = TypeVar("R")
Q = TypeVar("Q")


def refusals_name_sources(handler: Callable[[Context, Q], R]) -> Callable[[Context, Q], R]:
    """A condition no source of the request could meet is refused naming the sources of the
    library that could (``sources_with_it``): only here is the whole library at hand."""

    @functools.wraps(handler)
    def named(ctx: Context, request: Q) -> R:
        try:
            return handler(ctx, request)
        except SourceLacks as exc:
            if "sources_with_it" not in exc.extras:
                found = ctx.sources_with(exc.has)
                if found:
                    exc.extras["sources_with_it"] = found
            raise

    return named
