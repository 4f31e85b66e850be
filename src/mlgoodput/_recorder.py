"""GoodputRecorder: the seed-compatible recording API over the durable journal.

Each call checks its arguments (a mistake raises at the call, naming the argument),
turns the time into UNIX seconds and appends one event to the journal of this
(store, logger_name, job_name, process index) stream. The store is written by the
journal's background shipper; nothing here touches a database.
"""

from __future__ import annotations

import datetime as _dt
import logging
import math
import os
import sys
import threading
import time as _time
from types import TracebackType
from typing import Any

from mlgoodput import _env
from mlgoodput._journal import Journal
from mlgoodput.events import Kind, check_name, check_step, to_unix
from mlgoodput.store import Store, resolve_store_url

__all__ = ["GoodputRecorder", "detect_process_index"]

_log = logging.getLogger("mlgoodput")

_now = _time.time
_datetime = _dt.datetime
_STEP_START = Kind.STEP_START


def _jax_process_index() -> int | None:
    """The process index of a JAX runtime that is already up; never imports or starts JAX."""
    if "jax" not in sys.modules:
        return None
    try:
        dist = sys.modules.get("jax._src.distributed")
        state = getattr(dist, "global_state", None)
        pid = getattr(state, "process_id", None)
        if getattr(state, "client", None) is not None and isinstance(pid, int):
            return pid
        xb = sys.modules.get("jax._src.xla_bridge")
        ready = getattr(xb, "backends_are_initialized", None)
        if ready is not None and ready():
            import jax

            return int(jax.process_index())
    except Exception:  # a JAX we do not understand: fall back to the environment
        return None
    return None


def detect_process_index() -> int:
    """An initialized JAX runtime's process index, else a launcher's rank variable, else 0."""
    pid = _jax_process_index()
    if pid is not None:
        return pid
    for var in _env.PROCESS_INDEX_VARS:
        raw = os.environ.get(var)
        if raw is None:
            continue
        try:
            v = int(raw.strip())
        except ValueError:
            continue
        if v >= 0:
            return v
    return 0


class GoodputRecorder:
    """Records a job's goodput events (job, accelerator init, preparation, data loading, steps,
    checkpoints, custom badput) with near-zero cost on the training loop."""

    def __init__(
        self,
        job_name: str,
        logger_name: str,
        logging_enabled: bool = False,
        *,
        store: str | os.PathLike[str] | Store | None = None,
        process_index: int | None = None,
    ) -> None:
        self.job_name = check_name(job_name, "job_name")
        self.logger_name = check_name(logger_name, "logger_name")
        self.logging_enabled = bool(logging_enabled)
        if isinstance(store, Store) and not isinstance(store, (str, os.PathLike)):
            self.store_url = str(store.url)
        else:
            self.store_url = resolve_store_url(store)
        self._store_arg: Any = store if store is not None else self.store_url
        if process_index is None:
            process_index = detect_process_index()
        self.process_index = check_step(process_index, "process_index")
        self._state_lock = threading.Lock()
        self._open: set[tuple[Kind, Any]] = set()  # activities started and not yet ended
        self._open_step: int | None = None
        self._closed = False
        self._journal: Journal | None = None
        if self.logging_enabled:
            self._journal = Journal.for_stream(
                self._store_arg, self.logger_name, self.job_name, self.process_index
            )
            self._append = self._journal.append
        else:
            self._append = _discard

    # -- helpers -----------------------------------------------------------------------
    def _start(self, kind: Kind, t: _dt.datetime | None, arg: str, key: Any = None,
               step: int | None = None, name: str | None = None) -> None:
        ts = _now() if t is None else (t.timestamp() if type(t) is _datetime else to_unix(t, arg))
        if self._closed:
            self._check_open()
        self._open.add((kind, key))  # one set operation: atomic under the GIL, no lock needed
        self._append(kind, ts, step, None, name)

    def _end(self, start: Kind, end: Kind, t: _dt.datetime | None, arg: str, what: str,
             key: Any = None, step: int | None = None, name: str | None = None) -> None:
        ts = _now() if t is None else (t.timestamp() if type(t) is _datetime else to_unix(t, arg))
        if self._closed:
            self._check_open()
        try:
            self._open.remove((start, key))  # atomic: two threads cannot both end one start
        except KeyError:
            raise ValueError(f"{what}: no matching start was recorded by this recorder") from None
        self._append(end, ts, step, None, name)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError(f"GoodputRecorder(job_name={self.job_name!r}) is closed")

    # -- job -----------------------------------------------------------------------------
    def record_job_start_time(self, start_time: _dt.datetime | None = None) -> None:
        """The job (this attempt) started."""
        if self.logging_enabled:
            self._start(Kind.JOB_START, start_time, "start_time")

    def record_job_end_time(self, end_time: _dt.datetime | None = None) -> None:
        """The job finished; its last step ended by now."""
        if self.logging_enabled:
            self._end(Kind.JOB_START, Kind.JOB_END, end_time, "end_time",
                      "record_job_end_time(end_time=...)")

    # -- accelerator initialization --------------------------------------------------
    def record_tpu_init_start_time(self, start_time: _dt.datetime | None = None) -> None:
        """Accelerator (TPU or GPU) initialization started."""
        if self.logging_enabled:
            self._start(Kind.ACCEL_INIT_START, start_time, "start_time")

    def record_tpu_init_end_time(self, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            self._end(Kind.ACCEL_INIT_START, Kind.ACCEL_INIT_END, end_time, "end_time",
                      "record_tpu_init_end_time(end_time=...)")

    # -- training preparation -------------------------------------------------------
    def record_training_preparation_start_time(self, start_time: _dt.datetime | None = None) -> None:
        """Training preparation (model, optimizer, mesh, checkpoint manager) started."""
        if self.logging_enabled:
            self._start(Kind.TRAINING_PREP_START, start_time, "start_time")

    def record_training_preparation_end_time(self, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            self._end(Kind.TRAINING_PREP_START, Kind.TRAINING_PREP_END, end_time, "end_time",
                      "record_training_preparation_end_time(end_time=...)")

    # -- data loading ----------------------------------------------------------------------
    def record_data_loading_start_time(self, start_time: _dt.datetime | None = None) -> None:
        """Loading a batch started (inside a step it overlaps device work)."""
        if self.logging_enabled:
            self._start(Kind.DATA_LOADING_START, start_time, "start_time")

    def record_data_loading_end_time(self, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            self._end(Kind.DATA_LOADING_START, Kind.DATA_LOADING_END, end_time, "end_time",
                      "record_data_loading_end_time(end_time=...)")

    # -- steps: the hot path -----------------------------------------------------------
    def record_step_start_time(self, step: int, start_time: _dt.datetime | None = None) -> None:
        """Step `step` started (it ends at the next step start or its step end)."""
        if not self.logging_enabled:
            return
        if type(step) is not int or step < 0:
            step = check_step(step, "step")
        if start_time is None:
            ts = _now()
        elif type(start_time) is _datetime:
            ts = start_time.timestamp()
        else:
            ts = to_unix(start_time, "start_time")
        if self._closed:
            self._check_open()
        self._open_step = step
        self._append(_STEP_START, ts, step)

    def record_step_end_time(self, step: int, end_time: _dt.datetime | None = None) -> None:
        """Step `step` ended (optional: without it a step ends at the next step start)."""
        if not self.logging_enabled:
            return
        step = check_step(step, "step")
        ts = _now() if end_time is None else to_unix(end_time, "end_time")
        with self._state_lock:
            self._check_open()
            if self._open_step != step:
                raise ValueError(
                    f"record_step_end_time(step={step!r}): step {step} is not the running step"
                    f" (last started: {self._open_step!r})"
                )
            self._open_step = None
        self._append(Kind.STEP_END, ts, step)

    # -- custom badput -------------------------------------------------------------------
    def record_custom_badput_event_start_time(
        self, start_time: _dt.datetime | None = None, custom_badput_event_type: str = "unknown"
    ) -> None:
        """An unproductive activity of your own (evaluation, SDC check, ...) started."""
        if self.logging_enabled:
            name = custom_badput_event_type
            if type(name) is not str or not name.strip():
                name = check_name(name, "custom_badput_event_type")
            self._start(Kind.CUSTOM_START, start_time, "start_time", key=name, name=name)

    def record_custom_badput_event_end_time(
        self, end_time: _dt.datetime | None = None, custom_badput_event_type: str = "unknown"
    ) -> None:
        if self.logging_enabled:
            name = custom_badput_event_type
            if type(name) is not str or not name.strip():
                name = check_name(name, "custom_badput_event_type")
            self._end(Kind.CUSTOM_START, Kind.CUSTOM_END, end_time, "end_time",
                      f"record_custom_badput_event_end_time(custom_badput_event_type={name!r})",
                      key=name, name=name)

    # -- checkpoints (the blocking part) ---------------------------------------------
    def record_checkpoint_save_start_time(self, step: int, start_time: _dt.datetime | None = None) -> None:
        """The training loop started waiting on a checkpoint save of `step`."""
        if self.logging_enabled:
            step = check_step(step, "step")
            self._start(Kind.CKPT_SAVE_START, start_time, "start_time", key=step, step=step)

    def record_checkpoint_save_end_time(self, step: int, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            step = check_step(step, "step")
            self._end(Kind.CKPT_SAVE_START, Kind.CKPT_SAVE_END, end_time, "end_time",
                      f"record_checkpoint_save_end_time(step={step!r})", key=step, step=step)

    def record_checkpoint_restore_start_time(self, step: int, start_time: _dt.datetime | None = None) -> None:
        """Restoring the checkpoint of `step` started."""
        if self.logging_enabled:
            step = check_step(step, "step")
            self._start(Kind.CKPT_RESTORE_START, start_time, "start_time", key=step, step=step)

    def record_checkpoint_restore_end_time(self, step: int, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            step = check_step(step, "step")
            self._end(Kind.CKPT_RESTORE_START, Kind.CKPT_RESTORE_END, end_time, "end_time",
                      f"record_checkpoint_restore_end_time(step={step!r})", key=step, step=step)

    # -- productivity (docs/accounting.md, "Productivity") ------------------------------------
    def record_step_flops(self, flops: float) -> None:
        """The FLOPs of one training step, summed over the job's devices, from now on (for MFU
        and program goodput). Never raises once recording started: misuse warns once."""
        if self.logging_enabled:
            v = _check_positive(flops, "flops")
            self._productivity_event(Kind.STEP_FLOPS, v, None, "record_step_flops")

    def record_peak_flops(self, flops_per_s: float, *, source: str = "recorded") -> None:
        """The peak FLOP/s of the job's devices together (overrides the detected one);
        `source` says where it came from ("recorded", "table:<device kind>", "configured",
        "measured") and is shown in the report."""
        if self.logging_enabled:
            v = _check_positive(flops_per_s, "flops_per_s")
            src = check_name(source, "source")
            self._productivity_event(Kind.PEAK_FLOPS, v, src, "record_peak_flops")

    def record_job_submit_time(self, submit_time: _dt.datetime | float | None = None) -> None:
        """When the scheduler accepted this job (attempt), for scheduling goodput: a datetime,
        UNIX seconds, or None to read what the scheduler left ($MLGOODPUT_JOB_SUBMIT_TIME,
        Slurm); when nothing is found it warns once and records nothing."""
        if not self.logging_enabled:
            return
        if submit_time is None:
            from mlgoodput._submit import detect_submit_time

            try:
                found = detect_submit_time()
            except Exception as e:  # a scheduler we do not understand: never into training
                self._warn_once("submit-detect", f"record_job_submit_time(): could not read it: {e}")
                return
            if found is None:
                self._warn_once("submit", "record_job_submit_time(): no submit time found in the"
                                " environment ($MLGOODPUT_JOB_SUBMIT_TIME, Slurm); nothing recorded")
                return
            t, src = found
        elif isinstance(submit_time, _dt.datetime):
            t, src = submit_time.timestamp(), "recorded"
        else:
            t, src = _check_time(submit_time, "submit_time"), "recorded"
        self._productivity_event(Kind.JOB_SUBMIT, t, src, "record_job_submit_time")

    def _productivity_event(self, kind: Kind, value: float, name: str | None, what: str) -> None:
        if self._closed:
            self._warn_once(what, f"{what}(): the recorder is closed; nothing recorded")
            return
        try:
            self._append(kind, _now(), None, value, name)
        except Exception as e:  # never into the training loop
            self._warn_once(what, f"{what}(): could not record: {e}")

    def _warn_once(self, key: str, message: str) -> None:
        warned: set[str] = self.__dict__.setdefault("_warned", set())
        if key not in warned:
            warned.add(key)
            _log.warning("mlgoodput: %s", message)

    # -- for integrations (the JAX listeners, the Orbax logger) ----------------------------
    @property
    def journal(self) -> Journal | None:
        """The journal of this recorder's stream (None when recording is off or closed):
        integrations append their events (compiles, checkpoints) to the job through it."""
        return self._journal

    def checkpoint_open(self, kind: str, step: int | None = None) -> bool:
        """Whether a `record_checkpoint_{kind}_start_time` (kind "save" or "restore") is open,
        for `step` or any step when None: another reporter of that checkpoint then stays quiet."""
        start = {"save": Kind.CKPT_SAVE_START, "restore": Kind.CKPT_RESTORE_START}.get(kind)
        if start is None:
            raise ValueError(f"kind must be 'save' or 'restore', got {kind!r}")
        try:
            keys = list(self._open)
        except RuntimeError:  # changed size while copied: another thread is recording
            keys = []
        return any(k == start and (step is None or key == step or key is None) for k, key in keys)

    # -- lifecycle -------------------------------------------------------------------------
    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until everything recorded so far is in the store; False on timeout (the
        events stay journaled and are shipped later)."""
        if self._journal is None:
            return True
        return self._journal.flush(timeout_s)

    def close(self, timeout_s: float | None = None) -> bool:
        """Ship what was recorded (waiting up to `timeout_s`) and stop recording. Safe twice."""
        with self._state_lock:
            if self._closed:
                return True
            self._closed = True
        j, self._journal = self._journal, None
        self._append = _discard
        return True if j is None else j.close(timeout_s)

    def __enter__(self) -> GoodputRecorder:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(job_name={self.job_name!r}, logger_name={self.logger_name!r},"
            f" logging_enabled={self.logging_enabled!r}, store={self.store_url!r},"
            f" process_index={self.process_index!r})"
        )


def _check_positive(value: object, arg: str) -> float:
    """A finite positive number (numpy scalars welcome); a TypeError or ValueError naming `arg`."""
    if isinstance(value, bool):
        raise TypeError(f"{arg} must be a positive number, got {value!r}")
    try:
        v = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise TypeError(f"{arg} must be a positive number, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{arg} must be a finite positive number, got {value!r}")
    return v


def _check_time(value: object, arg: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{arg} must be a datetime.datetime, UNIX seconds or None, got {value!r}")
    v = float(value)
    if not math.isfinite(v):
        raise ValueError(f"{arg} must be finite, got {value!r}")
    return v


def _discard(
    kind: Kind,
    time: float,
    step: int | None = None,
    value: float | None = None,
    name: str | None = None,
    attrs: dict[str, Any] | None = None,
) -> None:
    """Stands in for the journal when logging is disabled or the recorder is closed."""
