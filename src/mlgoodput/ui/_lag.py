"""Which host starts steps late, and what it cost the others: the straggler analysis of
mlgoodput.torch (docs/torch.md), worked out from the accounting's own per-host arrays.

The torch analysis (`torch/_stragglers.py: analyze`) matches every step start of every host
by (attempt, step number) in one pass in Python over all of them. A job's page cannot afford
that for ten million steps, but only steps that two hosts or more started are compared, and
in a long job most steps are the lead host's alone. So each host's steps become one
dictionary per attempt (built in C, the first start of a number kept), except the host with
the most steps: when its step numbers never decrease, its start of each number that another
host also started is found by bisection. The steps matched are then summed by the torch
analysis's own code (`mlgoodput.torch.compare_step_starts`): each host's mean lateness behind
the earliest host, the steps it started last, the seconds it held the others back, and the
verdict with its evidence (the same rule: docs/torch.md, "Stragglers").
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Mapping
from dataclasses import dataclass

from mlgoodput.accounting import HostLog
from mlgoodput.torch import StragglerVerdict, compare_step_starts


@dataclass(frozen=True, slots=True)
class HostLag:
    host: int
    mean_lag_s: float  # mean of (its start - the earliest host's start) over compared steps
    last_steps: int  # compared steps in which it started last
    held_back_s: float  # over those steps, its lead over the next-latest host


@dataclass(frozen=True, slots=True)
class Lateness:
    """The figures of every host and the straggler verdict (`mlgoodput.torch`'s, as is)."""

    hosts: dict[int, HostLag]
    steps_compared: int
    max_spread_s: float
    verdict: StragglerVerdict

    @property
    def straggler(self) -> int | None:
        return self.verdict.straggler

    @property
    def straggler_cost_s(self) -> float:
        """The seconds the straggler held the others back (0 when there is none)."""
        x = None if self.verdict.straggler is None else self.hosts.get(self.verdict.straggler)
        return 0.0 if x is None else x.held_back_s


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
    median step time (the accounting's host statistics), for the rule's floor."""
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
    by_step: dict[tuple[int, int], dict[int, float]] = {}
    for h, atts in per.items():
        for a, starts in atts.items():
            for n, t in starts.items():
                got_d = by_step.get((a, n))
                if got_d is None:
                    by_step[(a, n)] = {h: t}
                else:
                    got_d[h] = t
    # the torch analysis's own per-step sums and straggler rule; the step statistics only set
    # the rule's floor (each host's median step time): the accounting's
    rep = compare_step_starts(by_step, {h: (0, medians.get(h, 0.0), 0.0, 0.0) for h in logs})
    rows = {r.rank: HostLag(r.rank, r.mean_lag_s, r.last_steps, r.held_back_s) for r in rep.ranks}
    return Lateness(rows, rep.steps_compared, rep.max_spread_s, rep.verdict)
