"""`OrbaxLogger`: Orbax checkpoint statistics as the job's checkpoint events.

Orbax's `CheckpointManager(logger=...)` hands its logger one dict per save and per restore
(`dataclasses.asdict` of its step statistics). We turn a save into `Kind.CKPT_SAVE` (time =
start of the blocking part, value = blocking seconds: an async save's background write does
not hold up training and is not counted) and a restore into `Kind.CKPT_RESTORE` (value = its
duration), both tagged with the step, written through the recorder's journal.

De-duplication: when the recorder's own checkpoint calls already cover an Orbax save or
restore (the user wrapped `manager.save` in `record_checkpoint_save_start/end_time`, so the
recorder has that checkpoint open while Orbax reports it), the Orbax event is not written;
see `_covered`. The calculator would count the overlap once anyway (spec: Checkpoints), so
this keeps the event log free of repeats; it never changes the numbers.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

from orbax.checkpoint.logging import AbstractLogger

from mlgoodput.events import Kind
from mlgoodput.jax._listeners import EventSink

log = logging.getLogger("mlgoodput.jax")


def _num(d: Mapping[str, Any], key: str) -> float | None:
    v = d.get(key)
    if v is None or isinstance(v, bool):
        return None
    try:
        return float(v)
    except (TypeError, ValueError):
        return None


def entry_to_event(entry: Mapping[str, Any]) -> tuple[Kind, float, float, int | None] | None:
    """(kind, start, seconds, step) for an Orbax save or restore entry; None for others."""
    etype = entry.get("event_type")
    step_v = entry.get("step")
    step = int(step_v) if isinstance(step_v, int) and not isinstance(step_v, bool) else None
    if etype == "save":
        start = _num(entry, "checkpoint_manager_blocking_start_time")
        dur = _num(entry, "checkpoint_manager_blocking_duration_secs")
        if start is None or dur is None:
            start = _num(entry, "checkpointer_blocking_start_time")
            dur = _num(entry, "checkpointer_blocking_duration_secs")
        kind = Kind.CKPT_SAVE
    elif etype in ("restore", "emergency_restore"):
        start = _num(entry, "checkpoint_manager_start_time")
        dur = _num(entry, "checkpoint_manager_duration_secs")
        if start is None or dur is None:
            start = _num(entry, "checkpointer_start_time")
            dur = _num(entry, "checkpointer_duration_secs")
        kind = Kind.CKPT_RESTORE
    else:
        return None
    if start is None or dur is None:
        return None
    return kind, start, max(0.0, dur), step


class OrbaxLogger(AbstractLogger):  # type: ignore[misc]
    """An `orbax.checkpoint.logging` logger that records checkpoint time for goodput.

    Pass it as `CheckpointManager(logger=OrbaxLogger(recorder))`. `forward_to` is another
    Orbax logger that also gets every entry (Orbax's default, `StandardLogger`, is replaced
    by ours otherwise). Never raises into Orbax: a failure is counted and logged once.
    """

    def __init__(self, recorder: Any = None, *, sink: EventSink | None = None, forward_to: Any = None) -> None:
        if recorder is None and sink is None:
            raise TypeError("OrbaxLogger needs a recorder (a GoodputRecorder) or a sink, got neither")
        if forward_to is not None and not callable(getattr(forward_to, "log_entry", None)):
            raise TypeError(f"forward_to must be an Orbax logger with log_entry(), got {forward_to!r}")
        self._recorder = recorder
        self._sink: EventSink | None = sink if sink is not None else _recorder_sink(recorder)
        self._forward = forward_to
        self._lock = threading.Lock()
        self.recorded = 0  # events written
        self.skipped = 0  # entries already covered by the recorder's own calls
        self.errors = 0

    def log_entry(self, msg: Any, *args: Any, **kwargs: Any) -> None:
        try:
            if isinstance(msg, Mapping):
                ev = entry_to_event(msg)
                if ev is not None:
                    kind, start, dur, step = ev
                    with self._lock:
                        if self._sink is None:
                            pass  # the recorder's logging is disabled: record nothing
                        elif _covered(self._recorder, kind, step):
                            self.skipped += 1
                        else:
                            self._sink.append(kind, start, step=step, value=dur, attrs={"source": "orbax"})
                            self.recorded += 1
        except Exception as e:
            self.errors += 1
            if self.errors == 1:
                log.warning("OrbaxLogger: could not record a checkpoint event: %s", e)
        if self._forward is not None:
            try:
                self._forward.log_entry(msg, *args, **kwargs)
            except Exception as e:
                log.warning("OrbaxLogger: forwarded logger failed: %s", e)


def _recorder_sink(recorder: Any) -> EventSink | None:
    """The journal the recorder writes through (None when its logging is disabled)."""
    from mlgoodput._metric_pipeline import recorder_journal

    j = recorder_journal(recorder)
    return j  # type: ignore[no-any-return]


def _covered(recorder: Any, kind: Kind, step: int | None) -> bool:
    """Whether the recorder has a checkpoint activity of this kind open right now (the user
    wrapped the Orbax call in `record_checkpoint_save/restore_start/end_time`): its interval
    then covers the Orbax one, and recording both would repeat the same time.

    """
    if recorder is None:
        return False
    return bool(recorder.checkpoint_open("save" if kind == Kind.CKPT_SAVE else "restore", step))
