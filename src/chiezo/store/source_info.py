"""``SourceInfo``: what is known of one source, typed — built from its generation's meta table
in one place, whether the source opens (``status`` "ok") or needs a rebuild, and shown by
every surface through ``to_dict()`` (the ``/v1/sources`` shape)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

OK = "ok"
NEEDS_REBUILD = "needs_rebuild"


@dataclass
class SourceInfo:
    name: str
    kind: str = ""
    language: str | None = None
    docs: int = 0
    chunks: int = 0
    tags: int = 0
    links: int = 0
    points: int = 0
    attributes: list[str] = field(default_factory=list)
    built_at: str | None = None
    schema_version: int = 0
    generation: str | None = None
    input: dict[str, Any] = field(default_factory=dict)  # the input identity its build recorded
    imported: bool = False  # switched in by ``chiezo import``: its input is the one chosen here
    size_bytes: int | None = None
    vectors: dict[str, Any] | None = None
    text_index: str = "trigrams"  # "words+trigrams" for sources with the word index
    status: str = OK
    writable: bool = False  # written in place (notes), never built
    live: bool = False  # searched and read through its server (a kiwix-serve book)
    in_default: bool = True  # searched by a search of all sources (store/source_settings.py)
    error: str | None = None  # why it needs a rebuild
    hint: str | None = None
    attribution: dict[str, str | None] | None = None
    about: str | None = None  # what the input says it holds (a ZIM: title, language, date…)

    @classmethod
    def from_meta(cls, name: str, meta: dict[str, str], path: Path, **overrides: Any) -> SourceInfo:
        """The facts a generation's meta table records (``overrides`` for what is read live)."""
        info = cls(
            name=name,
            kind=meta.get("kind", ""),
            language=meta.get("language") or None,
            docs=meta_int(meta.get("doc_count")),
            chunks=meta_int(meta.get("chunk_count")),
            tags=meta_int(meta.get("tag_count")),
            links=meta_int(meta.get("link_count")),
            points=meta_int(meta.get("point_count")),
            attributes=_json(meta.get("attributes"), []),
            built_at=meta.get("built_at"),
            schema_version=meta_int(meta.get("schema_version")),
            generation=meta.get("generation") or path.name,
            input=recorded_input(meta),
            imported="imported_from" in meta,
            size_bytes=path.stat().st_size if path.exists() else None,
        )
        for key, value in overrides.items():
            setattr(info, key, value)
        return info

    @property
    def ok(self) -> bool:
        return self.status == OK

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        for optional in ("error", "hint"):
            if out[optional] is None:
                del out[optional]
        for flag in ("writable", "live"):  # said only of the sources that are
            if not out[flag]:
                del out[flag]
        return out


def recorded_input(meta: dict[str, str]) -> dict[str, Any]:
    """The input a generation records — as authority for serving its original files and for
    rebuilding it. A generation imported from an archive records the input the importing user
    chose (``input_chosen``, ops/transfer.py); one imported before that carries the exporting
    machine's paths, which a stranger's archive can set to anything (``/``): none then."""
    if "imported_from" in meta and meta.get("input_chosen") != "here":
        return {}
    return without_credentials(_json(meta.get("input"), {}))


def without_credentials(given: Any) -> Any:
    """A recorded input whose addresses carry no user or password, however deep: a live
    source registered before addresses were taken apart (core/addresses.py) recorded them as
    typed, and a download mirror is recorded as an option (``--mirror``)."""
    from chiezo.core.addresses import Address, has_credentials

    if isinstance(given, dict):
        return {key: without_credentials(value) for key, value in given.items()}
    if isinstance(given, list):
        return [without_credentials(value) for value in given]
    if isinstance(given, str) and has_credentials(given):
        return Address.parse(given).url
    return given


def meta_int(value: str | None) -> int:
    """A count from a meta table: 0 where it is missing or not a number (an older build)."""
    try:
        return int(value or 0)
    except ValueError:
        return 0


def _json(value: str | None, empty: Any) -> Any:
    try:
        return json.loads(value) if value else empty
    except ValueError:
        return empty
