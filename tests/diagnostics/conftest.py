"""Each test gets its own store, data, journal, runtime and profile directories, and no run left over."""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

_VARS = ("MLGOODPUT_STORE", "MLGOODPUT_JOURNAL_DIR", "MLGOODPUT_WORKLOAD_ID", "MLGOODPUT_PROCESS_INDEX",
         "MLGOODPUT_PROFILE_DIR", "MLGOODPUT_RUNTIME_DIR", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")


@pytest.fixture(autouse=True)
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    for v in _VARS:
        monkeypatch.delenv(v, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("MLGOODPUT_STORE", str(tmp_path / "store.db"))
    monkeypatch.setenv("MLGOODPUT_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("MLGOODPUT_PROFILE_DIR", str(tmp_path / "profiles"))
    yield tmp_path
    from mlgoodput.diagnostics import current_run

    run = current_run()
    if run is not None:
        run.end()


def child_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The environment for a child process: this test's directories and our sources."""
    env = dict(os.environ)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    env.update(extra)
    return env


CHILD = [sys.executable, str(Path(__file__).with_name("_child.py"))]


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
