"""``chiezo doctor``: is this installation able to answer? Each check says what it found and,
when something is wrong, what to do. The model check tells "unreachable" apart from "reachable,
but it has no model of that name" — they need different fixes."""

from __future__ import annotations

import os
import shutil
from typing import Any

from .build import available_memory

MIN_FREE_DISK = 2 * 2**30
MIN_FREE_MEMORY = 512 * 2**20


def check(service) -> list[dict[str, Any]]:
    """Checks in order: ``{"check", "ok", "detail", "hint"?}``."""
    return [_data_dir(service), *_sources(service), *_models(service), _memory(), _disk(service)]


def _data_dir(service) -> dict[str, Any]:
    path = service.settings.data_dir
    if not path.exists():
        return {"check": "data directory", "ok": False, "detail": f"{path} does not exist",
                "hint": "build a source: `chiezo ingest docs PATH --name NAME`"}  # fmt: skip
    writable = os.access(path, os.W_OK)
    return {"check": "data directory", "ok": writable,
            "detail": f"{path}" + ("" if writable else " is not writable")}  # fmt: skip


def _sources(service) -> list[dict[str, Any]]:
    infos = service.sources()
    if not [i for i in infos if not i.get("writable")]:
        return [{"check": "sources", "ok": False, "detail": "no sources built",
                 "hint": "`chiezo ingest docs PATH --name NAME` (or `make run` for the samples)"}]  # fmt: skip
    out = []
    for info in infos:
        if info.get("status") == "needs_rebuild":
            out.append({"check": f"source {info['name']}", "ok": False,
                        "detail": info.get("error", "needs a rebuild"), "hint": info.get("hint")})  # fmt: skip
            continue
        vectors = info.get("vectors")
        detail = f"{info.get('docs', 0):,} docs, schema {info.get('schema_version')}"
        if vectors:
            detail += f", vectors {vectors['model']} ({vectors['coverage']:.0%})"
        out.append({"check": f"source {info['name']}", "ok": True, "detail": detail})
    return out


def _models(service) -> list[dict[str, Any]]:
    status = service.llm_status()
    if not status["configured"]:
        return [{"check": "language model", "ok": True,
                 "detail": "none configured: ask/chat are off, search works",
                 "hint": "set CHIEZO_LLM_URL and CHIEZO_LLM_MODEL to answer questions"}]  # fmt: skip
    out = []
    for found in status["endpoints"]:
        detail = found.get("problem") or f"model {found.get('model')!r} available"
        row = {"check": f"model endpoint {found['url']}", "ok": found["ok"], "detail": detail}
        if found.get("models") is not None and not found["ok"]:
            row["hint"] = "models there: " + (", ".join(found["models"]) or "(none)")
        out.append(row)
    return out


def _memory() -> dict[str, Any]:
    free = available_memory()
    if free is None:
        return {"check": "memory", "ok": True, "detail": "unknown on this platform"}
    return {"check": "memory", "ok": free >= MIN_FREE_MEMORY,
            "detail": f"{free / 2**30:.1f} GiB available"}  # fmt: skip


def _disk(service) -> dict[str, Any]:
    path = service.settings.data_dir
    probe = path if path.exists() else path.parent
    free = shutil.disk_usage(probe if probe.exists() else ".").free
    return {"check": "disk", "ok": free >= MIN_FREE_DISK,
            "detail": f"{free / 2**30:.1f} GiB free under {probe}"}  # fmt: skip
