"""The one client for OpenAI-compatible chat endpoints (llama.cpp's server, Ollama, vLLM, LM
Studio, a hosted API).

Several endpoints may be configured (``CHIEZO_LLM_URL``, comma separated); they are tried in
order, and the next is used when one cannot be reached or fails with a server error. What
comes back is told apart precisely, because "the model is missing" and "the server is down"
need different fixes: an endpoint that answers but lacks the configured model is a
:class:`ModelMissing` naming the models it has.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from .errors import LLMNotConfigured, LLMUnavailable, ModelMissing


@dataclass(frozen=True)
class Endpoint:
    url: str  # base URL, e.g. http://127.0.0.1:8081/v1
    model: str | None = None  # None: the server's only/first model
    key: str | None = None

    @property
    def base(self) -> str:
        url = self.url.rstrip("/")
        return url if url.endswith("/v1") else url + "/v1"

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"} if self.key else {}


def endpoints_from(urls: str | None, model: str | None, key: str | None) -> list[Endpoint]:
    return [Endpoint(u.strip(), model or None, key or None)
            for u in (urls or "").split(",") if u.strip()]  # fmt: skip


@dataclass
class ChatReply:
    content: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    model: str = ""
    endpoint: str = ""
    finish_reason: str | None = None


class LLMClient:
    def __init__(self, endpoints: list[Endpoint], timeout: float = 120.0):
        if not endpoints:
            raise LLMNotConfigured(
                "no language model endpoint is configured",
                hint="set CHIEZO_LLM_URL (e.g. http://127.0.0.1:8081/v1) and CHIEZO_LLM_MODEL",
            )
        self.endpoints = endpoints
        self.timeout = timeout
        self.streamed_model: str | None = None  # the model that answered the last stream

    # -- plain requests ------------------------------------------------------------------------

    def chat(
        self,
        messages: list[dict[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        max_tokens: int = 512,
        temperature: float = 0.0,
        timeout: float | None = None,
    ) -> ChatReply:
        failures: list[str] = []
        for endpoint in self.endpoints:
            body = self._body(endpoint, messages, tools, max_tokens, temperature, stream=False)
            try:
                response = httpx.post(f"{endpoint.base}/chat/completions", json=body,
                                      headers=endpoint.headers(),
                                      timeout=timeout or self.timeout)  # fmt: skip
            except httpx.HTTPError as exc:
                failures.append(f"{endpoint.url}: {_describe(exc)}")
                continue
            if response.status_code >= 500 or response.status_code in (401, 403, 429):
                failures.append(f"{endpoint.url}: HTTP {response.status_code}")
                continue
            if response.status_code >= 400:
                self._raise_for_model(endpoint, response)
                failures.append(
                    f"{endpoint.url}: HTTP {response.status_code} {response.text[:200]}"
                )
                continue
            return _reply(endpoint, response)
        raise LLMUnavailable("no language model endpoint answered", tried=failures,
                             hint="check CHIEZO_LLM_URL, or run `chiezo doctor`")  # fmt: skip

    def stream(
        self, messages: list[dict[str, Any]], *, max_tokens: int = 512, temperature: float = 0.0
    ) -> Iterator[str]:
        """Text deltas. The first endpoint that accepts the request streams; a failure before
        the first delta moves on to the next endpoint, one after it ends the stream with an
        error (what was sent cannot be taken back, nor sent again by another endpoint)."""
        failures: list[str] = []
        for endpoint in self.endpoints:
            body = self._body(endpoint, messages, None, max_tokens, temperature, stream=True)
            sent = False
            try:
                with httpx.stream("POST", f"{endpoint.base}/chat/completions", json=body,
                                  headers=endpoint.headers(), timeout=self.timeout) as response:  # fmt: skip
                    if response.status_code >= 400:
                        response.read()
                        if 400 <= response.status_code < 500:
                            self._raise_for_model(endpoint, response)
                        failures.append(f"{endpoint.url}: HTTP {response.status_code}")
                        continue
                    self.streamed_model = endpoint.model
                    for text, model in _deltas(response):
                        self.streamed_model = model or self.streamed_model
                        sent = True
                        yield text
                    return
            except (httpx.HTTPError, _CutShort) as exc:
                if sent:
                    raise LLMUnavailable(
                        f"the endpoint {endpoint.url} stopped in the middle of the answer "
                        f"({_describe(exc)})",
                        hint="the text so far is incomplete; ask again",
                    ) from exc
                failures.append(f"{endpoint.url}: {_describe(exc)}")
                continue
        raise LLMUnavailable("no language model endpoint answered", tried=failures,
                             hint="check CHIEZO_LLM_URL, or run `chiezo doctor`")  # fmt: skip

    # -- checks ----------------------------------------------------------------------------------

    def models(self, endpoint: Endpoint) -> list[str]:
        """The model ids an endpoint lists (``GET /v1/models``)."""
        response = httpx.get(f"{endpoint.base}/models", headers=endpoint.headers(), timeout=10)
        response.raise_for_status()
        data = response.json()
        return [m.get("id", "") for m in data.get("data", []) if isinstance(m, dict)]

    def check(self, endpoint: Endpoint) -> dict[str, Any]:
        """For ``chiezo doctor``: reachable? does the configured model exist?"""
        try:
            listed = self.models(endpoint)
        except httpx.HTTPStatusError as exc:
            return {"url": endpoint.url, "ok": False,
                    "problem": f"GET /v1/models answered HTTP {exc.response.status_code}"}  # fmt: skip
        except (httpx.HTTPError, ValueError) as exc:
            return {"url": endpoint.url, "ok": False, "problem": f"unreachable: {_describe(exc)}"}
        if endpoint.model and endpoint.model not in listed:
            return {"url": endpoint.url, "ok": False, "models": listed,
                    "problem": f"no model named {endpoint.model!r} here"}  # fmt: skip
        return {"url": endpoint.url, "ok": True, "models": listed,
                "model": endpoint.model or (listed[0] if listed else None)}  # fmt: skip

    # -- internals -------------------------------------------------------------------------------

    def _body(self, endpoint, messages, tools, max_tokens, temperature, *, stream: bool) -> dict:
        body: dict[str, Any] = {"messages": messages, "max_tokens": max_tokens,
                                "temperature": temperature, "stream": stream}  # fmt: skip
        if endpoint.model:
            body["model"] = endpoint.model
        if tools:
            body["tools"] = tools
        return body

    def _raise_for_model(self, endpoint: Endpoint, response: httpx.Response) -> None:
        """A 4xx that is really "no such model" is named as such, with the models there are."""
        if not endpoint.model:
            return
        try:
            listed = self.models(endpoint)
        except (httpx.HTTPError, ValueError):
            return
        if endpoint.model not in listed:
            raise ModelMissing(
                f"the endpoint {endpoint.url} has no model named {endpoint.model!r}",
                models=listed,
                hint="set CHIEZO_LLM_MODEL to one of the models listed",
            )


def _reply(endpoint: Endpoint, response: httpx.Response) -> ChatReply:
    try:
        data = response.json()
        choice = data["choices"][0]
        message = choice.get("message") or {}
    except (ValueError, KeyError, IndexError, TypeError) as exc:
        raise LLMUnavailable(f"the endpoint {endpoint.url} sent a reply that is not a chat "
                             f"completion: {response.text[:200]!r}") from exc  # fmt: skip
    return ChatReply(
        content=message.get("content") or "",
        tool_calls=list(message.get("tool_calls") or []),
        model=data.get("model") or endpoint.model or "",
        endpoint=endpoint.url,
        finish_reason=choice.get("finish_reason"),
    )


class _CutShort(Exception):
    """A streamed reply whose body ended before the model said it had finished."""


def _deltas(response: httpx.Response) -> Iterator[tuple[str, str | None]]:
    """(text, the model named in that chunk) for each streamed piece of text. A stream must
    end with ``[DONE]`` or a chunk carrying a ``finish_reason``: a server whose connection
    drops mid-answer (the body simply ends, without either) raises _CutShort instead of
    passing for a short answer."""
    finished = False
    for line in response.iter_lines():
        if not line.startswith("data:"):
            continue
        payload = line[5:].strip()
        if payload == "[DONE]":
            return
        try:
            chunk = json.loads(payload)
            choice = chunk["choices"][0]
        except (ValueError, KeyError, IndexError, TypeError):
            continue
        finished = finished or choice.get("finish_reason") is not None
        text = (choice.get("delta") or {}).get("content")
        if text:
            yield text, chunk.get("model")
    if not finished:
        raise _CutShort("the stream ended without [DONE]")


def _describe(exc: Exception) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return "timed out"
    if isinstance(exc, httpx.ConnectError):
        return "connection refused or host unreachable"
    if isinstance(exc, _CutShort):
        return str(exc)
    return type(exc).__name__ + (f": {exc}" if str(exc) else "")
