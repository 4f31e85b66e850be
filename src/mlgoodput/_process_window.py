"""The process's window: when it started (a framework callback's job starts there) and a
quick exit once the job has ended.

Imports and model building happen before a trainer's callback exists, yet they are the
job's badput all the same. The start is read, in this order:

- Linux: `starttime` of /proc/self/stat (clock ticks after boot) against CLOCK_BOOTTIME
  now, which gives the process's age to the tick (10 ms) in the clock the kernel counts it
  with (time namespaces included; /proc/stat's boot time is whole seconds, too coarse);
- psutil's `Process().create_time()` where psutil is installed (macOS, Windows, ...);
- the time `mlgoodput` was first imported: never earlier than the process's start.

Only the first job a process records starts there (`claim_process_start`): a second trainer
in the same process, or a session that began long before its job (a notebook's kernel, a
REPL), starts when it says it does.

At the other end, a process that imported torch with Lightning or transformers spends some
1.5 s exiting after its last line, all of it after the job's recorded end with the
accelerators still held: while the interpreter tears down some 3,700 modules, its
collector walks every object they hold, again and again. `freeze_collector_at_exit` (called
once a job has ended) freezes the collector's view in an at-exit hook, and the exit takes
0.2 s. Objects are still freed as their last reference goes; only reference cycles left at
exit go to the operating system without their finalizers, which Python does not promise
to run at exit anyway. $MLGOODPUT_EXIT_GC=1 keeps the collector's passes.
"""

from __future__ import annotations

import atexit
import builtins
import gc
import os
import sys
import threading
import time

from mlgoodput import _env
from mlgoodput._worker import at_fork_in_child

__all__ = ["EXIT_GC", "claim_process_start", "freeze_collector_at_exit", "interactive", "process_start_time"]

EXIT_GC = _env.EXIT_GC

#: Allowance for a process start read a little after the import time (clock ticks, rounding).
_SLACK_S = 0.05


def _import_time() -> float:
    pkg = sys.modules.get("mlgoodput")
    t = getattr(pkg, "_IMPORTED_AT", None)
    return float(t) if isinstance(t, (int, float)) else time.time()


def _from_proc(stat_path: str = "/proc/self/stat") -> float | None:
    """The start from /proc (Linux), or None where it cannot be read."""
    boottime = getattr(time, "CLOCK_BOOTTIME", None)
    if boottime is None:
        return None
    try:
        with open(stat_path, "rb") as f:
            raw = f.read().decode("ascii", "replace")
        # the command name (field 2) may hold spaces and parentheses: count after its last ')'
        fields = raw[raw.rindex(")") + 2 :].split()
        ticks = int(fields[19])  # field 22, starttime
        hz = os.sysconf("SC_CLK_TCK")
        age = time.clock_gettime(boottime) - ticks / hz
        now = time.time()
    except (OSError, ValueError, IndexError):
        return None
    return now - age if age >= 0 else None


def _from_psutil() -> float | None:
    try:
        import psutil  # lazy: optional, only where /proc cannot tell
    except ImportError:
        return None
    try:
        return float(psutil.Process().create_time())
    except Exception:  # psutil's own errors (access denied, a process table it cannot read)
        return None


def process_start_time() -> tuple[float, str]:
    """(UNIX seconds, source): "proc", "psutil" or "import" (see the module docstring). A
    reading later than mlgoodput's import cannot be right and falls through to the next."""
    imported = _import_time()
    for source, read in (("proc", _from_proc), ("psutil", _from_psutil)):
        t = read()
        if t is not None and t <= imported + _SLACK_S:
            return min(t, imported), source
    return imported, "import"


def interactive() -> bool:
    """True in a REPL, `python -i`, IPython or a Jupyter kernel: the process began long before
    any job in it, so its start says nothing about the job's."""
    return (
        hasattr(sys, "ps1")
        or bool(sys.flags.interactive)
        or bool(getattr(builtins, "__IPYTHON__", False))
        or "ipykernel" in sys.modules
    )


_lock = threading.Lock()
_claimed_by: int | None = None  # the pid that took its start (a forked child is a process of its own)


def claim_process_start() -> float | None:
    """The process's start for the first job of this process that asks, None for every later
    one and in an interactive session (those start when they say they do)."""
    global _claimed_by
    pid = os.getpid()
    with _lock:
        if _claimed_by == pid or interactive():
            return None
        _claimed_by = pid
    return process_start_time()[0]


_exit_hook_for: int | None = None  # the pid whose exit the hook is registered for


def _freeze_at_exit() -> None:
    if os.getpid() == _exit_hook_for and not _env.exit_gc_kept():  # read at exit: set late, it still counts
        gc.freeze()


def freeze_collector_at_exit() -> None:
    """Once a job has ended: have this process's exit skip the collector's passes over every
    object (see the module docstring). Registered once per process; never raises."""
    global _exit_hook_for
    pid = os.getpid()
    with _lock:
        if _exit_hook_for == pid:
            return
        first = _exit_hook_for is None
        _exit_hook_for = pid
    if first:  # a forked child shares the parent's registration, which checks the pid
        atexit.register(_freeze_at_exit)


def _reset_lock_in_child() -> None:
    global _lock
    _lock = threading.Lock()


at_fork_in_child(_reset_lock_in_child)
