"""Where a source's generation files live and how the current one is switched, atomically.

    <corpus>/<name>/gen-20261129T120000-1a2b3c.db   one finished generation (immutable)
    <corpus>/<name>/current -> gen-....db           symlink, replaced with rename(2)
    <corpus>/<name>/.build.lock                     held while a build runs

A reader resolves ``current`` each time it needs the source, so a new generation is seen
without a restart; a reader still holding the previous file keeps reading it (the builder keeps
exactly one previous generation, and on POSIX an unlinked file stays readable while open).
"""

from __future__ import annotations

import fcntl
import os
import re
import secrets
import time
from pathlib import Path

from .errors import BadQuery, BuildError

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
CURRENT = "current"
GEN_PREFIX = "gen-"
GEN_SUFFIX = ".db"
BUILDING_SUFFIX = ".building"


RESERVED = {"notes"}  # the writable notes source lives elsewhere (notes.py)


def check_name(name: str) -> str:
    if name in RESERVED:
        raise BadQuery(
            f"the name {name!r} is reserved for the writable notes source",
            hint="choose another name for a built source",
        )
    if not NAME_PATTERN.match(name or "") or name.endswith((".db", ".building")):
        raise BadQuery(
            f"invalid source name {name!r}",
            hint="use 1-64 letters, digits, '-', '_' or '.', starting with a letter or digit",
        )
    return name


def source_dir(corpus_dir: Path, name: str) -> Path:
    return corpus_dir / check_name(name)


def current_path(directory: Path) -> Path | None:
    """The file the ``current`` pointer names, or None when the source has no generation."""
    link = directory / CURRENT
    try:
        target = os.readlink(link)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError:
        return None
    path = directory / target
    return path if path.exists() else None


def new_generation_name() -> str:
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    return f"{GEN_PREFIX}{stamp}-{secrets.token_hex(3)}{GEN_SUFFIX}"


def generation_files(directory: Path) -> list[Path]:
    return sorted(directory.glob(f"{GEN_PREFIX}*{GEN_SUFFIX}"))


def install(building: Path, final: Path) -> Path | None:
    """Make the finished file ``building`` the current generation ``final``; return the one it
    replaced. Builds write with ``synchronous=OFF`` (a failed build is thrown away, so nothing
    is gained by syncing as it goes), so the order matters for a power cut: the file and its
    sidecars reach the disk before the rename, and the rename before ``current`` names it —
    ``current`` never points at a file whose pages were still only in the page cache."""
    for path in dict.fromkeys((building, *sidecars(final))):  # the building file matches too
        _fsync(path)
    os.replace(building, final)
    _fsync(final.parent)
    return switch_current(final.parent, final)


def switch_current(directory: Path, generation: Path) -> Path | None:
    """Point ``current`` at ``generation`` atomically; return the generation it replaced."""
    previous = current_path(directory)
    tmp_link = directory / f".{CURRENT}.{os.getpid()}.{secrets.token_hex(3)}"
    os.symlink(generation.name, tmp_link)
    try:
        os.replace(tmp_link, directory / CURRENT)
    except BaseException:
        tmp_link.unlink(missing_ok=True)
        raise
    _fsync(directory)
    return previous


def prune(directory: Path, keep: list[Path | None]) -> list[Path]:
    """Delete generation files other than ``keep``; return what was removed."""
    keep_names = {p.name for p in keep if p is not None}
    removed = []
    for path in generation_files(directory):
        if path.name not in keep_names:
            path.unlink(missing_ok=True)
            for companion in sidecars(path):  # its vector index, if any
                companion.unlink(missing_ok=True)
            removed.append(path)
    return removed


def sidecars(generation: Path) -> list[Path]:
    """Files that belong to one generation (``gen-….db.usearch``)."""
    return [p for p in generation.parent.glob(generation.name + ".*") if p != generation]


def remove_debris(directory: Path) -> list[Path]:
    """Files left by builds that died (only called while holding the build lock)."""
    removed = []
    for path in directory.glob(f"*{BUILDING_SUFFIX}*"):
        path.unlink(missing_ok=True)
        removed.append(path)
    for path in directory.glob(f".{CURRENT}.*"):
        path.unlink(missing_ok=True)
    for path in directory.glob(f"{GEN_PREFIX}*{GEN_SUFFIX}.*"):  # sidecars of no generation
        owner = path.parent / (path.name.split(GEN_SUFFIX + ".", 1)[0] + GEN_SUFFIX)
        if not owner.exists():
            path.unlink(missing_ok=True)
            removed.append(path)
    return removed


class BuildLock:
    """An exclusive, non-blocking lock so two builds of one source never interleave."""

    def __init__(self, directory: Path):
        self.path = directory / ".build.lock"
        self._fd: int | None = None

    def __enter__(self) -> BuildLock:
        self._fd = os.open(self.path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            os.close(self._fd)
            self._fd = None
            raise BuildError(
                f"another build of {self.path.parent.name!r} is running",
                hint="wait for it to finish; the current generation keeps serving meanwhile",
            ) from exc
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _fsync(path: Path) -> None:
    """Flush a file's data, or a directory's entries (a rename is durable once its directory
    is synced), to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
