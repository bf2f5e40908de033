"""The operating operations: what the library holds (``sources``), what it was built from and
the credentials kept for live sources, warming it before the first query, and whether a
model answers (``llm_status``)."""

from __future__ import annotations

from typing import Any

from chiezo.core.addresses import Credentials, credentials_under
from chiezo.core.errors import ChiezoError
from chiezo.ops.context import Context
from chiezo.ops.requests import SourcesRequest


def sources(ctx: Context, request: SourcesRequest | None = None) -> list[dict[str, Any]]:
    """Every source: kind, language, documents, build time, schema version, attributes, input
    identity (one that does not open says why, and that it needs a rebuild)."""
    return [info.to_dict() for info in ctx.library.infos()]


def input_paths(ctx: Context) -> list[str]:
    """The folders and files the sources here were built from (their recorded inputs)."""
    found = []
    for info in ctx.library.infos():
        found += [info.input.get("path"), *(info.input.get("paths") or [])]
    return [p for p in found if isinstance(p, str) and p]


def credentials(ctx: Context) -> list[Credentials]:
    """The credentials kept for the servers live sources ask (core/addresses.py)."""
    return credentials_under(ctx.settings.corpus_dir)


def warm(ctx: Context) -> dict[str, float]:
    """Warm every source (``Source.warm``: its embedding model, vector index and rank
    vector), so the first queries after start are as fast as the rest. Not the whole files:
    the server starts answering only after this, and reading gigabytes of generations would
    hold it up for what the page cache fills on first use. Returns seconds per source."""
    spent: dict[str, float] = {}
    for src in ctx.library.sources():
        try:
            spent[src.name] = round(src.warm(read_file=False), 3)
        except ChiezoError:
            continue  # reported on first use; a missing model must not stop the server
    return spent


def llm_status(ctx: Context) -> dict[str, Any]:
    """Is answering on, and does each configured endpoint answer with the model? (The web
    UI's status line and ``chiezo doctor`` both read this.)"""
    client = ctx.llm()
    if client is None:
        return {"configured": False, "model": None, "endpoints": []}
    checked = [client.check(endpoint) for endpoint in client.endpoints]
    usable = next((c for c in checked if c["ok"]), None)
    return {
        "configured": True,
        "model": (usable or {}).get("model") or ctx.settings.llm_model,
        "endpoints": checked,
    }
