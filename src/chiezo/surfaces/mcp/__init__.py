"""The MCP server (server.py) and desktop clients' configuration (clients.py)."""
