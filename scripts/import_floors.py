"""Print the folder graph of mlgoodput: its floors, and a mermaid flowchart of the imports.

    python scripts/import_floors.py            # text with a mermaid block, for docs/architecture.md

Each folder under src/mlgoodput is one node; the top-level modules of a floor are drawn as one
box named after the floor (the test checks each of them as a node of its own). An edge
carries how many import statements run from one node to the other (lazy ones included). The
floors are the ones tests/test_import_graph.py checks.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> int:
    """Print the drawing on stdout."""
    sys.path.insert(0, str(REPO))
    from tests import import_graph
    from tests.test_import_graph import FLOOR_NAMES, FLOORS

    sys.stdout.write(import_graph.draw(REPO / "src", FLOORS, FLOOR_NAMES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
