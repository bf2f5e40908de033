"""A model's context window, and text measured in its tokens.

What an endpoint says about its context (llama.cpp ``/props``, an OpenAI-compatible
``/v1/models`` entry's metadata, Ollama ``/api/show``) is read here, leniently: a figure that
is missing, not a whole number or implausible is no figure. What an endpoint answers when a
request does not fit is recognised here too, precisely (llama.cpp's
``exceed_context_size_error``, OpenAI's ``context_length_exceeded`` and the messages of vLLM
and LM Studio), never by a loose "context" anywhere in an error.

Counting: the endpoint's own tokenizer where it offers one (answer/llm.py asks llama.cpp's and vLLM's
``/tokenize``); otherwise :func:`estimate_tokens`, from characters per token measured per
script. The ratios are **model-dependent**: these were measured with SmolLM2-135M's tokenizer
through llama.cpp's ``/tokenize`` on the test Wikipedia excerpts (docs/design.md §31.2), an
English-centred byte-level BPE — for Japanese about twice what a multilingual model (Qwen,
Llama 3, Gemma) spends, so the estimate errs on the side of fitting.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# tokens per character, by script (SmolLM2-135M, measured: design.md §31.2)
TOKENS_PER_CHAR = {
    "kanji": 2.11,  # 漢字: 0.47 characters a token
    "kana": 1.72,  # ひらがな・カタカナ
    "cjk_punct": 1.23,  # 、。「」（）and full-width forms
    "word": 0.22,  # Latin letters and the spaces between words: 4.6 characters a token
    "digit": 1.0,  # every digit is a token
    "punct": 0.88,  # ASCII punctuation
    "space": 0.05,  # runs of spaces, newlines
    "other": 2.0,  # Hangul (measured 2.0), Cyrillic (0.8), anything else: one of the dearest
}
_RUNS = re.compile(
    r"(?P<kanji>[\u3400-\u9fff\uf900-\ufaff]+)|(?P<kana>[\u3040-\u30ff\uff66-\uff9f]+)"
    r"|(?P<cjk_punct>[\u3000-\u303f\uff01-\uff65]+)"
    r"|(?P<word>[A-Za-z\u00c0-\u024f]+(?: [A-Za-z\u00c0-\u024f]+)*)|(?P<digit>[0-9]+)"
    r"|(?P<space>\s+)|(?P<punct>[!-/:-@\[-`{-~]+)|(?P<other>.)",
    re.S,
)

MESSAGE_TOKENS = 8  # a chat template's markup around one message (ChatML: 5, measured)
PRIMER_TOKENS = 8  # the assistant turn's opening the template adds after the last message
DEFAULT_CONTEXT = 4096  # assumed when neither the endpoint nor CHIEZO_LLM_CONTEXT says
OLLAMA_DEFAULT_CONTEXT = 4096  # Ollama's num_ctx unless the model or the server sets one
MIN_CONTEXT, MAX_CONTEXT = 256, 10_000_000  # a figure outside is no figure


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` is estimated to take, from :data:`TOKENS_PER_CHAR` (rounded up)."""
    total = 0.0
    for match in _RUNS.finditer(text):
        total += len(match.group()) * TOKENS_PER_CHAR[match.lastgroup or "other"]
    return int(total) + (1 if total % 1 else 0)


def tokens_per_char(text: str) -> float:
    """The estimated tokens a character of text like ``text`` takes (English when empty)."""
    text = text.strip()
    return estimate_tokens(text) / len(text) if text else TOKENS_PER_CHAR["word"]


def message_text(messages: list[dict[str, Any]], tools: list[dict] | None = None) -> str:
    """What of a chat request a tokenizer reads: the messages' contents and tool calls, and
    the tool schemas where given (template markup is added by :func:`overhead`)."""
    parts = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif content:
            parts.append(json.dumps(content, ensure_ascii=False))
        for call in m.get("tool_calls") or []:
            parts.append(json.dumps(call.get("function") or call, ensure_ascii=False))
    if tools:
        parts.append(json.dumps(tools, ensure_ascii=False))
    return "\n".join(parts)


def overhead(messages: list) -> int:
    return MESSAGE_TOKENS * len(messages) + PRIMER_TOKENS


# -- what an endpoint says about its context ----------------------------------------------------


@dataclass(frozen=True)
class ContextWindow:
    """Tokens one request may hold (prompt and answer together), and where that was learned."""

    tokens: int
    source: str  # "llama.cpp /props", "GET /v1/models", "Ollama /api/show", "CHIEZO_LLM_CONTEXT"…
    slots: int | None = None  # llama.cpp: parallel slots the server's context is split among
    endpoint: str | None = None  # the endpoint that said it
    said: bool = True  # False: assumed (nobody said)

    def describe(self) -> str:
        slots = f", {self.slots} parallel slots" if self.slots and self.slots > 1 else ""
        return f"{self.tokens:,} tokens per request ({self.source}{slots})"


def _whole(value: Any) -> int | None:
    """A plausible context size, or None (missing, not a whole number, absurd)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and MIN_CONTEXT <= value <= MAX_CONTEXT:
        return value
    return None


def from_props(data: Any) -> tuple[int, int | None] | None:
    """(tokens per request, slots) from llama.cpp's ``GET /props``. Its
    ``default_generation_settings.n_ctx`` is already one slot's share (measured: ``-c 4096
    --parallel 2`` says 2048; with ``--kv-unified`` 4096, each slot may use it all); a server
    that gives only the whole ``n_ctx`` has it divided by ``total_slots``."""
    if not isinstance(data, dict):
        return None
    slots = data.get("total_slots")
    slots = slots if isinstance(slots, int) and not isinstance(slots, bool) and slots > 0 else None
    settings = data.get("default_generation_settings")
    if isinstance(settings, dict) and _whole(settings.get("n_ctx")):
        return _whole(settings.get("n_ctx")), slots  # type: ignore[return-value]
    total = _whole(data.get("n_ctx"))
    if total:
        return _whole(total // (slots or 1)) or None, slots  # type: ignore[return-value]
    return None


# the keys OpenAI-compatible servers put a model's context under in /v1/models
_MODEL_KEYS = (
    "max_model_len",
    "context_length",
    "max_context_length",
    "context_window",
    "n_ctx",
    "num_ctx",
)


def from_models(data: Any, model: str | None) -> int | None:
    """The context of ``model`` (else the first) in a ``GET /v1/models`` reply: vLLM's
    ``max_model_len``, LM Studio's and OpenRouter's ``context_length``, llama.cpp's
    ``meta.n_ctx`` (one slot's, like ``/props``; never ``n_ctx_train``, what the model was
    trained with rather than what the server gives)."""
    rows = data.get("data") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        return None
    rows = [r for r in rows if isinstance(r, dict)]
    chosen = next((r for r in rows if model and r.get("id") == model), rows[0] if rows else None)
    if chosen is None:
        return None
    for where in (chosen, chosen.get("meta"), chosen.get("metadata")):
        if isinstance(where, dict):
            for key in _MODEL_KEYS:
                found = _whole(where.get(key))
                if found:
                    return found
    return None


_NUM_CTX = re.compile(r"(?m)^\s*num_ctx\s+(\d+)")


def from_ollama_show(data: Any) -> int | None:
    """Ollama's ``POST /api/show``: ``num_ctx`` among the model's parameters when set; else
    Ollama's default (4096), never more than the model's ``*.context_length``."""
    if not isinstance(data, dict):
        return None
    params = data.get("parameters")
    if isinstance(params, str):
        found = _NUM_CTX.search(params)
        if found and _whole(found.group(1)):
            return int(found.group(1))
    info = data.get("model_info")
    trained = None
    if isinstance(info, dict):
        trained = next(
            (
                _whole(v)
                for k, v in info.items()
                if isinstance(k, str) and k.endswith(".context_length") and _whole(v)
            ),
            None,
        )
    return min(OLLAMA_DEFAULT_CONTEXT, trained or OLLAMA_DEFAULT_CONTEXT)


# -- what an endpoint answers when a request does not fit --------------------------------------


@dataclass(frozen=True)
class Overflow:
    """A reply saying the request is larger than the context: the sizes, where it says them."""

    message: str
    prompt_tokens: int | None = None
    context_tokens: int | None = None


_OVERFLOW_MESSAGES = (
    # llama.cpp: "request (4269 tokens) exceeds the available context size (4096 tokens), try…"
    re.compile(
        r"request \((?P<prompt>\d+) tokens\) exceeds the available context size "
        r"\((?P<context>\d+) tokens\)"
    ),
    re.compile(r"exceeds the available context size"),  # llama.cpp's newer wording
    # OpenAI / vLLM: "This model's maximum context length is 4097 tokens. However, your
    # messages resulted in 5000 tokens" / "you requested 2100 tokens (1588 in the messages, …"
    re.compile(
        r"maximum context length is (?P<context>\d+) tokens\b.*?"
        r"(?:(?P<messages>\d+) in the messages|resulted in (?P<prompt>\d+) tokens|$)",
        re.S,
    ),
    # LM Studio: "…the model is loaded with context length of only 4096 tokens…"
    re.compile(r"loaded with context length of only (?P<context>\d+) tokens"),
)
_OVERFLOW_CODES = ("context_length_exceeded", "exceed_context_size_error")


def overflow_of(status: int, body: str) -> Overflow | None:
    """The overflow a 400/413 reply reports, or None if it reports something else."""
    if status not in (400, 413):
        return None
    error: Any = None
    try:
        data = json.loads(body)
        error = data.get("error") if isinstance(data, dict) else None
    except ValueError:
        data = None
    details = error if isinstance(error, dict) else {}
    message = details.get("message") if isinstance(details.get("message"), str) else None
    message = message or (error if isinstance(error, str) else None) or body[:500]
    coded = any(details.get(k) in _OVERFLOW_CODES for k in ("code", "type"))
    # the sizes an overflow names become the client's window (LLMClient.learn): the same
    # plausibility bounds as a figure the endpoint volunteers
    prompt = _whole(details.get("n_prompt_tokens"))
    context = _whole(details.get("n_ctx"))
    for pattern in _OVERFLOW_MESSAGES:
        found = pattern.search(message)
        if found:
            named = found.groupdict()
            prompt = prompt or _whole(named.get("prompt") or named.get("messages"))
            context = context or _whole(named.get("context"))
            return Overflow(message.strip(), prompt, context)
    if coded:
        return Overflow(message.strip(), prompt, context)
    return None
