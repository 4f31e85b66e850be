"""The block index of SortedFloats (and HostGaps) answers k-th, above() and total() as before it:
order statistics and counts bit for bit as a plain sorted list, sums as the buckets' sums in
order while the buckets fit one block, grouped by block beyond; through adds, removes, extends,
splits, emptied buckets and buckets restored unloaded (`from_pages`), which it does not load."""

from __future__ import annotations

import math
import struct
from array import array
from bisect import bisect_right, insort
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import pairwise
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlgoodput.accounting import _sorted
from mlgoodput.accounting._sorted import HostGaps, SortedFloats


def _bits(x: float) -> bytes:
    return struct.pack("<d", x)


@contextmanager
def _small(shift: int) -> Iterator[int]:
    """Small buckets (4 values) and blocks of 2**shift buckets: many of both in a test."""
    old = _sorted._LOAD, _sorted._SHIFT, _sorted._BLOCK
    _sorted._LOAD, _sorted._SHIFT, _sorted._BLOCK = 4, shift, 1 << shift
    try:
        yield 1 << shift
    finally:
        _sorted._LOAD, _sorted._SHIFT, _sorted._BLOCK = old


def _buckets(s: SortedFloats) -> tuple[list[array[float]], list[float]]:
    """The buckets' values and sums, as the structure holds them (loads every bucket)."""
    sizes, sums = s.bucket_sizes()
    vals = s.values()
    out, pos = [], 0
    for k in sizes:
        out.append(vals[pos : pos + k])
        pos += k
    return out, list(sums)


def _expected_sums(s: SortedFloats, t: float, block: int) -> tuple[float, tuple[int, float]]:
    """(total, above(t)) from the buckets' sums: in order within a block, then the blocks' in
    order; with one block, exactly what the structure gave before it had blocks."""
    buckets, sums = _buckets(s)
    blocks = [sum(sums[a : a + block]) for a in range(0, len(sums), block)]
    total = sum(blocks)
    if len(sums) <= block:
        assert _bits(total) == _bits(sum(sums))  # the sum before blocks: all buckets' in order
    maxes = [b[-1] for b in buckets]
    i = bisect_right(maxes, t)
    if i == len(buckets):
        return total, (0, 0.0)
    b = buckets[i]
    j = bisect_right(b, t)
    count, acc = len(b) - j, sum(b[j:])
    if len(sums) <= block:  # before blocks: one by one over every later bucket
        old = acc
        for k in range(i + 1, len(buckets)):
            old += sums[k]
    q = i // block
    for k in range(i + 1, min((q + 1) * block, len(buckets))):
        acc += sums[k]
    for x in blocks[q + 1 :]:
        acc += x
    count += sum(len(x) for x in buckets[i + 1 :])
    if len(sums) <= block:
        assert _bits(acc) == _bits(old)
    return total, (count, acc)


def _check(s: SortedFloats, ref: list[float], t: float, block: int, rnd_ks: list[int]) -> None:
    n = len(ref)
    assert len(s) == n
    if n:
        for k in {0, n - 1, n // 2, max(0, n // 2 - 1), *(k % n for k in rnd_ks)}:
            assert _bits(s.kth(k)) == _bits(ref[k]), k
        mid = ref[n // 2] if n % 2 else (ref[n // 2 - 1] + ref[n // 2]) / 2.0
        assert _bits(s.median()) == _bits(mid)
    for extra in ([t], [0.0, t], [-0.0], [-0.0, 0.0], [t, t, 10.0], [-1.0], [11.0, 12.0]):
        _check_with(s, ref, extra)
    got_above = s.above(t)
    got_total = s.total()
    total, above = _expected_sums(s, t, block)
    assert got_above[0] == above[0] == sum(1 for x in ref if x > t)
    assert _bits(got_above[1]) == _bits(above[1])
    assert _bits(got_total) == _bits(total)
    assert got_total == pytest.approx(math.fsum(ref), rel=1e-12, abs=1e-12)
    assert got_above[1] == pytest.approx(math.fsum(x for x in ref if x > t), rel=1e-12, abs=1e-12)
    assert list(s.values()) == ref


def _check_with(s: SortedFloats, ref: list[float], extra: list[float]) -> None:
    """kth_with and median_with: the values of `ref` and `extra` together, in order, bit for
    bit, and the structure left as it was (no value added, its index not read again)."""
    both = sorted(ref + extra)
    stale, n = set(s._stale), len(s)
    for k in range(len(both)):
        assert _bits(s.kth_with(k, extra)) == _bits(both[k]), (k, extra)
    m = len(both)
    mid = both[m // 2] if m % 2 else (both[m // 2 - 1] + both[m // 2]) / 2.0
    assert _bits(s.median_with(extra)) == _bits(mid)
    with pytest.raises(IndexError):
        s.kth_with(m, extra)
    assert len(s) == n and set(s._stale) <= stale


_value = st.one_of(st.sampled_from([0.0, 0.1, 0.25, 1.0, 2.5]), st.floats(0.0, 10.0, allow_nan=False))
_op = st.one_of(
    st.tuples(st.just("add"), _value),
    st.tuples(st.just("remove"), st.integers(0, 10**6)),
    st.tuples(st.just("extend"), st.lists(_value, max_size=60)),
    st.tuples(st.just("check"), st.floats(0.0, 10.0, allow_nan=False)),
)


def _run(s: SortedFloats, ref: list[float], ops: list[tuple[str, Any]], block: int, ks: list[int]) -> None:
    for op, arg in ops:
        if op == "add":
            s.add(arg)
            insort(ref, arg)
        elif op == "remove":
            if ref:
                x = ref.pop(arg % len(ref))
                s.remove(x)
        elif op == "extend":
            s.extend(arg)
            ref.extend(arg)
            ref.sort()
        else:
            _check(s, ref, arg, block, ks)
    _check(s, ref, 1.0, block, ks)


@pytest.mark.parametrize("shift", [1, 2, 8])
@pytest.mark.parametrize("kind", [SortedFloats, HostGaps])
@settings(max_examples=40, deadline=None)
@given(
    first=st.lists(_value, max_size=300),
    ops=st.lists(_op, max_size=40),
    ks=st.lists(st.integers(0, 10**6), max_size=4),
)
def test_the_index_answers_as_a_sorted_list(
    shift: int, kind: type[SortedFloats], first: list[float], ops: list[tuple[str, Any]], ks: list[int]
) -> None:
    with _small(shift) as block:
        s = kind(first) if kind is SortedFloats else kind()
        if kind is HostGaps:
            s.extend(first)
        _run(s, sorted(first), ops, block, ks)


@pytest.mark.parametrize("shift", [1, 8])
@pytest.mark.parametrize("kind", [SortedFloats, HostGaps])
@settings(max_examples=30, deadline=None)
@given(
    first=st.lists(_value, min_size=1, max_size=300),
    cuts=st.lists(st.integers(1, 9), min_size=1, max_size=200),
    ops=st.lists(_op, max_size=30),
    ks=st.lists(st.integers(0, 10**6), max_size=4),
)
def test_unloaded_buckets_answer_the_same_and_stay_unloaded(
    shift: int,
    kind: type[SortedFloats],
    first: list[float],
    cuts: list[int],
    ops: list[tuple[str, Any]],
    ks: list[int],
) -> None:
    with _small(shift) as block:
        _restored(kind, first, cuts, ops, ks, block)


def _restored(
    kind: type[SortedFloats], first: list[float], cuts: list[int], ops: list[tuple[str, Any]], ks: list[int], block: int
) -> None:
    base = array("d", sorted(first))
    sizes, pos = array("q"), 0
    for c in cuts:
        if pos >= len(base):
            break
        k = min(c, len(base) - pos)
        sizes.append(k)
        pos += k
    if pos < len(base):
        sizes.append(len(base) - pos)
    starts = [0]
    for k in sizes:
        starts.append(starts[-1] + k)
    sums = array("d", (sum(base[a:b]) for a, b in pairwise(starts)))
    maxes = array("d", (base[b - 1] for b in starts[1:]))
    fetches: list[int] = []

    def fetch(off: int, count: int) -> array[float]:
        fetches.append(off)
        return base[off : off + count]

    s: SortedFloats = SortedFloats.from_pages(sizes, sums, maxes, fetch)
    if kind is HostGaps:
        s = HostGaps.adopt(s)
    n = len(base)
    s.kth(n // 2)
    s.kth(0)
    assert s.loaded() <= 2  # the index counts unloaded buckets without reading them
    s.total()
    assert s.loaded() <= 2
    _run(s, list(base), ops, block, ks)


def test_a_change_reads_again_only_its_block() -> None:
    with _small(1):
        _one_block_read_again()


def _one_block_read_again() -> None:
    s = SortedFloats(float(i) for i in range(400))  # 100 buckets of 4, 50 blocks of 2
    assert s.total() == sum(range(400))
    s.add(10.5)
    assert s._stale == {1}  # the bucket of 10.5 is bucket 2 (8..11), in block 1
    assert s.kth(11) == 10.5 and not s._stale
    assert s.above(10.0) == (390, math.fsum(range(11, 400)) + 10.5)
    s.remove(10.5)
    assert s._stale == {1} and s.total() == sum(range(400))


def test_a_build_cuts_its_own_values_from_their_end() -> None:
    with _small(1):
        vals = array("d", (i / 7 for i in range(1000)))  # 250 buckets of 4: cut in 4 groups
        mine = array("d", vals)
        buckets = _sorted._cut(mine)
        assert len(mine) == 0 and [list(b) for b in buckets] == [list(vals[i : i + 4]) for i in range(0, 1000, 4)]
        held = array("d", vals)
        with memoryview(held):  # exported: cannot shrink, so cut by copies and left whole
            again = _sorted._cut(held)
        assert held == vals and [list(b) for b in again] == [list(b) for b in buckets]
        s = SortedFloats(reversed(vals))  # sorted into a list of its own: cut from its end
        assert list(s.values()) == list(vals) and s.kth(999) == vals[999]
