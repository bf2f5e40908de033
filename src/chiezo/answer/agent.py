"""Agent mode: the model calls the library's own tools, within budgets.

The tools are the MCP server's read-only tools, converted to OpenAI function schemas with
their descriptions (answering never writes notes). Budgets: steps, characters per tool result,
an overall deadline; when one runs out the model is asked once more *without* tools for the
final answer instead of stopping empty. An identical call repeated in a run gets the earlier
result back, marked as a repeat. Tool errors (unknown source, unknown field, the 400 reasons)
go back to the model as material. References are the documents seen in tool results, in
order; each tool result ends with the numbers to cite them by.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import BadQuery
from ..llm import LLMClient
from .plan import strip_reasoning
from .rag import HISTORY_TURNS, Answer, citations

DEFAULT_STEPS = 6
DEFAULT_RESULT_CHARS = 3000
DEFAULT_DEADLINE = 180.0

AGENT_PROMPT = """You answer questions by looking things up in a library with the tools given.
Search first, read documents when a snippet is not enough, and answer ONLY from what the tools
returned, citing documents as [n] with the numbers given after each tool result. If the library
does not say, answer that it does not say. Answer briefly, in the language of the question."""

FINAL_PROMPT = """No more tool calls. Answer the question now from the tool results above,
citing [n]; if they do not contain the answer, say the library does not say."""


@dataclass(frozen=True)
class Budgets:
    steps: int = DEFAULT_STEPS
    result_chars: int = DEFAULT_RESULT_CHARS
    deadline: float = DEFAULT_DEADLINE

    def checked(self) -> Budgets:
        if not 1 <= self.steps <= 20:
            raise BadQuery(f"steps must be within 1..20, got {self.steps}")
        if not 200 <= self.result_chars <= 20_000:
            raise BadQuery(f"result_chars must be within 200..20000, got {self.result_chars}")
        if not 1 <= self.deadline <= 600:
            raise BadQuery(f"deadline must be within 1..600 seconds, got {self.deadline}")
        return self


class References:
    """Documents seen in tool results, numbered in the order first seen."""

    def __init__(self) -> None:
        self.items: list[dict[str, Any]] = []
        self._index: dict[tuple[str, int], int] = {}

    def add(self, doc: dict[str, Any]) -> int | None:
        source, doc_id = doc.get("source"), doc.get("doc_id")
        if not isinstance(source, str) or not isinstance(doc_id, int):
            return None
        key = (source, doc_id)
        if key not in self._index:
            self.items.append({"n": len(self.items) + 1, "source": source, "doc_id": doc_id,
                               "title": doc.get("title", ""), "url": doc.get("url")})  # fmt: skip
            self._index[key] = len(self.items)
        return self._index[key]

    def from_result(self, data: Any) -> list[int]:
        """Numbers of the documents in a tool's structured result (hits, docs, one doc)."""
        found: list[int] = []
        if not isinstance(data, dict):
            return found
        rows = data.get("hits") or data.get("docs") or data.get("notes") or []
        if "doc_id" in data and "source" in data:
            rows = [data]
        for row in rows if isinstance(rows, list) else []:
            if isinstance(row, dict):
                if "source" not in row and "source" in data:
                    row = {**row, "source": data["source"]}
                n = self.add(row)
                if n is not None and n not in found:
                    found.append(n)
        return found


def tool_schemas(server) -> list[dict[str, Any]]:
    tools = asyncio.run(server.list_tools())
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description or "",
                "parameters": t.input_schema,
            },
        }  # fmt: skip
        for t in tools
        if t.annotations is not None and t.annotations.read_only_hint
    ]


def run_agent(
    service,
    question: str,
    llm: LLMClient,
    *,
    history: list[dict] | None = None,
    budgets: Budgets | None = None,
    on_event: Callable[[str, dict], None] | None = None,
) -> Answer:
    from ..mcp_server import build_mcp

    budgets = (budgets or Budgets()).checked()
    emit = on_event or (lambda name, data: None)
    server = build_mcp(service, writable=False)
    schemas = tool_schemas(server)
    allowed = {s["function"]["name"] for s in schemas}
    messages: list[dict[str, Any]] = [{"role": "system", "content": AGENT_PROMPT}]
    messages += [{"role": m["role"], "content": m["content"]}
                 for m in (history or [])[-HISTORY_TURNS:]]  # fmt: skip
    messages.append({"role": "user", "content": question})
    references = References()
    done_calls: dict[str, str] = {}
    warnings: list[str] = []
    started = time.monotonic()
    final: str | None = None
    model = None
    for step in range(1, budgets.steps + 1):
        left = budgets.deadline - (time.monotonic() - started)
        if left <= 1:
            warnings.append("the deadline ran out; answered from what was found")
            break
        reply = llm.chat(messages, tools=schemas, timeout=left)
        model = reply.model or model
        if not reply.tool_calls:
            final = reply.content
            break
        messages.append({"role": "assistant", "content": reply.content or "",
                         "tool_calls": reply.tool_calls})  # fmt: skip
        for call in reply.tool_calls:
            name, text = _run_call(server, call, allowed, done_calls, references, budgets)
            emit("step", {"step": step, "tool": name, "arguments": _arguments(call),
                          "result_chars": len(text)})  # fmt: skip
            messages.append({"role": "tool", "tool_call_id": call.get("id", ""), "content": text})
    else:
        warnings.append(f"the step budget ({budgets.steps}) ran out; answered from what was found")
    if final is None:
        messages.append({"role": "user", "content": FINAL_PROMPT})
        left = max(5.0, budgets.deadline - (time.monotonic() - started))
        reply = llm.chat(messages, timeout=left)
        final, model = reply.content, reply.model or model
    text = strip_reasoning(final or "")
    return Answer(question, text, references.items, [], "agent", model, True,
                  citations(text, len(references.items)), warnings)  # fmt: skip


def _arguments(call: dict) -> dict | str:
    """A tool call's arguments for a progress event: the object, or the raw text if broken."""
    raw = (call.get("function") or {}).get("arguments") or "{}"
    if not isinstance(raw, str):
        return raw
    try:
        return json.loads(raw)
    except ValueError:
        return raw[:200]


def _run_call(server, call, allowed, done_calls, references, budgets) -> tuple[str, str]:
    function = call.get("function") or {}
    name = function.get("name", "")
    raw = function.get("arguments") or "{}"
    try:
        args = json.loads(raw) if isinstance(raw, str) else dict(raw)
        if not isinstance(args, dict):
            raise ValueError
    except (ValueError, TypeError):
        return name, json.dumps({"error": f"the arguments are not a JSON object: {raw[:200]}"})
    if name not in allowed:
        return name, json.dumps({"error": f"unknown tool {name!r}", "tools": sorted(allowed)})
    key = name + json.dumps(args, sort_keys=True, ensure_ascii=False)
    if key in done_calls:
        return name, "(a repeat of an earlier call: the same result as before)\n" + done_calls[key]
    from mcp.server.mcpserver.exceptions import ToolError

    try:
        result = asyncio.run(server.call_tool(name, args))
        text = "".join(getattr(c, "text", "") for c in result.content)
        cited = [] if result.is_error else references.from_result(result.structured_content)
    except ToolError as exc:  # a 400/404 reason: material for the model's next step
        text, cited = str(exc), []
    if len(text) > budgets.result_chars:
        text = text[: budgets.result_chars] + f"\n… (cut at {budgets.result_chars} characters)"
    if cited:
        labels = ", ".join(f"[{n}] {references.items[n - 1]['title']}" for n in cited)
        text += f"\ncite as: {labels}"
    done_calls[key] = text
    return name, text
