"""The straggler analysis's one matcher: step starts of every rank matched by (attempt, step
number) and summed into the per-rank figures and the straggler rule's counts.

There is one way to match and sum (`StepMatcher`); every straggler figure is made by it. It is
incremental because the monitor asks again every upload: at 256 ranks stepping together a
fresh pass over the whole job each time costs seconds, while adding each rank's new step starts
costs the new steps (`bench/bench_stragglers.py`: under 20 ms an upload). A first pass is the
same object fed everything at once.

A step's key is (attempt, step number), the attempt being the count of the rank's job starts at
or before the step. Keys are summed in the order a single pass over the ranks meets them: rank
by rank in the order given, each rank's steps in time order. Float sums depend on that order,
so every path (the numpy block pass included) keeps it.
"""

from __future__ import annotations

import bisect
import copy
import itertools
import math
import operator
from array import array
from collections.abc import Mapping, Sequence
from typing import Any, TypeAlias, cast

from mlgoodput.accounting._fast import numpy as fast_numpy
from mlgoodput.accounting._straggler_rule import BINS, count_late, count_late_block, count_late_full

__all__ = ["Column", "StepMatcher", "sum_steps"]

#: a column of step starts or numbers: packed doubles or int64 (an array, or a view of numpy's)
Column: TypeAlias = "array[Any] | memoryview"

#: new step starts from which the numpy pass pays
LOCKSTEP_MIN = 256
#: (rank, step) starts summed at once by the numpy pass over ranks that step together: the
#: block's temporaries stay small, and no ranks x steps matrix of the whole job is ever made
_CELLS = 1 << 18


class StepMatcher:
    """Each rank's step starts matched by (attempt, step number), summed as they arrive.

    The per-step totals are summed once for the prefix of steps every rank has reported
    (`freeze`), again at each report for the rest. `add` refuses (returns False; the caller
    starts over with a fresh matcher) anything that would reorder or change what was summed:
    a step earlier than a rank's last, a job start before a rank's last step."""

    TAIL = 4096  # steps beyond which a step some rank never reported is summed anyway

    def __init__(self, job_starts: Mapping[int, Sequence[float]], ranks: Sequence[int]) -> None:
        self.js = {r: list(v) for r, v in job_starts.items()}
        self.ranks = list(ranks)
        self.index = {r: i for i, r in enumerate(self.ranks)}
        n = len(self.ranks)
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
        self.ids: Any = None  # the ranks as a numpy column (`_sum_block`)
        self.every: Any = None  # every rank index, in numpy (`_lockstep`)

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
        js = self.js.setdefault(rank, [])
        bisect.insort(js, t)
        i = self.index.get(rank)
        if i is not None:
            self.att[i], self.js_last[i] = len(js), js[-1]
        return True

    def add(self, new: Mapping[int, Sequence[tuple[float, int]]], *, freeze: bool = True) -> bool:
        """Each rank's new (time, step) starts (a rank's stored twice count once)."""
        for r in self.ranks:  # rank order, as one pass meets them
            seq = list(new.get(r, ()))
            if not seq:
                continue
            i = self.index[r]
            if not all(map(operator.lt, seq, itertools.islice(seq, 1, None))):  # else already sorted(set(seq))
                seq = sorted(set(seq))
            prev = self._last(r)
            if prev is not None:
                if seq[0] < prev:
                    return False
                if seq[0] == prev:
                    seq = seq[1:]
            if not seq:
                continue
            js = self.js.get(r, [])
            intro, starts, segs = self.intro, self.starts, self.segs
            if not js or js[-1] <= seq[0][0]:  # one attempt for all of them (the usual case)
                att = len(js)
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
            else:
                for t, n in seq:
                    key = (bisect.bisect_right(js, t), n)
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
            self._set_last(r, seq[-1])
        if freeze:
            self.freeze()
        return True

    def add_columns(self, new: Mapping[int, tuple[Column, Column]]) -> bool:
        """`add` of each rank's new step starts given as (times, step numbers) columns. The
        usual case (every rank in one attempt, each rank's new steps later than its earlier
        ones, every step met first by rank index 0) takes a few numpy passes (`_lockstep`),
        bit for bit what `add` gives; anything else, or no numpy, goes through `add`. When
        every rank's numbers are one and the same column object (every rank stepped through
        the same steps: the caller shares it), the steps are summed straight from the ranks'
        columns, a block of steps at a time (`_aligned`): no copy of the columns is made."""
        np = fast_numpy()
        if np is not None and self.moved == 0:
            cols = [new[r] for r in self.ranks if r in new]
            if (
                len(cols) == len(self.ranks)
                and all(map(operator.is_, map(_NUMBERS, cols), itertools.repeat(cols[0][1] if cols else None)))
                and self._aligned(np, list(map(_STARTS, cols)), cols[0][1] if cols else None)
            ):
                return True
            order = [r for r in self.ranks if r in new and len(new[r][0])]
            tcols = [new[r][0] for r in order]
            lens = list(map(len, tcols))
            total = sum(lens)
            if total >= LOCKSTEP_MIN:
                tb, nb = b"".join(tcols), b"".join([new[r][1] for r in order])
                if len(tb) == 8 * total and len(nb) == 8 * total:  # packed doubles and 64-bit steps
                    tv = np.frombuffer(tb, dtype=np.float64)
                    nv = np.frombuffer(nb, dtype=np.int64)
                    if self._lockstep(np, [self.index[r] for r in order], lens, tv, nv):
                        return True
        return self.add({r: list(zip(t, n, strict=True)) for r, (t, n) in new.items()})

    def add_aligned(self, starts: list[Column], nums: Column) -> bool:
        """`add_columns` of every rank's new starts, `starts[i]` rank index i's, all numbered by
        the one column `nums` (ranks stepping together: a reader that has them so hands them
        over as they are, no mapping of thousands of ranks made and read back)."""
        np = fast_numpy()
        if np is not None and len(starts) == len(self.ranks) and self._aligned(np, starts, nums):
            return True
        return self.add_columns(dict(zip(self.ranks, zip(starts, itertools.repeat(nums)), strict=True)))

    def _aligned(self, np: Any, tcols: list[Column], nums: Column | None) -> bool:
        """`add(...)` then `freeze()` when every rank (in rank order: `tcols[i]` is rank index
        i's new starts) has new steps numbered by one shared column `nums`, each rank's later than its earlier
        ones, all in the one attempt every rank is in, and nothing is waiting to be summed:
        every new step is then met first by rank index 0 and reported by every rank, so it is
        summed at once. Few new steps (an upload's: one block) are copied side by side and
        checked a numpy pass each; more are read in place (numpy views of the ranks' columns),
        a block of steps at a time (`_sum_full`). False (nothing changed) when the case does
        not apply."""
        n_ranks = len(self.ranks)
        if n_ranks < 2 or nums is None or self.moved or len(self.segs[0]) > self.frozen:
            return False
        n = len(nums)
        if n == 0 or n * n_ranks < LOCKSTEP_MIN:
            return False
        if not (
            _packed(nums, "ql") and all(map(operator.eq, map(len, tcols), itertools.repeat(n))) and _all_doubles(tcols)
        ):
            return False
        nv = np.frombuffer(nums, dtype=np.int64)
        atts = np.frombuffer(self.att, dtype=np.int64)
        att = int(atts[0])
        if (atts != att).any():
            return False
        if n > 1 and not (nv[1:] > nv[:-1]).all():
            return False
        whole = n * n_ranks <= _CELLS  # one block: the ranks' new starts side by side, one copy
        tv: Any = None
        if whole:  # (checked a numpy pass each: not a few numpy calls a rank, at thousands of ranks)
            tv = np.frombuffer(bytearray(b"".join(tcols)), dtype=np.float64).reshape(n_ranks, n)
            t0, t1 = tv[:, 0], tv[:, -1]
            rising = n < 2 or bool((tv[:, 1:] > tv[:, :-1]).all())
        else:  # read in place, rank by rank
            tvs = [np.frombuffer(t, dtype=np.float64) for t in tcols]
            t0 = np.array([t[0] for t in tcols], dtype=np.float64)
            t1 = np.array([t[-1] for t in tcols], dtype=np.float64)
            rising = n < 2 or all(bool((t[1:] > t[:-1]).all()) for t in tvs)
        # finite, strictly later step after step (a NaN fails the comparisons), after the
        # rank's last job start and its last step
        if not (rising and np.isfinite(t0).all() and np.isfinite(t1).all()):
            return False
        if not (np.frombuffer(self.js_last, dtype=np.float64) <= t0).all():
            return False
        has = np.frombuffer(self.has_last, dtype=np.uint8).astype(bool)
        later = (t0 > np.frombuffer(self.last_t, dtype=np.float64)) & (
            int(nv[0]) > np.frombuffer(self.last_n, dtype=np.int64)
        )
        if (has & ~later).any():
            return False
        keys = list(zip(itertools.repeat(att, n), nv.tolist(), strict=True))  # (attempt, step number)
        intro = self.intro
        if intro and any(k in intro for k in keys):
            return False  # a step already summed
        # -- the case applies: the same changes as `add` then `freeze`
        self.has_last[:] = b"\x01" * n_ranks
        np.frombuffer(self.last_t, dtype=np.float64)[:] = t1
        np.frombuffer(self.last_n, dtype=np.int64)[:] = int(nv[-1])
        intro.update(dict.fromkeys(keys, 0))
        self.segs[0].extend(keys)
        if whole:
            self._sum_full(np, tv)  # (its scratch: a copy already)
        else:
            step = max(1, _CELLS // n_ranks)
            blk = np.empty((n_ranks, min(step, n)))
            for c0 in range(0, n, step):
                b = blk[:, : min(step, n - c0)]
                np.stack([t[c0 : c0 + step] for t in tvs], out=b)
                self._sum_full(np, b)
        self.frozen += n
        return True

    def _lockstep(self, np: Any, pos: list[int], lens: list[int], tv: Any, nv: Any) -> bool:
        """`add(...)` then `freeze()` for the lockstep case, in numpy: the new steps of all ranks
        as one block (rank by rank in rank order: `lens[j]` steps of rank index `pos[j]`, none
        empty), checked and summed a pass each; False (nothing changed) when the case does not
        apply."""
        if self.moved:
            return False
        ranks, index = self.ranks, self.index
        total = len(tv)
        if np.isnan(tv).any():  # (a NaN start: `add` says what it means)
            return False
        if len(pos) == len(ranks):  # every rank (the usual case): in index order
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
        if not pend and len(pos) == full and lens.count(len(cols)) == full and (nv.reshape(full, -1) == cols).all():
            mat = tv.reshape(full, -1)  # every rank has exactly rank index 0's new steps (read only)
        else:
            rv = np.repeat(idx, lv)  # each new step's rank index
            srt = np.argsort(cols, kind="stable")
            at_col = np.minimum(np.searchsorted(cols[srt], nv), len(cols) - 1)
            cv = srt[at_col]
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
        # -- from here on the case applies: the same changes as `add` then `freeze`
        np.frombuffer(self.has_last, dtype=np.uint8)[idx] = 1
        np.frombuffer(self.last_t, dtype=np.float64)[idx] = tv[ends]
        np.frombuffer(self.last_n, dtype=np.int64)[idx] = nv[ends]
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
            got = np.flatnonzero(present[:, c])
            # (the ranks already in st: the same values, from st; the others in rank order)
            st.update(zip(map(ranks.__getitem__, got.tolist()), mat[got, c].tolist(), strict=True))
        self.frozen += stop
        return True

    _BLOCK = 4096  # columns summed at once (bounds the temporaries of a first report)

    def _sum_block(self, np: Any, blk: Any, present: Any, cnt: Any) -> None:
        """`sum_steps` over the columns of blk (rank index x step, NaN: not reported; `cnt`: the
        ranks that reported each), in column order: the same operations on the same values per
        rank, so the same sums (each rank's lags added one step after the other, never a
        pairwise sum)."""
        valid = cnt >= 2
        if not valid.all():
            if not valid.any():
                return
            blk, present = blk[:, valid], present[:, valid]
            cnt = cnt[valid]
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
                self._sum_full(np, np.array(b))
                continue
            c = cnt[c0 : c0 + self._BLOCK]
            fewest = int(c.min())
            self.min_ranks = fewest if not self.min_ranks or fewest < self.min_ranks else self.min_ranks
            mn = np.where(p, b, np.inf).min(axis=0)
            mx = np.where(p, b, -np.inf).max(axis=0)
            dd = np.where(p, b - mn, 0.0)  # adding 0.0 to a sum of non-negative terms changes nothing
            late = np.where(p & (b == mx), self.ids, low).argmax(axis=0)
            second = np.sort(np.where(p, b, -np.inf), axis=0)[-2]
            # each rank's sum in step order, one step after the other: a running sum along the
            # row (never numpy's pairwise sum), the totals so far in front
            lag[:] = np.add.accumulate(np.concatenate((lag[:, None], dd), axis=1), axis=1)[:, -1]
            # each step's lead added to its late rank's, one step after the other (`at`: in order)
            np.add.at(held, late, mx - second)
            last_steps += np.bincount(late, minlength=len(ranks))
            self.max_spread = max(self.max_spread, float((mx - mn).max()))
            count_late_block(np, b, p, counts, pooled)  # the straggler rule's counts
            np.frombuffer(self.lag_n, dtype=np.int64)[:] += p.sum(axis=1)
            self.compared += int(b.shape[1])

    def _sum_full(self, np: Any, b: Any) -> None:
        """`_sum_block` of a block in which every rank reported every step (rank index x step,
        two ranks or more; used as scratch: overwritten): the same values, from one sort of
        each step's starts (its earliest, latest, next-latest and middle ones)."""
        n, k = b.shape
        bt = b.T.copy()  # step x rank: each step's starts side by side
        first = bt.argmax(axis=1)  # the latest rank of each step (the first of a tie)
        bt.sort(axis=1)
        # (contiguous: the earliest is read again for every rank's row)
        mn, mx, second = (np.ascontiguousarray(bt[:, j]) for j in (0, -1, -2))  # (a tie: second == mx)
        tie = second == mx
        if tie.any():  # of the ranks tied latest, the highest rank, as `sum_steps` orders them
            if self.ids is None:
                self.ids = np.array(self.ranks, dtype=np.int64)[:, None]
            at = np.flatnonzero(tie)
            first[at] = np.where(b[:, at] == mx[at], self.ids, np.iinfo(np.int64).min).argmax(axis=0)
        self.min_ranks = n if not self.min_ranks or n < self.min_ranks else self.min_ranks
        np.add.at(np.frombuffer(self.held, dtype=np.float64), first, mx - second)  # (in step order)
        np.frombuffer(self.last_steps, dtype=np.int64)[:] += np.bincount(first, minlength=n)
        self.max_spread = max(self.max_spread, float((mx - mn).max()))
        counts = np.frombuffer(self.late, dtype=np.int64).reshape(n, BINS)
        count_late_full(np, b, bt, counts, np.frombuffer(self.pooled, dtype=np.int64))
        # each rank's lags summed one step after the other (a running sum along its row, the
        # total so far added to the first: a + b == b + a), never numpy's pairwise sum
        lag = np.frombuffer(self.lag, dtype=np.float64)
        np.subtract(b, mn, out=b)
        b[:, 0] += lag
        np.add.accumulate(b, axis=1, out=b)
        lag[:] = b[:, -1]
        np.frombuffer(self.lag_n, dtype=np.int64)[:] += k
        self.compared += k

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
        if not self.segs:
            return
        seg, starts = self.segs[0], self.starts
        full = len(self.ranks)
        stop = self.frozen
        while stop < len(seg) and (len(starts[seg[stop]]) == full or len(seg) - stop > self.TAIL):
            stop += 1
        if stop == self.frozen:
            return
        keys = seg[self.frozen : stop]
        lag, lag_n, last, held = self._totals()
        late = self._late_rows(copy=False)  # (counts: added in place)
        self.compared, self.max_spread, self.min_ranks = sum_steps(
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

    def totals(
        self, order: Sequence[int]
    ) -> tuple[int, float, int, list[float], list[int], list[int], list[float], Any, Any]:
        """The sums of every step met so far, the rest summed on copies: (compared, max spread,
        fewest ranks of a compared step, and for the ranks of `order`, in it: lag sums, lag
        counts, last steps, held back, late counts by bin), and the pooled counts."""
        compared, max_spread, min_ranks = self.compared, self.max_spread, self.min_ranks
        late: Any
        pooled: Any = self.pooled
        pending = self.moved or (self.segs and len(self.segs[0]) > self.frozen)
        src = self._summed_copy() if pending else self
        if src is not None:
            compared, max_spread, min_ranks, pooled = src.compared, src.max_spread, src.min_ranks, src.pooled
        if src is None:  # steps not summed for good: on copies, a step at a time
            lag_d, lag_n_d, last_d, held_d = self._totals()
            late_d, pooled = self._late_rows(copy=True), array("q", self.pooled)
            for j, seg in enumerate(self.segs):
                keys = seg[self.frozen :] if j == 0 else seg
                if keys:
                    compared, max_spread, min_ranks = sum_steps(
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
            lag, lag_n = [lag_d[r] for r in order], [lag_n_d[r] for r in order]
            last, held = [last_d[r] for r in order], [held_d[r] for r in order]
            late = [late_d[r] for r in order]
        else:  # the totals by rank index, in the order asked
            own = list(order) == self.ranks
            if own:  # (the usual: the ranks' own order, whole columns)
                at: list[int] = list(range(len(order)))
                lag, lag_n = src.lag.tolist(), src.lag_n.tolist()
                last, held = src.last_steps.tolist(), src.held.tolist()
            else:
                at = list(map(self.index.__getitem__, order))
                lag, lag_n = list(map(src.lag.__getitem__, at)), list(map(src.lag_n.__getitem__, at))
                last, held = list(map(src.last_steps.__getitem__, at)), list(map(src.held.__getitem__, at))
            np = fast_numpy() if len(at) > 8 else None
            if np is not None:  # (the verdict sums each rank's bins in one pass)
                late = np.frombuffer(src.late, dtype=np.int64).reshape(len(self.ranks), BINS)
                # the ranks' own order: the counts themselves, read only (the verdict keeps
                # nothing of them), not a copy of thousands x BINS counts an upload
                late = late if own else late[at]
            else:
                late = [src.late[i * BINS : (i + 1) * BINS] for i in at]
        return compared, max_spread, min_ranks, lag, lag_n, last, held, late, pooled

    def _summed_copy(self) -> StepMatcher | None:
        """A copy of this matcher's totals with the steps not summed for good added, in the
        order `totals` adds them (segs[0]'s unfrozen keys, then each later rank's), by the
        numpy block pass (`_sum_block`: the same sums as `sum_steps`): at thousands of ranks
        an upload that caught some ranks' latest step and not the others' pays a few numpy
        passes, not a sort and a Python loop over the ranks of each such step. None (the
        caller sums them step by step) without numpy, for few ranks, or with a start that is
        not finite."""
        n = len(self.ranks)
        np = fast_numpy() if n > 8 else None
        if np is None:
            return None
        keys = [k for j, seg in enumerate(self.segs) for k in (seg[self.frozen :] if j == 0 else seg)]
        index, starts = self.index, self.starts
        rows: list[int] = []
        at: list[int] = []
        ts: list[float] = []
        for c, key in enumerate(keys):
            st = starts[key]
            rows.extend(map(index.__getitem__, st))
            at.extend(itertools.repeat(c, len(st)))
            ts.extend(st.values())
        vals = np.array(ts, dtype=np.float64)
        if not np.isfinite(vals).all():
            return None
        mat = np.zeros((n, len(keys)))
        present = np.zeros((n, len(keys)), dtype=bool)
        mat[rows, at] = vals
        present[rows, at] = True
        sh = copy.copy(self)  # (its own totals; what `_sum_block` reads of the rest: shared, unchanged)
        sh.lag, sh.lag_n = array("d", self.lag), array("q", self.lag_n)
        sh.last_steps, sh.held = array("q", self.last_steps), array("d", self.held)
        sh.late, sh.pooled = array("q", self.late), array("q", self.pooled)
        sh._sum_block(np, mat, present, present.sum(axis=0))
        return sh


def _all_doubles(cols: Sequence[Column]) -> bool:
    """Whether every column holds packed doubles: arrays' type codes read a column at a time
    (thousands of ranks), anything else one by one."""
    if all(map(isinstance, cols, itertools.repeat(array))):
        return all(map(operator.eq, map(_TYPECODE, cast("Sequence[array[Any]]", cols)), itertools.repeat("d")))
    return all(map(_doubles, cols))


_STARTS, _NUMBERS = operator.itemgetter(0), operator.itemgetter(1)  # a rank's (starts, numbers) columns
_TYPECODE = operator.attrgetter("typecode")


def _doubles(col: Column) -> bool:
    """Whether `col` holds packed doubles (an array of them: no memoryview made)."""
    if isinstance(col, array):
        return col.typecode == "d"
    return _packed(col, "d")


def _packed(col: Column, codes: str) -> bool:
    """Whether `col` holds packed 8-byte values of one of the struct `codes` (one dimension)."""
    mv = memoryview(col)
    return mv.ndim == 1 and mv.itemsize == 8 and mv.format in codes and mv.c_contiguous


def sum_steps(
    keys: Sequence[tuple[int, int]],
    starts: Mapping[tuple[int, int], Mapping[int, float]],
    compared: int,
    max_spread: float,
    lag: dict[int, float],
    lag_n: dict[int, int],
    last: dict[int, int],
    held: dict[int, float],
    late: Mapping[int, Any],
    pooled: Any,
    min_ranks: int,
) -> tuple[int, float, int]:
    """The per-step sums over `keys` in order, added into the totals given (and the straggler
    rule's counts: `late` by rank, `pooled`); -> (compared, max spread, fewest ranks of a
    compared step). Each step: every rank's lag behind the earliest, the last rank's lead over
    the next-latest (what it held the others back), the rule's lateness counts."""
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


_BY_TIME_RANK = operator.itemgetter(1, 0)  # (rank, time) -> (time, rank)
