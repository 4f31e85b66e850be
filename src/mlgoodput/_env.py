"""Environment variables that configure mlgoodput, and the built-in defaults behind them.

Every name is read when it is used, never at import. Most also have a keyword argument
(`store=`, `snapshot=`, `strict=`, `process_index=`, ...), which wins over the environment.
The exceptions, set in the environment only: `MLGOODPUT_JOURNAL_DIR`,
`MLGOODPUT_RUNTIME_DIR`, `MLGOODPUT_POD_NAME`, `MLGOODPUT_CONSOLE_USAGE` (which
`Usage.enable` sets for the processes it starts), `MLGOODPUT_EXIT_GC` and `MLGOODPUT_DEBUG`
(read at exit), `MLGOODPUT_DEAD_AFTER_S` (read at each query that judges whether a job is
dead) and `MLGOODPUT_NUMPY` (read once per process and kept).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

#: Store URL or path used when `store=None` (`sqlite:///abs/path.db`, `/path/x.db`, `memory://name`).
STORE = "MLGOODPUT_STORE"
#: Directory of the local journals that hold events until they are in the store.
JOURNAL_DIR = "MLGOODPUT_JOURNAL_DIR"
#: "1": journals hand their events to one shipper per node and store (`mlgoodput._aggregator`)
#: instead of each shipping its own, when `Journal(node_shipper=None)`.
NODE_SHIPPER = "MLGOODPUT_NODE_SHIPPER"
#: Address of a live console server that processes join (see mlgoodput.console).
CONSOLE = "MLGOODPUT_CONSOLE"
#: Token for a console server on TCP.
CONSOLE_TOKEN = "MLGOODPUT_CONSOLE_TOKEN"
#: Usage sampling interval in seconds for console clients (set by `Usage.enable`; unset: off).
CONSOLE_USAGE = "MLGOODPUT_CONSOLE_USAGE"
#: Identity of one workload across its restarts: a run keeps its name while this stays the same.
WORKLOAD_ID = "MLGOODPUT_WORKLOAD_ID"
#: This process's index among the workload's processes; it wins over every runtime and launcher
#: (the precedence: mlgoodput.identity).
PROCESS_INDEX = "MLGOODPUT_PROCESS_INDEX"
#: Base directory (or fsspec URL) for run profiles when `gcs_path=None`.
PROFILE_DIR = "MLGOODPUT_PROFILE_DIR"
#: Private per-user directory for on-demand profiling endpoints and sampler locks.
RUNTIME_DIR = "MLGOODPUT_RUNTIME_DIR"
#: Saved accounting state: "0" (or "off") never saves nor uses one; "always" saves after every
#: query that read something new; unset: saves when the job grew by 100,000 events and 10 %.
SNAPSHOT = "MLGOODPUT_SNAPSHOT"
#: "0" (or "off") keeps the accounting on its pure-Python passes even where numpy (the `fast`
#: extra) is installed; unset: long column passes use numpy when it is there (same results).
NUMPY = "MLGOODPUT_NUMPY"
#: Seconds of silence (no event and no sign of life from any process of a job) after which a
#: job that sends signs of life is judged dead (docs/accounting.md, "A job that dies").
DEAD_AFTER = "MLGOODPUT_DEAD_AFTER_S"
#: Seconds one PostgreSQL store call may wait on the server before it is cancelled, then cut
#: off (store/_deadline.py; default 30): for links so slow that one small call takes longer.
PG_CALL_TIMEOUT = "MLGOODPUT_PG_CALL_TIMEOUT_S"
#: "1" keeps the garbage collector's passes when a process that ran a job exits (by default
#: mlgoodput freezes them there: torch-heavy processes otherwise take 1.5 s to exit, time a
#: callback's job counts as OTHER); see mlgoodput._process_window.
EXIT_GC = "MLGOODPUT_EXIT_GC"
#: "1" prints one status line per background worker at exit (as `mlgoodput --debug`).
DEBUG = "MLGOODPUT_DEBUG"
#: Peak FLOP/s of this process's CPU devices together, for MFU on CPU (mlgoodput.flops).
CPU_PEAK_FLOPS = "MLGOODPUT_CPU_PEAK_FLOPS"
#: When the job was submitted (Unix seconds or ISO 8601), as a scheduler or launcher leaves it.
JOB_SUBMIT_TIME = "MLGOODPUT_JOB_SUBMIT_TIME"
#: The Kubernetes pod's name, where HOSTNAME is not it (the submit time is the pod's creation).
POD_NAME = "MLGOODPUT_POD_NAME"
#: A job's labels for the fleet view, "key=value,key2=value2" (docs/fleet.md); a recorder's
#: `labels=` argument wins on a key.
LABELS = "MLGOODPUT_LABELS"
#: How many accelerators the whole job holds, where a recorder cannot detect it.
ACCELERATORS = "MLGOODPUT_ACCELERATORS"
#: The kind of the job's accelerators (the key of a price in `mlgoodput fleet --prices`).
ACCELERATOR_TYPE = "MLGOODPUT_ACCELERATOR_TYPE"
#: The built-in dead limit (or four of the writers' sign-of-life periods, if longer).
DEAD_AFTER_S = 120.0


_KEYS: dict[str, object] = {}  # a variable's name as os.environ's own table keys it


def get(name: str) -> str | None:
    """`os.environ.get(name)`, for the few variables a reader asks before every query: there
    a variable that is not set (the usual) costs `os.environ` a KeyError raised and caught,
    a few microseconds each time. On POSIX the table behind `os.environ` is read directly
    (exactly what `os.environ` shows); elsewhere, or if `os.environ` was replaced
    by another mapping, `os.environ.get` itself."""
    env = os.environ
    data = getattr(env, "_data", None)
    if os.name != "posix" or type(data) is not dict:
        return env.get(name)
    key = _KEYS.get(name)
    if key is None:
        key = _KEYS[name] = env.encodekey(name)
    raw = data.get(key)
    return None if raw is None else str(env.decodevalue(raw))


def seconds(name: str) -> float | None:
    """The positive number of seconds the variable `name` holds; None when it is not set. A
    value that is not one fails with a message naming the variable and the value."""
    raw = get(name)
    if not raw:
        return None
    try:
        v = float(raw)
    except ValueError:
        v = math.nan
    if not v > 0 or math.isinf(v):
        raise ValueError(f"${name} must be a positive number of seconds, got {raw!r}")
    return v


def dead_after_s(every_s: float) -> float:
    """The dead limit for writers whose signs of life come every `every_s` seconds: the
    environment's value when set (a positive number), else the built-in rule."""
    v = seconds(DEAD_AFTER)
    return max(DEAD_AFTER_S, 4 * every_s) if v is None else v


def pg_call_timeout_s(default_s: float) -> float:
    """The PostgreSQL store's call deadline: the environment's value when set (a positive
    number of seconds), else `default_s`."""
    v = seconds(PG_CALL_TIMEOUT)
    return default_s if v is None else v


def debug_on() -> bool:
    """Whether $MLGOODPUT_DEBUG asks for the workers' status lines at exit (set, and not "0")."""
    return os.environ.get(DEBUG, "") not in ("", "0")


def exit_gc_kept() -> bool:
    """Whether $MLGOODPUT_EXIT_GC asks to keep the collector's passes at exit (set, and not "0")."""
    return os.environ.get(EXIT_GC, "") not in ("", "0")


def data_dir() -> Path:
    """Where mlgoodput keeps its files by default: $XDG_DATA_HOME/mlgoodput or ~/.local/share/mlgoodput."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "mlgoodput"


def default_store_url() -> str:
    """$MLGOODPUT_STORE, else the SQLite file `mlgoodput.db` in `data_dir()`."""
    return os.environ.get(STORE) or "sqlite://" + str(data_dir() / "mlgoodput.db")


#: The variables that name a Google Cloud project (google-auth's and gcloud's), in the order read.
GCP_PROJECT_VARS: tuple[str, ...] = ("GOOGLE_CLOUD_PROJECT", "GCLOUD_PROJECT", "GCP_PROJECT", "CLOUDSDK_CORE_PROJECT")
#: Set on a Cloud TPU VM: the TPU's name.
TPU_NAME = "TPU_NAME"
#: Set on a Cloud TPU VM: this worker's index in the slice (also a process identity source).
TPU_WORKER_ID = "TPU_WORKER_ID"
#: Host (and port) of the GCE metadata server, as google-auth reads it; default metadata.google.internal.
GCE_METADATA_HOST = "GCE_METADATA_HOST"
#: "1" turns the warnings for misuse on the training path (an end without a start, a step
#: going back, ...) into errors, when `strict=None`: for users' own tests.
STRICT = "MLGOODPUT_STRICT"
