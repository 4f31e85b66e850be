"""Stragglers: per-rank step times, and the rank that holds the job's collectives back.

In synchronous data-parallel training every rank waits in the step's collective for the
slowest one. A rank that reaches a step late (slow input, a busy host, a slow previous
step) shows as a spread of that step's start times across ranks. For each step (matched by
attempt and step number) the last rank to start held the others back by its lead over the
next-latest rank: those seconds are charged to it. Summed over the steps, the rank with the
most would be the straggler, but a rank is named only when the data say so: the rule
(`_straggler_rule.py`) counts, per rank, the steps it started late behind the others beyond
the noise, and names it when chance does not explain that many (docs/torch.md,
"Stragglers"). Only step starts are used (docs/accounting.md, "Hosts": other hosts' events
never enter the partition). Reading is incremental: a second query reads only the events
stored since the first.
"""

from __future__ import annotations

import bisect
import itertools
import json
import logging
import math
import operator
import struct
from array import array
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from statistics import median
from typing import Any, cast

from mlgoodput._format import duration
from mlgoodput.accounting import SortedFloats, fast_numpy
from mlgoodput.events import Kind
from mlgoodput.store import Columns, PagedStore, open_store
from mlgoodput.torch._straggler_rule import (
    BINS,
    MIN_LEAD_FRACTION,
    MIN_LEAD_S,
    StragglerVerdict,
    count_late,
    count_late_block,
    straggler_verdict,
)

log = logging.getLogger("mlgoodput")

__all__ = [
    "MIN_LEAD_FRACTION",
    "MIN_LEAD_S",
    "RankStepStats",
    "StragglerAnalysis",
    "StragglerReport",
    "StragglerVerdict",
    "stragglers",
]

_STEP, _JOB = int(Kind.STEP_START), int(Kind.JOB_START)


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

    def to_dict(self) -> dict[str, Any]:
        return {
            "ranks": [r.to_dict() for r in self.ranks],
            "steps_compared": self.steps_compared,
            "straggler": self.straggler,
            "straggler_cost_s": self.straggler_cost_s,
            "max_spread_s": self.max_spread_s,
            "verdict": self.verdict.to_dict(),
        }

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


class StragglerAnalysis:
    """Keeps every rank's step starts of one job; `report()` reads only what is new.

    The analysis of the whole job is kept up to date too (`_Live`): while each rank's new
    step starts come after its earlier ones, a report costs the new steps, not the job; a
    window or anything out of order falls back to the full pass (`analyze`)."""

    def __init__(self, job_name: str, logger_name: str = "goodput", *, store: Any = None) -> None:
        self.job_name = job_name
        self.logger_name = logger_name
        self._store = open_store(store)
        self._cursor = 0
        self._job_starts: dict[int, list[float]] = defaultdict(list)
        self._times: dict[int, array[float]] = {}  # rank -> step start times, in stored order
        self._nums: dict[int, array[int]] = {}  # rank -> their step numbers
        self._span = (math.inf, -math.inf)  # the earliest and latest step start of any rank
        self._live: _Live | None = None
        self._paged = isinstance(self._store, PagedStore)
        self._gaps_of: Callable[[int], Any] | None = None  # see share_gaps
        self._share = True  # off for good once a shared structure was found out of step
        # parts taken since the last `_finish`: (steps per rank before them, [a new rank], job starts)
        self._pending: tuple[dict[int, int], list[bool], list[tuple[int, float]]] | None = None
        self._fed: list[Columns | _Block] = []  # parts (and blocks) fed since the last `_finish`, not taken yet
        # the new steps of fed parts taken as one block (`_take_block`), not yet in `_times` and
        # `_nums` (`_columns` puts them there): (ranks, their step counts, times, step numbers)
        self._blocks: list[tuple[list[int], list[int], Any, Any]] = []

    def _refresh(self, upto: int | None = None) -> None:
        from mlgoodput._journal import recover_changed_journals

        try:
            recover_changed_journals(self._store)  # what killed ranks left behind
        except OSError:
            pass
        parts: Iterable[tuple[int, Columns]]
        if self._paged:  # a page at a time: never the whole job in memory at once
            parts = cast(PagedStore, self._store).scan(self.logger_name, self.job_name, self._cursor)
        else:
            res = self._store.read(self.logger_name, self.job_name, self._cursor)
            parts = [(res.cursor, c) for c in res.parts] or [(res.cursor, Columns.empty())]
        for cursor, c in parts:
            if upto is not None and cursor > upto and self._paged:
                break
            self._take(cursor, c)
        self._finish()

    def catch_up(self, upto: int) -> None:
        """Read what the store holds up to cursor `upto` (another reader's cursor: the
        calculator's), not beyond, so that reader's next pages start where this analysis
        stops and can be fed to it (`feed`); a store read whole reads everything."""
        if self._cursor < upto:
            self._refresh(upto)

    def feed(self, begin: int, end: int, c: Columns) -> None:
        """Events another reader of the same stream decoded (the calculator's pages): taken
        when they start at this analysis's cursor, else left for its own read. Taken at the
        next report, all fed parts as one block where they can be: `c` is kept as it is until
        then (the caller changes no part it handed over)."""
        if begin == self._cursor and end >= begin:
            self._cursor = end  # taken at the next `_finish`: all fed parts at once where they can be
            self._fed.append(c)

    def feed_block(self, begin: int, end: int, hosts: list[int], sizes: list[int], times: bytes, steps: bytes) -> bool:
        """`feed` for several ranks' step starts at once (the calculator's run of small pages):
        rank hosts[i]'s `sizes[i]` steps (none empty), one rank after another in `times` and
        `steps` (packed doubles and int64), as if each were fed as a part of its own in that
        order, the first from `begin`, the others from `end`. Taken whole when `begin` is this
        analysis's cursor (True); else nothing is taken (False: the caller feeds the parts)."""
        if begin != self._cursor or end < begin:
            return False
        self._cursor = end
        self._fed.append(_Block(hosts, sizes, times, steps))
        return True

    @property
    def cursor(self) -> int:
        return self._cursor

    def share_gaps(self, gaps_of: Callable[[int], Any]) -> None:
        """Read each rank's step-time gaps from another reader that keeps the same ones (the
        calculator's per-host statistics: `gaps_of(rank)` gives its HostSteps, or None)
        instead of keeping a copy. Checked every time (the gaps it last added, byte for byte,
        against this analysis's own); anything out of step and this analysis keeps its own
        again, built anew, so the report is always what it would be without sharing."""
        self._gaps_of = gaps_of

    def _columns(self) -> tuple[dict[int, array[float]], dict[int, array[int]]]:
        """Every rank's step starts and numbers, in stored order (the blocks put in place)."""
        blocks = self._blocks
        if blocks:
            self._blocks = []
            all_t, all_n = self._times, self._nums
            np = fast_numpy()
            if np is not None and len(blocks) > 1:  # each rank's pieces gathered in one pass
                tv = np.concatenate([b[2] for b in blocks])
                nv = np.concatenate([b[3] for b in blocks])
                seg_rank = np.array([h for b in blocks for h in b[0]], dtype=np.int64)
                seg_len = np.array([k for b in blocks for k in b[1]], dtype=np.intp)
                seg_at = np.cumsum(seg_len) - seg_len
                o = np.argsort(seg_rank, kind="stable")  # by rank, each rank's pieces in stored order
                lens = seg_len[o]
                ends = np.cumsum(lens)
                gather = np.repeat(seg_at[o] - (ends - lens), lens) + np.arange(len(tv))
                tv, nv = tv[gather], nv[gather]
                ranks = seg_rank[o]
                last = [*np.flatnonzero(ranks[1:] != ranks[:-1]).tolist(), len(ranks) - 1]
                bounds = [0, *ends[last].tolist()]
                for j, h in enumerate(ranks[last].tolist()):
                    all_t[h].frombytes(tv[bounds[j] : bounds[j + 1]].tobytes())
                    all_n[h].frombytes(nv[bounds[j] : bounds[j + 1]].tobytes())
            else:
                for order, lens_, tb, nb in blocks:
                    at = 0
                    for h, k in zip(order, lens_, strict=True):
                        all_t[h].frombytes(tb[at : at + k].tobytes())
                        all_n[h].frombytes(nb[at : at + k].tobytes())
                        at += k
        return self._times, self._nums

    def _take(self, cursor: int, c: Columns) -> None:
        if self._fed:  # (fed parts come first: they start at the older cursor)
            fed, self._fed = self._fed, []
            for f in fed:
                self._take_fed(f)
        self._cursor = cursor
        self._take_part(c)

    def _take_fed(self, f: Columns | _Block) -> None:
        """A fed part, or each rank's part of a fed block, as `_take_part` takes it."""
        if isinstance(f, Columns):
            self._take_part(f)
            return
        if self._pending is None:
            self._pending = ({h: len(v) for h, v in self._columns()[0].items()}, [False], [])
        all_t, all_n = self._times, self._nums
        tv, sv = memoryview(f.times), memoryview(f.steps)
        at = 0
        for h, n in zip(f.hosts, f.sizes, strict=True):
            got = all_t.get(h)
            if got is None:
                got = all_t[h] = array("d")
                all_n[h] = array("q")
                self._pending[1][0] = True
            got.frombytes(tv[at : at + 8 * n])
            all_n[h].frombytes(sv[at : at + 8 * n])
            at += 8 * n

    def _take_part(self, c: Columns) -> None:
        if self._pending is None:
            self._pending = ({h: len(v) for h, v in self._columns()[0].items()}, [False], [])
        kinds, times, hosts, steps = c.kinds, c.times, c.hosts, c.steps
        n = len(kinds)
        all_t, all_n = self._times, self._nums
        # one rank's step starts (the host column checked on its bytes: no int made per event)
        if n and kinds.count(_STEP) == n and (b := hosts.tobytes()) == b[: hosts.itemsize] * n:
            h = hosts[0]
            got = all_t.get(h)
            if got is None:
                got = all_t[h] = array("d")
                all_n[h] = array("q")
                self._pending[1][0] = True
            got.extend(times)
            all_n[h].extend(steps)
            return
        if _STEP not in kinds and _JOB not in kinds:
            return
        _, new_rank, new_js = self._pending
        for i in range(n):
            k = kinds[i]
            if k == _STEP:
                h = hosts[i]
                if h not in all_t:
                    all_t[h], all_n[h], new_rank[0] = array("d"), array("q"), True
                all_t[h].append(times[i])
                all_n[h].append(steps[i])
            elif k == _JOB:
                new_js.append((hosts[i], times[i]))

    def _finish(self) -> None:
        """What the parts taken since the last call change in the live analysis."""
        if self._fed:
            if self._pending is None and self._take_block(self._fed):
                self._fed = []
                return
            fed, self._fed = self._fed, []
            for f in fed:
                self._take_fed(f)
        if self._pending is None:
            return
        before, new_rank, new_js = self._pending
        self._pending = None
        all_t, all_n = self._times, self._nums
        live = None if new_rank[0] else self._live  # a new rank's steps are ordered last: start over
        for h, t in new_js:
            if live is not None and not live.job_start(h, t):
                live = None
            bisect.insort(self._job_starts[h], t)
        fresh = {h: (ts[k:], k) for h, ts in all_t.items() if len(ts) > (k := before.get(h, 0))}
        self._span = _span(*self._span, [p for p, _ in fresh.values()])
        new = {} if live is None else {h: (p, all_n[h][k:]) for h, (p, k) in fresh.items()}
        if live is not None and not live.add_columns(new):
            if live.share_failed:
                self._share = False
            live = None
        self._live = live

    def _take_block(self, fed: list[Columns | _Block]) -> bool:
        """The fed parts as one block, each one rank's step starts (the calculator's pages of a
        job that only steps), given to the live analysis in one numpy pass (`_Live._lockstep`)
        without a per-rank copy (kept as the block until `_columns`); False, nothing changed,
        where that does not apply (no numpy, no live analysis, a new rank, another event...)."""
        live = self._live
        np = fast_numpy()
        if np is None or live is None or live.moved:
            return False
        if len(fed) == 1 and isinstance(fed[0], _Block):  # the calculator's usual: one block
            b0 = fed[0]
            hl, lens, tb, nb = b0.hosts, b0.sizes, b0.times, b0.steps
            if len(tb) >> 3 < _LOCKSTEP_MIN:
                return False
        else:
            got = _fed_columns(np, fed)
            if got is None:
                return False
            hl, lens, tb, nb = got
        index = live.index
        at = [index.get(h) for h in hl]
        if None in at:
            return False  # a rank new to the analysis (ordered last: it starts over)
        tv = np.frombuffer(tb, dtype=np.float64)
        nv = np.frombuffer(nb, dtype=np.int64)
        pos = cast(list[int], at)
        if any(map(operator.ge, pos, itertools.islice(pos, 1, None))):  # not one part per rank in rank order
            po = sorted(range(len(pos)), key=pos.__getitem__)  # (stable: a rank's parts in fed order)
            fl = list(itertools.accumulate(lens, initial=0))
            perm = np.concatenate([np.arange(fl[j], fl[j] + lens[j]) for j in po])
            tv, nv = tv[perm], nv[perm]
            idx: list[int] = []
            per: list[int] = []
            for j in po:
                if idx and idx[-1] == pos[j]:
                    per[-1] += lens[j]
                else:
                    idx.append(pos[j])
                    per.append(lens[j])
            pos, lens = idx, per
        if not live.add_block(np, pos, lens, tv, nv):
            return False
        ranks = live.ranks
        order = [ranks[i] for i in pos]
        if self._blocks and (b := self._blocks[-1])[0] == order and b[1] == lens:
            order, lens = b[0], b[1]  # the layout of the block before (ranks in lockstep): kept once
        self._blocks.append((order, lens, tv, nv))
        if len(self._blocks) >= _BLOCKS_KEPT:
            self._columns()
        mn, mx = float(tv.min()), float(tv.max())  # (no NaN: the block pass took none)
        if mn != 0.0 and mx != 0.0:
            lo, hi = self._span
            self._span = min(lo, mn), max(hi, mx)
        else:  # as `_span` takes them: rank by rank
            t = self._columns()[0]
            self._span = _span(*self._span, [t[h][len(t[h]) - k :] for h, k in zip(order, lens, strict=True)])
        return True

    def _steps(self) -> dict[int, list[tuple[float, int]]]:
        times, nums = self._columns()
        return {h: list(zip(times[h], nums[h], strict=True)) for h in times}

    def report(self, start: float | None = None, end: float | None = None, *, read: bool = True) -> StragglerReport:
        """The analysis of the steps that started in [start, end] (default: all); `read=False`:
        of the events read (or fed) so far, without reading the store."""
        if read:
            self._refresh()
        else:
            self._finish()
        lo = -math.inf if start is None else start
        hi = math.inf if end is None else end
        if self._times and lo <= self._span[0] and self._span[1] <= hi:
            live = self._live
            got = None if live is None else live.report()
            if live is None or got is None:  # none yet, or one whose shared gaps moved on without it
                if live is not None:
                    self._share = False
                times, nums = self._columns()
                live = _Live(self._job_starts, list(times))
                # the other reader's gaps compared now, while building: a fresh analysis of a
                # long job (a monitor's first upload) does not leave that to the next report
                live.gaps_of = self._gaps_of if self._share else None
                # all ranks in one add (what rank-by-rank adds give): ranks stepping together
                # take the numpy passes, so a first report of a many-host job is not a Python
                # loop over every step of every rank
                ok = live.add_columns({h: (ts, nums[h]) for h, ts in times.items()})
                assert ok, "a fresh live analysis takes any steps"
                self._live = live
                got = live.report()
                assert got is not None, "a fresh live analysis shares nothing"
            live.gaps_of = self._gaps_of if self._share else None
            return got
        return analyze(self._job_starts, self._steps(), start, end)


@dataclass(frozen=True, slots=True)
class _Block:
    """Fed step starts of several ranks (`StragglerAnalysis.feed_block`): rank hosts[i]'s
    sizes[i] steps, one rank after another in `times` and `steps` (packed doubles, int64)."""

    hosts: list[int]
    sizes: list[int]
    times: bytes
    steps: bytes


def _fed_columns(np: Any, fed: list[Columns | _Block]) -> tuple[list[int], list[int], bytes, bytes] | None:
    """The fed parts and blocks as one block: (each piece's rank, its steps, all times, all
    step numbers, in fed order), when every part holds only step starts of one rank in packed
    doubles and 64-bit numbers (empty parts left out) and there are `_LOCKSTEP_MIN` steps or
    more; else None."""
    parts = [c for c in fed if isinstance(c, Columns)]
    kinds = [c.kinds for c in parts]
    lens = list(map(len, kinds))
    if 0 in lens:
        parts = [c for c in parts if len(c.kinds)]
        kinds = [c.kinds for c in parts]
        lens = list(map(len, kinds))
    total = sum(lens)
    ph: list[int] = []
    if parts:
        if b"".join(kinds).count(_STEP) != total:
            return None
        hcols = [c.hosts for c in parts]
        code = hcols[0].typecode
        if code not in "ilq" or any(h.typecode != code for h in hcols):
            return None
        tb = b"".join([c.times for c in parts])
        nb = b"".join([c.steps for c in parts])
        if len(tb) != 8 * total or len(nb) != 8 * total:  # not packed doubles and 64-bit steps
            return None
        hv = np.frombuffer(b"".join(hcols), dtype=np.dtype(code))
        lv = np.array(lens, dtype=np.intp)
        firsts = np.cumsum(lv) - lv
        pv = hv[firsts]
        if not np.array_equal(np.repeat(pv, lv), hv):  # a part of several hosts
            return None
        ph = pv.tolist()
    if len(parts) == len(fed):
        if total < _LOCKSTEP_MIN:
            return None
        return ph, lens, tb, nb
    hl: list[int] = []
    sizes: list[int] = []
    tl: list[Any] = []
    nl: list[Any] = []
    j = 0
    for f in fed:
        if isinstance(f, _Block):
            hl += f.hosts
            sizes += f.sizes
            tl.append(f.times)
            nl.append(f.steps)
        elif len(f.kinds):
            hl.append(ph[j])
            sizes.append(lens[j])
            tl.append(f.times)
            nl.append(f.steps)
            j += 1
    tb, nb = b"".join(tl), b"".join(nl)
    if len(tb) >> 3 < _LOCKSTEP_MIN:
        return None
    return hl, sizes, tb, nb


def _packed(parts: list[Any]) -> bytes:
    """The doubles of `parts` (packed arrays of them, or lists: what HostSteps.last_new holds
    for a few new gaps) as one run of bytes, as `array("d", part)` gives each."""
    out: list[Any] = []
    for x in parts:
        if isinstance(x, array) and x.typecode == "d":
            out.append(x)
        elif isinstance(x, list):  # packed straight from the list: no array built first
            k = len(x)
            st = _DOUBLES.get(k)
            if st is None:
                if len(_DOUBLES) >= 64:
                    _DOUBLES.clear()
                st = _DOUBLES[k] = struct.Struct(f"{k}d")
            try:
                out.append(st.pack(*x))
            except (struct.error, TypeError):
                out.append(array("d", x))
        else:
            out.append(array("d", x))
    return b"".join(out)


_DOUBLES: dict[int, struct.Struct] = {}  # count -> the format packing that many doubles


def _span(lo: float, hi: float, parts: list[array[float]]) -> tuple[float, float]:
    """(lo, hi) widened to the times in `parts`: min and max over them one after the other,
    or in one numpy pass where that gives the same (no NaN, no zero whose sign min or max
    would pick by position)."""
    np = fast_numpy() if len(parts) > 8 else None
    if np is not None:
        v = np.frombuffer(b"".join(parts), dtype=np.float64)
        if len(v) == sum(map(len, parts)):
            mn, mx = float(v.min()), float(v.max())
            if mn == mn and mn != 0.0 and mx != 0.0:
                return min(lo, mn), max(hi, mx)
    for p in parts:
        lo, hi = min(lo, min(p)), max(hi, max(p))
    return lo, hi


class _Live:
    """`analyze` of the whole job, extended with each rank's new step starts.

    It gives exactly what `analyze` gives (same sums in the same order): the steps are keyed
    by (attempt, step number) in the order `analyze` meets them (rank by rank in first-seen
    order, each rank's steps in time order), and the per-step totals are summed once for the
    prefix of steps every rank has reported (`_frozen`), again each report for the rest.
    `add` refuses (returns False; the caller starts over) anything that would reorder or
    change what was already summed."""

    TAIL = 4096  # steps beyond which a step some rank never reported is summed anyway

    def __init__(self, job_starts: dict[int, list[float]], ranks: list[int]) -> None:
        self.js = {r: list(v) for r, v in job_starts.items()}
        self.ranks = list(ranks)
        self.index = {r: i for i, r in enumerate(self.ranks)}
        n = len(self.ranks)
        self.count = array("q", bytes(8 * n))  # by rank index: step starts stored (duplicates too)
        self.gaps = {r: SortedFloats() for r in self.ranks}
        # rank -> (another reader's gaps read as this rank's, their count when last checked)
        self.shared: dict[int, tuple[SortedFloats, int]] = {}
        self.gaps_of: Callable[[int], Any] | None = None  # that reader (StragglerAnalysis.share_gaps)
        self.no_share: set[int] = set()  # ranks whose gaps differed from that reader's
        self.share_failed = False  # a shared structure out of step: the caller starts over
        self.intro: dict[tuple[int, int], int] = {}  # key -> index of the first rank that has it
        self.starts: dict[tuple[int, int], dict[int, float]] = {}  # key -> rank -> time (not frozen)
        self.segs: list[list[tuple[int, int]]] = [[] for _ in self.ranks]  # keys by introducing rank
        self.frozen = 0  # keys of segs[0] summed into the totals below
        self.moved = 0  # keys in segs[1:]
        self.compared = 0
        self.max_spread = 0.0
        # by rank index, packed (numpy adds into them in place: `_sum_block`): the sum of each
        # rank's lags and their count, the steps it started last, the seconds it held back
        self.lag = array("d", bytes(8 * n))
        self.lag_n = array("q", bytes(8 * n))
        self.last_steps = array("q", bytes(8 * n))
        self.held = array("d", bytes(8 * n))
        # each rank's late starts behind the others' median, by rank index x bin, and every
        # lateness's size by bin (`count_late`: the straggler rule's counts); the fewest ranks
        # of a compared step (0: none yet)
        self.late = array("q", bytes(8 * n * BINS))
        self.pooled = array("q", bytes(8 * BINS))
        self.min_ranks = 0
        # each rank's attempts so far and latest job start, and whether it has a latest step,
        # its time and number (by rank index, for the numpy pass: `_lockstep`)
        self.att = array("q", [len(self.js.get(r, ())) for r in self.ranks])
        self.js_last = array("d", [v[-1] if (v := self.js.get(r)) else -math.inf for r in self.ranks])
        self.has_last = bytearray(n)
        self.last_t = array("d", bytes(8 * n))
        self.last_n = array("q", bytes(8 * n))
        self.order = sorted(self.ranks)  # the report's order
        self.order_at = [self.index[r] for r in self.order]
        self.ids: Any = None  # the ranks as a numpy column (`_sum_block`)
        self.every: Any = None  # every rank index, in numpy (`_lockstep`)
        self.cached: StragglerReport | None = None  # the last report, while nothing changed since
        # rank -> (its gaps, their count, median, p90, max) when last reported
        self.rank_stats: dict[int, tuple[SortedFloats, int, float, float, float]] = {}

    def _set_last(self, r: int, prev: tuple[float, int]) -> None:
        i = self.index[r]
        self.has_last[i] = 1
        self.last_t[i], self.last_n[i] = prev

    def _last(self, r: int) -> tuple[float, int] | None:
        """The rank's latest (time, step), if any."""
        i = self.index.get(r)
        if i is None or not self.has_last[i]:
            return None
        return self.last_t[i], self.last_n[i]

    def _totals(self) -> tuple[dict[int, float], dict[int, int], dict[int, int], dict[int, float]]:
        """The per-rank totals as dicts by rank (lag, lag count, last steps, held back)."""
        r = self.ranks
        return (
            dict(zip(r, self.lag, strict=True)),
            dict(zip(r, self.lag_n, strict=True)),
            dict(zip(r, self.last_steps, strict=True)),
            dict(zip(r, self.held, strict=True)),
        )

    def job_start(self, rank: int, t: float) -> bool:
        """A new job start: fine while it changes no stored step's attempt."""
        last = self._last(rank)
        if last is not None and t <= last[0]:
            return False
        self.cached = None
        js = self.js.setdefault(rank, [])
        bisect.insort(js, t)
        i = self.index.get(rank)
        if i is not None:
            self.att[i], self.js_last[i] = len(js), js[-1]
        return True

    def add(self, new: dict[int, list[tuple[float, int]]], *, freeze: bool = True) -> bool:
        self.cached = None
        for r in self.ranks:  # rank order, as `analyze` meets them
            seq = new.get(r)
            if not seq:
                continue
            i = self.index[r]
            if not all(map(operator.lt, seq, itertools.islice(seq, 1, None))):  # else already sorted(set(seq))
                seq = sorted(set(seq))
            prev = self._last(r)
            if prev is not None:
                if seq[0] < prev:
                    return False
                self.count[i] += len(new[r])
                if seq[0] == prev:
                    seq = seq[1:]
            else:
                self.count[i] += len(new[r])
            if not seq:
                continue
            js = self.js.get(r, [])
            intro, starts, segs = self.intro, self.starts, self.segs
            if not js or js[-1] <= seq[0][0]:  # one attempt for all of them (the usual case)
                att = len(js)
                ts = [t for t, _ in seq]
                if prev is not None and (not js or js[-1] <= prev[0]):
                    ts.insert(0, prev[0])
                diffs = list(map(operator.sub, ts[1:], ts[:-1]))
                moves = self.moved > 0
                for t, n in seq:
                    key = (att, n)
                    st = starts.get(key)
                    if st is not None:
                        if r not in st:
                            st[r] = t
                            if moves:  # else every key so far was met first by rank index 0
                                k = intro[key]
                                if i < k:  # this rank meets the step first now: it moves up
                                    self._move(key, k, i)
                        continue
                    if key in intro:
                        return False  # a step already summed
                    intro[key] = i
                    starts[key] = {r: t}
                    segs[i].append(key)
                    if i:
                        moves = True
                        self.moved += 1
                prev = seq[-1]
            else:
                diffs = []
                prev_att = -1 if prev is None else bisect.bisect_right(js, prev[0])
                for t, n in seq:
                    att = bisect.bisect_right(js, t)
                    if prev is not None and att == prev_att:
                        diffs.append(t - prev[0])
                    prev, prev_att = (t, n), att
                    key = (att, n)
                    got = intro.get(key)
                    if got is None:
                        intro[key] = i
                        starts[key] = {r: t}
                        segs[i].append(key)
                        self.moved += i > 0
                        continue
                    st = starts.get(key)
                    if st is None:
                        return False  # a step already summed
                    if r not in st:
                        st[r] = t
                        if i < got:
                            self._move(key, got, i)
            if prev is not None:
                self._set_last(r, prev)
            if diffs:
                if r in self.shared:  # never changes another reader's structure: start over
                    self.share_failed = True
                    return False
                self.gaps[r].extend(diffs)
        if freeze:
            self.freeze()
        return True

    def add_columns(self, new: dict[int, tuple[array[float], array[int]]]) -> bool:
        """`add` of each rank's new step starts given as (times, step numbers) columns. The
        usual case (every rank in one attempt, each rank's new steps later than its earlier
        ones, every step met first by rank index 0) takes a few numpy passes (`_lockstep`),
        bit for bit what `add` gives; anything else, or no numpy, goes through `add`."""
        self.cached = None
        np = fast_numpy()
        if np is not None and self.moved == 0:
            index = self.index
            order = [r for r in self.ranks if r in new and len(new[r][0])]
            tcols = [new[r][0] for r in order]
            lens = list(map(len, tcols))
            total = sum(lens)
            if total >= _LOCKSTEP_MIN:
                tb, nb = b"".join(tcols), b"".join([new[r][1] for r in order])
                if len(tb) == 8 * total and len(nb) == 8 * total:  # packed doubles and 64-bit steps
                    tv = np.frombuffer(tb, dtype=np.float64)
                    nv = np.frombuffer(nb, dtype=np.int64)
                    if self._lockstep(np, [index[r] for r in order], lens, tv, nv):
                        return True
        if self.share_failed:
            return False
        return self.add({r: list(zip(t, n, strict=True)) for r, (t, n) in new.items()})

    def add_block(self, np: Any, pos: list[int], lens: list[int], tv: Any, nv: Any) -> bool:
        """`add_columns` of new step starts given as one block: `lens[j]` steps of rank index
        `pos[j]` (increasing) after another, times `tv` and step numbers `nv` (numpy); False,
        nothing changed, unless the numpy pass (`_lockstep`) applies."""
        self.cached = None
        return self.moved == 0 and sum(lens) >= _LOCKSTEP_MIN and self._lockstep(np, pos, lens, tv, nv)

    def _lockstep(self, np: Any, pos: list[int], lens: list[int], tv: Any, nv: Any) -> bool:
        """`add(...)` then `freeze()` for the lockstep case, in numpy: the new steps of all ranks
        as one block (rank by rank in rank order: `lens[j]` steps of rank index `pos[j]`, none
        empty), checked, gapped and summed a pass each, and Python only once per rank for what
        stays per rank; False (nothing changed) when the case does not apply."""
        if self.moved:
            return False
        ranks, index = self.ranks, self.index
        order = [ranks[i] for i in pos]
        total = len(tv)
        if np.isnan(tv).any():  # (a NaN start: `add` says what it means)
            return False
        if len(order) == len(ranks):  # every rank (the usual case): in index order
            if self.every is None:
                self.every = np.arange(len(ranks), dtype=np.intp)
            idx = self.every
        else:
            idx = np.array(pos, dtype=np.intp)
        lv = np.array(lens, dtype=np.intp)
        ends = np.cumsum(lv)
        starts = ends - lv
        ends -= 1
        # one attempt, the same for every rank; after each rank's last job start and last step
        atts = np.frombuffer(self.att, dtype=np.int64)[idx]
        att = int(atts[0])
        first_t, first_n = tv[starts], nv[starts]
        js_last = np.frombuffer(self.js_last, dtype=np.float64)[idx]
        if (atts != att).any() or (js_last > first_t).any():
            return False
        has = np.frombuffer(self.has_last, dtype=np.uint8)[idx].astype(bool)
        last_t = np.frombuffer(self.last_t, dtype=np.float64)[idx]
        last_n = np.frombuffer(self.last_n, dtype=np.int64)[idx]
        if (has & ~((first_t > last_t) & (first_n > last_n))).any():
            return False
        inner = np.ones(total - 1, dtype=bool)  # neighbours of one rank
        inner[starts[1:] - 1] = False
        if (inner & ~(tv[1:] > tv[:-1])).any() or (inner & ~(nv[1:] > nv[:-1])).any():
            return False  # each rank's steps strictly later, with higher numbers
        pend = self.segs[0][self.frozen :]  # keys summed at the next freeze, all rank 0's
        if any(k[0] != att for k in pend):
            return False
        intro, starts_of = self.intro, self.starts
        k0 = nv[: lens[0]].tolist() if pos and pos[0] == 0 else []
        if any((att, n) in intro for n in k0):
            return False
        cols = np.array([k[1] for k in pend] + k0, dtype=np.int64)
        if not len(cols):
            return False
        full = len(ranks)
        rv = np.repeat(idx, lv)  # each new step's rank index
        if not pend and len(order) == full and lens.count(len(cols)) == full and (nv.reshape(full, -1) == cols).all():
            mat = tv.reshape(full, -1).copy()  # every rank has exactly rank index 0's new steps
        else:
            srt = np.argsort(cols, kind="stable")
            pos = np.minimum(np.searchsorted(cols[srt], nv), len(cols) - 1)
            cv = srt[pos]
            if not np.array_equal(cols[cv], nv):  # a step no rank index 0 met (it moves), or summed
                return False
            mat = np.full((full, len(cols)), np.nan)
            if pend:
                rows: list[int] = []
                at: list[int] = []
                ts: list[float] = []
                for c, key in enumerate(pend):
                    st = starts_of[key]
                    rows.extend(map(index.__getitem__, st))
                    at.extend([c] * len(st))
                    ts.extend(st.values())
                mat[rows, at] = ts
            if not np.isnan(mat[rv, cv]).all():  # a rank's step already there: `add` keeps the first
                return False
            mat[rv, cv] = tv
        # each rank's new gaps: within its block, and from its last step when of the same attempt
        gall = np.empty(total)
        np.subtract(tv[1:], tv[:-1], out=gall[1:])
        joined = has & (js_last <= last_t)
        gall[starts[joined]] = first_t[joined] - last_t[joined]
        own = np.ones(total, dtype=bool)  # the entries that are gaps
        own[starts[~joined]] = False
        per = (lv - ~joined).tolist()  # gaps per rank
        if self.shared and not self._check_shared(np, gall, own, rv, order, per):
            self.share_failed = True
            return False
        # -- from here on the case applies: the same changes as `add` then `freeze` (a shared
        # rank's structure holds its new gaps already: checked, its new count kept)
        shared, gaps = self.shared, self.gaps
        np.frombuffer(self.count, dtype=np.int64)[idx] += lv
        ends_t, ends_n = tv[ends], nv[ends]
        mine = [j for j, r in enumerate(order) if r not in shared and per[j]]
        if mine:
            gv = array("d")
            gv.frombytes(gall.tobytes())
            stop_at = ends.tolist()
            for j in mine:
                e = stop_at[j] + 1
                gaps[order[j]].extend(gv[e - per[j] : e])
        np.frombuffer(self.has_last, dtype=np.uint8)[idx] = 1
        np.frombuffer(self.last_t, dtype=np.float64)[idx] = ends_t
        np.frombuffer(self.last_n, dtype=np.int64)[idx] = ends_n
        if self.gaps_of is not None and len(shared) + len(self.no_share) < full:
            self._start_sharing(np, order)
        fresh = [(att, n) for n in k0]
        intro.update(dict.fromkeys(fresh, 0))
        self.segs[0].extend(fresh)
        keys = pend + fresh
        present = ~np.isnan(mat)
        cnt = present.sum(axis=0)
        ok = (cnt == full) | (np.arange(len(keys)) < len(keys) - self.TAIL)
        stop = len(keys) if ok.all() else int(np.argmin(ok))
        if stop:
            self._sum_block(np, mat[:, :stop], present[:, :stop], cnt[:stop])
        for key in pend[:stop]:
            del starts_of[key]
        for c in range(stop, len(keys)):  # the rest waits for its other ranks, as dicts
            st = starts_of.setdefault(keys[c], {})
            for i in np.flatnonzero(present[:, c]).tolist():
                st.setdefault(ranks[i], float(mat[i, c]))
        self.frozen += stop
        return True

    def _check_shared(self, np: Any, gall: Any, own: Any, rows: Any, order: list[int], per: list[int]) -> bool:
        """Whether each shared rank's structure grew by exactly its new gaps since the last check:
        the other reader's last additions, joined, byte for byte the shared ranks' entries of
        `gall` (where `own`; `rows`: their rank indices; `per`: each rank's count, in `order`),
        no zero or NaN among them (ties of 0.0 and -0.0, and NaN, could sit in another order).
        A structure the other reader let go of (replaced, unchanged since) becomes this rank's
        own again. True: `shared` holds the structures' new counts."""
        gaps_of = self.gaps_of
        if gaps_of is None:
            return False
        shared, index = self.shared, self.index
        theirs: list[Any] = []
        at: list[int] = []
        grown: list[tuple[int, tuple[SortedFloats, int]]] = []
        stats: list[tuple[int, SortedFloats, int, Any]] = []
        # the usual case, a pass per attribute: every shared rank with new gaps, each still the
        # other reader's structure, grown by exactly them (else the rank by rank pass below)
        every = len(shared) == len(order) == len(self.ranks)  # (then order holds every rank: all shared)
        if every:
            ranks, want = order, per
        else:
            pos = [j for j, r in enumerate(order) if r in shared]
            ranks = [order[j] for j in pos]
            want = [per[j] for j in pos]
        if ranks and all(want):
            held = list(map(shared.__getitem__, ranks))
            sfs = [v[0] for v in held]
            hss = list(map(gaps_of, ranks))
            if None not in hss and all(map(operator.is_, map(_DIFFS, hss), sfs)):
                now = list(map(len, sfs))
                if now != list(map(operator.add, [v[1] for v in held], want)):
                    return False
                theirs = list(map(_LAST_NEW, hss))
                if None in theirs or list(map(len, theirs)) != want:
                    return False
                at = [] if every else [index[r] for r in ranks]
                grown = list(zip(ranks, zip(sfs, now, strict=True), strict=True))
                try:  # the other reader's statistics of these very gaps, for the report
                    stats = list(zip(ranks, sfs, now, map(_STATS, hss), strict=True))
                except AttributeError:  # none kept there
                    stats = []
                order = per = []  # nothing left for the pass below
        for r, g in zip(order, per, strict=True):
            got = shared.get(r)
            if got is None:
                continue
            sf, n = got
            hs = gaps_of(r)
            if hs is None or hs.diffs is not sf:  # let go of: ours, if nothing came since
                if len(sf) != n:
                    return False
                del shared[r]
                self.gaps[r] = sf
                self.no_share.add(r)
                continue
            if len(sf) != n + g:
                return False
            if g:
                last = hs.last_new
                if last is None or len(last) != g:
                    return False
                theirs.append(last)
                at.append(index[r])
                grown.append((r, (sf, n + g)))
        if theirs:
            if at:
                mask = np.zeros(len(self.ranks), dtype=bool)
                mask[at] = True
                mine = gall[own & mask[rows]]
            else:  # every rank's gaps
                mine = gall[own]
            try:  # packed doubles already (the calculator's arrays): joined as they are
                joined = b"".join(theirs) if set(map(_TYPECODE, theirs)) == {"d"} else None
            except (AttributeError, TypeError):
                joined = None
            if joined is None:
                joined = _packed(theirs)
            if bool(np.isnan(mine).any()) or bool((mine == 0).any()) or mine.tobytes() != joined:
                return False
        shared.update(grown)
        # (HostSteps.update: the same median and kth of the same structure, at that count)
        if stats:
            r_, sf_, k_, st_ = zip(*stats, strict=True)
            if None not in st_ and list(map(_STEPS, st_)) == [k + 1 for k in k_]:  # every one (a pass each)
                known = zip(sf_, k_, map(_MEDIAN, st_), map(_P90, st_), map(_MAX, st_), strict=True)
                self.rank_stats.update(zip(r_, known, strict=True))
                return True
        self.rank_stats.update(
            (r, (sf, k, st.median_s, st.p90_s, st.max_s))
            for r, sf, k, st in stats
            if st is not None and st.steps == k + 1
        )
        return True

    def _start_sharing(self, np: Any, order: list[int]) -> None:
        """Ranks whose gaps equal the other reader's (same count, then the same sorted bytes,
        no zero or NaN among them) read that reader's structure from now on."""
        gaps_of = self.gaps_of
        assert gaps_of is not None
        for r in order:
            if r in self.shared or r in self.no_share:
                continue
            hs = gaps_of(r)
            own = self.gaps[r]
            if hs is None or len(hs.diffs) != len(own) or not len(own):
                continue  # not there yet (tried again next time: a length is cheap)
            try:
                theirs = hs.diffs.values()  # a saved structure's values are fetched here
            except Exception:  # a damaged saved state: the calculator finds it itself
                self.no_share.add(r)
                continue
            mine = own.values()
            v = np.frombuffer(mine, dtype=np.float64)
            if mine.tobytes() != theirs.tobytes() or bool(np.isnan(v).any()) or bool((v == 0).any()):
                self.no_share.add(r)
                continue
            self.gaps[r] = hs.diffs
            self.shared[r] = (hs.diffs, len(hs.diffs))

    _BLOCK = 4096  # columns summed at once (bounds the temporaries of a first report)

    def _sum_block(self, np: Any, blk: Any, present: Any, cnt: Any) -> None:
        """`_sum_steps` over the columns of blk (rank index x step, NaN: not reported; `cnt`: the
        ranks that reported each), in column order: the same operations on the same values per
        rank, so the same sums (each rank's lags added one step after the other, never a
        pairwise sum)."""
        valid = cnt >= 2
        if not valid.all():
            if not valid.any():
                return
            blk, present = blk[:, valid], present[:, valid]
            cnt = cnt[valid]
        fewest = int(cnt.min())
        self.min_ranks = fewest if not self.min_ranks or fewest < self.min_ranks else self.min_ranks
        ranks = self.ranks
        if self.ids is None:
            self.ids = np.array(ranks, dtype=np.int64)[:, None]
        lag = np.frombuffer(self.lag, dtype=np.float64)  # (views: added into in place)
        last_steps = np.frombuffer(self.last_steps, dtype=np.int64)
        held = np.frombuffer(self.held, dtype=np.float64)
        counts = np.frombuffer(self.late, dtype=np.int64).reshape(len(ranks), BINS)
        pooled = np.frombuffer(self.pooled, dtype=np.int64)
        low = np.iinfo(np.int64).min
        for c0 in range(0, blk.shape[1], self._BLOCK):
            b, p = blk[:, c0 : c0 + self._BLOCK], present[:, c0 : c0 + self._BLOCK]
            if p.all():  # every rank reported every step (the usual case)
                mn, mx = b.min(axis=0), b.max(axis=0)
                dd = b - mn
                top = b == mx
                late = np.where(top, self.ids, low).argmax(axis=0)  # (the rank index of the highest rank)
                # order[-2]'s time: the latest but the latest rank's (the latest again on a tie)
                second = np.where(top, -np.inf, b).max(axis=0)
                tie = top.sum(axis=0) > 1
                second[tie] = mx[tie]
            else:
                mn = np.where(p, b, np.inf).min(axis=0)
                mx = np.where(p, b, -np.inf).max(axis=0)
                dd = np.where(p, b - mn, 0.0)  # adding 0.0 to a sum of non-negative terms changes nothing
                late = np.where(p & (b == mx), self.ids, low).argmax(axis=0)
                second = np.sort(np.where(p, b, -np.inf), axis=0)[-2]
            for col in dd.T.copy():  # column by column: each rank's sum in step order
                lag += col
            # each step's lead added to its late rank's, one step after the other (`at`: in order)
            np.add.at(held, late, mx - second)
            last_steps += np.bincount(late, minlength=len(ranks))
            self.max_spread = max(self.max_spread, float((mx - mn).max()))
            count_late_block(np, b, p, counts, pooled)  # the straggler rule's counts
        np.frombuffer(self.lag_n, dtype=np.int64)[:] += present.sum(axis=1)
        self.compared += int(blk.shape[1])

    def _late_rows(self, *, copy: bool) -> dict[int, Any]:
        """Each rank's late counts (by bin): views into the totals, or copies of them."""
        mv = memoryview(self.late)
        if copy:
            return {r: array("q", mv[i * BINS : (i + 1) * BINS]) for i, r in enumerate(self.ranks)}
        return {r: mv[i * BINS : (i + 1) * BINS] for i, r in enumerate(self.ranks)}

    def _move(self, key: tuple[int, int], k: int, i: int) -> None:
        """Rank index i meets `key` before rank index k did: the key moves to i's keys."""
        self.segs[k].remove(key)
        self.segs[i].append(key)
        self.intro[key] = i
        self.moved -= i == 0

    def freeze(self) -> None:
        """Sum the steps every rank has reported (or that lie far behind) into the totals."""
        seg, starts = self.segs[0], self.starts
        full = len(self.ranks)
        stop = self.frozen
        while stop < len(seg) and (len(starts[seg[stop]]) == full or len(seg) - stop > self.TAIL):
            stop += 1
        if stop == self.frozen:
            return
        self.cached = None
        keys = seg[self.frozen : stop]
        lag, lag_n, last, held = self._totals()
        late = self._late_rows(copy=False)  # (counts: added in place)
        self.compared, self.max_spread, self.min_ranks = _sum_steps(
            keys, starts, self.compared, self.max_spread, lag, lag_n, last, held, late, self.pooled, self.min_ranks
        )
        for v in late.values():
            v.release()
        self.lag[:] = array("d", lag.values())
        self.lag_n[:] = array("q", lag_n.values())
        self.last_steps[:] = array("q", last.values())
        self.held[:] = array("d", held.values())
        for key in keys:
            del starts[key]
        self.frozen = stop

    def report(self) -> StragglerReport | None:
        """The report; None when a shared structure changed since it was last checked (then
        the caller builds its analysis anew). Nothing added since the last one: that one."""
        for sf, n in self.shared.values():
            if len(sf) != n:
                return None
        if self.cached is not None:
            return self.cached
        compared, max_spread, min_ranks = self.compared, self.max_spread, self.min_ranks
        at = self.order_at
        lag: Sequence[float]
        lag_n: Sequence[int]
        last: Sequence[int]
        held: Sequence[float]
        late: Sequence[Any]
        pooled: Any = self.pooled
        if self.moved or len(self.segs[0]) > self.frozen:  # steps not summed for good: on copies
            lag_d, lag_n_d, last_d, held_d = self._totals()
            late_d, pooled = self._late_rows(copy=True), array("q", self.pooled)
            for j, seg in enumerate(self.segs):
                keys = seg[self.frozen :] if j == 0 else seg
                if keys:
                    compared, max_spread, min_ranks = _sum_steps(
                        keys,
                        self.starts,
                        compared,
                        max_spread,
                        lag_d,
                        lag_n_d,
                        last_d,
                        held_d,
                        late_d,
                        pooled,
                        min_ranks,
                    )
            lag, lag_n = [lag_d[r] for r in self.order], [lag_n_d[r] for r in self.order]
            last, held = [last_d[r] for r in self.order], [held_d[r] for r in self.order]
            late = [late_d[r] for r in self.order]
        else:  # the totals by rank index, in the report's order
            g = operator.itemgetter(*at) if len(at) > 1 else (lambda v: (v[at[0]],))
            lag, lag_n, last, held = g(self.lag), g(self.lag_n), g(self.last_steps), g(self.held)
            np = fast_numpy() if len(at) > 8 else None
            if np is not None:  # (the verdict sums each rank's bins in one pass)
                late = np.frombuffer(self.late, dtype=np.int64).reshape(len(at), BINS)[at]
            else:
                late = [self.late[i * BINS : (i + 1) * BINS] for i in at]
        gaps, count, known, order = self.gaps, self.count, self.rank_stats, self.order
        ranks = []
        for j, r in enumerate(order):
            d = gaps[r]
            k = len(d)
            if k:
                got = known.get(r)  # (those of a shared structure: as `_check_shared` took them)
                if got is None or got[0] is not d or got[1] != k:  # gaps only grow: same count, same gaps
                    got = known[r] = (d, k, d.median(), d.kth(min(k - 1, int(0.9 * k))), d.kth(k - 1))
                steps, med, p90, top = k + 1, got[2], got[3], got[4]
            else:
                steps, med, p90, top = count[at[j]], 0.0, 0.0, 0.0
            n = lag_n[j]
            ranks.append(RankStepStats(r, steps, med, p90, top, lag[j] / n if n else 0.0, last[j], held[j]))
        self.cached = _verdict(ranks, compared, max_spread, late, pooled, min_ranks)
        return self.cached


def _sum_steps(
    keys: list[tuple[int, int]],
    starts: dict[tuple[int, int], dict[int, float]],
    compared: int,
    max_spread: float,
    lag: dict[int, float],
    lag_n: dict[int, int],
    last: dict[int, int],
    held: dict[int, float],
    late: dict[int, Any],
    pooled: Any,
    min_ranks: int,
) -> tuple[int, float, int]:
    """The per-step part of `analyze` over `keys` in order, added into the totals given (and
    the straggler rule's counts: `late` by rank, `pooled`); -> (compared, max spread, fewest
    ranks of a compared step)."""
    for key in keys:
        st = starts[key]
        k = len(st)
        if k < 2:
            continue
        compared += 1
        min_ranks = k if not min_ranks or k < min_ranks else min_ranks
        order = sorted(st.items(), key=_BY_TIME_RANK)
        count_late(order, late, pooled)
        first_t = order[0][1]
        for r, t in order:
            lag[r] += t - first_t
            lag_n[r] += 1
        spread = order[-1][1] - first_t
        if spread > max_spread:
            max_spread = spread
        late_rank, late_t = order[-1]
        last[late_rank] += 1
        held[late_rank] += late_t - order[-2][1]
    return compared, max_spread, min_ranks


_BY_TIME_RANK = operator.itemgetter(1, 0)
_DIFFS = operator.attrgetter("diffs")
_LAST_NEW = operator.attrgetter("last_new")
_STATS = operator.attrgetter("stats")
_TYPECODE = operator.attrgetter("typecode")
_STEPS, _MEDIAN = operator.attrgetter("steps"), operator.attrgetter("median_s")
_P90, _MAX = operator.attrgetter("p90_s"), operator.attrgetter("max_s")
_LOCKSTEP_MIN = 256  # new step starts from which the numpy pass pays  # (rank, time) -> (time, rank)
# fed blocks kept as blocks before they go to each rank's columns (else only when needed: a
# part the block pass does not take, a window, a fresh analysis); each rank's columns grown a
# block at a time would copy them again and again
_BLOCKS_KEPT = 4096


def analyze(
    job_starts: dict[int, list[float]],
    steps: dict[int, list[tuple[float, int]]],
    start: float | None = None,
    end: float | None = None,
) -> StragglerReport:
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
    late = {r: [0] * BINS for r in steps}
    pooled = [0] * BINS
    compared = min_ranks = 0
    max_spread = 0.0
    for starts in by_step.values():
        if len(starts) < 2:
            continue
        compared += 1
        min_ranks = len(starts) if not min_ranks else min(min_ranks, len(starts))
        order = sorted(starts.items(), key=lambda kv: (kv[1], kv[0]))
        count_late(order, late, pooled)
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
        ranks.append(
            RankStepStats(
                rank=r,
                steps=n_steps,
                median_step_s=median(d) if d else 0.0,
                p90_step_s=d[min(len(d) - 1, int(0.9 * len(d)))] if d else 0.0,
                max_step_s=d[-1] if d else 0.0,
                mean_lag_s=sum(lag[r]) / len(lag[r]) if lag[r] else 0.0,
                last_steps=last[r],
                held_back_s=held[r],
            )
        )
    return _verdict(ranks, compared, max_spread, [late[r.rank] for r in ranks], pooled, min_ranks)


def _verdict(
    ranks: list[RankStepStats],
    compared: int,
    max_spread: float,
    late: Sequence[Sequence[int]],
    pooled: Sequence[int],
    min_ranks: int,
) -> StragglerReport:
    """The report, with the straggler rule's verdict (`straggler_verdict`) on the counts:
    `late[i]` those of ranks[i]. Every straggler verdict shown anywhere is made here."""
    typical = median([r.median_step_s for r in ranks]) if ranks else 0.0
    v = straggler_verdict([r.rank for r in ranks], late, pooled, compared, min_ranks, typical)
    return StragglerReport(tuple(ranks), compared, max_spread, v)


STATE_NAMESPACE = "mlgoodput.stragglers"  # where a store keeps the last analysis of each job
_MAGIC = "mlgoodput-stragglers"
_SAVE_FROM = 100_000  # step starts from which an analysis is worth saving (unless $MLGOODPUT_SNAPSHOT=always)


def saved_stragglers(
    job_name: str, logger_name: str, *, store: Any, start: float | None = None, end: float | None = None
) -> StragglerReport:
    """`stragglers(...)`, answered from the analysis saved in the store when no event was stored
    since it and its window covered the same steps; otherwise analysed (and saved, where the
    store keeps state). A saved analysis that fails any check is recomputed, never used."""
    from mlgoodput.accounting import snapshot_policy as _snapshot_policy
    from mlgoodput.store import StateStore

    st = open_store(store)
    every = _snapshot_policy(None)  # $MLGOODPUT_SNAPSHOT, as for the accounting state
    if every is None:
        return StragglerAnalysis(job_name, logger_name, store=st).report(start, end)
    key = json.dumps([logger_name, job_name])
    lo = -math.inf if start is None else start
    hi = math.inf if end is None else end
    if isinstance(st, StateStore):
        try:
            pieces = st.load_state(STATE_NAMESPACE, key)
            saved = json.loads(b"".join(pieces)) if pieces is not None else None
            if (
                isinstance(saved, dict)
                and saved.get("magic") == _MAGIC
                and saved.get("url") == getattr(st, "url", None)
            ):
                cursor, events = int(saved["cursor"]), int(saved["events"])
                span_lo, span_hi = float(saved["span"][0]), float(saved["span"][1])
                same = saved["window"] == [start, end] or (saved["whole"] and lo <= span_lo and span_hi <= hi)
                if same and tuple(st.stream_position(logger_name, job_name, cursor)) == (cursor, events):
                    return _from_dict(saved["report"])
        except (OSError, KeyError, TypeError, ValueError, IndexError) as e:
            log.info("mlgoodput: not using the saved straggler analysis of %s/%s (%s)", logger_name, job_name, e)
    a = StragglerAnalysis(job_name, logger_name, store=st)
    rep = a.report(start, end)
    steps = sum(len(v) for v in a._columns()[0].values())
    if isinstance(st, StateStore) and steps and steps >= min(every, _SAVE_FROM):  # small jobs: cheap again
        try:
            head, upto = st.stream_position(logger_name, job_name, a._cursor)
            if head == a._cursor:  # nothing stored while it read: the analysis is of `upto` events
                doc = {
                    "magic": _MAGIC,
                    "url": getattr(st, "url", None),
                    "cursor": a._cursor,
                    "events": upto,
                    "span": list(a._span),
                    "window": [start, end],
                    "whole": lo <= a._span[0] and a._span[1] <= hi,
                    "report": rep.to_dict(),
                }
                st.save_state(STATE_NAMESPACE, key, [json.dumps(doc).encode()])
        except OSError as e:
            log.info("mlgoodput: cannot save the straggler analysis of %s/%s (%s)", logger_name, job_name, e)
    return rep


def _from_dict(d: dict[str, Any]) -> StragglerReport:
    ranks = tuple(RankStepStats(**r) for r in d["ranks"])
    v = d["verdict"]  # (a saved analysis from before the verdict had one: KeyError, redone)
    return StragglerReport(
        ranks,
        int(d["steps_compared"]),
        float(d["max_spread_s"]),
        StragglerVerdict(**{f: v[f] for f in StragglerVerdict.__slots__}),
    )


def stragglers(
    job_name: str,
    logger_name: str = "goodput",
    *,
    store: Any = None,
    start: float | None = None,
    end: float | None = None,
) -> StragglerReport:
    """The straggler report of a job's stored events (one-off; keep a StragglerAnalysis to
    query again incrementally)."""
    return StragglerAnalysis(job_name, logger_name, store=store).report(start, end)


def compare_step_starts(
    starts: dict[tuple[int, int], dict[int, float]], stats: dict[int, tuple[int, float, float, float]]
) -> StragglerReport:
    """The straggler report of step starts a reader matched itself: `starts` maps (attempt,
    step number) -> rank -> that rank's first start of it; `stats` gives each rank's step
    statistics (steps, median, p90, max seconds: the accounting's host statistics). The same
    per-step sums and verdict as `analyze`, for readers that hold the steps already (the UI)."""
    ranks = sorted(stats)
    lag, lag_n = dict.fromkeys(ranks, 0.0), dict.fromkeys(ranks, 0)
    last, held = dict.fromkeys(ranks, 0), dict.fromkeys(ranks, 0.0)
    late = {r: [0] * BINS for r in ranks}
    pooled = [0] * BINS
    compared, spread, fewest = _sum_steps(list(starts), starts, 0, 0.0, lag, lag_n, last, held, late, pooled, 0)
    rows = [RankStepStats(r, *stats[r], lag[r] / lag_n[r] if lag_n[r] else 0.0, last[r], held[r]) for r in ranks]
    return _verdict(rows, compared, spread, [late[r] for r in ranks], pooled, fewest)
