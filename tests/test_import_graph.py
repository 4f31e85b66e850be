"""The package's import graph: floors without upward imports, no loops, no reaching into privates.

A package is a folder under src/mlgoodput. A private module is one whose name (below the
package) starts with an underscore; a private attribute is a single-underscore name. The checks
(tests/import_graph.py; tests/test_import_graph_planted.py shows each one failing on a planted
fault) are:

- no package imports another package's private modules or names;
- no circle of modules. An import inside a function counts, unless its line (or the line above)
  carries a `# lazy:` comment saying why it is lazy; imports under `if TYPE_CHECKING:` count too
  (a circle of type names is still a circle to untangle). Importing `a.b.c` runs `a/__init__.py`
  and `a/b/__init__.py`, so it is an import of those as well;
- the folder graph (each folder one node, each top-level module a node of its own, every
  `__main__` module the node `__main__`) keeps to the floors below: no import runs from a lower
  floor to a higher one, lazy imports included (a lazy import still runs upwards when it runs),
  and no nodes import each other round a loop. The one exception is the package itself,
  `mlgoodput/__init__.py`: every import runs it, and it loads its submodules only on attribute
  access (PEP 562), so it is no edge;
- no module uses a private attribute of another module of ours (`calc._engine`): what one module
  needs from another is a public, documented name.

`python scripts/import_floors.py` draws the folder graph.
"""

from __future__ import annotations

import functools
from pathlib import Path

from tests import import_graph as g

ROOT = Path(__file__).resolve().parents[1] / "src"

#: The floors of the folder graph, lowest first. A node imports only nodes on its own floor or
#: below; a new folder or top-level module must be placed here (the test says so).
FLOORS: tuple[tuple[str, ...], ...] = (
    # core: small shared modules that know nothing of stores or jobs
    (
        "_endpoint",
        "_env",
        "_format",
        "_gcp_metadata",
        "_labels",
        "_limited_server",
        "_misuse",
        "_numpy",
        "_once",
        "_ops",
        "_process_window",
        "_quick_init",
        "_profiler",
        "_segment",
        "_spawn",
        "_submit",
        "_testing",
        "_worker",
        "events",
        "identity",
    ),
    # FLOP counting and peaks: a leaf that every framework integration uses
    ("flops",),
    # where events are kept and where metrics are sent
    ("store", "export"),
    # the write path: the journal and the recorder on top of it
    ("_segment_columns", "_recovery", "_aggregator", "_journal", "_recorder", "_completion", "testing"),
    # reading the store back as goodput, diagnostics, and the metric aggregation both frameworks ship
    ("accounting", "diagnostics", "_metric_pipeline"),
    # the job's console (log lines and progress)
    ("console",),
    # framework integrations
    ("jax", "torch"),
    # the seed-compatible public API and the monitor behind it
    (
        "_monitoring",
        "goodput_utils",
        "goodput",
        "goodput_elastic",
        "monitoring",
        "monitoring_elastic",
        "src",
    ),
    # the web UI
    ("ui",),
    # the demo workloads and supervisor
    ("_demo",),
    # the command line: its subcommands, then the dispatcher
    ("_cli",),
    ("cli",),
    # programs (`python -m ...`) and the package itself
    ("__main__", g.TOP),
)


#: A short name per floor, for the drawing (scripts/import_floors.py).
FLOOR_NAMES: tuple[str, ...] = (
    "core",
    "flops",
    "store and export",
    "write path",
    "accounting, diagnostics, metric pipeline",
    "console",
    "frameworks",
    "public API",
    "ui",
    "demo",
    "commands",
    "cli.py",
    "programs",
)


@functools.cache
def _edges() -> tuple[g.Edge, ...]:
    return tuple(g.all_edges(ROOT))


def test_the_walk_sees_the_whole_package() -> None:
    edges = _edges()
    sources = {edge.source for edge in edges}
    assert len(g.modules(ROOT)) > 100
    assert {"mlgoodput.accounting", "mlgoodput.goodput", "mlgoodput.jax"} <= sources
    assert any(e.implied for e in edges), "the parent packages an import runs are edges too"


def test_the_checks_find_what_they_look_for() -> None:
    """The checks on made-up edges, so a broken walker cannot pass by finding nothing."""
    reach = g.Edge("mlgoodput.diagnostics._run", "mlgoodput.jax._session", (), 1, True)
    fine = g.Edge("mlgoodput.diagnostics._run", "mlgoodput._journal", (), 1, True)
    name = g.Edge("mlgoodput.console._server", "mlgoodput.export", ("_helper",), 1, True)
    assert g.private_import(ROOT, reach) is not None
    assert g.private_import(ROOT, fine) is None
    assert g.private_import(ROOT, name) is not None
    same_package = g.Edge("mlgoodput.accounting._snapshot", "mlgoodput.accounting._facts", ("scan", "_scan"), 1, True)
    assert g.private_name_imports([same_package]) == [
        "mlgoodput.accounting._snapshot (line 1): _scan from mlgoodput.accounting._facts"
    ]
    loop = [
        g.Edge("mlgoodput.a", "mlgoodput.b", (), 1, True),
        g.Edge("mlgoodput.b", "mlgoodput.c", (), 1, True),
        g.Edge("mlgoodput.c", "mlgoodput.a", (), 1, True),
        g.Edge("mlgoodput.c", "mlgoodput.d", (), 1, True),
    ]
    assert g.module_circles(loop) == [["mlgoodput.a", "mlgoodput.b", "mlgoodput.c"]]
    lazy_loop = [*loop[:2], g.Edge("mlgoodput.c", "mlgoodput.a", (), 1, False)]
    assert g.module_circles(lazy_loop) == []
    upward = [g.Edge("mlgoodput.store._sqlite", "mlgoodput.ui._job", (), 1, False)]
    assert g.floor_violations(ROOT, upward, FLOORS) != []


def test_no_package_imports_another_packages_private_modules() -> None:
    problems = [
        f"{edge.source} (line {edge.line}): {why}"
        for edge in _edges()
        if (why := g.private_import(ROOT, edge)) is not None
    ]
    assert problems == [], (
        f"{len(problems)} import(s) reach into another package's private modules; "
        "export what is needed from the package's __init__ or a public module instead:\n" + "\n".join(problems)
    )


def test_no_module_imports_another_modules_private_names() -> None:
    found = g.private_name_imports(_edges())
    assert found == [], (
        f"{len(found)} import(s) of another module's private name; give it a public name in its "
        "home module instead:\n" + "\n".join(found)
    )


def test_no_import_circles() -> None:
    circles = g.module_circles(_edges())
    assert circles == [], f"{len(circles)} import circle(s):\n" + "\n".join(" <-> ".join(group) for group in circles)


def test_every_node_is_on_one_floor() -> None:
    placed = [node for floor in FLOORS for node in floor]
    assert len(placed) == len(set(placed)), "a node is on two floors"
    assert len(FLOOR_NAMES) == len(FLOORS)
    nodes = {g.node_of(ROOT, m) for m in g.modules(ROOT)}
    assert sorted(nodes - set(placed)) == [], "place these in FLOORS"
    assert sorted(set(placed) - nodes) == [], "these are gone: take them off FLOORS"


def test_no_import_runs_from_a_lower_floor_to_a_higher_one() -> None:
    problems = g.floor_violations(ROOT, _edges(), FLOORS)
    assert problems == [], f"{len(problems)} import(s) run upwards:\n" + "\n".join(problems)


def test_no_loops_between_folders() -> None:
    loops = g.folder_loops(ROOT, _edges())
    assert loops == [], f"{len(loops)} folder loop(s):\n" + "\n".join(" <-> ".join(group) for group in loops)


def test_no_module_uses_another_modules_private_attributes() -> None:
    reaches = [f"{r.module} line {r.line}: {r.expr}" for r in g.all_reaches(ROOT)]
    assert reaches == [], (
        f"{len(reaches)} use(s) of another module's private attribute; give the target a public, "
        "documented name (a property or method) instead:\n" + "\n".join(reaches)
    )
