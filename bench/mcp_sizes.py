"""What an MCP client reads from each tool, in bytes, before and after a change (issue #34
item 4, issue #44 items 1-2: tools and answers sized for a small model's context).

    python bench/mcp_sizes.py                 # this tree against commit a8bf87d (before #44)
    python bench/mcp_sizes.py --before REV

One run: the jawiki excerpt (built once under bench/work/worker_memory/keyword-only, as
bench/worker_memory.py builds it) served by ``chiezo mcp`` over stdio — the real SDK client —
by the code of ``REV`` (a git worktree, its ``src`` first on PYTHONPATH) and by this tree, once
per tool profile this tree has (``--profile``; the earlier tree has one tool set). For each
typical call it records the bytes of the text a model reads (the tool result's content),
whether it was an error, and for the tool list (the schemas a model is sent on every step) its
bytes as the server sends them (compact JSON) and as earlier runs of this bench measured them
(``json.dumps`` with its default spaces), and the instructions' length. Prints a table, writes
JSON to bench/results/mcp_sizes.json.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

from worker_memory import WORK, build  # noqa: E402

console = Console(width=140)
BEFORE = "a8bf87d"
CALLS = [
    ("sources", {}),
    ("search", {"query": "パリ"}),
    ("search", {"query": "フランスの首都はどこですか", "source": "jawiki"}),
    ("doc", {"source": "jawiki", "title": "パリ"}),
    ("doc", {"source": "jawiki", "title": "パリ", "max_chars": 400}),
    ("doc", {"source": "jawiki", "title": "パリ", "question": "パリの人口は"}),
    ("titles", {"source": "jawiki", "prefix": "パ"}),
    ("tags", {"source": "jawiki"}),
    ("links", {"source": "jawiki", "title": "パリ"}),
    ("filter", {"source": "jawiki", "tag": ["ヨーロッパの首都"]}),
    ("filter", {"source": "jawiki", "tag": "ヨーロッパの首都"}),  # one value where a list is asked
    ("recall", {"since": "2000-01-01"}),
    # issue #44: search had no max_chars and took it silently, answering the same whatever it said
    ("search", {"query": "パリ", "max_chars": 300}),
    ("search", {"query": "パリ", "max_chars": 800}),
    ("search", {"query": "パリ", "max_chars": 1500}),
    ("search", {"query": "パリ", "max_chars": 4000}),
    ("tags", {"source": "jawiki", "max_chars": 800}),
    ("links", {"source": "jawiki", "title": "パリ", "max_chars": 800}),
]
PROFILES = ("full", "compact")
CHILD = """
import json, os, sys, anyio
from mcp import Client, StdioServerParameters

data, calls, profile = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]

async def go():
    # the SDK starts a server with a bare environment unless given one: PYTHONPATH picks the code
    chosen = ["--profile", profile] if profile != "-" else []
    params = StdioServerParameters(command=sys.executable,
                                   args=["-m", "chiezo", "--data", data, "mcp", *chosen],
                                   env=dict(os.environ))
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        dumped = [t.model_dump(mode="json", exclude_none=True) for t in tools]
        spaced = len(json.dumps(dumped, ensure_ascii=False).encode())
        wire = len(json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True)
                               for t in tools], ensure_ascii=False, separators=(",", ":")).encode())
        offered = {t.name for t in tools}
        out = []
        for name, arguments in calls:
            if name not in offered:
                out.append(None)
                continue
            result = await client.call_tool(name, arguments)
            text = "".join(c.text for c in result.content if hasattr(c, "text"))
            out.append({"bytes": len(text.encode()), "chars": len(text),
                        "error": bool(result.is_error), "said": text[:160] if result.is_error else ""})
        return {"tool_list_bytes": spaced, "tool_list_wire_bytes": wire, "tools": len(tools),
                "instructions_chars": len(client.instructions or ""), "calls": out}

print(json.dumps(anyio.run(go)))
"""


def measure(src: Path, data: Path, profile: str = "-") -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(data), json.dumps(CALLS), profile],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(run.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default=BEFORE)
    args = parser.parse_args()
    data = WORK / "keyword-only"
    build(data, embed=False)
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "before"
        subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree),
                        args.before], check=True, capture_output=True)  # fmt: skip
        try:
            before = measure(tree / "src", data)
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           check=True, capture_output=True)  # fmt: skip
    after = {profile: measure(ROOT / "src", data, profile) for profile in PROFILES}
    show(before, after, args.before)
    out = HERE / "results" / "mcp_sizes.json"
    out.write_text(json.dumps({"before_commit": args.before, "calls": CALLS, "before": before,
                               "after": after}, ensure_ascii=False, indent=2))  # fmt: skip
    console.print(f"wrote {out.relative_to(ROOT)}")


def show(before: dict, after: dict[str, dict], rev: str) -> None:
    # characters, as max_chars counts them (a Japanese character is 3 bytes of UTF-8 and
    # about a token): the JSON has bytes too
    table = Table(title=f"characters a model reads per call: {rev} → this tree, by profile")
    columns = ["before", *after]
    for column in ("tool", "arguments", *columns):
        table.add_column(column, justify="left" if column in ("tool", "arguments") else "right")

    def cell(found: dict | None) -> str:
        if found is None:
            return "[dim](not offered)[/]"
        return f"{found['chars']:,}" + (" [red](error)[/]" if found["error"] else "")

    measured = [before, *after.values()]
    for i, (name, arguments) in enumerate(CALLS):
        shown = json.dumps(arguments, ensure_ascii=False)
        table.add_row(name, shown, *(cell(m["calls"][i]) for m in measured))
    for label, key in (("tools/list, bytes as sent", "tool_list_wire_bytes"),
                       ("tools/list, bytes json.dumps", "tool_list_bytes"),
                       ("tools", "tools"), ("instructions", "instructions_chars")):  # fmt: skip
        table.add_row(label, "", *(f"{m[key]:,}" if key in m else "—" for m in measured))
    console.print(table)


if __name__ == "__main__":
    main()
