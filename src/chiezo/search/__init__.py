"""Finding documents: query parsing (query.py), full-text plans (fts.py), ranking and fusion
(rank.py) and snippets (snippet.py)."""
