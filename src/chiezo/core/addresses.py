"""Addresses a user gives Chiezo — a model endpoint, a kiwix-serve — with their credentials
kept apart from them (SECURITY.md, "Every address you give").

An address typed as ``http://kuser:KSECRETPW@host:8090`` and recorded as typed would be shown
by every surface that shows where a source comes from: ``/v1/sources``, the admin page, job
plans, each live hit's ``url``, answers, 502 texts, MCP, ``chiezo logs`` and exported archives
would all carry the password. Masking each of those places would miss the next one. So an
address is taken apart where it enters: ``Address.url`` (scheme, host, port, path) is what is
recorded, shown and requested; the user and password (``Credentials``) and the query
(``params``, an ``?api_key=``) travel beside it and are added to each request only. A live
source keeps its server's credentials in a file of its own (``credentials``, 0600, in the
source's folder): never in a generation, so never exported, and removed with the source.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit, urlunsplit

CREDENTIALS_FILE = "credentials"  # in a live source's folder, beside its generations
# A password this long is hidden wherever a response holds it alone (defence in depth: it is
# never put there); a shorter one would also hide ordinary words ("data", "test") in answers.
LONE_SECRET_CHARS = 8


@dataclass(frozen=True)
class Credentials:
    """A user and password for an address: sent as HTTP Basic authentication, never shown."""

    username: str
    password: str

    def __repr__(self) -> str:  # a log line or a traceback that prints one shows nothing
        return "Credentials(***)"

    @property
    def auth(self) -> tuple[str, str]:
        return self.username, self.password

    def hidden(self) -> dict[str, str]:
        """Each form these credentials could take in a text, with what shows instead."""
        forms = {f"{self.username}:{self.password}@": ""}
        if self.password:
            forms[f":{self.password}@"] = "@"
            if len(self.password) >= LONE_SECRET_CHARS:
                forms[self.password] = "***"
        return {k: v for k, v in forms.items() if len(k) > 1}

    def to_json(self) -> dict[str, str]:
        return {"username": self.username, "password": self.password}


@dataclass(frozen=True)
class Address:
    """An address as given, taken apart: ``url`` has no user, password or query."""

    url: str
    credentials: Credentials | None = None
    params: tuple[tuple[str, str], ...] = ()  # the query, sent with every request

    def __str__(self) -> str:
        return self.url

    @classmethod
    def parse(cls, given: str) -> Address:
        """``given`` taken apart. A text that is not a URL one can take apart is kept whole
        as its ``url`` (a caller that needs a URL refuses it with its own message)."""
        try:
            parts = urlsplit(given.strip())
            host, port = parts.hostname or "", parts.port
        except ValueError:
            return cls(given.strip())
        if not parts.scheme or not parts.netloc:
            return cls(given.strip())
        credentials = None
        if parts.username is not None or parts.password is not None:
            credentials = Credentials(unquote(parts.username or ""), unquote(parts.password or ""))
        netloc = (f"[{host}]" if ":" in host else host) + (f":{port}" if port else "")
        url = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        params = tuple(parse_qsl(parts.query, keep_blank_values=True))
        return cls(url, credentials, params)

    def shown(self) -> str:
        """The address as a person may read it: the query's names, never its values."""
        if not self.params:
            return self.url
        return self.url + "?" + "&".join(f"{name}=***" for name, _ in self.params)

    def hidden(self, given: str) -> dict[str, str]:
        """What of ``given`` (the text this address was parsed from) no response may hold,
        with what shows instead."""
        forms: dict[str, str] = {}
        if given.strip() != self.url:
            forms[given.strip()] = self.shown()
        if self.credentials is not None:
            forms.update(self.credentials.hidden())
        for _, value in self.params:
            if len(value) >= LONE_SECRET_CHARS:
                forms[value] = "***"
        return forms


def has_credentials(text: str) -> bool:
    """Whether ``text`` is an address carrying a user or a password."""
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://[^/?#]*@", text.strip(), re.IGNORECASE))


# -- a live source's credentials, in its folder ----------------------------------------------------


def credentials_path(folder: Path) -> Path:
    return folder / CREDENTIALS_FILE


def save_credentials(folder: Path, credentials: Credentials) -> None:
    """Write ``credentials`` for the source in ``folder``: readable by this user only, and
    made whole before it is in place (a reader never sees half a file)."""
    path = credentials_path(folder)
    tmp = path.with_name(f".{CREDENTIALS_FILE}.{os.getpid()}")
    tmp.unlink(missing_ok=True)  # left by a write that died
    # a new file, never through a link someone left in its place, this user's alone
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        json.dump(credentials.to_json(), out)
    os.replace(tmp, path)


def load_credentials(folder: Path) -> Credentials | None:
    """The credentials kept for the source in ``folder``; None when there are none or the
    file is not one this program wrote."""
    with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
        data = json.loads(credentials_path(folder).read_text(encoding="utf-8"))
        username, password = data.get("username"), data.get("password")
        if isinstance(username, str) and isinstance(password, str):
            return Credentials(username, password)
    return None


def credentials_under(corpus: Path) -> list[Credentials]:
    """Every live source's credentials under ``corpus``: what responses must never hold."""
    found = []
    if corpus.is_dir():
        for path in corpus.glob(f"*/{CREDENTIALS_FILE}"):
            if (credentials := load_credentials(path.parent)) is not None:
                found.append(credentials)
    return found
