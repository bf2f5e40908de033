"""The layout of one source file, and its version.

Every source kind writes the same core tables, so every search path works on every source.
Bump ``SCHEMA_VERSION`` whenever a reader would misread an older file; readers then refuse the
old file with a 409 that says to rebuild it instead of returning wrong answers.

Two layout decisions carry the performance of the whole system (numbers in docs/design.md):

* ``docs.doc_id`` is the **popularity ordinal**: 1 is the most popular document. The FTS index
  keeps its doclists in rowid order, so ``... MATCH ? ORDER BY rowid LIMIT k`` walks matches from
  the most popular down and stops after k; cost follows k, never the number of matches. It also
  makes a separate rank index unnecessary.
* ``body`` is the last column of ``docs``: reading a row's title or score then never touches the
  body's overflow pages.
"""

from __future__ import annotations

SCHEMA_VERSION = 2
# The oldest layout this program still reads. Version 2 added ``chunks.spans`` (a passage kept
# as offsets into its document's body: store/chunk_text.py); a version-1 file has the text in
# ``chunks.text`` and is read as it is. A version-2 file read by a program that knows only 1
# would show empty passages — hence the new number: such a program refuses it.
OLDEST_READABLE_VERSION = 1


def readable_version(version: int) -> bool:
    return OLDEST_READABLE_VERSION <= version <= SCHEMA_VERSION


def versions_read() -> str:
    """The versions this program reads, as a message says them ("1 to 2")."""
    if OLDEST_READABLE_VERSION == SCHEMA_VERSION:
        return str(SCHEMA_VERSION)
    return f"{OLDEST_READABLE_VERSION} to {SCHEMA_VERSION}"


# Tables filled while documents stream in. Indexes come later (see INDEXES): building them once
# over sorted data is several times faster than maintaining them row by row.
TABLES = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE docs (
    doc_id     INTEGER PRIMARY KEY,       -- popularity ordinal: 1 = most popular
    key        TEXT NOT NULL,             -- the source's own stable id (path, page id, ...)
    title      TEXT NOT NULL,
    rank_score REAL NOT NULL DEFAULT 0,   -- popularity normalised to 0..1
    url        TEXT,
    aliases    TEXT NOT NULL DEFAULT '',  -- alternate titles, one per line (full-text indexed)
    opening    TEXT NOT NULL DEFAULT '',  -- the first paragraph, for short answers
    extra      TEXT,                      -- JSON: anything kind-specific
    body       TEXT NOT NULL DEFAULT ''   -- last on purpose, see module docstring
);

-- Exact and prefix title lookup, through titles and aliases alike; norm = normalise_title().
CREATE TABLE titles (
    norm     TEXT NOT NULL,
    doc_id   INTEGER NOT NULL,
    is_alias INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (norm, doc_id)
) WITHOUT ROWID;

-- Document frequency of every trigram in docs_fts, copied from the FTS vocabulary at build time:
-- the sentence fallback and the planner need it per query, and fts5vocab would walk a whole
-- doclist to count it.
CREATE TABLE gram_df (
    gram TEXT PRIMARY KEY,
    df   INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE doc_tags (
    tag    TEXT NOT NULL,
    doc_id INTEGER NOT NULL,
    PRIMARY KEY (tag, doc_id)
) WITHOUT ROWID;

CREATE TABLE tag_counts (
    tag TEXT PRIMARY KEY,
    n   INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE doc_links (
    doc_id INTEGER NOT NULL,
    target TEXT NOT NULL,
    PRIMARY KEY (doc_id, target)
) WITHOUT ROWID;

-- Materialised attributes (feature key=value, admin area, wikidata id, front matter fields):
-- real rows, so an equality filter is an index range and a total is a count over it.
CREATE TABLE doc_attrs (
    name   TEXT NOT NULL,
    value  TEXT NOT NULL,
    doc_id INTEGER NOT NULL,
    PRIMARY KEY (name, value, doc_id)
) WITHOUT ROWID;

CREATE TABLE attr_counts (
    name  TEXT NOT NULL,
    value TEXT NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (name, value)
) WITHOUT ROWID;

-- Exact coordinates, plus an R*Tree for range queries (its 32-bit floats round outwards, so it
-- finds a superset that doc_points then checks exactly).
CREATE TABLE doc_points (
    doc_id INTEGER PRIMARY KEY,
    lat    REAL NOT NULL,
    lon    REAL NOT NULL
);
CREATE VIRTUAL TABLE doc_coords USING rtree(doc_id, min_lat, max_lat, min_lon, max_lon);

-- rank_score of every doc as packed float32, indexed by doc_id - 1: the planner reads the
-- popularity of thousands of candidates per query, and one blob read per generation beats
-- thousands of row reads per query.
CREATE TABLE rank_vector (
    id     INTEGER PRIMARY KEY CHECK (id = 1),
    scores BLOB NOT NULL
);

-- Passages for excerpts and vectors; heading_path is the breadcrumb "A > B > C". A passage made
-- of its document's body keeps only where (spans "a:b,c:d", text ''): store/chunk_text.py.
CREATE TABLE chunks (
    chunk_id     INTEGER PRIMARY KEY,
    doc_id       INTEGER NOT NULL,
    ord          INTEGER NOT NULL,
    heading_path TEXT NOT NULL DEFAULT '',
    spans        TEXT,
    text         TEXT NOT NULL
);
"""

# The text indexes of a built source. Both hold *folded* text (words.fold: NFKC, case), so
# width variants match each other (ＪＲ = JR, ｱｲｽ = アイス) while docs keeps the text as written;
# hence contentless (content = ''): an external-content index must tokenize to what its content
# table holds. The word index holds words.index_text() (Sudachi words for Japanese, stemmed
# words elsewhere), already split, so unicode61 keeps each token as it is.
TEXT_INDEXES = """
CREATE VIRTUAL TABLE docs_fts USING fts5(title, aliases, body, content = '', tokenize = 'trigram');

CREATE VIRTUAL TABLE words_fts USING fts5(
    title, aliases, body, content = '', tokenize = 'unicode61 remove_diacritics 0'
);

-- Document frequency of every word, as gram_df is for trigrams.
CREATE TABLE word_df (
    word TEXT PRIMARY KEY,
    df   INTEGER NOT NULL
) WITHOUT ROWID;
"""

# The writable source (notes) keeps its trigram index in step with docs through triggers, over
# the text as written (no word index, no folding: see ops/notes.py).
WRITABLE_TEXT_INDEX = """
CREATE VIRTUAL TABLE docs_fts USING fts5(
    title, aliases, body,
    content = 'docs', content_rowid = 'doc_id',
    tokenize = 'trigram'
);
"""

# meta "text_index" of a source with both indexes; a source without it has the trigram index
# only (built before the word index, or notes).
WORDS_AND_TRIGRAMS = "trigram+words"

INDEXES = """
CREATE UNIQUE INDEX idx_docs_key ON docs(key);
CREATE INDEX idx_doc_tags_doc ON doc_tags(doc_id, tag);
CREATE INDEX idx_doc_links_target ON doc_links(target, doc_id);
CREATE INDEX idx_doc_attrs_doc ON doc_attrs(doc_id, name);
CREATE INDEX idx_chunks_doc ON chunks(doc_id, ord);
"""

# The admin boundaries of an OSM source as polygons: ``within=osm_kanto:東京都`` reads one
# (search/shapes.py), the map draws them. Rings as JSON [[[lon, lat], ...], ...] under the
# even-odd rule (core/geometry.py); a source built before it has no such table.
AREA_SHAPES = """
CREATE TABLE area_shapes (
    name  TEXT NOT NULL,
    level TEXT NOT NULL,
    west  REAL NOT NULL,
    south REAL NOT NULL,
    east  REAL NOT NULL,
    north REAL NOT NULL,
    rings TEXT NOT NULL
);
CREATE INDEX idx_area_shapes_name ON area_shapes(name);
"""

# Tables every reader relies on; a file missing any of them is not a Chiezo source.
REQUIRED_TABLES = ("meta", "docs", "titles", "docs_fts", "gram_df", "doc_tags", "chunks")
