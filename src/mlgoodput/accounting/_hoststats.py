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

    __slots__ = ("_diffs", "_raw", "_win", "last_new", "n", "stats", "version")

    def __init__(self) -> None:
        self.n = 0  # steps consumed
        self.version = -1  # the HostLog.version they were consumed at
        self._diffs = HostGaps()
        self._raw: array[float] | None = None  # a first fill's gaps, put in order when first used
        self.stats: HostStepStats | None = None
        # the gaps the last extend of `diffs` added (another reader keeping the same gaps
        # checks its own against them: the straggler analysis, torch/_stragglers.py)
        self.last_new: list[float] | array[float] | None = None
        # parts of the buckets around where the median and the p90 were found (update_all):
        # (the structure, its stamp then, and for each: values, first index, run ends: _windows)
        self._win: tuple[Any, ...] | None = None

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
        if self._grow(log):
            d = self._diffs
            k = len(d)
            self.stats = (
                HostStepStats(log.host, k + 1, d.median(), d.kth(min(k - 1, int(0.9 * k))), d.kth(k - 1)) if k else None
            )
            return self.stats
        return self._update(log)

    def _grow(self, log: HostLog) -> bool:
        """The usual update's growth (steps appended since the last one: what `_update` does in
        that case, without its other cases), the statistics left to the caller; False (nothing
        done) in any other case."""
        times = log.times
        n = len(times)
        lo = self.n
        if not (n > lo > 1 and log.version == self.version and self._raw is None):
            return False
        new = (
            _fast.gaps(times, lo - 1, n - 1)
            or _fast.short_gaps(times, lo - 1, n - 1)
            or list(map(operator.sub, times[lo:], times[lo - 1 : n - 1]))
        )
        js = log.job_starts
        if js and js[-1] > times[lo - 1]:
            _cut(new, times, js, lo, n)
        self._diffs.extend(new)
        self.last_new = new
        self.n = n
        return True

    def _update(self, log: HostLog) -> HostStepStats | None:
        times = log.times
        n = len(times)
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



_TOGETHER = 16  # hosts from which `update_all` reads their statistics in one numpy pass
_HALF = 96  # half the width of a part of the buckets kept around a statistic (`HostSteps._win`)


def update_all(pairs: list[tuple[HostSteps, HostLog]]) -> list[HostStepStats | None]:
    """`HostSteps.update` of each (HostSteps, log) pair, the same statistics (to the bit): the
    usual updates (new steps appended, values waiting in a side list) read the median and the
    p90 of all their hosts at once, a search over every host in a few numpy passes, not one
    search per host and statistic."""
    np: Any = _fast.numpy() if len(pairs) >= _TOGETHER else None
    if np is None:
        return [hs.update(log) for hs, log in pairs]
    out: list[HostStepStats | None] = [None] * len(pairs)
    todo: list[tuple[int, HostSteps, HostGaps, int]] = []
    for i, (hs, log) in enumerate(pairs):
        if not hs._grow(log):
            out[i] = hs._update(log)
            continue
        g = hs._diffs
        k = len(g)
        if g._side and g._clean:
            todo.append((i, hs, g, log.host))
        else:
            hs.stats = out[i] = (
                HostStepStats(log.host, k + 1, g.median(), g.kth(min(k - 1, int(0.9 * k))), g.kth(k - 1)) if k else None
            )
    if todo:
        _read_together(np, todo, out)
    return out


def _windows(g: HostGaps, at_median: int, at_p90: int) -> tuple[Any, ...]:
    """(g, its stamp, then for each index: a copy of the buckets' values around it (`_HALF`
    each side, kept inside), the index of its first value, and how far the runs of values
    equal to its first and last reach (the index of the first value equal to its first, one
    past the last equal to its last): there the buckets' values are known too)."""
    m = g._n
    out: list[Any] = [g, g.stamp]
    for at in (at_median, at_p90):
        a = max(0, min(at - _HALF, m - 2 * _HALF))
        part = g.part(a, min(m, a + 2 * _HALF))
        out += (part, a, g.rank(part[0], False), g.rank(part[-1], True))
    return tuple(out)


def _read_together(np: Any, todo: list[tuple[int, HostSteps, HostGaps, int]], out: list[HostStepStats | None]) -> None:
    """The statistics of hosts whose structures hold values aside (no NaN, no -0.0 anywhere:
    equal values are the same bits, so the k-th's bits do not depend on which of equal values
    a search takes). For each k (the one or two of the median, the p90's), the search of
    HostGaps._find over all hosts together, in the kept parts of the buckets (`_win`); a host
    whose answer lies outside them (found out: the result does not check) is read one by one,
    and its parts are taken again around what that found."""
    sides: list[array[float]] = []
    wins: list[array[float]] = []
    nums: list[tuple[int, ...]] = []
    tops: list[float] = []
    for _, hs, g, _ in todo:
        w = hs._win
        if w is None or w[0] is not g or w[1] != g.stamp:
            m = g._n
            w = hs._win = _windows(g, m // 2, int(0.9 * m))
        side = g._side
        sides.append(side)
        wins.append(w[2])
        wins.append(w[6])
        nums.append((g._n, len(side), w[3], len(w[2]), w[4], w[5], w[7], len(w[6]), w[8], w[9]))
        tops.append(g._maxes[-1])
    S = np.frombuffer(b"".join(sides), dtype=np.float64)
    W = np.frombuffer(b"".join(wins), dtype=np.float64)
    t = np.array(nums, dtype=np.int64)
    m, b, off_m, len_m, lt_m, le_m, off_p, len_p, lt_p, le_p = t.T
    n = m + b
    sbase = np.cumsum(b) - b
    wmed = np.cumsum(len_m + len_p) - (len_m + len_p)
    wp90 = wmed + len_m
    hi = n // 2
    k90 = np.minimum(n - 1, (0.9 * n).astype(np.int64))  # as int(0.9 * n): a double, truncated
    # rows: the median's lower k (its only one when n is odd), its upper k, the p90's k
    k = np.concatenate((hi - 1 + (n & 1), hi, k90))
    r3 = np.concatenate
    val, bad = _search(
        np,
        S,
        W,
        k,
        r3((m, m, m)),
        r3((b, b, b)),
        r3((sbase, sbase, sbase)),
        r3((wmed, wmed, wp90)),
        r3((off_m, off_m, off_p)),
        r3((len_m, len_m, len_p)),
        r3((lt_m, lt_m, lt_p)),
        r3((le_m, le_m, le_p)),
    )
    h = len(todo)
    lo_v, hi_v, p90 = val[:h], val[h : 2 * h], val[2 * h :]
    med = np.where(n & 1, hi_v, (lo_v + hi_v) / 2.0)
    last = S[sbase + b - 1]
    mx = np.maximum(np.array(tops, dtype=np.float64), last)  # the larger, as kth(n - 1) takes it
    fail = (bad[:h] | bad[h : 2 * h] | bad[2 * h :]).tolist()
    for (i, hs, g, host), ni, kp, md, p9, top, f in zip(
        todo, n.tolist(), k90.tolist(), med.tolist(), p90.tolist(), mx.tolist(), fail, strict=True
    ):
        if f:  # read one by one; the parts taken again around where those searches ended
            md, p9, top = g.median(), g.kth(kp), g.kth(ni - 1)
            hs._win = _windows(g, g.main_index(ni // 2), g.main_index(kp))
        else:
            g._memo = {-1: md, kp: p9}
        hs.stats = out[i] = HostStepStats(host, ni + 1, md, p9, top)


def _search(
    np: Any, S: Any, W: Any, k: Any, m: Any, b: Any, sb: Any, wb: Any, off: Any, wl: Any, lt: Any, le: Any
) -> tuple[Any, Any]:
    """For each row: the k-th of (the buckets' m values, whose indices off..off + wl - 1 are
    W[wb:wb + wl], those from lt up to it all equal to its first, those from it up to le - 1
    to its last) and (b >= 1 side values S[sb:sb + b]) together, and whether that could not be
    told from those (then the value is not to be used). HostGaps._find's search for j (the
    side values among the first k + 1) in the range the known values allow, then checked: j
    is the first index where side[j] < main[k - j] fails (each side at the ends of the
    natural range), else the true j lay outside."""
    lo_nat = np.maximum(0, k + 1 - m)
    hi_nat = np.minimum(b, k + 1)
    lo = np.maximum(lo_nat, k - le + 1)
    hi = np.minimum(hi_nat, k - lt + 1)
    bad = lo > hi
    hi = np.maximum(hi, lo)
    s_last = sb + b - 1
    w_last = wb + wl - 1
    first, final = W[wb], W[w_last]
    end = off + wl

    def main_at(i: Any) -> Any:  # main[i] for lt <= i < le
        return np.where(i < off, first, np.where(i >= end, final, W[np.clip(wb + i - off, wb, w_last)]))

    def side_at(i: Any) -> Any:
        return S[np.clip(sb + i, sb, s_last)]

    steps = int((hi - lo).max()).bit_length() if len(k) else 0
    for _ in range(steps):
        act = lo < hi
        mid = (lo + hi) >> 1
        less = side_at(mid) < main_at(k - mid)
        lo = np.where(act & less, mid + 1, lo)
        hi = np.where(act & ~less, mid, hi)
    j = lo
    t = k - j  # main[t]: the buckets' value the k-th may be (t < 0: none)

    def inside(i: Any) -> Any:
        return (i >= lt) & (i < le)

    # side[j - 1] < main[t + 1] (j above the natural range's start), side[j] >= main[t] (j
    # below its end), main[t] known where t >= 0
    bad |= (j > lo_nat) & ~(inside(t + 1) & (side_at(j - 1) < main_at(t + 1)))
    bad |= (j < hi_nat) & ~(inside(t) & ~(side_at(j) < main_at(t)))
    has_main = t >= 0
    bad |= has_main & ~inside(t)
    x_main = np.where(has_main, main_at(t), -np.inf)
    x_side = np.where(j >= 1, side_at(j - 1), -np.inf)
    return np.maximum(x_main, x_side), bad


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
