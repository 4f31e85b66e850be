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
    return sum(e - s for s, e in xs)


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
