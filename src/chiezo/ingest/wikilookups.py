"""Lookup tables for a Wikipedia build, on disk: page views by title, Wikidata ids by page id.

Both grow with the wiki (1.5–1.9 million rows each for jawiki, per the design notes), so they
live in a temporary SQLite file with a small page cache instead of Python dicts: resident memory
stays flat whatever the wiki's size.

Formats (the public Wikimedia dumps):

* page views — ``pageview_complete`` monthly/daily files (``ja.wikipedia 日本語 11 desktop 1234
  A12B3...``) or the older hourly ``pageviews`` files (``ja 日本語 12 0``); plain, .bz2 or .gz.
  Views of all access methods (desktop, mobile) are summed per title.
* page props — the SQL dump ``<wiki>-<date>-page_props.sql.gz``: ``INSERT INTO `page_props`
  VALUES (11,'wikibase_item','Q5287',NULL),...``; only ``wikibase_item`` rows are kept.
"""

from __future__ import annotations

import io
import math
import re
from pathlib import Path
from typing import IO

from chiezo.core import db
from chiezo.core.errors import InputError
from chiezo.core.progress import Progress
from chiezo.ingest.wikidump import open_dump
from chiezo.ingest.wikitext import mediawiki_title

BATCH = 50_000
_PROP_ROW = re.compile(r"\((\d+),'((?:[^'\\]|\\.)*)','((?:[^'\\]|\\.)*)',(?:NULL|[-+0-9.eE]+)\)")


def open_text(path: Path) -> IO[str]:
    """A plain, .bz2, .gz or .xz text file as decoded lines (the caller closes it)."""
    if not path.is_file():
        raise InputError(f"no such file: {path}")
    stream, _ = open_dump(path)
    return io.TextIOWrapper(stream, encoding="utf-8", errors="replace")


class WikiLookups:
    def __init__(self, path: Path):
        self.conn = db.open_for_build(path)
        self.conn.execute("PRAGMA cache_size = -32768")  # 32 MiB, whatever the table sizes
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS views (title TEXT PRIMARY KEY, n INTEGER) WITHOUT ROWID"
        )
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS props (page_id INTEGER PRIMARY KEY, qid TEXT)"
        )
        self.has_pageviews = False
        self._log_top = 0.0

    def close(self) -> None:
        self.conn.close()

    # -- page views ------------------------------------------------------------------------

    def load_pageviews(self, path: Path, language: str, progress: Progress) -> int:
        project = f"{language}.wikipedia"
        hourly_codes = {language, f"{language}.m"}
        rows: list[tuple[str, int]] = []
        lines = 0
        with open_text(path) as fh:
            for line in fh:
                lines += 1
                fields = line.split(" ")
                if len(fields) >= 5 and fields[0] == project:  # pageview_complete
                    views = fields[4]
                elif len(fields) == 4 and fields[0] in hourly_codes:  # hourly pageviews
                    views = fields[2]
                else:
                    continue
                if views.isdigit():
                    rows.append((mediawiki_title(fields[1]), int(views)))
                if len(rows) >= BATCH:
                    self._add_views(rows)
                    progress.advance(len(rows))
                    rows = []
        self._add_views(rows)
        top = self.conn.execute("SELECT max(n) FROM views").fetchone()[0]
        if not top:
            raise InputError(
                f"{path.name} has no page views for {project}",
                hint="give the pageview_complete (or hourly pageviews) file of this wiki",
            )
        self.has_pageviews = True
        self._log_top = math.log1p(top)
        return lines

    def _add_views(self, rows: list[tuple[str, int]]) -> None:
        if rows:
            self.conn.executemany(
                "INSERT INTO views (title, n) VALUES (?, ?) "
                "ON CONFLICT(title) DO UPDATE SET n = n + excluded.n",
                rows,
            )

    def rank(self, title: str) -> float:
        """Page views as rank_score: log1p(views) / log1p(most viewed), 0 without views."""
        if not self.has_pageviews:
            return 0.0
        row = self.conn.execute("SELECT n FROM views WHERE title = ?", (title,)).fetchone()
        return math.log1p(row[0]) / self._log_top if row else 0.0

    # -- Wikidata ids ------------------------------------------------------------------------

    def load_page_props(self, path: Path, progress: Progress) -> int:
        rows: list[tuple[int, str]] = []
        seen = 0
        with open_text(path) as fh:
            for line in fh:
                if not line.startswith("INSERT INTO"):
                    continue
                for match in _PROP_ROW.finditer(line):
                    seen += 1
                    if match.group(2) == "wikibase_item":
                        rows.append((int(match.group(1)), match.group(3)))
                if len(rows) >= BATCH:
                    self._add_props(rows)
                    progress.advance(len(rows))
                    rows = []
        self._add_props(rows)
        if not seen:
            raise InputError(
                f"{path.name} holds no page_props rows",
                hint="give the <wiki>-<date>-page_props.sql.gz dump",
            )
        return seen

    def _add_props(self, rows: list[tuple[int, str]]) -> None:
        if rows:
            self.conn.executemany("INSERT OR REPLACE INTO props VALUES (?, ?)", rows)

    def wikidata(self, page_id: int) -> str | None:
        row = self.conn.execute("SELECT qid FROM props WHERE page_id = ?", (page_id,)).fetchone()
        return row[0] if row else None
