"""Who may do what, decided by where the server listens.

* Loopback (the default): everything is open to local programs, unless ``CHIEZO_TOKEN`` is set,
  in which case writes need it too.
* Beyond loopback (``--host 0.0.0.0`` or an address): writes — REST note endpoints and the MCP
  endpoint, which carries the write tools — need ``Authorization: Bearer $CHIEZO_TOKEN``. With no
  token configured, REST writes are refused and the MCP server is built without write tools.
* A write whose browser ``Origin`` is another site is refused (403) whatever the token: a page
  on the web must not be able to rebuild sources or write notes through a local browser
  (forms and plain POSTs cross origins without a preflight).
* The MCP endpoint checks the Host header against the loopback names, the bound address and
  ``CHIEZO_ALLOWED_HOSTS`` (DNS-rebinding protection): a web page cannot make a browser talk
  to it through a hostile DNS name.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from fastapi import Request

from ..config import is_loopback
from ..errors import ChiezoError

if TYPE_CHECKING:  # importing mcp costs ~50 MB: the CLI's supervisor process never needs it
    from mcp.server.transport_security import TransportSecuritySettings

LOOPBACK_HOSTS = ["127.0.0.1:*", "localhost:*", "[::1]:*"]


class Unauthorized(ChiezoError):
    status = 401
    exit_code = 2


class Forbidden(ChiezoError):
    status = 403
    exit_code = 2


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

    def same_site(self, origin: str, host: str) -> bool:
        """The Origin names the host the request was sent to (or a configured allowed host)."""
        netloc = urlsplit(origin).netloc.lower()
        if not netloc:
            return False
        if netloc == host.lower():
            return True
        name = netloc.rsplit(":", 1)[0] if not netloc.endswith("]") else netloc
        return any(netloc == allowed or (allowed.endswith(":*") and name == allowed[:-2])
                   for allowed in (a.lower() for a in self.allowed_hosts))  # fmt: skip

    def authorized(self, header: str | None) -> bool:
        if not self.token:
            return True
        scheme, _, value = (header or "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(value.strip(), self.token)

    def transport_security(self) -> TransportSecuritySettings:
        from mcp.server.transport_security import TransportSecuritySettings

        hosts = list(LOOPBACK_HOSTS)
        if not self.loopback and self.bind_host not in ("0.0.0.0", "::"):
            name = f"[{self.bind_host}]" if ":" in self.bind_host else self.bind_host
            hosts += [f"{name}:*", name]
        hosts += list(self.allowed_hosts)
        origins = [f"http://{h}" for h in hosts] + [f"https://{h}" for h in hosts]
        return TransportSecuritySettings(
            enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
        )
