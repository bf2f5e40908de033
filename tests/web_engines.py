"""Scripted web search engines on 127.0.0.1 for the tests: each GET answered by a function of
its path, every request kept (``asked``) — the real client path, asked over a socket."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest


@dataclass
class Reply:
    status: int = 200
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)
    trickle: float = 0.0  # seconds between the body's bytes


@dataclass
class Asked:
    path: str
    headers: dict[str, str]
    at: float  # time.monotonic()

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.path).query)


class QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        pass  # a client that hung up on a trickle or a cap, as it should


class Engine:
    """A search engine on 127.0.0.1 answering each GET as ``reply(path) -> Reply``;
    ``asked``: every request it received."""

    def __init__(self, reply: Callable[[str], Reply]):
        self.reply = reply
        self.asked: list[Asked] = []
        engine = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do_GET(self):  # noqa: N802 - http.server's naming
                engine.asked.append(Asked(self.path, dict(self.headers), time.monotonic()))
                answer = engine.reply(self.path)
                self.send_response(answer.status)
                self.send_header("Content-Length", str(len(answer.body)))
                for name, value in answer.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if not answer.trickle:
                    self.wfile.write(answer.body)
                    return
                for i in range(len(answer.body)):
                    self.wfile.write(answer.body[i : i + 1])
                    self.wfile.flush()
                    time.sleep(answer.trickle)

        self.server = QuietServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def web_engine():
    engines: list[Engine] = []

    def start(reply: Callable[[str], Reply]) -> Engine:
        engines.append(Engine(reply))
        return engines[-1]

    yield start
    for engine in engines:
        engine.close()


def answer(data: object, status: int = 200) -> Callable[[str], Reply]:
    body = json.dumps(data).encode()
    return lambda path: Reply(status, body, {"Content-Type": "application/json"})
