"""What a client may learn of this machine (SECURITY.md rule 3).

* **Credentials, never.** An endpoint URL's user, password and query string are configuration,
  not status: left alone, ``/v1/llm``, the admin page and error messages would say
  ``http://llmuser:s3cretpw@…?api_key=…`` to anyone who asks. Every response shows such a URL
  as ``http://host:port/v1?api_key=***``.
* **Paths, only on this machine.** The data folder, a source's input folder, the notes
  database, a model's file: shown to a client on this machine (its peer address is loopback and
  no proxy forwarded the request — a reverse proxy on this machine makes every remote client
  look local, so ``X-Forwarded-For``, ``Forwarded`` or ``X-Real-IP`` mean "not local"). Anyone
  else reads ``DATA/corpus/…``, ``…/folder-name``, ``~/…`` and a model's name instead.

One seam, ``Disclosure`` (ASGI middleware), applies both to every response's text — JSON, pages,
event streams, errors and job logs alike — by replacing the few strings that are this
machine's (``Secrets``, found in one pass by ``Table``): a field added tomorrow is covered too. An original file
(``/doc/…/original``) is the user's own file and is served byte for byte.
"""

from __future__ import annotations

import html
import json
import os
import re
import time
from collections.abc import Callable
from pathlib import Path

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from chiezo.core.addresses import Address, Credentials
from chiezo.core.config import Settings, is_loopback

PROXY_HEADERS = (b"forwarded", b"x-forwarded-for", b"x-real-ip")
TEXT_TYPES = (b"application/json", b"text/", b"application/problem+json")
EVENT_STREAM = b"text/event-stream"
SECRETS_TTL_S = 5.0  # sources come and go while the server runs; their inputs are re-read
RAW_PATHS = ("/original",)  # a document's own file: never rewritten


def on_this_machine(scope: Scope) -> bool:
    """Whether the request comes from this machine and no proxy forwarded it."""
    client = scope.get("client") or ("", 0)
    if not is_loopback(client[0] or ""):
        return False
    return not any(name in PROXY_HEADERS for name, _ in scope.get("headers") or [])


class Secrets:
    """The strings of this machine a response may hold, each with what is shown instead:
    ``always`` (credentials) for every client, ``paths`` for a client elsewhere. Longest
    first, so a path inside the data folder is shown as ``DATA/…`` rather than ``~/…``.

    Credentials are kept apart from every address where it is given (core/addresses.py), so
    no response should hold one; these are hidden all the same, wherever a server echoes
    one back or a record written by an older version still holds one."""

    def __init__(
        self, settings: Settings, input_paths: list[str], credentials: list[Credentials]
    ) -> None:
        hidden = _credentials(settings, credentials)
        named = {
            **_folder_names(input_paths),
            **_models(settings),
            **_both_forms(Path.home(), "~"),
            **_both_forms(settings.notes_path.parent, "NOTES"),
            **_both_forms(settings.data_dir, "DATA"),
        }
        self.always = Table(hidden)
        self.paths = Table(hidden + _forms(named))
        # what a stream of pieces must not cut in two: the plain forms (stream_text below)
        self.plain = {True: _plain(hidden), False: _plain(hidden + _forms(named))}

    def table(self, local: bool) -> Table:
        return self.always if local else self.paths


def _credentials(settings: Settings, kept: list[Credentials]) -> list[tuple[bytes, bytes]]:
    found: dict[str, str] = {}
    for given in (settings.llm_url or "").split(","):
        if given.strip():
            found.update(Address.parse(given).hidden(given))
    for credentials in kept:
        found.update(credentials.hidden())
    if settings.llm_key:
        found[settings.llm_key] = "***"
    return _forms(found)


def _both_forms(path: Path, shown: str) -> dict[str, str]:
    """A folder as given and as it resolves: a data folder reached through a symbolic link
    is named by both: hiding only the resolved form lets ``…/d1link/corpus/…`` reach a
    forwarded client."""
    return {os.path.abspath(path): shown, str(path.resolve()): shown}


def _folder_names(paths: list[str]) -> dict[str, str]:
    """A source's input shown by its name: ``…/manuals`` says which, not where — as
    recorded, and as it resolves."""
    named = {}
    for p in paths:
        if p and len(p) > 1 and p.startswith("/"):
            named[p] = named[os.path.realpath(p)] = "…/" + Path(p).name
    return named


def _plain(pairs: list[tuple[bytes, bytes]]) -> list[str]:
    return sorted({secret.decode("utf-8", "replace") for secret, _ in pairs}, key=len)


def _models(settings: Settings) -> dict[str, str]:
    """A model given as a file (a .gguf path) shown by the name its label gives."""
    from chiezo.surfaces.web.formatting import model_label

    model = settings.llm_model or ""
    models = {model: model_label(model)} if "/" in model else {}
    for job_model in settings.job_models:  # onnx:/srv/models/e5-base → onnx:…/e5-base
        kind, sep, where = job_model.partition(":")
        if sep and where.startswith("/"):
            models[where] = "…/" + Path(where).name
    return models


def _forms(found: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """Each secret as it appears in a response — plain, in a JSON string, HTML-escaped, as a
    file:// URL — with what replaces it."""
    pairs: dict[bytes, bytes] = {}
    for secret, shown in found.items():
        if len(secret) < 2:
            continue
        forms = {
            secret: shown,
            json.dumps(secret)[1:-1]: json.dumps(shown)[1:-1],
            html.escape(secret): html.escape(shown),
        }
        if secret.startswith("/"):
            forms[Path(secret).as_uri()] = shown
        for form, replacement in forms.items():
            pairs[form.encode("utf-8")] = replacement.encode("utf-8")
    return list(pairs.items())


class Table:
    """Secrets and what shows instead, found in one pass. A secret ends where a name ends —
    ``/root`` is not replaced inside ``/rootfs`` — and the longest one at a place wins."""

    def __init__(self, pairs: list[tuple[bytes, bytes]]) -> None:
        self.shown = dict(pairs)
        longest_first = sorted(self.shown, key=len, reverse=True)
        alternatives = b"|".join(re.escape(secret) for secret in longest_first)
        name = rb"[\w.\-\x80-\xff]"  # a character of a file name, in UTF-8 bytes
        self.pattern = re.compile(
            rb"(?<!" + name + rb")(?:" + alternatives + rb")(?!" + name + rb")"
        )

    def __bool__(self) -> bool:
        return bool(self.shown)

    def scrub(self, data: bytes) -> bytes:
        return self.pattern.sub(lambda m: self.shown[m.group(0)], data) if self.shown else data


class Disclosure:
    """ASGI middleware: every text response passes through ``scrub`` with the table the
    client may see (nothing to do for a local client when no credential is configured)."""

    def __init__(
        self,
        app: ASGIApp,
        settings: Settings,
        input_paths: Callable[[], list[str]],
        credentials: Callable[[], list[Credentials]] = lambda: [],
    ) -> None:
        self.app, self.settings = app, settings
        self.input_paths, self.credentials = input_paths, credentials
        self._secrets: Secrets | None = None
        self._made = 0.0

    def secrets(self) -> Secrets:
        if self._secrets is None or time.monotonic() - self._made > SECRETS_TTL_S:
            self._secrets = Secrets(self.settings, self.input_paths(), self.credentials())
            self._made = time.monotonic()
        return self._secrets

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"].endswith(RAW_PATHS):
            await self.app(scope, receive, send)
            return
        secrets, local = self.secrets(), on_this_machine(scope)
        table = secrets.table(local)
        if not table:
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _Scrubbing(send, table, secrets.plain[local]))


class _Scrubbing:
    """The ``send`` of one response: holds the start until the first body piece says whether
    the body is whole (scrubbed, its length set anew when that changed it) or a stream. An
    event stream's answer text is scrubbed across its ``delta`` events (``_Deltas``); its
    other events are whole, each scrubbed on its own. A stream of declared length — a static
    file sent in pieces — is passed on as it is: it is none of this machine's strings, and its
    length must stay true."""

    def __init__(self, send: Send, table: Table, plain: list[str]) -> None:
        self.send, self.table, self.plain = send, table, plain
        self.start: Message | None = None
        self.scrubbing = False
        self.deltas: _Deltas | None = None

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers") or [])
            kind = headers.get(b"content-type", b"")
            self.scrubbing = kind.startswith(TEXT_TYPES)
            if kind.startswith(EVENT_STREAM):
                self.deltas = _Deltas(self.table, self.plain)
            if self.scrubbing:
                self.start = message  # sent with the first piece of the body
            else:
                await self.send(message)
            return
        if message["type"] != "http.response.body" or not self.scrubbing:
            await self.send(message)
            return
        if self.start is not None:
            message = await self._first(message)
        else:
            message = {**message, "body": self._scrubbed(message)}
        await self.send(message)

    def _scrubbed(self, message: Message) -> bytes:
        body = message.get("body", b"")
        if self.deltas is None:
            return self.table.scrub(body)
        return self.deltas.piece(body, last=not message.get("more_body"))

    async def _first(self, message: Message) -> Message:
        start, self.start = self.start, None
        assert start is not None  # called only while the response's start is held
        headers = start.get("headers") or []
        declared = any(k == b"content-length" for k, _ in headers)
        if message.get("more_body") and declared:
            self.scrubbing = False
            await self.send(start)
            return message
        body = message.get("body", b"")
        scrubbed = self._scrubbed(message)
        if scrubbed != body and declared:
            start = {
                **start,
                "headers": [(k, v) for k, v in headers if k != b"content-length"]
                + [(b"content-length", str(len(scrubbed)).encode())],
            }
        await self.send(start)
        return {**message, "body": scrubbed}


class _Deltas:
    """An answer streamed as ``delta`` events, scrubbed as the one text it is. Each piece was
    scrubbed on its own would let a path cut across 4-character deltas reach a client
    elsewhere whole. The text that could be the start of a secret is held back
    until the next delta shows whether it is one; any other event, and the stream's end, first
    sends what is held."""

    def __init__(self, table: Table, plain: list[str]) -> None:
        self.table, self.plain = table, plain
        self.held = ""
        self.fields: dict = {}

    def piece(self, body: bytes, *, last: bool) -> bytes:
        fields = _delta_fields(body)
        if fields is None:
            out = self._flush() + self.table.scrub(body)
        else:
            self.held += fields.pop("text")
            self.fields = fields
            cut = held_from(self.held, self.plain)
            out, self.held = self._event(self.held[:cut]), self.held[cut:]
        return out + self._flush() if last else out

    def _flush(self) -> bytes:
        out, self.held = self._event(self.held), ""
        return out

    def _event(self, text: str) -> bytes:
        if not text:
            return b""
        scrubbed = self.table.scrub(text.encode("utf-8")).decode("utf-8", "replace")
        data = json.dumps({"text": scrubbed, **self.fields}, ensure_ascii=False)
        return f"event: delta\ndata: {data}\n\n".encode()


def _delta_fields(body: bytes) -> dict | None:
    """The data of a ``delta`` event (the whole of ``body``), when it carries text."""
    if not body.startswith(b"event: delta\ndata: "):
        return None
    try:
        data = json.loads(body[len(b"event: delta\ndata: ") :])
    except ValueError:
        return None
    return data if isinstance(data, dict) and isinstance(data.get("text"), str) else None


def held_from(text: str, secrets: list[str]) -> int:
    """Where the part of ``text`` that must wait for more begins: the longest end of it that
    begins a secret (a whole one too — what follows decides whether it ends there), moved
    back before any secret that would run across that place."""
    cut = len(text)
    for secret in secrets:
        for k in range(min(len(secret), len(text)), 0, -1):
            if text.endswith(secret[:k]):
                cut = min(cut, len(text) - k)
                break
    moved = True
    while moved:
        moved = False
        for secret in secrets:
            at = text.find(secret, max(cut - len(secret) + 1, 0))
            if -1 < at < cut < at + len(secret):
                cut, moved = at, True
    return cut
