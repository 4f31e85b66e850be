"""One host's series as the job page sees them: the accounting's own record of the host
(`HostLog`: step starts, step numbers, job starts, other events), followed as it grows, and
what the pages derive from it (block summaries of the step durations, the other events as
tuples). Nothing of the steps is copied: a long job is held once."""

from __future__ import annotations

import json
import math
import operator
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from typing import overload

from mlgoodput.accounting import HostLog, StepNums
from mlgoodput.events import Kind
from mlgoodput.ui._pairing import SPECIAL_KINDS, Pairing, Rec
from mlgoodput.ui._reduce import FAST_MIN, Blocks, numpy

__all__ = ["Durations", "HostSeries", "quantiles"]


class Durations(Sequence[float]):
    """One host's step durations (the gap to the next step start; nan across a restart),
    computed from the accounting's own step starts when asked: a long job is held once."""

    __slots__ = ("_hs",)

    def __init__(self, hs: HostSeries) -> None:
        self._hs = hs

    def __len__(self) -> int:
        return max(0, len(self._hs.times) - 1)

    @overload
    def __getitem__(self, i: int) -> float: ...
    @overload
    def __getitem__(self, i: slice) -> array[float]: ...
    def __getitem__(self, i: int | slice) -> float | array[float]:
        n = len(self)
        if isinstance(i, slice):
            lo, hi, step = i.indices(n)
            got = self._hs.durations(lo, max(lo, hi))
            return got if step == 1 else got[::step]
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("step index out of range")
        return self._hs.durations(i, i + 1)[0]


class HostSeries:
    """One host as the pages see it: the accounting's own record of the host (`log`: step
    starts, step numbers, job starts, other events), followed as it grows, and what the
    pages derive from it (block summaries of the step durations, the other events as tuples,
    the activity pairing). Nothing of the steps is copied."""

    def __init__(self, log: HostLog) -> None:
        self.log = log
        self.durs = Durations(self)
        self.others: list[Rec] = []
        self.other_times: array[float] = array("d")
        self.special: list[Rec] = []  # compile and slice-count records (few)
        self.blocks = Blocks()
        self.pairing: Pairing | None = None  # the job view's pairing of `others`
        self._src = 0  # records of log.others converted
        self._src_last: object = None
        self._version = log.version
        self._js = list(log.job_starts)

    @property
    def times(self) -> array[float]:
        return self.log.times

    @property
    def nums(self) -> StepNums:
        return self.log.nums

    @property
    def job_starts(self) -> list[float]:
        return self.log.job_starts

    def durations(self, lo: int, hi: int) -> array[float]:
        """Durations of steps [lo, hi): start[i+1] - start[i], nan where a restart lies between."""
        t = self.log.times
        np = numpy() if hi - lo >= FAST_MIN else None
        if np is None:
            out = array("d", map(operator.sub, t[lo + 1 : hi + 1], t[lo:hi]))
        else:  # the same subtractions, element by element
            a = np.frombuffer(t, dtype=np.float64)
            out = array("d")
            out.frombytes(np.subtract(a[lo + 1 : hi + 1], a[lo:hi]).tobytes())
        for js in self.log.job_starts:
            i = bisect_left(t, js) - 1
            if lo <= i < hi:
                out[i - lo] = math.nan
        return out

    def sync(self) -> tuple[bool, float]:
        """Follow the log: (whether something changed before its end, so that every figure
        derived so far is redone; the earliest time of a new non-step event, inf if none)."""
        log = self.log
        redo = False
        earliest = math.inf
        if log.version != self._version:  # a late step or restart: the step arrays were rebuilt
            self._version = log.version
            self.blocks = Blocks()
            redo = True
        src = log.others
        k = self._src
        if k > len(src) or (k and src[k - 1] is not self._src_last):  # a late record went in before
            self.others, self.special, self.other_times, self.pairing = [], [], array("d"), None
            k = 0
            redo = True
            earliest = -math.inf
        for r in src[k:]:
            rec: Rec = (r.kind, r.time, r.step, r.value, r.name, None if r.attrs is None else json.loads(r.attrs))
            self.others.append(rec)
            self.other_times.append(r.time)
            if r.kind in SPECIAL_KINDS:
                self.special.append(rec)
            if r.kind in (Kind.JOB_START, Kind.JOB_END):
                redo = True
            earliest = min(earliest, r.time)
        self._src = len(src)
        self._src_last = src[-1] if src else None
        if len(log.job_starts) != len(self._js):
            new = set(log.job_starts).difference(self._js)
            self._js = list(log.job_starts)
            done = self.blocks.done  # a new restart among the steps summarized: summarize again
            if done and any(bisect_left(log.times, js) - 1 < done for js in new):
                self.blocks = Blocks()
        self.blocks.extend(log.times, self.durs)
        return redo, earliest


def quantiles(durs: Sequence[float]) -> dict[str, float] | None:
    xs = sorted(d for d in durs if not math.isnan(d))
    if not xs:
        return None
    n = len(xs)
    med = xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2
    return {"median_s": med, "p90_s": xs[min(n - 1, int(0.9 * n))], "max_s": xs[-1]}
