"""One host's step numbers, stored as runs: nearly free for the usual 0, 1, 2, ... of a job.

Step numbers usually count up by one between restarts, so a run of them is two integers (the
index of its first step and its first number) instead of 8 bytes a step. Numbers that do not
count up by one are kept as they are, in packed segments. Reads are by index (and slices),
so the engine uses this like the array it replaces.
"""

from __future__ import annotations

import operator
import sys
from array import array
from bisect import bisect_right
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from itertools import chain, repeat
from typing import cast, overload

from mlgoodput.accounting import _fast

_MIN_SPLIT = 64  # below this, a batch that does not count up by one is kept as it is
_IOTA = array("q")
_TEMPLATES: dict[int, tuple[int, int]] = {}  # m -> (1, 1, ..., 1) and (0, 1, ..., m-1), packed


def _templates(m: int) -> tuple[int, int]:
    """m ones and 0 .. m-1, each as 8 bytes of one big Python int (batches repeat their sizes)."""
    global _IOTA
    got = _TEMPLATES.get(m)
    if got is None:
        if len(_IOTA) < m:
            _IOTA = array("q", range(max(m, 2 * len(_IOTA), 1 << 16)))
        ones = int.from_bytes((b"\x01" + bytes(7)) * m, sys.byteorder)
        got = (ones, int.from_bytes(memoryview(_IOTA)[:m], sys.byteorder))
        if len(_TEMPLATES) >= 16:
            _TEMPLATES.clear()
        _TEMPLATES[m] = got
    return got


def counts_up(a: array[int]) -> bool:
    """Whether a[i] == a[0] + i for every i: one comparison of big integers, no Python loop."""
    m = len(a)
    if m == 0:
        return True
    x0 = a[0]
    if x0 < 0 or a[-1] - x0 != m - 1:
        return False
    fast = _fast.steps_by_one(a)  # with the check above: every step one more than the last
    if fast is not None:
        return fast
    ones, iota = _templates(m)
    return int.from_bytes(memoryview(a), sys.byteorder) == x0 * ones + iota


class StepNums(Sequence[int]):
    """Step numbers by step index, as runs (`start index -> first number`) and packed segments."""

    __slots__ = ("_base", "_n", "_packed", "_starts")

    def __init__(self, values: Iterable[int] = ()) -> None:
        self._starts = array("q")  # index of each segment's first step
        self._base = array("q")  # a run's first number (unused for a packed segment)
        self._packed: dict[int, array[int]] = {}  # segment number -> its numbers, when packed
        self._n = 0
        self.extend(values)

    def __len__(self) -> int:
        return self._n

    def nbytes(self) -> int:
        return 16 * len(self._starts) + 8 * sum(len(p) for p in self._packed.values())

    @overload
    def __getitem__(self, i: int) -> int: ...
    @overload
    def __getitem__(self, i: slice) -> array[int]: ...
    def __getitem__(self, i: int | slice) -> int | array[int]:
        if isinstance(i, slice):
            lo, hi, step = i.indices(self._n)
            if step != 1:
                return array("q", (self[j] for j in range(lo, hi, step)))
            return self._range(lo, hi)
        if i < 0:
            i += self._n
        if not 0 <= i < self._n:
            raise IndexError("step index out of range")
        k = bisect_right(self._starts, i) - 1
        p = self._packed.get(k)
        off = i - self._starts[k]
        return p[off] if p is not None else self._base[k] + off

    def _segment(self, k: int) -> Iterable[int]:
        end = self._starts[k + 1] if k + 1 < len(self._starts) else self._n
        p = self._packed.get(k)
        return p if p is not None else range(self._base[k], self._base[k] + end - self._starts[k])

    def _range(self, lo: int, hi: int) -> array[int]:
        out = array("q")
        if hi <= lo:
            return out
        starts = self._starts
        for k in range(bisect_right(starts, lo) - 1, len(starts)):
            s = starts[k]
            if s >= hi:
                break
            end = starts[k + 1] if k + 1 < len(starts) else self._n
            a, b = max(lo, s) - s, min(hi, end) - s
            p = self._packed.get(k)
            out.extend(p[a:b] if p is not None else array("q", range(self._base[k] + a, self._base[k] + b)))
        return out

    def __iter__(self) -> Iterator[int]:
        return chain.from_iterable(self._segment(k) for k in range(len(self._starts)))

    def tolist(self) -> list[int]:
        return list(self)

    def extend(self, values: Iterable[int]) -> bool:
        """Append numbers; True when they count up by one (0, 1, 2, ...)."""
        a = values if isinstance(values, array) and values.typecode == "q" else array("q", values)
        return self._add(a)

    def extend_checked(self, a: array[int], by_one: bool) -> bool:
        """`extend` for packed numbers whose differences the caller checked in int64 (`by_one`:
        each is one more than the one before); its first and last are checked here."""
        return self._add(a, by_one and len(a) > 0 and a[0] >= 0 and a[-1] - a[0] == len(a) - 1)

    def last(self) -> int | None:
        """The last number (None when there is none): self[-1] without a search."""
        k = len(self._starts) - 1
        if k < 0:
            return None
        p = self._packed.get(k)
        return p[-1] if p is not None else self._base[k] + self._n - 1 - self._starts[k]

    def run_offset(self, lo: int) -> int | None:
        """When the numbers from index `lo` to the end all lie in the last segment and it is a
        run: that run's first number less its first index (numbers[i] == offset + i there), so
        two hosts of one length with equal offsets hold equal numbers from `lo` on; else None.
        O(1): a report asks it of every host."""
        k = len(self._starts) - 1
        if k < 0 or self._starts[k] > lo or k in self._packed:
            return None
        return self._base[k] - self._starts[k]

    def extend_run(self, first: int, m: int) -> int | None:
        """Append the m > 0 numbers first, first + 1, ... (the caller checked that they count
        up by one from a first of 0 or more): what `extend` does with them, without them.
        Returns the last number before them (`last()` before the call)."""
        k = len(self._starts) - 1
        if k < 0:
            last = None
        else:
            p = self._packed.get(k)
            if p is None:
                last = self._base[k] + self._n - 1 - self._starts[k]
                if last + 1 == first:
                    self._n += m  # it continues the last run
                    return last
            else:
                last = p[-1]
        self._starts.append(self._n)
        self._base.append(first)
        self._n += m
        return last

    def _add(self, a: array[int], counted: bool = False) -> bool:
        m = len(a)
        if m == 0:
            return True
        if counted or counts_up(a):
            self.extend_run(a[0], m)
            return True
        if m >= _MIN_SPLIT:  # a restart or a skip inside: the runs on either side stay runs
            h = m // 2
            self._add(a[:h])
            self._add(a[h:])
            return False
        k = len(self._starts) - 1
        if k >= 0 and k in self._packed:
            self._packed[k].extend(a)
        else:
            self._starts.append(self._n)
            self._base.append(0)
            self._packed[len(self._starts) - 1] = array("q", a)
        self._n += m
        return False

    def to_array(self) -> array[int]:
        return self._range(0, self._n)

    def insert(self, i: int, values: array[int]) -> None:
        """Put `values` (packed int64) before index `i`: the segments after `i` move, the one
        holding `i` is split in two. Costs the segments and the new numbers, never a copy of
        the runs' numbers (a late page of an old part of the job, spliced into place)."""
        if not 0 <= i <= self._n:
            raise IndexError("step index out of range")
        m = len(values)
        if m == 0:
            return
        if i == self._n:
            self._add(values)
            return
        tail = StepNums()
        k = bisect_right(self._starts, i) - 1
        # the part of segment k from i on, then every later segment, go into `tail`
        for j in range(k, len(self._starts)):
            s = self._starts[j]
            end = self._starts[j + 1] if j + 1 < len(self._starts) else self._n
            lo = max(i, s)
            p = self._packed.get(j)
            if p is not None:
                tail._add(p[lo - s : end - s])
            else:
                tail.extend_run(self._base[j] + lo - s, end - lo)
        cut = k + 1 if self._starts[k] < i else k  # keep segment k when it starts before i
        for j in range(cut, len(self._starts)):
            self._packed.pop(j, None)
        if cut == k + 1:
            p = self._packed.get(k)
            if p is not None:
                del p[i - self._starts[k] :]
        del self._starts[cut:]
        del self._base[cut:]
        self._n = i
        self._add(values)
        for j in range(len(tail._starts)):
            end = tail._starts[j + 1] if j + 1 < len(tail._starts) else tail._n
            p = tail._packed.get(j)
            if p is not None:
                self._add(p)
            else:
                self.extend_run(tail._base[j], end - tail._starts[j])

    def state(self) -> tuple[array[int], array[int], array[int], array[int]]:
        """(segment starts, run bases, packed segment numbers, their numbers end to end)."""
        keys = array("q", sorted(self._packed))
        packed = array("q")
        for k in keys:
            packed.extend(self._packed[k])
        return self._starts, self._base, keys, packed

    @classmethod
    def from_state(cls, n: int, starts: array[int], base: array[int], keys: array[int], packed: array[int]) -> StepNums:
        """The inverse of `state` (checked: a mismatch raises ValueError)."""
        s = cls()
        if len(starts) != len(base) or list(starts) != sorted(set(starts)) or (starts and starts[0] != 0):
            raise ValueError("step number segments out of order")
        s._starts, s._base, s._n = array("q", starts), array("q", base), n
        pos = 0
        for k in keys:
            if not 0 <= k < len(starts):
                raise ValueError("packed segment out of range")
            end = starts[k + 1] if k + 1 < len(starts) else n
            length = end - starts[k]
            s._packed[k] = packed[pos : pos + length]
            pos += length
        if pos != len(packed) or (n and not starts):
            raise ValueError("packed step numbers do not match their segments")
        return s


# -- many hosts' numbers a column at a time (thousands of hosts, one step each, every upload) --
_STARTS, _BASE, _PACKED, _N = (operator.attrgetter(a) for a in ("_starts", "_base", "_packed", "_n"))
_LAST = operator.itemgetter(-1)


def _plain_runs(nums: Sequence[StepNums]) -> list[array[int]] | None:
    """Each one's segment starts when every one holds numbers and none a packed segment (all
    runs: the usual), else None."""
    starts: list[array[int]] = list(map(_STARTS, nums))
    if 0 in map(len, starts) or any(map(bool, map(_PACKED, nums))):
        return None
    return starts


def common_run_offset(nums: Sequence[StepNums], lo: int) -> int | None:
    """The run offset (`StepNums.run_offset(lo)`) all of `nums` share, when each has one and
    they are equal; else None. `run_offset` of each, read a column at a time where every one
    is all runs (no Python call a host)."""
    if not nums:
        return None
    starts = _plain_runs(nums)
    if starts is None:
        offs = list(map(StepNums.run_offset, nums, repeat(lo)))
        off = offs[0]
        return off if off is not None and offs.count(off) == len(offs) else None
    tops = list(map(_LAST, starts))
    if max(tops) > lo:
        return None
    offs = list(map(operator.sub, map(_LAST, map(_BASE, nums)), tops))
    off = offs[0]
    return off if offs.count(off) == len(offs) else None


def extend_runs(nums: Sequence[StepNums], firsts: Sequence[int], sizes: Sequence[int]) -> list[int | None]:
    """`StepNums.extend_run(first, m)` of each (nums[i], firsts[i], sizes[i]), their returns:
    a column at a time where each continues its last run (the usual: one host's next steps),
    else one call each."""
    starts = _plain_runs(nums)
    if starts is None:
        return list(map(StepNums.extend_run, nums, firsts, sizes))
    ns: list[int] = list(map(_N, nums))
    # each one's last number: its last run's base + (n - 1 - that run's start)
    lasts: list[int] = list(
        map(
            operator.add,
            map(_LAST, map(_BASE, nums)),
            map(operator.sub, ns, map(operator.add, map(_LAST, starts), repeat(1))),
        )
    )
    if list(map(operator.add, lasts, repeat(1))) != list(firsts):
        return list(map(StepNums.extend_run, nums, firsts, sizes))
    deque(map(setattr, nums, repeat("_n"), map(operator.add, ns, sizes)), maxlen=0)
    return cast("list[int | None]", lasts)


class RunExtender:
    """`extend_runs` across calls with the same list of StepNums, which nothing else changes
    between them (the caller's promise): while each call's numbers continue the runs the last
    call ended (hosts stepping on, block after block), one comparison of the firsts with the
    numbers that call ended at, and each one's count moved on, instead of reading every
    StepNums' runs again."""

    def __init__(self) -> None:
        self._nums: list[StepNums] | None = None
        self._next: list[int] = []  # each one's number after the last call's
        self._ns: list[int] = []  # each one's count after it

    def extend(self, nums: list[StepNums], firsts: list[int], sizes: list[int]) -> tuple[list[int | None], bool]:
        """`extend_runs(nums, firsts, sizes)`, and whether every one continued its last run."""
        if self._nums is nums and self._next == firsts:
            ns = list(map(operator.add, self._ns, sizes))
            deque(map(setattr, nums, repeat("_n"), ns), maxlen=0)
            self._ns, self._next = ns, list(map(operator.add, firsts, sizes))
            return list(map(operator.sub, firsts, repeat(1))), True
        self._nums = None
        lasts = extend_runs(nums, firsts, sizes)
        if lasts.count(None) or list(map(operator.add, cast("list[int]", lasts), repeat(1))) != firsts:
            return lasts, False
        self._nums, self._ns, self._next = nums, lengths(nums), list(map(operator.add, firsts, sizes))
        return lasts, True


def lengths(nums: Iterable[StepNums]) -> list[int]:
    """`len` of each, read a column at a time (`__len__` is a Python call a host)."""
    return list(map(_N, nums))
