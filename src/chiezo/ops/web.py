"""The web search of the answer layer, configured or off (answer/websearch.py is its client).

The library never goes out: only what answers — the agent's and MCP's ``web_search`` tool,
rag's no-basis path when the person turned it on — may ask a web search, and only the one the
owner configured (``CHIEZO_WEB_SEARCH``). Whatever comes back is a reference of its own kind:
source ``web``, its URL, titles and snippets only, never mixed with the library's documents.
"""

from __future__ import annotations

import functools
from typing import Any

from chiezo.answer.websearch import WEB, WebResult, WebSearch
from chiezo.core.config import Settings
from chiezo.core.errors import WebSearchOff
from chiezo.core.validation import checked_text
from chiezo.ops.context import Context
from chiezo.ops.requests import WebSearchRequest

# What a web result is, said with it: a model (and a person) must not take it for the library.
SAID = "from the web, not the library: titles and snippets of pages, unchecked"
STATE = "web"  # the folder under the data directory where the calls' interval is kept
TURN_ON = "set CHIEZO_WEB_SEARCH=searxng:URL (or brave: with CHIEZO_WEB_SEARCH_KEY)"


def configured(settings: Settings) -> WebSearch | None:
    """The engine the settings name, None when web search is off (a ConfigError when they
    name none: ``chiezo doctor`` and the server's start say which)."""
    return _engine(settings.web_search, settings.web_search_key, settings.web_search_interval)


@functools.lru_cache(maxsize=8)
def _engine(setting: str | None, key: str | None, interval: float) -> WebSearch | None:
    return WebSearch.parse(setting, key, interval)


def results(settings: Settings, query: str, limit: int) -> list[WebResult]:
    """Up to ``limit`` results of the configured engine for ``query``: ``WebSearchOff`` when
    web search is off (never sent anywhere then)."""
    engine = configured(settings)
    if engine is None:
        raise WebSearchOff("web search is off", hint=TURN_ON)
    state = settings.data_dir / STATE
    state.mkdir(parents=True, exist_ok=True)
    return engine.search(query, limit=limit, deadline=settings.query_timeout + 3, state_dir=state)


@checked_text  # a lone surrogate cannot be sent (urlencode): a 400 naming the field, not a bug
def search(ctx: Context, request: WebSearchRequest) -> dict[str, Any]:
    """The ``web_search`` tool: results as hits of source ``web``, said to be from the web."""
    found = results(ctx.settings, request.query, request.limit)
    return {
        "source": WEB,
        "about": SAID,
        "hits": [{"source": WEB, **r.to_dict()} for r in found],
    }
