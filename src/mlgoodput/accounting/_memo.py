"""The whole-job partition's claimed seconds, kept as running totals up to a settled time.

Which bucket claims an instant depends only on the intervals over that instant, so the
seconds of each bucket in [a, b] are those in [a, t) plus those in [t, b] for any t. Events
come in time order: what lies before the lead host's latest event does not change when new
events come, except where a change reaches back (a late event), and the one thing that moves
with every query, the infrastructure gaps (their starts follow the ideal step time), is
counted apart: the other buckets' seconds inside those gaps are taken off again and the gaps
get their own. So a query sums the totals kept up to the settled time, sweeps what lies
after it (the new events and the open tail up to the query time) and the gaps, and moves the
settled time on: a cost of what is new, not of the job's length.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence

from mlgoodput.accounting._intervals import Intervals, intersect, measure, subtract, union
from mlgoodput.accounting._model import HIGH, LOW, Activities, B

_KEEP = 32  # settled points kept to go back to (thinned as the job grows)


def window(xs: Intervals, x: float, y: float) -> Intervals:
    """The parts of sorted disjoint `xs` inside [x, y] (found by a search, not a walk)."""
    out: Intervals = []
    j = bisect_right(xs, x, key=lambda it: it[1])  # the first ending after x
    n = len(xs)
    while j < n:
        s, e = xs[j]
        if s >= y:
            break
        s2, e2 = max(s, x), min(e, y)
        if e2 > s2:
            out.append((s2, e2))
        j += 1
    return out


def order(acts: Activities) -> list[object]:
    """The claimed buckets after the infrastructure gaps, in priority order (`Engine.claimed`)."""
    customs = sorted((k for k in acts.buckets if isinstance(k, tuple)), key=lambda k: str(k[1]))
    return [*HIGH, *customs, B.DATA_LOADING_SYNC, *LOW]


def sweep(acts: Activities, keys: Sequence[object], su: Intervals, x: float, y: float) -> tuple[list[float], float]:
    """Seconds of each bucket of `keys` in [x, y] by priority, and of data loading under steps."""
    out: list[float] = []
    covered: Intervals = []
    dl = window(acts.buckets.get("dl", []), x, y)
    su_w = window(su, x, y)
    for key in keys:
        xs = subtract(dl, su_w) if key is B.DATA_LOADING_SYNC else window(acts.buckets.get(key, []), x, y)
        u = subtract(xs, covered) if covered else xs
        out.append(measure(u))
        if u:
            covered = union(covered + u)
    return out, measure(intersect(dl, su_w))


class PartitionMemo:
    """Per bucket, the claimed seconds of [a, cut) (a: the job's first start), with earlier
    cuts kept to go back to when a change reaches before the latest one."""

    def __init__(self) -> None:
        self.fallbacks = 0
        self.key: tuple[int, float] | None = None  # (lead host, a)
        # (cut, seconds per bucket in [a, cut), overlapped seconds there), oldest first
        self.points: list[tuple[float, dict[object, float], float]] = []

    def claimed(
        self,
        acts: Activities,
        host: int,
        a: float,
        b: float,
        settled: float,
        change: float,
        infra: Intervals,
        su: Intervals,
    ) -> tuple[dict[object, float], float]:
        """(seconds of each claimed bucket in [a, b], overlapped data loading), as
        `Engine._partition` gives them; `settled`: the time before which nothing changes any
        more, `change`: the earliest time changed since the last call."""
        keys = order(acts)
        if self.key != (host, a):
            if self.key is not None:
                self.fallbacks += 1
            self.key, self.points = (host, a), []
        elif self.points and change < self.points[-1][0]:
            self.fallbacks += 1
            while self.points and change < self.points[-1][0]:
                self.points.pop()
        while self.points and self.points[-1][0] > b:  # (settled after b: a query of the past)
            self.points.pop()
        if self.points:
            cut, base, ov = self.points[-1]
        else:
            cut, base, ov = a, {}, 0.0
        cut = max(cut, a)
        totals = [base.get(k, 0.0) for k in keys]
        new_cut = min(max(settled, cut), b)
        if new_cut > cut:  # the settled part grew: add it to the totals, and keep them
            part, o = sweep(acts, keys, su, cut, new_cut)
            totals = [t + p for t, p in zip(totals, part, strict=True)]
            ov += o
            self._keep(new_cut, dict(zip(keys, totals, strict=True)), ov)
            cut = new_cut
        res: dict[object, float] = {B.INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION: 0.0}
        tail, o = sweep(acts, keys, su, cut, b) if b > cut else ([0.0] * len(keys), 0.0)
        gaps = [(max(x, a), min(y, b)) for x, y in infra if min(y, b) > max(x, a)]
        inside = [0.0] * len(keys)
        for x, y in gaps:
            part, _ = sweep(acts, keys, su, x, y)
            inside = [t + p for t, p in zip(inside, part, strict=True)]
        res[B.INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION] = measure(gaps)
        for k, t, p, g in zip(keys, totals, tail, inside, strict=True):
            v = t + p
            if g:  # what the gaps hold of it goes to them (all of it: 0, not a rounding's rest)
                v = 0.0 if v - g <= 1e-9 * v else v - g
            res[k] = v
        return res, ov + o

    def _keep(self, cut: float, totals: dict[object, float], ov: float) -> None:
        pts = self.points
        pts.append((cut, totals, ov))
        if len(pts) > _KEEP:  # thin the older half: every other one goes
            half = len(pts) // 2
            self.points = pts[:half:2] + pts[half:]
