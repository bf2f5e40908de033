"""A condition a source cannot meet because it lacks what the condition needs (coordinates,
an attribute, admin areas): a 400 that the operations complete with the sources that do have
it (``sources_with_it``), where the whole library is at hand (ops/context.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from chiezo.core.errors import BadQuery
from chiezo.store.library import Source

# what a source must have, asked of each source that opens
Having = Callable[[Source], bool]


def with_points(src: Source) -> bool:
    return bool(src.info().points)


def with_attribute(name: str) -> Having:
    return lambda src: name in src.attributes


class SourceLacks(BadQuery):
    """BadQuery naming what the source lacks as ``has``: the test another source passes."""

    def __init__(self, message: str, *, has: Having, **extras: Any):
        super().__init__(message, **extras)
        self.has = has
