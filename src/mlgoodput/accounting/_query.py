"""One report's working state: the ideal step time, every step's role, and how its time is laid out."""

from __future__ import annotations

import operator
from bisect import bisect_left, bisect_right
from collections.abc import Iterator
from typing import Protocol

from mlgoodput.accounting._intervals import Intervals, union
from mlgoodput.accounting._model import Activities, Attempt, Derived, median
from mlgoodput.accounting._sorted import SortedFloats
from mlgoodput.accounting._timeline import HostLog, Timeline

#: what `Query.aggregate` found of the redone steps: the query it was found for (see `_wasted`)
#: and (redone ranges, their wasted seconds, the largest productive step number)
WastedMemo = tuple[tuple[object, ...], tuple[list[tuple[int, int, int]], float, int | None]]


class Engine(Protocol):
    """What a Query asks of the `_engine.Engine` that made it (named here, not imported:
    the engine imports this module)."""

    stall_factor: float
    timeline: Timeline
    wasted_memo: WastedMemo | None
    derive_epoch: int  # moves whenever steps already derived are derived again
    # what `Query` keeps of an attempt's steps: i0 -> (log, its version, i1 checked, numbers in
    # order), and (lo, hi) -> (log, version, derived, epoch, the sorted net times of lo..hi-1)
    nums_memo: dict[int, tuple[HostLog, int, int, bool]]
    effs_memo: dict[tuple[int, int], tuple[HostLog, int, Derived, int, SortedFloats]]

    def net_time(self, acts: Activities, s: float, e: float) -> tuple[float, float]: ...

    def step_end(self, log: HostLog, i: int, hi: float) -> float | None: ...

    def step_ends(self, log: HostLog) -> dict[int, list[float]]: ...


class Query:
    """One report's working state: the ideal step time, per-step roles and amounts."""

    def __init__(
        self,
        engine: Engine,
        log: HostLog,
        atts: list[Attempt],
        acts: Activities,
        d: Derived,
        q: float,
        configured: float | None,
    ) -> None:
        self.e = engine
        self.log = log
        self.atts = atts
        self.acts = acts
        self.d = d
        self.q = q
        self.configured = configured
        self.ideal = 0.0
        self.infra: Intervals = []
        self.stops: tuple[tuple[float, float], ...] = ()
        # per attempt: (first-step end or None, last-step end or None if unknown)
        self.first_end: list[float | None] = []
        self.last_end: list[float | None] = []
        self.extra: dict[int, tuple[float, float]] = {}  # regular last steps: i -> (eff, comp)
        self.est_end: dict[int, float] = {}
        self.max_productive_step: int | None = None
        times = log.times
        for att in atts:
            if att.i1 == att.i0:
                self.first_end.append(None)
                self.last_end.append(None)
                continue
            last = att.i1 - 1
            hi = att.end
            se = engine.step_end(log, last, hi)
            if se is not None:
                le: float | None = se
            elif att.ended_by == "running":
                le = q
            else:
                le = None
            self.last_end.append(le)
            if att.i1 - att.i0 >= 2:
                f = att.i0
                fe = engine.step_end(log, f, times[f + 1]) or times[f + 1]
                self.first_end.append(fe)
                if le is not None:
                    net, comp = engine.net_time(acts, times[last], le)
                    self.extra[last] = (net - comp, comp)
            else:
                self.first_end.append(le)

    # ideal step time
    def compute_ideal(self, upto: float | None) -> None:
        if self.configured is not None:
            self.ideal = float(self.configured)
            return
        d = self.d
        if upto is None:
            # the regular steps and each attempt's last step of known end, taken as if added
            added = [v for v, _ in self.extra.values()]
            if len(added) > 1:
                added.sort()
            if len(d.ordered) + len(added):
                self.ideal = d.ordered.median_with(added)
                return
        else:
            times = self.log.times
            vals = [
                d.eff(times, i)
                for att in self.atts
                for i in range(att.i0 + 1, max(att.i0 + 1, att.i1 - 1))
                if times[i] < upto
            ]
            vals += [v for i, (v, _) in self.extra.items() if times[i] < upto]
            if vals:
                self.ideal = median(vals)
                return
        # no regular steps: every step with a known end
        known: list[float] = []
        times = self.log.times
        for k, att in enumerate(self.atts):
            if att.i1 == att.i0:
                continue
            fe = self.first_end[k]
            if fe is not None and (upto is None or times[att.i0] < upto):
                known.append(self.e.net_time(self.acts, times[att.i0], fe)[0])
            if att.i1 - att.i0 >= 2 and self.last_end[k] is not None:
                i = att.i1 - 1
                if upto is None or times[i] < upto:
                    known.append(self.extra[i][0] + self.extra[i][1])
        self.ideal = median(known)

    def _estimated_end(self, s: float, hi: float) -> float:
        """Where a last step with no known end reaches the ideal step time of unclaimed time."""
        need = self.ideal
        for gs, ge in self.acts.claims.gaps(s, hi):
            if ge - gs >= need:
                return gs + need
            need -= ge - gs
        return hi

    def compute_infra(self) -> None:
        times = self.log.times
        out: Intervals = []
        for k, att in enumerate(self.atts):
            if att.i1 > att.i0 and self.last_end[k] is None:
                last = att.i1 - 1
                self.est_end[last] = self._estimated_end(times[last], att.end)
            if k + 1 == len(self.atts):
                continue
            nxt = self.atts[k + 1].start
            if att.ended_by == "job_end":
                out.append((att.end, nxt))
            elif att.i1 == att.i0:
                out.append((att.start, nxt))  # a crash loop: the whole attempt
            else:
                last = att.i1 - 1
                le = self.last_end[k]
                out.append((le if le is not None else self.est_end[last], nxt))
        self.stops = tuple(out)  # one (work stopped, next start) per disruption, in order
        self.infra = union(out)

    def steps_union(self) -> Intervals:
        times = self.log.times
        out: Intervals = []
        ends = self.e.step_ends(self.log)
        for k, att in enumerate(self.atts):
            if att.i1 == att.i0:
                continue
            last = att.i1 - 1
            le = self.last_end[k]
            hi = le if le is not None else att.end
            if not ends:
                out.append((times[att.i0], hi))
                continue
            cur = times[att.i0]
            for i in range(att.i0, last):
                se = self.e.step_end(self.log, i, times[i + 1])
                if se is not None and se < times[i + 1]:
                    out.append((cur, se))
                    cur = times[i + 1]
            out.append((cur, hi))
        return union(out)

    # per-step roles
    def _parts(self, k: int, i: int) -> tuple[float, float, float, float, float]:
        """(start, end, startup, productive, stall) of step i of attempt k."""
        att = self.atts[k]
        times = self.log.times
        s = times[i]
        ideal = self.ideal
        if i == att.i1 - 1 and self.last_end[k] is None:
            e = att.end
            net, _ = self.e.net_time(self.acts, s, e)
            return s, e, 0.0, min(net, ideal), 0.0
        if i == att.i0:
            fe = self.first_end[k]
            assert fe is not None
            net, _ = self.e.net_time(self.acts, s, fe)
            return s, fe, max(0.0, net - ideal), min(net, ideal), 0.0
        if i in self.extra:
            eff, comp = self.extra[i]
            known = self.last_end[k]
            assert known is not None
            e = known
        else:
            eff = self.d.eff(times, i)
            comp = self.d.compile.get(i, 0.0)
            e = self.e.step_end(self.log, i, times[i + 1]) or times[i + 1]
        if eff > self.e.stall_factor * ideal:
            return s, e, comp, ideal, eff - ideal
        return s, e, comp, eff, 0.0

    def redone(self) -> list[tuple[int, int, int]]:
        """(attempt, lo, hi): index ranges of steps whose progress a later attempt redid."""
        out = []
        prev: int | None = None
        nums = self.log.nums
        for k, att in enumerate(self.atts):
            if att.i1 == att.i0:
                continue
            if prev is not None:
                pa = self.atts[prev]
                thr = self.acts.restore_step.get(k)
                if thr is None:
                    lo_num, inclusive = nums[att.i0], True
                else:
                    lo_num, inclusive = thr, False
                if self.log.monotonic or self._in_order(pa.i0, pa.i1):
                    cut = (bisect_left if inclusive else bisect_right)(nums, lo_num, pa.i0, pa.i1)
                    if cut < pa.i1:
                        out.append((prev, cut, pa.i1))
                else:
                    for i in range(pa.i0, pa.i1):
                        if nums[i] > lo_num or (inclusive and nums[i] == lo_num):
                            out.append((prev, i, i + 1))
            prev = k
        return out

    def aggregate(self) -> dict[str, float]:
        d = self.d
        ideal = self.ideal
        # the regular steps and each attempt's last step of known end (the structure is left
        # as it is: a query that adds and removes them would make its index be read again)
        limit = self.e.stall_factor * ideal
        cnt, above = d.ordered.above(limit)
        total = d.ordered.total()
        for v, _ in self.extra.values():
            total += v
            if v > limit:
                cnt += 1
                above += v
        stall = above - cnt * ideal
        productive = total - stall
        startup = d.compile_total + sum(c for _, c in self.extra.values())
        for k, att in enumerate(self.atts):
            if att.i1 == att.i0:
                continue
            _, _, su, pr, st = self._parts(k, att.i0)
            startup += su
            productive += pr
            stall += st
            last = att.i1 - 1
            if last != att.i0 and self.last_end[k] is None:
                productive += self._parts(k, last)[3]
        wasted = self._wasted()
        return {"productive": productive - wasted, "startup": startup, "stall": stall, "wasted": wasted}

    def _wasted(self) -> float:
        """The productive seconds of the steps a later attempt redid, and the largest productive
        step number: each redone range's first and last steps one by one, its interior from
        the net times kept in order (`_interior_productive`); kept for the next query while
        nothing came in and the attempts (but the running one's end), the activities and the
        ideal step time are the same (a restarted job's query with nothing new costs no pass
        over its steps)."""
        shape = tuple((a.start, None if a.ended_by == "running" else a.end, a.ended_by, a.i0, a.i1) for a in self.atts)
        key: tuple[object, ...] = (self.log, self.acts, self.e.timeline.events, self.ideal, self.e.stall_factor, shape)
        memo = self.e.wasted_memo
        if memo is not None and memo[0][0] is self.log and memo[0][1] is self.acts and memo[0][2:] == key[2:]:
            self.max_productive_step = memo[1][2]
            return memo[1][1]
        wasted = 0.0
        redone = self.redone()
        for k, lo, hi in redone:
            att = self.atts[k]
            a, b = max(lo, att.i0 + 1), min(hi, att.i1 - 1)  # its interior steps: eff or the ideal
            # the others (its first and last steps, a last step of known end) one by one
            apart = {i for i in (att.i0, att.i1 - 1) if lo <= i < hi and not a <= i < b}
            apart.update(i for i in self.extra if lo <= i < hi)
            for i in sorted(apart):
                wasted += self._parts(k, i)[3]
            if b > a:
                wasted += self._interior_productive(a, b)  # (`extra`'s last steps are never interior)
        self._set_max_productive(redone)
        self.e.wasted_memo = (key, (redone, wasted, self.max_productive_step))
        return wasted

    def _interior_productive(self, a: int, b: int) -> float:
        """The productive seconds of interior steps a..b-1 of one attempt: each its
        net time, or the ideal step time when that is a stall (`_parts`), summed from their net
        times in order (kept while nothing before them is derived again), so a restarted job's
        query costs no pass over the steps it redid."""
        d, log, epoch = self.d, self.log, self.e.derive_epoch
        memo = self.e.effs_memo
        got = memo.get((a, b))
        if got is not None and got[0] is log and got[1] == log.version and got[2] is d and got[3] == epoch:
            effs = got[4]
        else:
            times = log.times
            effs = SortedFloats(d.eff(times, i) for i in range(a, b))
            if len(memo) >= 8:
                memo.clear()
            memo[(a, b)] = (log, log.version, d, epoch, effs)
        ideal = self.ideal
        limit = self.e.stall_factor * ideal
        cnt, above = effs.above(limit)
        return (effs.total() - above) + cnt * ideal

    def _in_order(self, i0: int, i1: int) -> bool:
        """Whether the step numbers of indices i0..i1-1 never go back (one attempt's, where
        the host's go back across attempts): checked once, then for its new steps only."""
        log = self.log
        nums = log.nums
        memo = self.e.nums_memo
        got = memo.get(i0)
        if got is not None and (got[0] is not log or got[1] != log.version or got[2] > i1):
            got = None
        if got is not None and got[2] == i1:
            return got[3]
        if got is not None:  # the attempt grew: its new steps, from the last one checked
            ok = got[3]
            if ok:
                part = nums[got[2] - 1 : i1] if got[2] > i0 else nums[i0:i1]
                ok = all(map(operator.le, part[:-1], part[1:]))
        else:
            part = nums[i0:i1]
            ok = all(map(operator.le, part[:-1], part[1:]))
        if len(memo) >= 64:
            memo.clear()
        memo[i0] = (log, log.version, i1, ok)
        return ok

    def layout(self, a: float, b: float) -> dict[str, float]:
        out = {"productive": 0.0, "startup": 0.0, "stall": 0.0, "wasted": 0.0}
        redone = self.redone()
        wasted_idx: set[int] = set()
        for _, lo, hi in redone:
            wasted_idx.update(range(lo, hi))
        times = self.log.times
        for k, att in enumerate(self.atts):
            if att.i1 == att.i0 or att.end < a or att.start > b:
                continue
            lo = max(att.i0, bisect_right(times, a, att.i0, att.i1) - 1)
            hi = bisect_right(times, b, att.i0, att.i1)
            for i in range(lo, hi):
                parts = self._parts(k, i)
                if parts[1] <= a or parts[0] >= b:
                    continue
                for key, x, y in self.step_pieces(k, i, i in wasted_idx, parts):
                    lo_t, hi_t = max(x, a), min(y, b)
                    if hi_t > lo_t:
                        out[key] += hi_t - lo_t
        self._set_max_productive(redone)
        return out

    def step_pieces(
        self, k: int, i: int, wasted: bool, parts: tuple[float, float, float, float, float] | None = None
    ) -> Iterator[tuple[str, float, float]]:
        """Step i of attempt k placed in time (spec: Steps): its unclaimed gaps hold its
        startup first, then its productive (or wasted) time, then its stall, as
        ("startup" | "productive" | "wasted" | "stall", start, end) pieces."""
        s, e, su, pr, st = self._parts(k, i) if parts is None else parts
        gaps = self.acts.claims.gaps(s, e)
        gi, pos = 0, gaps[0][0] if gaps else s
        for key, amount in (("startup", su), ("wasted" if wasted else "productive", pr), ("stall", st)):
            while amount > 1e-15 and gi < len(gaps):
                gs, ge = gaps[gi]
                pos = max(pos, gs)
                take = min(amount, ge - pos)
                yield key, pos, pos + take
                amount -= take
                pos += take
                if pos >= ge - 1e-15:
                    gi += 1

    def _set_max_productive(self, redone: list[tuple[int, int, int]]) -> None:
        nums = self.log.nums
        cut: dict[int, list[tuple[int, int]]] = {}
        for k, lo, hi in redone:
            cut.setdefault(k, []).append((lo, hi))
        best: int | None = None
        for k, att in enumerate(self.atts):
            if att.i1 == att.i0:
                continue
            ranges = cut.get(k)
            ordered = self.log.monotonic or self._in_order(att.i0, att.i1)
            if not ranges:
                m = nums[att.i1 - 1] if ordered else max(nums[att.i0 : att.i1])
            elif ordered:  # the last step outside the redone ranges holds the largest
                i = att.i1 - 1
                for lo, hi in sorted(ranges, reverse=True):
                    if lo <= i < hi:
                        i = lo - 1
                if i < att.i0:
                    continue
                m = nums[i]
            else:
                bad: set[int] = set()
                for lo, hi in ranges:
                    bad.update(range(lo, hi))
                keep = [nums[i] for i in range(att.i0, att.i1) if i not in bad]
                if not keep:
                    continue
                m = max(keep)
            best = m if best is None else max(best, m)
        self.max_productive_step = best

    def last_step(self, b: float) -> int | None:
        times = self.log.times
        for att in reversed(self.atts):
            if att.i1 == att.i0:
                continue
            i = bisect_right(times, b, att.i0, att.i1) - 1
            if i >= att.i0:
                return int(self.log.nums[i])
        return None
