"""Stragglers: per-rank step times, and the rank that holds the job's collectives back.

In synchronous data-parallel training every rank waits in the step's collective for the
slowest one. A rank that reaches a step late (slow input, a busy host, a slow previous
step) shows as a spread of that step's start times across ranks. For each step (matched by
attempt and step number) the last rank to start held the others back by its lead over the
next-latest rank: those seconds are charged to it. Summed over the steps, the rank with the
most is the straggler. Only step starts are used (docs/accounting.md, "Hosts": other hosts'
events never enter the partition). Reading is incremental: a second query reads only the
events stored since the first.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from dataclasses import dataclass
from statistics import median
from typing import Any

from mlgoodput.events import Kind
from mlgoodput.store import open_store

__all__ = ["RankStepStats", "StragglerAnalysis", "StragglerReport", "stragglers"]

_STEP, _JOB = int(Kind.STEP_START), int(Kind.JOB_START)
#: A rank is named the straggler only when, in the steps it started last, it led the
#: next-latest rank by more than this on average (and by more than this share of a step).
MIN_LEAD_S = 0.005
MIN_LEAD_FRACTION = 0.05


@dataclass(frozen=True, slots=True)
class RankStepStats:
    """One rank: its step times (between consecutive step starts of one attempt), how late it
    started steps behind the earliest rank, and the seconds it held the others back."""

    rank: int
    steps: int
    median_step_s: float
    p90_step_s: float
    max_step_s: float
    mean_lag_s: float  # mean of (its start - the earliest rank's start) over compared steps
    last_steps: int  # compared steps in which it was the last to start
    held_back_s: float  # sum over those steps of its lead over the next-latest rank

    def to_dict(self) -> dict[str, float | int]:
        return {f: getattr(self, f) for f in self.__slots__}


@dataclass(frozen=True, slots=True)
class StragglerReport:
    """Per-rank statistics, and the rank that cost the job the most waiting (None when no
    step was seen by two ranks, or when no rank's lead stands out from noise)."""

    ranks: tuple[RankStepStats, ...]
    steps_compared: int
    straggler: int | None
    straggler_cost_s: float
    max_spread_s: float  # the largest start-time spread of one step

    def to_dict(self) -> dict[str, Any]:
        return {"ranks": [r.to_dict() for r in self.ranks], "steps_compared": self.steps_compared,
                "straggler": self.straggler, "straggler_cost_s": self.straggler_cost_s,
                "max_spread_s": self.max_spread_s}

    def lines(self) -> list[str]:
        """A few lines for a console report."""
        if not self.ranks:
            return []
        out = []
        if self.straggler is None:
            out.append(f"stragglers: none (ranks started each step within {self.max_spread_s:.3f} s"
                       f" of each other over {self.steps_compared} steps)")
        else:
            out.append(f"straggler: rank {self.straggler} held the others back "
                       f"{self.straggler_cost_s:.3f} s over {self.steps_compared} steps "
                       f"(largest step-start spread {self.max_spread_s:.3f} s)")
        for r in self.ranks:
            out.append(f"  rank {r.rank}: {r.steps} steps, median {r.median_step_s:.3f} s, "
                       f"p90 {r.p90_step_s:.3f} s, max {r.max_step_s:.3f} s, late by "
                       f"{r.mean_lag_s:.3f} s on average, last in {r.last_steps}, held back "
                       f"{r.held_back_s:.3f} s")
        return out


class StragglerAnalysis:
    """Keeps every rank's step starts of one job; `report()` reads only what is new."""

    def __init__(self, job_name: str, logger_name: str = "goodput", *, store: Any = None) -> None:
        self.job_name = job_name
        self.logger_name = logger_name
        self._store = open_store(store)
        self._cursor = 0
        self._job_starts: dict[int, list[float]] = defaultdict(list)
        self._steps: dict[int, list[tuple[float, int]]] = defaultdict(list)

    def _refresh(self) -> None:
        from mlgoodput._journal import recover_changed_journals

        try:
            recover_changed_journals(self._store)  # what killed ranks left behind
        except OSError:
            pass
        res = self._store.read(self.logger_name, self.job_name, self._cursor)
        for c in res.parts:
            kinds, times, hosts, steps = c.kinds, c.times, c.hosts, c.steps
            for i in range(len(kinds)):
                k = kinds[i]
                if k == _STEP:
                    self._steps[hosts[i]].append((times[i], steps[i]))
                elif k == _JOB:
                    bisect.insort(self._job_starts[hosts[i]], times[i])
        self._cursor = res.cursor

    def report(self, start: float | None = None, end: float | None = None) -> StragglerReport:
        """The analysis of the steps that started in [start, end] (default: all)."""
        self._refresh()
        return analyze(self._job_starts, self._steps, start, end)


def analyze(job_starts: dict[int, list[float]], steps: dict[int, list[tuple[float, int]]],
            start: float | None = None, end: float | None = None) -> StragglerReport:
    """Pure: job-start times and (time, step) starts per rank -> the straggler report."""
    lo = float("-inf") if start is None else start
    hi = float("inf") if end is None else end
    by_step: dict[tuple[int, int], dict[int, float]] = defaultdict(dict)
    gaps: dict[int, list[float]] = {}
    for rank, seq in steps.items():
        js = job_starts.get(rank, [])
        seq = sorted(set(seq))
        diffs = []
        prev: tuple[float, int] | None = None
        for t, n in seq:
            if not lo <= t <= hi:
                prev = None
                continue
            attempt = bisect.bisect_right(js, t)
            key = (attempt, n)
            if rank not in by_step[key]:  # a step start stored twice counts once
                by_step[key][rank] = t
            if prev is not None and bisect.bisect_right(js, prev[0]) == attempt:
                diffs.append(t - prev[0])
            prev = (t, n)
        gaps[rank] = diffs
    lag: dict[int, list[float]] = defaultdict(list)
    last = dict.fromkeys(steps, 0)
    held = dict.fromkeys(steps, 0.0)
    compared = 0
    max_spread = 0.0
    for starts in by_step.values():
        if len(starts) < 2:
            continue
        compared += 1
        order = sorted(starts.items(), key=lambda kv: (kv[1], kv[0]))
        first_t = order[0][1]
        for r, t in order:
            lag[r].append(t - first_t)
        max_spread = max(max_spread, order[-1][1] - first_t)
        late_rank, late_t = order[-1]
        last[late_rank] += 1
        held[late_rank] += late_t - order[-2][1]
    ranks = []
    for r in sorted(steps):
        d = sorted(gaps.get(r, []))
        n_steps = len(d) + 1 if d else sum(1 for t, _ in steps[r] if lo <= t <= hi)
        ranks.append(RankStepStats(
            rank=r, steps=n_steps,
            median_step_s=median(d) if d else 0.0,
            p90_step_s=d[min(len(d) - 1, int(0.9 * len(d)))] if d else 0.0,
            max_step_s=d[-1] if d else 0.0,
            mean_lag_s=sum(lag[r]) / len(lag[r]) if lag[r] else 0.0,
            last_steps=last[r], held_back_s=held[r],
        ))
    worst = max(ranks, key=lambda s: (s.held_back_s, -s.rank), default=None)
    # noise is not a straggler: its mean lead must exceed 5 ms and 5 % of a step
    typical = median([r.median_step_s for r in ranks]) if ranks else 0.0
    floor = max(MIN_LEAD_S, MIN_LEAD_FRACTION * typical)
    straggler = None
    if worst is not None and compared and worst.last_steps and worst.held_back_s / worst.last_steps > floor:
        straggler = worst.rank
    return StragglerReport(tuple(ranks), compared, straggler,
                           worst.held_back_s if straggler is not None and worst else 0.0, max_spread)


def stragglers(job_name: str, logger_name: str = "goodput", *, store: Any = None,
               start: float | None = None, end: float | None = None) -> StragglerReport:
    """The straggler report of a job's stored events (one-off; keep a StragglerAnalysis to
    query again incrementally)."""
    return StragglerAnalysis(job_name, logger_name, store=store).report(start, end)
