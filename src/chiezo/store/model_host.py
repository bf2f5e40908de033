"""One copy of each query model per server: the model host.

A use-m session costs a process ~135 MB of private memory (the ONNX weights unpacked and
prepacked by onnxruntime, measured with smaps_rollup: 20 → 155 MB), and loading it ~0.5 s
plus 0.4 s to import onnxruntime. With ``chiezo serve --workers 2`` each worker held its own
copy (215–228 MB private per worker), and every cold ``chiezo search`` on a source with
vectors paid the load again (0.74–0.77 s against 0.29 s keyword-only). Model memory cannot
be shared by forking: uvicorn spawns its workers, and onnxruntime's threads do not survive a
fork. So ``chiezo serve`` starts one *host* process that loads each model on its first
request (a keyword-only library loads none) and embeds for everyone:

* its workers find it through ``CHIEZO_MODEL_HOST`` (the socket's path, set by ``serve``);
* a CLI command on the same data directory finds it by the directory's key (``find_host``),
  so a cold hybrid search neither imports onnxruntime nor loads the model.

Builds and embedding jobs keep their own model (``get_embedder``): they run for minutes at
full speed and should not queue behind queries. ``CHIEZO_MODEL_HOST=off`` turns the host off
on both sides.

Who may ask: the socket lives in a directory of this user's only (``chiezo-<uid>`` under the
temporary directory, 0700, checked before use — a directory someone else made or opened up
is refused, and the caller loads the model itself), and on Linux the host also checks each
caller's uid (SO_PEERCRED). A request is bounded (``MAX_REQUEST_BYTES``, ``MAX_TEXTS``); a
malformed one closes its connection and nothing else.

Protocol: frames of a 4-byte big-endian length and a payload. A request is JSON
``{"model", "kind", "texts"}``; the answer a JSON head ``{"rows", "dim"}`` then a frame of
float32 rows, or ``{"error": message}``. ``texts: []`` asks only for the model's dimension.
``{"ask": "server"}`` asks where its server answers on this machine: ``{"url": ...}`` (null
when it listens on no loopback address) — a CLI command then asks the server itself
(surfaces/cli/via_server.py).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import socket
import socketserver
import stat
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

from chiezo.core.errors import ChiezoError, ModelUnavailable
from chiezo.store.embedders import Embedder, get_embedder

HOST_ENV = "CHIEZO_MODEL_HOST"  # the socket's path, or "off"
MAX_REQUEST_BYTES = 16 << 20
MAX_TEXTS = 1024
FRAME = struct.Struct(">I")
LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp's st column
# How long a caller waits for a host that is starting (a worker warms while the host imports)
# or restarting, and for one answer (a first request loads the model: ~1 s, more under load).
CONNECT_WAIT_SECONDS = 15.0
ANSWER_SECONDS = 60.0
ASK_SECONDS = 2.0  # for the server's address: answered at once, even while a model loads
POLL_SECONDS = 0.5
RESTART_PAUSE_SECONDS = 1.0
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux, 104 on macOS


class HostUnavailable(ModelUnavailable):
    """The model host cannot be reached (not started yet, stopped, or refused)."""


# -- where hosts live ---------------------------------------------------------------------------


def host_dir() -> Path | None:
    """This user's private directory for host sockets, made if missing; None when it cannot
    be trusted (not a directory of ours, or open to others: someone could then plant a socket
    and answer with vectors of their choosing)."""
    path = Path(tempfile.gettempdir()) / f"chiezo-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        path.mkdir(mode=0o700)
    try:
        info = path.lstat()
    except OSError:
        return None
    private = stat.S_ISDIR(info.st_mode) and info.st_mode & 0o077 == 0
    return path if private and info.st_uid == os.getuid() else None


def data_key(data_dir: Path) -> str:
    """A short name for a data directory (socket paths are limited to ~100 bytes)."""
    return hashlib.sha256(str(Path(data_dir).resolve()).encode()).hexdigest()[:16]


def socket_path(data_dir: Path) -> Path | None:
    """Where this process's host for ``data_dir`` listens, or None where no host can be."""
    return _socket_path(data_dir)[0]


def _socket_path(data_dir: Path) -> tuple[Path | None, str]:
    """The socket's path, or None and why there is none."""
    directory = host_dir()
    if directory is None:
        where = Path(tempfile.gettempdir()) / f"chiezo-{os.getuid()}"
        return None, f"{where} is not a private directory of this user's"
    path = directory / f"{data_key(data_dir)}-{os.getpid()}.sock"
    if len(str(path)) > MAX_SOCKET_PATH:
        return None, f"the socket path {path} is longer than {MAX_SOCKET_PATH} bytes (set TMPDIR)"
    return path, ""


def find_host(data_dir: Path) -> Path | None:
    """The socket of a host serving ``data_dir`` that answers, or None. Sockets left by a
    killed server are removed on the way."""
    if _disabled():
        return None
    directory = host_dir()
    if directory is None:
        return None
    for path in sorted(directory.glob(f"{data_key(data_dir)}-*.sock")):
        if not stat.S_ISSOCK(path.lstat().st_mode):
            continue
        try:
            _connect(path, wait=0.0).close()
        except HostUnavailable:
            if not _pid_alive(path.stem.rpartition("-")[2]):
                with contextlib.suppress(OSError):
                    path.unlink()
            continue
        return path
    return None


def _pid_alive(raw: str) -> bool:
    if not raw.isdigit():
        return False
    try:
        os.kill(int(raw), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _disabled() -> bool:
    return os.environ.get(HOST_ENV, "").strip().lower() == "off"


# -- the caller's side --------------------------------------------------------------------------


class _Lookup:
    """Where a CLI command looks for a running server's host: its data directory, searched
    once, on the first query to embed (commands that embed none pay nothing)."""

    def __init__(self) -> None:
        self.data_dir: Path | None = None
        self.found: Path | None = None
        self.searched = False


_lookup = _Lookup()
_hosted: dict[tuple[Path, str], HostedEmbedder] = {}
_hosted_lock = threading.Lock()


def look_for_host(data_dir: Path | None) -> None:
    """Embed queries through a host serving ``data_dir`` when one answers (the CLI); None:
    look for none."""
    _lookup.data_dir = None if data_dir is None else Path(data_dir)
    _lookup.found, _lookup.searched = None, False


def configured_host() -> Path | None:
    """The host this process embeds queries through: its server's (``CHIEZO_MODEL_HOST``),
    or one serving the data directory given to ``look_for_host``."""
    raw = os.environ.get(HOST_ENV, "").strip()
    if raw.lower() == "off":
        return None
    if raw:
        return Path(raw)
    if _lookup.data_dir is not None and not _lookup.searched:
        _lookup.found, _lookup.searched = find_host(_lookup.data_dir), True
    return _lookup.found


def query_embedder(model: str) -> Embedder:
    """The embedder for queries of ``model``: the host's when this process has one, else the
    model loaded here. A server's worker has no other: its host is restarted if it dies. A
    CLI command whose host went away since it looked loads the model itself."""
    path = configured_host()
    if path is None:
        return get_embedder(model)
    with _hosted_lock:
        key = (path, model)
        if key not in _hosted:
            try:
                _hosted[key] = HostedEmbedder(path, model)  # asks the dimension
            except HostUnavailable:
                if path != _lookup.found:
                    raise
                _lookup.found = None
                return get_embedder(model)
        return _hosted[key]


def server_url(data_dir: Path) -> str | None:
    """Where the server whose host serves ``data_dir`` answers on loopback, or None (no
    server, or one listening on no loopback address)."""
    path = find_host(data_dir)
    if path is None:
        return None
    try:
        with _connect(path, wait=0.0) as conn:
            conn.settimeout(ASK_SECONDS)
            _send(conn, json.dumps({"ask": "server"}).encode())
            url = json.loads(_receive(conn, 4096)).get("url")
    except (OSError, ValueError, AttributeError, HostUnavailable):
        return None
    return url if isinstance(url, str) else None


def own_server_url(data_dir: Path) -> str | None:
    """``server_url``, when every socket listening on its port is this user's: after a server
    died, whoever took its port is neither asked (surfaces/cli/via_server.py) nor linked to
    (ops/links.py)."""
    url = server_url(data_dir)
    try:
        port = urlsplit(url).port if url else None
    except ValueError:  # a port out of range
        return None
    return url if port is not None and listens_as_us(port) else None


def listens_as_us(port: int) -> bool:
    """Whether something listens on ``port`` and every listening socket there is this
    user's (Linux; elsewhere: not known, so no)."""
    owners = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) > 7 and fields[3] == LISTEN and _port_of(fields[1]) == port:
                owners.add(int(fields[7]))
    return owners == {os.getuid()}


def _port_of(local_address: str) -> int:
    return int(local_address.rpartition(":")[2], 16)


class HostedEmbedder(Embedder):
    """``model`` as the host at ``path`` computes it. One connection per thread."""

    def __init__(self, path: Path, model: str) -> None:
        self.name, self._path = model, path
        self._local = threading.local()
        self.dim = self._ask([], "query")[1]

    def embed_batch(self, texts: list[str], kind: str = "passage"):
        import numpy as np

        rows, dim, payload = self._ask(list(texts), kind)
        return np.frombuffer(payload, dtype=np.float32).reshape(rows, dim)

    def _ask(self, texts: list[str], kind: str) -> tuple[int, int, bytes]:
        request = json.dumps({"model": self.name, "kind": kind, "texts": texts}).encode()
        for attempt in (1, 2):  # a host restarted since: the old connection is dead
            conn = self._connection()
            try:
                _send(conn, request)
                head = json.loads(_receive(conn, MAX_REQUEST_BYTES))
                if "error" in head:
                    raise ModelUnavailable(str(head["error"]))
                rows, dim = int(head["rows"]), int(head["dim"])
                payload = _receive(conn, rows * dim * 4) if rows else b""
                return rows, dim, payload
            except (OSError, ValueError, KeyError) as exc:
                self._drop()
                if attempt == 2:
                    raise HostUnavailable(f"the model host stopped answering: {exc}") from exc
        raise AssertionError("unreachable")

    def _connection(self) -> socket.socket:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = _connect(self._path, wait=CONNECT_WAIT_SECONDS)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        self._local.conn = None
        if conn is not None:
            conn.close()


def _connect(path: Path, *, wait: float) -> socket.socket:
    deadline = time.monotonic() + wait
    while True:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        conn.settimeout(ANSWER_SECONDS)
        try:
            conn.connect(str(path))
            return conn
        except OSError as exc:
            conn.close()
            if time.monotonic() >= deadline:
                raise HostUnavailable(f"no model host answers at {path}: {exc}") from exc
            time.sleep(0.05)


def _send(conn: socket.socket, payload: bytes) -> None:
    conn.sendall(FRAME.pack(len(payload)) + payload)


def _receive(conn: socket.socket, limit: int) -> bytes:
    (size,) = FRAME.unpack(_exactly(conn, FRAME.size))
    if size > limit:
        raise ValueError(f"a frame of {size:,} bytes (at most {limit:,})")
    return _exactly(conn, size)


def _exactly(conn: socket.socket, size: int) -> bytes:
    parts, left = [], size
    while left:
        part = conn.recv(min(left, 1 << 20))
        if not part:
            raise ConnectionError("the connection closed mid-frame")
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


# -- the host -----------------------------------------------------------------------------------


class _Handler(socketserver.BaseRequestHandler):
    def handle(self) -> None:
        conn: socket.socket = self.request
        if not _same_user(conn):
            return
        conn.settimeout(None)  # a worker's connection idles between queries
        with contextlib.suppress(OSError, ValueError):
            while True:
                try:
                    request = json.loads(_receive(conn, MAX_REQUEST_BYTES))
                except ConnectionError:
                    return  # the caller closed
                for frame in _answer(request):
                    _send(conn, frame)


def _answer(request: object) -> list[bytes]:
    import numpy as np

    try:
        if not isinstance(request, dict):
            raise ValueError("a request is a JSON object")
        if request.get("ask") == "server":
            return [json.dumps({"url": _server_url}).encode()]
        model, kind, texts = request["model"], request["kind"], request["texts"]
        if not (isinstance(texts, list) and all(isinstance(t, str) for t in texts)):
            raise ValueError("texts must be a list of strings")
        if len(texts) > MAX_TEXTS:
            raise ValueError(f"at most {MAX_TEXTS} texts a request")
        embedder = get_embedder(str(model))
        rows = embedder.embed(texts, kind) if texts else np.zeros((0, embedder.dim))
    except (ChiezoError, ValueError, KeyError, TypeError) as exc:
        return [json.dumps({"error": str(exc)}).encode()]
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    head = json.dumps({"rows": int(rows.shape[0]), "dim": int(embedder.dim)}).encode()
    return [head, rows.tobytes()] if len(rows) else [head]


def _same_user(conn: socket.socket) -> bool:
    """On Linux, the caller's uid from the kernel must be ours (the directory's mode is the
    first guard; this one holds if it were ever opened up)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return uid == os.getuid()


class _Server(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


_server_url: str | None = None  # in the host: where its server answers on loopback


def run_host(path: Path, parent: int, server_url: str | None = None) -> None:
    """Serve on ``path`` until ``parent`` is gone (or SIGTERM); the socket is removed after.
    ``server_url``: the server's loopback address, told to whoever asks."""
    import signal

    from chiezo.core.processes import die_with_parent

    global _server_url
    die_with_parent(parent)  # killed with the server, even by SIGKILL
    _server_url = server_url
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    old = os.umask(0o177)  # the socket file: 0600
    try:
        server = _Server(str(path), _Handler)
    finally:
        os.umask(old)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        while not stop.wait(POLL_SECONDS) and os.getppid() == parent:
            pass
    finally:
        server.shutdown()
        server.server_close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


@contextlib.contextmanager
def hosting(data_dir: Path, server_url: str | None = None) -> Iterator[Path | None]:
    """Run a host for ``data_dir`` while the block runs (``chiezo serve``, whose loopback
    address is ``server_url``); yields its socket, or None where no host can run (turned off,
    no private directory). A host that dies is started again."""
    if _disabled():
        yield None
        return
    path, why = _socket_path(data_dir)
    if path is None:
        _say(f"no model host ({why}): each worker loads the query models it needs")
        yield None
        return
    keeper = _Keeper(path, server_url)
    keeper.start()
    try:
        yield path
    finally:
        keeper.stop()


def _say(line: str) -> None:
    """A line on the server's stderr, where it says what it serves (no logging is set up in
    the supervising process)."""
    with contextlib.suppress(OSError, ValueError):
        print(f"chiezo: {line}", file=sys.stderr, flush=True)


class _Keeper(threading.Thread):
    """Starts the host process and starts it again if it dies."""

    def __init__(self, path: Path, server_url: str | None) -> None:
        super().__init__(name="chiezo-model-host", daemon=True)
        self.path, self.server_url = path, server_url
        self._stopping = threading.Event()
        self._process: subprocess.Popen | None = None

    def _spawn(self) -> subprocess.Popen:
        command = [sys.executable, "-m", "chiezo.store.model_host", str(self.path)]
        command += [str(os.getpid()), *([self.server_url] if self.server_url else [])]
        return subprocess.Popen(command, stdin=subprocess.DEVNULL)

    def run(self) -> None:
        while not self._stopping.is_set():
            try:
                process = self._process = self._spawn()
            except OSError as exc:
                # seen in CI under load: the exec failed (EFAULT, "Bad address") and the
                # uncaught error ended this thread, leaving the server without a host for good
                _say(f"the model host could not be started ({exc}); trying again")
                self._stopping.wait(RESTART_PAUSE_SECONDS)
                continue
            while process.poll() is None and not self._stopping.wait(POLL_SECONDS):
                pass
            if process.poll() is None:  # stopping
                process.terminate()
                try:
                    process.wait(5)
                except subprocess.TimeoutExpired:
                    process.kill()
            else:
                _say(f"the model host ended (exit status {process.returncode}); starting it again")
                self._stopping.wait(RESTART_PAUSE_SECONDS)

    def stop(self) -> None:
        self._stopping.set()
        self.join(10)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


if __name__ == "__main__":  # python -m chiezo.store.model_host SOCKET PARENT_PID [URL]
    run_host(Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else None)
