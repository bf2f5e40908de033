"""Finding documents: full-text plans (fts.py, keyword.py, scoring.py), meaning (semantic.py),
both fused (hybrid.py, rank.py) or merged across sources by evidence (evidence.py), conditions
(filters.py, setplan.py), snippets and sections (snippet.py, sections.py, pdf_pages.py); the
query language itself is core/query.py."""
