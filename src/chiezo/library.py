"""The registry of sources: finds them on disk, opens their current generation read-only, and
notices a newly switched-in generation without a restart.
"""

from __future__ import annotations

import json
import sys
import threading
from array import array
from pathlib import Path
from typing import Any

from . import db, generations
from .attribution import attribution
from .config import Settings
from .errors import ChiezoError, SchemaMismatch, UnknownSource
from .schema import REQUIRED_TABLES, SCHEMA_VERSION, WORDS_AND_TRIGRAMS

NOTES = "notes"  # the writable source's reserved name


class Source:
    """One generation of one source, opened read-only and immutable.

    Connections are per thread (SQLite serialises work on a shared connection); the metadata and
    the rank vector are read once per generation.
    """

    immutable = True

    def __init__(self, name: str, path: Path):
        self.name = name
        self.path = path
        self._local = threading.local()
        self._ranks: array | None = None
        self._ranks_lock = threading.Lock()
        self._vectors = None
        self.meta = self._read_meta()
        self._check_schema()

    @property
    def conn(self) -> db.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = db.open_readonly(self.path, immutable=self.immutable)
            self._local.conn = conn
        return conn

    def _read_meta(self) -> dict[str, str]:
        try:
            tables = {r[0] for r in self.conn.execute("SELECT name FROM sqlite_master")}
            missing = [t for t in REQUIRED_TABLES if t not in tables]
            if "meta" in missing:
                raise SchemaMismatch(
                    f"{self.path} is not a Chiezo source (no meta table)",
                    source=self.name,
                    hint=f"remove it and rebuild {self.name!r}",
                )
            meta = dict(self.conn.execute("SELECT key, value FROM meta"))
            meta["_missing_tables"] = ",".join(missing)
            return meta
        except db.DatabaseError as exc:
            raise SchemaMismatch(
                f"source {self.name!r} cannot be read ({exc})",
                source=self.name,
                hint=f"rebuild {self.name!r}",
            ) from exc

    def _check_schema(self) -> None:
        try:
            version = int(self.meta.get("schema_version", "0"))
        except ValueError:
            version = 0
        if version == SCHEMA_VERSION and not self.meta["_missing_tables"]:
            return
        newer = version > SCHEMA_VERSION
        raise SchemaMismatch(
            f"source {self.name!r} was built with schema version {version}; this Chiezo reads "
            f"version {SCHEMA_VERSION}"
            + (" (the file is newer than this program)" if newer else " and it needs a rebuild"),
            source=self.name,
            schema_version=version,
            expected_schema_version=SCHEMA_VERSION,
            hint="upgrade Chiezo" if newer else self.rebuild_hint(),
        )

    def rebuild_hint(self) -> str:
        kind = self.meta.get("kind", "KIND")
        try:
            path = json.loads(self.meta.get("input", "{}")).get("path", "INPUT")
        except ValueError:
            path = "INPUT"
        return (f"rebuild it: chiezo rebuild {self.name} (or the admin page's Rebuild), "
                f"which runs chiezo ingest {kind} {path} --name {self.name}")  # fmt: skip

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
        """The vector index of this generation (search/vectors.py), or None without vectors."""
        from .search.vectors import VectorIndex, vector_info

        info = vector_info(self.meta)
        if info is None:
            return None
        if self._vectors is None:
            with self._ranks_lock:
                if self._vectors is None:
                    self._vectors = VectorIndex(self.path, info)
        return self._vectors

    def rank_of(self, doc_id: int) -> float:
        ranks = self.ranks
        return float(ranks[doc_id - 1]) if 0 < doc_id <= len(ranks) else 0.0

    def info(self) -> dict[str, Any]:
        m = self.meta
        info = {
            "name": self.name,
            "kind": m.get("kind", ""),
            "language": m.get("language") or None,
            "docs": self.doc_count,
            "chunks": int(m.get("chunk_count", 0)),
            "tags": int(m.get("tag_count", 0)),
            "links": int(m.get("link_count", 0)),
            "points": int(m.get("point_count", 0)),
            "attributes": self.attributes,
            "built_at": m.get("built_at"),
            "schema_version": int(m.get("schema_version", 0)),
            "generation": m.get("generation") or self.path.name,
            "input": json.loads(m.get("input", "{}")),
            "size_bytes": self.path.stat().st_size if self.path.exists() else None,
            "vectors": self._vector_summary(),
            # "words+trigrams", or "trigrams" for a source built before the word index
            "text_index": "words+trigrams" if self.has_words else "trigrams",
            "status": "ok",
        }
        info["attribution"] = attribution(info)
        return info

    def _vector_summary(self) -> dict[str, Any] | None:
        from .search.vectors import vector_info

        info = vector_info(self.meta)
        if info is None:
            return None
        units = self.meta.get("embedding_unit_chars")
        return {"model": info.model, "dim": info.dim, "count": info.count,
                "embedded_chunks": info.embedded_chunks, "coverage": round(info.coverage, 4),
                "unit_chars": int(units) if units not in (None, "") else 0,
                "embedded_at": self.meta.get("embedded_at")}  # fmt: skip


class NotesSource(Source):
    """The writable notes file, read side: read-only but not immutable (the writer changes it
    in place), and its counts are read live instead of from build-time metadata."""

    immutable = False

    @property
    def doc_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM docs").fetchone()[0]

    @property
    def ranks(self) -> array:
        return array("f")  # notes have no popularity

    def info(self) -> dict[str, Any]:
        info = super().info()
        conn = self.conn
        info.update(
            docs=self.doc_count,
            tags=conn.execute("SELECT count(*) FROM tag_counts").fetchone()[0],
            writable=True,
        )
        return info


class Library:
    """All sources under ``<data>/corpus``; ``get(name)`` always returns the current generation."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._open: dict[str, Source] = {}
        self._lock = threading.Lock()

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
        return sorted(names)

    def get(self, name: str) -> Source:
        if name == NOTES and self.settings.notes_path.exists():
            return self._cached(name, self.settings.notes_path, NotesSource)
        directory = self.corpus_dir / name
        path = (
            generations.current_path(directory)
            if generations.NAME_PATTERN.match(name or "")
            else None
        )
        if path is None:
            known = self.names()
            raise UnknownSource(
                f"unknown source: {name!r}",
                known_sources=known,
                hint="known sources: " + ", ".join(known)
                if known
                else "build one with `chiezo ingest docs PATH --name NAME`",
            )
        return self._cached(name, path, Source)

    def _cached(self, name: str, path: Path, kind: type[Source]) -> Source:
        with self._lock:
            source = self._open.get(name)
            if source is None or source.path != path:
                source = kind(name, path)  # a new generation: switch to it
                self._open[name] = source
            return source

    def sources(self) -> list[Source]:
        """Every source that opens cleanly (broken ones are reported by ``infos()``)."""
        out = []
        for name in self.names():
            try:
                out.append(self.get(name))
            except ChiezoError:
                continue
        return out

    def infos(self) -> list[dict[str, Any]]:
        out = []
        for name in self.names():
            try:
                out.append(self.get(name).info())
            except ChiezoError as exc:
                out.append({**exc.to_dict(), "name": name, "status": "needs_rebuild"})
        return out
