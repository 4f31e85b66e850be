"""Activities of one host (checkpoint saves, data loading, custom badput, ...) as the job page
lists them: start records paired with their end records, and records that carry a duration.

The pairing is kept incrementally: new records are paired as they arrive, and a start still
waiting for its end is looked at again each time (its end so far: the next restart or the
latest event)."""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mlgoodput.events import Kind

__all__ = ["SPECIAL_KINDS", "Pairing", "Rec"]

#: one non-step record as the pages hold it: (kind, time, step, value, name, attrs)
Rec = tuple[int, float, int | None, float | None, str | None, dict[str, Any] | None]

#: start kind -> (end kind, phase)
PAIRS: dict[int, tuple[int, str]] = {
    Kind.ACCEL_INIT_START: (Kind.ACCEL_INIT_END, "init"),
    Kind.TRAINING_PREP_START: (Kind.TRAINING_PREP_END, "prep"),
    Kind.DATA_LOADING_START: (Kind.DATA_LOADING_END, "data"),
    Kind.CKPT_SAVE_START: (Kind.CKPT_SAVE_END, "ckpt_save"),
    Kind.CKPT_RESTORE_START: (Kind.CKPT_RESTORE_END, "ckpt_restore"),
    Kind.CUSTOM_START: (Kind.CUSTOM_END, "custom"),
    Kind.ELASTIC_WAIT_START: (Kind.ELASTIC_WAIT_END, "elastic_wait"),
    Kind.ELASTIC_REINIT_START: (Kind.ELASTIC_REINIT_END, "elastic_reinit"),
}
END_KINDS = {e for e, _ in PAIRS.values()}
#: records a page lists by themselves (few): compiles and slice counts
SPECIAL_KINDS = {Kind.COMPILE, Kind.SLICE_COUNTS}
#: records that carry their duration as their value
DURATIONS: dict[int, str] = {
    Kind.CKPT_SAVE: "ckpt_save",
    Kind.CKPT_RESTORE: "ckpt_restore",
    Kind.COMPILE: "compile",
}


@dataclass(slots=True)
class Pairing:
    """What has been worked out for one host's records so far, in one generation of its
    view (`gen`: a restart or a late record starts the pairing again)."""

    gen: int
    done: int = 0  # records looked at
    ends: dict[tuple[int, str | None], list[float]] = field(default_factory=dict)
    open: list[Rec] = field(default_factory=list)  # starts without their end yet
    closed: list[dict[str, Any]] = field(default_factory=list)

    def activities(self, others: Sequence[Rec], job_starts: Sequence[float], max_time: float) -> list[dict[str, Any]]:
        """The host's activities as {phase, start, end[, name, step]}, sorted by start, after
        pairing the records of `others` not looked at yet."""
        for rec in others[self.done :]:
            kind = rec[0]
            if kind in END_KINDS:
                lst = self.ends.setdefault((kind, rec[4]), [])
                if lst and rec[1] < lst[-1]:
                    insort(lst, rec[1])
                else:
                    lst.append(rec[1])
            elif kind in PAIRS:
                self.open.append(rec)
            elif kind in DURATIONS and rec[3] is not None:
                self.closed.append(_seg(DURATIONS[kind], rec, rec[1] + rec[3]))
        self.done = len(others)
        still: list[Rec] = []
        now_open: list[dict[str, Any]] = []
        for rec in self.open:
            end_kind, phase = PAIRS[rec[0]]
            cands = self.ends.get((end_kind, rec[4] if phase in ("custom", "elastic_wait") else None), [])
            j = bisect_left(cands, rec[1])
            k = bisect_right(job_starts, rec[1])
            nxt = job_starts[k] if k < len(job_starts) else math.inf
            if j < len(cands) and cands[j] < nxt:
                self.closed.append(_seg(phase, rec, cands[j]))
            else:
                still.append(rec)
                now_open.append(_seg(phase, rec, min(nxt, max_time)))
        self.open = still
        self.closed.sort(key=_start)  # nearly sorted: a linear pass
        return sorted(self.closed + now_open, key=_start) if now_open else self.closed


def _seg(phase: str, rec: Rec, end: float) -> dict[str, Any]:
    seg: dict[str, Any] = {"phase": phase, "start": rec[1], "end": end}
    if rec[4]:
        seg["name"] = rec[4]
    if rec[2] is not None:
        seg["step"] = rec[2]
    return seg


def _start(seg: dict[str, Any]) -> float:
    return float(seg["start"])
