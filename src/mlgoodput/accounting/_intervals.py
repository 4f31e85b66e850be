"""Sorted, disjoint interval lists: union, clipping, subtraction and measure. Pure functions."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable

Interval = tuple[float, float]
Intervals = list[Interval]  # sorted by start, disjoint, each with start < end


def union(items: Iterable[Interval]) -> Intervals:
    """The union of any intervals, as a sorted disjoint list (empty ones dropped)."""
    out: Intervals = []
    for s, e in sorted(i for i in items if i[1] > i[0]):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1] = (out[-1][0], e)
        else:
            out.append((s, e))
    return out


def measure(xs: Intervals) -> float:
    return sum((e - s for s, e in xs), 0.0)  # a float even when empty (a report value)


def clip(xs: Intervals, lo: float, hi: float) -> Intervals:
    """The parts of `xs` inside [lo, hi]."""
    out: Intervals = []
    for s, e in xs:
        s2, e2 = max(s, lo), min(e, hi)
        if e2 > s2:
            out.append((s2, e2))
    return out


def subtract(xs: Intervals, ys: Intervals) -> Intervals:
    """The parts of `xs` not covered by `ys` (both sorted and disjoint)."""
    out: Intervals = []
    j = 0
    for s, e in xs:
        cur = s
        while j < len(ys) and ys[j][1] <= cur:
            j += 1
        k = j
        while k < len(ys) and ys[k][0] < e:
            ys_s, ys_e = ys[k]
            if ys_s > cur:
                out.append((cur, ys_s))
            cur = max(cur, ys_e)
            if cur >= e:
                break
            k += 1
        if cur < e:
            out.append((cur, e))
    return out


def intersect(xs: Intervals, ys: Intervals) -> Intervals:
    out: Intervals = []
    i = j = 0
    while i < len(xs) and j < len(ys):
        s, e = max(xs[i][0], ys[j][0]), min(xs[i][1], ys[j][1])
        if e > s:
            out.append((s, e))
        if xs[i][1] < ys[j][1]:
            i += 1
        else:
            j += 1
    return out


class Coverage:
    """A sorted disjoint interval list with prefix sums: covered measure in [a, b] in O(log n)."""

    __slots__ = ("ends", "prefix", "starts")

    def __init__(self, xs: Intervals) -> None:
        self.starts = [s for s, _ in xs]
        self.ends = [e for _, e in xs]
        self.prefix = [0.0]
        acc = 0.0
        for s, e in xs:
            acc += e - s
            self.prefix.append(acc)

    def __bool__(self) -> bool:
        return bool(self.starts)

    def _upto(self, t: float) -> float:
        """Covered measure in (-inf, t]."""
        i = bisect_right(self.starts, t)  # intervals starting at or before t
        if i == 0:
            return 0.0
        base = self.prefix[i - 1]
        return base + (min(self.ends[i - 1], t) - self.starts[i - 1])

    def covered(self, a: float, b: float) -> float:
        if b <= a or not self.starts:
            return 0.0
        return self._upto(b) - self._upto(a)

    def gaps(self, a: float, b: float) -> Intervals:
        """The uncovered parts of [a, b], in time order."""
        if b <= a:
            return []
        out: Intervals = []
        cur = a
        i = max(0, bisect_left(self.ends, a))
        while i < len(self.starts) and self.starts[i] < b:
            s, e = self.starts[i], self.ends[i]
            if e > cur:
                if s > cur:
                    out.append((cur, min(s, b)))
                cur = max(cur, e)
                if cur >= b:
                    break
            i += 1
        if cur < b:
            out.append((cur, b))
        return out


class IntervalSet(Coverage):
    """A Coverage built by adding intervals one at a time, mostly near its end (events come in
    time order): the same sorted disjoint list `union` gives for the same intervals (touching
    ones joined), with its prefix sums, kept up to date for the cost of the intervals an add
    merges and those after it.

    `items` is the list of (start, end) pairs (an activity bucket's `Intervals`), the same
    object for the set's life. `overlay` lays passing intervals over the set (a query's open
    activities up to its query time) and `settle` takes them off again: the next change starts
    from the set as the added intervals alone make it.
    """

    __slots__ = ("_saved", "items")

    def __init__(self) -> None:
        super().__init__([])
        self.items: Intervals = []
        self._saved: tuple[int, Intervals] | None = None  # (position, the items from it) before an overlay

    def add(self, s: float, e: float) -> None:
        """Add [s, e] (nothing when empty)."""
        if self._saved is not None:
            self.settle()
        self._put(s, e)

    def _put(self, s: float, e: float) -> None:
        if not e > s:
            return
        starts, ends = self.starts, self.ends
        i = bisect_left(ends, s)  # the first interval ending at or after s: it may join
        j = bisect_right(starts, e)  # the intervals from i up to j touch [s, e]
        if i < j:
            s = min(s, starts[i])
            e = max(e, ends[j - 1])
        starts[i:j] = [s]
        ends[i:j] = [e]
        self.items[i:j] = [(s, e)]
        self._prefix_from(i)

    def _prefix_from(self, i: int) -> None:
        """Prefix sums again from interval i (the ones before it did not change)."""
        p = self.prefix
        del p[i + 1 :]
        acc = p[i]
        for s, e in self.items[i:]:
            acc += e - s
            p.append(acc)

    def truncate(self, t: float) -> None:
        """Keep only what lies at or before t (an interval across t ends there)."""
        if self._saved is not None:
            self.settle()
        i = bisect_left(self.starts, t)  # intervals from i start at or after t
        del self.starts[i:], self.ends[i:], self.items[i:]
        del self.prefix[i + 1 :]
        if i and self.ends[i - 1] > t:
            self.ends[i - 1] = t
            self.items[i - 1] = (self.starts[i - 1], t)
            self.prefix[i] = self.prefix[i - 1] + (t - self.starts[i - 1])

    def overlay(self, extra: Intervals, clip_at: float) -> None:
        """Lay `extra` over the set and cut everything at `clip_at`, until `settle`."""
        if self._saved is not None:
            self.settle()
        starts, ends = self.starts, self.ends
        at = bisect_right(ends, clip_at)  # before it nothing is cut, nor joined by `extra`
        for s, _ in extra:
            at = min(at, bisect_left(ends, s))
        if at == len(starts) and not extra:
            return
        self._saved = (at, self.items[at:])
        for s, e in extra:
            self._put(s, e)
        if ends and ends[-1] > clip_at:
            k = bisect_left(starts, clip_at)  # from k on they start at or after the cut: gone
            del starts[k:], ends[k:], self.items[k:]
            if k and ends[k - 1] > clip_at:
                ends[k - 1] = clip_at
                self.items[k - 1] = (starts[k - 1], clip_at)
            self._prefix_from(max(k - 1, 0))

    def settle(self) -> None:
        """Take the overlay off: the set as its added intervals make it."""
        saved = self._saved
        if saved is None:
            return
        self._saved = None
        at, items = saved
        del self.starts[at:], self.ends[at:], self.items[at:]
        self.starts.extend(s for s, _ in items)
        self.ends.extend(e for _, e in items)
        self.items.extend(items)
        del self.prefix[at + 1 :]
        self._prefix_from(at)
