"""A document of a source by id, key or title (through aliases), and the titles close to one
that is missing: what reading a document, ``near_doc`` and the answer layer's check that a
subject is in the library all start from."""

from __future__ import annotations

import difflib
from typing import Any

from chiezo.core.errors import BadQuery, NotFound, Operation
from chiezo.core.query import MIN_FTS_CHARS, match_any, match_in_columns, phrase, text_grams
from chiezo.core.textnorm import normalise_title
from chiezo.store.library import Source


def find_doc(
    src: Source, *, title: str | None = None, doc_id: int | None = None, key: str | None = None
) -> tuple[int, list[dict[str, Any]]]:
    """(doc_id, alternatives): by id, by key, or by exact title through aliases; several docs
    with one title → the most popular, the others as alternatives; none → 404 with the
    closest titles as candidates."""
    source = src.name
    if doc_id is not None:
        if not _doc_exists(src, doc_id):
            raise NotFound(f"{source} has no document {doc_id}", source=source)
        return doc_id, []
    if key is not None:
        row = src.conn.execute("SELECT doc_id FROM docs WHERE key = ?", (key,)).fetchone()
        if row is None:
            raise NotFound(f"{source} has no document with key {key!r}", source=source)
        return row[0], []
    if title is not None and title.strip():
        ids = _ids_by_title(src, title)
        if not ids:
            raise NotFound(
                f"{source} has no document titled {title!r}",
                source=source,
                candidates=closest_titles(src, title),
                hint="use one of the candidates, or search for it: {see}",
                see=Operation("search", source),
            )
        return ids[0], [_summary(src, i) for i in ids[1:]]
    raise BadQuery("give a title, a doc_id or a key")


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


def has_title(src: Source, name: str) -> bool:
    """Whether ``src`` has a document of title or alias ``name`` (normalised), or of that
    title with a disambiguator (「夏目漱石 (作家)」): one indexed range, not a scan."""
    norm = normalise_title(name)
    return bool(norm) and (
        src.conn.execute(
            "SELECT 1 FROM titles WHERE norm = ? OR (norm >= ? AND norm < ?) LIMIT 1",
            (norm, norm + " (", norm + " )"),
        ).fetchone()
        is not None
    )


def _summary(src: Source, doc_id: int) -> dict[str, Any]:
    key, title = src.conn.execute(
        "SELECT key, title FROM docs WHERE doc_id = ?", (doc_id,)
    ).fetchone()
    return {"doc_id": doc_id, "key": key, "title": title}


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
