"""The faces of the operations: the command line (cli/), the REST API (rest/), MCP (mcp/) and
the web UI (web/). Each derives its parameters from ops/requests.py and ops/registry.py."""
