"""Downloading inputs: resumable, checksum-verified, with progress; used by the sources that
can fetch their own data (Wikipedia dumps, GeoNames exports, OpenStreetMap extracts).

* A partial ``.part`` file continues with an HTTP Range request (a server that ignores the
  range restarts the file).
* A published checksum (sha1, else md5) is verified before the file is used; a mismatch
  deletes it and fails.
* An existing file that verifies is not fetched again; one with nothing to verify it against is
  kept, or with ``refresh`` asked for only if the server's copy changed (``If-Modified-Since``;
  a finished file carries the server's ``Last-Modified`` as its time).
* Free disk is checked before the first byte is written — for the file and, through ``room``,
  for the build that follows it (a multi-GB dump must not fill the disk, nor be fetched for a
  build that cannot fit).
* An unreachable server is a clear error that says how to proceed offline.
"""

from __future__ import annotations

import base64
import datetime as dt
import email.utils
import hashlib
import json
import os
import re
import shutil
import urllib.error
import urllib.request
from collections.abc import Callable
from http.client import HTTPResponse
from pathlib import Path
from urllib.parse import urlencode

from chiezo.core.addresses import Address
from chiezo.core.errors import BuildError, InputError
from chiezo.core.progress import NullProgress, Progress

CHUNK = 1 << 20
TIMEOUT = 60
FREE_MARGIN = 64 * 2**20  # left free on a disk after a download (and the build after it)
NOT_MODIFIED = 304

# (folder, bytes) pairs: space that must be free besides the file (``download(room=...)``)
Room = Callable[[int], list[tuple[Path, int]]]


def _open(url: str, headers: dict[str, str] | None = None):
    """The response, or None for 304 Not Modified (asked with If-Modified-Since). A mirror
    given with a user and password (``https://user:pw@mirror/…``) is asked with them as HTTP
    Basic authentication and named without them (SECURITY.md rule 3a)."""
    address = Address.parse(url)
    sent = {"User-Agent": "chiezo", **(headers or {})}
    if address.credentials is not None:
        pair = ":".join(address.credentials.auth).encode("utf-8")
        sent["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
    shown = address.shown()
    request = urllib.request.Request(address.url + _query(address), headers=sent)
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT)  # noqa: S310 - http(s) only
    except urllib.error.HTTPError as exc:
        if exc.code == NOT_MODIFIED and "If-Modified-Since" in (headers or {}):
            return None
        raise InputError(f"{shown}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InputError(
            f"cannot reach {shown} ({reason})",
            hint="offline? download the dump on a connected machine and pass its path, "
            "or point --mirror (CHIEZO_WIKI_MIRROR) at a reachable mirror",
        ) from exc


def _query(address: Address) -> str:
    return "?" + urlencode(address.params) if address.params else ""


def get_text(url: str) -> str:
    with _open(url) as response:
        return response.read().decode("utf-8", errors="replace")


def get_json(url: str) -> dict:
    try:
        return json.loads(get_text(url))
    except ValueError as exc:
        raise InputError(f"{Address.parse(url).shown()} is not valid JSON") from exc


def download(
    url: str,
    dest: Path,
    *,
    checksum: tuple[str, str] | None = None,
    size: int | None = None,
    progress: Progress | None = None,
    refresh: bool = False,
    room: Room | None = None,
) -> Path:
    """Fetch ``url`` to ``dest``, resuming ``dest.part`` if present, verifying ``checksum``
    (algorithm, hex digest). An existing ``dest`` that verifies is not fetched again; without a
    checksum it is kept, unless ``refresh``: then it is fetched again if the server's changed.
    ``room(total bytes)`` names further space needed (the build that reads the file): refused,
    with nothing written, when the disk cannot hold it all."""
    progress = progress or NullProgress()
    size = size if isinstance(size, int) and size > 0 else None  # a status file's, unchecked
    if dest.exists() and checksum is not None and _digest(dest, checksum[0]) == checksum[1]:
        return dest
    if dest.exists() and checksum is None and not refresh:
        return dest
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    what = dest.name + (" and the build that reads it" if room else "")
    if size:  # known before asking (a dump's status file): refuse without a request
        check_room([(dest.parent, size - have), *(room(size) if room else [])], what)
    response = _open(url, _request_headers(dest, have, conditional=checksum is None))
    if response is None:  # refresh: the server's copy has not changed since ours
        return dest
    with response:
        if have and response.status != 206:  # the server ignored the range: start over
            have = 0
        total = _total(response, have) or size
        if total and total != size:
            check_room([(dest.parent, total - have), *(room(total) if room else [])], what)
        progress.phase(f"downloading {dest.name}", total, "B")
        progress.advance(have)
        with open(part, "ab" if have else "wb") as out:
            while chunk := response.read(CHUNK):
                out.write(chunk)
                progress.advance(len(chunk))
        modified = response.headers.get("Last-Modified")
    if checksum is not None:
        algorithm, expected = checksum
        actual = _digest(part, algorithm)
        if actual != expected:
            part.unlink(missing_ok=True)
            raise InputError(
                f"{dest.name} failed its {algorithm} check ({actual} ≠ {expected}); deleted",
                hint="fetch again; if it repeats, try another mirror",
            )
    _stamp(part, modified)
    os.replace(part, dest)
    return dest


def _request_headers(dest: Path, have: int, *, conditional: bool) -> dict[str, str]:
    if have:
        return {"Range": f"bytes={have}-"}
    if conditional and dest.exists():  # refresh: only if the server's copy is newer than ours
        return {"If-Modified-Since": email.utils.formatdate(dest.stat().st_mtime, usegmt=True)}
    return {}


def _stamp(path: Path, last_modified: str | None) -> None:
    """Give a finished download the server's time, so a refresh asks "changed since then?"."""
    try:
        when = email.utils.parsedate_to_datetime(last_modified) if last_modified else None
    except (TypeError, ValueError):
        when = None
    if when is not None:
        os.utime(path, (when.timestamp(), when.timestamp()))


def check_room(needs: list[tuple[Path, int]], what: str) -> None:
    """Refuse (BuildError, nothing written) when a disk cannot hold what ``needs`` asks of it:
    (folder, bytes) pairs, summed per file system (downloads and sources often share one)."""
    per_disk: dict[int, tuple[Path, int]] = {}
    for folder, wanted in needs:
        probe = _existing(folder)
        device = probe.stat().st_dev
        seen = per_disk.get(device, (probe, 0))
        per_disk[device] = (seen[0], seen[1] + max(wanted, 0))
    for probe, wanted in per_disk.values():
        free = shutil.disk_usage(probe).free
        if free < wanted + FREE_MARGIN:
            raise BuildError(
                f"not enough disk for {what}: about {(wanted + FREE_MARGIN) / 2**20:,.0f} MiB "
                f"needed, {free / 2**20:,.0f} MiB free in {probe}; nothing was downloaded",
                hint="free some space or point CHIEZO_DATA at a larger disk",
            )


def mtime(path: Path) -> str:
    """A file's modification time as an input identity records it (a download has the server's
    time): a fetch that brings the same file again is told apart from one bringing a new one."""
    stamp = dt.datetime.fromtimestamp(path.stat().st_mtime, dt.UTC)
    return stamp.isoformat(timespec="seconds")


def build_room(corpus_dir: Path, text_bytes: int) -> tuple[Path, int]:
    """The space a build from about ``text_bytes`` of text takes (``build.check_disk``'s
    estimate), for ``room``: checked before the download, not after it."""
    from chiezo.store import build  # read when called: tests set an impossible DISK_FACTOR

    return corpus_dir, int(text_bytes * build.DISK_FACTOR) + build.DISK_MARGIN


def _existing(folder: Path) -> Path:
    probe = folder
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    return probe


def _total(response: HTTPResponse, have: int) -> int | None:
    content_range = response.headers.get("Content-Range", "")
    match = re.search(r"/(\d+)$", content_range)
    if match:
        return int(match.group(1))
    length = response.headers.get("Content-Length")
    return int(length) + have if length and length.isdigit() else None


def _digest(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as fh:
        while chunk := fh.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
