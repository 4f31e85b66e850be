"""The one place in mlgoodput that drives `jax.profiler`.

JAX allows one trace per process, and a second `start_trace` fails deep inside JAX.
Everything in mlgoodput that profiles (programmatic `xprof()`, on-demand captures, the
JAX helpers) goes through `start_trace`/`stop_trace` here, so a conflict is caught up
front and reported with who holds the profiler and since when.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

__all__ = [
    "PROFILE_SUFFIXES",
    "ProfilerBackend",
    "ProfilerBusyError",
    "ProfilerNotActiveError",
    "TraceInfo",
    "active_trace",
    "set_backend",
    "start_trace",
    "stop_trace",
]


#: The endings of the files a trace leaves (what runs record, and all the web UI serves).
PROFILE_SUFFIXES = (
    ".xplane.pb",
    ".trace.json.gz",
    ".trace.json",
    ".memory_profile.json.gz",
    ".input_pipeline.pb",
    ".overview_page.pb",
    ".tensorflow_stats.pb",
)


class ProfilerBusyError(RuntimeError):
    """A trace is already being captured in this process; only one can run at a time."""


class ProfilerNotActiveError(RuntimeError):
    """`stop_trace` was called while no trace was being captured."""


@dataclass(frozen=True, slots=True)
class TraceInfo:
    """The trace now running: where it goes, who started it, when (UNIX seconds)."""

    log_dir: str
    owner: str
    started: float


class ProfilerBackend(Protocol):
    """What captures a trace: `jax.profiler` by default; `mlgoodput.torch.use_torch_profiler()`
    puts torch.profiler here. `start_trace` writes under `log_dir/plugins/profile/<dir>/`."""

    def start_trace(self, log_dir: str) -> None: ...

    def stop_trace(self) -> None: ...


_lock = threading.Lock()
_active: TraceInfo | None = None
_backend: ProfilerBackend | None = None


def set_backend(backend: ProfilerBackend | None) -> ProfilerBackend | None:
    """Capture traces with `backend` (None: JAX) from now on; returns the previous one.
    Raises ProfilerBusyError while a trace is running."""
    global _backend
    with _lock:
        if _active is not None:
            raise ProfilerBusyError("cannot change the profiler while a profile is being captured")
        old, _backend = _backend, backend
        return old


def _jax_profiler() -> object:
    try:
        import jax.profiler
    except ImportError as e:  # pragma: no cover - jax is installed where profiling is used
        raise ImportError("profiling needs JAX: pip install 'mlgoodput[jax]'") from e
    return jax.profiler


def active_trace() -> TraceInfo | None:
    """The trace being captured now, or None."""
    return _active


def start_trace(log_dir: str | os.PathLike[str], *, owner: str = "programmatic") -> TraceInfo:
    """Start a JAX trace written under `log_dir` (as `plugins/profile/<timestamp>/`).

    Raises ProfilerBusyError when a trace is already running (ours or one started
    directly through jax.profiler), and OSError when `log_dir` cannot be created.
    """
    global _active
    with _lock:
        if _active is not None:
            since = time.strftime("%H:%M:%S", time.localtime(_active.started))
            raise ProfilerBusyError(
                f"cannot start a profile ({owner}): a {_active.owner} profile is already being "
                f"captured into {_active.log_dir} since {since}; stop it first"
                " (JAX can capture one trace per process at a time)"
            )
        d = Path(log_dir)
        d.mkdir(parents=True, exist_ok=True)
        prof = _backend if _backend is not None else _jax_profiler()
        try:
            prof.start_trace(str(d))  # type: ignore[attr-defined]
        except RuntimeError as e:
            if "already" in str(e).lower():
                raise ProfilerBusyError(
                    f"cannot start a profile ({owner}): a JAX trace was started outside "
                    "mlgoodput (jax.profiler.start_trace) and is still running"
                ) from e
            raise
        _active = TraceInfo(str(d), owner, time.time())
        return _active


def stop_trace() -> list[Path]:
    """Stop the running trace and return the files it wrote (xplane.pb, trace.json.gz, ...)."""
    global _active
    with _lock:
        info = _active
        if info is None:
            raise ProfilerNotActiveError("no profile is being captured; call start first")
        before = _files(info.log_dir)
        try:
            (_backend if _backend is not None else _jax_profiler()).stop_trace()  # type: ignore[attr-defined]
        finally:
            _active = None
        return sorted(set(_files(info.log_dir)) - set(before))


def _files(log_dir: str) -> list[Path]:
    root = Path(log_dir) / "plugins" / "profile"
    if not root.is_dir():
        return []
    return [p for p in root.rglob("*") if p.is_file()]
