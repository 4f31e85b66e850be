"""The accounting engine: a job's timeline in, a GoodputReport out, exactly as spec/accounting.md says.

Pure: no I/O and no clock. The expensive part, the net time of every step, is derived once
and extended incrementally: while new events only add to the tail of the job, a repeated
query touches only the new steps, and the ideal step time comes from a sorted structure
instead of a sort. Anything that reaches back in time rebuilds the derived state.
"""

from __future__ import annotations

import json
import math
import operator
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import repeat
from typing import cast

from mlgoodput.accounting import _fast
from mlgoodput.accounting._activities import ActivityBuilder, EventIndex
from mlgoodput.accounting._hoststats import HostSteps, StatColumns, Together, stats_as_of, update_all, update_columns
from mlgoodput.accounting._intervals import (
    Coverage,
    Intervals,
    clip,
    intersect,
    measure,
    subtract,
    union,
)
from mlgoodput.accounting._memo import PartitionMemo
from mlgoodput.accounting._model import (
    DURATIONS,
    ELASTIC,
    END_KINDS,
    HIGH,
    INF,
    LOW,
    PAIRS,
    Activities,
    Attempt,
    B,
    Derived,
    Touched,
)
from mlgoodput.accounting._query import Query, WastedMemo
from mlgoodput.accounting._report import (
    ALL_BUCKETS,
    PARTITION_BUCKETS,
    BadputType,
    GoodputReport,
    HostStepStats,
    SliceEfficiency,
)
from mlgoodput.accounting._sorted import SortedFloats
from mlgoodput.accounting._timeline import OPEN_ENDED, HostLog, Rec, Timeline, attempt_spans, last_span, status_word
from mlgoodput.events import Kind

_CHUNK = 1 << 20


class Engine:
    """Holds one job's timeline and answers reports at a query time."""

    def __init__(self, *, stall_factor: float = 3.0) -> None:
        if not stall_factor > 1:
            raise ValueError(f"stall_factor must be > 1, got {stall_factor!r}")
        self.stall_factor = float(stall_factor)
        self.timeline = Timeline()
        # The caches a query keeps for the next one. They are attributes, not private, because
        # a snapshot (`_snapshot`) saves them and primes a new engine with them.
        self.derived: Derived | None = None  # the last `derive` (steps' effective times)
        self._ends_cache: tuple[HostLog, int, dict[int, list[float]]] | None = None
        #: host -> its step-time statistics, kept up to date by each query (and by a snapshot)
        self.host_steps: dict[int, HostSteps] = {}
        self._together = Together()  # update_all's rows of the hosts (a cache)
        self._stats_cache: tuple[Timeline, int, tuple[HostStepStats, ...]] | None = None
        self._columns: StatColumns | None = None  # the cached statistics' columns, when made together
        # the timeline's hosts in order, their logs and HostSteps, and how many HostSteps there were
        self._hosts_kept: tuple[dict[int, HostLog] | None, list[HostLog], list[HostSteps], int, list[array[float]]] = (
            None,
            [],
            [],
            0,
            [],
        )
        # (timeline, its reshapes) at the last update of every host together (update_columns)
        self._stats_token: tuple[Timeline, int] | None = None
        # what the last query derived from the other (non-step) events, for a query that finds
        # nothing new: (log, len(log.others)) -> job ends; activities; the time partition
        self.job_ends_cache: tuple[HostLog, int, list[float]] | None = None
        self._starts_cache: tuple[list[float], int, list[float]] | None = None  # job starts, once each
        # (log, timeline.events, latest job start or end, the attempts before the last, the
        # last one's start and first step) while the last has no end of its own (`attempts`)
        self._atts_memo: tuple[HostLog, int, float, list[Attempt], float, int] | None = None
        # (log, timeline.events, derived, activities) of the last query that derived: the next
        # one, if nothing came in since, finds them as they are
        self._quiet: tuple[HostLog, int, Derived, Activities] | None = None
        self.wasted_memo: WastedMemo | None = None  # the redone steps' figures (Query._wasted)
        self.derive_epoch = 0  # moves whenever steps already derived are derived again
        self.nums_memo: dict[int, tuple[HostLog, int, int, bool]] = {}  # (Query._in_order)
        self.effs_memo: dict[tuple[int, int], tuple[HostLog, int, Derived, int, SortedFloats]] = {}  # (Query)
        self.activities_cache: tuple[object, float, Activities] | None = None
        self.partition_cache: (
            tuple[object, float, dict[object, float], float, Activities, tuple[float, float]] | None
        ) = None
        # kept across queries and extended with new events (see `fallbacks`)
        self._builder = ActivityBuilder()  # the lead host's activities
        self._index: EventIndex | None = None  # the lead host's job ends and step ends
        self._dver: int | None = None  # the lead host's HostLog.version when last derived
        # the earliest time changed since each user of the changes last looked: "derive" (the
        # steps' net times) and "part" (the partition's settled totals)
        self._pend = {"derive": INF, "part": INF}
        self._steps_back = 0  # derived again from a step on / all of them (`fallbacks`)
        self._steps_all = 0
        self._memo = PartitionMemo()

    @property
    def fallbacks(self) -> dict[str, int]:
        """How often a query went back instead of extending what it kept: "activities" (to the
        start of the earliest attempt a change touched), "steps" (the steps' net times from the
        earliest step a change reached), "steps_all" (all of them: the lead host's steps were
        rewritten, or it changed), "partition" (the settled totals, to before the change)."""
        return {
            "activities": self._builder.fallbacks,
            "steps": self._steps_back,
            "steps_all": self._steps_all,
            "partition": self._memo.fallbacks,
        }

    def _events(self, log: HostLog) -> EventIndex:
        """The lead host's job ends and step ends, up to date."""
        idx = self._index
        if idx is None or idx.log is not log:
            idx = self._index = EventIndex(log)
        return idx.update()

    def _changes(self, log: HostLog) -> None:
        """Pass the lead host's changes since the last query to each user of them."""
        t = min(log.take_change(), self._builder.take_change())
        for k, v in self._pend.items():
            self._pend[k] = min(v, t)

    # -- structure ---------------------------------------------------------------------
    def attempts(self, log: HostLog, q: float) -> list[Attempt]:
        m = self._atts_memo
        if m is not None and m[0] is log and m[1] == self.timeline.events and q >= m[2]:
            # nothing came in and q is past every job start and end: only the last attempt's
            # end moves (the query time, or when its writers went silent)
            return [*m[3], Attempt(*last_span(self.timeline, log.times, m[4], m[5], q))]
        starts = log.job_starts  # in order (insort), perhaps with repeats
        sc = self._starts_cache
        if sc is None or sc[0] is not starts or sc[1] != len(starts):
            sc = self._starts_cache = (starts, len(starts), sorted({t for t in starts if t == t}))  # (no NaN)
        js = sc[2][: bisect_right(sc[2], q)]
        c = self.job_ends_cache
        if c is None or c[0] is not log or c[1] != len(log.others):
            c = self.job_ends_cache = (log, len(log.others), self._events(log).job_ends)
        je = c[2][: bisect_right(c[2], q)]
        out = [Attempt(*sp) for sp in attempt_spans(self.timeline, js, je, log.times, q)]
        bound = max(c[2][-1] if c[2] else -INF, js[-1] if js else -INF)
        if out and out[-1].ended_by in OPEN_ENDED and len(js) == len(sc[2]) and q >= bound:
            self._atts_memo = (log, self.timeline.events, bound, out[:-1], out[-1].start, out[-1].i0)
        else:
            self._atts_memo = None
        return out

    def activities(self, log: HostLog, atts: list[Attempt]) -> Activities:
        """The activity intervals of the lead host; reused while nothing new came in and the
        running attempt's moving end reaches nothing (no open activity, nothing clipped)."""
        last = atts[-1]
        running = last.ended_by == "running"
        key = (
            id(log),
            len(log.others),
            tuple((a.start, a.end, a.ended_by) for a in atts[:-1]),
            (last.start, last.ended_by, None if running else last.end),
        )
        c = self.activities_cache
        if c is not None and c[0] == key and (not running or last.end > c[1]):
            return c[2]  # an ended attempt's end is in the key; a running one's must pass the horizon
        got = self._builder.update(log, atts)
        if got is None:  # the running attempt ends at its latest event: derived anew, not kept
            for k, v in self._pend.items():  # (it leaves out only what starts at that end)
                self._pend[k] = min(v, last.end)
        acts = self._activities(log, atts) if got is None else got
        # the latest time the result depends on; inf when the running end cuts something
        horizon = log.others[-1].time if log.others else -INF
        for spans in acts.buckets.values():
            if spans:
                horizon = max(horizon, spans[-1][1])
        if running and (horizon >= last.end or any(t >= last.start for t in acts.open_starts)):
            horizon = INF
        self.activities_cache = (key, horizon, acts)
        return acts

    def _activities(self, log: HostLog, atts: list[Attempt]) -> Activities:
        acts = Activities()
        raw: dict[object, list[tuple[float, float]]] = {}
        starts_at = [a.start for a in atts]
        by_attempt: dict[int, list[Rec]] = {}
        for r in log.others:
            k = bisect_right(starts_at, r.time) - 1
            if k < 0 or r.time > atts[k].end or (r.time == atts[k].end and r.kind not in END_KINDS):
                continue
            by_attempt.setdefault(k, []).append(r)
        for k, recs in by_attempt.items():
            att = atts[k]
            ends: dict[tuple[int, str | None], list[float]] = {}
            for r in recs:
                if r.kind in END_KINDS:
                    ends.setdefault((r.kind, r.name), []).append(r.time)
            for v in ends.values():
                v.sort()
            for r in recs:
                kind = r.kind
                if kind in PAIRS:
                    end_kind, key = PAIRS[kind]
                    name = r.name if key in ("custom", "elastic") else None
                    cands = ends.get((end_kind, name), [])
                    j = bisect_left(cands, r.time)  # the next matching end
                    e = cands[j] if j < len(cands) else None
                    if e is None:
                        e = att.end
                        acts.open_starts.append(r.time)
                    if key == "custom":
                        key = ("custom", (r.name or "unknown").upper())
                    elif key == "elastic":
                        key = ELASTIC.get(r.name or "", B.ELASTIC_SLICE_DOWN)
                    raw.setdefault(key, []).append((r.time, min(e, att.end)))
                    if kind == Kind.CKPT_RESTORE_START and r.step is not None:
                        self._note_restore(acts, k, r)
                elif kind in DURATIONS and r.value is not None:
                    key = DURATIONS[kind]
                    raw.setdefault(key, []).append((r.time, min(r.time + r.value, att.end)))
                    if kind == Kind.CKPT_RESTORE and r.step is not None:
                        self._note_restore(acts, k, r)
                elif kind == Kind.SLICE_COUNTS and r.attrs is not None:
                    d = json.loads(r.attrs)
                    try:
                        acts.slices.append((r.time, float(d["active"]), float(d["total"]), float(d["available"])))
                    except (KeyError, TypeError, ValueError):
                        pass
        acts.buckets = {key: union(v) for key, v in raw.items()}
        claim: list[tuple[float, float]] = []
        for bucket, spans in acts.buckets.items():
            if bucket not in ("dl", "compile"):
                claim.extend(spans)
        acts.claims = Coverage(union(claim))
        acts.compile = Coverage(acts.buckets.get("compile", []))
        acts.slices.sort()
        return acts

    @staticmethod
    def _note_restore(acts: Activities, k: int, r: Rec) -> None:
        """The earliest restore of an attempt names the step it restored."""
        cand = (r.time, int(r.step or 0))
        if k not in acts.first_restores or cand < acts.first_restores[k]:
            acts.first_restores[k] = cand
            acts.restore_step[k] = cand[1]

    # -- steps -------------------------------------------------------------------------
    def step_end(self, log: HostLog, i: int, hi: float) -> float | None:
        """A recorded step_end for step i between its start and `hi`."""
        ends = self.step_ends(log)
        if not ends:  # most jobs record none: no step number looked up
            return None
        cands = ends.get(log.nums[i])
        if not cands:
            return None
        s = log.times[i]
        j = bisect_left(cands, s)
        if j < len(cands) and cands[j] <= hi:
            return cands[j]
        return None

    def step_ends(self, log: HostLog) -> dict[int, list[float]]:
        """Step number -> the times of its recorded step_end events, in order (cached per log)."""
        cache = self._ends_cache
        if cache is not None and cache[0] is log and cache[1] == len(log.others):
            return cache[2]
        idx = self._index
        if idx is not None and idx.log is log:
            ends = idx.update().step_ends
        else:  # not the lead host's (kept for the lead only)
            ends = {}
            for r in log.others:
                if r.kind == Kind.STEP_END and r.step is not None:
                    ends.setdefault(r.step, []).append(r.time)
            for v in ends.values():
                v.sort()
        self._ends_cache = (log, len(log.others), ends)
        return ends

    def _touched_from(self, log: HostLog, acts: Activities, lo: int) -> Touched:
        """`touched`, for the steps from index lo on only: what reaches past that step's start."""
        times = log.times
        if lo >= len(times):
            return Touched([])
        t0 = times[lo]
        idx: set[int] = set()
        for cov in (acts.claims, acts.compile):
            starts, ends = cov.starts, cov.ends
            for j in range(bisect_right(ends, t0), len(ends)):
                first = max(0, bisect_right(times, starts[j]) - 1)
                idx.update(range(max(first, lo), bisect_left(times, ends[j])))
        ev = self._index
        if ev is not None and ev.log is log:
            se = ev.update().step_end_times
            for t in se[bisect_left(se, t0) :]:
                i = bisect_right(times, t) - 1
                idx.update(j for j in (i - 1, i) if j >= lo)
        else:
            for ends_ in self.step_ends(log).values():
                for t in ends_:
                    if t >= t0:
                        i = bisect_right(times, t) - 1
                        idx.update(j for j in (i - 1, i) if j >= lo)
        return Touched(sorted(idx))

    def net_time(self, acts: Activities, s: float, e: float) -> tuple[float, float]:
        """(net, measured compile) of a step interval."""
        if e <= s:
            return 0.0, 0.0
        net = (e - s) - acts.claims.covered(s, e)
        comp = 0.0
        if acts.compile and acts.compile.covered(s, e) > 0:
            for gs, ge in acts.claims.gaps(s, e):
                comp += acts.compile.covered(gs, ge)
        return net, comp

    def touched(self, log: HostLog, acts: Activities) -> Touched:
        """Indices of steps that a claim, a measured compile or a step_end reaches into."""
        times = log.times
        idx: set[int] = set()
        for cov in (acts.claims, acts.compile):
            for cs, ce in zip(cov.starts, cov.ends, strict=True):
                first = max(0, bisect_right(times, cs) - 1)
                last = bisect_left(times, ce)
                idx.update(range(first, last))
        for ends in self.step_ends(log).values():
            for t in ends:
                i = bisect_right(times, t) - 1  # the step it ends, or (if late) the one after
                idx.update(j for j in (i - 1, i) if j >= 0)
        return Touched(sorted(idx))

    def derive(self, log: HostLog, atts: list[Attempt], acts: Activities, keep: bool = True) -> Derived:
        """Every step's effective time and compile share, updated from the last derivation where
        only new steps came (kept for the next call). A change that reaches back to a derived
        step derives again from that step on (from the start when the lead host's steps were
        rewritten, or a restart was put between steps seen). `keep` False: derived anew, for
        this call only (a query time before the lead host's latest event)."""
        d = self.derived if keep else None
        n = len(log.times)
        tl = self.timeline
        times = log.times
        change = self._pend["derive"] if keep else -INF
        if keep:
            self._pend["derive"] = INF
        if d is not None and (d.host != log.host or n < d.n or (self._dver is not None and self._dver != log.version)):
            self._steps_all += 1
            self.derive_epoch += 1
            d = None
        elif d is not None and change <= d.frontier:
            i = max(0, bisect_right(times, change) - 2)  # the first step a change at `change` reaches
            if 4 * (d.n - i) > d.n + 4 * _CHUNK:  # most of the job: cheaper anew
                self._steps_all += 1
                self.derive_epoch += 1
                d = None
            else:
                self._steps_back += 1
                self.derive_epoch += 1
                self._underive(d, log, atts, i)
        if d is None:
            d = Derived(log.host, 0, -INF, {}, {}, SortedFloats(), 0.0, False)
        start = max(0, d.n - 1)
        new_vals = array("d")
        touched: Touched | None = None
        for a in atts:
            lo, hi = max(a.i0 + 1, start), a.i1 - 1  # interior steps of this attempt
            if hi <= lo:
                continue
            if touched is None:
                touched = self._touched_from(log, acts, start)
            for c0 in range(lo, hi, _CHUNK):  # in slices, so no job-sized list of floats
                c1 = min(hi, c0 + _CHUNK)
                # most steps: net time is simply the gap to the next start (C-level map)
                raw = _fast.gaps(times, c0, c1) or list(map(operator.sub, times[c0 + 1 : c1 + 1], times[c0:c1]))
                for i in touched.range(c0, c1):
                    end = self.step_end(log, i, times[i + 1]) or times[i + 1]
                    net, comp = self.net_time(acts, times[i], end)
                    raw[i - c0] = d.exc[i] = net - comp
                    if comp:
                        d.compile[i] = comp
                        d.compile_total += comp
                new_vals.extend(raw)
        d.ordered.extend(new_vals)
        d.n = n
        d.frontier = times[n - 1] if n else -INF
        d.open_before = any(t < d.frontier for t in acts.open_starts)
        if keep:
            tl.earliest_change = INF
            self.derived = d
            self._dver = log.version
        return d

    @staticmethod
    def _underive(d: Derived, log: HostLog, atts: list[Attempt], i: int) -> None:
        """Take the derived steps from index i on out of `d` (their net times computed from the
        same step starts: the steps did not change), so that they are derived again."""
        times = log.times
        ordered, exc, comp = d.ordered, d.exc, d.compile
        upto = d.n - 1  # derived: interior steps before the last one examined
        dropped = False
        for a in atts:
            for j in range(max(a.i0 + 1, i), min(a.i1 - 1, upto)):
                v = exc.pop(j, None)
                ordered.remove(times[j + 1] - times[j] if v is None else v)
                if comp.pop(j, None) is not None:
                    dropped = True
        if dropped:
            d.compile_total = sum(comp.values(), 0.0)  # in step order, as it was added
        d.n = min(d.n, i + 1)
        d.frontier = times[d.n - 1] if d.n else -INF

    def _derived(self, log: HostLog, atts: list[Attempt], q: float) -> tuple[Activities, Derived]:
        """The activities and derived steps of the lead host as of q: extended from the last
        query's when q is at or after its latest event (the usual: a query of now), else
        derived anew for this query alone."""
        latest = max(log.times[-1] if log.times else -INF, log.others[-1].time if log.others else -INF)
        if q < latest:
            acts = self._activities(log, atts)
            return acts, self.derive(log, atts, acts, keep=False)
        quiet = self._quiet
        if (
            quiet is not None
            and quiet[0] is log
            and quiet[1] == self.timeline.events
            and quiet[2] is self.derived
            and self._dver == log.version
        ):
            acts = self.activities(log, atts)  # (its own check: the attempts' ends, the horizon)
            if acts is quiet[3]:
                return acts, quiet[2]  # nothing came in: no job end, change or step to take
        self._events(log)
        acts = self.activities(log, atts)
        self._changes(log)
        d = self.derive(log, atts, acts)
        self._quiet = (log, self.timeline.events, d, acts)
        return acts, d

    def query(
        self, q: float, start: float | None, end: float | None, configured_ideal: float | None
    ) -> tuple[Query, float, float] | None:
        """One query's working state as of q for the window [start, end] clamped to the job
        (its ideal step time and infrastructure gaps computed), or None before any job start."""
        tl = self.timeline
        lead = tl.lead_host(q)
        if lead is None:
            return None
        log = tl.hosts[lead]
        atts = self.attempts(log, q)
        acts, d = self._derived(log, atts, q)
        w0, w1 = atts[0].start, atts[-1].end
        a = w0 if start is None else max(start, w0)
        b = max(a, w1 if end is None else min(end, w1))
        ctx = Query(self, log, atts, acts, d, q, configured_ideal)
        ctx.compute_ideal(None if b >= w1 else b)
        ctx.compute_infra()
        return ctx, a, b

    # -- the report --------------------------------------------------------------------
    def report(
        self,
        job_name: str,
        logger_name: str,
        q: float,
        start: float | None = None,
        end: float | None = None,
        configured_ideal: float | None = None,
        *,
        force_layout: bool = False,
    ) -> GoodputReport:
        tl = self.timeline
        found = self.query(q, start, end, configured_ideal)
        if found is None:
            return _empty(job_name, logger_name, q if start is None else start, q)
        ctx, a, b = found
        atts, acts = ctx.atts, ctx.acts
        whole = a <= atts[0].start and b >= atts[-1].end and not force_layout
        res, overlapped = self._partition(acts, ctx, a, b)
        parts = ctx.aggregate() if whole else ctx.layout(a, b)
        total = b - a
        productive = parts["productive"]
        # every partition bucket, in the order of ALL_BUCKETS, 0 unless claimed or computed
        badput: dict[BadputType, object] = dict.fromkeys(PARTITION_BUCKETS, 0.0)
        custom: dict[str, float] = {}
        others = False  # a claimed bucket outside the partition's (then put in order below)
        for rkey, v in res.items():
            if isinstance(rkey, tuple):
                custom[str(rkey[1])] = custom.get(str(rkey[1]), 0.0) + v
            elif isinstance(rkey, BadputType):
                others = others or rkey not in badput
                badput[rkey] = v
        badput[B.PROGRAM_STARTUP] = parts["startup"]
        badput[B.STALL] = parts["stall"]
        badput[B.WASTED_PROGRESS_FROM_DISRUPTION] = parts["wasted"]
        badput[B.CUSTOM_BADPUT_EVENTS] = custom
        accounted = productive + sum(res.values()) + parts["startup"] + parts["stall"] + parts["wasted"]
        badput[B.OTHER] = total - accounted
        ordered = {bk: badput[bk] for bk in ALL_BUCKETS if bk in badput} if others else badput
        return GoodputReport(
            job_name=job_name,
            logger_name=logger_name,
            start=a,
            end=b,
            total_s=total,
            productive_s=productive,
            badput_s=ordered,
            overlapped_s={B.DATA_LOADING_ASYNC: overlapped},
            disruptions=sum(1 for att in atts[1:] if a < att.start <= b) if len(atts) > 1 else 0,
            last_step=ctx.last_step(b),
            max_productive_step=ctx.max_productive_step,
            ideal_step_time_s=ctx.ideal,
            slice_efficiency=_slices(acts.slices, a, b),
            hosts=self.host_stats(q) if len(tl.hosts) > 1 else (),
            status=status_word(tl, atts[-1].ended_by, q),
            stops=ctx.stops,
        )

    def _partition(self, acts: Activities, ctx: Query, a: float, b: float) -> tuple[dict[object, float], float]:
        """Seconds of each claimed bucket in [a, b] by priority, and overlapped data loading.

        Reused while the activities, the infrastructure gaps and the steps are the same and
        the window's moving end lies beyond every interval (a query that finds nothing new).
        """
        steps_union = ctx.steps_union()
        su_end = steps_union[-1][1] if steps_union else -INF
        key = (a, tuple(ctx.infra), tuple(steps_union[:-1]), steps_union[-1][0] if steps_union else None)
        c = self.partition_cache
        if c is not None and c[4] is acts and c[0] == key and min(b, su_end) > c[1]:
            return c[2], c[3]
        log = ctx.log
        change = self._pend["part"]
        self._pend["part"] = INF
        latest = max(log.times[-1] if log.times else -INF, log.others[-1].time if log.others else -INF)
        if a <= ctx.atts[0].start and b >= ctx.atts[-1].end and ctx.q >= latest and not self.step_ends(log):
            # the whole job as of now: the settled totals and what came after them
            res, overlapped = self._memo.claimed(acts, log.host, a, b, latest, change, ctx.infra, steps_union)
        else:
            res = {}
            for bucket, u in self.claimed(acts, ctx, a, b, steps_union):
                res[bucket] = res.get(bucket, 0.0) + measure(u)
            dl = acts.buckets.get("dl", [])
            overlapped = measure(intersect(clip(dl, a, b), steps_union))
        horizon = max((spans[-1][1] for spans in acts.buckets.values() if spans), default=-INF)
        if ctx.infra:
            horizon = max(horizon, ctx.infra[-1][1])
        horizon = horizon if min(b, su_end) > horizon else INF
        self.partition_cache = (key, horizon, res, overlapped, acts, (b, su_end))
        return res, overlapped

    @staticmethod
    def claimed(
        acts: Activities, ctx: Query, a: float, b: float, steps_union: Intervals | None = None
    ) -> list[tuple[object, Intervals]]:
        """Each claimed bucket's own time in [a, b], in priority order (spec: "Activities and
        their priority"): an instant goes to the first bucket that covers it, so the lists are
        disjoint. Steps are laid out in what is left (`Query.step_pieces`)."""
        out: list[tuple[object, Intervals]] = []
        covered: Intervals = []

        def take(bucket: object, xs: Intervals) -> None:
            nonlocal covered
            u = subtract(clip(xs, a, b), covered)
            out.append((bucket, u))
            if u:
                covered = union(covered + u)

        take(B.INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION, ctx.infra)
        for high in HIGH:
            take(high, acts.buckets.get(high, []))
        customs = sorted((k for k in acts.buckets if isinstance(k, tuple)), key=lambda k: str(k[1]))
        for ckey in customs:
            take(ckey, acts.buckets[ckey])
        su = ctx.steps_union() if steps_union is None else steps_union
        take(B.DATA_LOADING_SYNC, subtract(acts.buckets.get("dl", []), su))
        for low in LOW:
            take(low, acts.buckets.get(low, []))
        return out

    def step_deviation(self, q: float, configured_ideal: float | None, last_n: int | None = None) -> dict[int, float]:
        """Step number -> net time minus the ideal step time, for the lead host's regular steps
        (only the `last_n` latest ones when given: a cost of last_n, not of the job's length)."""
        lead = self.timeline.lead_host(q)
        if lead is None:
            return {}
        log = self.timeline.hosts[lead]
        atts = self.attempts(log, q)
        acts, d = self._derived(log, atts, q)
        ctx = Query(self, log, atts, acts, d, q, configured_ideal)
        ctx.compute_ideal(None)
        ideal = ctx.ideal
        out: dict[int, float] = {}
        nums = log.nums
        regular: list[int] = []  # indices, latest first
        limit = math.inf if last_n is None else last_n
        for att in reversed(atts):
            if len(regular) >= limit:
                break
            if att.i1 - 1 in ctx.extra:
                regular.append(att.i1 - 1)
            for i in range(max(att.i0 + 1, att.i1 - 1) - 1, att.i0, -1):
                if len(regular) >= limit:
                    break
                regular.append(i)
        for i in reversed(regular):
            if i in ctx.extra:
                eff, comp = ctx.extra[i]
                out[int(nums[i])] = eff + comp - ideal
            else:
                out[int(nums[i])] = d.eff(log.times, i) + d.compile.get(i, 0.0) - ideal
        return out

    def host_stats(self, q: float) -> tuple[HostStepStats, ...]:
        """Step statistics of every host with two steps or more (incremental per host; kept
        whole while no event comes in and q is past every step)."""
        tl = self.timeline
        c = self._stats_cache
        if c is not None and c[0] is tl and c[1] == tl.events and q >= tl.max_time:
            return c[2]
        self._columns = None
        res = self._host_stats_columns(q)
        if res is None:
            res = self._host_stats_rows(q)
        self._stats_cache = (tl, tl.events, res) if q >= tl.max_time else None
        return res

    def host_stat_columns(self, q: float) -> StatColumns | tuple[HostStepStats, ...]:
        """`host_stats(q)`, as columns beside the rows when the hosts were updated together
        (the usual at every upload), else the rows alone."""
        rows = self.host_stats(q)
        c = self._columns
        return c if c is not None and c.rows is rows else rows

    def stat_columns(self, rows: Sequence[HostStepStats]) -> StatColumns | None:
        """The columns of `rows`, if they are what the last `host_stats` gave (else None)."""
        c = self._columns
        return c if c is not None and c.rows is rows else None

    def _host_stats_columns(self, q: float) -> tuple[HostStepStats, ...] | None:
        """`host_stats` when every host holds two steps or more and q is past all of them (the
        usual at every upload): the hosts read and updated a column at a time (thousands of
        hosts, no Python step a host); None, nothing done, otherwise."""
        tl = self.timeline
        logs_of = tl.hosts
        hosts = self.host_steps
        kept = self._hosts_kept
        # only steps appended after each host's last since the last update of these hosts: the
        # same hosts, logs and step-start arrays (grown in place, two steps or more each)
        appended = self._stats_token == (tl, tl.reshapes)
        if appended:
            logs, hss, times = kept[1], kept[2], kept[4]
        else:
            if kept[0] is logs_of and len(kept[1]) == len(logs_of) and len(hosts) == kept[3]:
                logs, hss = kept[1], kept[2]  # (hosts are only ever added: the same hosts in the same order)
            else:
                keys = sorted(logs_of)
                logs = list(map(logs_of.__getitem__, keys))
                hss = [hosts.get(h) or hosts.setdefault(h, HostSteps()) for h in keys]
            times = list(map(_TIMES, logs))
            self._hosts_kept = (logs_of, logs, hss, len(hosts), times)
            if not times or min(map(len, times)) < 2:
                return None
        # (every step start is at or before the timeline's latest time)
        if q < tl.max_time and any(map(operator.lt, repeat(q), map(_LAST, times))):
            return None
        tg = self._together
        got = update_columns(hss, logs, tg, times, appended)
        self._stats_token = (tl, tl.reshapes)
        if any(map(operator.is_, got, repeat(None))):
            return tuple(st for st in got if st is not None)
        res = tuple(cast("list[HostStepStats]", got))
        c = tg.columns
        if c is not None and c.rows is got:
            self._columns = StatColumns(res, c.hosts, c.steps, c.median, c.p90, c.max, c.arrays)
        return res

    def _host_stats_rows(self, q: float) -> tuple[HostStepStats, ...]:
        """`host_stats` host by host: hosts with fewer than two steps, a q inside the steps."""
        self._stats_token = None  # (hosts updated here: the next update reads every host again)
        out: list[HostStepStats | None] = []
        kept: list[tuple[HostSteps, HostLog]] = []  # updated together (update_all)
        at: list[int] = []
        hosts = self.host_steps
        for h, log in sorted(self.timeline.hosts.items()):
            if len(log.times) < 2:
                continue
            if q < log.times[-1]:
                out.append(stats_as_of(log, q))
            else:
                hs = hosts.get(h)
                if hs is None:
                    hs = hosts[h] = HostSteps()
                at.append(len(out))
                out.append(None)
                kept.append((hs, log))
        for i, st in zip(at, update_all(kept, self._together), strict=True):
            out[i] = st
        return tuple(st for st in out if st is not None)


_TIMES, _LAST = operator.attrgetter("times"), operator.itemgetter(-1)  # (host_stats, a column at a time)


def _slices(slices: list[tuple[float, float, float, float]], a: float, b: float) -> SliceEfficiency | None:
    if not slices:
        return None
    w = step_w = avail_w = 0.0
    for j, (t, active, total, avail) in enumerate(slices):
        t_next = slices[j + 1][0] if j + 1 < len(slices) else b
        lo, hi = max(t, a), min(t_next, b)
        if hi <= lo or total <= 0:
            continue
        w += hi - lo
        step_w += (hi - lo) * active / total
        avail_w += (hi - lo) * avail / total
    if w <= 0:
        last = [s for s in slices if s[0] <= b]
        if not last or last[-1][2] <= 0:
            return None
        _, active, total, avail = last[-1]
        return SliceEfficiency(100.0 * active / total, 100.0 * avail / total)
    return SliceEfficiency(100.0 * step_w / w, 100.0 * avail_w / w)


def _empty(job: str, logger: str, a: float, b: float) -> GoodputReport:
    badput: dict[BadputType, object] = {
        bk: ({} if bk is B.CUSTOM_BADPUT_EVENTS else 0.0) for bk in BadputType if bk is not B.DATA_LOADING_ASYNC
    }
    return GoodputReport(
        job_name=job,
        logger_name=logger,
        start=a,
        end=b,
        total_s=0.0,
        productive_s=0.0,
        badput_s=badput,
        overlapped_s={B.DATA_LOADING_ASYNC: 0.0},
        disruptions=0,
        last_step=None,
        max_productive_step=None,
        ideal_step_time_s=0.0,
        status="empty",
    )
