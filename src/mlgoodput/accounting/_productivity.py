"""Productivity figures: program goodput and MFU, scheduling goodput, ML Productivity Goodput,
ETTR and the reliability figures, as docs/accounting.md ("Productivity") defines them. Pure.

Fed by the same events as the goodput report (through `JobFacts`) and by the report itself
(productive time, the badput buckets, the ideal step time), never by an exporter or a page.
"""

from __future__ import annotations

import itertools
import math
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Sequence

from mlgoodput.accounting._facts import AttemptFacts, JobFacts
from mlgoodput.accounting._figures import AttemptQueue, CostStats, DisruptionCost, Productivity
from mlgoodput.accounting._report import BadputType, GoodputReport

B = BadputType


#: The productivity keys that a report's JSON carries at its top level.
TOP_KEYS = ("mfu", "program_goodput", "scheduling_goodput", "ml_productivity_goodput", "ettr", "mtbi_s", "mttr_s")


def percentile(xs: Sequence[float], p: float) -> float | None:
    """Nearest-rank percentile: the smallest value with at least p% of values at or below it."""
    if not xs:
        return None
    ys = sorted(xs)
    k = max(1, math.ceil(p / 100.0 * len(ys)))
    return ys[k - 1]


#: The figures of no saves (or restores): one frozen value, shared.
_NO_COST = CostStats(0, None, None)


def cost_stats(spans: Sequence[tuple[float, float]], a: float, b: float) -> CostStats:
    ds = [d for t, d in spans if a <= t <= b]
    if not ds:
        return _NO_COST
    return CostStats(len(ds), sum(ds) / len(ds), percentile(ds, 95))


def _div(x: float | None, y: float | None) -> float | None:
    if x is None or y is None or y <= 0:
        return None
    return x / y


# -- steps: executed, redone, FLOPs -----------------------------------------------------------
def _redone_ranges(f: JobFacts) -> list[tuple[int, int]]:
    """Index ranges of steps whose progress a later attempt redid (spec: wasted progress)."""
    nums = f.step_nums
    out: list[tuple[int, int]] = []
    prev: AttemptFacts | None = None
    for att in f.attempts:
        if att.i1 == att.i0:
            continue
        if prev is not None:
            if att.restored_step is not None:
                cut, strict = att.restored_step, True  # steps numbered > restored are lost
            else:
                cut, strict = int(nums[att.i0]), False  # steps numbered >= the new first step
            lo, hi = prev.i0, prev.i1
            if _sorted(nums, lo, hi):
                j = bisect_right(nums, cut, lo, hi) if strict else bisect_left(nums, cut, lo, hi)
                if j < hi:
                    out.append((j, hi))
            else:
                for i in range(lo, hi):
                    if (nums[i] > cut) if strict else (nums[i] >= cut):
                        out.append((i, i + 1))
        prev = att
    return out


_SORTED_CACHE: dict[tuple[int, int, int, float], bool] = {}


def _sorted(nums: Sequence[int], lo: int, hi: int) -> bool:
    """Whether nums[lo:hi] never decreases; remembered (an ended attempt does not change)."""
    key = (id(nums), lo, hi, float(nums[hi - 1]))
    hit = _SORTED_CACHE.get(key)
    if hit is None:
        part = nums[lo:hi]  # one slice (step numbers may be runs, not an array): a C-level pass
        hit = all(map(operator.le, part[:-1], part[1:]))
        if len(_SORTED_CACHE) > 4096:
            _SORTED_CACHE.clear()
        _SORTED_CACHE[key] = hit
    return hit


def _flops_at(flops: Sequence[tuple[float, float]], t: float) -> float | None:
    """FLOPs per step in effect at t: the latest record at or before t, else the first one."""
    if not flops:
        return None
    j = bisect_right(flops, (t, math.inf)) - 1
    return flops[max(j, 0)][1]


def _flops_sum(f: JobFacts, lo: int, hi: int, a: float, b: float) -> tuple[int, float]:
    """(steps, FLOPs) of the step indices in [lo, hi) whose start lies in [a, b)."""
    times = f.step_times
    i0 = bisect_left(times, a, lo, hi)
    i1 = bisect_left(times, b, lo, hi)
    if i1 <= i0:
        return 0, 0.0
    n = i1 - i0
    fl = f.flops
    if not fl:
        return n, 0.0
    total = 0.0
    # segments of constant FLOPs: the first value also covers the steps before it
    cuts = [t for t, _ in fl[1:]]
    vals = [v for _, v in fl]
    cur = i0
    for k, cut in enumerate(cuts):
        nxt = bisect_left(times, cut, cur, i1)
        total += (nxt - cur) * vals[k]
        cur = nxt
    total += (i1 - cur) * vals[-1]
    return n, total


def _executed_hi(f: JobFacts, att: AttemptFacts) -> int:
    """The end of the executed steps of an attempt: all but a step still running at q."""
    if att.ended_by == "running" and att.i1 > att.i0:
        last = att.i1 - 1
        if not f.step_ends or f.step_end(last, f.q) is None:
            return last
    return att.i1


# -- reliability ------------------------------------------------------------------------------
def _first_productive(f: JobFacts, att: AttemptFacts, ideal: float) -> float | None:
    """The first instant of productive time of an attempt (its first step's unclaimed time is
    program startup first, then productive): end of the first step minus one ideal step."""
    if att.i1 == att.i0:
        return None
    times = f.step_times
    s1 = times[att.i0]
    ends = f.step_ends  # most jobs record no step ends: then none is looked up
    if att.i1 - att.i0 >= 2:
        e1 = (f.step_end(att.i0, times[att.i0 + 1]) if ends else None) or times[att.i0 + 1]
    else:
        se = f.step_end(att.i0, att.end) if ends else None
        if se is not None:
            e1 = se
        elif att.ended_by == "running":
            e1 = f.q  # a running first step counts up to now, startup first
        else:
            return s1  # a lone last step with no known end has no startup part
    return e1 - min(ideal, e1 - s1)


def _interrupted_at(f: JobFacts, att: AttemptFacts, ideal: float) -> float:
    """When an attempt that a later one followed stopped doing useful work."""
    if att.ended_by == "job_end":
        return att.end
    if att.i1 == att.i0:
        return att.start  # a crash loop: it never did any work
    last = att.i1 - 1
    t = f.step_times[last]
    se = f.step_end(last, att.end) if f.step_ends else None
    return min(att.end, se if se is not None else t + ideal)


def _clip(lo: float, hi: float, a: float, b: float) -> float:
    return max(0.0, min(hi, b) - max(lo, a))


def productivity(f: JobFacts, r: GoodputReport, window_start: float | None = None) -> Productivity:
    """The productivity figures of report `r`'s window [r.start, r.end].

    `window_start` is the start that was asked for (None: the whole job), which decides
    whether the queueing before the first start is inside the window."""
    a, b = r.start, r.end
    ideal = r.ideal_step_time_s
    atts = f.attempts
    # -- program goodput ------------------------------------------------------------------
    executed = useful = 0
    fl_exec = fl_useful = 0.0
    redone = _redone_ranges(f) if len(atts) > 1 else []
    for att in atts:
        hi = _executed_hi(f, att)
        n, fl = _flops_sum(f, att.i0, hi, a, b)
        executed += n
        fl_exec += fl
    fl_redone = 0.0
    n_redone = 0
    for lo, hi in redone:
        n, fl = _flops_sum(f, lo, hi, a, b)
        n_redone += n
        fl_redone += fl
    useful = executed - n_redone
    fl_useful = fl_exec - fl_redone
    flops_now = _flops_at(f.flops, b)
    peak: tuple[float, float, str] | None = None
    if f.peaks:
        peaks = [x for x in f.peaks if x[0] <= b] or list(f.peaks[:1])  # as of the window's end
        explicit = [x for x in peaks if x[2] == "recorded"]  # a user's own number beats detection
        peak = explicit[-1] if explicit else peaks[-1]
    p = peak[1] if peak else None
    known = bool(f.flops)
    achieved = _div(fl_useful, r.productive_s) if known else None
    startup = r.badput_total_s(B.PROGRAM_STARTUP)
    stall = r.badput_total_s(B.STALL)
    wasted = r.badput_total_s(B.WASTED_PROGRESS_FROM_DISRUPTION)
    steps_s = r.productive_s + (0 + startup + stall + wasted)  # as sum() over the three adds them
    mfu = _div(fl_exec, None if p is None else p * steps_s) if known else None
    pg = _div(achieved, p)
    step_mfu = _div(flops_now, None if p is None else p * ideal)
    notes: list[str] = []
    ahead = _ahead(ideal, executed, r.productive_s, stall, startup, wasted)
    if ahead is not None:
        notes.append(ahead)
    if (mfu is not None and mfu > 1.0) or (pg is not None and pg > 1.0) or (step_mfu is not None and step_mfu > 1.0):
        # more than the peak: an input is wrong, so the figures are unknown rather than false
        mfu = None if mfu is not None and mfu > 1.0 else mfu
        pg = None if pg is not None and pg > 1.0 else pg
        step_mfu = None if step_mfu is not None and step_mfu > 1.0 else step_mfu
        notes.append(
            "MFU or program goodput came out above 100 % of the peak, so they are reported unknown:"
            + (
                " the step times look like dispatch times (see above)"
                if ahead
                else " check the recorded step FLOPs and the peak FLOP/s (and whether steps are timed"
                " at dispatch: docs/jax.md, 'Asynchronous dispatch')"
            )
        )
    # -- scheduling goodput ---------------------------------------------------------------
    n = len(atts)
    inter_at: dict[int, float] = {}
    if n < 2:
        pass  # one attempt: nothing interrupted it
    elif len(r.stops) == n - 1:  # the partition's own stops: one figure, computed once
        inter_at = {k: r.stops[k][0] for k in range(n - 1)}
    else:
        inter_at = {k: _interrupted_at(f, atts[k], ideal) for k in range(n - 1)}
    queues: list[AttemptQueue] = []
    prev_start = -math.inf
    subs = f.submits
    for k, att in enumerate(atts):
        j = bisect_right(subs, (att.start, "\uffff")) - 1
        sub = subs[j] if j >= 0 and subs[j][0] > prev_start else None
        queues.append(
            AttemptQueue(
                k,
                att.start,
                sub[0] if sub else None,
                sub[1] if sub else None,
                att.start - sub[0] if sub else None,
                att.start - inter_at[k - 1] if k else None,
            )
        )
        prev_start = att.start
    q0 = queues[0] if queues else None
    queue0 = q0.queue_s if q0 is not None else None
    sg: float | None = None
    if q0 is not None and q0.submit is not None:
        since = q0.submit if window_start is None else max(window_start, q0.submit)
        inside = _clip(since, q0.start, -math.inf, b)
        sg = _div(r.total_s, r.total_s + inside)
    rg = _div(r.productive_s, r.total_s)
    mpg = None if sg is None or rg is None or pg is None else sg * rg * pg
    avail = None if r.slice_efficiency is None else r.slice_efficiency.available / 100.0
    # -- reliability ----------------------------------------------------------------------
    interrupts = [k for k in range(n - 1) if a < atts[k + 1].start <= b] if n > 1 else []
    firsts = [_first_productive(f, att, ideal) for att in atts]
    uptime = 0.0
    for k, att in enumerate(atts):
        stop = inter_at.get(k, att.end if att.ended_by != "running" else b)
        uptime += _clip(att.start, max(att.start, stop), a, b)
    recoveries: list[float] = []
    costs: list[DisruptionCost] = []
    lost_recovery = 0.0
    for k in range(n - 1):
        t0 = inter_at[k]
        nxt = atts[k + 1]
        r1 = firsts[k + 1]
        if r1 is not None:
            t1, done = r1, True
        elif k + 1 < n - 1:
            t1, done = max(nxt.start, inter_at[k + 1]), True
        else:
            t1, done = b, False
        lost_recovery += _clip(t0, t1, a, b)
        if done and k in interrupts:
            recoveries.append(t1 - t0)
        if k in interrupts:
            costs.append(
                DisruptionCost(
                    k + 1,
                    t0,
                    nxt.start,
                    r1 if done and r1 is not None else None,
                    nxt.start - t0,
                    t1 - t0 if done else None,
                )
            )
    tts = None
    if atts:
        r0 = firsts[0]
        stop0 = r0 if r0 is not None else (inter_at.get(0, b))
        tts = max(0.0, stop0 - atts[0].start)
        lost_start = _clip(atts[0].start, max(atts[0].start, stop0), a, b)
    else:
        lost_start = 0.0
    k_int = len(interrupts)
    ettr = _div(r.total_s - lost_start - lost_recovery - wasted, r.total_s)
    # -- checkpoints ----------------------------------------------------------------------
    ck = f.ckpt
    sv, rs = f.saves, f.restores
    if (
        ck is not None
        and (not sv or (a <= sv[0][0] and sv[-1][0] <= b))
        and (not rs or (a <= rs[0][0] and rs[-1][0] <= b))
    ):
        # the window holds every checkpoint: the figures kept as they came (the same floats)
        save = CostStats(ck.saves, ck.save_sum / ck.saves, ck.save_p95) if ck.saves else _NO_COST
        restore = CostStats(ck.restores, ck.restore_sum / ck.restores, ck.restore_p95) if ck.restores else _NO_COST
        interval_s = ck.gap_sum / ck.gaps if ck.gaps else None
        interval_steps = ck.step_sum / ck.steps if ck.steps else None
    else:
        save = cost_stats(f.saves, a, b)
        restore = cost_stats(f.restores, a, b)
        gaps: list[float] = []
        starts_att = [att.start for att in atts]
        in_window = [(t, d) for t, d in f.saves if a <= t <= b]
        for (t1, _), (t2, _) in itertools.pairwise(in_window):
            if bisect_right(starts_att, t1) == bisect_right(starts_att, t2):
                gaps.append(t2 - t1)
        step_gaps: list[int] = []
        saved = [(t, st) for t, st in f.save_steps if a <= t <= b]
        for (t1, s1), (t2, s2) in itertools.pairwise(saved):
            if bisect_right(starts_att, t1) == bisect_right(starts_att, t2) and s2 > s1:
                step_gaps.append(s2 - s1)
        interval_s = sum(gaps) / len(gaps) if gaps else None
        interval_steps = sum(step_gaps) / len(step_gaps) if step_gaps else None
    return Productivity(
        flops_per_step=flops_now,
        peak_flops_per_s=p,
        peak_source=peak[2] if peak else None,
        steps_executed=executed,
        steps_useful=useful,
        achieved_flops_per_s=achieved,
        step_mfu=step_mfu,
        mfu=mfu,
        program_goodput=pg,
        submit_time=q0.submit if q0 else None,
        submit_source=q0.source if q0 else None,
        queue_s=queue0,
        scheduling_goodput=sg,
        attempts=tuple(queues),
        available_slice_fraction=avail,
        runtime_goodput=rg,
        ml_productivity_goodput=mpg,
        interruptions=k_int,
        uptime_s=uptime,
        mtbi_s=_div(uptime, float(k_int)) if k_int else None,
        mttr_s=sum(recoveries) / len(recoveries) if recoveries else None,
        recoveries_s=tuple(recoveries),
        time_to_start_s=tts,
        lost_progress_s=wasted,
        lost_progress_per_interruption_s=wasted / k_int if k_int else None,
        ettr=ettr,
        checkpoint_save=save,
        checkpoint_restore=restore,
        checkpoint_interval_s=interval_s,
        checkpoint_interval_steps=interval_steps,
        notes=tuple(notes),
        disruptions=tuple(costs),
    )


#: A step period (wall time in steps / steps) this many ideal steps long, with this share of
#: the step time in STALL, says the ideal step time measured dispatches, not device work.
AHEAD_RATIO = 3.0
AHEAD_STALL_SHARE = 0.2


def host_ahead(r: GoodputReport, steps: int) -> str | None:
    """A note when the step starts look like the host running ahead of the device (JAX's
    asynchronous dispatch, CUDA streams): most steps take a dispatch's time, a few a wait on
    many, so the median (the ideal step time) is tiny and the waits become STALL."""
    ideal = r.ideal_step_time_s
    if steps < 10 or not ideal > 0:
        return None
    return _ahead(
        ideal,
        steps,
        r.productive_s,
        r.badput_total_s(B.STALL),
        r.badput_total_s(B.PROGRAM_STARTUP),
        r.badput_total_s(B.WASTED_PROGRESS_FROM_DISRUPTION),
    )


def _ahead(ideal: float, steps: int, productive: float, stall: float, startup: float, wasted: float) -> str | None:
    """`host_ahead` of a report's figures, read once by the caller."""
    if steps < 10 or not ideal > 0:
        return None
    in_steps = productive + stall + startup + wasted
    if in_steps <= 0 or stall < AHEAD_STALL_SHARE * in_steps or in_steps / steps < AHEAD_RATIO * ideal:
        return None
    return (
        f"the ideal step time ({ideal * 1e3:.3g} ms) is far below the mean step period"
        f" ({in_steps / steps * 1e3:.3g} ms) and {100 * stall / in_steps:.0f} % of the step time is STALL:"
        " the steps look timed at dispatch while the host runs ahead of the device (JAX async"
        " dispatch, CUDA streams). Wait on each step's output, or use a CompletionWatcher"
        " (docs/jax.md, 'Asynchronous dispatch'), or pass configured_ideal_step_time"
    )
