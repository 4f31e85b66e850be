"""What the productivity figures need from a job's timeline, gathered in one place.

The only code that reads the engine's timeline shapes for productivity: the lead host's
attempts, step starts (by reference, never copied), step ends, checkpoint costs, and the
productivity events (step FLOPs, peak FLOP/s, submit times) of any host.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from mlgoodput.accounting._timeline import OPEN_ENDED, Timeline, last_attempt_end
from mlgoodput.events import Kind


@dataclass(frozen=True, slots=True)
class AttemptFacts:
    """One attempt of the lead host: its span, how it ended, its step indices [i0, i1)."""

    start: float
    end: float
    ended_by: str  # "job_end", "restart", "died" or "running"
    i0: int
    i1: int
    restored_step: int | None  # the step its earliest checkpoint restore named


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


class FactsCache:
    """Keeps the last scan of a timeline's non-step events, so that a query with nothing
    new among them (the common case: only steps arrived) costs no pass over them."""

    def __init__(self) -> None:
        self.key: tuple[object, ...] | None = None
        self.scan: Scan | None = None
        # (timeline, its event count, the latest non-step event) when `scan` was last found
        # current: the same timeline with no event since and q past that needs no check at all
        self.seen: tuple[Timeline, int, float] | None = None


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


def facts_from_timeline(tl: Timeline, q: float, cache: FactsCache | None = None) -> JobFacts:
    """Gather the facts as of `q` (events after `q` are ignored)."""
    sc: Scan | None = None
    key: tuple[object, ...] | None = None
    if cache is not None:
        seen = cache.seen
        if seen is not None and seen[0] is tl and seen[1] == tl.events and q >= seen[2]:
            sc = cache.scan
        else:
            latest = max((h.others[-1].time for h in tl.hosts.values() if h.others), default=-math.inf)
            if q >= latest and tl.lead_host(q) == (cache.scan.lead if cache.scan else None):
                key = tuple((h, id(v.others), len(v.others), len(v.job_starts)) for h, v in tl.hosts.items())
                if key == cache.key:
                    sc = cache.scan
                    cache.seen = (tl, tl.events, latest)
    if sc is None:
        sc = scan(tl, q)
        if cache is not None:
            cache.key, cache.scan, cache.seen = key, sc, None
    if sc.lead is None:
        return JobFacts(q, (), (), (), {}, (), (), (), sc.flops, sc.peaks, sc.submits, True)
    log = tl.hosts[sc.lead]
    js, je = sc.job_starts, sc.job_ends
    times, nums = log.times, log.nums
    attempts: list[AttemptFacts] = []
    for k, s in enumerate(js):
        nxt = js[k + 1] if k + 1 < len(js) else math.inf
        j = bisect_left(je, s)
        if j < len(je) and je[j] < nxt:
            end, how = je[j], "job_end"
        elif nxt < math.inf:
            end, how = nxt, "restart"
        else:
            end, how = last_attempt_end(tl, s, q)
        i0 = bisect_left(times, s)
        i1 = bisect_right(times, end) if how in OPEN_ENDED else bisect_left(times, end)
        attempts.append(AttemptFacts(s, end, how, i0, max(i0, i1), sc.restored.get(k)))
    return JobFacts(
        q,
        tuple(attempts),
        times,
        nums,
        sc.step_ends,
        sc.saves,
        sc.save_steps,
        sc.restores,
        sc.flops,
        sc.peaks,
        sc.submits,
    )
