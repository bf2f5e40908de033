"""``chiezo doctor``: is this installation able to answer? Each check says what it found and,
when something is wrong, what to do. The model check tells "unreachable" apart from "reachable,
but it has no model of that name" — they need different fixes — and names the models an
endpoint lists and the one that answers (a name llama.cpp's server does not list, it answers
all the same: usable, with a note). The context check says how many tokens one request may
hold and whether the default excerpt budget fits them, in Japanese and in English (an
answer's excerpts are cut to fit when it does not)."""

from __future__ import annotations

import os
import shutil
from typing import Any

from chiezo.ops import operating
from chiezo.ops.context import Context
from chiezo.store.build import available_memory

MIN_FREE_DISK = 2 * 2**30
MIN_FREE_MEMORY = 512 * 2**20


def check(ctx: Context) -> list[dict[str, Any]]:
    """Checks in order: ``{"check", "ok", "detail", "hint"?}``."""
    return [
        _data_dir(ctx),
        *_sources(ctx),
        *_models(ctx),
        *_context(ctx),
        _web(ctx),
        _memory(),
        _disk(ctx),
    ]


def _data_dir(ctx: Context) -> dict[str, Any]:
    path = ctx.settings.data_dir
    if not path.exists():
        return {
            "check": "data directory",
            "ok": False,
            "detail": f"{path} does not exist",
            "hint": "build a source: `chiezo ingest docs PATH --name NAME`",
        }
    writable = os.access(path, os.W_OK)
    return {
        "check": "data directory",
        "ok": writable,
        "detail": f"{path}" + ("" if writable else " is not writable"),
    }


def _sources(ctx: Context) -> list[dict[str, Any]]:
    infos = operating.sources(ctx)
    if not [i for i in infos if not i.get("writable")]:
        return [
            {
                "check": "sources",
                "ok": False,
                "detail": "no sources built",
                "hint": "`chiezo ingest docs PATH --name NAME` (or `make run` for the samples)",
            }
        ]
    out = []
    for info in infos:
        if info.get("status") == "needs_rebuild":
            out.append(
                {
                    "check": f"source {info['name']}",
                    "ok": False,
                    "detail": info.get("error", "needs a rebuild"),
                    "hint": info.get("hint"),
                }
            )
            continue
        vectors = info.get("vectors")
        detail = f"{info.get('docs', 0):,} docs, schema {info.get('schema_version')}"
        if vectors:
            detail += f", vectors {vectors['model']} ({vectors['coverage']:.0%})"
        out.append({"check": f"source {info['name']}", "ok": True, "detail": detail})
    return out


def _models(ctx: Context) -> list[dict[str, Any]]:
    status = operating.llm_status(ctx)
    if not status["configured"]:
        return [
            {
                "check": "language model",
                "ok": True,
                "detail": "none configured: ask/chat are off, search works",
                "hint": "set CHIEZO_LLM_URL and CHIEZO_LLM_MODEL to answer questions",
            }
        ]
    return [_endpoint_row(found) for found in status["endpoints"]]


def _endpoint_row(found: dict[str, Any]) -> dict[str, Any]:
    """One endpoint: the model that answers and the models it lists — a name it does not
    list but answers all the same (llama.cpp) is usable, said with a note, not a failure."""
    from chiezo.core.config import ENV

    listed = found.get("models")
    there = ", ".join(listed) if listed else "(none)"
    row = {"check": f"model endpoint {found['url']}", "ok": found["ok"]}
    if not found["ok"]:
        row["detail"] = found.get("problem") or "unusable"
        if listed is not None:
            row["hint"] = f"models there: {there}"
        return row
    detail = f"model {found.get('model')!r} answers (listed: {there})"
    if found.get("note"):
        detail += f"; {found['note']}"
    if found.get("context"):
        detail += f", {found['context']:,} tokens of context ({found['context_source']})"
    row["detail"] = detail
    if found.get("note") and listed and found.get("model") in listed:
        row["hint"] = f"to name it as the endpoint does, set {ENV['llm_model']}={found['model']}"
    return row


def _web(ctx: Context) -> dict[str, Any]:
    """The web search the answer layer may use: off by default; never its key or password.
    Not asked here: a doctor's run sends nothing beyond this machine unasked."""
    from chiezo.core.config import ENV
    from chiezo.core.errors import ConfigError
    from chiezo.ops import web

    try:
        engine = web.configured(ctx.settings)
    except ConfigError as exc:
        return {"check": "web search", "ok": False, "detail": exc.message,
                "hint": exc.extras.get("hint")}  # fmt: skip
    if engine is None:
        return {"check": "web search", "ok": True, "detail": "off: nothing leaves this machine",
                "hint": f"set {ENV['web_search']}=searxng:URL (or brave:) to offer web_search"}  # fmt: skip
    rag = "on" if ctx.settings.answer_web else f"only with --web ({ENV['answer_web']})"
    return {"check": "web search", "ok": True,
            "detail": f"{engine.shown()}: the agent's and MCP's web_search; rag's no-basis "
                      f"answers {rag}"}  # fmt: skip


# what the default budget is measured with: text like the excerpts an answer reads
SAMPLES = {
    "Japanese": "夏目漱石は日本の小説家、評論家、英文学者である。本名は金之助といい、江戸の牛込に"
    "生まれた。代表作に『吾輩は猫である』『坊っちゃん』『こころ』などがある。",
    "English": "Alabama is a state in the Southeastern region of the United States, bordered by "
    "Tennessee to the north, Georgia to the east and Florida to the south; its capital is "
    "Montgomery.",
}


def _context(ctx: Context) -> list[dict[str, Any]]:
    """The model's context window, and whether the default budget fits it."""
    from chiezo.answer.budget import HEADER_TOKENS, MIN_EXCERPT_TOKENS, Room
    from chiezo.answer.rag import answer_messages
    from chiezo.core.config import ENV

    client = ctx.llm()
    if client is None:
        return []
    s = ctx.settings
    window = client.window(s.llm_context)
    if not window.said:
        return [
            {
                "check": "model context",
                "ok": True,
                "detail": "unknown: the endpoint does not say how many tokens a request may hold",
                "hint": f"set {ENV['llm_context']} to the server's context per request (llama.cpp: "
                "-c divided by --parallel) so that answers are fitted to it before asking; "
                "until then a request that does not fit is cut and asked once more",
            }
        ]
    room = Room(window, s.answer_max_tokens)
    prompt = client.count(answer_messages(SAMPLES["Japanese"], [], [], True))
    left = room.prompt - prompt.tokens - HEADER_TOKENS * s.answer_excerpts
    how = "counted by the endpoint" if prompt.exact else "estimated"
    head = (
        f"{window.describe()}; the prompt takes {prompt.tokens:,} tokens and the answer "
        f"{s.answer_max_tokens:,} ({ENV['answer_max_tokens']})"
    )
    if left < MIN_EXCERPT_TOKENS:
        return [
            {
                "check": "model context",
                "ok": False,
                "detail": f"{head}: no room is left for excerpts",
                "hint": f"give the model a larger context (llama.cpp: -c, per slot with "
                f"--parallel) or lower {ENV['answer_max_tokens']}",
            }
        ]
    fits, cut = [], []
    for language, sample in SAMPLES.items():
        per_char = client.tokens_per_char(sample)
        needed = int(s.answer_budget * per_char)
        if needed <= left:
            fits.append(f"{language} ≈ {needed:,} tokens")
        else:
            cut.append(
                f"{language} ≈ {needed:,} tokens: cut to ~{int(left / per_char):,} characters"
            )
    detail = (
        f"{head}; the default budget ({s.answer_budget:,} characters of excerpts, "
        f"{ENV['answer_budget']}, {how}) "
        + ("fits: " if not cut else "does not fit: ")
        + "; ".join(cut + fits)
        + f" (room for excerpts: {left:,} tokens)"
    )
    row = {
        "check": "model context",
        "ok": True,
        "detail": detail,
        "context": window.tokens,
        "fits": not cut,
    }
    if cut:
        row["hint"] = (
            "answers read less than the budget (each says so in its warnings); for "
            "the whole budget give the model a larger context (llama.cpp: -c, per "
            f"slot with --parallel) or lower {ENV['answer_budget']}"
        )
    return [row]


def _memory() -> dict[str, Any]:
    free = available_memory()
    if free is None:
        return {"check": "memory", "ok": True, "detail": "unknown on this platform"}
    return {
        "check": "memory",
        "ok": free >= MIN_FREE_MEMORY,
        "detail": f"{free / 2**30:.1f} GiB available",
    }


def _disk(ctx: Context) -> dict[str, Any]:
    path = ctx.settings.data_dir
    probe = path if path.exists() else path.parent
    free = shutil.disk_usage(probe if probe.exists() else ".").free
    return {
        "check": "disk",
        "ok": free >= MIN_FREE_DISK,
        "detail": f"{free / 2**30:.1f} GiB free under {probe}",
    }
