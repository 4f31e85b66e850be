"""The event model: small frozen records that every part of mlgoodput writes and reads.

No I/O happens here. An event has a kind, a time (UNIX seconds, UTC), the host (process
index) that recorded it, and a few optional typed fields; the (namespace, job) stream it
belongs to is carried by the batch that ships it, not by every event.
"""

from __future__ import annotations

import enum
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


class Kind(enum.IntEnum):
    """Every kind of event, with a stable small code used by the storage formats.

    Codes are append-only: never renumber a kind, add new ones at the end.
    """

    # goodput timeline (spec/accounting.md)
    JOB_START = 1
    JOB_END = 2
    ACCEL_INIT_START = 3
    ACCEL_INIT_END = 4
    TRAINING_PREP_START = 5
    TRAINING_PREP_END = 6
    DATA_LOADING_START = 7
    DATA_LOADING_END = 8
    STEP_START = 9
    STEP_END = 10
    CUSTOM_START = 11  # name: the custom badput event type
    CUSTOM_END = 12
    CKPT_SAVE_START = 13  # step
    CKPT_SAVE_END = 14
    CKPT_RESTORE_START = 15
    CKPT_RESTORE_END = 16
    CKPT_SAVE = 17  # step, value: blocking seconds from `time`
    CKPT_RESTORE = 18  # step, value: duration seconds from `time`
    ELASTIC_WAIT_START = 19  # name: "slice_down" or "scale_up"
    ELASTIC_WAIT_END = 20
    ELASTIC_REINIT_START = 21
    ELASTIC_REINIT_END = 22
    SLICE_COUNTS = 23  # attrs: active, total, available
    COMPILE = 24  # value: compile seconds from `time`; name: function name
    # productivity (docs/accounting.md, "Productivity")
    STEP_FLOPS = 25  # value: FLOPs of one training step, all devices, from `time` on
    PEAK_FLOPS = 26  # value: peak FLOP/s of the job's devices together; name: where it came from
    JOB_SUBMIT = 27  # value: UNIX seconds the job (attempt) was submitted; name: source
    ALIVE = 28  # a writer's sign of life; value: the seconds between its signs while it lives
    JOB_LABELS = 29  # attrs: {"labels": {key: value}}; value: accelerators of the job; name: their kind
    # runs, metrics and profiles (diagnostics)
    RUN_START = 40  # attrs: run description and configs
    RUN_CONFIG = 41  # attrs: configs
    METRIC = 42  # name, value, step (optional)
    PROFILE_START = 43  # attrs: session, path, hosts
    PROFILE_STOP = 44
    SYSTEM_METRIC = 45  # name, value (time axis)
    # live console
    LOG = 60  # attrs: level, logger, message, ...
    PROGRESS = 61  # name: bar id; attrs: total, completed, ...
    USAGE = 62  # attrs: cpu, rss, gpu ...
    USAGE_CHECKPOINT = 63  # name, step
    CLIENT = 64  # attrs: connect / disconnect / lost
    # JAX monitoring aggregates
    JAX_METRIC = 80  # name, value, attrs: labels and aggregate


@dataclass(frozen=True, slots=True)
class Event:
    """One recorded fact. `time` is UNIX seconds (UTC); unused fields stay None."""

    kind: Kind
    time: float
    host: int = 0
    step: int | None = None
    value: float | None = None
    name: str | None = None
    attrs: Mapping[str, Any] | None = field(default=None, compare=True, hash=False)


@dataclass(frozen=True, slots=True)
class EventBatch:
    """Events of one writer, numbered `first_seq`, `first_seq + 1`, ...: the unit a store appends.

    A writer (a journal) ships its events in order, so a store keeps exactly-once
    semantics by remembering the next sequence number it expects from each writer.
    """

    writer: int
    first_seq: int
    events: Sequence[Event]


def check_step(step: object, arg: str = "step") -> int:
    """A step number: a non-negative integer (numpy integers welcome, bools refused)."""
    if isinstance(step, bool):
        raise TypeError(f"{arg} must be a non-negative integer, got {step!r}")
    try:
        n = operator.index(step)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{arg} must be a non-negative integer, got {step!r}") from None
    if n < 0:
        raise ValueError(f"{arg} must be a non-negative integer, got {step!r}")
    return int(n)


def check_name(value: object, arg: str) -> str:
    """A non-empty string label such as a custom badput event type."""
    if not isinstance(value, str):
        raise TypeError(f"{arg} must be a non-empty string, got {value!r}")
    if not value.strip():
        raise ValueError(f"{arg} must be a non-empty string, got {value!r}")
    return value
