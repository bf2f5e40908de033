"""The facade every surface calls (CLI today; REST, MCP and the web UI later).

Behaviour is defined here once, so the answers of every surface agree. Methods take plain
arguments, return plain data (dicts, dataclasses) and raise ChiezoError subclasses.
"""

from __future__ import annotations

import difflib
import json
import time
from pathlib import Path
from typing import Any

from . import db
from .build import BuildReport
from .config import Settings
from .errors import BadQuery, NotFound, QueryTimeout
from .library import Library, Source
from .models import SearchResult
from .search.fts import check_window, search_source
from .search.query import MIN_FTS_CHARS, match_any, match_in_columns, phrase, text_grams
from .search.rank import reciprocal_rank_fusion
from .sources import KINDS
from .textnorm import normalise_title

MAX_LIMIT = 50
DOC_FIELDS = (
    "source", "doc_id", "key", "title", "url", "rank_score", "aliases", "opening", "body",
    "tags", "links", "attrs", "point", "chunks", "extra",
)  # fmt: skip
DEFAULT_DOC_FIELDS = tuple(f for f in DOC_FIELDS if f != "chunks")


class Service:
    def __init__(self, settings: Settings | None = None):
        self.settings = settings or Settings.from_env()
        self.library = Library(self.settings)

    # -- sources -----------------------------------------------------------------------------

    def sources(self) -> list[dict[str, Any]]:
        return self.library.infos()

    def ingest(self, kind: str, path: Path, name: str, **kwargs) -> BuildReport:
        if kind not in KINDS:
            raise BadQuery(f"unknown source kind: {kind!r}", known_kinds=sorted(KINDS))
        return KINDS[kind](self.settings, Path(path), name, **kwargs)

    # -- search ------------------------------------------------------------------------------

    def search(
        self, q: str, source: str | None = None, *, limit: int = 10, offset: int = 0
    ) -> SearchResult:
        limit = _check_limit(limit)
        check_window(limit, offset)
        if source:
            return search_source(
                self.library.get(source),
                q,
                limit=limit,
                offset=offset,
                timeout=self.settings.query_timeout,
            )
        return self._search_all(q, limit, offset)

    def _search_all(self, q: str, limit: int, offset: int) -> SearchResult:
        """Every source searched for the first offset+limit hits, fused by reciprocal rank
        (bm25 values from different files are not comparable)."""
        sources = self.library.sources()
        if not sources:
            raise NotFound(
                "there are no sources yet",
                hint="build one with `chiezo ingest docs PATH --name NAME`",
            )
        deadline = time.monotonic() + self.settings.query_timeout
        results: dict[str, SearchResult] = {}
        notes: list[str] = []
        for src in sources:
            remaining = deadline - time.monotonic()
            try:
                if remaining <= 0:
                    raise QueryTimeout("no time left")
                results[src.name] = search_source(
                    src, q, limit=offset + limit, offset=0, timeout=remaining
                )
            except QueryTimeout:
                notes.append(f"{src.name}: timed out; its results are missing")
        if not results and notes:
            raise QueryTimeout(
                f"searching every source took longer than {self.settings.query_timeout:g} s"
            )
        hits = {(h.source, h.doc_id): h for r in results.values() for h in r.hits}
        fused = reciprocal_rank_fusion(
            [(h.source, h.doc_id) for h in r.hits] for r in results.values()
        )
        page = [hits[key] for key, _ in fused[offset : offset + limit]]
        modes = {name: r.mode for name, r in results.items()}
        for name, r in results.items():
            notes.extend(f"{name}: {n}" for n in r.notes)
        return SearchResult(
            query=q.strip(),
            hits=page,
            total=sum(r.total for r in results.values()),
            mode="fused:" + ",".join(sorted(set(modes.values()))),
            offset=offset,
            limit=limit,
            total_is_lower_bound=bool(notes and any("timed out" in n for n in notes))
            or any(r.total_is_lower_bound for r in results.values()),
            notes=notes,
            sources=sorted(results),
        )

    # -- documents ---------------------------------------------------------------------------

    def doc(
        self,
        source: str,
        *,
        title: str | None = None,
        doc_id: int | None = None,
        key: str | None = None,
        fields: list[str] | None = None,
        max_chars: int | None = None,
    ) -> dict[str, Any]:
        src = self.library.get(source)
        wanted = _check_fields(fields)
        if max_chars is not None and max_chars < 0:
            raise BadQuery("max_chars must not be negative")
        with db.deadline(src.conn, self.settings.query_timeout, what="doc"):
            alternatives: list[dict[str, Any]] = []
            if doc_id is not None:
                found = doc_id if _doc_exists(src, doc_id) else None
                if found is None:
                    raise NotFound(f"{source} has no document {doc_id}", source=source)
            elif key is not None:
                row = src.conn.execute("SELECT doc_id FROM docs WHERE key = ?", (key,)).fetchone()
                if row is None:
                    raise NotFound(f"{source} has no document with key {key!r}", source=source)
                found = row[0]
            elif title is not None and title.strip():
                ids = _ids_by_title(src, title)
                if not ids:
                    raise NotFound(
                        f"{source} has no document titled {title!r}",
                        source=source,
                        candidates=closest_titles(src, title),
                    )
                found = ids[0]
                alternatives = [_summary(src, i) for i in ids[1:]]
            else:
                raise BadQuery("give a title, a doc_id or a key")
            out = read_doc(src, found, wanted, max_chars)
        if alternatives:
            out["alternatives"] = alternatives
        return out


def _check_limit(limit: int) -> int:
    if limit < 1 or limit > MAX_LIMIT:
        raise BadQuery(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def _check_fields(fields: list[str] | None) -> tuple[str, ...]:
    if not fields:
        return DEFAULT_DOC_FIELDS
    unknown = [f for f in fields if f not in DOC_FIELDS]
    if unknown:
        raise BadQuery(
            f"unknown field{'s' if len(unknown) > 1 else ''}: {', '.join(unknown)}",
            allowed_fields=list(DOC_FIELDS),
        )
    return tuple(fields)


def _doc_exists(src: Source, doc_id: int) -> bool:
    return src.conn.execute("SELECT 1 FROM docs WHERE doc_id = ?", (doc_id,)).fetchone() is not None


def _ids_by_title(src: Source, title: str) -> list[int]:
    return [
        r[0]
        for r in src.conn.execute(
            "SELECT doc_id FROM titles WHERE norm = ? ORDER BY is_alias, doc_id LIMIT 50",
            (normalise_title(title),),
        )
    ]


def _summary(src: Source, doc_id: int) -> dict[str, Any]:
    key, title = src.conn.execute(
        "SELECT key, title FROM docs WHERE doc_id = ?", (doc_id,)
    ).fetchone()
    return {"doc_id": doc_id, "key": key, "title": title}


def read_doc(
    src: Source, doc_id: int, fields: tuple[str, ...], max_chars: int | None
) -> dict[str, Any]:
    conn = src.conn
    row = conn.execute(
        "SELECT key, title, url, rank_score, aliases, opening, body, extra FROM docs "
        "WHERE doc_id = ?",
        (doc_id,),
    ).fetchone()
    key, title, url, rank_score, aliases, opening, body, extra = row
    full: dict[str, Any] = {
        "source": src.name,
        "doc_id": doc_id,
        "key": key,
        "title": title,
        "url": url,
        "rank_score": rank_score,
        "aliases": [a for a in (aliases or "").split("\n") if a],
        "opening": opening,
        "extra": json.loads(extra) if extra else {},
    }
    out = {f: full[f] for f in fields if f in full}
    if "body" in fields:
        out["body"] = body if max_chars is None else body[:max_chars]
        out["body_chars"] = len(body)
        if max_chars is not None and len(body) > max_chars:
            out["truncated"] = True
    if "tags" in fields:
        out["tags"] = [
            r[0]
            for r in conn.execute(
                "SELECT tag FROM doc_tags WHERE doc_id = ? ORDER BY tag", (doc_id,)
            )
        ]
    if "links" in fields:
        out["links"] = [
            r[0]
            for r in conn.execute(
                "SELECT target FROM doc_links WHERE doc_id = ? ORDER BY target", (doc_id,)
            )
        ]
    if "attrs" in fields:
        attrs: dict[str, list[str]] = {}
        for name, value in conn.execute(
            "SELECT name, value FROM doc_attrs WHERE doc_id = ? ORDER BY name, value", (doc_id,)
        ):
            attrs.setdefault(name, []).append(value)
        out["attrs"] = attrs
    if "point" in fields:
        point = conn.execute(
            "SELECT lat, lon FROM doc_points WHERE doc_id = ?", (doc_id,)
        ).fetchone()
        out["point"] = {"lat": point[0], "lon": point[1]} if point else None
    if "chunks" in fields:
        out["chunks"] = [
            {"ord": o, "heading_path": h, "text": t}
            for o, h, t in conn.execute(
                "SELECT ord, heading_path, text FROM chunks WHERE doc_id = ? ORDER BY ord",
                (doc_id,),
            )
        ]
    return out


def closest_titles(src: Source, text: str, n: int = 10) -> list[str]:
    """Titles close to ``text``: same prefix, containing it, or sharing its rarer trigrams;
    ordered by string similarity. Used for "did you mean" on a missing title."""
    conn = src.conn
    norm = normalise_title(text)
    ids: dict[int, None] = {}
    for (doc_id,) in conn.execute(
        "SELECT doc_id FROM titles WHERE norm >= ? AND norm < ? LIMIT 20",
        (norm, norm + "\U0010ffff"),
    ):
        ids.setdefault(doc_id)
    title_columns = ("title", "aliases")
    if len(norm) >= MIN_FTS_CHARS:
        expr = match_in_columns(title_columns, phrase(norm))
        for (doc_id,) in conn.execute(
            "SELECT rowid FROM docs_fts WHERE docs_fts MATCH ? ORDER BY rowid LIMIT 30", (expr,)
        ):
            ids.setdefault(doc_id)
    grams = text_grams(norm)[:40]
    if grams:
        expr = match_in_columns(title_columns, match_any(grams))
        for (doc_id,) in conn.execute(
            "SELECT rowid FROM docs_fts WHERE docs_fts MATCH ? ORDER BY rank LIMIT 30", (expr,)
        ):
            ids.setdefault(doc_id)
    if not ids:
        return []
    marks = ",".join("?" * len(ids))
    titles = [
        r[0] for r in conn.execute(f"SELECT title FROM docs WHERE doc_id IN ({marks})", list(ids))
    ]
    titles = list(dict.fromkeys(titles))
    titles.sort(key=lambda t: -difflib.SequenceMatcher(None, norm, normalise_title(t)).ratio())
    return titles[:n]
