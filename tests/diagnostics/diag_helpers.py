"""Helpers shared by the diagnostics tests (a unique module name: test directories have no __init__)."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Sequence
from pathlib import Path


def child_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment for a child process: this test's directories and our sources."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


CHILD = [sys.executable, str(Path(__file__).with_name("diag_child.py"))]


def run_cli(argv: Sequence[str]) -> int:
    """`mlgoodput ARGV` in this process (through cli.main once every listed command exists)."""
    if importlib.util.find_spec("mlgoodput._cli.report") is not None:
        from mlgoodput.cli import main

        return main(list(argv))
    from mlgoodput._cli import profile, runs

    p = argparse.ArgumentParser(prog="mlgoodput")
    sub = p.add_subparsers(dest="command", required=True)
    runs.register(sub)
    profile.register(sub)
    args = p.parse_args(list(argv))
    try:  # the same error handling as mlgoodput.cli.main
        return int(args.func(args) or 0)
    except (ValueError, TypeError, LookupError) as e:
        print(f"mlgoodput: error: {e}", file=sys.stderr)
        return 2
