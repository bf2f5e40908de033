"""The HTTP surface: REST API under /v1, MCP at /mcp, in one FastAPI app (``create_app``)."""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    # Imported on first use, so that api.patterns (which the request models state, and the
    # service imports) does not pull in the whole app and its import of the service.
    if name == "create_app":
        from chiezo.surfaces.rest.app import create_app

        return create_app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
