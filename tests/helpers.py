"""Helpers shared by the tests (fixtures live in conftest.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from chiezo.build import BuildOptions
from chiezo.service import Service

SHARED_DATA = Path(
    os.environ.get("CHIEZO_SHARED_DATA", Path(__file__).resolve().parents[2] / "shared" / "data")
)


def shared(relative: str) -> Path:
    """A file or folder under ../shared/data; the test is skipped (saying which) if absent."""
    path = SHARED_DATA / relative
    if not path.exists():
        pytest.skip(f"shared data not available: {path}")
    return path


def write_files(folder: Path, files: dict[str, str | bytes]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return folder


def build_docs(service: Service, folder: Path, name: str, **options):
    strict = options.pop("strict", False)
    return service.ingest("docs", folder, name, strict=strict, options=BuildOptions(**options))


def titles(result) -> list[str]:
    return [h.title for h in result.hits]


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class RunningServer:
    """The real app under uvicorn on a free loopback port, in a background thread."""

    def __init__(self, app, host: str = "127.0.0.1"):
        import threading

        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host=host, port=self.port, log_level="warning", lifespan="on")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> RunningServer:
        import time

        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=15)
