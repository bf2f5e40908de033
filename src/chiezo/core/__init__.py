"""The floor of the house: settings, errors, SQLite access, the schema, records, text
normalisation and words, the query language, progress, and the catalogue of operations.
Imports nothing of Chiezo's above it (docs/architecture.md)."""
