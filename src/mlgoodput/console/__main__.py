"""`python -m mlgoodput.console ACTION ...`: the same as `mlgoodput console ACTION ...`.

An entry point like `mlgoodput/__main__.py`, so it hands over to the one command line.
"""

from __future__ import annotations

import sys

from mlgoodput.cli import main

if __name__ == "__main__":
    sys.exit(main(["console", *sys.argv[1:]]))
