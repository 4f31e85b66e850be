"""Start-up cost of the command line (target: `mlgoodput --help` within 2x a bare Python start).

Prints a table: the median and best wall time of N runs of each command, each a fresh
process, and its ratio to a bare `python -c pass`. Runs interleave, so a busy machine
slows every row alike.
Run: PYTHONPATH=src python bench/bench_cli.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")

COMMANDS: list[tuple[str, list[str]]] = [
    ("python -c pass (bare start)", ["-c", "pass"]),
    ("python -c 'import argparse'", ["-c", "import argparse"]),
    ("mlgoodput --help", ["-m", "mlgoodput", "--help"]),
    ("mlgoodput --version", ["-m", "mlgoodput", "--version"]),
    ("mlgoodput report --help", ["-m", "mlgoodput", "report", "--help"]),
    ("mlgoodput console logs --help", ["-m", "mlgoodput", "console", "logs", "--help"]),
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    script = os.path.join(os.path.dirname(sys.executable), "mlgoodput")
    if os.path.exists(script):  # the console script pip writes (it imports re to clean argv[0])
        COMMANDS.insert(3, ("mlgoodput --help (console script)", [script, "--help"]))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (SRC, os.environ.get("PYTHONPATH")) if p)}
    times: dict[str, list[float]] = {name: [] for name, _ in COMMANDS}
    for _ in range(args.runs):
        for name, argv in COMMANDS:
            t = time.perf_counter()
            cmd = argv if argv[0] == script else [sys.executable, *argv]
            subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, check=True)
            times[name].append(time.perf_counter() - t)
    bare = statistics.median(times[COMMANDS[0][0]])
    print(f"{'command':<34} {'median ms':>10} {'best ms':>8} {'x bare':>7}")
    for name, _ in COMMANDS:
        med = statistics.median(times[name])
        print(f"{name:<34} {med * 1e3:>10.1f} {min(times[name]) * 1e3:>8.1f} {med / bare:>7.2f}")
    helpx = statistics.median(times["mlgoodput --help"]) / bare
    print(f"\n--help is {helpx:.2f}x a bare start (target: at most 2x): {'met' if helpx <= 2 else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
