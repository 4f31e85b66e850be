"""The shapes the accounting engine works with: attempts, activities, derived step state."""

from __future__ import annotations

import math
from array import array
from bisect import bisect_left
from dataclasses import dataclass, field

from mlgoodput.accounting._intervals import Coverage, Intervals
from mlgoodput.accounting._report import BadputType
from mlgoodput.accounting._sorted import SortedFloats
from mlgoodput.events import Kind

B = BadputType
INF = math.inf

# start kind -> (end kind, bucket key); the key is a BadputType, ("custom", NAME), "dl" or "compile"
PAIRS: dict[int, tuple[int, object]] = {
    Kind.ACCEL_INIT_START: (Kind.ACCEL_INIT_END, B.TPU_INITIALIZATION),
    Kind.TRAINING_PREP_START: (Kind.TRAINING_PREP_END, B.TRAINING_PREP),
    Kind.DATA_LOADING_START: (Kind.DATA_LOADING_END, "dl"),
    Kind.CKPT_SAVE_START: (Kind.CKPT_SAVE_END, B.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME),
    Kind.CKPT_RESTORE_START: (Kind.CKPT_RESTORE_END, B.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME),
    Kind.ELASTIC_REINIT_START: (Kind.ELASTIC_REINIT_END, B.ELASTIC_REINITIALIZATION),
    Kind.CUSTOM_START: (Kind.CUSTOM_END, "custom"),
    Kind.ELASTIC_WAIT_START: (Kind.ELASTIC_WAIT_END, "elastic"),
}
END_KINDS = {end for end, _ in PAIRS.values()}
DURATIONS: dict[int, object] = {
    Kind.CKPT_SAVE: B.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME,
    Kind.CKPT_RESTORE: B.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME,
    Kind.COMPILE: "compile",
}
ELASTIC = {"slice_down": B.ELASTIC_SLICE_DOWN, "scale_up": B.ELASTIC_SCALE_UP}
# priority 2, 3 (then custom, 4), then 6, 7; data loading (5) is placed between them
HIGH = (
    B.ELASTIC_REINITIALIZATION,
    B.ELASTIC_SLICE_DOWN,
    B.ELASTIC_SCALE_UP,
    B.UNPRODUCTIVE_CHECKPOINT_RESTORE_TIME,
    B.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME,
)
LOW = (B.TRAINING_PREP, B.TPU_INITIALIZATION)


@dataclass(slots=True)
class Attempt:
    start: float
    end: float  # its job_end, the next job_start, or the query time
    ended_by: str  # "job_end", "restart", "died" (its writers went silent) or "running"
    i0: int  # its steps are indices i0 .. i1-1 of the lead host's arrays
    i1: int


@dataclass(slots=True)
class Activities:
    """The lead host's activity intervals by bucket, clipped to attempts."""

    buckets: dict[object, Intervals] = field(default_factory=dict)
    restore_step: dict[int, int] = field(default_factory=dict)  # attempt -> restored step
    first_restores: dict[int, tuple[float, int]] = field(
        default_factory=dict
    )  # attempt -> (time, step) of its earliest restore
    claims: Coverage = field(default_factory=lambda: Coverage([]))  # priorities 2..7
    compile: Coverage = field(default_factory=lambda: Coverage([]))
    open_starts: list[float] = field(default_factory=list)  # activities with no end yet
    slices: list[tuple[float, float, float, float]] = field(default_factory=list)


@dataclass(slots=True)
class Derived:
    """Net times of interior steps (not first, not last of their attempt), kept incrementally."""

    host: int
    n: int  # steps examined so far
    frontier: float  # start time of the last step examined
    exc: dict[int, float]  # interior step index -> net minus measured compile, where that is not
    # simply the gap to the next step start (a claim, a compile or a step_end reaches into it)
    compile: dict[int, float]  # interior step index -> measured compile seconds
    ordered: SortedFloats
    compile_total: float
    open_before: bool  # an activity without an end started before the frontier

    def eff(self, times: array[float], i: int) -> float:
        """Net time minus measured compile of interior step i (8 bytes a step: none kept)."""
        v = self.exc.get(i)
        return times[i + 1] - times[i] if v is None else v


@dataclass(slots=True)
class Touched:
    ordered: list[int]

    def range(self, lo: int, hi: int) -> list[int]:
        return self.ordered[bisect_left(self.ordered, lo) : bisect_left(self.ordered, hi)]


def median(xs: list[float]) -> float:
    if not xs:
        return 0.0
    ys = sorted(xs)
    n = len(ys)
    return ys[n // 2] if n % 2 else (ys[n // 2 - 1] + ys[n // 2]) / 2.0
