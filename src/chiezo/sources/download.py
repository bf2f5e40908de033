"""Downloading inputs: resumable, checksum-verified, with progress; used by the sources that
can fetch their own data (Wikipedia dumps, GeoNames exports, OpenStreetMap extracts).

* A partial ``.part`` file continues with an HTTP Range request (a server that ignores the
  range restarts the file).
* A published checksum (sha1, else md5) is verified before the file is used; a mismatch
  deletes it and fails.
* An existing file that verifies is not fetched again.
* An unreachable server is a clear error that says how to proceed offline.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import urllib.error
import urllib.request
from pathlib import Path

from ..errors import InputError
from ..progress import NullProgress, Progress

CHUNK = 1 << 20
TIMEOUT = 60


def _open(url: str, headers: dict[str, str] | None = None):
    request = urllib.request.Request(url, headers={"User-Agent": "chiezo", **(headers or {})})
    try:
        return urllib.request.urlopen(request, timeout=TIMEOUT)  # noqa: S310 - http(s) only
    except urllib.error.HTTPError as exc:
        raise InputError(f"{url}: HTTP {exc.code} {exc.reason}") from exc
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise InputError(
            f"cannot reach {url} ({reason})",
            hint="offline? download the dump on a connected machine and pass its path, "
            "or point --mirror (CHIEZO_WIKI_MIRROR) at a reachable mirror",
        ) from exc


def get_text(url: str) -> str:
    with _open(url) as response:
        return response.read().decode("utf-8", errors="replace")


def get_json(url: str) -> dict:
    try:
        return json.loads(get_text(url))
    except ValueError as exc:
        raise InputError(f"{url} is not valid JSON") from exc


def download(
    url: str,
    dest: Path,
    *,
    checksum: tuple[str, str] | None = None,
    size: int | None = None,
    progress: Progress | None = None,
) -> Path:
    """Fetch ``url`` to ``dest``, resuming ``dest.part`` if present, verifying ``checksum``
    (algorithm, hex digest). An existing ``dest`` that verifies is not fetched again."""
    progress = progress or NullProgress()
    if dest.exists() and (checksum is None or _digest(dest, checksum[0]) == checksum[1]):
        return dest
    part = dest.with_name(dest.name + ".part")
    have = part.stat().st_size if part.exists() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    response = _open(url, headers)
    with response:
        if have and response.status != 206:  # the server ignored the range: start over
            have = 0
        total = _total(response, have) or size
        progress.phase(f"downloading {dest.name}", total, "B")
        progress.advance(have)
        with open(part, "ab" if have else "wb") as out:
            while chunk := response.read(CHUNK):
                out.write(chunk)
                progress.advance(len(chunk))
    if checksum is not None:
        algorithm, expected = checksum
        actual = _digest(part, algorithm)
        if actual != expected:
            part.unlink(missing_ok=True)
            raise InputError(
                f"{dest.name} failed its {algorithm} check ({actual} ≠ {expected}); deleted",
                hint="fetch again; if it repeats, try another mirror",
            )
    os.replace(part, dest)
    return dest


def _total(response, have: int) -> int | None:
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
