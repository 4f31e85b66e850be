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
import operator
import os
import threading
import time as _time
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

from mlgoodput._journal import Journal
from mlgoodput._labels import check_accelerators, check_labels, detect_accelerators, job_labels
from mlgoodput._misuse import MisuseReporter, resolve_strict
from mlgoodput._once import Once
from mlgoodput.events import Kind, check_name, check_step
from mlgoodput.identity import detect_identity
from mlgoodput.store import Store, from_cloud_logger, resolve_store_url

__all__ = ["GoodputRecorder", "Recorder", "detect_process_index"]

_log = logging.getLogger("mlgoodput")

_now = _time.time

#: Seconds between a recording process's signs of life while its journal is otherwise quiet.
SIGN_OF_LIFE_S = 15.0
_datetime = _dt.datetime
_STEP_START = Kind.STEP_START


def detect_process_index() -> int:
    """This process's index, as `mlgoodput.identity.detect_identity()` finds it (an initialized
    JAX runtime, a launcher's rank variable, ..., else 0)."""
    return detect_identity().process_index


class GoodputRecorder:
    """Records a job's goodput events (job, accelerator init, preparation, data loading, steps,
    checkpoints, custom badput) with near-zero cost on the training loop.

    A record call never raises into training: misuse (an end without a start, a step number
    going back, a value that is not a time, a call after `close()`) records what it can and
    warns once per kind with an `MlGoodputWarning`; `strict=True` (or `MLGOODPUT_STRICT=1`)
    raises `MlGoodputMisuseError` instead. The constructor checks its arguments and raises.
    """

    def __init__(
        self,
        job_name: str,
        logger_name: str,
        logging_enabled: bool = False,
        cloud_logger: Any = None,
        *,
        background_grace_period_s: float = 5.0,
        background_batch_size: int = 100,
        background_max_latency_s: float = 2.0,
        store: str | os.PathLike[str] | Store | None = None,
        process_index: int | None = None,
        strict: bool | None = None,
        labels: Mapping[str, str] | str | None = None,
        accelerators: int | None = None,
        accelerator_type: str | None = None,
    ) -> None:
        self.job_name = check_name(job_name, "job_name")
        # the fleet view's labels and size (docs/fleet.md): checked here, recorded at each job start
        self.labels: dict[str, str] = job_labels(check_labels(labels))
        self.accelerators = check_accelerators(accelerators)
        self.accelerator_type = None if accelerator_type is None else check_name(accelerator_type, "accelerator_type")
        if self.accelerators is None:
            detect_accelerators()  # a malformed $MLGOODPUT_ACCELERATORS fails here, not at the job start
        self.logger_name = check_name(logger_name, "logger_name")
        self.logging_enabled = bool(logging_enabled)
        self.strict = resolve_strict(strict)
        self.background_grace_period_s = _positive_setting(background_grace_period_s, "background_grace_period_s")
        self.background_batch_size = int(
            _positive_setting(background_batch_size, "background_batch_size", integer=True)
        )
        self.background_max_latency_s = _positive_setting(background_max_latency_s, "background_max_latency_s")
        if cloud_logger is not None and store is not None:
            raise ValueError(
                f"pass either cloud_logger or store, not both (got cloud_logger={cloud_logger!r}, store={store!r})"
            )
        self.cloud_logger = cloud_logger
        if cloud_logger is not None and self.logging_enabled:
            store = store_from_cloud_logger(cloud_logger, self.logger_name)
        if cloud_logger is not None and not self.logging_enabled:
            self.store_url = f"cloud_logger:{self.logger_name}"
        elif isinstance(store, Store) and not isinstance(store, (str, os.PathLike)):
            self.store_url = str(getattr(store, "url", repr(store)))
        else:
            self.store_url = resolve_store_url(store)
        self._store_arg: Any = store if store is not None else self.store_url
        if process_index is None:
            process_index = detect_process_index()
        self.process_index = check_step(process_index, "process_index")
        self._misuse = MisuseReporter(type(self).__name__, self.strict)
        self._env_warned = Once()
        self._state_lock = threading.Lock()
        self._open: set[tuple[Kind, Any]] = set()  # activities started and not yet ended
        self._open_step: int | None = None
        self._last_step = -1
        self._closed = False
        self._step_clock: Any = None  # a CompletionWatcher that times the steps, when attached
        self._size_due = False  # the job's size is to be asked at the attempt's first step start
        self._journal: Journal | None = None
        if self.logging_enabled:
            self._journal = Journal.for_stream(self._store_arg, self.logger_name, self.job_name, self.process_index)
            self._append = self._journal.append
        else:
            self._append = _discard

    @property
    def misuse_counts(self) -> dict[str, int]:
        """How often each kind of misuse happened on this recorder (each is warned once)."""
        return dict(self._misuse.counts)

    # -- helpers -----------------------------------------------------------------------
    def _time(self, t: object, call: str, arg: str) -> float:
        """A time argument as UNIX seconds: a datetime, UNIX seconds, or None for now. Anything
        else is misuse: the event is recorded at the current time."""
        if t is None:
            return _now()
        try:
            if isinstance(t, _datetime):
                return t.timestamp()
            if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t):
                return float(t)
        except Exception:  # a time no clock can hold, or a user tzinfo that raises
            pass
        return self._bad_time(t, call, arg)

    def _bad_time(self, t: object, call: str, arg: str) -> float:
        self._misuse.report(
            "bad_time", call, arg, t, "not a datetime (or UNIX seconds) a clock can hold; recorded at the current time"
        )
        return _now()

    def _step(self, step: object, call: str) -> int | None:
        """A step number as the seed reads it (`int(step)`); None (event dropped) when it is not one."""
        if type(step) is int and step >= 0:
            return step
        n: int | None = None
        if not isinstance(step, bool):
            try:
                n = operator.index(step)  # type: ignore[arg-type]
            except TypeError:
                whole_float = isinstance(step, float) and step.is_integer()
                digits = isinstance(step, str) and step.strip().isdigit()
                if whole_float or digits:
                    n = int(step)  # type: ignore[call-overload]
        if n is not None and n >= 0:
            return int(n)
        self._misuse.report(
            "bad_step", call, "step", step, "not a non-negative whole number; the event was not recorded"
        )
        return None

    def _name(self, name: object, call: str, arg: str) -> str:
        """A custom event type; anything else is misuse, recorded under a name we can keep."""
        if type(name) is str and name.strip():
            return name
        fixed = str(name).strip() if isinstance(name, (str, int)) and not isinstance(name, bool) else ""
        fixed = fixed or "unknown"
        self._misuse.report("bad_name", call, arg, name, f"not a non-empty string; recorded as {fixed!r}")
        return fixed

    def _number(self, value: object, call: str, arg: str) -> float | None:
        """A positive finite number; anything else is misuse and None (nothing is recorded)."""
        try:
            return _check_positive(value, arg)
        except Exception as e:  # a value whose float() or repr raises anything: misuse, never raised
            self._misuse.report(f"bad_{arg}", call, arg, value, f"{_said(e)}; not recorded")
            return None

    def _unrecordable(self, call: str, value: object, error: Exception, arg: str | None = None) -> None:
        if arg is None:
            arg = "step" if isinstance(value, int) else "custom_badput_event_type"
        self._misuse.report("unrecordable", call, arg, value, f"cannot be journaled ({error}); not recorded")

    def _dropped_when_closed(self, call: str) -> bool:
        if self._closed:
            self._misuse.report(
                "closed", call, "job_name", self.job_name, "the recorder is closed; the event was not recorded"
            )
            return True
        return False

    def _start(
        self, kind: Kind, t: object, call: str, key: Any = None, step: int | None = None, name: str | None = None
    ) -> None:
        try:
            ts = _now() if t is None else (t.timestamp() if type(t) is _datetime else self._time(t, call, "start_time"))
        except Exception:  # before the epoch range, or a user tzinfo that raises
            ts = self._bad_time(t, call, "start_time")
        if self._closed and self._dropped_when_closed(call):
            return
        k = (kind, key)
        if k in self._open and kind is not Kind.JOB_START:
            self._misuse.report(
                "start_twice",
                call,
                "start_time",
                t,
                "started again before its end was recorded; recorded (both run to the next end)",
            )
        self._open.add(k)  # one set operation: atomic under the GIL, no lock needed
        try:
            self._append(kind, ts, step, None, name)
        except ValueError as e:  # a value the journal cannot hold (a huge step or name)
            self._unrecordable(call, step if name is None else name, e)

    def _end(
        self,
        start: Kind,
        end: Kind,
        t: object,
        call: str,
        key: Any = None,
        step: int | None = None,
        name: str | None = None,
        arg: str = "end_time",
    ) -> None:
        try:
            ts = _now() if t is None else (t.timestamp() if type(t) is _datetime else self._time(t, call, "end_time"))
        except Exception:  # before the epoch range, or a user tzinfo that raises
            ts = self._bad_time(t, call, "end_time")
        if self._closed and self._dropped_when_closed(call):
            return
        try:
            self._open.remove((start, key))  # atomic: two threads cannot both end one start
        except KeyError:
            self._misuse.report(
                "end_without_start",
                call,
                arg,
                t if key is None else key,
                "no matching start was recorded by this recorder (a duplicate end, or its start is"
                " elsewhere); recorded anyway: the accounting ignores an end without a start",
            )
        try:
            self._append(end, ts, step, None, name)
        except ValueError as e:
            self._unrecordable(call, step if name is None else name, e)

    # -- job -----------------------------------------------------------------------------
    def record_job_start_time(self, start_time: _dt.datetime | None = None) -> None:
        """The job (this attempt) started."""
        if self.logging_enabled:
            self._last_step = -1
            self._start(Kind.JOB_START, start_time, "record_job_start_time")
            self._record_labels(start_time, at_start=True)
            self._keep_alive(SIGN_OF_LIFE_S, start_time)

    def record_job_labels(
        self,
        labels: Mapping[str, str] | str | None = None,
        *,
        accelerators: int | None = None,
        accelerator_type: str | None = None,
    ) -> None:
        """Add labels (team, model, cluster, ...) and the job's size for the fleet view, recorded
        now and at every later job start (docs/fleet.md); a given key replaces the earlier value."""
        if not self.logging_enabled:
            return
        try:
            got = check_labels(labels)
            n = check_accelerators(accelerators)
            kind = None if accelerator_type is None else check_name(accelerator_type, "accelerator_type")
        except (TypeError, ValueError) as e:
            self._misuse.report("bad_labels", "record_job_labels", "labels", labels, f"{_said(e)}; not recorded")
            return
        self.labels = {**self.labels, **got}
        self.accelerators = n if n is not None else self.accelerators
        self.accelerator_type = kind if kind is not None else self.accelerator_type
        self._record_labels(None)

    def _record_labels(self, at: object, at_start: bool = False) -> None:
        """One JOB_LABELS event beside the job start: the labels, the accelerators (detected now,
        when JAX or torch is up, unless given) and their kind; nothing when none is known."""
        n, kind = self.accelerators, self.accelerator_type
        try:
            if n is None or kind is None:
                found_n, found_kind = detect_accelerators()
                n, kind = n if n is not None else found_n, kind if kind is not None else found_kind
            if n is None and at_start:
                # not known at the job start (JAX or CUDA not started yet): asked again at the
                # attempt's first step start, then the plain method again (no cost per step)
                self._size_due = True
                self.record_step_start_time = self._first_step_start  # type: ignore[method-assign]
            if not (self.labels or n or kind) or (self._closed and self._dropped_when_closed("record_job_labels")):
                return
            t = at.timestamp() if isinstance(at, _datetime) else (float(at) if isinstance(at, (int, float)) else _now())
            self._append(Kind.JOB_LABELS, t, None, None if n is None else float(n), kind, {"labels": self.labels})
        except Exception as e:  # never into training
            self._warn_once("labels", f"the job's labels could not be recorded: {_said(e)}")

    @property
    def completion_watcher(self) -> Any:
        """The CompletionWatcher timing this recorder's steps, or None (docs/jax.md). A watcher
        sets itself here when it starts, so the recorder hands it the step starts from then on,
        and None when it closes, so the recorder writes them again."""
        return self._step_clock

    @completion_watcher.setter
    def completion_watcher(self, watcher: Any) -> None:
        self._step_clock = watcher

    def _drain_steps(self, timeout_s: float | None = None) -> None:
        """Before a job end or a close (within its timeout): let an attached watcher finish
        timing the steps."""
        clock = self._step_clock
        if clock is not None:
            try:
                clock.drain() if timeout_s is None else clock.drain(timeout_s)
            except Exception as e:  # never into training
                self._warn_once("drain", f"the completion watcher could not finish: {_said(e)}")

    def _keep_alive(self, every_s: float, at: object = None) -> None:
        """Signs of life while the attempt runs (docs/accounting.md, "A job that dies"): one at
        the job start (its own time, so a replay of past events is not kept alive till now),
        which says how often they come, then one whenever the journal was quiet that long."""
        j = self._journal
        if j is None or self._closed:
            return
        try:
            if every_s:
                t = at.timestamp() if isinstance(at, _datetime) else _now()
                j.append(Kind.ALIVE, min(t, _now()), value=every_s)
            j.keep_alive(every_s)
        except Exception as e:  # never into training
            self._warn_once("keep_alive", f"signs of life could not be recorded: {_said(e)}")

    def record_job_end_time(self, end_time: _dt.datetime | None = None) -> None:
        """The job finished; its last step ended by now."""
        if self.logging_enabled:
            self._drain_steps()
            self._end(Kind.JOB_START, Kind.JOB_END, end_time, "record_job_end_time")
            self._keep_alive(0.0)  # the attempt is over: its end, not silence, says so

    # -- accelerator initialization --------------------------------------------------
    def record_tpu_init_start_time(self, start_time: _dt.datetime | None = None) -> None:
        """Accelerator (TPU or GPU) initialization started."""
        if self.logging_enabled:
            self._start(Kind.ACCEL_INIT_START, start_time, "record_tpu_init_start_time")

    def record_tpu_init_end_time(self, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            self._end(Kind.ACCEL_INIT_START, Kind.ACCEL_INIT_END, end_time, "record_tpu_init_end_time")

    # -- training preparation -------------------------------------------------------
    def record_training_preparation_start_time(self, start_time: _dt.datetime | None = None) -> None:
        """Training preparation (model, optimizer, mesh, checkpoint manager) started."""
        if self.logging_enabled:
            self._start(Kind.TRAINING_PREP_START, start_time, "record_training_preparation_start_time")

    def record_training_preparation_end_time(self, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            self._end(
                Kind.TRAINING_PREP_START, Kind.TRAINING_PREP_END, end_time, "record_training_preparation_end_time"
            )

    # -- data loading ----------------------------------------------------------------------
    def record_data_loading_start_time(self, start_time: _dt.datetime | None = None) -> None:
        """Loading a batch started (inside a step it overlaps device work)."""
        if self.logging_enabled:
            self._start(Kind.DATA_LOADING_START, start_time, "record_data_loading_start_time")

    def record_data_loading_end_time(self, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            self._end(Kind.DATA_LOADING_START, Kind.DATA_LOADING_END, end_time, "record_data_loading_end_time")

    # -- steps: the hot path -----------------------------------------------------------
    def record_step_start_time(self, step: int, start_time: _dt.datetime | None = None) -> None:
        """Step `step` started (it ends at the next step start or its step end)."""
        if not self.logging_enabled:
            return
        if type(step) is not int or step < 0:
            s = self._step(step, "record_step_start_time")
            if s is None:
                return
            step = s
        if start_time is None:
            ts = _now()
        elif type(start_time) is _datetime:
            try:
                ts = start_time.timestamp()
            except Exception:  # before the epoch range, or a user tzinfo that raises
                ts = self._bad_time(start_time, "record_step_start_time", "start_time")
        else:
            ts = self._time(start_time, "record_step_start_time", "start_time")
        if self._closed and self._dropped_when_closed("record_step_start_time"):
            return
        if step < self._last_step:
            self._misuse.report(
                "step_back",
                "record_step_start_time",
                "step",
                step,
                f"step number went back (last started: {self._last_step}) without a new"
                " record_job_start_time; recorded",
            )
        try:
            clock = self._step_clock
            if clock is None:
                self._append(_STEP_START, ts, step)
            else:  # a CompletionWatcher writes it once the previous step's work is done
                clock.started(step, ts)
        except ValueError as e:  # a step beyond 64 bits: costs nothing until it happens
            self._unrecordable("record_step_start_time", step, e)
            return
        self._last_step = step
        self._open_step = step

    def _first_step_start(self, step: int, start_time: _dt.datetime | None = None) -> None:
        """The attempt's first step start: recorded, then the job's size asked again (a runtime
        is up by now) and recorded with the labels when found."""
        self.__dict__.pop("record_step_start_time", None)
        type(self).record_step_start_time(self, step, start_time)
        if not self._size_due:  # a caller that kept this bound method: asked once already
            return
        self._size_due = False
        try:
            found, _ = detect_accelerators()
        except Exception:  # never into training
            found = None
        if found is not None:
            self._record_labels(None)

    # -- custom badput -------------------------------------------------------------------
    def record_custom_badput_event_start_time(
        self, start_time: _dt.datetime | None = None, custom_badput_event_type: str = "unknown"
    ) -> None:
        """An unproductive activity of your own (evaluation, SDC check, ...) started."""
        if self.logging_enabled:
            call = "record_custom_badput_event_start_time"
            name = self._name(custom_badput_event_type, call, "custom_badput_event_type")
            self._start(Kind.CUSTOM_START, start_time, call, key=name, name=name)

    def record_custom_badput_event_end_time(
        self, end_time: _dt.datetime | None = None, custom_badput_event_type: str = "unknown"
    ) -> None:
        if self.logging_enabled:
            call = "record_custom_badput_event_end_time"
            name = self._name(custom_badput_event_type, call, "custom_badput_event_type")
            self._end(
                Kind.CUSTOM_START, Kind.CUSTOM_END, end_time, call, key=name, name=name, arg="custom_badput_event_type"
            )

    # -- checkpoints (the blocking part) ---------------------------------------------
    def record_checkpoint_progress(self, step: int, checkpoint_start_time: _dt.datetime | None) -> None:
        """The seed's hook for "a checkpoint holding progress up to `step` started saving": a
        no-op there and here (wasted progress comes from restores and repeated steps)."""

    # -- productivity (docs/accounting.md, "Productivity") ------------------------------------
    def record_step_flops(self, flops: float, *, effective_time: float | None = None) -> None:
        """The FLOPs of one training step, summed over the job's devices, from now on (for MFU
        and program goodput); `effective_time` (UNIX seconds) dates it earlier, e.g. to the
        start of the call that compiled the step. Never raises: misuse warns once."""
        if self.logging_enabled:
            v = self._number(flops, "record_step_flops", "flops")
            if v is not None:
                self._productivity_event(Kind.STEP_FLOPS, v, None, "record_step_flops", effective_time)

    def record_peak_flops(self, flops_per_s: float, *, source: str = "recorded") -> None:
        """The peak FLOP/s of the job's devices together (overrides the detected one);
        `source` says where it came from ("recorded", "table:<device kind>", "configured",
        "measured") and is shown in the report."""
        if self.logging_enabled:
            v = self._number(flops_per_s, "record_peak_flops", "flops_per_s")
            src = self._name(source, "record_peak_flops", "source")
            if v is not None:
                self._productivity_event(Kind.PEAK_FLOPS, v, src, "record_peak_flops")

    def record_job_submit_time(self, submit_time: _dt.datetime | float | None = None) -> None:
        """When the scheduler accepted this job (attempt), for scheduling goodput: a datetime,
        UNIX seconds, or None to read what the scheduler left ($MLGOODPUT_JOB_SUBMIT_TIME,
        this Kubernetes pod's creation time, Slurm); when nothing is found it warns once and records nothing."""
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
                self._warn_once(
                    "submit",
                    "record_job_submit_time(): no submit time found in the"
                    " environment ($MLGOODPUT_JOB_SUBMIT_TIME, the Kubernetes pod, Slurm); nothing recorded",
                )
                return
            t, src = found
        else:
            try:
                t = (
                    submit_time.timestamp()
                    if isinstance(submit_time, _dt.datetime)
                    else _check_time(submit_time, "submit_time")
                )
                src = "recorded"
            except Exception as e:  # a user's tzinfo or value may raise anything: misuse, never raised
                self._misuse.report(
                    "bad_time", "record_job_submit_time", "submit_time", submit_time, f"{_said(e)}; not recorded"
                )
                return
        self._productivity_event(Kind.JOB_SUBMIT, t, src, "record_job_submit_time")

    def _productivity_event(
        self, kind: Kind, value: float, name: str | None, what: str, t: float | None = None
    ) -> None:
        if self._closed and self._dropped_when_closed(what):
            return
        if t is not None and not (isinstance(t, float | int) and math.isfinite(t)):
            self._misuse.report("bad_time", what, "effective_time", t, "not finite UNIX seconds; recorded now")
            t = None
        try:
            self._append(kind, _now() if t is None else float(t), None, value, name)
        except ValueError as e:  # a value the journal cannot hold (a huge source name)
            self._unrecordable(what, name, e, arg="source")

    def _warn_once(self, key: str, message: str) -> None:
        """A log line once per key, for what is not misuse (the environment lacks a submit time)."""
        self._env_warned.warning(_log, key, "mlgoodput: %s", message)

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
    def _timeout(self, timeout_s: object, call: str) -> float | None:
        """A timeout argument: None or a non-negative number of seconds; anything else is
        misuse, and the default deadline is used."""
        if timeout_s is None:
            return None
        number = isinstance(timeout_s, (int, float)) and not isinstance(timeout_s, bool)
        if number and not math.isnan(timeout_s) and timeout_s >= 0:  # type: ignore[arg-type,operator]
            return float(timeout_s)  # type: ignore[arg-type]
        self._misuse.report(
            "bad_timeout", call, "timeout_s", timeout_s, "not a non-negative number of seconds; the default is used"
        )
        return None

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait until everything recorded so far is in the store; False on timeout (the
        events stay journaled and are shipped later). The seed's `flush()` returns None;
        a bool is truthy-compatible with code that ignores it."""
        if self._journal is None:
            return True
        return self._journal.flush(self._timeout(timeout_s, "flush"))

    def close(self, timeout_s: float | None = None) -> bool:
        """Ship what was recorded (waiting up to `timeout_s`) and stop recording. Safe twice."""
        timeout_s = self._timeout(timeout_s, "close")
        with self._state_lock:
            if self._closed:
                return True
        self._drain_steps(timeout_s)
        clock, self._step_clock = self._step_clock, None
        if clock is not None:
            clock.close(1.0)
        with self._state_lock:
            if self._closed:
                return True
            self._closed = True
        j, self._journal = self._journal, None
        self._append = _discard
        return True if j is None else j.close(timeout_s)

    def __enter__(self) -> Self:
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


class Recorder(GoodputRecorder):
    """`GoodputRecorder` with the calls the seed lacks: step ends and checkpoint intervals.

    They live on a subclass because integrations written for the seed look methods up by name
    (`getattr(recorder, f"record_{event}_end_time", None)` in MaxText and axlearn): on the seed's
    class such a lookup must find exactly what ml-goodput-measurement 0.2.3 has, or a step end
    recorded right after an asynchronous dispatch changes what the same loop reports.
    """

    def record_step_end_time(self, step: int, end_time: _dt.datetime | None = None) -> None:
        """Step `step` ended (optional: without it a step ends at the next step start)."""
        if not self.logging_enabled:
            return
        call = "record_step_end_time"
        s = self._step(step, call)
        if s is None:
            return
        ts = self._time(end_time, call, "end_time")
        if self._closed and self._dropped_when_closed(call):
            return
        with self._state_lock:
            running = self._open_step
            self._open_step = None if running == s else running
        if running != s:
            self._misuse.report(
                "end_without_start",
                call,
                "step",
                step,
                f"step {s} is not the running step (last started: {running!r}); recorded anyway:"
                " the accounting ignores an end without a start",
            )
        try:
            self._append(Kind.STEP_END, ts, s)
        except ValueError as e:
            self._unrecordable(call, s, e)

    def record_checkpoint_save_start_time(self, step: int, start_time: _dt.datetime | None = None) -> None:
        """The training loop started waiting on a checkpoint save of `step`."""
        if self.logging_enabled:
            call = "record_checkpoint_save_start_time"
            s = self._step(step, call)
            if s is not None:
                self._start(Kind.CKPT_SAVE_START, start_time, call, key=s, step=s)

    def record_checkpoint_save_end_time(self, step: int, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            call = "record_checkpoint_save_end_time"
            s = self._step(step, call)
            if s is not None:
                self._end(Kind.CKPT_SAVE_START, Kind.CKPT_SAVE_END, end_time, call, key=s, step=s, arg="step")

    def record_checkpoint_restore_start_time(self, step: int, start_time: _dt.datetime | None = None) -> None:
        """Restoring the checkpoint of `step` started."""
        if self.logging_enabled:
            call = "record_checkpoint_restore_start_time"
            s = self._step(step, call)
            if s is not None:
                self._start(Kind.CKPT_RESTORE_START, start_time, call, key=s, step=s)

    def record_checkpoint_restore_end_time(self, step: int, end_time: _dt.datetime | None = None) -> None:
        if self.logging_enabled:
            call = "record_checkpoint_restore_end_time"
            s = self._step(step, call)
            if s is not None:
                self._end(Kind.CKPT_RESTORE_START, Kind.CKPT_RESTORE_END, end_time, call, key=s, step=s, arg="step")


def _check_positive(value: object, arg: str) -> float:
    """A finite positive number (numpy scalars welcome); a TypeError or ValueError naming `arg`."""
    if isinstance(value, bool):
        raise TypeError(f"{arg} must be a positive number, got {value!r}")
    try:
        v = float(value)  # type: ignore[arg-type]
    except OverflowError:
        raise ValueError(f"{arg} must be a finite positive number, got one too large for a float") from None
    except (TypeError, ValueError):
        raise TypeError(f"{arg} must be a positive number, got {value!r}") from None
    if not (math.isfinite(v) and v > 0):
        raise ValueError(f"{arg} must be a finite positive number, got {value!r}")
    return v


def _check_time(value: object, arg: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{arg} must be a datetime.datetime, UNIX seconds or None, got {value!r}")
    try:
        v = float(value)
    except OverflowError:
        raise ValueError(f"{arg} must be finite, got one too large for a float") from None
    if not math.isfinite(v):
        raise ValueError(f"{arg} must be finite, got {value!r}")
    return v


def _said(e: BaseException) -> str:
    """An exception's text for a warning, never raising (its own __str__ may)."""
    try:
        return f"{type(e).__name__}: {e}"
    except Exception:
        return type(e).__name__


def _discard(
    kind: Kind,
    time: float,
    step: int | None = None,
    value: float | None = None,
    name: str | None = None,
    attrs: dict[str, Any] | None = None,
) -> None:
    """Stands in for the journal when logging is disabled or the recorder is closed."""


def _positive_setting(value: object, arg: str, *, integer: bool = False) -> float:
    """A configuration number that must be positive (a whole number when `integer`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (integer and not isinstance(value, int)):
        kind = "a positive integer" if integer else "a positive number"
        raise TypeError(f"{arg} must be {kind}, got {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{arg} must be positive, got {value!r}")
    return float(value)


def store_from_cloud_logger(cloud_logger: Any, logger_name: str) -> Store:
    """The store over a seed-style cloud logger object (`mlgoodput.store.from_cloud_logger`)."""
    return from_cloud_logger(cloud_logger, logger_name)
