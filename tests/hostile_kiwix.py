"""A kiwix-serve as it should not be, on loopback: it answers each GET as a test script says —
with any status, type and body, slowly, one header line at a time, behind a password — and
records what it was asked (path and query, the Authorization header). The real kiwix-serve
(tests/test_kiwix.py) shows what a good server does; this one, what a hostile one can."""

from __future__ import annotations

import base64
import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CATALOG = (
    b'<?xml version="1.0"?><feed xmlns="http://www.w3.org/2005/Atom"><entry>'
    b"<name>shop</name><title>Shop</title><language>eng</language>"
    b"<articleCount>2</articleCount>"
    b'<link type="text/html" href="/shop"/></entry></feed>'
)
BOOK, SOURCE = "shop", "kiwix_shop"


def feed(items: list[tuple[str, str, str]], total: str | None = None) -> bytes:
    """An OpenSearch results feed of (path, title, passage), as kiwix-serve 3.3 writes it."""
    body = "".join(
        f"<item><title>{title}</title><link>/{BOOK}/{path}</link>"
        f"<description>{passage}</description></item>"
        for path, title, passage in items
    )
    counted = str(len(items)) if total is None else total
    return (
        '<rss xmlns:opensearch="http://a9.com/-/spec/opensearch/1.1/"><channel>'
        f"<opensearch:totalResults>{counted}</opensearch:totalResults>{body}</channel></rss>"
    ).encode()


def article(title: str, text: str) -> bytes:
    return f"<html><head><title>{title}</title></head><body><p>{text}</p></body></html>".encode()


@dataclass
class Reply:
    status: int = 200
    type: str = "application/xml"
    body: bytes = b""
    delay: float = 0.0  # before anything is sent
    trickle: float = 0.0  # between header lines: a head that never quite stops coming
    headers: dict[str, str] = field(default_factory=dict)


def good(path: str) -> Reply:
    """What a kiwix-serve with one book, "shop", of two articles answers."""
    if path.startswith("/catalog"):
        return Reply(type="application/atom+xml", body=CATALOG)
    if path.startswith("/suggest"):
        return Reply(type="application/json", body=b"[]")
    if path.startswith("/search"):
        return Reply(body=feed([("A/Offer", "Offer", "a <b>good</b> offer")]))
    if path.startswith("/raw/"):
        return Reply(type="text/html", body=article("Offer", "The offer is good."))
    return Reply(404, "text/plain", b"no")


class HostileKiwix:
    """``reply(path) -> Reply`` answers each GET; ``user``/``password``: what it asks for
    (401 otherwise). ``asked``: (path, Authorization) of every request."""

    def __init__(
        self,
        reply: Callable[[str], Reply] = good,
        *,
        user: str | None = None,
        password: str | None = None,
    ):
        self.reply = reply
        self.asked: list[tuple[str, str | None]] = []
        expected = None
        if user is not None:
            expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):
                said = self.headers.get("Authorization")
                server.asked.append((self.path, said))
                if expected is not None and said != expected:
                    answer = Reply(
                        401, "text/plain", b"who?", headers={"WWW-Authenticate": "Basic"}
                    )
                else:
                    answer = server.reply(self.path)
                # the client may give up: what the slow cases are about
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self._send(answer)

            def _send(self, answer: Reply) -> None:
                time.sleep(answer.delay)
                lines = [f"HTTP/1.1 {answer.status} X\r\n"]
                headers = {
                    "Content-Type": answer.type,
                    "Content-Length": str(len(answer.body)),
                    **answer.headers,
                }
                if answer.trickle:  # 400 header lines, one at a time
                    headers.update({f"X-Slow-{i}": "." for i in range(400)})
                lines += [f"{k}: {v}\r\n" for k, v in headers.items()] + ["\r\n"]
                for line in lines:
                    self.wfile.write(line.encode("latin-1"))
                    self.wfile.flush()
                    time.sleep(answer.trickle)
                self.wfile.write(answer.body)
                self.wfile.flush()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
