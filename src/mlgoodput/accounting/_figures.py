"""The productivity figures' value types (MFU, goodputs, ETTR, reliability), computed in
`_productivity` and carried by a `GoodputReport`. Plain frozen data, no imports of the rest."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mlgoodput._quick_init import quick_init


@dataclass(frozen=True, slots=True)
class CostStats:
    """Durations of one kind of checkpoint operation: count, mean and p95 (nearest rank)."""

    count: int
    mean_s: float | None
    p95_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {"count": self.count, "mean_s": self.mean_s, "p95_s": self.p95_s}


@quick_init
@dataclass(frozen=True, slots=True)
class AttemptQueue:
    """One attempt's scheduling: when it was submitted (if known) and how long it queued."""

    attempt: int
    start: float
    submit: float | None
    source: str | None
    queue_s: float | None
    waiting_s: float | None = None  # from the previous attempt's stop to this start

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "start": self.start,
            "submit": self.submit,
            "source": self.source,
            "queue_s": self.queue_s,
            "waiting_s": self.waiting_s,
        }


@quick_init
@dataclass(frozen=True, slots=True)
class DisruptionCost:
    """What one disruption cost, in the two figures the report uses (docs/accounting.md,
    "Recovery: two figures"): `down_s`, from the work stopping to the next attempt's start
    (its infrastructure recovery), and `to_recover_s`, from the work stopping until that
    attempt was productive again (its initialization, restore and startup too: MTTR's part)."""

    attempt: int  # the attempt that started after it (1 for the first restart)
    work_stopped_at: float
    restarted_at: float
    recovered_at: float | None  # None: not productive again yet
    down_s: float
    to_recover_s: float | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "attempt": self.attempt,
            "work_stopped_at": self.work_stopped_at,
            "restarted_at": self.restarted_at,
            "recovered_at": self.recovered_at,
            "down_s": self.down_s,
            "to_recover_s": self.to_recover_s,
        }


@quick_init
@dataclass(frozen=True, slots=True)
class Productivity:
    """Everything beside the partition: MFU, the three goodputs and MPG, ETTR, reliability.

    Goodputs, MFU and ETTR are fractions in [0, 1] (None where an input is unknown)."""

    # program goodput
    flops_per_step: float | None
    peak_flops_per_s: float | None
    peak_source: str | None
    steps_executed: int
    steps_useful: int
    achieved_flops_per_s: float | None
    step_mfu: float | None
    mfu: float | None
    program_goodput: float | None
    # scheduling goodput
    submit_time: float | None
    submit_source: str | None
    queue_s: float | None
    scheduling_goodput: float | None
    attempts: tuple[AttemptQueue, ...]
    available_slice_fraction: float | None
    # the product
    runtime_goodput: float | None
    ml_productivity_goodput: float | None
    # reliability
    interruptions: int
    uptime_s: float
    mtbi_s: float | None
    mttr_s: float | None
    recoveries_s: tuple[float, ...]
    time_to_start_s: float | None
    lost_progress_s: float
    lost_progress_per_interruption_s: float | None
    ettr: float | None
    checkpoint_save: CostStats
    checkpoint_restore: CostStats
    checkpoint_interval_s: float | None
    checkpoint_interval_steps: float | None
    #: why a figure is unknown or doubtful, in a sentence each (e.g. the host ran ahead of the
    #: device): the calculator logs each once, `mlgoodput report` prints them
    notes: tuple[str, ...] = ()
    #: each disruption inside the window, oldest first
    disruptions: tuple[DisruptionCost, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name in self.__slots__:
            v = getattr(self, name)
            if isinstance(v, CostStats):
                v = v.to_dict()
            elif name in ("attempts", "disruptions"):
                v = [a.to_dict() for a in v]
            elif isinstance(v, tuple):
                v = list(v)
            out[name] = v
        return out
