"""What a client may learn of this machine (SECURITY.md rule 3; issue #28).

* **Credentials, never.** An endpoint URL's user, password and query string are configuration,
  not status: ``/v1/llm``, the admin page and error messages said
  ``http://llmuser:s3cretpw@…?api_key=…`` to anyone who asked. Every response shows such a URL
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
import re
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit, urlunsplit

from chiezo.core.config import Settings, is_loopback

PROXY_HEADERS = (b"forwarded", b"x-forwarded-for", b"x-real-ip")
TEXT_TYPES = (b"application/json", b"text/", b"application/problem+json")
SECRETS_TTL_S = 5.0  # sources come and go while the server runs; their inputs are re-read
RAW_PATHS = ("/original",)  # a document's own file: never rewritten


def on_this_machine(scope) -> bool:
    """Whether the request comes from this machine and no proxy forwarded it."""
    client = scope.get("client") or ("", 0)
    if not is_loopback(client[0] or ""):
        return False
    return not any(name in PROXY_HEADERS for name, _ in scope.get("headers") or [])


def without_credentials(url: str) -> str:
    """``url`` without user and password, each query value ``***``."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:  # not a URL one can take apart: nothing of it is shown
        return "***"
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{port}" if port else "")
    query = "&".join(f"{k}=***" for k, _ in parse_qsl(parts.query, keep_blank_values=True))
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


class Secrets:
    """The strings of this machine a response may hold, each with what is shown instead:
    ``always`` (credentials) for every client, ``paths`` for a client elsewhere. Longest
    first, so a path inside the data folder is shown as ``DATA/…`` rather than ``~/…``."""

    def __init__(self, settings: Settings, input_paths: list[str]) -> None:
        credentials = _credentials(settings)
        named = {
            **_folder_names(input_paths),
            **_models(settings),
            str(Path.home()): "~",
            str(settings.notes_path.parent.resolve()): "NOTES",
            str(settings.data_dir.resolve()): "DATA",
        }
        self.always = Table(credentials)
        self.paths = Table(credentials + _forms(named))

    def table(self, local: bool) -> Table:
        return self.always if local else self.paths


def _credentials(settings: Settings) -> list[tuple[bytes, bytes]]:
    urls = [u.strip() for u in (settings.llm_url or "").split(",") if u.strip()]
    found = {u: without_credentials(u) for u in urls if without_credentials(u) != u}
    if settings.llm_key:
        found[settings.llm_key] = "***"
    return _forms(found)


def _folder_names(paths: list[str]) -> dict[str, str]:
    """A source's input shown by its name: ``…/manuals`` says which, not where."""
    return {p: "…/" + Path(p).name for p in paths if p and len(p) > 1 and p.startswith("/")}


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

    def __init__(self, app, settings: Settings, input_paths) -> None:
        self.app, self.settings, self.input_paths = app, settings, input_paths
        self._secrets: Secrets | None = None
        self._made = 0.0

    def secrets(self) -> Secrets:
        if self._secrets is None or time.monotonic() - self._made > SECRETS_TTL_S:
            self._secrets = Secrets(self.settings, self.input_paths())
            self._made = time.monotonic()
        return self._secrets

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"].endswith(RAW_PATHS):
            await self.app(scope, receive, send)
            return
        table = self.secrets().table(on_this_machine(scope))
        if not table:
            await self.app(scope, receive, send)
            return
        await self.app(scope, receive, _Scrubbing(send, table))


class _Scrubbing:
    """The ``send`` of one response: holds the start until the first body piece says whether
    the body is whole (scrubbed, its length set anew when that changed it) or a stream (each
    piece scrubbed on its own: an event stream sends whole events). A stream of declared
    length — a static file sent in pieces — is passed on as it is: it is none of this
    machine's strings, and its length must stay true."""

    def __init__(self, send, table: Table) -> None:
        self.send, self.table = send, table
        self.start: dict | None = None
        self.scrubbing = False

    async def __call__(self, message) -> None:
        if message["type"] == "http.response.start":
            headers = dict(message.get("headers") or [])
            self.scrubbing = headers.get(b"content-type", b"").startswith(TEXT_TYPES)
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
            message = {**message, "body": self.table.scrub(message.get("body", b""))}
        await self.send(message)

    async def _first(self, message: dict) -> dict:
        start, self.start = self.start, None
        assert start is not None  # called only while the response's start is held
        headers = start.get("headers") or []
        declared = any(k == b"content-length" for k, _ in headers)
        if message.get("more_body") and declared:
            self.scrubbing = False
            await self.send(start)
            return message
        body = message.get("body", b"")
        scrubbed = self.table.scrub(body)
        if scrubbed != body and declared:
            start = {
                **start,
                "headers": [(k, v) for k, v in headers if k != b"content-length"]
                + [(b"content-length", str(len(scrubbed)).encode())],
            }
        await self.send(start)
        return {**message, "body": scrubbed}
