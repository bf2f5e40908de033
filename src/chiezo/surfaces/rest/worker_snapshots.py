"""What ``GET /metrics`` needs from the other workers of ``chiezo serve --workers N``: each
worker's snapshot of its counters, in a directory private to the server, and each worker
process's memory, CPU and open files, from /proc.

The supervisor (``chiezo serve``) creates the directory (``tempfile.mkdtemp``: 0700, under
``$TMPDIR``), names it to its workers in ``CHIEZO_METRICS_DIR`` as it names itself in
``CHIEZO_SUPERVISOR_PID``, and removes it when it stops. Each worker writes
``<pid>.<start>.json`` there (``start``: when the process started, in clock ticks since boot, so
that a pid used again by another process does not pass for its predecessor): a new file of
mode 0600 renamed over the last, so no reader sees half of one. What a reader trusts:

* the directory, only when it is a real directory (no symlink) of this user's that no one else
  may enter; everything then goes through one descriptor of it, so nothing outside it is
  opened whatever names it holds;
* a file, only when its name is that of a live process whose parent is the supervisor and
  which started when the name says, and the file is a regular one of this user's with one
  link, opened without following a symlink (nor waiting on a FIFO), of at most ``MAX_BYTES``;
* what the file says, only as far as metrics.py checks it (``Metrics`` decodes it).

A file whose process is gone, or is not a worker of this server, is removed by the reader that
finds it. Without /proc (not Linux) a process counts as alive when it can be signalled, and the
process metrics are left out.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import secrets
import shutil
import stat
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass

from chiezo.surfaces.rest.supervision import SUPERVISOR_ENV

METRICS_DIR_ENV = "CHIEZO_METRICS_DIR"  # set by ``chiezo serve --workers N`` (N > 1)
MAX_BYTES = 4 << 20
_NAME = re.compile(r"([1-9][0-9]{0,9})\.([0-9]{1,20})\.(json|[0-9a-f]{16}\.tmp)")
_OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
log = logging.getLogger("chiezo.api")


@contextlib.contextmanager
def shared_directory(workers: int) -> Iterator[None]:
    """In the supervisor: the directory where its ``workers`` leave their snapshots, for as long
    as they serve (none for one worker: it answers about itself)."""
    os.environ.pop(METRICS_DIR_ENV, None)  # only the one made here is used
    try:
        path = tempfile.mkdtemp(prefix="chiezo-metrics-") if workers > 1 else None  # 0700
    except OSError as exc:
        log.warning("each scrape of /metrics answers for one worker: %s", exc)
        path = None
    if path is None:
        yield
        return
    os.environ[METRICS_DIR_ENV] = path
    try:
        yield
    finally:
        os.environ.pop(METRICS_DIR_ENV, None)
        shutil.rmtree(path, ignore_errors=True)


class Snapshots:
    """A worker's end of the shared directory: its own file written, the others' read."""

    def __init__(self, directory: int, supervisor: int) -> None:
        self._dir, self.supervisor = directory, supervisor
        self.pid = os.getpid()
        fields = _stat_fields(self.pid)
        self.started = int(fields[19]) if fields else 0
        self.name = f"{self.pid}.{self.started}.json"
        self._listing = threading.Lock()  # concurrent listings of one descriptor share its place
        self._failed = False
        self._written = -1  # the inode of the file this worker wrote last

    @classmethod
    def from_env(cls) -> Snapshots | None:
        """This worker's, when its supervisor named a directory fit to share; else None (and
        each scrape answers for this worker alone)."""
        path, supervisor = os.environ.get(METRICS_DIR_ENV, ""), os.environ.get(SUPERVISOR_ENV, "")
        if not path or not supervisor.isdigit():
            return None
        try:
            directory = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            log.warning("metrics of the other workers left out: %s", exc.strerror)
            return None
        info = os.fstat(directory)
        if info.st_uid != os.geteuid() or info.st_mode & 0o077:
            os.close(directory)
            log.warning("metrics of the other workers left out: their directory is not private")
            return None
        return cls(directory, int(supervisor))

    def write(self, data: bytes) -> bool:
        """Replace this worker's file with ``data`` (callers serialize: the last written wins);
        False when it could not be written."""
        temporary = f"{self.name[: -len('json')]}{secrets.token_hex(8)}.tmp"
        try:
            out = os.open(
                temporary,
                os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o600,
                dir_fd=self._dir,
            )
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(out, view) :]
                self._written = os.fstat(out).st_ino
            finally:
                os.close(out)
            os.replace(temporary, self.name, src_dir_fd=self._dir, dst_dir_fd=self._dir)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=self._dir)
            if not self._failed:  # said once, not every second
                log.warning("could not share this worker's metrics: %s", exc)
            self._failed = True
            return False
        self._failed = False
        return True

    def missing(self) -> bool:
        """True when this worker's file is not the one it wrote (removed, or replaced by
        something else): it is written again."""
        try:
            info = os.stat(self.name, dir_fd=self._dir, follow_symlinks=False)
        except OSError:
            return True
        return info.st_ino != self._written or not stat.S_ISREG(info.st_mode)

    def others(self) -> list[tuple[int, bytes]]:
        """(pid, content) of every other live worker of this server; the files of processes that
        are gone, or were never workers of this server, removed."""
        with self._listing:
            names = os.listdir(self._dir)
        found = []
        for name in names:
            match = _NAME.fullmatch(name)
            if match is None or name == self.name:
                continue  # a name no worker writes: not read, not touched
            pid = int(match[1])
            if not self._is_worker(pid, int(match[2])):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=self._dir)
                continue
            if match[3] == "json" and (data := self._read(name)) is not None:
                found.append((pid, data))
        return found

    def remove(self) -> None:
        """This worker's file, as it stops."""
        with contextlib.suppress(OSError):
            os.unlink(self.name, dir_fd=self._dir)

    def _is_worker(self, pid: int, started: int) -> bool:
        if pid == self.pid:
            return started == self.started  # a temporary file of this process's own
        fields = _stat_fields(pid)
        if fields is not None:
            return (
                fields[0] != "Z"
                and int(fields[1]) == self.supervisor
                and fields[19] == str(started)
            )
        if os.path.isdir("/proc"):
            return False  # gone
        try:
            os.kill(pid, 0)
        except OSError:  # gone, or another user's
            return False
        return True

    def _read(self, name: str) -> bytes | None:
        try:
            handle = os.open(name, _OPEN_FLAGS, dir_fd=self._dir)
        except OSError:  # a symlink (ELOOP), gone meanwhile
            return None
        try:
            info = os.fstat(handle)
            if (
                not stat.S_ISREG(info.st_mode)
                or info.st_uid != os.geteuid()
                or info.st_nlink != 1
                or info.st_size > MAX_BYTES
            ):
                return None
            chunks, size = [], 0
            while size <= MAX_BYTES and (chunk := os.read(handle, MAX_BYTES + 1 - size)):
                chunks.append(chunk)
                size += len(chunk)
            return b"".join(chunks) if size <= MAX_BYTES else None
        except OSError:
            return None
        finally:
            os.close(handle)


# -- process metrics -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ProcessStats:
    resident_bytes: int
    private_bytes: int | None  # None where the kernel has no smaps_rollup (before 4.14)
    cpu_seconds: float
    open_fds: int
    start_time: float  # Unix seconds


def process_stats(pid: int) -> ProcessStats | None:
    """``pid``'s memory, CPU time, open files and start from /proc; None without /proc (not
    Linux) or once the process is gone."""
    fields = _stat_fields(pid)
    boot = _boot_time()
    if fields is None or boot is None:
        return None
    try:
        open_fds = len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return None
    ticks = os.sysconf("SC_CLK_TCK")
    return ProcessStats(
        resident_bytes=int(fields[21]) * os.sysconf("SC_PAGE_SIZE"),
        private_bytes=_private_bytes(pid),
        cpu_seconds=(int(fields[11]) + int(fields[12])) / ticks,
        open_fds=open_fds,
        start_time=boot + int(fields[19]) / ticks,
    )


def _stat_fields(pid: int) -> list[str] | None:
    """/proc/<pid>/stat from its third field on (state, ppid, …: field n of proc(5) is at
    n - 3); the name before them may hold spaces and parentheses."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    fields = raw.rpartition(b")")[2].decode("ascii", "replace").split()
    return fields if len(fields) > 21 else None


def _private_bytes(pid: int) -> int | None:
    """Private_Clean + Private_Dirty: what the process holds that no other process shares."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    kib = [int(line.split()[1]) for line in lines if line.startswith(b"Private_")]
    return sum(kib) * 1024 if kib else None


_boot: list[float] = []


def _boot_time() -> float | None:
    if not _boot:
        try:
            with open("/proc/stat", "rb") as handle:
                for line in handle:
                    if line.startswith(b"btime "):
                        _boot.append(float(line.split()[1]))
                        break
        except OSError:
            return None
    return _boot[0] if _boot else None
