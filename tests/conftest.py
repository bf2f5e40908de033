"""Fixtures: every test gets its own data directory; sources are built from real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from chiezo.core.config import Settings
from chiezo.ops.context import Context
from chiezo.surfaces.rest import create_app

from helpers import BOOK_FILES, RunningServer, build_docs, write_files


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", query_timeout=10)


@pytest.fixture
def service(settings: Settings) -> Context:
    return Context(settings)


@pytest.fixture
def server(settings, service, tmp_path):
    """A real server on loopback with one source, "book" (helpers.BOOK_FILES). A module that
    needs another server defines its own ``server`` fixture, which takes the place of this one."""
    build_docs(service, write_files(tmp_path / "book", BOOK_FILES), "book")
    with RunningServer(create_app(settings)) as running:
        yield running


pytest_plugins = ["web_engines"]  # the web_engine fixture: scripted engines on loopback
