"""Per-host step statistics (median, p90, max step time), kept incrementally per host.

Each host's step-to-step gaps live in a sorted structure that a query extends with the steps
recorded since the last one, so a query costs the new steps, whatever the number of hosts or
the length of the job. A change that reaches back in time (a late restart, out-of-order
steps) rebuilds that host only. New gaps wait in a small side list of the structure
(_sorted.HostGaps) and are merged a thousand or two at a time: at 256 hosts stepping together,
an update costs each host its new gaps and two searches, not a rewrite of its sorted gaps.
"""

from __future__ import annotations

import operator
from array import array
from bisect import bisect_left, bisect_right
from typing import Any

from mlgoodput.accounting import _fast
from mlgoodput.accounting._model import median
from mlgoodput.accounting._report import HostStepStats
from mlgoodput.accounting._sorted import HostGaps, SortedFloats
from mlgoodput.accounting._timeline import HostLog


class HostSteps:
    """One host's gaps between consecutive steps of one attempt, extended with new steps only."""

    __slots__ = ("_diffs", "_raw", "last_new", "n", "stats", "version")

    def __init__(self) -> None:
        self.n = 0  # steps consumed
        self.version = -1  # the HostLog.version they were consumed at
        self._diffs = HostGaps()
        self._raw: array[float] | None = None  # a first fill's gaps, put in order when first used
        self.stats: HostStepStats | None = None
        # the gaps the last extend of `diffs` added (another reader keeping the same gaps
        # checks its own against them: the straggler analysis, torch/_stragglers.py)
        self.last_new: list[float] | array[float] | None = None

    @property
    def diffs(self) -> HostGaps:
        """The gaps in order. A first fill's statistics come from a selection (_order_stats),
        and its sort waits for the first use (a later update, a save): a cold read of a long
        job does not sort its millions of gaps before they are needed."""
        if self._raw is not None:
            self._diffs.extend(self._raw)  # exactly what the first fill would have done then
            self._raw = None
        return self._diffs

    @diffs.setter
    def diffs(self, value: SortedFloats) -> None:
        self._diffs, self._raw = HostGaps.adopt(value), None

    def update(self, log: HostLog) -> HostStepStats | None:
        times = log.times
        n = len(times)
        lo = self.n
        if n > lo > 1 and log.version == self.version and self._raw is None:
            # the usual update: steps appended since the last one (what the general path below
            # does in that case, without its other cases)
            new = (
                _fast.gaps(times, lo - 1, n - 1)
                or _fast.short_gaps(times, lo - 1, n - 1)
                or list(map(operator.sub, times[lo:], times[lo - 1 : n - 1]))
            )
            js = log.job_starts
            if js and js[-1] > times[lo - 1]:
                _cut(new, times, js, lo, n)
            d = self._diffs
            d.extend(new)
            self.last_new = new
            self.n = n
            k = len(d)
            self.stats = (
                HostStepStats(log.host, k + 1, d.median(), d.kth(min(k - 1, int(0.9 * k))), d.kth(k - 1)) if k else None
            )
            return self.stats
        quick = None
        if log.version != self.version or n < self.n:
            self.n, self.version, self.diffs, self.stats = 0, log.version, HostGaps(), None
            self.last_new = None
        if n > self.n:
            lo = max(1, self.n)
            if n > lo:
                new = (
                    _fast.gaps(times, lo - 1, n - 1)
                    or _fast.short_gaps(times, lo - 1, n - 1)
                    or list(map(operator.sub, times[lo:], times[lo - 1 : n - 1]))
                )
                js = log.job_starts
                if js and js[-1] > times[lo - 1]:
                    _cut(new, times, js, lo, n)
                if not len(self._diffs) and self._raw is None and isinstance(new, array):
                    quick = _order_stats(new)
                if quick is not None and isinstance(new, array):
                    self._raw = new
                else:
                    self.diffs.extend(new)
                self.last_new = new  # (a first fill's too: `diffs` extends by exactly it)
            self.n = n
            self.stats = None
        if self.stats is None and quick is not None:
            self.stats = HostStepStats(
                host=log.host, steps=quick[0] + 1, median_s=quick[1], p90_s=quick[2], max_s=quick[3]
            )
        elif self.stats is None and len(self.diffs):
            d = self.diffs
            k = len(d)
            self.stats = HostStepStats(
                host=log.host,
                steps=k + 1,
                median_s=d.median(),
                p90_s=d.kth(min(k - 1, int(0.9 * k))),
                max_s=d.kth(k - 1),
            )
        return self.stats


def _cut(new: list[float] | array[float], times: array[float], js: list[float], lo: int, n: int) -> None:
    """Take out of `new` (the gaps before steps lo..n-1) those a restart falls in: a restart at
    js falls between steps i-1 and i where i is the first step at or after js."""
    cut = sorted({bisect_left(times, t) for t in js[bisect_right(js, times[lo - 1]) :] if t <= times[-1]}, reverse=True)
    for i in cut:
        if lo <= i < n:
            del new[i - lo]


def _order_stats(gaps: array[float]) -> tuple[int, float, float, float] | None:
    """(count, median, p90, max) of the gaps, as SortedFloats' `median` and `kth` give them, by
    a selection (numpy's partition) instead of a sort; None (the caller sorts) without numpy,
    for a short list, or with a NaN or a zero (where 0.0 and -0.0 could trade places)."""
    k = len(gaps)
    np: Any = _fast.numpy() if k >= _fast.MIN else None
    if np is None:
        return None
    a = np.frombuffer(gaps, dtype=np.float64)
    if np.isnan(a).any() or (a == 0).any():
        return None
    p90 = min(k - 1, int(0.9 * k))
    part = np.partition(a, sorted({k // 2 - 1, k // 2, p90, k - 1}))
    mid = float(part[k // 2])
    median = mid if k % 2 else (float(part[k // 2 - 1]) + mid) / 2.0
    return k, median, float(part[p90]), float(part[k - 1])


def stats_as_of(log: HostLog, q: float) -> HostStepStats | None:
    """The statistics of the steps started by q (a look into the past; a full pass)."""
    times = log.times
    js = log.job_starts
    diffs = []
    for i in range(1, len(times)):
        if times[i] > q:
            break
        if bisect_right(js, times[i]) != bisect_right(js, times[i - 1]):
            continue  # a restart lies between
        diffs.append(times[i] - times[i - 1])
    if not diffs:
        return None
    diffs.sort()
    return HostStepStats(
        host=log.host,
        steps=len(diffs) + 1,
        median_s=median(diffs),
        p90_s=diffs[min(len(diffs) - 1, int(0.9 * len(diffs)))],
        max_s=diffs[-1],
    )
