"""Stragglers: per-rank step times, and the rank that holds the job's collectives back.

In synchronous data-parallel training every rank waits in the step's collective for the
slowest one. A rank that reaches a step late (slow input, a busy host, a slow previous
step) shows as a spread of that step's start times across ranks. For each step (matched by
attempt and step number) the last rank to start held the others back by its lead over the
next-latest rank: those seconds are charged to it. A rank is named the straggler only when
the data say so (`_straggler_rule.py`; docs/torch.md, "Stragglers"). Only step starts are
used (docs/accounting.md, "Hosts": other hosts' events never enter the partition).

This is the one home of the analysis: `GoodputCalculator.stragglers` answers it from the
per-host step arrays the calculator already decoded (`HostStragglers`), the report, the
monitor, the web UI and `mlgoodput.torch` all ask it there, and the matching itself is one
object (`_straggler_match.StepMatcher`).

One vocabulary: *rank*. The accounting's hosts are process indices, and for the straggler
analysis those are the ranks of a collective: its public figures (`RankStepStats.rank`, the
`ranks` of `mlgoodput report --json`, the monitor's `rank` label) have said rank since the
first release, so the analysis says rank throughout and a rank is the accounting's host.

Saved state: one document per job beside the accounting's saved state (`STATE_NAMESPACE`),
written only where that state was saved at exactly the events analysed (by the calculator's
save after a query, or by `stragglers` itself when that state is current) and the job has
enough steps for a recomputation to cost. A calculator with no analysis of its own yet (a
fresh one, or one restored from the saved state) tries the document first, and uses it when
it was made at the calculator's cursor and events for the same window of steps: a later
`mlgoodput report` of a long multi-host job needs neither the events nor the engine.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import operator
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, repeat
from statistics import median
from typing import Any, cast

from mlgoodput._format import duration
from mlgoodput.accounting._fast import numpy as fast_numpy
from mlgoodput.accounting._hoststats import StatColumns, rows_from_columns
from mlgoodput.accounting._report import HostStepStats
from mlgoodput.accounting._stepnums import StepNums, common_run_offset, lengths
from mlgoodput.accounting._straggler_match import Column, StepMatcher, sum_steps
from mlgoodput.accounting._straggler_rule import BINS, StragglerVerdict, straggler_verdict
from mlgoodput.accounting._timeline import HostLog

log = logging.getLogger("mlgoodput")

__all__ = [
    "STATE_NAMESPACE",
    "HostStragglers",
    "RankStepStats",
    "StragglerReport",
    "StragglerVerdict",
    "analyze",
    "compare_step_starts",
]


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
    """Per-rank statistics, and the verdict: the straggler (None when no step was seen by two
    ranks, or when no rank's late starts stand out from noise) with its evidence."""

    ranks: tuple[RankStepStats, ...]
    steps_compared: int
    max_spread_s: float  # the largest start-time spread of one step
    verdict: StragglerVerdict

    @property
    def straggler(self) -> int | None:
        return self.verdict.straggler

    @property
    def straggler_cost_s(self) -> float:
        """The seconds the straggler held the others back (0 when there is none)."""
        s = self.verdict.straggler
        return next((r.held_back_s for r in self.ranks if r.rank == s), 0.0) if s is not None else 0.0

    def rank(self, rank: int) -> RankStepStats | None:
        """The figures of one rank (None when it started no step)."""
        return next((r for r in self.ranks if r.rank == rank), None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ranks": [r.to_dict() for r in self.ranks],
            "steps_compared": self.steps_compared,
            "straggler": self.straggler,
            "straggler_cost_s": self.straggler_cost_s,
            "max_spread_s": self.max_spread_s,
            "verdict": self.verdict.to_dict(),
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> StragglerReport:
        """The report `to_dict` gave (KeyError, TypeError or ValueError when it is not one)."""
        ranks = tuple(RankStepStats(**r) for r in d["ranks"])
        v = d["verdict"]
        return cls(
            ranks,
            int(d["steps_compared"]),
            float(d["max_spread_s"]),
            StragglerVerdict(**{f: v[f] for f in StragglerVerdict.__slots__}),
        )

    def lines(self) -> list[str]:
        """A few lines for a console report."""
        if not self.ranks:
            return []
        out = []
        if self.straggler is None:
            out.append(
                f"stragglers: none ({self.verdict.text()}; ranks started each step within"
                f" {duration(self.max_spread_s)} of each other)"
            )
        else:
            out.append(
                f"straggler: rank {self.straggler} held the others back "
                f"{duration(self.straggler_cost_s)} over {self.steps_compared} steps: {self.verdict.text()}"
            )
        for r in self.ranks:
            out.append(
                f"  rank {r.rank}: {r.steps} steps, median {duration(r.median_step_s)}, "
                f"p90 {duration(r.p90_step_s)}, max {duration(r.max_step_s)}, late by "
                f"{duration(r.mean_lag_s)} on average, last in {r.last_steps}, held back "
                f"{duration(r.held_back_s)}"
            )
        return out


# (steps, median, p90, max step time) of one rank
_Stats = tuple[int, float, float, float]


def _gap_stats(gaps: list[float], steps: int) -> _Stats:
    """A rank's step statistics from its gaps (`steps`: its step count when it has none)."""
    if not gaps:
        return steps, 0.0, 0.0, 0.0
    d = sorted(gaps)
    return len(d) + 1, median(d), d[min(len(d) - 1, int(0.9 * len(d)))], d[-1]


def _report(m: StepMatcher, stats: Mapping[int, _Stats]) -> StragglerReport:
    """The report of what `m` matched; `stats`: each rank's step statistics (its key order is
    the report's)."""
    order = list(stats)
    if not order:
        return _report_columns(m, order, (), (), (), ())[0]
    steps, med, p90, mx = zip(*stats.values(), strict=True)
    return _report_columns(m, order, steps, med, p90, mx)[0]


def _report_columns(
    m: StepMatcher,
    order: list[int],
    steps: Sequence[int],
    med: Sequence[float],
    p90: Sequence[float],
    mx: Sequence[float],
) -> tuple[StragglerReport, Sequence[float], Sequence[float]]:
    """`_report` with the ranks' statistics as columns, in the report's rank order `order`;
    with the ranks' mean lags and held-back seconds as columns too."""
    compared, spread, fewest, lag, lag_n, last, held, late, pooled = m.totals(order)
    if not order:
        return _verdict([], compared, spread, late, pooled, fewest), [], []
    # column by column (thousands of ranks an upload: no Python loop a rank beyond these)
    if 0 in lag_n:
        mean = [a / k if k else 0.0 for a, k in zip(lag, lag_n, strict=True)]
    else:  # (every rank compared: the usual) the same divisions, a C-level loop
        mean = list(map(operator.truediv, lag, lag_n))
    rows = rows_from_columns(RankStepStats, order, steps, med, p90, mx, mean, last, held)
    return _verdict(rows, compared, spread, late, pooled, fewest, order, med), mean, held


@dataclass(frozen=True, slots=True)
class RankColumns:
    """A report's ranks as columns in rank order beside its rows: what the monitor's choice of
    hosts compares (held-back seconds, median step time, mean lag) without taking the rows
    apart again."""

    rows: Sequence[RankStepStats]
    ranks: list[int]
    held_back: Sequence[float]
    median: Sequence[float]
    mean_lag: Sequence[float]


def _verdict(
    ranks: list[RankStepStats],
    compared: int,
    max_spread: float,
    late: Sequence[Sequence[int]],
    pooled: Sequence[int],
    min_ranks: int,
    numbers: Sequence[int] | None = None,
    medians: Sequence[float] | None = None,
) -> StragglerReport:
    """The report, with the straggler rule's verdict (`straggler_verdict`) on the counts:
    `late[i]` those of ranks[i] (`numbers`, `medians`: their rank numbers and median step
    times, when the caller has them as columns). Every straggler verdict shown anywhere is
    made here."""
    if medians is None:
        medians = [r.median_step_s for r in ranks]
    if numbers is None:
        numbers = [r.rank for r in ranks]
    typical = median(medians) if ranks else 0.0
    v = straggler_verdict(numbers, late, pooled, compared, min_ranks, typical)
    return StragglerReport(tuple(ranks), compared, max_spread, v)


def analyze(
    job_starts: Mapping[int, Sequence[float]],
    steps: Mapping[int, Sequence[tuple[float, int]]],
    start: float | None = None,
    end: float | None = None,
) -> StragglerReport:
    """Pure: job-start times and (time, step) starts per rank -> the straggler report of the
    steps started in [start, end]. A step start stored twice counts once; steps are matched
    rank by rank in the order of `steps`."""
    lo = -math.inf if start is None else start
    hi = math.inf if end is None else end
    window: dict[int, list[tuple[float, int]]] = {}
    stats: dict[int, _Stats] = {}
    for rank in sorted(steps):
        js = job_starts.get(rank, [])
        seq = [p for p in sorted(set(steps[rank])) if lo <= p[0] <= hi]
        gaps = [
            b[0] - a[0]
            for a, b in itertools.pairwise(seq)
            if bisect_right(js, a[0]) == bisect_right(js, b[0])  # (not across a restart)
        ]
        stats[rank] = _gap_stats(gaps, sum(1 for t, _ in steps[rank] if lo <= t <= hi))
        window[rank] = seq
    m = StepMatcher(job_starts, list(steps))
    m.add(window)
    return _report(m, stats)


def compare_step_starts(
    starts: Mapping[tuple[int, int], Mapping[int, float]], stats: Mapping[int, tuple[int, float, float, float]]
) -> StragglerReport:
    """The straggler report of step starts a reader matched itself: `starts` maps (attempt,
    step number) -> rank -> that rank's first start of it; `stats` gives each rank's step
    statistics (steps, median, p90, max seconds). The same per-step sums and verdict as the
    analysis, summed in the order of `starts`."""
    ranks = sorted(stats)
    lag, lag_n = dict.fromkeys(ranks, 0.0), dict.fromkeys(ranks, 0)
    last, held = dict.fromkeys(ranks, 0), dict.fromkeys(ranks, 0.0)
    late = {r: [0] * BINS for r in ranks}
    pooled = [0] * BINS
    compared, spread, fewest = sum_steps(list(starts), starts, 0, 0.0, lag, lag_n, last, held, late, pooled, 0)
    rows = [RankStepStats(r, *stats[r], lag[r] / lag_n[r] if lag_n[r] else 0.0, last[r], held[r]) for r in ranks]
    return _verdict(rows, compared, spread, [late[r] for r in ranks], pooled, fewest)


class HostStragglers:
    """The straggler analysis of one calculator's per-host step arrays (its `HostLog`s), kept
    up to date: while each host's steps only grow at the end, a report costs the new steps
    (the matcher takes them); a change reaching back, a new host, a job start before a step
    already matched, starts the matcher over. A window that leaves steps out is a fresh pass
    over the steps in it. Ranks are matched in number order."""

    def __init__(self) -> None:
        self._m: StepMatcher | None = None
        # by rank index of the matcher: each host's log version and the steps taken from it
        self._versions: list[int] = []
        self._taken: list[int] = []
        self.columns: RankColumns | None = None  # the last report's ranks as columns, when made so
        self._token: object = None  # the caller's token for the logs' state the matcher was last brought to
        # the hosts mapping last reported on, its ranks in order, their logs, step starts, by
        # rank, the earliest first start, and whether the latest last start was a number
        self._seen: tuple[object, list[int], list[HostLog], list[array[float]], dict[int, HostLog], float, bool] = (
            None,
            [],
            [],
            [],
            {},
            math.inf,
            False,
        )

    def report(
        self,
        hosts: Mapping[int, HostLog],
        stats: Mapping[int, HostStepStats]
        | Callable[[], Mapping[int, HostStepStats] | Sequence[HostStepStats] | StatColumns],
        start: float | None = None,
        end: float | None = None,
        token: object = None,
    ) -> StragglerReport:
        """The report of the steps started in [start, end]; `stats`: the accounting's step
        statistics of each host over all its steps, or a function that works them out (called
        only when the window holds every step: they are used then, and cost a pass), by host
        or as a sequence in host order, or as the accounting's columns (`StatColumns`).
        `token`: a value equal to the last report's only while the logs changed by steps
        appended after each one's last and nothing else (no host came, no version or job
        start changed: `Timeline.reshapes`), which spares the checks of those (None: check)."""
        lo = -math.inf if start is None else start
        hi = math.inf if end is None else end
        seen = self._seen
        if token is not None and token == self._token and seen[0] is hosts:
            # only steps appended after each host's last since: the same ranks, logs and
            # step-start arrays (grown in place), no NaN among the new starts (appended in
            # increasing order)
            keys, hls, ts, logs, first = seen[1], seen[2], seen[3], seen[4], seen[5]
            # (the first starts are as they were; the last ones only grew, by numbers)
            last = max(map(_LAST, ts)) if hi != math.inf or not seen[6] else -math.inf
        else:
            # (a column at a time, `map` of getters: a report at thousands of hosts pays per pass)
            keys = sorted(hosts)
            hls = list(map(hosts.__getitem__, keys))
            ts = list(map(_TIMES, hls))
            if 0 in map(len, ts):  # hosts with no step start are no ranks
                keep = list(map(len, ts))
                keys, hls, ts = list(compress(keys, keep)), list(compress(hls, keep)), list(compress(ts, keep))
            if not keys:
                return _verdict([], 0, 0.0, [], [0] * BINS, 0)
            logs = dict(zip(keys, hls, strict=True))
            first, last = min(map(_FIRST, ts)), max(map(_LAST, ts))  # (min and max: the first NaN-free pass's)
            self._seen = (hosts, keys, hls, ts, logs, first, last == last)
        if not (lo <= first and last <= hi):
            return self._window(logs, lo, hi)
        m = self._update(logs, keys, hls, ts, token)
        given = stats() if callable(stats) else stats
        if isinstance(given, StatColumns):  # the accounting's columns (hosts updated together)
            if given.hosts == keys:
                return self._columns_kept(m, keys, given)
            given = given.rows
        if not isinstance(given, Mapping):  # in host order: as they are when they are the ranks'
            if list(map(_HOST_OF, given)) == keys:
                return _report_columns(m, keys, *_stat_columns(given))[0]
            given = {s.host: s for s in given}
        got = list(map(given.get, keys))
        if any(map(operator.is_, got, repeat(None))):
            rows: dict[int, _Stats] = {}
            for h, hl, s in zip(keys, hls, got, strict=True):
                rows[h] = (len(hl.times), 0.0, 0.0, 0.0) if s is None else _STATS_OF(s)
            return _report(m, rows)
        return _report_columns(m, keys, *_stat_columns(cast("list[HostStepStats]", got)))[0]

    def _columns_kept(self, m: StepMatcher, keys: list[int], c: StatColumns) -> StragglerReport:
        """`_report_columns` from the accounting's columns; the ranks' columns kept for
        the calculator's `columns_of` (the monitor's choice of hosts reads them)."""
        rep, mean, held = _report_columns(m, keys, c.steps, c.median, c.p90, c.max)
        self.columns = RankColumns(rep.ranks, keys, held, c.median, mean)
        return rep

    def _update(
        self,
        logs: Mapping[int, HostLog],
        keys: list[int],
        hls: list[HostLog],
        ts: list[array[float]],
        token: object = None,
    ) -> StepMatcher:
        """The matcher with every step of `logs` in it: the new steps added, or a fresh one
        (`keys`, `hls`, `ts`: the hosts of `logs` in its order, their logs and step starts)."""
        m = self._m
        quiet = token is not None and token == self._token  # (only steps appended since)
        self._token = None
        if m is not None and m.ranks == keys and self._extend(m, hls, ts, quiet):
            self._token = token
            return m
        m = self._m = StepMatcher({h: hl.job_starts for h, hl in logs.items()}, list(logs))
        ok = m.add_columns(_columns(keys, hls, ts, [0] * len(keys)))
        assert ok, "a fresh matcher takes any steps"
        self._versions, self._taken = list(map(_VERSION, hls)), list(map(len, ts))
        self._token = token
        return m

    def _extend(self, m: StepMatcher, hls: list[HostLog], ts: list[array[float]], quiet: bool = False) -> bool:
        """Add what each host's log gained at its end (`hls`: the logs of the matcher's ranks,
        in its order; `ts`: their step starts); False when anything else changed. A column at
        a time: no Python step a host but for the hosts whose job starts changed. `quiet`: the
        logs only had steps appended since the matcher last took them (their versions, job
        starts and the steps taken need no check)."""
        ranks = m.ranks
        ns = list(map(len, ts))
        taken = self._taken
        if quiet:
            return self._grow(m, hls, ts, ns, taken)
        if list(map(_VERSION, hls)) != self._versions or any(map(operator.lt, ns, taken)):
            return False
        mjs = m.js
        js: list[list[float]] = list(map(_JS, hls))
        mine = list(map(mjs.get, ranks, repeat(_NO_STARTS)))
        if not all(map(operator.eq, js, mine)):
            for h, a, b in zip(ranks, js, mine, strict=True):
                if a == b:
                    continue
                if a[: len(b)] != b:
                    return False
                for t in a[len(b) :]:
                    if not m.job_start(h, t):
                        return False
        return self._grow(m, hls, ts, ns, taken)

    def _grow(
        self, m: StepMatcher, hls: list[HostLog], ts: list[array[float]], ns: list[int], taken: list[int]
    ) -> bool:
        """`_extend`'s adding of the steps each host gained at its end (`ns`: its steps now,
        `taken`: those the matcher holds)."""
        ranks = m.ranks
        grown = list(map(operator.gt, ns, taken))
        if not any(grown):
            return True
        if all(grown):
            if _same_numbers(hls, taken):  # (ranks stepping together, the usual: their columns as they are)
                nums = hls[0].nums
                if not m.add_aligned(_tails(ts, taken), _nums(nums, taken[0], len(nums))):
                    return False
                self._taken = ns
                return True
            new = _columns(ranks, hls, ts, taken, same=False)
        else:
            new = _columns(
                list(compress(ranks, grown)),
                list(compress(hls, grown)),
                list(compress(ts, grown)),
                list(compress(taken, grown)),
            )
        if not m.add_columns(new):
            return False
        self._taken = ns  # (the versions: checked equal above)
        return True

    @staticmethod
    def _window(logs: Mapping[int, HostLog], lo: float, hi: float) -> StragglerReport:
        """A fresh pass over the steps started in [lo, hi]."""
        cols: dict[int, tuple[Column, Column]] = {}
        stats: dict[int, _Stats] = {}
        for h, hl in logs.items():
            i0, i1 = bisect_left(hl.times, lo), bisect_right(hl.times, hi)
            t = hl.times[i0:i1]
            cols[h] = (t, _nums(hl.nums, i0, i1))
            gaps = list(map(operator.sub, t[1:], t[:-1]))
            js = hl.job_starts
            # a restart at s falls before the first step at or after s: that gap is no step time
            for i in sorted({bisect_left(t, s) for s in js}, reverse=True):
                if 0 < i < len(t):
                    del gaps[i - 1]
            stats[h] = _gap_stats(gaps, len(t))
        m = StepMatcher({h: hl.job_starts for h, hl in logs.items()}, list(logs))
        m.add_columns(cols)
        return _report(m, stats)


_STATS_OF = operator.attrgetter("steps", "median_s", "p90_s", "max_s")  # HostStepStats -> _Stats
_HOST_OF = operator.attrgetter("host")
_STEPS_OF, _MEDIAN_OF, _P90_OF, _MAX_OF = map(operator.attrgetter, ("steps", "median_s", "p90_s", "max_s"))
_TIMES, _NUMS, _JS, _VERSION = map(operator.attrgetter, ("times", "nums", "job_starts", "version"))
_FIRST, _LAST = operator.itemgetter(0), operator.itemgetter(-1)
_TAIL = cast("Callable[[array[float], slice], array[float]]", operator.getitem)  # a host's starts from an index on
_NO_STARTS: list[float] = []  # a rank's job starts when the matcher holds none (never changed)


def _stat_columns(
    have: Sequence[HostStepStats],
) -> tuple[list[int], list[float], list[float], list[float]]:
    """The hosts' statistics as columns: steps, median, p90, max."""
    return (
        list(map(_STEPS_OF, have)),
        list(map(_MEDIAN_OF, have)),
        list(map(_P90_OF, have)),
        list(map(_MAX_OF, have)),
    )


def _tails(ts: list[array[float]], ks: list[int]) -> list[Column]:
    """Each host's step starts ts[i] from index ks[i] on (its own array, no copy, when taken whole)."""
    if 0 in ks:
        return [t if k == 0 else t[k:] for t, k in zip(ts, ks, strict=True)]
    return cast("list[Column]", list(map(_TAIL, ts, map(slice, ks, repeat(None)))))


def _columns(
    keys: list[int], hls: list[HostLog], ts: list[array[float]], ks: list[int], same: bool | None = None
) -> dict[int, tuple[Column, Column]]:
    """Each host's (keys[i]: its log hls[i], step starts ts[i]) step starts and numbers from
    index ks[i] on: the starts are the
    host's own array (no copy) when it is taken whole, and when every host holds the same
    step numbers there (ranks stepping together: their numbers are stored alike) they share
    one column of them, which lets the matcher sum the ranks' starts in place
    (`StepMatcher.add_columns`), instead of a copy of every host's starts and numbers."""
    times = _tails(ts, ks)
    if _same_numbers(hls, ks) if same is None else same:
        a = hls[0]
        shared = _nums(a.nums, ks[0], len(a.nums))
        return dict(zip(keys, zip(times, repeat(shared)), strict=True))
    out: dict[int, tuple[Column, Column]] = {}
    alike: dict[tuple[int, int], Column] = {}  # (first number, count) -> their column
    for h, hl, k, col_t in zip(keys, hls, ks, times, strict=True):
        n = len(hl.nums)
        off = hl.nums.run_offset(k)
        if off is None:
            out[h] = (col_t, _nums(hl.nums, k, n))
            continue
        # numbers off + k, ..., off + n - 1: hosts with the same share one column (an upload
        # that caught some hosts' latest step and not the others': two columns, not thousands)
        key = (off + k, n - k)
        col = alike.get(key)
        if col is None:
            col = alike[key] = _nums(hl.nums, k, n)
        out[h] = (col_t, col)
    return out


def _same_numbers(hls: Sequence[HostLog], first: Sequence[int]) -> bool:
    """Whether every host holds the same step numbers from `first[i]` on: where each host's
    are in its last run, by that run's offset (O(1) a host), else by their stored runs
    compared whole. This is asked at every report, so only numbers stored in a few runs
    (`_FEW_RUNS` bytes of them: a job's usual 0, 1, 2, ... between restarts) are compared;
    hosts with more, or stored differently, count as different (each gets its own column)."""
    if len(hls) < 2 or first.count(first[0]) != len(first):
        return False
    a = hls[0]
    n = len(a.nums)
    nums: list[StepNums] = list(map(_NUMS, hls))
    lens = lengths(nums)
    if lens.count(n) != len(lens) or not all(map(operator.eq, map(len, map(_TIMES, hls)), repeat(len(a.times)))):
        return False
    # the usual case first, O(1) a host: each host's numbers from `first` on in its last run,
    # the runs alike (StepNums.run_offset, read a column at a time)
    k = first[0]
    if len(a.times) == n and common_run_offset(nums, k) is not None:
        return True
    if a.nums.nbytes() > _FEW_RUNS:
        return False
    state = a.nums.state()
    return all(b.nbytes() <= _FEW_RUNS and b.state() == state for b in nums[1:])


_FEW_RUNS = 4096  # bytes of stored step numbers (16 a run) up to which hosts' runs are compared


def _nums(nums: StepNums, lo: int, hi: int) -> Column:
    """nums[lo:hi] as packed int64: where a host's numbers are all runs counting up by one (the
    usual), made in a few numpy passes and handed over as a view, instead of a Python range
    per run (at 256 hosts x 1e5 steps, 2.5 s of a first analysis); else StepNums' own slice."""
    np = fast_numpy() if hi - lo >= 4096 else None
    if np is None:
        return nums[lo:hi]
    starts, base, keys, _ = nums.state()
    if len(keys):
        return nums[lo:hi]
    st = np.frombuffer(starts, dtype=np.int64)
    seg = np.diff(np.append(st, len(nums)))
    v = np.repeat(np.frombuffer(base, dtype=np.int64) - st, seg)[lo:hi] + np.arange(lo, hi, dtype=np.int64)
    return memoryview(v).cast("B").cast("q")


STATE_NAMESPACE = "mlgoodput.stragglers"  # where a store keeps the last analysis of each job
_MAGIC = "mlgoodput-stragglers"
SAVE_FROM = 100_000  # step starts from which an analysis is worth saving


def state_key(logger_name: str, job_name: str) -> str:
    """The saved analysis's key in `STATE_NAMESPACE`."""
    return json.dumps([logger_name, job_name])


def saved_doc(
    rep: StragglerReport, url: object, cursor: int, events: int, span: tuple[float, float], window: list[Any]
) -> bytes:
    """The saved form of `rep`, the analysis at stream cursor `cursor` (`events` events)."""
    lo = -math.inf if window[0] is None else window[0]
    hi = math.inf if window[1] is None else window[1]
    doc = {
        "magic": _MAGIC,
        "url": url,
        "cursor": cursor,
        "events": events,
        "span": list(span),
        "window": window,
        "whole": lo <= span[0] and span[1] <= hi,
        "report": rep.to_dict(),
    }
    return json.dumps(doc).encode()


def from_saved(
    pieces: Iterable[bytes] | None, url: object, cursor: int, events: int, window: list[Any]
) -> StragglerReport | None:
    """The saved analysis when it is of this store at `cursor` with `events` events and of the
    same steps as the window [start, end]; None otherwise (a damaged one is logged, not used)."""
    if pieces is None:
        return None
    try:
        saved = json.loads(b"".join(pieces))
        if not (isinstance(saved, dict) and saved.get("magic") == _MAGIC and saved.get("url") == url):
            return None
        if int(saved["cursor"]) != cursor or int(saved["events"]) != events:
            return None
        lo = -math.inf if window[0] is None else window[0]
        hi = math.inf if window[1] is None else window[1]
        span_lo, span_hi = float(saved["span"][0]), float(saved["span"][1])
        if saved["window"] == window or (saved["whole"] and lo <= span_lo and span_hi <= hi):
            return StragglerReport.from_dict(saved["report"])
    except (OSError, KeyError, TypeError, ValueError, IndexError) as e:
        log.info("mlgoodput: not using the saved straggler analysis (%s)", e)
    return None
