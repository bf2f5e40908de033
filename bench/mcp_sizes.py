"""What an MCP client reads from each tool, in bytes, before and after a change (issue #34
item 4: answers sized for a small model's context).

    python bench/mcp_sizes.py                 # this tree against commit 06539bb (before #34's MCP work)
    python bench/mcp_sizes.py --before REV

One run: the jawiki excerpt (built once under bench/work/worker_memory/keyword-only, as
bench/worker_memory.py builds it) served by ``chiezo mcp`` over stdio — the real SDK client —
twice: by the code of ``REV`` (a git worktree, its ``src`` first on PYTHONPATH) and by this
tree. For each typical call it records the bytes of the text a model reads (the tool result's
content), whether it was an error, and the bytes of the tool list (the schemas a model is sent
on every step). Prints a table, writes JSON to bench/results/mcp_sizes.json.
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
BEFORE = "06539bb"
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
]
CHILD = """
import json, os, sys, anyio
from mcp import Client, StdioServerParameters

data, calls = sys.argv[1], json.loads(sys.argv[2])

async def go():
    # the SDK starts a server with a bare environment unless given one: PYTHONPATH picks the code
    params = StdioServerParameters(command=sys.executable, args=["-m", "chiezo", "--data", data, "mcp"],
                                   env=dict(os.environ))
    async with Client(params) as client:
        tools = (await client.list_tools()).tools
        listed = len(json.dumps([t.model_dump(mode="json", exclude_none=True) for t in tools],
                                ensure_ascii=False).encode())
        out = []
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            text = "".join(c.text for c in result.content if hasattr(c, "text"))
            out.append({"bytes": len(text.encode()), "error": bool(result.is_error),
                        "said": text[:160] if result.is_error else ""})
        return {"tool_list_bytes": listed, "calls": out}

print(json.dumps(anyio.run(go)))
"""


def measure(src: Path, data: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(src)}
    run = subprocess.run(
        [sys.executable, "-c", CHILD, str(data), json.dumps(CALLS)],
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
    after = measure(ROOT / "src", data)
    show(before, after, args.before)
    out = HERE / "results" / "mcp_sizes.json"
    out.write_text(json.dumps({"before_commit": args.before, "calls": CALLS, "before": before,
                               "after": after}, ensure_ascii=False, indent=2))  # fmt: skip
    console.print(f"wrote {out.relative_to(ROOT)}")


def show(before: dict, after: dict, rev: str) -> None:
    table = Table(title=f"bytes a model reads per call: {rev} → this tree")
    for column in ("tool", "arguments", "before", "after"):
        table.add_column(column, justify="right" if column in ("before", "after") else "left")

    def cell(found: dict) -> str:
        return f"{found['bytes']:,}" + (" [red](error)[/]" if found["error"] else "")

    for (name, arguments), b, a in zip(CALLS, before["calls"], after["calls"], strict=True):
        table.add_row(name, json.dumps(arguments, ensure_ascii=False), cell(b), cell(a))
    table.add_row("tools/list", "(schemas)", f"{before['tool_list_bytes']:,}",
                  f"{after['tool_list_bytes']:,}")  # fmt: skip
    console.print(table)


if __name__ == "__main__":
    main()
