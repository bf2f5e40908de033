"""What a source's owner declared, at build time, that a request of it must say — read back from
the options its build recorded (the ``input`` of its meta table, store/build.py), for the
operations (search/where.py) to hold a request to.

``require_feature`` (``chiezo ingest places … --require-feature KEY``): a search or filter of
the source around a point must name a value of feature KEY — a 指定緊急避難場所 is designated
per disaster, so "the shelter nearest to me" means nothing until the disaster is said.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chiezo.store.library import Source

# the option field of the places kind (ingest/places.py PlaceOptions) whose value is read here
REQUIRE_FEATURE = "require_feature"


def required_feature(src: Source) -> str | None:
    """The feature key a search or filter of ``src`` around a point must name a value of
    (``災害種別``), or None when its build declared none.

    Read from the recorded options as they are, an imported source's too: unlike the paths of
    an input (store/source_info.py ``recorded_input``), a requirement only narrows what a
    request of the source answers, so a record made on another machine is kept."""
    options = _recorded_options(getattr(src, "meta", None) or {})
    value = options.get(REQUIRE_FEATURE)
    return value.strip() or None if isinstance(value, str) else None


def _recorded_options(meta: dict[str, str]) -> dict[str, Any]:
    try:
        recorded = json.loads(meta.get("input") or "{}")
    except ValueError:  # a meta table written by hand or by an older build
        return {}
    options = recorded.get("options") if isinstance(recorded, dict) else None
    return options if isinstance(options, dict) else {}
