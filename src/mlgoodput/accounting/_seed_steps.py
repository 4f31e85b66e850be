"""The seed's step deviation helpers: its step times and its ideal step time.

ml-goodput-measurement's `get_step_deviation` measures a step as the start of step n+1 minus
the start of step n, for consecutive step numbers of the lead host, against an ideal that is
the trimmed mean of the steps of 1 s or more. Our own step statistics differ (docs/accounting.md);
these keep the seed's answer for the seed's call, incrementally (a long job's second call costs
the steps appended since the first).
"""

from __future__ import annotations

import dataclasses
import statistics

from mlgoodput.accounting._timeline import Timeline


@dataclasses.dataclass(slots=True)
class _Kept:
    """What `SeedSteps.of` derived so far, and where it stopped."""

    lead: int
    n: int
    last_time: float
    last_num: int
    times: dict[int, float]
    ideal: float | None = None
    ideal_n: int = -1  # the `n` that `ideal` was computed for


class SeedSteps:
    """The seed's step times of a timeline's lead host, kept between calls."""

    def __init__(self) -> None:
        self._kept: _Kept | None = None

    def of(self, tl: Timeline, q: float) -> dict[int, float]:
        """Start of step n+1 minus start of step n, for consecutive step numbers of the lead
        host (as of `q`) in time order (a restart breaks the chain). Steps appended since the
        last call cost only themselves (the result is read-only: it is kept and extended)."""
        lead = tl.lead_host(q)
        if lead is None:
            return {}
        log_ = tl.hosts[lead]
        times, nums = log_.times, log_.nums
        n = len(times)
        c = self._kept
        if (
            c is not None
            and c.lead == lead
            and 0 < c.n <= n
            and times[c.n - 1] == c.last_time
            and nums[c.n - 1] == c.last_num
        ):
            out, start = c.times, c.n
        else:
            out, start = {}, 1
        for i in range(max(start, 1), n):
            if nums[i] == nums[i - 1] + 1:
                out[int(nums[i - 1])] = times[i] - times[i - 1]
        if n and (c is None or c.times is not out or c.n != n):
            self._kept = _Kept(lead, n, times[n - 1], nums[n - 1], out)
        return out

    def ideal(self, step_times: dict[int, float]) -> float | None:
        """The seed's ideal step time of `step_times`, computed once per new set of steps."""
        c = self._kept
        if c is not None and c.times is step_times and c.ideal_n == c.n:
            return c.ideal
        got = seed_ideal(list(step_times.values()))
        if c is not None and c.times is step_times:
            c.ideal, c.ideal_n = got, c.n
        return got


def seed_ideal(step_times: list[float]) -> float | None:
    """The seed's ideal step time: the mean of the step times of 1 s or more that are at most
    median + 3 * MAD (median absolute deviation), or None when no step takes 1 s."""
    xs = [t for t in step_times if t >= 1.0]
    if not xs:
        return None
    med = statistics.median(xs)
    mad = statistics.median(abs(x - med) for x in xs)
    normal = [x for x in xs if x <= med + 3 * mad]
    return statistics.fmean(normal) if normal else None
