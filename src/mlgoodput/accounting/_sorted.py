"""A sorted multiset of floats with sums: the running set of step times behind the ideal step time.

Bucketed (a list of sorted typed arrays of doubles, 8 bytes a value), so inserting, removing,
the k-th value and the sum of values above a threshold cost about the square root of the size
instead of a full sort per query.

Over the buckets lies an index of blocks, each `_BLOCK` consecutive buckets with their count
and sum, refreshed a block at a time: a change to one bucket costs its block again, not a walk
over every bucket, before the next `kth`, `above` or `total` (a split or an emptied bucket
re-reads the blocks' counts and sums, once per about `_LOAD` new values). A total is the
blocks' sums added in order, each block's sum its buckets' sums added in order: with one block
(up to `_BLOCK` buckets, half a million values or more) exactly the sum of the buckets' sums in
order, as before there were blocks; beyond, the same sums grouped by block (a difference in
rounding only), always a function of the buckets' sizes and sums alone, however they came.

Restored from a saved state (`from_pages`), the buckets start unloaded: only their sizes, sums
and largest values are known, and a bucket's values are fetched the first time it is read, so
a query that touches a few buckets reads a few pages of the saved state, not all of it.
"""

from __future__ import annotations

import operator
from array import array
from bisect import bisect_left, bisect_right, insort
from collections.abc import Callable, Iterable
from itertools import accumulate
from math import copysign, isqrt
from typing import Any

from mlgoodput.accounting import _fast

_LOAD = 2048
_SHIFT = 8
_BLOCK = 1 << _SHIFT  # buckets per block of the index (a power of two: block of bucket i is i >> _SHIFT)


#: A bucket not read yet is a range: the positions of its values among the saved packed values
#: (its size then costs what an array's does: no Python-level __len__ in the per-query passes)
Unloaded = range

#: fetch(offset, count): `count` saved values from `offset`, read (and checked) on demand
Fetch = Callable[[int, int], "array[float]"]


class SortedFloats:
    __slots__ = (
        "_bcnt",
        "_bends",
        "_bsum",
        "_buckets",
        "_fetch",
        "_inner",
        "_km",
        "_maxes",
        "_n",
        "_stale",
        "_sums",
        "_tot",
    )

    def __init__(self, values: Iterable[float] | None = None) -> None:
        self._buckets: list[array[float] | range] = []
        self._fetch: Fetch | None = None  # set while some bucket is still a range (not read yet)
        self._maxes: list[float] = []
        self._sums: list[float] = []
        self._n = 0
        # the index: per block of _BLOCK buckets its sum (None: all to be read again after a
        # split, a removed bucket or a new layout) and count; blocks to read again; cumulative
        # block counts; per block the cumulative sizes of its buckets; the total
        self._bsum: list[float] | None = None
        self._bcnt: list[int] = []
        self._stale: set[int] = set()
        self._bends: list[int] | None = None
        self._inner: dict[int, list[int]] = {}
        self._tot: float | None = None
        self._km: dict[int, float] = {}  # k -> the k-th value, while the buckets stay as they are
        if values:
            self._build(sorted(values), own=True)

    def _build(self, ordered: list[float] | array[float], own: bool = False) -> None:
        """Buckets of `_LOAD` values from values in order. `own`: nobody else holds `ordered`,
        so it is cut into buckets from its end, shrinking as they are made (a cold build of
        1e8 values then needs about one copy of them at a time, not two)."""
        self._relayout()
        if not isinstance(ordered, array) or ordered.typecode != "d":
            ordered, own = array("d", ordered), True
        n = len(ordered)
        sums = _fast.bucket_sums(ordered, _LOAD)
        # (slices are copies)
        buckets = _cut(ordered) if own else [ordered[i : i + _LOAD] for i in range(0, n, _LOAD)]
        self._buckets = list(buckets)
        self._maxes = [b[-1] for b in buckets]
        self._sums = sums or [sum(b) for b in buckets]
        self._n = n

    def __len__(self) -> int:
        return self._n

    def _changed(self, i: int) -> None:
        """Bucket i's values (its size or sum) changed, the buckets themselves did not."""
        if self._bsum is not None:
            q = i >> _SHIFT
            self._stale.add(q)
            self._inner.pop(q, None)
        self._bends = None
        self._tot = None
        self._km.clear()

    def _relayout(self) -> None:
        """Buckets were added or removed: every block is read again when next needed."""
        self._bsum = None
        self._stale.clear()
        self._inner.clear()
        self._bends = None
        self._tot = None
        self._km.clear()

    def _index(self) -> list[int]:
        """The cumulative counts of the blocks, after reading again the blocks that changed."""
        bsum = self._bsum
        sums, buckets = self._sums, self._buckets
        if bsum is None:
            starts = range(0, len(buckets), _BLOCK)
            self._bsum = [sum(sums[a : a + _BLOCK]) for a in starts]
            self._bcnt = [sum(map(len, buckets[a : a + _BLOCK])) for a in starts]
            self._stale.clear()
        elif self._stale:
            cnt = self._bcnt
            for q in self._stale:
                a = q << _SHIFT
                bsum[q] = sum(sums[a : a + _BLOCK])
                cnt[q] = sum(map(len, buckets[a : a + _BLOCK]))
            self._stale.clear()
        ends = self._bends
        if ends is None:
            ends = self._bends = list(accumulate(self._bcnt))
        return ends

    def _locate(self, k: int) -> tuple[int, int]:
        """(i, start): bucket i holds the k-th value (0 <= k < the buckets' count), and start
        values come before it."""
        ends = self._index()
        q = bisect_right(ends, k)
        base = ends[q - 1] if q else 0
        inner = self._inner.get(q)
        if inner is None:
            a = q << _SHIFT
            inner = self._inner[q] = list(accumulate(map(len, self._buckets[a : a + _BLOCK])))
        r = bisect_right(inner, k - base)
        return (q << _SHIFT) + r, base + (inner[r - 1] if r else 0)

    def _start(self, i: int) -> int:
        """How many values come before bucket i (0 <= i < the number of buckets)."""
        ends = self._index()
        q, r = i >> _SHIFT, i & (_BLOCK - 1)
        base = ends[q - 1] if q else 0
        if not r:
            return base
        inner = self._inner.get(q)
        if inner is None:
            a = q << _SHIFT
            inner = self._inner[q] = list(accumulate(map(len, self._buckets[a : a + _BLOCK])))
        return base + inner[r - 1]

    def _get(self, i: int) -> array[float]:
        """Bucket i, fetched now if it was not loaded yet."""
        b = self._buckets[i]
        if isinstance(b, range):
            assert self._fetch is not None
            got = self._fetch(b.start, len(b))
            if len(got) != len(b):
                raise ValueError(f"fetched {len(got)} saved values, expected {len(b)}")
            self._buckets[i] = got
            return got
        return b

    def loaded(self) -> int:
        """How many buckets hold their values (the rest are still in the saved state)."""
        return sum(1 for b in self._buckets if not isinstance(b, range))

    def add(self, x: float) -> None:
        if not self._buckets:
            self._buckets, self._maxes, self._sums, self._n = [array("d", (x,))], [x], [x], 1
            self._relayout()
            return
        i = bisect_left(self._maxes, x)
        if i == len(self._maxes):
            i -= 1
        b = self._get(i)
        insort(b, x)
        self._maxes[i] = b[-1]
        self._sums[i] += x
        self._n += 1
        self._changed(i)
        if len(b) > 2 * _LOAD:
            self._split(i)

    def _split(self, i: int) -> None:
        self._relayout()
        b = self._get(i)
        while len(b) > 2 * _LOAD:
            half = b[_LOAD:]
            del b[_LOAD:]
            self._buckets.insert(i + 1, half)
            self._maxes[i] = b[-1]
            self._maxes.insert(i + 1, half[-1])
            self._sums[i] = self._bucket_sum(b)
            self._sums.insert(i + 1, self._bucket_sum(half))
            i += 1
            b = half

    def _bucket_sum(self, b: array[float]) -> float:
        """The sum of a bucket's values, as `_split` stores it for each half."""
        return sum(b)

    def extend(self, xs: list[float] | array[float]) -> None:
        if len(xs) > self._n // 4 + 16:
            if not self._n and isinstance(xs, array) and xs.typecode == "d":
                merged = xs  # the first fill (a cold build): sorted into a new array, no copy first
            else:
                merged = self.values()
                merged.extend(xs)
            self._buckets = []
            self._build(_fast.sort(merged) or sorted(merged), own=True)
        elif len(xs) < 8 or not self._buckets:
            for x in xs:
                self.add(x)
        else:  # a few new values: grouped by the bucket they fall in, bookkeeping once a bucket
            ys = sorted(xs)
            i, last = 0, len(self._buckets) - 1
            while i < len(ys):
                k = min(bisect_left(self._maxes, ys[i]), last)
                j = len(ys) if k == last else bisect_right(ys, self._maxes[k], i)
                group = ys[i:j]
                b = self._get(k)
                into = _fast.merge(b, group)
                if into is not None:
                    b = self._buckets[k] = into
                else:
                    for x in group:  # C-level search and move; the bookkeeping once per bucket
                        insort(b, x)
                self._maxes[k] = b[-1]
                self._sums[k] += sum(group)
                self._n += len(group)
                self._changed(k)
                i = j
                if len(b) > 2 * _LOAD:
                    self._split(k)
                    last = len(self._buckets) - 1

    def remove(self, x: float) -> None:
        i = bisect_left(self._maxes, x)
        if i == len(self._maxes):
            raise ValueError(f"{x!r} not in SortedFloats")
        b = self._get(i)
        j = bisect_left(b, x)
        if j == len(b) or b[j] != x:
            raise ValueError(f"{x!r} not in SortedFloats")
        del b[j]
        self._n -= 1
        if not b:
            del self._buckets[i], self._maxes[i], self._sums[i]
            self._relayout()
        else:
            self._maxes[i] = b[-1]
            self._sums[i] -= x
            self._changed(i)

    def values(self) -> array[float]:
        """All values in order, as one packed array."""
        out = array("d")
        for i in range(len(self._buckets)):
            out.extend(self._get(i))
        return out

    def bucket_sizes(self) -> tuple[array[int], array[float]]:
        """(values per bucket, sum per bucket): with `values`, enough to rebuild without summing."""
        return array("q", map(len, self._buckets)), array("d", self._sums)

    @classmethod
    def from_sorted(
        cls, ordered: array[float], sizes: array[int] | None = None, sums: array[float] | None = None
    ) -> SortedFloats:
        """From values already in order (a snapshot), without sorting (nor summing) again."""
        s = cls()
        if sizes is None or sums is None or len(sizes) != len(sums) or sum(sizes) != len(ordered):
            s._build(ordered)
            return s
        pos = 0
        buckets = []
        for k in sizes:
            if k <= 0:
                raise ValueError("empty bucket in saved sorted values")
            buckets.append(ordered[pos : pos + k])
            pos += k
        s._buckets = list(buckets)
        s._maxes = [b[-1] for b in buckets]
        s._sums = list(sums)
        s._n = len(ordered)
        return s

    @classmethod
    def from_pages(cls, sizes: array[int], sums: array[float], maxes: array[float], fetch: Fetch) -> SortedFloats:
        """Buckets of the given sizes, sums and largest values, whose values `fetch` reads from
        the saved packed values the first time each bucket is used (checked: ValueError)."""
        if not len(sizes) == len(sums) == len(maxes) or any(k <= 0 for k in sizes):
            raise ValueError("saved bucket sizes, sums and maxima do not match")
        if any(map(operator.gt, maxes[:-1], maxes[1:])):
            raise ValueError("saved bucket maxima out of order")
        s = cls()
        pos = 0
        for k in sizes:
            s._buckets.append(range(pos, pos + k))
            pos += k
        s._maxes = list(maxes)
        s._sums = list(sums)
        s._n = pos
        s._fetch = fetch
        return s

    def maxes(self) -> array[float]:
        return array("d", self._maxes)

    def nbytes(self) -> int:
        return self._n * 8

    def kth(self, k: int) -> float:
        """The k-th smallest value, 0-based (found through the index: a block, then a bucket)."""
        got = self._km.get(k)
        if got is not None:
            return got  # (a query with nothing new asks for the same few again)
        if not 0 <= k < self._n:
            raise IndexError(k)
        i, start = self._locate(k)
        got = self._get(i)[k - start]
        km = self._km
        if len(km) >= 16:
            km.clear()
        km[k] = got
        return got

    def median(self) -> float:
        n = self._n
        if n == 0:
            return 0.0
        if n % 2:
            return self.kth(n // 2)
        return (self.kth(n // 2 - 1) + self.kth(n // 2)) / 2.0

    def kth_with(self, k: int, extra: list[float]) -> float:
        """The k-th smallest (0-based) of these values and `extra` (a few, in order) together,
        as `kth` after adding them, without adding them: a query's running steps leave the
        index as it is, so the next query finds it ready."""
        m = len(extra)
        if not m:
            return self.kth(k)
        n = len(self)
        if not 0 <= k < n + m:
            raise IndexError(k)
        # the first k + 1 values together are extra's first j and the first r = k + 1 - j of
        # these, for the j where neither side's next value is below the other side's last taken
        for j in range(max(0, k + 1 - n), min(m, k + 1) + 1):
            r = k + 1 - j
            mine = self.kth(r - 1) if r else None
            if mine is not None and j < m and mine > extra[j]:
                continue
            if j and r < n and extra[j - 1] > self.kth(r):
                continue
            if mine is None:
                return extra[j - 1]
            return mine if not j or mine > extra[j - 1] else extra[j - 1]  # (an added value after equal ones)
        raise AssertionError("no split of the first k + 1 values")  # pragma: no cover (values in order)

    def median_with(self, extra: list[float]) -> float:
        """`median` of these values and `extra` (a few, in order) together, without adding them."""
        n = len(self) + len(extra)
        if n == 0:
            return 0.0
        if n % 2:
            return self.kth_with(n // 2, extra)
        return (self.kth_with(n // 2 - 1, extra) + self.kth_with(n // 2, extra)) / 2.0

    def total(self) -> float:
        """The sum of all values: the blocks' sums in order (kept until a change)."""
        tot = self._tot
        if tot is None:
            self._index()
            assert self._bsum is not None
            tot = self._tot = sum(self._bsum)
        return tot

    def above(self, t: float) -> tuple[int, float]:
        """(count, sum) of the values strictly greater than t: those of the bucket where t
        falls, then the sums of the buckets after it in its block, then of the blocks after."""
        buckets = self._buckets
        i = bisect_right(self._maxes, t)
        if i == len(buckets):
            return 0, 0.0
        b = self._get(i)
        j = bisect_right(b, t)
        count = len(b) - j
        s = sum(b[j:])
        ends = self._index()
        bsum = self._bsum
        assert bsum is not None
        q = i >> _SHIFT
        end = min((q + 1) << _SHIFT, len(buckets))
        if i + 1 < end:
            s = sum(self._sums[i + 1 : end], s)  # added one by one from s, in order
            count += sum(map(len, buckets[i + 1 : end]))
        if q + 1 < len(bsum):
            s = sum(bsum[q + 1 :], s)
            count += ends[-1] - ends[q]
        return count, s


_CUT = 64  # buckets cut from the end of a build's values before they shrink


def _cut(ordered: array[float]) -> list[array[float]]:
    """`ordered` in buckets of `_LOAD` values (the last may be shorter), cut from its end
    `_CUT` buckets at a time, each time deleting what was cut (its memory goes back as it
    shrinks): `ordered` is left empty. Where it cannot shrink (a buffer of it is held), it
    is cut by copies and left as it is."""
    n = len(ordered)
    starts = range(0, n, _LOAD)
    out: list[array[float]] = []
    try:
        for g in range(len(starts) - 1, -1, -_CUT):
            lo = max(0, g - _CUT + 1)
            out.extend(ordered[starts[i] : starts[i] + _LOAD] for i in range(g, lo - 1, -1))
            del ordered[starts[lo] :]
    except BufferError:  # exported: nothing was deleted, so cut all by copies
        return [ordered[i : i + _LOAD] for i in starts]
    out.reverse()
    return out


_SIDE = 8192  # the most values a HostGaps holds aside before merging them into its buckets


def _odd(x: float) -> bool:
    """A NaN or a -0.0: values whose place among equal ones shows in the bits."""
    return x != x or (x == 0.0 and copysign(1.0, x) < 0.0)


class HostGaps(SortedFloats):
    """One host's step gaps: a SortedFloats whose small additions wait in a sorted side list,
    merged into the buckets once it holds about 16 sqrt(n) of them (1024 to `_SIDE`, less by
    a part that differs from host to host), so an update costs about its new values: the
    buckets are rewritten once per merge, not on every update (with new gaps spread like the
    old ones, every update would touch every bucket). Each update sorts the side list again
    (O(side) in numpy) and each merge rewrites the buckets (O(n)): 16 sqrt(n) about balances
    the two at a hundred new values an update.

    Order statistics read buckets and side list together, the buckets' values first among
    equal ones (they came first), as merged buckets give them. Without NaN and -0.0 the
    values in order are the same bits whatever the bucket layout (equal doubles are the same
    bits but for 0.0 and -0.0), so `kth` and `median` are exactly a SortedFloats' extended with
    the same values. A NaN or a -0.0 ends the side list for good (merged then; extended as a
    SortedFloats from then on). After that, which of two equal zeros (0.0, -0.0) a statistic
    gives, or where a NaN sits, depends on the bucket layout, for a SortedFloats too (on when
    its extends came): there the two can differ in those bits, nowhere else.
    Every other use (sums, removal, saving) merges first. Bucket sums are numpy's sums here
    (they only feed `total` and `above`, never a statistic of the host). `append` (hosts
    updated together, _hoststats.update_all) adds to the side list without ordering it: the
    next statistic or merge puts it in order first. `stamp` changes whenever the buckets do."""

    __slots__ = ("_added", "_cap", "_clean", "_hints", "_loose", "_memo", "_side", "stamp")

    _made = 0  # HostGaps made so far: the side lists' sizes are staggered by it

    def __init__(self, values: Iterable[float] | None = None) -> None:
        super().__init__(values)
        self._side: array[float] = array("d")  # in order; after every value of the buckets
        self._loose = False  # values appended to the side list not in order yet (`append`)
        # whether the buckets hold no NaN and no -0.0: True, False (for good), None (not known)
        self._clean: bool | None = None
        self._memo: dict[int, float] | None = None  # k -> k-th (-1: the median) while unchanged
        self._added = 0  # values put in the side list, ever
        # where earlier k-th values were found while the buckets stayed as they are: a part of
        # the whole (16ths) -> (k, side values among the first k + 1, _added then)
        self._hints: dict[int, tuple[int, int, int]] = {}
        # hosts stepping together fill their side lists together: merged at different sizes,
        # they do not all merge on the same update
        HostGaps._made += 1
        self._cap = HostGaps._made * 97 % 512  # in 1024ths of the side list's limit, taken off it
        self.stamp = 0  # bumped whenever the buckets change (a reader's copy of a part of them is stale)

    @classmethod
    def adopt(cls, s: SortedFloats) -> HostGaps:
        """A HostGaps holding what `s` holds (taking over its buckets: leave `s` alone after)."""
        if isinstance(s, HostGaps):
            return s
        g = cls()
        g._buckets, g._fetch, g._maxes, g._sums, g._n = s._buckets, s._fetch, s._maxes, s._sums, s._n
        return g

    def __len__(self) -> int:
        return self._n + len(self._side)

    def pending(self) -> int:
        """Values in the side list (not merged into the buckets yet)."""
        return len(self._side)

    @property
    def merged(self) -> int:
        """Values in the buckets; `pending()` more wait in the side list."""
        return self._n

    @property
    def added(self) -> int:
        """Values ever put in the side list: it changes whenever the side list grows."""
        return self._added

    @property
    def clean(self) -> bool | None:
        """Whether the buckets hold no NaN and no -0.0: True, False (for good), None (not known)."""
        return self._clean

    def remember(self, found: dict[int, float]) -> None:
        """Keep k-th values found outside (k -> value; -1: the median) while nothing changes,
        so that the next `kth` or `median` of one of them answers at once."""
        self._memo = found

    def side_values(self) -> array[float]:
        """The side list itself, not a copy (in order unless `append`ed to since): read it, never change it."""
        return self._side

    def largest_merged(self) -> float:
        """The largest value in the buckets (they must hold one)."""
        return self._maxes[-1]

    def flush(self) -> None:
        """Merge the side list into the buckets (the statistics stay as they are)."""
        side = self._side
        if not side:
            return
        if self._loose:
            self._order()
        self._side = array("d")
        self._hints = {}
        self.stamp += 1
        # (a side list longer than a quarter of the buckets too: with no NaN and no -0.0, every
        # layout of the same values answers the same)
        np: Any = _fast.numpy() if self._clean and self._buckets else None
        if np is None:
            super().extend(side)
            return
        # what `extend` does, in numpy and in place: each value into the first bucket whose
        # largest is not below it (the last takes the rest), after the equal ones there
        maxes, sums = self._maxes, self._sums
        last = len(maxes) - 1
        cuts = [0, *np.searchsorted(np.frombuffer(side, dtype=np.float64), maxes[:last], side="right").tolist()]
        cuts.append(len(side))
        for k in range(last, -1, -1):  # from the last: a split moves only the buckets after it
            lo, hi = cuts[k], cuts[k + 1]
            if lo == hi:
                continue
            part = side[lo:hi]
            b = self._get(k)
            b.extend(part)
            np.frombuffer(b, dtype=np.float64).sort(kind="stable")
            maxes[k] = b[-1]
            sums[k] += float(np.frombuffer(part, dtype=np.float64).sum())
            self._changed(k)
            if len(b) > 2 * _LOAD:
                self._split(k)
        self._n += len(side)

    def _bucket_sum(self, b: array[float]) -> float:
        # numpy's sum here (the halves' sums in `_split` are only sums: not statistics)
        np: Any = _fast.numpy()
        if np is None:
            return super()._bucket_sum(b)
        return float(np.frombuffer(b, dtype=np.float64).sum())

    def extend(self, xs: list[float] | array[float]) -> None:
        k = len(xs)
        if not k:
            return
        self._memo = None
        side = self._side
        if self._clean is not False and k <= self._n // 8:
            if isinstance(xs, array) and xs.typecode == "d" and self._clean and _fast.numpy() is not None:
                # the side list and the new values sorted together in numpy (NaN last): looked at
                # only when that shows something at or below 0 or a NaN (the old list kept till then)
                grown = side + xs
                _fast.sort_in_place(grown)
                self._loose = False
                if (grown[0] > 0.0 and grown[-1] == grown[-1]) or not any(map(_odd, xs)):
                    self._side = grown
                    self._added += k
                    if len(grown) > self._limit():
                        self.flush()
                    return
                pos = False
            else:
                s = sum(xs)
                pos = s == s and min(xs) > 0.0
            if not pos and any(map(_odd, xs)):
                self.flush()
                self._clean = False
            elif self._clean is None:
                self._clean = self._check()
            if self._clean:
                side.extend(xs)
                self._added += k
                self._loose = False
                if not _fast.sort_in_place(side):
                    side[:] = array("d", sorted(side))  # stable: the new values after equal ones aside
                if len(side) > self._limit():
                    self.flush()
                return
        self.flush()
        if self._clean:
            self._clean = None  # xs not looked at
        self.stamp += 1
        super().extend(xs)

    def limit(self) -> int:
        """How many values the side list may hold before they are merged."""
        return self._limit()

    def _limit(self) -> int:
        """How many values the side list may hold before they are merged."""
        most = min(_SIDE, max(1024, isqrt(self._n) << 4))
        return most - (most * self._cap >> 10)

    def _check(self) -> bool:
        """Whether the buckets hold no NaN (a NaN makes its bucket's sum NaN; so does inf - inf,
        which only costs the side list) and no -0.0 (among the values up to the first above 0)."""
        s = SortedFloats.total(self)  # the buckets' (HostGaps.total merges the side list first)
        if s != s:
            return False
        for i in range(len(self._buckets)):
            b = self._get(i)
            if b[0] > 0.0:
                return True
            j = bisect_right(b, 0.0)
            if any(map(_odd, b[:j])):
                return False
            if j < len(b):
                return True
        return True

    def add(self, x: float) -> None:
        self._memo = None
        self.stamp += 1
        if self._side:
            self.flush()
        if self._clean and _odd(x):
            self._clean = False
        super().add(x)

    def remove(self, x: float) -> None:
        self._memo = None
        self.stamp += 1
        self.flush()
        super().remove(x)

    def values(self) -> array[float]:
        self.flush()
        return super().values()

    def bucket_sizes(self) -> tuple[array[int], array[float]]:
        self.flush()
        return super().bucket_sizes()

    def maxes(self) -> array[float]:
        self.flush()
        return super().maxes()

    def nbytes(self) -> int:
        return super().nbytes() + 8 * len(self._side)

    def total(self) -> float:
        self.flush()
        return super().total()

    def above(self, t: float) -> tuple[int, float]:
        self.flush()
        return super().above(t)

    def median(self) -> float:
        if not self._side:
            return super().median()
        memo = self._memo
        if memo is None:
            memo = self._memo = {}
        got = memo.get(-1)
        if got is None:
            if self._loose:
                self._order()
            n = self._n + len(self._side)
            if n % 2:
                got = self._kth(n // 2, False)[1]
            else:
                lo, hi = self._kth(n // 2, True)
                got = (lo + hi) / 2.0
            memo[-1] = got
        return got

    def kth(self, k: int) -> float:
        side = self._side
        if not side:
            return super().kth(k)
        if not 0 <= k < self._n + len(side):
            raise IndexError(k)
        if k == self._n + len(side) - 1:  # the largest: the later of the two largest
            if self._loose:
                self._order()
            top = self._maxes[-1]
            return side[-1] if top <= side[-1] else top
        memo = self._memo
        if memo is None:
            memo = self._memo = {}
        got = memo.get(k)
        if got is None:
            if self._loose:
                self._order()
            got = memo[k] = self._kth(k, False)[1]
        return got

    def _kth(self, k: int, prev: bool) -> tuple[float, float]:
        """(the (k-1)-th if prev (k >= 1) else 0.0, the k-th) smallest of the buckets and the
        side list together, the buckets' values first among equal ones."""
        j, arr, off = self._find(k)
        side = self._side
        # the k-th is the later of main[k - j] and side[j - 1]
        if j and (k == j - 1 or arr[k - j - off] <= side[j - 1]):
            kth, i, s = side[j - 1], k - j, j - 2
        else:
            kth, i, s = arr[k - j - off], k - j - 1, j - 1
        if not prev:
            return 0.0, kth
        # the (k-1)-th: the later of main[i] and side[s] (i or s may be -1: none)
        if s < 0:
            return arr[i - off], kth
        if i < 0 or arr[i - off] <= side[s]:
            return side[s], kth
        return arr[i - off], kth

    def main_index(self, k: int) -> int:
        """Where among the buckets' values (their index in order) the search for the k-th of
        buckets and side list together ends (k - the side values among the first k + 1)."""
        if self._loose:
            self._order()
        return k - self._find(k)[0]

    def append(self, xs: array[float]) -> None:
        """Put values (no NaN, no -0.0; only while the buckets hold none either: `_clean`) in the
        side list without ordering it: it is put in order when next read (a statistic, a merge),
        so values appended update after update are sorted once, not on every update. The
        caller merges (`flush`) when `limit()` is passed."""
        self._memo = None
        self._side.extend(xs)
        self._added += len(xs)
        self._loose = True

    def _order(self) -> None:
        self._loose = False
        side = self._side
        np: Any = _fast.numpy()
        if np is None:
            side[:] = array("d", sorted(side))
        else:  # no NaN, no -0.0 (`append`): equal values are the same bits, in any order
            np.frombuffer(side, dtype=np.float64).sort(kind="quicksort")

    def _find(self, k: int) -> tuple[int, array[float], int]:
        """(j, arr, off): j the side values among the first k + 1 (the buckets' first among
        equal ones); main[t] is arr[t - off] for max(0, k - j - 1) <= t <= k - j."""
        side = self._side
        b, m = len(side), self._n
        # j: how many side values are among the first k + 1; side[j] goes before main[k - j]
        # only if smaller (the buckets' values come first among equal ones)
        lo, hi = max(0, k + 1 - m), min(b, k + 1)
        q = (k << 4) // (m + b)
        hint = self._hints.get(q)
        if hint is not None:
            # a j0 found for k0 with `a` fewer side values: a new side value among the first
            # k0 + 1 puts out at most one old value, so j(k0) is now in [j0, j0 + a]; one more
            # (or one less) k adds at most one side value (or takes one off)
            k0, j0, a = hint
            a = self._added - a
            if k >= k0:
                lo, hi = max(lo, j0), min(hi, j0 + a + k - k0)
            else:
                lo, hi = max(lo, j0 - (k0 - k)), min(hi, j0 + a)
        # main[t] (the buckets' t-th) for k - hi - 1 <= t <= k - lo is arr[t - off]
        arr, off = self._window(max(0, k - hi - 1), min(m, k - lo + 1))
        while lo < hi:
            mid = (lo + hi) // 2
            if side[mid] < arr[k - mid - off]:
                lo = mid + 1
            else:
                hi = mid
        j = lo
        self._hints[q] = (k, j, self._added)
        return j, arr, off

    def rank(self, x: float, right: bool) -> int:
        """How many of the buckets' values are below x (or at most x if `right`; not the side
        list's)."""
        maxes = self._maxes
        i = bisect_right(maxes, x) if right else bisect_left(maxes, x)
        if i == len(maxes):
            return self._n
        b = self._get(i)
        return self._start(i) + (bisect_right(b, x) if right else bisect_left(b, x))

    def part(self, a: int, b: int) -> array[float]:
        """A copy of the buckets' values from the a-th to the (b-1)-th, in order (not the side
        list's; 0 <= a < b <= the buckets' count)."""
        arr, off = self._window(a, b)
        return arr[a - off : b - off]

    def _window(self, a: int, b: int) -> tuple[array[float], int]:
        """(arr, off) with main[t] == arr[t - off] for a <= t < b (0 <= a < the buckets' count,
        a <= b <= it): one bucket itself, or a copy of the part of several."""
        i, start = self._locate(a)
        got = self._get(i)
        end = start + len(got)
        if b <= end:
            return got, start
        out = got[a - start :]
        while end < b:  # end: where bucket i ends, bucket i + 1 starts
            i += 1
            got = self._get(i)
            out.extend(got[: b - end])
            end += len(got)
        return out, a
