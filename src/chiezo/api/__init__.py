"""The HTTP surface: REST API under /v1, MCP at /mcp, in one FastAPI app (``create_app``)."""

from .app import create_app

__all__ = ["create_app"]
