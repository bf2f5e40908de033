"""The one client for OpenAI-compatible chat endpoints (llama.cpp's server, Ollama, vLLM, LM
Studio, a hosted API).

Several endpoints may be configured (``CHIEZO_LLM_URL``, comma separated); they are tried in
order, and the next is used when one cannot be reached or fails with a server error. What
comes back is told apart precisely, because each cause needs its own fix, and the error says
which: an endpoint that answers but lacks the configured model is a :class:`ModelMissing`
naming the models it has; a request larger than the model's context a
:class:`ContextExceeded` with both sizes; a stage that ran past its deadline an
:class:`LLMTimeout` naming the stage and its setting; an endpoint that cannot be reached, or
answers something that is not a chat completion, an :class:`LLMUnavailable` saying so.

The client also learns the model's context window (:meth:`LLMClient.window`: llama.cpp
``/props``, ``/v1/models`` metadata, Ollama ``/api/show``, else ``CHIEZO_LLM_CONTEXT``) and
counts tokens with the endpoint's own ``/tokenize`` where it has one (answer/context.py estimates
otherwise): answer/budget.py fits what the model reads into that window.
"""

from __future__ import annotations

import json
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from chiezo.answer import context
from chiezo.answer.context import ContextWindow, Overflow
from chiezo.core.addresses import Address, Credentials
from chiezo.core.config import ENV
from chiezo.core.errors import (
    ContextExceeded,
    LLMNotConfigured,
    LLMTimeout,
    LLMUnavailable,
    ModelMissing,
)

PROBE_TIMEOUT = httpx.Timeout(5.0, connect=3.0)  # learning the context: a quick question
CONNECT_TIMEOUT = 10.0  # a model request's connection; the rest is the stage's deadline
# Sampling against loops, sent with every answer (docs/design.md §38.2: on SmolLM2-135M greedy
# decoding looped on N of M questions without them). llama.cpp: a mild repeat penalty over the
# recent window and its DRY sampler, which penalises extending a sequence already written;
# elsewhere the one standard knob.
LOOP_GUARDS: dict[str, dict[str, Any]] = {
    "llama.cpp": {"repeat_penalty": 1.1, "repeat_last_n": 256, "dry_multiplier": 0.8},
    "openai": {"frequency_penalty": 0.3},
}
MIN_FIRST_TOKEN = 10.0  # seconds: the least an adapted first-token deadline allows
PACE_MARGIN = 4.0  # an adapted first-token deadline: this many times the expected wait


@dataclass(frozen=True)
class Endpoint:
    """A model server. ``url`` is its address without user, password or query — what every
    message and record names; those travel apart (``credentials``, ``params``) and go only
    into the requests (core/addresses.py): an address given as
    ``http://user:pw@host:8081/v1?api_key=K`` is taken apart here."""

    url: str  # base URL, e.g. http://127.0.0.1:8081/v1
    model: str | None = None  # None: the server's only/first model
    key: str | None = None
    credentials: Credentials | None = field(default=None, repr=False)
    params: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def __post_init__(self) -> None:
        address = Address.parse(self.url)
        if address.url != self.url:
            object.__setattr__(self, "url", address.url)
            object.__setattr__(self, "credentials", self.credentials or address.credentials)
            object.__setattr__(self, "params", self.params or address.params)

    @property
    def base(self) -> str:
        url = self.url.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"

    @property
    def root(self) -> str:
        """The server's own root (llama.cpp's ``/props`` and ``/tokenize``, Ollama's ``/api``)."""
        return self.base[: -len("/v1")]

    @property
    def shown(self) -> str:
        """The address as a person may read it: a query's names, never its values."""
        return Address(self.url, params=self.params).shown()

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}

    def sent(self) -> dict[str, Any]:
        """What each request to this endpoint carries besides its body: the key, the user and
        password, the query given with the address."""
        return {
            "headers": self.headers(),
            "auth": httpx.BasicAuth(*self.credentials.auth) if self.credentials else None,
            "params": list(self.params) or None,
        }


def endpoints_from(urls: str | None, model: str | None, key: str | None) -> list[Endpoint]:
    return [
        Endpoint(u.strip(), model or None, key or None)
        for u in (urls or "").split(",")
        if u.strip()
    ]


@dataclass(frozen=True)
class Stage:
    """A part of answering that asks the model: what it is called in an error, the seconds it
    may take and the setting that sets them."""

    name: str  # "planning", "the answer", "the agent's run"
    seconds: float
    setting: str  # the environment variable


def answer_stage(seconds: float) -> Stage:
    return Stage("the answer", seconds, ENV["llm_timeout"])


@dataclass
class Call:
    """One model call, timed: what the answers log keeps and a result reports (``calls``)."""

    stage: str
    tokens_in: int | None = None  # the endpoint's count where it reports usage, else estimated
    tokens_out: int | None = None
    first_token_s: float | None = None
    seconds: float | None = None
    finish: str | None = None  # stop, length, the failure's kind, or stopped (by Chiezo)
    started: float = field(default_factory=time.monotonic, repr=False)

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def done(self, finish: str | None = None, *, usage: dict | None = None) -> None:
        """The call ended (the first ending counts: later calls are no-ops)."""
        if self.seconds is None:
            self.seconds = round(self.elapsed(), 3)
            self.finish = self.finish or finish
        self.counted(usage)

    def counted(self, usage: Any) -> None:
        """The endpoint's own token counts (a reply's or a stream's last ``usage``)."""
        if isinstance(usage, dict):
            self.tokens_in = _int(usage.get("prompt_tokens")) or self.tokens_in
            self.tokens_out = _int(usage.get("completion_tokens")) or self.tokens_out

    def to_dict(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "seconds": self.seconds,
            "first_token_s": None if self.first_token_s is None else round(self.first_token_s, 3),
            "tokens_in": self.tokens_in,
            "tokens_out": self.tokens_out,
            "finish": self.finish,
        }


class _Pace:
    """How fast each endpoint read a prompt, as this process saw it (seconds per prompt
    token, the slowest recent call): the next answer's first-token deadline is sized by it."""

    def __init__(self) -> None:
        self._per_token: dict[str, float] = {}

    def learn(self, endpoint: Endpoint, call: Call) -> None:
        if call.first_token_s is None or not call.tokens_in:
            return
        seen = call.first_token_s / call.tokens_in
        self._per_token[endpoint.url] = max(seen, 0.5 * self._per_token.get(endpoint.url, 0))

    def expected(self, endpoint: Endpoint, prompt_tokens: int) -> float | None:
        per_token = self._per_token.get(endpoint.url)
        return None if per_token is None else per_token * prompt_tokens


_PACE = _Pace()


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass
class ChatReply:
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    model: str = ""
    endpoint: str = ""
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None


@dataclass
class Probe:
    """What one endpoint said about itself: its context, whether it tokenizes, whether its
    chat template renders tool schemas into the prompt."""

    endpoint: Endpoint
    window: ContextWindow | None = None
    tokenizer: str | None = None  # "llama.cpp" | "vllm": POST {root}/tokenize
    renders_tools: bool | None = None  # llama.cpp's chat_template_caps.supports_tools
    reachable: bool = True


@dataclass(frozen=True)
class Count:
    tokens: int
    exact: bool  # by the endpoint's tokenizer (else estimated, answer/context.py)


class LLMClient:
    def __init__(
        self, endpoints: list[Endpoint], timeout: float = 120.0, context_tokens: int | None = None
    ):
        if not endpoints:
            raise LLMNotConfigured(
                "no language model endpoint is configured",
                hint="set CHIEZO_LLM_URL (e.g. http://127.0.0.1:8081/v1) and CHIEZO_LLM_MODEL",
            )
        self.endpoints = endpoints
        self.timeout = timeout
        self.context_tokens = context_tokens  # CHIEZO_LLM_CONTEXT (None: unset)
        self.streamed_model: str | None = None  # the model that answered the last stream
        self._probe: Probe | None = None
        self._learned: ContextWindow | None = None  # from an overflow reply: the truth
        self.calls: list[Call] = []  # each model call made through this client, timed

    # -- plain requests ------------------------------------------------------------------------

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        timeout: float | None = None,
        stage: Stage | None = None,
    ) -> ChatReply:
        """One reply. ``timeout``: seconds this request may take (default: the client's);
        ``stage``: what a timeout is reported as (default: the answer, ``CHIEZO_LLM_TIMEOUT``)."""
        seconds = timeout or self.timeout
        stage = stage or answer_stage(self.timeout)
        failures: list[str] = []
        late: Endpoint | None = None  # the first endpoint that took too long
        for endpoint in self.endpoints:
            body = self._body(endpoint, messages, tools, max_tokens, temperature, stream=False)
            record = Call(stage.name, self.count_prompt(messages))
            try:
                response = httpx.post(
                    f"{endpoint.base}/chat/completions",
                    json=body,
                    **endpoint.sent(),
                    timeout=_request_timeout(seconds),
                )
            except httpx.HTTPError as exc:
                late = late or (endpoint if _working_timeout(exc) else None)
                failures.append(f"{endpoint.url}: {_describe(exc)}")
                record.done(finish=_ended_by(exc))
                self.calls.append(record)
                continue
            if response.status_code >= 400:
                record.done(finish=f"HTTP {response.status_code}")
                self.calls.append(record)
                failures.append(self._refused(endpoint, response))
                continue
            reply = _reply(endpoint, response)
            record.done(reply.finish_reason, usage=reply.usage)
            self.calls.append(record)
            return reply
        raise _none_answered(failures, late, stage)

    def stream(
        self,
        messages: list[dict[str, Any]],
        *,
        max_tokens: int = 512,
        temperature: float = 0.0,
        stage: Stage | None = None,
        first_token: float | None = None,
    ) -> Generator[str, None, None]:
        """Text deltas. The first endpoint that accepts the request streams; a failure before
        the first delta moves on to the next endpoint, one after it ends the stream with an
        error (what was sent cannot be taken back, nor sent again by another endpoint). Two
        deadlines: ``first_token`` seconds until the first visible piece (whitespace is not
        one; default: the stage's), and the stage's for the whole answer, not each piece: a
        server that trickles forever is stopped too. The request carries the sampling guards
        against loops the endpoint takes (:data:`LOOP_GUARDS`); the call is recorded in
        :attr:`calls`."""
        stage = stage or answer_stage(self.timeout)
        wait = min(first_token or stage.seconds, stage.seconds)
        failures: list[str] = []
        late: Endpoint | None = None
        for endpoint in self.endpoints:
            record = Call(stage.name, self.count_prompt(messages))
            body = self._body(endpoint, messages, None, max_tokens, temperature, stream=True)
            body.update(self.loop_guards(endpoint))
            sent = False
            try:
                with httpx.stream(
                    "POST",
                    f"{endpoint.base}/chat/completions",
                    json=body,
                    **endpoint.sent(),
                    timeout=_request_timeout(wait),
                ) as response:
                    if response.status_code >= 400:
                        response.read()
                        record.done(finish=f"HTTP {response.status_code}")  # as chat() keeps it
                        self.calls.append(record)
                        failures.append(self._refused(endpoint, response))
                        continue
                    self.streamed_model = endpoint.model
                    self.calls.append(record)
                    for text, model in _deltas(response, endpoint, record):
                        self.streamed_model = model or self.streamed_model
                        if text and not sent and text.strip():
                            sent = True
                            record.first_token_s = record.elapsed()
                        if text and sent:
                            yield text
                        if not sent and record.elapsed() > wait:
                            raise _first_token_timeout(endpoint, wait)
                        if record.elapsed() > stage.seconds:
                            raise _timeout(endpoint, stage, mid_answer=sent)
                    record.done()
                    _PACE.learn(endpoint, record)
                    return
            except (httpx.HTTPError, _CutShort) as exc:
                record.done(finish=_ended_by(exc))
                if sent and _working_timeout(exc):
                    raise _timeout(endpoint, stage, mid_answer=True) from exc
                late = late or (endpoint if _working_timeout(exc) else None)
                if sent:
                    raise LLMUnavailable(
                        f"the endpoint {endpoint.url} stopped in the middle of the answer "
                        f"({_describe(exc)})",
                        hint="the text so far is incomplete; ask again",
                        cause="cut_short",
                    ) from exc
                failures.append(f"{endpoint.url}: {_describe(exc)}")
                continue
            finally:
                record.done(finish="stopped")  # the reader stopped early (a loop): a no-op else
        if late is not None and wait < stage.seconds:  # none sent a first piece in time
            raise _with_others(_first_token_timeout(late, wait), failures, late)
        raise _none_answered(failures, late, stage)

    def first_token_deadline(self, messages: list[dict[str, Any]], configured: float) -> float:
        """Seconds to wait for an answer's first piece: ``configured``
        (``CHIEZO_LLM_FIRST_TOKEN_TIMEOUT``), or less once this process has seen the endpoint
        read a prompt — :data:`PACE_MARGIN` times what reading this one should take, never
        under :data:`MIN_FIRST_TOKEN` (a busy machine is slower than the last call)."""
        expected = _PACE.expected(self.endpoints[0], self.count_prompt(messages))
        if expected is None:
            return configured
        return min(configured, max(MIN_FIRST_TOKEN, PACE_MARGIN * expected))

    def count_prompt(self, messages: list[dict[str, Any]]) -> int:
        """The prompt's tokens, estimated (no request: the count is for timing)."""
        return context.estimate_tokens(context.message_text(messages, None))

    def loop_guards(self, endpoint: Endpoint) -> dict[str, Any]:
        """The sampling settings against loops this endpoint takes: llama.cpp's repeat
        penalty and DRY sampler where its ``/props`` answered, else the standard
        ``frequency_penalty`` every OpenAI-compatible server knows."""
        probe = self.probe()
        if probe.endpoint == endpoint and probe.tokenizer == "llama.cpp":
            return dict(LOOP_GUARDS["llama.cpp"])
        return dict(LOOP_GUARDS["openai"])

    # -- the context window and counting ---------------------------------------------------------

    def window(self, configured: int | None = None) -> ContextWindow:
        """Tokens one request may hold: what the first endpoint that says tells (the smaller
        of that and ``configured``, ``CHIEZO_LLM_CONTEXT``, when both do), else
        ``configured``, else assumed (:data:`context.DEFAULT_CONTEXT`). An overflow reply's
        figure overrides them all: the endpoint that refused knows best."""
        if self._learned is not None:
            return self._learned
        said = self.probe().window
        configured = configured or self.context_tokens
        setting = ENV["llm_context"]
        if said is not None and configured and configured < said.tokens:
            return ContextWindow(
                configured,
                f"{setting}, below the endpoint's {said.tokens:,}",
                said.slots,
                said.endpoint,
            )
        if said is not None:
            return said
        if configured:
            return ContextWindow(configured, setting)
        return ContextWindow(
            context.DEFAULT_CONTEXT,
            f"assumed: the endpoint does not say; set {setting}",
            said=False,
        )

    def probe(self) -> Probe:
        """What the first endpoint that answers says about itself (asked once per client)."""
        if self._probe is None:
            probes = []
            for endpoint in self.endpoints:
                found = _probe(endpoint)
                probes.append(found)
                if found.window is not None:
                    break
            self._probe = next(
                (p for p in probes if p.window is not None),
                next((p for p in probes if p.reachable), probes[0]),
            )
        return self._probe

    def count(self, messages: list[dict[str, Any]], tools: list[dict] | None = None) -> Count:
        """Tokens of a chat request's prompt: the endpoint's ``/tokenize`` where it has one,
        plus the template's markup; estimated otherwise. Tool schemas count only where the
        chat template renders them (llama.cpp says; elsewhere they are assumed to)."""
        probe = self.probe()
        if tools and probe.renders_tools is False:
            tools = None
        text = context.message_text(messages, tools)
        tokens = self._tokenize(text)
        exact = tokens is not None
        if tokens is None:
            tokens = context.estimate_tokens(text)
        return Count(tokens + context.overhead(messages), exact)

    def tokens_per_char(self, text: str) -> float:
        """Tokens a character of text like ``text`` takes for this model (measured with its
        tokenizer where it has one)."""
        text = text.strip()
        tokens = self._tokenize(text) if text else None
        if tokens:
            return tokens / len(text)
        return context.tokens_per_char(text)

    def learn(self, overflow: Overflow) -> ContextWindow | None:
        """The context an overflow reply names becomes this client's window."""
        if overflow.context_tokens:
            probe = self.probe()
            self._learned = ContextWindow(
                overflow.context_tokens,
                "the endpoint's overflow reply",
                endpoint=probe.endpoint.url,
            )
        return self._learned

    def _tokenize(self, text: str) -> int | None:
        probe = self.probe()
        if probe.tokenizer is None or not text:
            return None
        endpoint = probe.endpoint
        body: dict[str, Any] = {"content": text}
        if probe.tokenizer == "vllm":
            body = {"prompt": text, **({"model": endpoint.model} if endpoint.model else {})}
        try:
            response = httpx.post(
                f"{endpoint.root}/tokenize",
                json=body,
                **endpoint.sent(),
                timeout=PROBE_TIMEOUT,
            )
            data = response.json() if response.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            data = None
        if isinstance(data, dict):
            if isinstance(data.get("count"), int):
                return data["count"]
            if isinstance(data.get("tokens"), list):
                return len(data["tokens"])
        probe.tokenizer = None  # it does not answer as it should: estimate from now on
        return None

    # -- checks ----------------------------------------------------------------------------------

    def models(self, endpoint: Endpoint) -> list[str]:
        """The model ids an endpoint lists (``GET /v1/models``)."""
        response = httpx.get(f"{endpoint.base}/models", **endpoint.sent(), timeout=10)
        response.raise_for_status()
        data = response.json()
        return [m.get("id", "") for m in data.get("data", []) if isinstance(m, dict)]

    def check(self, endpoint: Endpoint) -> dict[str, Any]:
        """For ``chiezo doctor`` and the web chat: reachable? which models does it list, and
        which one answers the configured name? its context? A name that is not listed is
        tried with a 1-token request before it is called missing: llama.cpp's server lists
        its model under the file's path or ``--alias`` and answers any name with it, where
        Ollama and vLLM refuse an unknown one."""
        try:
            listed = self.models(endpoint)
        except httpx.HTTPStatusError as exc:
            return {
                "url": endpoint.shown,
                "ok": False,
                "problem": f"GET /v1/models answered HTTP {exc.response.status_code}",
            }
        except (httpx.HTTPError, ValueError, AttributeError) as exc:
            return {"url": endpoint.shown, "ok": False, "problem": f"unreachable: {_describe(exc)}"}
        out = {
            "url": endpoint.shown,
            "ok": True,
            "models": listed,
            "model": endpoint.model or (listed[0] if listed else None),
        }
        if endpoint.model and endpoint.model not in listed:
            tried = _try_unlisted(endpoint, listed)
            if tried.problem is not None:
                return {
                    "url": endpoint.shown,
                    "ok": False,
                    "models": listed,
                    "problem": tried.problem,
                }
            out["model"], out["note"] = tried.model, tried.note
        said = _probe(endpoint).window
        if said is not None:
            out["context"] = said.tokens
            out["context_source"] = said.source
        return out

    # -- internals -------------------------------------------------------------------------------

    def _body(
        self,
        endpoint: Endpoint,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        max_tokens: int,
        temperature: float,
        *,
        stream: bool,
    ) -> dict:
        body: dict[str, Any] = {
            "messages": messages,
            "max_tokens": max_tokens,
            "temperature": temperature,
            "stream": stream,
        }
        if stream:  # the token counts, in a last chunk (OpenAI's option; llama.cpp, vLLM)
            body["stream_options"] = {"include_usage": True}
        if endpoint.model:
            body["model"] = endpoint.model
        if tools:
            body["tools"] = tools
        return body

    def _refused(self, endpoint: Endpoint, response: httpx.Response) -> str:
        """An error reply, told apart: too large for the context (raised: another endpoint
        would get the same request), no such model (raised), else what to report of it."""
        text = _text(response)
        overflow = context.overflow_of(response.status_code, text)
        if overflow is not None:
            self.learn(overflow)
            raise context_exceeded(overflow, endpoint)
        if 400 <= response.status_code < 500 and response.status_code not in (401, 403, 429):
            self._raise_for_model(endpoint, response)
        return f"{endpoint.url}: HTTP {response.status_code}" + _said(text)

    def _raise_for_model(self, endpoint: Endpoint, response: httpx.Response) -> None:
        """A 4xx that is really "no such model" is named as such, with the models there are."""
        if not endpoint.model:
            return
        try:
            listed = self.models(endpoint)
        except (httpx.HTTPError, ValueError, AttributeError):
            return
        if endpoint.model not in listed:
            raise ModelMissing(
                f"the endpoint {endpoint.url} has no model named {endpoint.model!r}",
                models=listed,
                cause="model_missing",
                hint=f"set {ENV['llm_model']} to one of the models listed",
            )


def _ended_by(exc: Exception) -> str:
    """How a failed call ended, as a call's record says it: ``timeout``, ``cut_short`` (the
    stream ended before the model said it had finished), ``unreachable``, else ``failed``."""
    if isinstance(exc, _CutShort):
        return "cut_short"
    if _working_timeout(exc):
        return "timeout"
    if isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout):
        return "unreachable"
    return "failed"


def _working_timeout(exc: Exception) -> bool:
    """A timeout while the model works (not while connecting: that endpoint is down)."""
    return isinstance(exc, httpx.TimeoutException) and not isinstance(
        exc, httpx.ConnectTimeout | httpx.PoolTimeout
    )


def _request_timeout(seconds: float) -> httpx.Timeout:
    return httpx.Timeout(seconds, connect=min(seconds, CONNECT_TIMEOUT))


def _timeout(endpoint: Endpoint, stage: Stage, *, mid_answer: bool = False) -> LLMTimeout:
    said = "had not finished" if mid_answer else "did not finish"
    return LLMTimeout(
        f"the model {said} {stage.name} within {stage.seconds:g} s ({stage.setting}) at "
        f"{endpoint.url}",
        stage=stage.name,
        seconds=stage.seconds,
        setting=stage.setting,
        cause="timeout",
        hint=f"raise {stage.setting} (now {stage.seconds:g} s), or give the model less to "
        "read (a smaller CHIEZO_ANSWER_BUDGET) or a faster model"
        + ("; the text so far is incomplete" if mid_answer else ""),
    )


def context_exceeded(overflow: Overflow, endpoint: Endpoint) -> ContextExceeded:
    """The error for an overflow reply: both sizes where the endpoint gave them."""
    sizes = []
    if overflow.prompt_tokens:
        sizes.append(f"the request took {overflow.prompt_tokens:,} tokens")
    if overflow.context_tokens:
        sizes.append(f"the model's context holds {overflow.context_tokens:,}")
    detail = f" ({'; '.join(sizes)})" if sizes else f": {overflow.message[:200]}"
    return ContextExceeded(
        f"the request does not fit the context of the model at {endpoint.url}{detail}",
        prompt_tokens=overflow.prompt_tokens,
        context_tokens=overflow.context_tokens,
        setting=ENV["answer_budget"],
        cause="context_exceeded",
        hint="give the model a larger context (llama.cpp: -c, per slot with --parallel; "
        f"Ollama: num_ctx), or a smaller {ENV['answer_budget']} or {ENV['answer_max_tokens']}",
    )


def _first_token_timeout(endpoint: Endpoint, seconds: float) -> LLMTimeout:
    setting = ENV["first_token_timeout"]
    return LLMTimeout(
        f"the model at {endpoint.url} had not begun the answer within {seconds:g} s",
        stage="the first token",
        seconds=seconds,
        setting=setting,
        cause="first_token",
        hint=f"raise {setting}, or give the model less to read (a smaller "
        f"{ENV['answer_budget']}) or a faster model",
    )


def _with_others(error: LLMTimeout, failures: list[str], late: Endpoint) -> LLMTimeout:
    others = [f for f in failures if not f.startswith(f"{late.url}:")]
    if others:
        error.message += "; " + "; ".join(others)
        error.args = (error.message,)
    error.extras["tried"] = failures
    return error


def _none_answered(failures: list[str], late: Endpoint | None, stage: Stage) -> LLMUnavailable:
    """No endpoint answered: the stage's timeout where one took too long (the others'
    failures listed with it), else what each did."""
    if late is not None:
        return _with_others(_timeout(late, stage), failures, late)
    reached = [
        f
        for f in failures
        if "connection refused" not in f and "unreachable" not in f and "could not connect" not in f
    ]
    return LLMUnavailable(
        "no language model endpoint answered: " + "; ".join(failures),
        tried=failures,
        cause="failed" if reached else "unreachable",
        hint=f"check {ENV['llm_url']} and that the model server is running, or run `chiezo doctor`",
    )


def _probe(endpoint: Endpoint) -> Probe:
    """Ask one endpoint about itself, with GETs only (a POST goes only to an endpoint known to
    take it): llama.cpp's ``/props``, then ``/v1/models``, then Ollama's ``/api/version`` and
    ``/api/show``. Whatever fails or is garbage is no answer, never an error."""
    probe = Probe(endpoint)
    props = _get_json(endpoint, f"{endpoint.root}/props")
    if props is _UNREACHABLE:
        probe.reachable = False
        return probe
    said = context.from_props(props)
    if isinstance(props, dict) and isinstance(props.get("default_generation_settings"), dict):
        probe.tokenizer = "llama.cpp"
        caps = props.get("chat_template_caps")
        if isinstance(caps, dict) and isinstance(caps.get("supports_tools"), bool):
            probe.renders_tools = caps["supports_tools"]
    if said is not None:
        per_request, slots = said
        probe.window = ContextWindow(per_request, "llama.cpp /props", slots, endpoint.url)
        return probe
    models = _get_json(endpoint, f"{endpoint.base}/models")
    tokens = context.from_models(models, endpoint.model)
    if isinstance(models, dict) and any(
        isinstance(m, dict) and m.get("owned_by") == "vllm" for m in models.get("data") or []
    ):
        probe.tokenizer = "vllm"
    if tokens:
        probe.window = ContextWindow(tokens, "GET /v1/models", endpoint=endpoint.url)
        return probe
    version = _get_json(endpoint, f"{endpoint.root}/api/version")
    if isinstance(version, dict) and "version" in version:  # Ollama
        model = endpoint.model or next(iter(_listed(models)), None)
        try:
            shown = httpx.post(
                f"{endpoint.root}/api/show",
                json={"model": model or ""},
                **endpoint.sent(),
                timeout=PROBE_TIMEOUT,
            ).json()
        except (httpx.HTTPError, ValueError):
            shown = None
        tokens = context.from_ollama_show(shown)
        if tokens:
            probe.window = ContextWindow(tokens, "Ollama /api/show", endpoint=endpoint.url)
    return probe


_UNREACHABLE = object()


def _get_json(endpoint: Endpoint, url: str) -> Any:
    try:
        response = httpx.get(url, **endpoint.sent(), timeout=PROBE_TIMEOUT)
    except (httpx.ConnectError, httpx.ConnectTimeout):
        return _UNREACHABLE
    except httpx.HTTPError:
        return None
    if response.status_code != 200:
        return None
    try:
        return response.json()
    except ValueError:
        return None


def _listed(models: Any) -> list[str]:
    rows = models.get("data") if isinstance(models, dict) else None
    return [r["id"] for r in rows or [] if isinstance(r, dict) and isinstance(r.get("id"), str)]


def _text(response: httpx.Response) -> str:
    try:
        return response.text
    except (UnicodeDecodeError, httpx.HTTPError):
        return ""


def _said(text: str) -> str:
    """What an error reply says, short: its JSON ``error.message`` where it has one."""
    try:
        data = json.loads(text)
        error = data.get("error") if isinstance(data, dict) else None
        message = error.get("message") if isinstance(error, dict) else error
    except ValueError:
        message = text
    message = " ".join(str(message or "").split())[:200]
    return f" ({message})" if message else ""


def _reply(endpoint: Endpoint, response: httpx.Response) -> ChatReply:
    try:
        data = response.json()
        choice = data["choices"][0]
        message = choice.get("message") or {}
        content = message.get("content") or ""
        if not isinstance(content, str):
            raise TypeError("content is not text")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
        raise LLMUnavailable(
            f"the endpoint {endpoint.url} sent a reply that is not a chat "
            f"completion: {_text(response)[:200]!r}",
            cause="bad_reply",
            hint=f"is {ENV['llm_url']} an OpenAI-compatible endpoint (…/v1)?",
        ) from exc
    calls = message.get("tool_calls") or []
    return ChatReply(
        content=content,
        tool_calls=[c for c in calls if isinstance(c, dict)] if isinstance(calls, list) else [],
        model=data.get("model") if isinstance(data.get("model"), str) else endpoint.model or "",
        endpoint=endpoint.url,
        finish_reason=choice.get("finish_reason"),
        usage=data.get("usage") if isinstance(data.get("usage"), dict) else None,
    )


class _CutShort(Exception):
    """A streamed reply whose body ended before the model said it had finished."""


def _deltas(
    response: httpx.Response, endpoint: Endpoint, record: Call
) -> Iterator[tuple[str, str | None]]:
    """(text, the model named in that chunk) for each streamed piece of text. A stream must
    end with ``[DONE]`` or a chunk carrying a ``finish_reason``: a server whose connection
    drops mid-answer (the body simply ends, without either) raises _CutShort instead of
    passing for a short answer; one that sends an error chunk has it raised (an overflow as
    what it is); one whose body is no stream of chat chunks at all is said to be so."""
    finished = False
    chunks = 0
    for line in response.iter_lines():
        yield "", None  # the caller's deadlines are checked on every line, text or not
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            chunk = json.loads(payload)
        except ValueError:
            continue
        if isinstance(chunk, dict) and chunk.get("error") is not None:
            _raise_stream_error(chunk, endpoint)
        if isinstance(chunk, dict):
            record.counted(chunk.get("usage"))
        try:
            choice = chunk["choices"][0]
            text = (choice.get("delta") or {}).get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            continue
        chunks += 1
        finished = finished or choice.get("finish_reason") is not None
        record.finish = choice.get("finish_reason") or record.finish
        if isinstance(text, str) and text:
            model = chunk.get("model")
            yield text, model if isinstance(model, str) else None
    if not finished:
        raise _CutShort(
            "the stream ended without [DONE]"
            if chunks
            else "the reply is not a stream of chat completion chunks"
        )


def _raise_stream_error(chunk: dict, endpoint: Endpoint) -> None:
    text = json.dumps(chunk, ensure_ascii=False)
    overflow = context.overflow_of(400, text)
    if overflow is not None:
        raise context_exceeded(overflow, endpoint)
    raise LLMUnavailable(
        f"the endpoint {endpoint.url} reported an error in its reply{_said(text)}", cause="failed"
    )


def _describe(exc: Exception) -> str:
    if isinstance(exc, httpx.ConnectTimeout):
        return "could not connect: timed out"
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host unreachable"
    if isinstance(exc, _CutShort):
        return str(exc)
    return type(exc).__name__ + (f": {exc}" if str(exc) else "")


# -- a model name the endpoint does not list (LLMClient.check) ----------------------------------

# One token: llama.cpp's server running SmolLM2-135M on 2 cores took 2.2 s cold (33 prompt
# tokens), 0.2 s with its prompt cached; with the 2 cores loaded 5 times over, 1.4-8.6 s.
# 15 s leaves room for a busy machine without making `chiezo doctor` hang on a stuck one.
TRY_TIMEOUT = httpx.Timeout(15.0, connect=3.0)
# An endpoint that answered a name keeps answering it while it runs: the web chat asks for
# the status on every page load, and each try takes a slot a real answer may be waiting for.
TRIED_FOR = 300.0  # seconds a success is trusted (a restarted server is seen within them)
_answered: dict[tuple[str, str], tuple[float, Tried]] = {}


@dataclass(frozen=True)
class Tried:
    """What a 1-token request under an unlisted name showed: the model that answered and a
    note saying so, or the problem."""

    model: str | None = None
    note: str | None = None
    problem: str | None = None


def _try_unlisted(endpoint: Endpoint, listed: list[str]) -> Tried:
    """Ask the endpoint for one token under the configured name (an answer is a fact, the
    list only a claim): 200 is a usable endpoint; a 4xx other than the key's is "no such
    model" (Ollama, vLLM: 404; others 400), named as before."""
    asked = endpoint.model or ""
    known = _answered.get((endpoint.url, asked))
    if known is not None and time.monotonic() - known[0] < TRIED_FOR:
        return known[1]
    body = {
        "model": asked,
        "messages": [{"role": "user", "content": "Say OK."}],
        "max_tokens": 1,
        "temperature": 0.0,
        "stream": False,
    }
    tried = f"{asked!r} is not listed, and a 1-token request naming it"
    try:
        response = httpx.post(
            f"{endpoint.base}/chat/completions", json=body, **endpoint.sent(), timeout=TRY_TIMEOUT
        )
    except httpx.TimeoutException:
        seconds = TRY_TIMEOUT.read
        return Tried(problem=f"{tried} got no answer within {seconds:g} s (busy, or stuck?)")
    except httpx.HTTPError as exc:
        return Tried(problem=f"{tried} failed: {_describe(exc)}")
    code = response.status_code
    if 400 <= code < 500 and code not in (401, 403, 429):
        return Tried(problem=f"no model named {asked!r} here" + _said(_text(response)))
    if code != 200:
        return Tried(problem=f"{tried} answered HTTP {code}" + _said(_text(response)))
    try:
        replied = _reply(endpoint, response).model
    except LLMUnavailable:
        return Tried(problem=f"{tried} got a reply that is not a chat completion")
    model = answering_model(replied, listed, asked)
    if model == asked:  # it neither says nor can be told: one of several, unnamed
        found = Tried(asked, f"{asked!r} is not listed; this endpoint answers it all the same")
    else:
        found = Tried(model, f"{asked!r} is not listed; this endpoint answers it with {model!r}")
    _answered[(endpoint.url, asked)] = (time.monotonic(), found)
    return found


def answering_model(replied: str | None, listed: list[str], asked: str) -> str:
    """The model that answered a request naming ``asked``: the reply's ``model`` where the
    endpoint lists it (llama.cpp names its alias there), else the only one listed (a server
    that echoes the name asked for serves one model), else what the reply says."""
    if replied and replied in listed:
        return replied
    if len(listed) == 1:
        return listed[0]
    return replied or asked
