"""One Settings object for the whole process, read from ``CHIEZO_*`` environment variables.

Every knob lives here so that the CLI, the server and the tests agree on defaults and so that
``docs/`` can list them in one place.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, overload


@overload
def _env_float(name: str, default: float) -> float: ...
@overload
def _env_float(name: str, default: None) -> float | None: ...
def _env_float(name: str, default: float | None) -> float | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default
    try:
        return float(raw)
    except ValueError as exc:
        from chiezo.core.errors import ConfigError

        raise ConfigError(f"{name} must be a number, got {raw!r}") from exc


def _env_choice(name: str, choices: tuple[str, ...], default: str) -> str:
    raw = (os.environ.get(name) or "").strip().lower()
    if not raw:
        return default
    if raw not in choices:
        from chiezo.core.errors import ConfigError

        raise ConfigError(f"{name} must be one of {', '.join(choices)}, got {raw!r}")
    return raw


def _env_bool(name: str, default: bool) -> bool:
    raw = _env_choice(name, ("1", "0", "true", "false", "yes", "no", "on", "off"), "")
    return default if not raw else raw in ("1", "true", "yes", "on")


def _env_list(name: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in os.environ.get(name, "").split(",") if item.strip())


def _env_positive_int(name: str) -> int | None:
    value = _env_float(name, None)
    if value is None:
        return None
    if value < 1 or value != int(value):
        from chiezo.core.errors import ConfigError

        raise ConfigError(f"{name} must be a whole number of tokens, got {value:g}")
    return int(value)


def _env_seconds(name: str, default: float) -> float:
    value = _env_float(name, default)
    if not 0 < value <= MAX_SECONDS:
        from chiezo.core.errors import ConfigError

        raise ConfigError(f"{name} must be seconds within 0..{MAX_SECONDS}, got {value:g}")
    return value


MAX_SECONDS = 3600  # a model deadline longer than an hour is a typo
ANSWER_MODES = ("rag", "agent")  # how ask/chat answer: plan-search-read, or the model calls tools
# who turns a question into searches: its own words (no model call), the model (one more call),
# or auto — the words, and the model only for a chat follow-up that leans on earlier turns
# (docs/design.md §38.1: the words' plan found as much and costs no call)
PLANNERS = ("auto", "keywords", "model")
# ``--ray`` given without an address: the cluster RAY_ADDRESS names, else the one `ray start`
# runs on this machine, else a new local one (ray.init's own order; cluster/__init__.py)
RAY_DEFAULT_ADDRESS = "default"

# The environment variable of each setting that an error, a warning or ``chiezo doctor`` names
# (what to change): spelled here once, read by from_env for the settings added with it.
ENV = {
    "llm_url": "CHIEZO_LLM_URL",
    "llm_model": "CHIEZO_LLM_MODEL",
    "llm_timeout": "CHIEZO_LLM_TIMEOUT",
    "llm_context": "CHIEZO_LLM_CONTEXT",
    "plan_timeout": "CHIEZO_PLAN_TIMEOUT",
    "answer_plan": "CHIEZO_ANSWER_PLAN",
    "first_token_timeout": "CHIEZO_LLM_FIRST_TOKEN_TIMEOUT",
    "agent_deadline": "CHIEZO_AGENT_DEADLINE",
    "answer_budget": "CHIEZO_ANSWER_BUDGET",
    "answer_excerpts": "CHIEZO_ANSWER_EXCERPTS",
    "answer_max_tokens": "CHIEZO_ANSWER_MAX_TOKENS",
    "location_ttl": "CHIEZO_LOCATION_TTL",
    "web_search": "CHIEZO_WEB_SEARCH",
    "web_search_key": "CHIEZO_WEB_SEARCH_KEY",
    "web_search_interval": "CHIEZO_WEB_SEARCH_INTERVAL",
    "answer_web": "CHIEZO_ANSWER_WEB",
}


@dataclass(frozen=True)
class Settings:
    """Process-wide settings.

    data_dir
        Root of everything Chiezo stores (``CHIEZO_DATA``, default ``./data``). Sources live in
        ``<data_dir>/corpus/<name>/``.
    query_timeout
        Seconds a single query may run before it is interrupted and reported as a timeout
        (``CHIEZO_QUERY_TIMEOUT``).
    notes_dir
        Where the writable notes source lives (``CHIEZO_NOTES_DIR``, default
        ``<data_dir>/notes``): deliberately outside ``corpus/``.
    token
        Bearer token for writes (``CHIEZO_TOKEN``); required beyond loopback.
    allowed_hosts
        Extra host names the server answers to (``CHIEZO_ALLOWED_HOSTS``, comma separated:
        ``name`` or ``name:*`` for any port, ``name:8080`` for one); loopback names and IP
        addresses are always accepted (surfaces/rest/security.py: DNS-rebinding protection).
    job_models
        Embedding models, beyond the built-in ones and those sources already use, that jobs
        started over HTTP may name (``CHIEZO_JOB_MODELS``, comma separated, e.g.
        ``onnx:/srv/models/e5-base``): a client never chooses a path on the server.
    keyword_weight, fusion
        Hybrid search: the keyword side's weight after min-max normalisation
        (``CHIEZO_HYBRID_KEYWORD_WEIGHT``; unset: the measured default for the source's model)
        and the fusion (``CHIEZO_HYBRID_FUSION``: minmax or rrf); docs/design.md §18.
    serve_threads
        Worker threads answering requests (``CHIEZO_SERVE_THREADS``); each keeps one read-only
        connection per source.
    llm_url, llm_model, llm_key, llm_timeout
        OpenAI-compatible chat endpoints for ``ask``/``chat`` (``CHIEZO_LLM_URL``, comma
        separated, tried in order; ``CHIEZO_LLM_MODEL``; ``CHIEZO_LLM_KEY``;
        ``CHIEZO_LLM_TIMEOUT`` seconds). Unset: answering is off, everything else works.
    answer_budget
        Characters of excerpts an answer's prompt may hold (``CHIEZO_ANSWER_BUDGET``): sized
        for small context windows.
    answer_excerpts, answer_max_tokens
        How many documents an answer reads (``CHIEZO_ANSWER_EXCERPTS``, default 5) and the
        answer's length cap in tokens (``CHIEZO_ANSWER_MAX_TOKENS``, default 512): a small
        machine's model is slow per token and has a small context.
    answer_mode, answer_grounded
        The default of ``ask``/``chat`` (``CHIEZO_ANSWER_MODE``: rag or agent) and whether
        answers may go beyond the sources (``CHIEZO_ANSWER_GROUNDED``, default on).
    answer_plan
        Who plans a rag answer's searches (``CHIEZO_ANSWER_PLAN``): ``auto`` (the default: the
        question's own words, the model only for a follow-up that leans on earlier turns),
        ``keywords`` or ``model``.
    first_token_timeout
        Seconds the model may take before the first piece of an answer arrives
        (``CHIEZO_LLM_FIRST_TOKEN_TIMEOUT``); the whole answer's is ``llm_timeout``.
    llm_context
        The model's context window in tokens per request (``CHIEZO_LLM_CONTEXT``): used when
        the endpoint does not say (llama.cpp ``/props``, ``/v1/models`` metadata, Ollama
        ``/api/show``), the smaller of the two when it does (answer/context.py).
    plan_timeout, agent_deadline
        Seconds the planner's request may take before the question's own keywords are used
        instead (``CHIEZO_PLAN_TIMEOUT``), and seconds a whole agent run may take
        (``CHIEZO_AGENT_DEADLINE``); the answer's own is ``llm_timeout``.
    public_url
        The address people reach this server at (``CHIEZO_PUBLIC_URL``; ``chiezo serve`` uses
        its own when unset): citations of documents with no web address link to its pages.
    location_ttl
        Seconds a current location (``near=here``) may be used after it was taken
        (``CHIEZO_LOCATION_TTL``, default 420): older, it is refused and the person is asked
        to press "use my location" again (core/here.py).
    web_search, web_search_key, web_search_interval, answer_web
        A web search the answer layer may use, never the library itself (``CHIEZO_WEB_SEARCH``:
        ``searxng:URL`` or ``brave:``, its key in ``CHIEZO_WEB_SEARCH_KEY``; unset: off): the
        agent's and MCP's ``web_search`` tool, and — only with ``--web`` or
        ``CHIEZO_ANSWER_WEB`` — rag's answer when the library has no basis. At least
        ``CHIEZO_WEB_SEARCH_INTERVAL`` seconds (default 1) pass between two calls of every
        process of this data directory (answer/websearch.py).
    """

    data_dir: Path = field(default_factory=lambda: Path("./data"))
    query_timeout: float = 5.0
    notes_dir: Path | None = None  # default <data_dir>/notes
    token: str | None = None
    allowed_hosts: tuple[str, ...] = ()
    job_models: tuple[str, ...] = ()
    serve_threads: int = 4
    keyword_weight: float | None = None
    fusion: str = "minmax"
    llm_url: str | None = None
    llm_model: str | None = None
    llm_key: str | None = None
    llm_timeout: float = 120.0
    answer_budget: int = 2500
    answer_excerpts: int = 5
    answer_max_tokens: int = 512
    answer_mode: str = "rag"
    answer_grounded: bool = True
    answer_plan: str = "auto"
    first_token_timeout: float = 60.0
    public_url: str | None = None
    llm_context: int | None = None  # tokens per request; None: what the endpoint says
    plan_timeout: float = 60.0
    agent_deadline: float = 180.0
    location_ttl: float = 420.0
    web_search: str | None = None
    web_search_key: str | None = field(default=None, repr=False)
    web_search_interval: float = 1.0
    answer_web: bool = False

    @classmethod
    def from_env(cls, **overrides: Any) -> Settings:
        settings = cls(
            data_dir=Path(os.environ.get("CHIEZO_DATA") or "./data"),
            query_timeout=_env_float("CHIEZO_QUERY_TIMEOUT", 5.0),
            notes_dir=Path(os.environ["CHIEZO_NOTES_DIR"])
            if os.environ.get("CHIEZO_NOTES_DIR")
            else None,
            token=os.environ.get("CHIEZO_TOKEN") or None,
            allowed_hosts=_env_list("CHIEZO_ALLOWED_HOSTS"),
            job_models=_env_list("CHIEZO_JOB_MODELS"),
            serve_threads=int(_env_float("CHIEZO_SERVE_THREADS", 4)),
            keyword_weight=_env_float("CHIEZO_HYBRID_KEYWORD_WEIGHT", None),
            fusion=os.environ.get("CHIEZO_HYBRID_FUSION") or "minmax",
            llm_url=os.environ.get("CHIEZO_LLM_URL") or None,
            llm_model=os.environ.get("CHIEZO_LLM_MODEL") or None,
            llm_key=os.environ.get("CHIEZO_LLM_KEY") or None,
            llm_timeout=_env_float("CHIEZO_LLM_TIMEOUT", 120.0),
            answer_budget=int(_env_float("CHIEZO_ANSWER_BUDGET", 2500)),
            answer_excerpts=int(_env_float("CHIEZO_ANSWER_EXCERPTS", 5)),
            answer_max_tokens=int(_env_float("CHIEZO_ANSWER_MAX_TOKENS", 512)),
            answer_mode=_env_choice("CHIEZO_ANSWER_MODE", ANSWER_MODES, "rag"),
            answer_grounded=_env_bool("CHIEZO_ANSWER_GROUNDED", True),
            answer_plan=_env_choice(ENV["answer_plan"], PLANNERS, "auto"),
            first_token_timeout=_env_seconds(ENV["first_token_timeout"], 60.0),
            public_url=os.environ.get("CHIEZO_PUBLIC_URL") or None,
            llm_context=_env_positive_int(ENV["llm_context"]),
            plan_timeout=_env_seconds(ENV["plan_timeout"], 60.0),
            agent_deadline=_env_seconds(ENV["agent_deadline"], 180.0),
            location_ttl=_env_seconds(ENV["location_ttl"], 420.0),
            web_search=os.environ.get(ENV["web_search"]) or None,
            web_search_key=os.environ.get(ENV["web_search_key"]) or None,
            web_search_interval=_env_float(ENV["web_search_interval"], 1.0),
            answer_web=_env_bool(ENV["answer_web"], False),
        )
        return replace(settings, **overrides) if overrides else settings

    @property
    def corpus_dir(self) -> Path:
        return self.data_dir / "corpus"

    @property
    def notes_path(self) -> Path:
        return (self.notes_dir or self.data_dir / "notes") / "notes.db"


def is_loopback(host: str) -> bool:
    """Whether listening on ``host`` keeps the server to this machine."""
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
