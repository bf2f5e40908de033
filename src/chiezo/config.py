"""One Settings object for the whole process, read from ``CHIEZO_*`` environment variables.

Every knob lives here so that the CLI, the server and the tests agree on defaults and so that
``docs/`` can list them in one place.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from pathlib import Path


def _env_float(name: str, default: float) -> float:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        from .errors import ConfigError

        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc


@dataclass(frozen=True)
class Settings:
    """Process-wide settings.

    data_dir
        Root of everything Chiezo stores (``CHIEZO_DATA``, default ``./data``). Sources live in
        ``<data_dir>/corpus/<name>/``.
    query_timeout
        Seconds a single query may run before it is interrupted and reported as a timeout
        (``CHIEZO_QUERY_TIMEOUT``).
    """

    data_dir: Path = field(default_factory=lambda: Path("./data"))
    query_timeout: float = 5.0

    @classmethod
    def from_env(cls, **overrides) -> Settings:
        settings = cls(
            data_dir=Path(os.environ.get("CHIEZO_DATA") or "./data"),
            query_timeout=_env_float("CHIEZO_QUERY_TIMEOUT", 5.0),
        )
        return replace(settings, **overrides) if overrides else settings

    @property
    def corpus_dir(self) -> Path:
        return self.data_dir / "corpus"
