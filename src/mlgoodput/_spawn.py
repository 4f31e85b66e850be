"""The one way mlgoodput starts a child Python process (the exporter process, the console's
store process, the demos' workloads).

The child runs this interpreter (`sys.executable`) and imports this very mlgoodput: its
PYTHONPATH starts with the folder that holds the package, then this process's `sys.path`
(absolute), then the PYTHONPATH it had. Nothing of the user's `__main__` is imported (no
multiprocessing "spawn" that would re-run the training script).
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["IGNORE_SIGINT", "child_env", "helper_env", "package_root", "python_path", "start_python"]

#: Code that makes a child ignore Ctrl-C: a terminal's SIGINT reaches the whole process
#: group, and a helper child must outlive it until its parent stops it.
IGNORE_SIGINT = "import signal; signal.signal(signal.SIGINT, signal.SIG_IGN); "


def helper_env() -> dict[str, str]:
    """Extra environment for mlgoodput's own helper children (never a user's workload): one
    OpenBLAS thread, since a helper does no linear algebra and numpy's idle BLAS threads
    spin on a CPU at import (about 50 ms of CPU each start). A value the user set is kept."""
    return {"OPENBLAS_NUM_THREADS": os.environ.get("OPENBLAS_NUM_THREADS", "1")}


def package_root() -> str:
    """The folder that holds the `mlgoodput` package this process runs."""
    return str(Path(__file__).resolve().parents[1])


def python_path(base: Mapping[str, str] | None = None) -> str:
    """The child's PYTHONPATH: the package's folder, this process's sys.path, then the
    PYTHONPATH of `base` (default os.environ); absolute, without repeats."""
    env = os.environ if base is None else base
    parts = [package_root()] + [os.path.abspath(p) for p in sys.path if p]
    parts += [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return os.pathsep.join(dict.fromkeys(parts))


def child_env(extra: Mapping[str, str] | None = None, *, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child: `base` (default os.environ), PYTHONPATH as `python_path`
    says, then `extra` (which wins, PYTHONPATH too)."""
    env = dict(os.environ if base is None else base)
    env["PYTHONPATH"] = python_path(env)
    env.update(extra or {})
    return env


def start_python(
    args: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    extra_env: Mapping[str, str] | None = None,
    ignore_sigint: bool = False,
    **popen: Any,
) -> subprocess.Popen[Any]:
    """Start `sys.executable` with `args` (e.g. `["-m", "pkg.mod", "--flag"]` or
    `["-c", code, arg1]`) in `child_env(extra_env, base=env)`; `popen` goes to
    subprocess.Popen (stdin, stdout, pass_fds, text, ...). `ignore_sigint` (only with `-c`)
    makes the child ignore Ctrl-C before it runs the code."""
    argv = list(args)
    if not argv or not all(isinstance(a, str) for a in argv):
        raise ValueError(f"args must be a non-empty list of strings such as ['-m', 'module'], got {args!r}")
    if ignore_sigint:
        if argv[0] != "-c" or len(argv) < 2:
            raise ValueError(f"ignore_sigint needs args ['-c', code, ...], got {args!r}")
        argv[1] = IGNORE_SIGINT + argv[1]
    return subprocess.Popen([sys.executable, *argv], env=child_env(extra_env, base=env), **popen)
