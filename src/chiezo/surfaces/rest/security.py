"""Who may do what, decided by where the server listens and by the Host a request names.

* **Host (every route, every binding)**: a request naming a host by a *name* is answered only
  when that name is a loopback name (``localhost``), the name given to ``--host``, this
  machine's own hostname (when serving beyond loopback) or in ``CHIEZO_ALLOWED_HOSTS``;
  otherwise 421. A Host that is an IP address is always accepted. This is the DNS-rebinding
  defence: a page from ``evil.example`` whose name is re-pointed at 127.0.0.1 reaches this
  server with ``Host: evil.example`` (the browser sends the name of the page's own origin),
  so Origin and Host agree and the same-site check alone would let it write notes, start
  rebuilds and read every note. A browser sends an IP Host only for a page loaded from that
  IP, which no DNS answer can re-point. Checking every route, not only the writes, also keeps
  such a page from reading the user's own documents. A Host that is not one ``host[:port]`` —
  two Host headers, or a userinfo-like ``localhost:42@evil.example`` that a lax reading takes
  for ``localhost`` — is no browser's and is refused (400) before its name is read.
* Loopback (the default): everything is open to local programs, unless ``CHIEZO_TOKEN`` is set,
  in which case writes need it too.
* Beyond loopback (``--host 0.0.0.0`` or an address): writes — REST note endpoints, jobs and the
  MCP endpoint, which carries the write tools — need ``Authorization: Bearer $CHIEZO_TOKEN``.
  With no token configured, REST writes are refused and the MCP server is built without write
  tools.
* A write (and any ``/mcp`` request) whose browser ``Origin`` is another site is refused (403)
  whatever the token: a page on the web must not be able to rebuild sources or write notes
  through a local browser (forms and plain POSTs cross origins without a preflight).
"""

from __future__ import annotations

import hmac
import ipaddress
import re
import socket
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlsplit

from fastapi import Request
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from chiezo.core.config import is_loopback
from chiezo.core.errors import Forbidden, Unauthorized
from chiezo.surfaces.rest.disclosure import on_this_machine
from chiezo.surfaces.rest.error_responses import error_response

if TYPE_CHECKING:  # importing mcp costs ~50 MB: the CLI's supervisor process never needs it
    from mcp.server.transport_security import TransportSecuritySettings


@dataclass(frozen=True)
class Security:
    bind_host: str
    token: str | None
    allowed_hosts: tuple[str, ...] = ()

    @property
    def loopback(self) -> bool:
        return is_loopback(self.bind_host)

    @property
    def writes_enabled(self) -> bool:
        return self.loopback or bool(self.token)

    @property
    def token_required(self) -> bool:
        return bool(self.token)

    def check_write(self, request: Request) -> None:
        origin = request.headers.get("origin")
        if origin is not None and not self.same_site(origin, request.headers.get("host", "")):
            raise Forbidden(
                f"a write from another site ({origin}) is refused",
                hint="write from Chiezo's own pages, the CLI, or a client that sends no Origin",
            )
        if not self.writes_enabled:
            raise Forbidden(
                "writes are disabled: the server listens beyond loopback and no token is set",
                hint="set CHIEZO_TOKEN and send Authorization: Bearer <token>",
            )
        if self.token_required and not self.authorized(request.headers.get("authorization")):
            raise Unauthorized(
                "this endpoint needs Authorization: Bearer <CHIEZO_TOKEN>",
                hint="send the token configured in CHIEZO_TOKEN",
            )

    def may_write(self, request: Request) -> bool:
        """Whether ``request`` would be allowed a write (for tools offered on its behalf)."""
        try:
            self.check_write(request)
        except (Forbidden, Unauthorized):
            return False
        return True

    def same_site(self, origin: str, host: str) -> bool:
        """The Origin names the host the request was sent to (or a configured allowed host)."""
        netloc = urlsplit(origin).netloc.lower()
        if not netloc:
            return False
        return netloc == host.lower() or self._configured(netloc)

    def host_allowed(self, host: str) -> bool:
        """Whether a request with this Host header is answered (see the module's first rule)."""
        if not host:
            return True  # HTTP/1.0 and raw clients; every browser sends a Host
        if not well_formed_host(host):
            return False
        name = _name_of(host)
        if _is_ip(name) or name == "localhost" or name.endswith(".localhost"):
            return True  # browsers resolve *.localhost to loopback themselves, never by DNS
        return name in self._own_names or self._configured(host.lower())

    @cached_property
    def _own_names(self) -> frozenset[str]:
        names = set()
        if not _is_ip(self.bind_host.strip("[]")):
            names.add(self.bind_host.lower())  # --host myhost.lan
        if not self.loopback:  # a LAN server is reached by this machine's own name
            hostname = socket.gethostname().lower()
            names |= {hostname, hostname + ".local"}
        return frozenset(names)

    def _configured(self, netloc: str) -> bool:
        """``netloc`` (host[:port]) matches CHIEZO_ALLOWED_HOSTS: ``name`` or ``name:*`` for
        any port, ``name:port`` for one."""
        name = _name_of(netloc)
        for allowed in (a.lower() for a in self.allowed_hosts):
            if allowed.endswith(":*"):
                allowed = allowed[:-2]
            if netloc == allowed or (":" not in allowed.strip("[]") and name == _name_of(allowed)):
                return True
        return False

    def location_refusal(self, scope: Scope) -> JSONResponse | None:
        """A current location (``location=``, a chat's ``location``) is the person's
        whereabouts: taken from this machine; from beyond it only with the token (none set:
        never), and never from another site's page."""
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or []}
        origin, host = headers.get("origin"), headers.get("host", "")
        if origin is not None and not self.same_site(origin, host):
            return error_response(403, f"a location from another site ({origin}) is refused")
        if on_this_machine(scope):
            return None
        if not self.token:
            return error_response(
                403,
                "a location is taken from beyond this machine only when the server has a token",
                hint="set CHIEZO_TOKEN and send Authorization: Bearer <token>",
            )
        if not self.authorized(headers.get("authorization")):
            return error_response(
                401,
                "a location from beyond this machine needs Authorization: Bearer <CHIEZO_TOKEN>",
                hint="send the token configured in CHIEZO_TOKEN",
            )
        return None

    def authorized(self, header: str | None) -> bool:
        if not self.token:
            return True
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), self.token)

    def transport_security(self) -> TransportSecuritySettings:
        """The MCP library's own Host/Origin check is off: HostGuard applies this module's one
        rule to /mcp and every other route (the library's list would refuse a LAN client that
        names the server by its IP address)."""
        from mcp.server.transport_security import TransportSecuritySettings

        return TransportSecuritySettings(enable_dns_rebinding_protection=False)


# host[:port] (RFC 9110 §7.2): a registered name (the characters DNS names and browsers use), an
# IPv4 address (a name of digits and dots) or a bracketed IPv6 address; the port digits only.
_HOST = re.compile(r"(?:\[(?P<ipv6>[0-9a-f:.]+)\]|[a-z0-9_.-]+)(?::[0-9]{0,5})?", re.IGNORECASE)


def _names_location(scope: Scope) -> bool:
    """The query string carries a current location (``location=``)."""
    query = scope.get("query_string") or b""
    return any(name == "location" for name, _ in parse_qsl(query.decode("latin-1")))


def well_formed_host(host: str) -> bool:
    """Whether a Host header is one ``host[:port]``: no userinfo (``localhost:42@evil``), no
    second port, nothing a browser would not send."""
    found = _HOST.fullmatch(host)
    if found is None:
        return False
    return found["ipv6"] is None or (":" in found["ipv6"] and _is_ip(found["ipv6"]))


def host_problem(hosts: list[str]) -> str | None:
    """Why the Host header lines of a request name no one host, or None. Two of them are
    refused even when they agree: components that read the first and those that read the last
    would otherwise each see their own."""
    if len(hosts) > 1:
        return f"a request has one Host header; this one has {len(hosts)}"
    if hosts and hosts[0] and not well_formed_host(hosts[0]):
        shown = hosts[0] if len(hosts[0]) <= 100 else hosts[0][:100] + "…"
        return f"the Host header {shown!r} is not a host name or address with an optional port"
    return None


def _name_of(netloc: str) -> str:
    """``Host`` header → host name, lowercased, without port, brackets or a final dot."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")] if "]" in netloc else netloc[1:]
    if netloc.count(":") == 1:
        netloc = netloc.split(":", 1)[0]
    return netloc.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostGuard:
    """ASGI middleware in front of every route: refuses a Host that is not one host[:port]
    (400), foreign Host names (421) and, on ``/mcp`` (whose tools write and read notes), a
    browser Origin from another site (403)."""

    def __init__(self, app: ASGIApp, security: Security) -> None:
        self.app, self.security = app, security

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        refusal = self._refusal(scope)
        if refusal is None:
            await self.app(scope, receive, send)
        elif scope["type"] == "http":
            await refusal(scope, receive, send)
        else:  # a websocket: closed before it is accepted
            await send({"type": "websocket.close", "code": 1008})

    def _refusal(self, scope: Scope) -> JSONResponse | None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope.get("headers") or []}
        hosts = [v.decode("latin-1") for k, v in scope.get("headers") or [] if k == b"host"]
        problem = host_problem(hosts)
        if problem is not None:
            return error_response(400, problem, hint="send one Host: name[:port], as browsers do")
        host, origin = (hosts or [""])[0], headers.get("origin")
        if not self.security.host_allowed(host):
            return error_response(
                421,
                f"this server does not answer to the host name {_name_of(host)!r}",
                hint="a page under another name may be trying to reach it (DNS rebinding); if "
                "clients really use this name, add it to CHIEZO_ALLOWED_HOSTS",
            )
        if _names_location(scope):
            refused = self.security.location_refusal(scope)
            if refused is not None:
                return refused
        mcp = scope["path"] == "/mcp" or scope["path"].startswith("/mcp/")
        if mcp and origin is not None and not self.security.same_site(origin, host):
            return error_response(
                403,
                f"a request from another site ({origin}) is refused",
                hint="MCP clients send no Origin; a web page may not use this endpoint",
            )
        return None
