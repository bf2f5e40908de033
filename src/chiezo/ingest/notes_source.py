"""Source kind ``notes``: the one writable source. It is not built from an input — the notes
store (chiezo/ops/notes.py) writes it in place — so the kind only says what it is: writable (no
rebuild, no embedding, no ``chiezo ingest``) and whose words they are."""

from __future__ import annotations

from typing import TYPE_CHECKING

from chiezo.store.kinds import Attribution, Capabilities, SourceKind

if TYPE_CHECKING:
    from chiezo.store.source_info import SourceInfo


class NotesKind(SourceKind):
    name = "notes"
    summary = "Notes written with remember (chiezo notes, the API or MCP); never built."
    ingestable = False
    capabilities = Capabilities(writable=True)

    def attribution(self, info: SourceInfo) -> Attribution:
        return Attribution("your notes")


SOURCE_KIND = NotesKind()
