"""Run every bench/bench_*.py in turn (each prints its own table); exit non-zero if one fails."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def main() -> int:
    here = Path(__file__).resolve().parent
    src = str(here.parent / "src")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH")) if p)}
    failed = []
    for script in sorted(here.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        rc = subprocess.call([sys.executable, str(script), *sys.argv[1:]], env=env)
        if rc != 0:
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
