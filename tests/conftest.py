"""Fixtures: every test gets its own data directory; sources are built from real files."""

from __future__ import annotations

from pathlib import Path

import pytest

from chiezo.core.config import Settings
from chiezo.ops.service import Service


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", query_timeout=10)


@pytest.fixture
def service(settings: Settings) -> Service:
    return Service(settings)
