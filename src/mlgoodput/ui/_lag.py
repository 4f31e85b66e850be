"""Which host starts steps late, and what it cost the others: the straggler analysis of
mlgoodput.torch (docs/torch.md), worked out from the accounting's own per-host arrays.

The torch analysis (`torch/_stragglers.py: analyze`) matches every step start of every host
by (attempt, step number) in one pass in Python over all of them. A job's page cannot afford
that for ten million steps, but only steps that two hosts or more started are compared, and
in a long job most steps are the lead host's alone. So each host's steps become one
dictionary per attempt (built in C, the first start of a number kept), except the host with
the most steps: when its step numbers never decrease, its start of each number that another
host also started is found by bisection. The figures are the torch analysis's: each host's
mean lateness behind the earliest host, the steps it started last, the seconds it held the
others back, and the straggler (the same rule and thresholds).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass
from statistics import median

from mlgoodput.accounting import HostLog
from mlgoodput.torch import MIN_LEAD_FRACTION, MIN_LEAD_S


@dataclass(frozen=True, slots=True)
class HostLag:
    host: int
    mean_lag_s: float  # mean of (its start - the earliest host's start) over compared steps
    last_steps: int  # compared steps in which it started last
    held_back_s: float  # over those steps, its lead over the next-latest host


@dataclass(frozen=True, slots=True)
class Lateness:
    hosts: dict[int, HostLag]
    steps_compared: int
    straggler: int | None
    straggler_cost_s: float
    max_spread_s: float


def _by_attempt(log: HostLog, i0: int, i1: int) -> dict[int, tuple[int, int]]:
    """Attempt number (job starts at or before a step, as the torch analysis counts them)
    -> the index range of its steps within [i0, i1)."""
    t = log.times
    js = log.job_starts
    out: dict[int, tuple[int, int]] = {}
    a = bisect_right(js, t[i0]) if i1 > i0 else 0
    lo = i0
    while lo < i1:
        hi = i1 if a >= len(js) else min(i1, max(lo, bisect_left(t, js[a])))
        if hi > lo:
            out[a] = (lo, hi)
        lo = hi
        a += 1
    return out


def _starts(log: HostLog, lo: int, hi: int) -> dict[int, float]:
    """Step number -> its first start in [lo, hi) (later starts of the same number are repeats)."""
    nums = log.nums[lo:hi]
    times = log.times[lo:hi]
    nums.reverse()
    times.reverse()
    return dict(zip(nums, times, strict=True))  # the earliest start is written last


def lateness(logs: Mapping[int, HostLog], medians: Mapping[int, float], start: float, end: float) -> Lateness:
    """The straggler analysis of the steps started in [start, end]; `medians`: each host's
    median step time (the accounting's host statistics), for the noise floor."""
    ranges: dict[int, dict[int, tuple[int, int]]] = {}
    for h, log in logs.items():
        ranges[h] = _by_attempt(log, bisect_left(log.times, start), bisect_right(log.times, end))
    counts = {h: sum(hi - lo for lo, hi in r.values()) for h, r in ranges.items()}
    big = max(counts, key=lambda h: (counts[h], -h)) if counts else None
    per: dict[int, dict[int, dict[int, float]]] = {}  # host -> attempt -> number -> start
    for h, r in ranges.items():
        if h != big:
            per[h] = {a: _starts(logs[h], lo, hi) for a, (lo, hi) in r.items()}
    if big is not None:
        others = sum(counts.values()) - counts[big]
        log = logs[big]
        if log.monotonic and counts[big] > 8 * others:  # find only the numbers others started
            nums = log.nums
            times = log.times
            mine: dict[int, dict[int, float]] = {}
            for a, (lo, hi) in ranges[big].items():
                want: set[int] = set()
                for h in per:
                    want.update(per[h].get(a, ()))
                got = mine[a] = {}
                for n in sorted(want):
                    j = bisect_left(nums, n, lo, hi)
                    if j < hi and nums[j] == n:
                        got[n] = times[j]
            per[big] = mine
        else:
            per[big] = {a: _starts(log, lo, hi) for a, (lo, hi) in ranges[big].items()}
    by_step: dict[tuple[int, int], list[tuple[float, int]]] = {}
    for h, atts in per.items():
        for a, starts in atts.items():
            for n, t in starts.items():
                got_l = by_step.get((a, n))
                if got_l is None:
                    by_step[(a, n)] = [(t, h)]
                else:
                    got_l.append((t, h))
    lag_sum = dict.fromkeys(logs, 0.0)
    lag_n = dict.fromkeys(logs, 0)
    last = dict.fromkeys(logs, 0)
    held = dict.fromkeys(logs, 0.0)
    compared = 0
    spread = 0.0
    for starts_l in by_step.values():
        if len(starts_l) < 2:
            continue
        compared += 1
        starts_l.sort()
        first_t = starts_l[0][0]
        for t, h in starts_l:
            lag_sum[h] += t - first_t
            lag_n[h] += 1
        late_t, late_h = starts_l[-1]
        spread = max(spread, late_t - first_t)
        last[late_h] += 1
        held[late_h] += late_t - starts_l[-2][0]
    rows = {h: HostLag(h, lag_sum[h] / lag_n[h] if lag_n[h] else 0.0, last[h], held[h]) for h in sorted(logs)}
    worst = max(rows.values(), key=lambda x: (x.held_back_s, -x.host), default=None)
    typical = median([medians.get(h, 0.0) for h in rows]) if rows else 0.0
    floor = max(MIN_LEAD_S, MIN_LEAD_FRACTION * typical)
    straggler = None
    if worst is not None and compared and worst.last_steps and worst.held_back_s / worst.last_steps > floor:
        straggler = worst.host
    cost = worst.held_back_s if straggler is not None and worst is not None else 0.0
    return Lateness(rows, compared, straggler, cost, spread)
