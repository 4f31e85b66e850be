"""Optional numpy kernels for the hot passes over long columns of floats.

Each kernel gives exactly what the pure-Python code beside its caller gives (bit for bit:
the same IEEE operations element by element, a stable sort), or None when numpy is not
installed (the `fast` extra), is turned off ($MLGOODPUT_NUMPY=0), or the input is short
(under `MIN`: not worth it); the caller then runs its own loop. numpy is imported on first
use, so a query that only meets short columns never pays for the import.
"""

from __future__ import annotations

import sys
from array import array
from typing import Any

from mlgoodput._numpy import numpy as numpy
from mlgoodput._numpy import reset as reset

MIN = 4096  # values below which the pure-Python path is used
MERGE_MIN = 16  # new values from which `merge` beats inserting them one by one


def _out(a: Any, code: str) -> array[Any]:
    res = array(code)
    if not a.flags.c_contiguous:
        a = a.copy()
    res.frombytes(memoryview(a).cast("B"))  # one copy (tobytes() would make two)
    return res


def select(values: array[Any], mask: bytes) -> array[Any] | None:
    """The values whose mask byte is 1 (mask: 0/1 bytes), as `array(code, compress(...))`."""
    if len(values) < MIN:
        return None
    np = numpy()
    if np is None:
        return None
    a = np.frombuffer(values, dtype=np.dtype(values.typecode))
    return _out(a[np.frombuffer(mask, dtype=np.bool_)], values.typecode)


def gaps(times: array[float], lo: int, hi: int) -> array[float] | None:
    """times[i + 1] - times[i] for i in [lo, hi), as `map(operator.sub, ...)` gives them."""
    if hi - lo < MIN:
        return None
    np = numpy()
    if np is None:
        return None
    res = times[lo + 1 : hi + 1]  # one copy, the subtraction done where it lies
    out = np.frombuffer(res, dtype=np.float64)
    np.subtract(out, np.frombuffer(times, dtype=np.float64)[lo:hi], out=out)
    return res


def sort(values: array[float]) -> array[float] | None:
    """The values in order, as `sorted` gives them (a stable sort: equal values keep their order)."""
    if len(values) < MIN:
        return None
    np = numpy()
    if np is None:
        return None
    a = np.frombuffer(values, dtype=np.float64)
    if np.isnan(a).any():
        return None  # sorted() and numpy place NaN differently
    # doubles that compare equal are the same bits, but for 0.0 and -0.0: without a -0.0, any
    # order of equal values is the stable one (and quicksort is about twice as fast)
    kind = "stable" if (np.signbit(a) & (a == 0)).any() else "quicksort"
    res = array("d", values)  # one copy, sorted where it lies (np.sort and _out would make two)
    np.frombuffer(res, dtype=np.float64).sort(kind=kind)
    return res


def bucket_sums(values: array[float], load: int) -> list[float] | None:
    """[sum(values[i : i + load]) for i in range(0, len(values), load)], bit for bit.

    Python 3.11's `sum` of floats adds left to right in doubles from 0.0, which a running sum
    (`cumsum`, one addition after another, no pairwise regrouping) reproduces; from 3.12 `sum`
    compensates its rounding, so None there (the caller sums)."""
    if sys.version_info >= (3, 12) or values.typecode != "d" or len(values) < MIN or load < 1:
        return None
    np = numpy()
    if np is None:
        return None
    a = np.frombuffer(values, dtype=np.float64)
    full = len(a) // load * load
    rows = a[:full].reshape(-1, load)
    out: list[float] = []
    with np.errstate(all="ignore"):  # inf - inf is NaN here as in sum(), without a warning
        for i in range(0, len(rows), 16):  # a few rows at a time: the running sums stay in cache
            # + 0.0: sum() starts from 0.0, so a bucket of only -0.0 sums to 0.0, as here
            out.extend((np.cumsum(rows[i : i + 16], axis=1)[:, -1] + 0.0).tolist())
        if full < len(a):
            out.append(float(np.cumsum(a[full:])[-1] + 0.0))
    return out


def steps_by_one(values: array[int]) -> bool | None:
    """Whether values[i + 1] - values[i] == 1 everywhere (in int64: with values[-1] - values[0]
    == len - 1 checked by the caller, a difference that wraps around cannot pass)."""
    if values.typecode != "q" or len(values) < MIN:
        return None
    np = numpy()
    if np is None:
        return None
    a = np.frombuffer(values, dtype=np.int64)
    return bool((np.diff(a) == 1).all())


def strictly_increasing(values: array[float] | list[float]) -> bool | None:
    """Whether values[i] < values[i + 1] everywhere, as `all(map(operator.lt, ...))` says."""
    if not isinstance(values, array) or values.typecode != "d" or len(values) < MIN:
        return None
    np = numpy()
    if np is None:
        return None
    a = np.frombuffer(values, dtype=np.float64)
    return bool(np.all(a[:-1] < a[1:]))


def maximum(values: array[float]) -> float | None:
    """max(values) for doubles without NaN (None otherwise: `max` and numpy disagree on NaN)."""
    if values.typecode != "d" or len(values) < MIN:
        return None
    np = numpy()
    if np is None:
        return None
    a = np.frombuffer(values, dtype=np.float64)
    m = a.max()
    if np.isnan(m):
        return None
    return float(m)


def merge(ordered: array[float], new: list[float]) -> array[float] | None:
    """`ordered` with the values of `new` (in order, no NaN) put in, as inserting each with
    `bisect.insort` (after equal values) gives: a stable sort of the two runs one after the
    other (numpy merges them), instead of a search and a move per value."""
    if len(new) < MERGE_MIN:
        return None
    np = numpy()
    if np is None:
        return None
    for x in new:
        if x != x:
            return None  # insort and numpy place NaN differently
    out = array("d", ordered)  # one copy, the new values after it, sorted where it lies
    out.extend(new)
    np.frombuffer(out, dtype=np.float64).sort(kind="stable")
    return out


EACH_MIN = 512  # values below which `increasing_each` leaves it to Python (a loop per chunk)


def _clean_chunks(np: Any, bad: Any, sizes: list[int]) -> list[bool]:
    """For chunks of `sizes` values joined into one array, whether each holds no bad pair:
    `bad` lists the j whose pair (a[j], a[j + 1]) is bad; a pair across two chunks counts
    for neither."""
    out = [True] * len(sizes)
    if len(bad):
        ends = np.cumsum(np.asarray(sizes, dtype=np.int64))
        k = np.searchsorted(ends, bad, side="right")  # the chunk that holds a[j]
        for i in k[bad + 1 < ends[k]].tolist():  # a[j + 1] in it too: a pair inside it (repeats do no harm)
            out[i] = False
    return out


def increasing_each(chunks: list[bytes]) -> list[bool] | None:
    """For each chunk of packed doubles (a multiple of 8 bytes, not empty), whether its values
    increase strictly, as `all(map(operator.lt, t[:-1], t[1:]))` says: one pass over them all."""
    got = _joined_chunks(chunks, "float64")
    if got is None:
        return None
    np, a, sizes = got
    bad = np.flatnonzero(~(a[:-1] < a[1:]))  # j: a[j] and a[j + 1] out of order (NaN too)
    return _clean_chunks(np, bad, sizes)


def _joined_chunks(chunks: list[bytes], dtype: str) -> tuple[Any, Any, list[int]] | None:
    """(numpy, the chunks of 8-byte values joined as one array of `dtype`, each chunk's
    count), or None without numpy or below EACH_MIN values in all."""
    sizes = [len(c) >> 3 for c in chunks]
    if sum(sizes) < EACH_MIN:
        return None
    np = numpy()
    if np is None:
        return None
    return np, np.frombuffer(b"".join(chunks), dtype=dtype), sizes


def short_gaps(times: array[float], lo: int, hi: int) -> array[float] | None:
    """`gaps` from `MERGE_MIN` values up (a few new steps of one host: one subtraction in
    numpy instead of a Python float per difference)."""
    if hi - lo < MERGE_MIN:
        return None
    np = numpy()
    if np is None:
        return None
    res = times[lo + 1 : hi + 1]
    out = np.frombuffer(res, dtype=np.float64)
    np.subtract(out, np.frombuffer(times, dtype=np.float64)[lo:hi], out=out)
    return res


def sort_in_place(values: array[float]) -> bool:
    """Sort doubles without NaN in place (a stable sort, as `sorted`); False without numpy."""
    np = numpy()
    if np is None:
        return False
    np.frombuffer(values, dtype=np.float64).sort(kind="stable")
    return True


def by_one_each(chunks: list[bytes]) -> list[bool] | None:
    """For each chunk of packed int64 (a multiple of 8 bytes, not empty), whether each value is
    one more than the one before it in int64 (as `steps_by_one` says of it alone; a difference
    that wraps around passes here too: the caller checks its first and last values): one pass
    over them all."""
    got = _joined_chunks(chunks, "int64")
    if got is None:
        return None
    np, a, sizes = got
    bad = np.flatnonzero(a[1:] - a[:-1] != 1)  # j: a[j + 1] is not a[j] + 1 (arrays wrap silently)
    return _clean_chunks(np, bad, sizes)


ROWS_MIN = 64  # rows below which `firsts_of_rows` leaves it to Python


def firsts_of_rows(values: bytes, counts: list[int]) -> tuple[bool, list[int]] | None:
    """Packed C ints (array "i") cut into rows of `counts` values each (none empty, the lengths
    checked by the caller): (whether every value of each row equals the row's first, each row's
    first value), in one pass over them all."""
    if len(counts) < ROWS_MIN:
        return None
    np = numpy()
    if np is None:
        return None
    a = np.frombuffer(values, dtype=np.intc)
    n = np.asarray(counts, dtype=np.int64)
    firsts = a[np.cumsum(n) - n]
    return bool(np.array_equal(a, np.repeat(firsts, n))), firsts.tolist()


def step_blocks(
    times: bytes, steps: bytes, sizes: list[int]
) -> tuple[bool, list[float], list[float], list[int], list[bool]] | None:
    """Hosts' step starts joined one host after another (packed doubles and int64, `sizes`
    values each, none empty): (whether every host's times increase strictly, as
    `increasing_each` says of each; each host's first time, last time and first number;
    whether each host's numbers count up by one from a first of 0 or more, as `counts_up`
    says), in one pass over them all; None without numpy."""
    np = numpy()
    if np is None:
        return None
    t = np.frombuffer(times, dtype=np.float64)
    s = np.frombuffer(steps, dtype=np.int64)
    n = np.asarray(sizes, dtype=np.int64)
    ends = np.cumsum(n)
    starts = ends - n
    strict = _clean_chunks(np, np.flatnonzero(~(t[:-1] < t[1:])), sizes)
    if not all(strict):
        return False, [], [], [], []
    one = _clean_chunks(np, np.flatnonzero(s[1:] - s[:-1] != 1), sizes)  # (int64 wraps: checked below)
    first, last = s[starts], s[ends - 1]
    # first >= 0 and last >= first: last - first cannot wrap around
    span = (first >= 0) & (last >= first) & (last - first == n - 1)
    counted = list(map(bool.__and__, one, span.tolist()))
    return True, t[starts].tolist(), t[ends - 1].tolist(), first.tolist(), counted
