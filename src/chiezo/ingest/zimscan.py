"""What building a ZIM source needs to know of all its entries before it reads any article:
which entries are articles, each article's title by its path (a link names a path; the
document stores the title), each redirect's title by its target (the target's aliases), and
which HTML entries are redirects rendered as a copy of another article.

Kept in a temporary SQLite file, not in Python dicts (design.md §35.18): with a link list and
~1.5 redirects an article, as wikipedia_en_all has, the dicts grew a build ~0.8 KB an article
— 4.0 GB projected for its 6.5M articles; the file grows the disk instead. In memory stays the
list of article ids, 4 bytes each.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from chiezo.core import db
from chiezo.core.progress import NullProgress, Progress
from chiezo.ingest.htmltext import page_text

if TYPE_CHECKING:
    # libzim ships .pyi files but no py.typed marker: to mypy these are Any
    from libzim.reader import Archive

BATCH = 10_000  # rows written at once
MAX_VARIABLES = 500  # paths asked for in one statement (SQLite allows 32,766; shorter is as fast)

TABLES = """
CREATE TABLE articles (id INTEGER PRIMARY KEY, path TEXT NOT NULL, title TEXT NOT NULL);
CREATE TABLE redirects (target TEXT NOT NULL, title TEXT NOT NULL);
"""
INDEXES = """
CREATE INDEX articles_by_path ON articles (path);
CREATE INDEX articles_by_title ON articles (title);
CREATE INDEX redirects_by_target ON redirects (target);
"""


class Scanned:
    """The scan of one archive: ``articles`` (entry ids to read, the rendered copies left out)
    and the tables ``aliases`` and ``titles_of`` read. Closes its file when done with."""

    def __init__(self, path: Path | None) -> None:
        # no path: SQLite's own temporary file (tests, benches); a build gives its scratch folder
        self.conn = db.open_for_build(path) if path else sqlite3.connect("", isolation_level=None)
        self.conn.executescript(TABLES)
        self.articles = array("I")
        self._rows: dict[str, list[tuple]] = {"articles": [], "redirects": []}

    def __enter__(self) -> Scanned:
        return self

    def __exit__(self, *exc: object) -> None:
        self.conn.close()

    def add_article(self, entry_id: int, path: str, title: str) -> None:
        self.articles.append(entry_id)
        self._queue("articles", (entry_id, path, title))

    def add_redirect(self, target: str, title: str) -> None:
        self._queue("redirects", (target, title))

    def aliases(self, path: str) -> list[str]:
        """The titles of the redirects to the article at ``path``."""
        rows = self.conn.execute("SELECT title FROM redirects WHERE target = ?", (path,))
        return [r[0] for r in rows]

    def titles_of(self, paths: list[str]) -> dict[str, str]:
        """{path: title} for those of ``paths`` that are articles."""
        found: dict[str, str] = {}
        for start in range(0, len(paths), MAX_VARIABLES):
            some = paths[start : start + MAX_VARIABLES]
            marks = ",".join("?" * len(some))
            found.update(
                self.conn.execute(f"SELECT path, title FROM articles WHERE path IN ({marks})", some)
            )
        return found

    def shared_titles(self) -> dict[str, list[int]]:
        """{title: the ids of its articles} for the titles more than one article has."""
        rows = self.conn.execute(
            "SELECT title, group_concat(id) FROM articles GROUP BY title HAVING count(*) > 1"
        )
        return {title: [int(i) for i in ids.split(",")] for title, ids in rows}

    def finish(self) -> None:
        """Every row written, then the indexes made (once: an index made at the end is sorted
        once, not kept in order row by row)."""
        self.flush()
        self.conn.executescript(INDEXES)

    def flush(self) -> None:
        for table in self._rows:
            self._flush(table)

    def leave_out(self, ids: Iterable[int]) -> None:
        """Read none of ``ids`` (a copy of another article is its alias, not a document)."""
        gone = set(ids)
        if gone:
            self.articles = array("I", (i for i in self.articles if i not in gone))

    def _queue(self, table: str, row: tuple) -> None:
        rows = self._rows[table]
        rows.append(row)
        if len(rows) >= BATCH:
            self._flush(table)

    def _flush(self, table: str) -> None:
        rows = self._rows[table]
        if rows:
            marks = ",".join("?" * len(rows[0]))
            self.conn.execute("BEGIN")
            self.conn.executemany(f"INSERT INTO {table} VALUES ({marks})", rows)
            self.conn.execute("COMMIT")
            rows.clear()


def scan(archive: Archive, where: Path | None = None, progress: Progress | None = None) -> Scanned:
    """Every entry of ``archive`` once: articles (HTML entries; in the old namespace scheme,
    those under ``A/``) and redirects, then the rendered copies found among articles that
    share a title. ``where``: the file for the tables (default: a temporary one)."""
    progress = progress or NullProgress()
    progress.phase("scanning entries", archive.entry_count, "entries")
    scanned = Scanned(where)
    old_scheme = not archive.has_new_namespace_scheme
    for entry_id in range(archive.entry_count):
        if entry_id % BATCH == 0 and entry_id:
            progress.advance(BATCH)
        entry = archive._get_entry_by_id(entry_id)
        if old_scheme and not entry.path.startswith("A/"):
            continue
        if entry.is_redirect:
            target = entry.get_redirect_entry()
            if entry.title and entry.title != target.title:
                scanned.add_redirect(target.path, entry.title)
            continue
        if entry.get_item().mimetype.startswith("text/html"):
            scanned.add_article(entry_id, entry.path, entry.title or entry.path)
    scanned.finish()
    copies = _rendered_redirects(archive, scanned.shared_titles())
    for path, target in copies.values():
        scanned.add_redirect(target, path_title(path))
    scanned.flush()
    scanned.leave_out(copies)
    return scanned


def _rendered_redirects(
    archive: Archive, shared: dict[str, list[int]]
) -> dict[int, tuple[str, str]]:
    """{entry id: (its path, the path of the article it copies)} for HTML entries that are a
    redirect rendered as a page: mwoffliner writes some Wikipedia redirects as a full copy of
    their target, titled as the target (A/The_Pages_of_My_Mind, "Ray Charles"), so the article
    would come out twice. A copy is an entry with another's title (``shared``: title → ids)
    *and* its very text (two Wikibooks chapters titled "Introduction" stay two); of such a
    group, the entry whose path names the title is the article (else the shortest path), the
    others its aliases."""
    copies: dict[int, tuple[str, str]] = {}
    for title, ids in shared.items():
        by_text: dict[str, list[tuple[str, int]]] = {}
        for entry_id in ids:
            entry = archive._get_entry_by_id(entry_id)
            markup = bytes(entry.get_item().content).decode("utf-8", "replace")
            by_text.setdefault(page_text(markup, entry.title).text, []).append(
                (entry.path, entry_id)
            )
        for same in by_text.values():
            same.sort(key=lambda p: (path_title(p[0]) != title, len(p[0])))
            copies.update({i: (path, same[0][0]) for path, i in same[1:]})
    return copies


def path_title(path: str) -> str:
    """The title an entry's path spells (A/Ray_Charles → Ray Charles)."""
    name = path[2:] if path[:2] in ("A/", "C/") else path
    return unquote(name).replace("_", " ")
