"""The import checks of tests/import_graph.py on small planted source trees: each fault is seen.

The real tree passes tests/test_import_graph.py; these show that it could fail, by planting a
folder loop, an import from a lower floor to a higher one, a private attribute reach, a module
circle, an import of another package's private module and an import of another module's
private name, and asserting each is reported.
"""

from __future__ import annotations

from pathlib import Path

from tests import import_graph as g

FLOORS = (("core",), ("low",), ("high",))


def plant(root: Path, files: dict[str, str]) -> Path:
    """Write `files` (path below mlgoodput/ -> source) under `root`; returns `root`."""
    for rel, text in {"__init__.py": "", **files}.items():
        path = root / g.TOP / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


def test_a_clean_tree_has_nothing_to_report(tmp_path: Path) -> None:
    root = plant(
        tmp_path,
        {
            "core.py": "X = 1\n",
            "low/__init__.py": "from mlgoodput.low.api import run\n",
            "low/api.py": "import mlgoodput.core\n\ndef run() -> int:\n    return mlgoodput.core.X\n",
            "high/__init__.py": "from mlgoodput.low import run\n",
        },
    )
    edges = g.all_edges(root)
    assert g.folder_edges(root, edges) == {("low", "core"): 1, ("high", "low"): 1}
    assert g.folder_loops(root, edges) == []
    assert g.floor_violations(root, edges, FLOORS) == []
    assert g.all_reaches(root) == []
    assert g.module_circles(edges) == []


def test_a_folder_loop_is_reported(tmp_path: Path) -> None:
    root = plant(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/a.py": "def f() -> None:\n    from mlgoodput.high import b  # lazy: planted\n",
            "high/__init__.py": "",
            "high/b.py": "from mlgoodput.low import a\n",
        },
    )
    edges = g.all_edges(root)
    # a lazy import does not make a module circle, but it still runs upwards: a folder loop
    assert g.module_circles(edges) == []
    assert g.folder_loops(root, edges) == [["high", "low"]]


def test_an_import_from_a_lower_floor_to_a_higher_one_is_reported(tmp_path: Path) -> None:
    root = plant(
        tmp_path,
        {
            "core.py": "def f() -> None:\n    import mlgoodput.low.x  # lazy: planted\n",
            "low/__init__.py": "",
            "low/x.py": "",
        },
    )
    problems = g.floor_violations(root, g.all_edges(root), FLOORS)
    assert problems == ["mlgoodput.core (line 2, floor core) imports mlgoodput.low.x (floor low, higher)"]


def test_the_parent_init_an_import_runs_counts(tmp_path: Path) -> None:
    """`from mlgoodput.low.deep import y` runs low/__init__.py, which imports high: a loop."""
    root = plant(
        tmp_path,
        {
            "low/__init__.py": "from mlgoodput.high import z\n",
            "low/deep/__init__.py": "",
            "low/deep/y.py": "",
            "high/__init__.py": "from mlgoodput.high.w import z\n",
            "high/w.py": "from mlgoodput.low.deep.y import *\nz = 1\n",
        },
    )
    edges = g.all_edges(root)
    implied = [e for e in edges if e.implied and e.source == "mlgoodput.high.w"]
    assert {e.target for e in implied} == {"mlgoodput.low.deep", "mlgoodput.low"}
    assert g.folder_loops(root, edges) == [["high", "low"]]
    assert ["mlgoodput.high", "mlgoodput.high.w", "mlgoodput.low"] in g.module_circles(edges)
    # without the parent's edge, high.w -> low.deep.y alone would close no module circle
    direct = [e for e in edges if not e.implied]
    assert ["mlgoodput.high", "mlgoodput.high.w", "mlgoodput.low"] not in g.module_circles(direct)


def test_a_node_on_no_floor_is_reported(tmp_path: Path) -> None:
    root = plant(tmp_path, {"high/__init__.py": "import mlgoodput.stray\n", "stray.py": ""})
    problems = g.floor_violations(root, g.all_edges(root), FLOORS)
    assert problems == ["stray is on no floor (mlgoodput.high line 1 imports mlgoodput.stray)"]


def test_a_private_attribute_reach_is_reported(tmp_path: Path) -> None:
    root = plant(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/calc.py": (
                "class Calc:\n"
                "    __slots__ = ('_slot',)\n"
                "    def __init__(self) -> None:\n"
                "        self._cache = {}\n"
                "        self._slot = 0\n"
                "    def same(self, other: 'Calc') -> bool:\n"
                "        return self._cache == other._cache and other._slot == 0\n"
            ),
            "high/__init__.py": "",
            "high/use.py": (
                "import sys\n"
                "from mlgoodput.low import calc\n"
                "from mlgoodput.low.calc import Calc\n\n"
                "def f(c: Calc) -> object:\n"
                "    sys._getframe(0)\n"  # another library's private: not ours to fix
                "    return c._cache, calc._hidden, c.__class__, self_like(c)\n\n"
                "def self_like(c: Calc) -> object:\n"
                "    return c.public._inner\n"
            ),
        },
    )
    reaches = g.all_reaches(root)
    assert [(r.module, r.line, r.expr) for r in reaches] == [
        ("mlgoodput.high.use", 7, "c._cache"),
        ("mlgoodput.high.use", 7, "calc._hidden"),
        ("mlgoodput.high.use", 10, "c.public._inner"),
    ]


def test_a_private_name_a_protocol_describes_is_still_a_reach(tmp_path: Path) -> None:
    """A Protocol names another module's object; declaring `_step_end` there does not make it ours."""
    root = plant(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/query.py": (
                "from typing import Protocol\n\n"
                "class EngineLike(Protocol):\n"
                "    def _step_end(self) -> float: ...\n\n"
                "def end(e: EngineLike) -> float:\n"
                "    return e._step_end()\n"
            ),
        },
    )
    assert [(r.module, r.line, r.expr) for r in g.all_reaches(root)] == [("mlgoodput.low.query", 7, "e._step_end")]


def test_an_import_of_another_packages_private_module_is_reported(tmp_path: Path) -> None:
    root = plant(
        tmp_path,
        {
            "low/__init__.py": "",
            "low/_impl.py": "X = 1\n_Y = 2\n",
            "low/pub.py": "_Z = 3\n",
            "high/__init__.py": "from mlgoodput.low._impl import X\nfrom mlgoodput.low.pub import _Z\n",
        },
    )
    problems = sorted(
        why
        for e in g.all_edges(root)
        if e.source == "mlgoodput.high" and (why := g.private_import(root, e)) is not None
    )
    assert problems == [
        "imports private module mlgoodput.low._impl",
        "imports private name(s) _Z from mlgoodput.low.pub",
    ]


def test_the_drawing_names_every_folder_edge_with_its_count(tmp_path: Path) -> None:
    root = plant(
        tmp_path,
        {"core.py": "", "low/__init__.py": "import mlgoodput.core\n", "high/__init__.py": "import mlgoodput.low\n"},
    )
    text = g.draw(root, FLOORS)
    assert " 0. core" in text and " 2. high" in text
    assert "n_high[high] -->|1| n_low[low]" in text
    assert "n_low[low] -->|1| n_core[core]" in text


def test_an_import_of_another_modules_private_name_is_reported(tmp_path: Path) -> None:
    """Inside one package too: `from mlgoodput.low.a import _helper` in low/b.py is a reach."""
    root = plant(
        tmp_path,
        {
            "low/__init__.py": "from mlgoodput.low import _impl\n",
            "low/_impl.py": "X = 1\n",
            "low/a.py": "def _helper() -> int:\n    return 1\n\n__version__ = '1'\n",
            "low/b.py": "from mlgoodput.low.a import __version__, _helper\n",
        },
    )
    assert g.private_name_imports(g.all_edges(root)) == ["mlgoodput.low.b (line 1): _helper from mlgoodput.low.a"]
