"""One SQLite file per source: building a generation and switching it in, the library of
current generations, the word index, vectors and their cache, the embedders, and the seam every
kind of source plugs into (kinds.py)."""
