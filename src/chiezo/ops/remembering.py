"""The notes operations — remember, recall, update, forget, and one note by id — over the one
writable source (ops/notes.py keeps it durable)."""

from __future__ import annotations

from typing import Any

from chiezo.core.errors import NotFound
from chiezo.core.query import MAX_QUERY_CHARS
from chiezo.core.validation import check_id, check_length, checked_text
from chiezo.ops import notes
from chiezo.ops.context import Context
from chiezo.ops.requests import (
    ForgetRequest,
    RecallRequest,
    RememberRequest,
    UpdateRequest,
)


@checked_text
def remember(ctx: Context, request: RememberRequest) -> dict[str, Any]:
    note_id = ctx.notes.remember(request.text, title=request.title, tags=request.tags)
    return note(ctx, note_id)


def note(ctx: Context, note_id: int, *, max_chars: int | None = None) -> dict[str, Any]:
    """One note by id, its text cut to ``max_chars``."""
    check_id(note_id, "note")
    src, deadline = ctx.read(ctx.notes_source(), "note")
    with deadline:
        found = notes.note_row(src.conn, note_id, max_chars)
    if found is None:
        raise NotFound(f"there is no note {note_id}")
    return found


@checked_text
def recall(ctx: Context, request: RecallRequest) -> dict[str, Any]:
    # limit, offset and max_chars are within the request's bounds (ops/requests.py); the
    # query's length is only stated there, and checked here with its own reason
    check_length(request.q, "the query", MAX_QUERY_CHARS)
    src, deadline = ctx.read(ctx.notes_source(), "recall")
    with deadline:
        return notes.recall(
            src.conn,
            q=request.q,
            since=request.since,
            until=request.until,
            tag=request.tag,
            limit=request.limit,
            offset=request.offset,
            max_chars=request.max_chars,
        )


@checked_text
def update(ctx: Context, request: UpdateRequest) -> dict[str, Any]:
    """Change the fields of a note given (``None``: unchanged)."""
    check_id(request.note_id, "note")
    ctx.notes.update(request.note_id, text=request.text, title=request.title, tags=request.tags)
    return note(ctx, request.note_id)


def forget(ctx: Context, request: ForgetRequest) -> dict[str, Any]:
    ctx.notes.forget(check_id(request.note_id, "note"))
    return {"deleted": request.note_id}
