"""What the productivity figures need from a job's timeline, gathered in one place.

The only code that reads the engine's timeline shapes for productivity: the lead host's
attempts, step starts (by reference, never copied), step ends, checkpoint costs, and the
productivity events (step FLOPs, peak FLOP/s, submit times) of any host.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_left, bisect_right, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mlgoodput._quick_init import quick_init
from mlgoodput.accounting._timeline import OPEN_ENDED, HostLog, Rec, Timeline, attempt_spans, last_span
from mlgoodput.events import Kind


@quick_init
@dataclass(frozen=True, slots=True)
class AttemptFacts:
    """One attempt of the lead host: its span, how it ended, its step indices [i0, i1)."""

    start: float
    end: float
    ended_by: str  # "job_end", "restart", "died" or "running"
    i0: int
    i1: int
    restored_step: int | None  # the step its earliest checkpoint restore named


@quick_init
@dataclass(frozen=True, slots=True)
class JobFacts:
    """The inputs of `productivity()`, as of one query time."""

    q: float
    attempts: tuple[AttemptFacts, ...]
    step_times: Sequence[float]  # lead host step starts, sorted by time
    step_nums: Sequence[int]
    step_ends: Mapping[int, Sequence[float]]  # step number -> sorted step_end times
    saves: tuple[tuple[float, float], ...]  # (start, blocking seconds), lead host
    save_steps: tuple[tuple[float, int], ...]  # (start, step saved), lead host
    restores: tuple[tuple[float, float], ...]  # (start, seconds), lead host
    flops: tuple[tuple[float, float], ...]  # (time, FLOPs per step), any host, by time
    peaks: tuple[tuple[float, float, str], ...]  # (time, FLOP/s, source), any host
    submits: tuple[tuple[float, str], ...]  # (submit time, source), any host, by submit time
    empty: bool = field(default=False)
    #: the checkpoint figures of every save and restore at once (None: not kept), for a window
    #: that holds them all
    ckpt: CkptFigures | None = None

    def step_end(self, i: int, hi: float) -> float | None:
        """A recorded end of step i after its start and at or before `hi`."""
        cands = self.step_ends.get(int(self.step_nums[i]))
        if not cands:
            return None
        j = bisect_left(cands, self.step_times[i])
        return cands[j] if j < len(cands) and cands[j] <= hi else None


_PAIRS = {Kind.CKPT_SAVE_START: Kind.CKPT_SAVE_END, Kind.CKPT_RESTORE_START: Kind.CKPT_RESTORE_END}


@dataclass(frozen=True, slots=True)
class Scan:
    """What the non-step events say; recomputed only when they change (see `FactsCache`)."""

    flops: tuple[tuple[float, float], ...]
    peaks: tuple[tuple[float, float, str], ...]
    submits: tuple[tuple[float, str], ...]
    lead: int | None
    job_starts: tuple[float, ...]
    job_ends: tuple[float, ...]
    step_ends: dict[int, list[float]]
    saves: tuple[tuple[float, float], ...]
    save_steps: tuple[tuple[float, int], ...]
    restores: tuple[tuple[float, float], ...]
    restored: dict[int, int]  # attempt index -> restored step
    ckpt: CkptFigures | None = None


class FactsCache:
    """Keeps the last scan of a timeline's non-step events, so that a query with nothing
    new among them (the common case: only steps arrived) costs no pass over them, and one
    with new ones costs those (`Scanner`)."""

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.scan: Scan | None = None
        # (timeline, its event count, the latest non-step event) when `scan` was last found
        # current: the same timeline with no event since and q past that needs no check at all
        self.seen: tuple[Timeline, int, float] | None = None
        # (timeline, its other events, its hosts, the latest non-step event) when `scan` was last
        # found current for a query at or after that event: while only step starts of the same
        # hosts come in, it stays current for such a query, with no pass over the hosts
        self.quiet: tuple[Timeline, int, int, float] | None = None
        self.scanner = Scanner()
        # (scan, timeline, its event count, the attempts before the last, the last one's
        # start, first step and restored step) while the last has no end of its own: a query
        # with nothing new makes only the last attempt again (its end is the query time, or
        # when its writers went silent)
        self.head: tuple[Scan, Timeline, int, tuple[AttemptFacts, ...], float, int, int | None] | None = None


class Scanner:
    """`scan` kept up to date with each host's new non-step events, for query times at or
    after every event (a late event, a new lead host or a restart put before events already
    taken scans again from the start, and `rescans` counts it)."""

    def __init__(self) -> None:
        self.rescans = 0
        self.tl: Timeline | None = None
        self._clear()

    def _clear(self) -> None:
        self.at: dict[int, tuple[HostLog, int, int]] = {}  # host -> (log, events taken, late seen)
        self.flops: list[tuple[float, float]] = []
        self.peaks: list[tuple[float, float, str]] = []
        self.submits: list[tuple[float, str]] = []
        self.lead: int | None = None
        self.frontier = -math.inf  # the latest lead event taken
        self.js: list[float] = []  # the lead's job starts when its events were taken
        self.je: list[float] = []
        self.step_ends: dict[int, list[float]] = {}
        self.pending: dict[tuple[int, int | None], list[Rec]] = {}  # checkpoint starts waiting for their end
        self.last_end: dict[tuple[int, int | None], float] = {}
        self.saves: list[tuple[float, float]] = []
        self.save_steps: list[tuple[float, int]] = []
        self.restores: list[tuple[float, float]] = []
        self.restored: dict[int, tuple[float, int]] = {}
        self.ckpt: Ckpt | None = Ckpt()  # None once a checkpoint came out of order

    def scan(self, tl: Timeline, q: float) -> Scan:
        lead = tl.lead_host(q)
        if lead is None:
            return scan(tl, q)
        again = self.tl is not tl or self.lead != lead
        lead_log = tl.hosts[lead]
        js = sorted(set(lead_log.job_starts))
        if not again and js[: len(self.js)] != self.js:
            again = True  # a job start before others taken: attempts renumbered
        if not again and len(js) > len(self.js) and js[len(self.js)] < self.frontier:
            again = True
        for h, hlog in tl.hosts.items():
            got = self.at.get(h)
            if got is not None and (got[0] is not hlog or got[2] != len(hlog.late)):
                again = True
        if again:
            if self.tl is not None:
                self.rescans += 1
            self.tl = tl
            self._clear()
            self.lead = lead
        self.js = js
        for h, hlog in tl.hosts.items():
            got = self.at.get(h)
            start = 0 if got is None else got[1]
            others = hlog.others
            for i in range(start, len(others)):
                r = others[i]
                if h == lead:
                    self._lead_event(r)
                if r.value is None:
                    continue
                if r.kind == Kind.STEP_FLOPS:
                    insort(self.flops, (r.time, r.value))
                elif r.kind == Kind.PEAK_FLOPS:
                    insort(self.peaks, (r.time, r.value, r.name or "recorded"))
                elif r.kind == Kind.JOB_SUBMIT:
                    insort(self.submits, (r.value, r.name or "recorded"))
            self.at[h] = (hlog, len(others), len(hlog.late))
        return Scan(
            tuple(self.flops),
            tuple(self.peaks),
            tuple(self.submits),
            lead,
            tuple(js),
            tuple(self.je),
            self.step_ends,
            tuple(self.saves),
            tuple(self.save_steps),
            tuple(self.restores),
            {k: v[1] for k, v in self.restored.items()},
            None if self.ckpt is None else self.ckpt.figures(),
        )

    def _lead_event(self, r: Rec) -> None:
        self.frontier = r.time
        kind = r.kind
        if kind == Kind.JOB_END:
            insort(self.je, r.time)
        elif kind == Kind.STEP_END and r.step is not None:
            insort(self.step_ends.setdefault(r.step, []), r.time)
        elif kind in (Kind.CKPT_SAVE_END, Kind.CKPT_RESTORE_END):
            key = (int(kind), r.step)
            self.last_end[key] = r.time
            for st in self.pending.pop(key, ()):
                self._span(st, r.time - st.time)
        if kind in (Kind.CKPT_SAVE, Kind.CKPT_RESTORE) and r.value is not None:
            self._span(r, r.value)
        elif kind in _PAIRS:
            key = (int(_PAIRS[Kind(kind)]), r.step)
            if self.last_end.get(key) == r.time:  # an end at the same instant
                self._span(r, 0.0)
            else:
                self.pending.setdefault(key, []).append(r)

    def _span(self, r: Rec, dur: float) -> None:
        save = r.kind in (Kind.CKPT_SAVE, Kind.CKPT_SAVE_START)
        spans = self.saves if save else self.restores
        item = (r.time, dur)
        c = self.ckpt
        if c is not None:
            if spans and item < spans[-1]:
                self.ckpt = c = None  # (then `productivity` walks them, in their order)
            else:
                c.span(save, item, spans[-1] if spans else None, self.js)
        insort(spans, item)
        if r.step is None:
            return
        if save:
            pair = (r.time, r.step)
            if c is not None:
                if self.save_steps and pair < self.save_steps[-1]:
                    self.ckpt = None
                else:
                    c.step(pair, self.save_steps[-1] if self.save_steps else None, self.js)
            insort(self.save_steps, pair)
        else:
            k = bisect_right(self.js, r.time) - 1
            if k >= 0 and (k not in self.restored or r.time < self.restored[k][0]):
                self.restored[k] = (r.time, r.step)


class Ckpt:
    """The checkpoint figures of all saves and restores, kept as they come in time order: the
    sums added in the order `productivity` adds them (the same floats), the durations sorted."""

    __slots__ = ("gap_n", "gap_sum", "rd", "rd_sum", "sd", "sd_sum", "step_n", "step_sum")

    def __init__(self) -> None:
        self.sd: list[float] = []  # save durations, sorted
        self.sd_sum: float = 0
        self.rd: list[float] = []
        self.rd_sum: float = 0
        self.gap_sum: float = 0
        self.gap_n = 0
        self.step_sum = 0
        self.step_n = 0

    def figures(self) -> CkptFigures:
        return CkptFigures(
            len(self.sd),
            self.sd_sum,
            _p95(self.sd),
            len(self.rd),
            self.rd_sum,
            _p95(self.rd),
            self.gap_sum,
            self.gap_n,
            self.step_sum,
            self.step_n,
        )

    def span(self, save: bool, item: tuple[float, float], prev: tuple[float, float] | None, js: list[float]) -> None:
        t, d = item
        if save:
            self.sd_sum += d
            insort(self.sd, d)
            if prev is not None and bisect_right(js, prev[0]) == bisect_right(js, t):
                self.gap_sum += t - prev[0]
                self.gap_n += 1
        else:
            self.rd_sum += d
            insort(self.rd, d)

    def step(self, pair: tuple[float, int], prev: tuple[float, int] | None, js: list[float]) -> None:
        if prev is not None and bisect_right(js, prev[0]) == bisect_right(js, pair[0]) and pair[1] > prev[1]:
            self.step_sum += pair[1] - prev[1]
            self.step_n += 1


def _p95(xs: list[float]) -> float | None:
    """Nearest-rank 95th percentile of sorted xs (`_productivity.percentile`)."""
    if not xs:
        return None
    return xs[max(1, math.ceil(95 / 100.0 * len(xs))) - 1]


@dataclass(frozen=True, slots=True)
class CkptFigures:
    """`Ckpt` as of one scan: counts, sums (in time order) and p95s of save and restore
    durations; sum and count of the seconds and of the steps between saves of one attempt."""

    saves: int
    save_sum: float
    save_p95: float | None
    restores: int
    restore_sum: float
    restore_p95: float | None
    gap_sum: float
    gaps: int
    step_sum: int
    steps: int


def scan(tl: Timeline, q: float) -> Scan:
    """What the non-step events of `tl` up to `q` say (a `FactsCache` keeps the last one)."""
    flops: list[tuple[float, float]] = []
    peaks: list[tuple[float, float, str]] = []
    submits: list[tuple[float, str]] = []
    for hlog in tl.hosts.values():
        for r in hlog.others:
            if r.time > q or r.value is None:
                continue
            if r.kind == Kind.STEP_FLOPS:
                flops.append((r.time, r.value))
            elif r.kind == Kind.PEAK_FLOPS:
                peaks.append((r.time, r.value, r.name or "recorded"))
            elif r.kind == Kind.JOB_SUBMIT:
                submits.append((r.value, r.name or "recorded"))
    flops.sort()
    peaks.sort()
    submits.sort()
    lead = tl.lead_host(q)
    if lead is None:
        return Scan(tuple(flops), tuple(peaks), tuple(submits), None, (), (), {}, (), (), (), {})
    log = tl.hosts[lead]
    js = sorted({t for t in log.job_starts if t <= q})
    others = [r for r in log.others if r.time <= q]
    je = sorted(r.time for r in others if r.kind == Kind.JOB_END)
    restored: dict[int, tuple[float, int]] = {}
    saves: list[tuple[float, float]] = []
    save_steps: list[tuple[float, int]] = []
    restores: list[tuple[float, float]] = []
    ends: dict[tuple[int, int | None], list[float]] = {}
    step_ends: dict[int, list[float]] = {}
    for r in others:
        if r.kind in (Kind.CKPT_SAVE_END, Kind.CKPT_RESTORE_END):
            ends.setdefault((r.kind, r.step), []).append(r.time)
        elif r.kind == Kind.STEP_END and r.step is not None:
            step_ends.setdefault(r.step, []).append(r.time)
    for v in (*ends.values(), *step_ends.values()):
        v.sort()
    for r in others:
        spans: list[tuple[float, float]] | None = None
        dur: float | None = None
        if r.kind in (Kind.CKPT_SAVE, Kind.CKPT_RESTORE) and r.value is not None:
            dur = r.value
            spans = saves if r.kind == Kind.CKPT_SAVE else restores
        elif r.kind in _PAIRS:
            cands = ends.get((_PAIRS[Kind(r.kind)], r.step), [])
            j = bisect_left(cands, r.time)
            if j < len(cands):
                dur = cands[j] - r.time
                spans = saves if r.kind == Kind.CKPT_SAVE_START else restores
        if spans is None or dur is None:
            continue
        spans.append((r.time, dur))
        if spans is saves and r.step is not None:
            save_steps.append((r.time, r.step))
        if spans is restores and r.step is not None:
            k = bisect_right(js, r.time) - 1
            if k >= 0 and (k not in restored or r.time < restored[k][0]):
                restored[k] = (r.time, r.step)
    return Scan(
        tuple(flops),
        tuple(peaks),
        tuple(submits),
        lead,
        tuple(js),
        tuple(je),
        step_ends,
        tuple(sorted(saves)),
        tuple(sorted(save_steps)),
        tuple(sorted(restores)),
        {k: v[1] for k, v in restored.items()},
    )


_OTHERS, _JS, _TIME = (operator.attrgetter(a) for a in ("others", "job_starts", "time"))


def _latest_other(tl: Timeline) -> float:
    """The time of the latest non-step event of any host (-inf: none), a column at a time."""
    others = filter(None, map(_OTHERS, tl.hosts.values()))
    return max(map(_TIME, map(operator.itemgetter(-1), others)), default=-math.inf)


def facts_from_timeline(tl: Timeline, q: float, cache: FactsCache | None = None) -> JobFacts:
    """Gather the facts as of `q` (events after `q` are ignored)."""
    sc: Scan | None = None
    key: tuple[object, ...] | None = None
    if cache is not None:
        seen = cache.seen
        quiet = cache.quiet
        if seen is not None and seen[0] is tl and seen[1] == tl.events and q >= seen[2]:
            sc = cache.scan
        elif (
            quiet is not None
            and quiet[0] is tl
            and quiet[1] == tl.other_events
            and quiet[2] == len(tl.hosts)
            and q >= quiet[3]
        ):
            sc = cache.scan
            cache.seen = (tl, tl.events, quiet[3])
        else:
            latest = _latest_other(tl)
            if q >= latest and tl.lead_host(q) == (cache.scan.lead if cache.scan else None):
                # (a column at a time: thousands of hosts, every query)
                others = list(map(_OTHERS, tl.hosts.values()))
                key = tuple(
                    zip(tl.hosts, map(id, others), map(len, others), map(len, map(_JS, tl.hosts.values())), strict=True)
                )
                if key == cache.key:
                    sc = cache.scan
                    cache.seen = (tl, tl.events, latest)
                    cache.quiet = (tl, tl.other_events, len(tl.hosts), latest)
    if sc is None:
        latest = _latest_other(tl)
        sc = cache.scanner.scan(tl, q) if cache is not None and q >= latest else scan(tl, q)
        if cache is not None:
            cache.key, cache.scan, cache.seen = key, sc, None
            cache.quiet = None if key is None else (tl, tl.other_events, len(tl.hosts), latest)
    if sc.lead is None:
        return JobFacts(q, (), (), (), {}, (), (), (), sc.flops, sc.peaks, sc.submits, True)
    log = tl.hosts[sc.lead]
    js, je = sc.job_starts, sc.job_ends
    times, nums = log.times, log.nums
    head = cache.head if cache is not None else None
    if head is not None and head[0] is sc and head[1] is tl and head[2] == tl.events:
        last = AttemptFacts(*last_span(tl, times, head[4], head[5], q), head[6])
        return _facts(q, (*head[3], last), times, nums, sc)
    attempts = [AttemptFacts(*sp, sc.restored.get(k)) for k, sp in enumerate(attempt_spans(tl, js, je, times, q))]
    if cache is not None:
        cache.head = None
        if attempts and attempts[-1].ended_by in OPEN_ENDED:
            a = attempts[-1]
            cache.head = (sc, tl, tl.events, tuple(attempts[:-1]), a.start, a.i0, a.restored_step)
    return _facts(q, tuple(attempts), times, nums, sc)


def _facts(
    q: float, attempts: tuple[AttemptFacts, ...], times: Sequence[float], nums: Sequence[int], sc: Scan
) -> JobFacts:
    """The facts of the lead host's `attempts` at q, the rest as `sc` found it."""
    return JobFacts(
        q,
        attempts,
        times,
        nums,
        sc.step_ends,
        sc.saves,
        sc.save_steps,
        sc.restores,
        sc.flops,
        sc.peaks,
        sc.submits,
        ckpt=sc.ckpt,
    )
