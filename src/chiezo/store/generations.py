"""Where a source's generation files live and how the current one is switched, atomically.

    <corpus>/<name>/gen-20261129T120000-1a2b3c.db   one finished generation (immutable)
    <corpus>/<name>/current -> gen-....db           symlink, replaced with rename(2)
    <corpus>/<name>/.build.lock                     held while a build runs
    <corpus>/.removed-<name>-1a2b3c/                a source being removed (``remove``)
    <corpus>/.scratch/geonames-k2j4x9_0/            a build's temporary files (``scratch_dir``)

A reader resolves ``current`` each time it needs the source, so a new generation is seen
without a restart; a reader still holding the previous file keeps reading it (the builder keeps
exactly one previous generation, and on POSIX an unlinked file stays readable while open).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
import shutil
import stat
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from chiezo.core.errors import BadQuery, BuildError, Conflict, Operation, SchemaMismatch
from chiezo.store.source_info import meta_int

NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
CURRENT = "current"
GEN_PREFIX = "gen-"
GEN_SUFFIX = ".db"
BUILDING_SUFFIX = ".building"
REMOVED_PREFIX = ".removed-"
BUILD_LOCK = ".build.lock"
SCRATCH = ".scratch"  # under the corpus folder: builds' temporary folders (scratch_dir)
SCRATCH_LOCK = ".lock"  # in each of them, held while its build runs


RESERVED = {"notes"}  # the writable notes source lives elsewhere (ops/notes.py)


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


def describe(directory: Path) -> dict[str, Any]:
    """What removing the source in ``directory`` deletes: its generations (the current one
    first), and every file with the bytes they take."""
    current = current_path(directory)
    generations = [p.name for p in generation_files(directory)]
    if current is not None and current.name in generations:
        generations.remove(current.name)
        generations.insert(0, current.name)
    sizes = [
        e.stat(follow_symlinks=False)
        for e in _entries(directory)
        if not e.is_dir(follow_symlinks=False)
    ]
    return {
        "directory": str(directory),
        "current": current.name if current is not None else None,
        "generations": generations,
        "files": len(sizes),
        "bytes": sum(s.st_size for s in sizes if stat.S_ISREG(s.st_mode)),
    }


def remove(directory: Path) -> dict[str, Any]:
    """Delete the source in ``directory`` — ``current``, every generation and its sidecars,
    build leftovers, the directory — and return what was deleted (``describe``).

    Under the build lock, like a build's switch: while a build or an embed of the source runs,
    removal is refused (Conflict), and one starting meanwhile is refused. ``current`` goes
    first, so from that instant a reader resolving it finds no source, while one holding a
    generation open reads on (an unlinked file's data lives until its last descriptor closes).
    The directory is then renamed out of the name, so a build may start anew under it at once
    and a crash midway leaves only a dot-directory that no listing reads (the next removal of
    that name deletes it)."""
    if directory.is_symlink() or not directory.is_dir():
        raise BadQuery(f"{directory} is not a source's directory", hint="remove it by hand")
    try:
        lock = BuildLock(directory).__enter__()
    except BuildError as exc:
        raise Conflict(
            f"a build of {directory.name!r} is running; it cannot be removed meanwhile",
            source=directory.name,
            hint="remove it once the build has finished",
        ) from exc
    try:
        removed = describe(directory)
        (directory / CURRENT).unlink(missing_ok=True)
        _fsync(directory)
        trash = directory.with_name(_trash_name(directory.name, secrets.token_hex(3)))
        os.rename(directory, trash)
        _fsync(directory.parent)
    finally:
        lock.__exit__(None, None, None)
    shutil.rmtree(trash)
    for leftover in directory.parent.glob(_trash_name(directory.name, "[0-9a-f]" * 6)):
        shutil.rmtree(leftover, ignore_errors=True)  # an earlier removal that crashed
    return removed


def _trash_name(name: str, tag: str) -> str:
    return f"{REMOVED_PREFIX}{name}-{tag}"


def _entries(directory: Path) -> list[os.DirEntry]:
    """Every file, link and folder under ``directory``, links never followed: what ``remove``
    deletes is inside the directory, whatever a link in it points at."""
    out: list[os.DirEntry] = []
    with os.scandir(directory) as entries:
        for entry in entries:
            out.append(entry)
            if entry.is_dir(follow_symlinks=False):
                out += _entries(Path(entry.path))
    return out


class BuildLock:
    """An exclusive, non-blocking lock so two builds of one source never interleave."""

    def __init__(self, directory: Path):
        self.path = directory / BUILD_LOCK
        self._fd: int | None = None

    def __enter__(self) -> BuildLock:
        self._fd = try_flock(self.path)
        if self._fd is None:
            raise BuildError(
                f"another build of {self.path.parent.name!r} is running",
                hint="wait for it to finish; the current generation keeps serving meanwhile",
            )
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def try_flock(path: Path) -> int | None:
    """An exclusive ``flock`` on ``path`` (made if missing), not waiting: the descriptor that
    holds it, or None while another process holds it. A lock taken on a file that was deleted
    or renamed away meanwhile guards nothing — whoever did that held the lock then (``chiezo
    gc`` deleting a folder a build left, ``remove``), and a builder arriving now makes a new
    file under the name — so it is taken again on the file the path names now. A missing
    folder raises FileNotFoundError."""
    while True:
        fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if _names(path, fd):
                return fd
        except BlockingIOError:
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def _names(path: Path, fd: int) -> bool:
    """Whether ``path`` still names the file open as ``fd``."""
    try:
        linked = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (linked.st_dev, linked.st_ino) == (held.st_dev, held.st_ino)


@contextlib.contextmanager
def scratch_dir(corpus_dir: Path, prefix: str) -> Iterator[Path]:
    """A new folder for a build's temporary files (lookup tables), deleted when the block
    ends. It lives in ``<corpus>/.scratch/``, which no listing takes for a source, and holds a
    ``.lock`` its build keeps locked: a build killed with -9 leaves the folder but not the
    lock (the kernel drops it with the process), which is how ``chiezo gc`` (ops/maintenance.py)
    tells that debris from a running build's folder — with no process id to be reused."""
    root = corpus_dir / SCRATCH
    root.mkdir(parents=True, exist_ok=True)
    path, fd = _locked_scratch(root, prefix)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)
        os.close(fd)  # unlocked only once the folder is gone


def _locked_scratch(root: Path, prefix: str) -> tuple[Path, int]:
    """A new folder under ``root`` and its held lock. gc may see the folder between its making
    and its locking, lock it first and delete it: then another folder is made."""
    while True:
        path = Path(tempfile.mkdtemp(prefix=prefix, dir=root))
        with contextlib.suppress(FileNotFoundError):  # deleted by gc already
            fd = try_flock(path / SCRATCH_LOCK)
            if fd is not None:
                return path, fd


def _fsync(path: Path) -> None:
    """Flush a file's data, or a directory's entries (a rename is durable once its directory
    is synced), to the disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- which generation is kept beside the current one -----------------------------------------

REPLACED = "replaced"  # previous_to_keep: the generation the switch replaced


def previous_to_keep(replaced: Path | None, keep: Path | None | str) -> Path | None:
    """The generation kept beside a newly switched-in one: ``keep`` when given — an ingest's
    embed step gives the generation that served before the ingest, so the text-only
    intermediate the embed replaces (current for the minutes the embedding took, chosen by
    nobody) is not what a rollback would return to — else, or when ``keep`` is gone meanwhile,
    the one the switch ``replaced``. ``keep=None``: nothing served before (a first ingest)."""
    if isinstance(keep, str):  # REPLACED
        return replaced
    if keep is None:
        return None
    return keep if keep.exists() else replaced


def previous_path(directory: Path) -> Path | None:
    """The kept previous generation: the newest generation file that is not the current one
    (a switch keeps one, so normally the only other; after a crash between a switch and its
    prune, the newest of them is the one the switch replaced). None without a current one."""
    current = current_path(directory)
    if current is None:
        return None
    others = [p for p in generation_files(directory) if p.name != current.name]
    return others[-1] if others else None


# -- rollback ---------------------------------------------------------------------------------


def rollback(directory: Path) -> dict[str, Any]:
    """Point ``current`` back at the kept previous generation (``previous_path``) — atomically
    and under the build lock, like a build's switch — and return what serves now and what is
    kept. The generation that was current becomes the kept one, so a second rollback goes
    forward again; nothing is deleted. Refused (Conflict) while a build of the source runs and
    when there is no previous generation; refused (SchemaMismatch) when the previous one was
    written by another schema version than this program reads — a rebuild is the way then."""
    name = directory.name
    try:
        lock = BuildLock(directory).__enter__()
    except BuildError as exc:
        raise Conflict(
            f"a build of {name!r} is running; it cannot be rolled back meanwhile",
            source=name,
            hint="roll back once the build has finished",
        ) from exc
    try:
        current, previous = current_path(directory), previous_path(directory)
        if previous is None:
            raise Conflict(
                f"{name!r} has no previous generation to roll back to",
                source=name,
                current=current.name if current else None,
                hint="a build keeps the generation it replaced; this source has been built "
                "once, or its previous generation was removed",
            )
        meta = _readable_meta(name, previous)
        switch_current(directory, previous)
    finally:
        lock.__exit__(None, None, None)
    return {
        "source": name,
        "current": previous.name,
        "previous": current.name if current else None,
        "built_at": meta.get("built_at"),
        "docs": meta_int(meta.get("doc_count")),
        "schema_version": meta_int(meta.get("schema_version")),
    }


def _readable_meta(name: str, generation: Path) -> dict[str, str]:
    """The meta table of ``generation`` if this program reads it (the schema version it was
    written with, the tables every search needs); SchemaMismatch naming both versions else."""
    from chiezo.core import db
    from chiezo.core.schema import (
        REQUIRED_TABLES,
        SCHEMA_VERSION,
        readable_version,
        versions_read,
    )

    try:
        conn = db.open_readonly(generation)
        try:
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            meta = dict(conn.execute("SELECT key, value FROM meta")) if "meta" in tables else {}
        finally:
            conn.close()
    except db.Error as exc:
        raise SchemaMismatch(
            f"the previous generation of {name!r} ({generation.name}) cannot "
            f"be read ({exc}): it cannot be rolled back to",
            source=name,
            hint="rebuild the source instead: {see}",
            see=Operation("rebuild", name),
        ) from exc
    version = meta_int(meta.get("schema_version"))
    if not readable_version(version) or not set(REQUIRED_TABLES) <= tables:
        age = "an older" if version < SCHEMA_VERSION else "a newer"
        raise SchemaMismatch(
            f"cannot roll {name!r} back to {generation.name}: it was written with schema "
            f"version {version}, {age} one than the version {versions_read()} this Chiezo reads",
            source=name,
            schema_version=version,
            expected_schema_version=SCHEMA_VERSION,
            hint=(
                "rebuild the source instead: {see}"
                if version < SCHEMA_VERSION
                else "upgrade Chiezo to read it, or rebuild the source: {see}"
            ),
            see=Operation("rebuild", name),
        )
    return meta
