"""Reducing long series to what a screen can show: min, mean and max per bucket.

A job's step durations are kept as fixed blocks of `BLOCK` steps (count, sum, min, max) that
grow as steps arrive, so a chart of ten million steps merges a few tens of thousands of
blocks instead of scanning ten million numbers, and a live update touches only new steps.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field

from mlgoodput._numpy import numpy as numpy  # one loader: the `fast` extra, $MLGOODPUT_NUMPY

BLOCK = 256
FAST_MIN = 4096  # values below which the pure-Python path is used (numpy is not worth it)


@dataclass(slots=True)
class Blocks:
    """Summaries of consecutive runs of BLOCK values (x: the first x of each block)."""

    x: array[float] = field(default_factory=lambda: array("d"))
    n: array[int] = field(default_factory=lambda: array("q"))
    sum: array[float] = field(default_factory=lambda: array("d"))
    lo: array[float] = field(default_factory=lambda: array("d"))
    hi: array[float] = field(default_factory=lambda: array("d"))
    done: int = 0  # values summarized so far

    tail: int = 0  # raw length of the last block when it is partial, else 0

    def extend(self, xs: Sequence[float], ys: Sequence[float]) -> None:
        """Summarize values from index `done` on; the last, partial block is redone each time."""
        if self.tail:  # reopen the partial last block
            self.done -= self.tail
            for a in (self.x, self.sum, self.lo, self.hi):
                a.pop()
            self.n.pop()
            self.tail = 0
        total = len(ys)
        i = self._extend_fast(xs, ys, self.done, total)
        while i < total:
            j = min(total, i + BLOCK)
            seg = ys[i:j]
            s = sum(seg)
            if s == s:  # no nan in the block (the common case): C-level min and max
                n, lo, hi = j - i, min(seg), max(seg)
            else:
                chunk = [v for v in seg if not math.isnan(v)]
                n, s = len(chunk), sum(chunk)
                lo, hi = (min(chunk), max(chunk)) if chunk else (math.nan, math.nan)
            self.x.append(xs[i])
            self.n.append(n)
            self.sum.append(s)
            self.lo.append(lo)
            self.hi.append(hi)
            if j - i < BLOCK:
                self.tail = j - i
            i = j
        self.done = total

    def _extend_fast(self, xs: Sequence[float], ys: Sequence[float], i: int, total: int) -> int:
        """Summarize the whole blocks from `i` with numpy (the same figures as the loop: sums
        added left to right, NaN left out); returns where the loop goes on."""
        whole = (total - i) // BLOCK * BLOCK
        np = numpy() if whole >= FAST_MIN else None
        if np is None:
            return i
        step = 4096 * BLOCK  # a million values at a time: bounded temporary arrays
        for lo in range(i, i + whole, step):
            hi = min(i + whole, lo + step)
            seg = ys[lo:hi]
            a = np.frombuffer(seg, dtype=np.float64) if isinstance(seg, array) else np.asarray(seg, np.float64)
            a = a.reshape(-1, BLOCK)
            nan = np.isnan(a)
            # cumsum adds in order (a plain sum would pair values up): the loop's own sums
            sums = np.cumsum(np.where(nan, 0.0, a), axis=1)[:, -1]
            self.x.extend(xs[k] for k in range(lo, hi, BLOCK))
            self.n.frombytes((BLOCK - nan.sum(axis=1)).astype(np.int64).tobytes())
            self.sum.frombytes(sums.tobytes())
            self.lo.frombytes(np.fmin.reduce(a, axis=1).tobytes())
            self.hi.frombytes(np.fmax.reduce(a, axis=1).tobytes())
        return i + whole

    def reduce(self, buckets: int) -> tuple[list[float], list[float | None], list[float | None], list[float | None]]:
        """(x, mean, min, max) with at most `buckets` points; None where a bucket has no value."""
        nb = len(self.x)
        if nb == 0:
            return [], [], [], []
        per = max(1, math.ceil(nb / max(1, buckets)))
        xs: list[float] = []
        mean: list[float | None] = []
        lo: list[float | None] = []
        hi: list[float | None] = []
        for k in range(0, nb, per):
            sl = slice(k, k + per)
            vals_lo = [v for v in self.lo[sl] if not math.isnan(v)]
            vals_hi = [v for v in self.hi[sl] if not math.isnan(v)]
            s = sum(self.sum[sl])
            cnt = sum(self.n[sl])
            xs.append(self.x[k])
            mean.append(s / cnt if cnt else None)
            lo.append(min(vals_lo) if vals_lo else None)
            hi.append(max(vals_hi) if vals_hi else None)
        return xs, mean, lo, hi


def minmax_points(xs: Sequence[float], ys: Sequence[float], buckets: int) -> tuple[list[float], list[float]]:
    """A line that keeps every spike: per bucket, its min and max in the order they occur."""
    n = len(xs)
    if n <= 2 * buckets:
        return list(xs), list(ys)
    per = n / buckets
    ox: list[float] = []
    oy: list[float] = []
    for b in range(buckets):
        i0, i1 = int(b * per), min(n, int((b + 1) * per))
        if i1 <= i0:
            continue
        seg = ys[i0:i1]
        lo = min(range(len(seg)), key=seg.__getitem__)
        hi = max(range(len(seg)), key=seg.__getitem__)
        for k in sorted({lo, hi}):
            ox.append(xs[i0 + k])
            oy.append(seg[k])
    return ox, oy
