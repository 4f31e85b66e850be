"""Who this process is: its index among the job's processes, their count, its local rank, the
attempt (restart) number, and where that was found.

Every part of mlgoodput that needs a process index (the recorder, diagnostics, the JAX and
torch integrations) asks `detect_identity()`, so they all agree. The first source that
knows wins, in this order (docs/recording.md, "Who a process is"):

1. the `process_index=` argument;
2. `$MLGOODPUT_PROCESS_INDEX`;
3. a JAX runtime that is already initialized (`jax.distributed`, or JAX's backends);
4. a torch.distributed default process group that is already initialized;
5. `$JAX_PROCESS_ID`;
6. torchrun: `$RANK`, `$WORLD_SIZE`, `$LOCAL_RANK`, `$TORCHELASTIC_RESTART_COUNT`;
7. MPI: `$OMPI_COMM_WORLD_RANK` (Open MPI), `$PMI_RANK` (MPICH, Intel MPI), `$PMIX_RANK`;
8. Slurm: `$SLURM_PROCID`, `$SLURM_NTASKS`, `$SLURM_LOCALID`, `$SLURM_RESTART_COUNT`
   (after the launchers that run inside an allocation: under mpirun or torchrun, every
   process inherits the SLURM_PROCID of the step that started it, shared by several);
9. Cloud TPU: `$TPU_WORKER_ID`, `$CLOUD_TPU_TASK_ID`;
10. else process 0 of 1.

Nothing here imports JAX or torch: a runtime counts only when the program imported and
initialized it. A variable that is not a non-negative integer (or a rank not below its
world size) is skipped with one warning, and the next source decides.
"""

from __future__ import annotations

import logging
import os
import socket
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from mlgoodput import _env
from mlgoodput._misuse import MlGoodputWarning, first_warning, user_stacklevel

__all__ = ["SOURCES", "ProcessIdentity", "detect_identity"]

log = logging.getLogger("mlgoodput")

#: The sources in the order they are consulted (the values of `ProcessIdentity.source`).
SOURCES: tuple[str, ...] = (
    "argument",
    _env.PROCESS_INDEX,
    "jax",
    "torch.distributed",
    "JAX_PROCESS_ID",
    "torchrun",
    "mpi",
    "slurm",
    "tpu",
    "default",
)

#: Variables that name one workload across its processes and restarts, first match wins.
WORKLOAD_ID_VARS: tuple[str, ...] = (_env.WORKLOAD_ID, "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID")


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """One process of a job, as detected by `detect_identity()`."""

    process_index: int = 0
    #: The job's number of processes; None when the source does not say.
    process_count: int | None = 1
    local_rank: int = 0  # this process's index on its host
    attempt: int = 0  # restarts of the job (or of its worker group) before this one
    #: The launcher's id of the workload, the same for all its processes and restarts
    #: ($MLGOODPUT_WORKLOAD_ID, else $SLURM_JOB_ID, else $TORCHELASTIC_RUN_ID); None if none.
    job_name: str | None = None
    pid: int = 0
    hostname: str = ""
    source: str = "default"  # one of SOURCES: where process_index came from

    @property
    def is_lead(self) -> bool:
        """Process 0 leads the accounting."""
        return self.process_index == 0


class BadValue(ValueError):
    """A launcher variable that is not usable (not an integer, negative, a rank past the size)."""


def _warn_bad(err: BadValue, consequence: str) -> None:
    """Warn once per bad value (process-wide; `_misuse.reset_warned()` forgets)."""
    if not first_warning(("identity", str(err))):
        return
    text = f"mlgoodput: {err}; {consequence}"
    log.warning("%s", text)
    warnings.warn(text, MlGoodputWarning, stacklevel=user_stacklevel())


def _extra(env: Mapping[str, str], name: str, strict: bool) -> int | None:
    """An optional detail of a source (local rank, restart count): strict raises BadValue,
    else a bad value is ignored with one warning."""
    try:
        return env_int(env, name)
    except BadValue as e:
        if strict:
            raise
        _warn_bad(e, "ignored")
        return None


def env_int(env: Mapping[str, str], name: str, minimum: int = 0) -> int | None:
    """`$name` as an int (None when unset or blank); BadValue when it is not one >= minimum."""
    raw = env.get(name)
    if raw is None or not raw.strip():
        return None
    try:
        v = int(raw.strip())
    except ValueError:
        raise BadValue(f"${name} must be an integer, got {raw!r}") from None
    if v < minimum:
        raise BadValue(f"${name} must be >= {minimum}, got {raw!r}")
    return v


@dataclass(frozen=True, slots=True)
class _Found:
    index: int
    count: int | None = None
    local_rank: int | None = None
    attempt: int | None = None


def _ranked(index: int, count: int | None, index_var: str, count_var: str) -> None:
    if count is not None and index >= count:
        raise BadValue(f"${index_var} ({index}) must be below ${count_var} ({count})")


def _from_jax() -> _Found | None:
    """An initialized JAX runtime's index and count; never imports nor initializes JAX."""
    if "jax" not in sys.modules:
        return None
    try:
        dist = sys.modules.get("jax._src.distributed")
        state = getattr(dist, "global_state", None)
        pid = getattr(state, "process_id", None)
        if getattr(state, "client", None) is not None and isinstance(pid, int):
            n = getattr(state, "num_processes", None)
            return _Found(pid, n if isinstance(n, int) else None)
        xb = sys.modules.get("jax._src.xla_bridge")
        ready = getattr(xb, "backends_are_initialized", None)
        if ready is not None and ready():
            jax = sys.modules["jax"]
            return _Found(int(jax.process_index()), int(jax.process_count()))
    except Exception:  # a JAX we do not understand: the environment decides
        return None
    return None


def torch_process_group() -> tuple[int, int] | None:
    """(rank, world size) of an initialized torch.distributed default group; never imports torch."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank()), int(dist.get_world_size())
    except Exception:  # a torch we do not understand: the environment decides
        return None
    return None


def _from_torch() -> _Found | None:
    pg = torch_process_group()
    return None if pg is None else _Found(pg[0], pg[1])


def from_torchrun(env: Mapping[str, str], strict: bool = True) -> _Found | None:
    """torchrun's (the elastic agent's) variables; None without $RANK; BadValue when unusable
    (a bad $LOCAL_RANK or restart count too, if `strict`)."""
    rank = env_int(env, "RANK")
    if rank is None:
        return None
    world = env_int(env, "WORLD_SIZE", 1)
    _ranked(rank, world, "RANK", "WORLD_SIZE")
    return _Found(rank, world, _extra(env, "LOCAL_RANK", strict), _extra(env, "TORCHELASTIC_RESTART_COUNT", strict))


def _from_slurm(env: Mapping[str, str]) -> _Found | None:
    rank = env_int(env, "SLURM_PROCID")
    if rank is None:
        return None
    n = env_int(env, "SLURM_NTASKS", 1)
    _ranked(rank, n, "SLURM_PROCID", "SLURM_NTASKS")
    return _Found(rank, n, _extra(env, "SLURM_LOCALID", False), _extra(env, "SLURM_RESTART_COUNT", False))


_MPI = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID"),
    ("PMIX_RANK", "PMIX_SIZE", "PMIX_LOCAL_RANK"),
)


def _from_mpi(env: Mapping[str, str]) -> _Found | None:
    for rank_var, size_var, local_var in _MPI:
        try:
            rank = env_int(env, rank_var)
            if rank is None:
                continue
            n = env_int(env, size_var, 1)
            _ranked(rank, n, rank_var, size_var)
        except BadValue as e:  # another MPI's variable may still be good
            _warn_bad(e, "skipped: the process index comes from the next variable or source")
            continue
        return _Found(rank, n, _extra(env, local_var, False))
    return None


def _from_tpu(env: Mapping[str, str]) -> _Found | None:
    for var in (_env.TPU_WORKER_ID, "CLOUD_TPU_TASK_ID"):
        try:
            idx = env_int(env, var)
        except BadValue as e:
            _warn_bad(e, "skipped: the process index comes from the next variable or source")
            continue
        if idx is not None:
            hosts = [h for h in env.get("TPU_WORKER_HOSTNAMES", "").split(",") if h.strip()]
            return _Found(idx, len(hosts) if len(hosts) > idx else None)
    return None


def _from_jax_env(env: Mapping[str, str]) -> _Found | None:
    idx = env_int(env, "JAX_PROCESS_ID")
    return None if idx is None else _Found(idx)


def _from_mlgoodput(env: Mapping[str, str]) -> _Found | None:
    idx = env_int(env, _env.PROCESS_INDEX)
    return None if idx is None else _Found(idx)


def _lenient(env: Mapping[str, str], names: tuple[str, ...]) -> int | None:
    for name in names:
        v = _extra(env, name, False)
        if v is not None:
            return v
    return None


def workload_id(env: Mapping[str, str] | None = None) -> str | None:
    """The launcher's id of the workload (see `ProcessIdentity.job_name`), else None."""
    e = os.environ if env is None else env
    for var in WORKLOAD_ID_VARS:
        v = e.get(var, "").strip()
        if v and v.lower() != "none":
            return v
    return None


def detect_identity(
    process_index: int | None = None,
    *,
    env: Mapping[str, str] | None = None,
    runtimes: bool | None = None,
) -> ProcessIdentity:
    """This process's identity, from the first source that knows (the module's docstring).

    `process_index`: an explicit index, which wins (checked: a non-negative int).
    `env`: the variables to read (default `os.environ`). `runtimes`: whether initialized
    JAX and torch.distributed runtimes count (default: only when `env` is None). Never
    raises for a launcher's variable: a bad one warns once and the next source decides.
    """
    if process_index is not None and (
        isinstance(process_index, bool) or not isinstance(process_index, int) or process_index < 0
    ):
        raise ValueError(f"process_index must be a non-negative int or None, got {process_index!r}")
    e: Mapping[str, str] = os.environ if env is None else env
    use_runtimes = env is None if runtimes is None else runtimes
    finders: list[tuple[str, Callable[[], _Found | None]]] = [
        ("argument", lambda: None if process_index is None else _Found(process_index)),
        (_env.PROCESS_INDEX, lambda: _from_mlgoodput(e)),
        ("jax", _from_jax if use_runtimes else lambda: None),
        ("torch.distributed", _from_torch if use_runtimes else lambda: None),
        ("JAX_PROCESS_ID", lambda: _from_jax_env(e)),
        ("torchrun", lambda: from_torchrun(e, strict=False)),
        ("mpi", lambda: _from_mpi(e)),
        ("slurm", lambda: _from_slurm(e)),
        ("tpu", lambda: _from_tpu(e)),
    ]
    source, found = "default", _Found(0, 1)
    for name, find in finders:
        try:
            got = find()
        except BadValue as err:
            _warn_bad(err, f"skipped: the process index comes from the source after {name!r}")
            continue
        if got is not None:
            source, found = name, got
            break
    local = found.local_rank
    if local is None:
        local = _lenient(e, ("LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK")) or 0
    attempt = found.attempt
    if attempt is None:
        attempt = _lenient(e, ("TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT")) or 0
    return ProcessIdentity(
        process_index=found.index,
        process_count=found.count,
        local_rank=local,
        attempt=attempt,
        job_name=workload_id(e),
        pid=os.getpid(),
        hostname=socket.gethostname(),
        source=source,
    )
