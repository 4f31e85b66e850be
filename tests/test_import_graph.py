"""The package's import graph: no reaching into another package's private modules, no circles.

A package is a folder under src/mlgoodput. A private module is one whose name (below the
package) starts with an underscore. The shared core modules at the top of the package
(`mlgoodput/_journal.py`, `_worker.py`, ...) may be imported from anywhere. An import inside
a function counts as well, unless its line (or the line above) carries a `# lazy:` comment
saying why it is lazy; such a marked import still may not reach into private modules. Imports
under `if TYPE_CHECKING:` count too: a circle of type names is still a circle to untangle.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"
TOP = "mlgoodput"


@dataclass(frozen=True, slots=True)
class Edge:
    source: str  # importing module
    target: str  # imported module (or the package whose __init__ holds the name)
    names: tuple[str, ...]  # names taken with `from target import ...`
    line: int
    counts: bool  # False for lazy-marked imports inside functions (not part of circles)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted((ROOT / TOP).rglob("*.py"))}


def _edges(name: str, path: Path, modules: dict[str, Path]) -> list[Edge]:
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source, str(path))
    is_package = path.name == "__init__.py"
    found: list[Edge] = []

    def lazy(node: ast.stmt) -> bool:
        end = node.end_lineno or node.lineno
        around = lines[node.lineno - 2 : end]  # the line above and the statement's lines
        return any("# lazy:" in text for text in around)

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, True)
            elif isinstance(child, ast.Import | ast.ImportFrom):
                add(child, in_function)
            else:
                visit(child, in_function)

    def add(node: ast.Import | ast.ImportFrom, in_function: bool) -> None:
        counts = not (in_function and lazy(node))
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == TOP:
                    found.append(Edge(name, alias.name, (), node.lineno, counts))
            return
        if node.level:
            base = name.split(".") if is_package else name.split(".")[:-1]
            base = base[: len(base) - (node.level - 1)]
            target = ".".join(base + ([node.module] if node.module else []))
        else:
            target = node.module or ""
        if target.split(".")[0] != TOP:
            return
        names: list[str] = []
        for alias in node.names:
            submodule = f"{target}.{alias.name}"
            if submodule in modules:
                found.append(Edge(name, submodule, (), node.lineno, counts))
            else:
                names.append(alias.name)
        if names or not node.names:
            found.append(Edge(name, target, tuple(names), node.lineno, counts))

    visit(tree, False)
    return found


def _package(module: str) -> str | None:
    """The folder under src/mlgoodput that holds the module; None for top-level modules."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    candidate = ROOT / TOP / parts[1]
    return parts[1] if candidate.is_dir() else None


def _private_reach(edge: Edge) -> str | None:
    """Why this edge reaches into another package's private parts, or None."""
    target_package = _package(edge.target)
    if target_package is None or target_package == _package(edge.source):
        return None
    below = edge.target.split(".")[2:]  # the parts below the package folder
    if any(part.startswith("_") for part in below):
        return f"imports private module {edge.target}"
    private_names = [n for n in edge.names if n.startswith("_")]
    if private_names:
        return f"imports private name(s) {', '.join(private_names)} from {edge.target}"
    return None


def _all_edges() -> list[Edge]:
    modules = _modules()
    edges: list[Edge] = []
    for name, path in modules.items():
        edges.extend(_edges(name, path, modules))
    return edges


def _circles(edges: list[Edge]) -> list[list[str]]:
    """Strongly connected groups of more than one module (or a module importing itself)."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        if edge.counts and edge.source != edge.target:
            graph.setdefault(edge.source, set()).add(edge.target)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:  # Tarjan, iterative to stay clear of recursion limits
        nonlocal counter
        work = [(node, iter(sorted(graph.get(node, ()))))]
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        while work:
            current, children = work[-1]
            advanced = False
            for child in children:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    advanced = True
                    break
                if child in on_stack:
                    low[current] = min(low[current], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[current])
            if low[current] == index[current]:
                group: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == current:
                        break
                if len(group) > 1:
                    groups.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return groups


def test_the_walk_sees_the_whole_package() -> None:
    edges = _all_edges()
    sources = {edge.source for edge in edges}
    assert len(_modules()) > 100
    assert {"mlgoodput.accounting", "mlgoodput.goodput", "mlgoodput.jax"} <= sources


def test_the_checks_find_what_they_look_for() -> None:
    """The two checks on a made-up graph, so a broken walker cannot pass by finding nothing."""
    reach = Edge("mlgoodput.diagnostics._run", "mlgoodput.jax._session", (), 1, True)
    fine = Edge("mlgoodput.diagnostics._run", "mlgoodput._journal", (), 1, True)
    name = Edge("mlgoodput.console._server", "mlgoodput.export", ("_helper",), 1, True)
    assert _private_reach(reach) is not None
    assert _private_reach(fine) is None
    assert _private_reach(name) is not None
    loop = [
        Edge("mlgoodput.a", "mlgoodput.b", (), 1, True),
        Edge("mlgoodput.b", "mlgoodput.c", (), 1, True),
        Edge("mlgoodput.c", "mlgoodput.a", (), 1, True),
        Edge("mlgoodput.c", "mlgoodput.d", (), 1, True),
    ]
    assert _circles(loop) == [["mlgoodput.a", "mlgoodput.b", "mlgoodput.c"]]
    lazy_loop = [*loop[:2], Edge("mlgoodput.c", "mlgoodput.a", (), 1, False)]
    assert _circles(lazy_loop) == []


def test_no_package_imports_another_packages_private_modules() -> None:
    problems = [
        f"{edge.source} (line {edge.line}): {why}" for edge in _all_edges() if (why := _private_reach(edge)) is not None
    ]
    assert problems == [], (
        f"{len(problems)} import(s) reach into another package's private modules; "
        "export what is needed from the package's __init__ or a public module instead:\n" + "\n".join(problems)
    )


def test_no_import_circles() -> None:
    circles = _circles(_all_edges())
    assert circles == [], f"{len(circles)} import circle(s):\n" + "\n".join(" <-> ".join(group) for group in circles)
