"""What every input must satisfy before it reaches SQLite, whichever surface it came from.

The REST API, MCP, the web UI and the CLI all call the Context, so the rules live here and the
Context applies them once (``checked_text`` on its methods). Each rule exists because hostile
input turns into a 500 or a traceback without it:

* a lone surrogate (JSON ``"\\ud800"``, or invalid UTF-8 in argv, which Python decodes with
  ``surrogateescape``) cannot be encoded for SQLite: refused with the field's name;
* an integer beyond SQLite's 64-bit range raises OverflowError when bound: an id that large
  names nothing (404), an offset that large is refused (400);
* a very long lookup text costs CPU in the "did you mean" search (1.3 s for 50 KB): refused
  past ``MAX_TEXT_CHARS``, the same limit as a search query.
"""

from __future__ import annotations

import functools
import inspect
import re
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from pydantic import BaseModel

from chiezo.core.errors import BadQuery, NotFound

MAX_SQL_INT = 2**63 - 1  # SQLite's INTEGER range; Python ints beyond it cannot be bound
MAX_OFFSET = 1_000_000  # an index range skips entries without reading rows; deeper is no real page
MAX_TEXT_CHARS = 1000  # titles, keys, prefixes, tag and attribute values (a query's limit too)

_SURROGATE = re.compile("[\ud800-\udfff]")

F = TypeVar("F", bound=Callable[..., Any])


def check_unicode(value: str, what: str) -> str:
    """``value`` unchanged, or a 400 when it holds a lone surrogate (not valid Unicode)."""
    if _SURROGATE.search(value):
        raise BadQuery(
            f"{what} is not valid Unicode (it contains a lone surrogate)",
            hint="send UTF-8 text; invalid bytes or unpaired \\ud800-\\udfff escapes are refused",
        )
    return value


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _strings(key)
            yield from _strings(item)


def checked_text(method: F) -> F:
    """Refuse a call whose text arguments (also inside lists and dicts) are not valid Unicode,
    naming the argument: one rule for every surface's input."""

    signature = inspect.signature(method)

    @functools.wraps(method)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        named = signature.bind_partial(*args, **kwargs).arguments
        for name, value in named.items():
            # a request model (ops/requests.py): each field by its own name
            fields = dict(value) if isinstance(value, BaseModel) else {name: value}
            for field, item in fields.items():
                for text in _strings(item):
                    check_unicode(text, field)
        return method(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def check_id(value: int, what: str) -> int:
    """An id outside SQLite's integer range names nothing: 404, not an OverflowError."""
    if not 0 <= value <= MAX_SQL_INT:
        raise NotFound(f"there is no {what} {value}")
    return value


def check_offset(offset: int) -> int:
    if offset < 0:
        raise BadQuery(f"offset must not be negative, got {offset}")
    if offset > MAX_OFFSET:
        raise BadQuery(f"offset may not exceed {MAX_OFFSET:,} (got {offset:,})")
    return offset


def check_length(value: str | None, what: str, limit: int = MAX_TEXT_CHARS) -> str | None:
    if value is not None and len(value) > limit:
        raise BadQuery(
            f"{what} is {len(value):,} characters long; the limit is {limit:,}",
            hint="a title, key, prefix or value is a short text",
        )
    return value
