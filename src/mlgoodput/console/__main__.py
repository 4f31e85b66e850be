"""`python -m mlgoodput.console ACTION ...`: the same as `mlgoodput console ACTION ...`.

An entry point like `mlgoodput/__main__.py`, so it hands over to the one command line. It is a
program, never imported: tests/test_import_graph.py puts every `__main__` module on the top
floor, so this import of `mlgoodput.cli` (floors above the console) closes no loop.
"""

from __future__ import annotations

import sys

from mlgoodput.cli import main

if __name__ == "__main__":
    sys.exit(main(["console", *sys.argv[1:]]))
