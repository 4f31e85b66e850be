"""Read the package's imports and private attribute uses from its source, without importing it.

The checks in tests/test_import_graph.py and the drawing in scripts/import_floors.py both use
this module. Every function takes the source root (the folder that holds `mlgoodput/`), so the
tests can run the same checks on small planted trees.

Words used here:
- a *module* is a dotted name such as `mlgoodput.jax._flops`;
- a *node* is what the folder graph draws: the folder under `mlgoodput/` that holds a module
  (`jax`), or, for the modules at the top of the package, the module's own name (`cli`,
  `goodput`, ...); see `node_of`;
- an *edge* is one import. Importing `a.b.c` runs `a/__init__.py` and `a/b/__init__.py` first,
  so an import of `a.b.c` is also an edge to `a.b` and to `a`.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

TOP = "mlgoodput"


@dataclass(frozen=True, slots=True)
class Edge:
    """One import of one module by another, as written or as implied by a parent `__init__`."""

    source: str  # importing module
    target: str  # imported module (or the package whose __init__ holds the name)
    names: tuple[str, ...]  # names taken with `from target import ...`
    line: int
    counts: bool  # False for lazy-marked imports inside functions (not part of module circles)
    implied: bool = False  # True for the parent packages an import runs


@dataclass(frozen=True, slots=True)
class Reach:
    """`expr._name` in a module that does not define `_name`: a use of another module's private."""

    module: str
    line: int
    expr: str  # the source text, e.g. `calc._eng`
    name: str  # the private attribute, e.g. `_eng`


def module_name(root: Path, path: Path) -> str:
    """The dotted name of the module at `path` below `root`."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package below `root`, by dotted name."""
    return {module_name(root, p): p for p in sorted((root / TOP).rglob("*.py"))}


def _is_lazy(lines: Sequence[str], node: ast.stmt) -> bool:
    end = node.end_lineno or node.lineno
    around = lines[max(node.lineno - 2, 0) : end]  # the line above and the statement's lines
    return any("# lazy:" in text for text in around)


def _parents(module: str) -> list[str]:
    """The packages whose `__init__` runs before `module` loads: `a.b.c` -> [`a.b`, `a`]."""
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


def module_edges(name: str, path: Path, known: dict[str, Path]) -> list[Edge]:
    """The imports of one module, each import's parent packages included (as `implied` edges)."""
    source = path.read_text(encoding="utf-8")
    lines = source.splitlines()
    tree = ast.parse(source, str(path))
    is_package = path.name == "__init__.py"
    found: list[Edge] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                visit(child, True)
            elif isinstance(child, ast.Import | ast.ImportFrom):
                add(child, in_function)
            else:
                visit(child, in_function)

    def edge(target: str, names: tuple[str, ...], node: ast.stmt, counts: bool) -> None:
        found.append(Edge(name, target, names, node.lineno, counts))
        for parent in _parents(target):
            found.append(Edge(name, parent, (), node.lineno, counts, implied=True))

    def add(node: ast.Import | ast.ImportFrom, in_function: bool) -> None:
        counts = not (in_function and _is_lazy(lines, node))
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == TOP:
                    edge(alias.name, (), node, counts)
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
            if submodule in known:
                edge(submodule, (), node, counts)
            else:
                names.append(alias.name)
        if names or not node.names:
            edge(target, tuple(names), node, counts)

    visit(tree, False)
    # one edge per (target, line): `from a.b import c, d` names a.b's parents once
    unique: dict[tuple[str, int, bool], Edge] = {}
    for e in found:
        unique.setdefault((e.target, e.line, e.implied), e)
    # a module's own parent packages have run before it: importing them again is no edge
    own = set(_parents(name))
    return [e for e in unique.values() if e.source != e.target and not (e.implied and e.target in own)]


def all_edges(root: Path) -> list[Edge]:
    """Every import edge of the package below `root`."""
    known = modules(root)
    edges: list[Edge] = []
    for name, path in known.items():
        edges.extend(module_edges(name, path, known))
    return edges


def package_of(root: Path, module: str) -> str | None:
    """The folder under `mlgoodput/` that holds the module; None for top-level modules."""
    parts = module.split(".")
    if len(parts) < 2:
        return None
    return parts[1] if (root / TOP / parts[1]).is_dir() else None


def node_of(root: Path, module: str) -> str:
    """The folder-graph node of a module: its folder, or its own name at the top of the package.

    The package itself (`mlgoodput/__init__.py`) is the node `mlgoodput`. Every `__main__`
    module (`python -m mlgoodput`, `python -m mlgoodput.console`) is the node `__main__`:
    Python runs it as a program and nothing imports it, so it stands above everything.
    """
    if module.split(".")[-1] == "__main__":
        return "__main__"
    package = package_of(root, module)
    if package is not None:
        return package
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def private_import(root: Path, edge: Edge) -> str | None:
    """Why this edge imports another package's private module or name, or None."""
    if edge.implied:
        return None
    target_package = package_of(root, edge.target)
    if target_package is None or target_package == package_of(root, edge.source):
        return None
    below = edge.target.split(".")[2:]  # the parts below the package folder
    if any(part.startswith("_") for part in below):
        return f"imports private module {edge.target}"
    private_names = [n for n in edge.names if n.startswith("_")]
    if private_names:
        return f"imports private name(s) {', '.join(private_names)} from {edge.target}"
    return None


def private_name_imports(edges: Iterable[Edge]) -> list[str]:
    """`from m import _name` of another module's private name, inside a package or across
    (dunders are public protocol; a private submodule imported by name is a module, not a name).
    Each as "source (line n): _name from target"."""
    found: list[str] = []
    for e in edges:
        if e.implied or e.source == e.target:
            continue
        for n in e.names:
            if n.startswith("_") and not (n.startswith("__") and n.endswith("__")):
                found.append(f"{e.source} (line {e.line}): {n} from {e.target}")
    return found


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of more than one node that reach each other (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0

    def connect(node: str) -> None:
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
    return sorted(groups)


def module_circles(edges: Iterable[Edge]) -> list[list[str]]:
    """Circles between modules, counting every import but lazy-marked ones inside functions."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        if edge.counts:
            graph.setdefault(edge.source, set()).add(edge.target)
    return strongly_connected(graph)


def _between_nodes(root: Path, edges: Iterable[Edge], exempt: Iterable[str]) -> list[tuple[str, str, Edge]]:
    """(source node, target node, edge) for each import statement that crosses nodes, once per
    statement and target node (a module and the parent packages it runs are one crossing)."""
    skip = set(exempt)
    seen: dict[tuple[str, int, str], tuple[str, str, Edge]] = {}
    for edge in sorted(edges, key=lambda e: e.implied):  # the explicit edge names the crossing
        if edge.target in skip:
            continue
        a, b = node_of(root, edge.source), node_of(root, edge.target)
        if a != b:
            seen.setdefault((edge.source, edge.line, b), (a, b, edge))
    return list(seen.values())


def folder_edges(root: Path, edges: Iterable[Edge], exempt: Iterable[str] = (TOP,)) -> Counter[tuple[str, str]]:
    """(source node, target node) -> how many import statements run from one node to the other.

    Every import counts, lazy ones included: a lazy import still runs the other way at some
    point. Edges into `exempt` modules are left out; by default that is the package itself
    (`mlgoodput/__init__.py`), which every import runs and which loads its submodules only on
    attribute access.
    """
    return Counter((a, b) for a, b, _ in _between_nodes(root, edges, exempt))


def folder_loops(root: Path, edges: Iterable[Edge], exempt: Iterable[str] = (TOP,)) -> list[list[str]]:
    """Groups of folder-graph nodes that import each other, directly or round a circle."""
    graph: dict[str, set[str]] = {}
    for a, b in folder_edges(root, edges, exempt):
        graph.setdefault(a, set()).add(b)
    return strongly_connected(graph)


def floor_violations(
    root: Path, edges: Iterable[Edge], floors: Sequence[Iterable[str]], exempt: Iterable[str] = (TOP,)
) -> list[str]:
    """Imports that run from a lower floor to a higher one, or from or to a node on no floor.

    `floors` lists the nodes floor by floor, lowest first; a node may import nodes on its own
    floor or below.
    """
    level: dict[str, int] = {}
    for i, floor in enumerate(floors):
        for node in floor:
            level[node] = i
    problems: list[str] = []
    for a, b, edge in _between_nodes(root, edges, exempt):
        for node in (a, b):
            if node not in level:
                problems.append(f"{node} is on no floor ({edge.source} line {edge.line} imports {edge.target})")
        if a in level and b in level and level[a] < level[b]:
            how = "runs the parent __init__ of" if edge.implied else "imports"
            problems.append(f"{edge.source} (line {edge.line}, floor {a}) {how} {edge.target} (floor {b}, higher)")
    return sorted(set(problems))


# Private names of the standard library that are its documented public API: a namedtuple's
# methods and fields (`_replace`, `_asdict`, `_fields`, `_make`), and `os._exit` after a fork.
STDLIB_PUBLIC = frozenset({"_replace", "_asdict", "_fields", "_field_defaults", "_make", "_exit"})


def _base_name(base: ast.expr) -> str | None:
    """`Protocol` for both `Protocol` and `typing.Protocol`."""
    if isinstance(base, ast.Name):
        return base.id
    return base.attr if isinstance(base, ast.Attribute) else None


def _defined_names(tree: ast.Module) -> set[str]:
    """Every name this module defines: at module level, in class bodies, as attributes of `self`
    or `cls` it assigns, as parameters and local names.

    A `Protocol` class body defines nothing: it only describes another module's object, so a
    private name declared there (`def _step_end(...)`) is still that module's private.
    """
    described: set[int] = set()  # the nodes of Protocol class bodies
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and any(_base_name(b) == "Protocol" for b in node.bases):
            for part in node.body:
                described.update(id(n) for n in ast.walk(part))
    names: set[str] = set()
    local_defs = {
        n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
    }
    for node in ast.walk(tree):
        if id(node) in described:
            continue
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store | ast.Del)
            and isinstance(node.value, ast.Name)
            and (node.value.id in {"self", "cls"} or node.value.id in local_defs)
        ):
            names.add(node.attr)  # of this module's own objects or functions (obj._x = ... is a reach)
        elif isinstance(node, ast.alias):
            names.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.arg):
            names.add(node.arg)
    # __slots__ = ("_a", "_b"), setattr(obj, "_name", ...) and object.__setattr__(self, "_name", ...)
    # define attributes by string
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__slots__" for t in node.targets):
            for item in ast.walk(node.value):
                if isinstance(item, ast.Constant) and isinstance(item.value, str):
                    names.add(item.value)
        if isinstance(node, ast.Call) and len(node.args) >= 2:
            func = node.func
            setter = (isinstance(func, ast.Name) and func.id == "setattr") or (
                isinstance(func, ast.Attribute) and func.attr == "__setattr__"
            )
            name = node.args[1]
            if setter and isinstance(name, ast.Constant) and isinstance(name.value, str):
                names.add(name.value)
    return names


def _outside_bindings(tree: ast.Module) -> set[str]:
    """Names this module binds to modules of other libraries (`import sys`, `from x import y`)."""
    outside: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] != TOP:
                    outside.add(alias.asname or alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] != TOP:
            outside.update(alias.asname or alias.name for alias in node.names)
    return outside


def _root_name(node: ast.expr) -> str | None:
    """The name an attribute chain starts from: `a` for `a.b().c[0].d`."""
    while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def module_reaches(name: str, path: Path) -> list[Reach]:
    """Every `expr._name` in one module that uses a private of another module of ours.

    `_name` is private when it starts with one underscore (dunders are public protocol). It is
    this module's own when the module defines it anywhere (a module-level name, a class body's
    name or `__slots__`, an attribute this module assigns on `self` or `cls`; assigning
    `other._x` does not make `_x` this module's), or when it is taken from `self` or
    `cls` directly (a class's own, or its base's, protected part). Privates of other libraries
    (`sys._getframe`) are not counted: this check is about the seams between our own modules.
    """
    source = path.read_text(encoding="utf-8")
    tree = ast.parse(source, str(path))
    defined = _defined_names(tree)
    outside = _outside_bindings(tree)
    found: list[Reach] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        attr = node.attr
        if not attr.startswith("_") or (attr.startswith("__") and attr.endswith("__")) or attr == "_":
            continue
        if attr in defined or attr in STDLIB_PUBLIC:
            continue
        if isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}:
            continue
        if _root_name(node.value) in outside:
            continue
        text = ast.get_source_segment(source, node) or f"?.{attr}"
        found.append(Reach(name, node.lineno, " ".join(text.split()), attr))
    return sorted(found, key=lambda r: (r.line, r.expr))


def all_reaches(root: Path) -> list[Reach]:
    """Every private attribute reach in the package below `root`."""
    found: list[Reach] = []
    for name, path in modules(root).items():
        found.extend(module_reaches(name, path))
    return found


def draw(
    root: Path,
    floors: Sequence[Iterable[str]],
    names: Sequence[str] | None = None,
    exempt: Iterable[str] = (TOP,),
) -> str:
    """The folder graph as text: the floors, then a mermaid flowchart with import counts on the edges.

    With `names` (one per floor), the top-level modules of a floor are drawn as one box named
    after the floor (`core: _env, _worker, ...`), so the drawing shows folders and floors, not
    every small module; edges inside a box are left out.
    """
    floors = [tuple(f) for f in floors]
    box: dict[str, str] = {}
    if names is not None:
        for floor, name in zip(floors, names, strict=True):
            for node in floor:
                if not (root / TOP / node).is_dir():
                    box[node] = name
    counts: Counter[tuple[str, str]] = Counter()
    for (a, b), n in folder_edges(root, all_edges(root), exempt).items():
        a, b = box.get(a, a), box.get(b, b)
        if a != b:
            counts[(a, b)] += n
    out = ["Floors, lowest first (a node imports only nodes on its floor or below):", ""]
    for i, floor in enumerate(floors):
        label = f"{names[i]}: " if names is not None else ""
        out.append(f"{i:2d}. {label}{', '.join(sorted(floor))}")
    out += ["", "```mermaid", "flowchart BT"]
    for i, floor in enumerate(floors):  # one box per floor, holding its folders (and its modules' box)
        title = f"{i}. {names[i]}" if names is not None else f"floor {i}"
        shown = sorted({box.get(node, node) for node in floor})
        out.append(f'    subgraph floor{i}["{title}"]')
        out.extend(f"        {_mermaid_id(node)}[{node}]" for node in shown)
        out.append("    end")
    for (a, b), n in sorted(counts.items()):
        out.append(f"    {_mermaid_id(a)}[{a}] -->|{n}| {_mermaid_id(b)}[{b}]")
    out.append("```")
    return "\n".join(out) + "\n"


def _mermaid_id(node: str) -> str:
    return "n_" + "".join(c if c.isalnum() else "_" for c in node)
