"""The registry of sources: finds them on disk, opens their current generation read-only, and
notices a newly switched-in generation without a restart.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import sys
import threading
import time
from array import array
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from chiezo.core import db
from chiezo.core.config import Settings
from chiezo.core.errors import (
    BadQuery,
    ChiezoError,
    Conflict,
    Operation,
    SchemaMismatch,
    UnknownSource,
)
from chiezo.core.models import Doc, Hit
from chiezo.core.schema import (
    REQUIRED_TABLES,
    SCHEMA_VERSION,
    WORDS_AND_TRIGRAMS,
    readable_version,
    versions_read,
)
from chiezo.core.textnorm import normalise_title
from chiezo.store import generations, live_cache, source_settings
from chiezo.store.kinds import Attribution, SourceKind, kinds
from chiezo.store.source_info import NEEDS_REBUILD, SourceInfo, recorded_input

if TYPE_CHECKING:  # the type only: the module is imported where it is used
    from chiezo.store.vectors import VectorIndex

NOTES = "notes"  # the writable source's reserved name
WATCH_SECONDS = 1.0  # how often a server looks for switched-in generations (one readlink each)
# what a live source's server may take when a search has no deadline of its own (an
# evaluation's): a server that never answers still ends it
NO_DEADLINE = 10.0

log = logging.getLogger("chiezo.library")

# The sources one request has opened (``Library.pinned``): a context variable, so every thread
# working for the request (the thread pool copies the context) sees the same generations.
_PINNED: contextvars.ContextVar[dict[str, Source] | None] = contextvars.ContextVar(
    "chiezo_pinned_generations", default=None
)


class _Held:
    """One thread's connection to one generation, closed when that thread ends or the
    generation is dropped (whichever comes first). A ``sqlite3.Connection`` is in a reference
    cycle with its own statement cache, so, merely dropped, it stays open — page cache, parsed
    schema, FTS5 state, the file's mapping — until a full garbage collection, which comes
    seldom in a server of many long-lived objects: a worker held ~20 more connections after
    each generation switched in (bench/serve_load.py; docs/design.md, "Under load")."""

    __slots__ = ("conn",)

    def __init__(self, conn: db.Connection):
        self.conn = conn

    def __del__(self) -> None:
        with contextlib.suppress(Exception):  # at interpreter exit, or already closed
            self.conn.close()


class Source:
    """One generation of one source, opened read-only and immutable.

    Connections are per thread (SQLite serialises work on a shared connection); the metadata and
    the rank vector are read once per generation.
    """

    immutable = True
    writable = False  # built as a generation and served read-only
    live = False  # searched and read through a running server (LiveSource)

    def __init__(self, name: str, path: Path):
        self.name = name
        self.path = path
        self._local = threading.local()
        self._ranks: array | None = None
        self._ranks_lock = threading.Lock()
        self._vectors: VectorIndex | None = None
        self.meta = self._read_meta()
        self._check_schema()

    @property
    def conn(self) -> db.Connection:
        held = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = _Held(db.open_readonly(self.path, immutable=self.immutable))
        return held.conn

    def _read_meta(self) -> dict[str, str]:
        try:
            tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master")}
            missing = [t for t in REQUIRED_TABLES if t not in tables]
            if "meta" in missing:
                raise SchemaMismatch(
                    f"{self.path} is not a Chiezo source (no meta table)",
                    source=self.name,
                    hint="remove it ({0}) and build it anew ({1})",
                    see=(Operation("remove", self.name), Operation("ingest", self.name)),
                )
            meta = dict(self.conn.execute("SELECT key, value FROM meta"))
            meta["_missing_tables"] = ",".join(missing)
            return meta
        except db.DatabaseError as exc:
            raise SchemaMismatch(
                f"source {self.name!r} cannot be read ({exc})",
                source=self.name,
                hint="rebuild it: {see}",
                see=Operation("rebuild", self.name),
            ) from exc

    def _check_schema(self) -> None:
        try:
            version = int(self.meta.get("schema_version", "0"))
        except ValueError:
            version = 0
        if readable_version(version) and not self.meta["_missing_tables"]:
            return
        newer = version > SCHEMA_VERSION
        raise SchemaMismatch(
            f"source {self.name!r} was built with schema version {version}; this Chiezo reads "
            f"version {versions_read()}"
            + (" (the file is newer than this program)" if newer else " and it needs a rebuild"),
            source=self.name,
            schema_version=version,
            expected_schema_version=SCHEMA_VERSION,
            **({"hint": "upgrade Chiezo"} if newer else self.rebuild_hint()),
        )

    def rebuild_hint(self) -> dict[str, Any]:
        """``hint`` and ``see`` extras: how to rebuild this source, and what that runs."""
        path = recorded_input(self.meta).get("path")
        ingest = Operation("ingest", self.name, kind=self.meta.get("kind") or None, path=path)
        return {
            "hint": "rebuild it: {0}, which runs {1}",
            "see": (Operation("rebuild", self.name), ingest),
        }

    # -- cached projections -----------------------------------------------------------------

    @property
    def doc_count(self) -> int:
        return int(self.meta.get("doc_count", 0))

    @property
    def has_words(self) -> bool:
        """Whether this generation has the word index beside the trigram one (and folded text
        in both); sources built before it search by trigrams, as text was written."""
        return self.meta.get("text_index") == WORDS_AND_TRIGRAMS

    @property
    def attributes(self) -> list[str]:
        return json.loads(self.meta.get("attributes", "[]"))

    @property
    def ranks(self) -> array:
        """rank_score by doc_id - 1, loaded once per generation (4 bytes per document)."""
        if self._ranks is None:
            with self._ranks_lock:
                if self._ranks is None:
                    row = self.conn.execute(
                        "SELECT scores FROM rank_vector WHERE id = 1"
                    ).fetchone()
                    values = array("f")
                    if row is not None:
                        values.frombytes(row[0])
                        if sys.byteorder != "little":
                            values.byteswap()
                    self._ranks = values
        return self._ranks

    @property
    def vectors(self):
        """The vector index of this generation (store/vectors.py), or None without vectors."""
        from chiezo.store.vectors import VectorIndex, vector_info

        info = vector_info(self.meta)
        if info is None:
            return None
        if self._vectors is None:
            with self._ranks_lock:
                if self._vectors is None:
                    self._vectors = VectorIndex(self.path, info)
        return self._vectors

    def warm(self, *, read_file: bool = True) -> float:
        """Read what the first query would otherwise read: the rank vector, the query embedder
        of this generation's model (loaded once per process, then one query embedded so its
        first-run setup is done), the vector index (read once, one probe search) and the file
        itself (when it is small beside the memory: the keyword side and the snippets read it).
        Returns the seconds it took. A missing model or index raises, as the first query would.

        The whole file comes last: a query arriving during the warm needs the model and the
        index whole, but only a few pages of the file, and reading it competes for the disk."""
        from chiezo.store.model_host import query_embedder
        from chiezo.store.vectors import read_ahead, vector_info

        started = time.monotonic()
        _ = self.ranks
        info = vector_info(self.meta)
        if info is not None and info.count:
            query_embedder(info.model).embed(["warm up"], "query")
            self.vectors.warm()
        if read_file:
            read_ahead(self.path)
        return time.monotonic() - started

    def ensure_doc(
        self, *, doc_id: int | None, key: str | None, title: str | None, timeout: float
    ) -> None:
        """Make the document asked for readable here: a built source holds every one (a live
        source reads it from its server: LiveSource)."""

    def check_answers(self, what: str) -> None:
        """Refuse a read this source cannot answer (``what``: doc, titles, filter…): a built
        source answers every one."""

    def rank_of(self, doc_id: int) -> float:
        ranks = self.ranks
        return float(ranks[doc_id - 1]) if 0 < doc_id <= len(ranks) else 0.0

    def info(self) -> SourceInfo:
        info = SourceInfo.from_meta(
            self.name,
            self.meta,
            self.path,
            vectors=self._vector_summary(),
            # "words+trigrams", or "trigrams" for a source built before the word index
            text_index="words+trigrams" if self.has_words else "trigrams",
            writable=self.writable,
            live=self.live,
        )
        info.attribution = attribution(info)
        info.about = self.kind.about(info) if self.kind else None
        return info

    @property
    def kind(self) -> SourceKind | None:
        """The source's kind (store/kinds.py); None for a kind no longer registered."""
        return kinds().get(self.meta.get("kind", ""))

    @property
    def archived(self) -> bool:
        """Whether its documents are entries of the archive it was built from (a ZIM)."""
        kind = self.kind
        return bool(kind and kind.capabilities.archive)

    def _vector_summary(self) -> dict[str, Any] | None:
        from chiezo.store.vectors import vector_info

        info = vector_info(self.meta)
        if info is None:
            return None
        units = self.meta.get("embedding_unit_chars")
        return {
            "model": info.model,
            "dim": info.dim,
            "count": info.count,
            "embedded_chunks": info.embedded_chunks,
            "coverage": round(info.coverage, 4),
            "unit_chars": int(units) if units not in (None, "") else 0,
            "embedded_at": self.meta.get("embedded_at"),
        }


class NotesSource(Source):
    """The writable notes file, read side: read-only but not immutable (the writer changes it
    in place), and its counts are read live instead of from build-time metadata."""

    immutable = False
    writable = True

    @property
    def doc_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM docs").fetchone()[0]

    @property
    def ranks(self) -> array:
        return array("f")  # notes have no popularity

    def info(self) -> SourceInfo:
        info = super().info()
        info.docs = self.doc_count
        info.tags = self.conn.execute("SELECT count(*) FROM tag_counts").fetchone()[0]
        return info


class LiveSlots:
    """How many of this process's requests may wait on live sources' servers at once: half its
    request threads (``CHIEZO_SERVE_THREADS``), so that what does not ask a live server always
    finds a thread. A slow kiwix-serve holding all four of a worker's threads left ``/healthz``
    unanswered for 60 s. A request finding no slot free is
    refused at once — waiting for one would hold a thread too."""

    def __init__(self, slots: int) -> None:
        self.slots = slots
        self._free = threading.BoundedSemaphore(slots)

    @contextlib.contextmanager
    def held(self, source: str):
        from chiezo.core.errors import SourceUnavailable

        if not self._free.acquire(blocking=False):
            raise SourceUnavailable(
                f"source {source!r} is not asked now: {self.slots} requests here are already "
                "waiting on live servers",
                hint="try again in a moment; a server that answers slowly keeps its slots "
                "until its deadline (CHIEZO_QUERY_TIMEOUT)",
                busy=True,
            )
        try:
            yield
        finally:
            self._free.release()


class LiveSource(Source):
    """A source searched and read through a running server (a kiwix-serve book: the kind's
    ``capabilities.live``). Its generation only registers where the book is (meta, no
    documents). What the server answered — each hit, then each document when first asked
    for — is kept in a cache beside it (``gen-….db.live``, a sidecar: it goes with its
    generation) in the generation schema, so that every read path — doc, passages, chunk ids,
    citations, pages — reads it as it reads a built source, whichever worker found the hit.
    A cache, not an index: searches always ask the server."""

    immutable = False  # the cache grows as hits arrive
    live = True
    bounds = live_cache.Bounds()  # what the cache keeps (store/live_cache.py)

    def __init__(self, name: str, path: Path, slots: LiveSlots | None = None):
        self.registration = path
        self.cache_path = live_cache.path_of(path)
        if not self.cache_path.exists():
            live_cache.create(raw_meta(path) or {}, self.cache_path)
        self._writer_lock = threading.Lock()
        self.slots = slots or LiveSlots(1)
        super().__init__(name, path)
        _keep_credentials_apart(path.parent, self.meta)

    @property
    def conn(self) -> db.Connection:
        held = getattr(self._local, "held", None)
        if held is None:
            held = self._local.held = _Held(db.open_readonly(self.cache_path, immutable=False))
        return held.conn

    @property
    def _kind(self) -> SourceKind:
        kind = self.kind
        if kind is None:  # a plugin's kind, uninstalled since
            raise BadQuery(
                f"source {self.name!r} is of kind {self.meta.get('kind')!r}, which is not "
                "installed here",
                source=self.name,
            )
        return kind

    @property
    def doc_count(self) -> int:
        return int(recorded_input(self.meta).get("articles") or 0)

    def _registered(self) -> SourceInfo:
        """The source's info, with the server it was registered with. A generation imported
        from an archive has none: an address is never taken from an archive (it could name any
        service this machine reaches, and every search would be sent there)."""
        info = self.info()
        if not info.input.get("url"):
            raise Conflict(
                f"source {self.name!r} was imported from an archive, which does not say which "
                "server to ask",
                source=self.name,
                hint="register the book on this machine: {see}",
                see=Operation("ingest", self.name, kind=self.meta.get("kind"), path="URL"),
            )
        return info

    def info(self) -> SourceInfo:
        info = super().info()
        info.docs = self.doc_count
        return info

    def check_answers(self, what: str) -> None:
        """Only ``doc`` (and search, which does not ask): listing titles, tags or links,
        filtering or drawing at random would read the cache — what was seen so far — as if it
        were the book."""
        if what != "doc":
            raise BadQuery(
                f"source {self.name!r} is searched live by its server: it answers search and "
                f"doc, not {what}",
                source=self.name,
            )

    def search(
        self,
        text: str,
        *,
        limit: int,
        offset: int,
        timeout: float | None,
        filters: object = None,
    ):
        """The server's hits for ``text`` (offset, limit), recorded in the cache. ``filters``
        (search/filters.Filters, a floor above this one) can only be refused here."""
        if filters:
            raise BadQuery(
                f"source {self.name!r} is searched live by its server and cannot apply "
                "conditions (tag, attribute, area, coordinates)",
                source=self.name,
            )
        info = self._registered()
        with self._calling(info, timeout or NO_DEADLINE) as call:
            result = self._kind.search_live(info, text, limit=limit, offset=offset, call=call)
        del result.hits[limit:]  # a kind that gave more: no more is kept than was asked for
        with self._writing() as conn:
            for hit in result.hits:
                self._record(conn, hit)
        return result

    @contextlib.contextmanager
    def _calling(self, info: SourceInfo, timeout: float):
        """One call to the server: in one of this process's live slots, by one deadline."""
        from chiezo.core.addresses import load_credentials
        from chiezo.core.outbound import Deadline
        from chiezo.store.kinds import LiveCall

        with self.slots.held(self.name):
            yield LiveCall(Deadline.after(timeout), load_credentials(self.registration.parent))

    def warm(self, *, read_file: bool = True) -> float:
        return 0.0  # nothing to read ahead: the cache fills as the server answers

    def ensure_doc(
        self, *, doc_id: int | None, key: str | None, title: str | None, timeout: float
    ) -> None:
        """Make the document asked for readable from the cache: found by id or key among the
        hits seen, or by title through the server's title look-up; its text read from the
        server the first time it is asked for."""
        row = self._cached_row(doc_id, key, title)
        if row is not None and row[3]:  # already read
            return
        if row is None and title is None:  # unknown here: a 404 follows
            return
        info = self._registered()
        with self._calling(info, timeout) as call:  # the look-up and the read: one deadline
            if row is None and title is not None:
                hit = self._kind.find_live(info, title, call)
                if hit is None:
                    return
                with self._writing() as conn:
                    self._record(conn, hit)
                row = self._cached_row(hit.doc_id, None, None)
                if row is None or row[3]:  # let go meanwhile, or read by another request
                    return
            found_id, path, found_title, _read = row
            doc = self._kind.read_live(info, path, found_title, call)
        with self._writing() as conn:
            self._store_text(conn, found_id, doc)

    def _cached_row(self, doc_id: int | None, key: str | None, title: str | None):
        sql = "SELECT d.doc_id, d.key, d.title, r.doc_id IS NOT NULL FROM docs d "
        sql += "LEFT JOIN reads r ON r.doc_id = d.doc_id WHERE "
        if doc_id is not None:
            return self.conn.execute(sql + "d.doc_id = ?", (doc_id,)).fetchone()
        if key is not None:
            return self.conn.execute(sql + "d.key = ?", (key,)).fetchone()
        return self.conn.execute(
            sql + "d.doc_id IN (SELECT doc_id FROM titles WHERE norm = ?)",
            (normalise_title(title or ""),),
        ).fetchone()

    @contextlib.contextmanager
    def _writing(self):
        with self._writer_lock, live_cache.writing(self.cache_path, self.bounds) as conn:
            yield conn

    @staticmethod
    def _record(conn: db.Connection, hit: Hit) -> None:
        live_cache.record(conn, hit)

    @staticmethod
    def _store_text(conn: db.Connection, doc_id: int, doc: Doc | None) -> None:
        live_cache.store_text(conn, doc_id, doc)


def _keep_credentials_apart(folder: Path, meta: dict[str, str]) -> None:
    """A live source registered before addresses were taken apart records its server's user
    and password in its address: they move to the source's credentials file, from where its
    calls take them (the recorded address is shown without them: source_info.py)."""
    from chiezo.core.addresses import Address, has_credentials, load_credentials, save_credentials

    url = None
    with contextlib.suppress(ValueError, AttributeError, TypeError):
        url = json.loads(meta.get("input") or "{}").get("url")
    if isinstance(url, str) and has_credentials(url) and load_credentials(folder) is None:
        credentials = Address.parse(url).credentials
        if credentials is not None:
            with contextlib.suppress(OSError):  # a folder not ours: the call goes without
                save_credentials(folder, credentials)


class Library:
    """All sources under ``<data>/corpus``; ``get(name)`` always returns the current generation."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._open: dict[str, Source] = {}
        self._lock = threading.Lock()
        # A server warms each generation it switches to (``watch``); a CLI command that opens
        # a source for one query does not: reading a whole index ahead would cost it more.
        self.warm_new_generations = False
        self.warmed: dict[str, dict[str, Any]] = {}  # name → {generation, seconds | error}
        self._warm_lock = threading.Lock()  # one warm at a time: two model loads compete
        self._watcher: threading.Thread | None = None
        self._stop = threading.Event()
        self.live_slots = LiveSlots(max(1, settings.serve_threads // 2))

    @property
    def corpus_dir(self) -> Path:
        return self.settings.corpus_dir

    def names(self) -> list[str]:
        names = []
        if self.corpus_dir.is_dir():
            names = [
                d.name
                for d in self.corpus_dir.iterdir()
                if d.is_dir() and d.name != NOTES and generations.current_path(d) is not None
            ]
        if self.settings.notes_path.exists():
            names.append(NOTES)
        for gone in set(self._open) - set(names):  # removed by another process
            self.forget(gone)
        return sorted(names)

    @contextlib.contextmanager
    def pinned(self):
        """For one request: every ``get`` of a source inside returns the generation its first
        ``get`` returned, so a generation switched in meanwhile never mixes into the answer.
        Yields {name: Source} of what was opened (the response names their generations)."""
        used: dict[str, Source] = {}
        token = _PINNED.set(used)
        try:
            yield used
        finally:
            _PINNED.reset(token)

    def get(self, name: str) -> Source:
        pins = _PINNED.get()
        if pins is None:
            return self._current(name)
        source = pins.get(name)
        if source is None:
            source = pins[name] = self._current(name)
        return source

    def _current(self, name: str) -> Source:
        if name == NOTES and self.settings.notes_path.exists():
            return self._cached(name, self.settings.notes_path, NotesSource)
        directory = self.corpus_dir / name
        path = (
            generations.current_path(directory)
            if generations.NAME_PATTERN.match(name or "")
            else None
        )
        if path is None:
            self.forget(name)  # removed since it was opened: its files are freed
            known = self.names()
            raise UnknownSource(
                f"unknown source: {name!r}",
                known_sources=known,
                hint="known sources: " + ", ".join(known) if known else "build one with {see}",
                see=None if known else _building(name),
            )
        if _is_live(path):
            return self._cached(name, path, functools.partial(LiveSource, slots=self.live_slots))
        return self._cached(name, path, Source)

    def _cached(self, name: str, path: Path, kind: Callable[[str, Path], Source]) -> Source:
        with self._lock:
            source = self._open.get(name)
            if source is None or source.path != path:
                source = kind(name, path)  # a new generation: switch to it
                self._open[name] = source
                if self.warm_new_generations and not source.writable:
                    self._warm_in_background(source)
            return source

    def is_open(self, name: str) -> bool:
        """Whether ``name`` is a source this process has opened (so a name that is not a source
        costs no file system look-up)."""
        return name in self._open

    # -- warming switched-in generations ------------------------------------------------------

    def watch(self, interval: float = WATCH_SECONDS) -> threading.Thread:
        """In a server: from now on warm every generation switched in (``Source.warm``), in
        the background, and look for them every ``interval`` seconds — so a new generation is
        usually warm before its first query arrives, and a query that comes sooner waits only
        for what it would have loaded itself (the model and the index are loaded under locks,
        once). Switching stays immediate: the generation serves at once, warm or not."""
        with self._lock:
            if self._watcher is not None and not self._stop.is_set():
                return self._watcher  # already watching
            self._stop = threading.Event()  # each watch its own: a stopped one stays stopped
            self.warm_new_generations = True
            self._watcher = threading.Thread(
                target=self._watch,
                args=(interval, self._stop),
                name="chiezo-generation-watch",
                daemon=True,
            )
            self._watcher.start()
            return self._watcher

    def stop_watching(self) -> None:
        """Stop looking, and stop warming generations switched in from now on."""
        with self._lock:
            self.warm_new_generations = False
            self._stop.set()

    def _watch(self, interval: float, stop: threading.Event) -> None:
        while not stop.wait(interval):
            for name in self.names():
                try:
                    self.get(name)  # a new ``current`` is opened here, and its warm started
                except ChiezoError:
                    continue  # reported to whoever asks for it
                except Exception:  # noqa: BLE001 - the watch must outlive one bad file
                    log.exception("looking at source %s failed", name)

    def _warm_in_background(self, source: Source) -> None:
        threading.Thread(
            target=self._warm, args=(source,), name=f"chiezo-warm-{source.name}", daemon=True
        ).start()

    def _warm(self, source: Source) -> None:
        with self._warm_lock:
            if self._open.get(source.name) is not source:
                return  # already replaced by a newer generation: warm that one instead
            record: dict[str, Any] = {"generation": source.path.name}
            try:
                record["seconds"] = round(source.warm(), 3)
            except ChiezoError as exc:  # reported on first use, as without warming
                record["error"] = exc.message
            except Exception as exc:  # noqa: BLE001 - a failed warm must not stop the server
                log.exception("warming %s failed", source.path)
                record["error"] = str(exc)
            self.warmed[source.name] = record

    def forget(self, name: str) -> None:
        """Drop ``name``'s open generation (a source removed): the space of its files is freed
        once the last request still reading them is done."""
        with self._lock:
            self._open.pop(name, None)

    def sources(self) -> list[Source]:
        """Every source that opens cleanly (broken ones are reported by ``infos()``)."""
        out = []
        for name in self.names():
            try:
                out.append(self.get(name))
            except ChiezoError:
                continue
        return out

    def infos(self) -> list[SourceInfo]:
        return [self.info(name) for name in self.names()]

    def settings_of(self, name: str) -> source_settings.SourceSettings:
        """What the user decided about source ``name`` (store/source_settings.py)."""
        if name == NOTES:
            return source_settings.SourceSettings()
        return source_settings.read(self.corpus_dir / name)

    def set_in_default(self, name: str, in_default: bool) -> None:
        if name == NOTES:
            raise BadQuery("the notes source is always searched with the others", source=NOTES)
        self.get(name)  # an unknown source is a 404 naming the known ones
        current = self.settings_of(name)
        source_settings.write(self.corpus_dir / name, replace(current, in_default=in_default))

    def default_sources(self) -> tuple[list[Source], list[str]]:
        """(the sources a search of "all sources" reads, the names it leaves out): those
        ``in_default``; every source when none is (a library of only the samples searches
        them)."""
        opened = self.sources()
        chosen = [s for s in opened if self.settings_of(s.name).in_default]
        if not chosen:
            return opened, []
        kept = {s.name for s in chosen}
        return chosen, [s.name for s in opened if s.name not in kept]

    def info(self, name: str) -> SourceInfo:
        """What is known of source ``name``; for one that no longer opens (another schema
        version, a damaged file) the facts its current file's meta table still gives, with
        status ``needs_rebuild`` and the reason — so that it can be listed and rebuilt.
        An unknown source is UnknownSource."""
        try:
            info = self.get(name).info()
            info.in_default = self.settings_of(name).in_default
            return info
        except UnknownSource:
            raise
        except ChiezoError as exc:
            path = generations.current_path(self.corpus_dir / name)
            meta = raw_meta(path) if path is not None else None
            info = (
                SourceInfo.from_meta(name, meta, path)
                if meta and path is not None  # a meta table was read only from a path
                else SourceInfo(name=name)
            )
            info.status, info.error, info.hint = NEEDS_REBUILD, exc.message, exc.extras.get("hint")
            return info


def _building(name: str) -> Operation:
    """How to build a source: under the name asked for, where that can be a source's name."""
    try:
        generations.check_name(name)
    except ChiezoError:
        name = "NAME"
    return Operation("ingest", name, kind="docs")


def _is_live(path: Path) -> bool:
    """Whether the generation at ``path`` registers a source its kind searches live."""
    kind = kinds().get((raw_meta(path) or {}).get("kind", ""))
    return bool(kind and kind.capabilities.live)


def raw_meta(path: Path) -> dict[str, str] | None:
    """The meta table of a file that may not open as a source."""
    try:
        conn = db.open_readonly(path)
        try:
            return dict(conn.execute("SELECT key, value FROM meta"))
        finally:
            conn.close()
    except db.Error:
        return None


def attribution(info: SourceInfo) -> dict[str, str | None]:
    """Whose data the source is and under which licence (its kind says; public dumps come
    with obligations: Wikipedia CC BY-SA, OpenStreetMap ODbL, GeoNames CC BY)."""
    kind = kinds().get(info.kind)
    if kind is None:
        return Attribution(f"a {info.kind or 'unknown'} source").to_dict()
    return kind.attribution(info).to_dict()
