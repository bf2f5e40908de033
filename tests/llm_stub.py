"""A small scripted OpenAI-compatible server on loopback — the one allowed stand-in.

Real HTTP, so the real client code runs. ``reply(body) -> dict`` decides each answer:
``{"content": "..."}``, ``{"tool_calls": [...]}``, ``{"status": 500}``, ``{"delay": 2.0, ...}``,
``{"chunk_delay": 0.1, ...}`` (a pause after each streamed piece), ``{"drop_after": 2, ...}``
(the connection closes after that many streamed pieces, with no ``[DONE]``: a server that dies
mid-answer);
every request body is kept in ``requests`` for assertions.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedLLM:
    def __init__(self, reply: Callable[[dict], dict] | None = None, models=("stub-model",)):
        self.reply = reply or (lambda body: {"content": "ok [1]"})
        self.models = list(models)
        self.requests: list[dict[str, Any]] = []
        self.sent: list[tuple[str, str | None]] = []  # (path and query, Authorization) of each
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def do_GET(self):
                stub.sent.append((self.path, self.headers.get("Authorization")))
                if self.path.split("?", 1)[0].rstrip("/").endswith("/models"):
                    self._json(
                        200,
                        {
                            "object": "list",
                            "data": [{"id": m, "object": "model"} for m in stub.models],
                        },
                    )
                else:
                    self._json(404, {"error": "not found"})

            def do_POST(self):
                stub.sent.append((self.path, self.headers.get("Authorization")))
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.requests.append(body)
                if body.get("model") and body["model"] not in stub.models:
                    self._json(404, {"error": {"message": f"model {body['model']} not found"}})
                    return
                answer = stub.reply(body)
                time.sleep(answer.get("delay", 0))
                if answer.get("status", 200) != 200:
                    self._json(answer["status"], {"error": {"message": "scripted failure"}})
                elif body.get("stream"):
                    self._stream(
                        answer.get("content", ""),
                        answer.get("chunk_delay", 0),
                        answer.get("drop_after"),
                    )
                else:
                    message = {"role": "assistant", "content": answer.get("content")}
                    if answer.get("tool_calls"):
                        message["tool_calls"] = answer["tool_calls"]
                    self._json(
                        200,
                        {
                            "id": "stub",
                            "object": "chat.completion",
                            "model": stub.models[0],
                            "choices": [
                                {
                                    "index": 0,
                                    "message": message,
                                    "finish_reason": "tool_calls"
                                    if answer.get("tool_calls")
                                    else "stop",
                                }
                            ],
                        },
                    )

            def _json(self, status, data):
                payload = json.dumps(data).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def _stream(self, text, chunk_delay=0.0, drop_after=None):
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.end_headers()
                for n, i in enumerate(range(0, len(text), 4)):
                    if n == drop_after:
                        return  # HTTP/1.0: the body ends where the connection closes
                    chunk = {"choices": [{"index": 0, "delta": {"content": text[i : i + 4]}}]}
                    self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.flush()
                    time.sleep(chunk_delay)
                self.wfile.write(b"data: [DONE]\n\n")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> ScriptedLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def tool_call(name: str, args: dict, call_id: str = "c1") -> dict:
    """A tool call as an OpenAI-compatible server sends it (arguments as a JSON string)."""
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
    }


def in_turns(*turns):
    """A ``reply`` giving ``turns`` in order (each a reply dict or a function of the request
    body); the last repeats."""
    state = {"i": 0}

    def reply(body):
        turn = turns[min(state["i"], len(turns) - 1)]
        state["i"] += 1
        return turn(body) if callable(turn) else turn

    return reply
