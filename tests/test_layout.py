"""The package's layout: no import cycles between chiezo's modules, and the seams that keep it so.

Every import counts, including those inside functions and under ``TYPE_CHECKING``: a cycle
broken only by importing late is still a cycle of design (two modules that each need the
other), and it breaks as soon as someone moves the import to the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"


def module_names(root: Path) -> dict[str, Path]:
    """Dotted name → file, for every module under ``root`` (a package directory)."""
    names = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package's own modules that module ``name`` imports anywhere in its text.
    ``from . import x`` in package P depends on P.x (when it is a module), not on P's
    ``__init__``: Python loads P first either way, but nothing of P's is used."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name in modules}
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, package)
            submodules = {f"{base}.{alias.name}" for alias in node.names} & modules.keys()
            found |= submodules
            if base in modules and len(submodules) < len(node.names):
                found.add(base)  # at least one name comes from the module itself
    return found - {name}


def _absolute(node: ast.ImportFrom, package: str) -> str:
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    base = parts[: len(parts) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def import_graph(root: Path) -> dict[str, set[str]]:
    modules = module_names(root)
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iterative so
    that a deep import chain cannot exhaust the recursion limit), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            step = next(edges, None)
            if step is not None:
                if step not in index:
                    index[step] = low[step] = len(index)
                    stack.append(step)
                    on_stack.add(step)
                    work.append((step, iter(sorted(graph[step]))))
                elif step in on_stack:
                    low[node] = min(low[node], index[step])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def depends_on(graph: dict[str, set[str]], start: str) -> set[str]:
    """Every module ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def _describe(graph: dict[str, set[str]], group: list[str]) -> str:
    members = set(group)
    return "; ".join(f"{m} -> {', '.join(sorted(graph[m] & members))}" for m in group)


# -- the package ---------------------------------------------------------------------------------


def test_chiezo_has_no_import_cycle():
    graph = import_graph(SRC / "chiezo")
    assert (
        len(graph) > 50 and "chiezo.ops.context" in graph["chiezo.surfaces.mcp.server"]
    )  # it read them
    found = cycles(graph)
    assert not found, "import cycles: " + " | ".join(_describe(graph, g) for g in found)


def test_the_agent_is_handed_the_tools_it_does_not_import_them():
    """The seam that removed the agent → tools → service → agent cycle: the tools (ops/) know
    the service only as an object handed in, and the agent (answer/, below ops/) receives them
    from the service as a Toolbox, so both surfaces that offer tools share one set."""
    graph = import_graph(SRC / "chiezo")
    assert not {m for m in depends_on(graph, "chiezo.answer.agent") if m.startswith("chiezo.ops")}
    assert "chiezo.ops.tools" in graph["chiezo.surfaces.mcp.server"]
    assert "chiezo.answer.tool_calls" in graph["chiezo.ops.tools"]


# -- the scanner itself, on small packages written here --------------------------------------


def _package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root / "pkg"


def test_the_scan_finds_a_cycle_through_an_import_inside_a_function(tmp_path):
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "",
            "pkg/a.py": "from .b import thing\n",
            "pkg/b.py": "from . import c\nthing = 1\n",
            "pkg/c.py": "def late():\n    from pkg.a import x\n",
            "pkg/d.py": "import pkg.c\n",
        },
    )
    graph = import_graph(root)
    assert cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    assert depends_on(graph, "pkg.d") == {"pkg.a", "pkg.b", "pkg.c"}


def test_from_dot_import_depends_on_the_module_not_the_package_init(tmp_path):
    root = _package(
        tmp_path,
        {
            "pkg/__init__.py": "def __getattr__(name):\n    from .app import make\n    return make\n",
            "pkg/app.py": "from . import errors\n",
            "pkg/errors.py": "",
            "pkg/uses_init.py": "from . import VERSION\n",
        },
    )
    graph = import_graph(root)
    assert graph["pkg.app"] == {"pkg.errors"} and cycles(graph) == []
    assert graph["pkg.uses_init"] == {"pkg"}  # a name of the package's own is the package


# -- the layers ----------------------------------------------------------------------------------

# chiezo's folders from the bottom up (docs/architecture.md): a module may import its own
# folder and the folders below it, never one above. cluster/ (the optional Ray extra) sits on
# top and nothing imports it except the CLI's `--ray` handling, inside the function (LAZY_CLUSTER).
LAYERS = ("core", "store", "ingest", "search", "answer", "ops", "surfaces", "cluster")
# within surfaces/, the REST app mounts the web UI and the MCP endpoint, and `chiezo serve`
# starts the REST app: cli > rest > {web, mcp}
SURFACES = ("web", "mcp", "rest", "cli")
LAZY_CLUSTER = {"chiezo.surfaces.cli.common", "chiezo.surfaces.cli.main"}


def _floor(module: str) -> tuple[int, int]:
    parts = module.split(".")
    if len(parts) < 2 or parts[1] not in LAYERS:
        return (-1, 0)  # chiezo itself (__version__), __main__
    inner = SURFACES.index(parts[2]) if parts[1] == "surfaces" and len(parts) > 2 else 0
    return (LAYERS.index(parts[1]), inner)


def test_every_module_sits_in_a_layer():
    graph = import_graph(SRC / "chiezo")
    loose = sorted(
        m for m in graph if m.count(".") == 1 and m.split(".")[1] not in (*LAYERS, "__main__")
    )
    assert not loose, f"modules outside the layers (move them into one): {loose}"


def test_no_import_runs_up_a_layer():
    graph = import_graph(SRC / "chiezo")
    upward = sorted(
        f"{m} -> {t}"
        for m, targets in graph.items()
        for t in targets
        if _floor(m)[0] >= 0
        and _floor(t) > _floor(m)
        and not (t.startswith("chiezo.cluster") and m in LAZY_CLUSTER)
    )
    assert not upward, "imports running up a layer:\n" + "\n".join(upward)


def test_only_the_cli_reaches_the_cluster_and_only_when_asked():
    """The optional extra is imported inside the function handling `--ray`, never at the top
    of a module, so the default path never loads it."""
    for name in LAZY_CLUSTER:
        path = SRC / (name.replace(".", "/") + ".py")
        top = ast.parse(path.read_text(encoding="utf-8")).body
        for node in top:
            if isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                names += [a.name for a in node.names]
                assert not any(n.startswith("chiezo.cluster") for n in names), name


def test_the_ray_render_backend_plugs_in_only_when_the_cluster_package_loads():
    """ingest/wikipedia.py declares render backends; cluster/wiki.py registers Ray's when it is
    imported (the CLI does so for --ray), so the core names nothing of the optional extra. In a
    child process: the registration is process-wide."""
    import subprocess
    import sys

    script = (
        "from chiezo.ingest import wikipedia as w\n"
        "assert w.RAY_RENDERING not in w._render_backends, 'registered before the import'\n"
        "import chiezo.cluster.wiki\n"
        "assert w.RAY_RENDERING in w._render_backends\n"
        "import sys; assert 'ray' not in sys.modules, 'importing the backend loaded Ray'\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
