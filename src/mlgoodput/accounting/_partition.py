"""The report's partition placed in time: which bucket each second of the job went to.

A report sums seconds per bucket; the same rules (spec/accounting.md) also say where each
of those seconds lies: claimed activities by priority, each step's unclaimed time as its
startup, productive (or wasted) time and stall, and OTHER for the rest. The segments here
are built from those rules, not from a second reading of the events, so the seconds per
bucket of `partition` equal the report's (to float rounding) and a timeline drawn from them
is the breakdown table laid out in time.

Most steps are plain (no claim, measured compile or step_end reaches them, neither first nor
last of their attempt, not redone): a run of them that does not stall is one productive
segment, found with numpy where it is there; every other step is placed by the report's own
per-step code (`Query.step_pieces`).
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING

from mlgoodput.accounting import _fast
from mlgoodput.accounting._intervals import Intervals, union
from mlgoodput.accounting._query import Query
from mlgoodput.accounting._report import BadputType

if TYPE_CHECKING:
    from mlgoodput.accounting._engine import Engine

#: the bucket of a step piece (`Query.step_pieces`) as the report names it
_STEP_BUCKET = {
    "startup": "program_startup",
    "productive": "productive",
    "wasted": "wasted_progress_from_disruption",
    "stall": "stall",
}
_EPS = 1e-12  # touching segments of one bucket closer than this are one


@dataclass(frozen=True, slots=True)
class Segment:
    """[start, end] of one bucket: "productive", a badput bucket as `GoodputReport.to_dict`
    names it ("stall", "other", ...), or "custom_badput_events:NAME" for a custom one."""

    start: float
    end: float
    bucket: str

    @property
    def seconds(self) -> float:
        return self.end - self.start


def bucket_name(key: object) -> str:
    """The report's name of an activity bucket (a BadputType, or ("custom", NAME))."""
    if isinstance(key, tuple):
        return f"custom_badput_events:{key[1]}"
    assert isinstance(key, BadputType), key
    return key.name.lower()


def partition(
    engine: Engine, q: float, start: float | None, end: float | None, configured: float | None
) -> list[Segment]:
    """The segments of the lead host's job in [start, end] (default: the whole job) as of q,
    sorted and disjoint, covering the window whole; what `engine.report` sums."""
    found = engine.query(q, start, end, configured)
    if found is None or found[2] <= found[1]:
        return []
    ctx, a, b = found
    raw: list[tuple[float, float, str]] = []
    for key, xs in engine.claimed(ctx.acts, ctx, a, b):
        name = bucket_name(key)
        raw.extend((x, y, name) for x, y in xs)
    _steps(engine, ctx, a, b, raw)
    raw.sort()
    covered: Intervals = union([(x, y) for x, y, _ in raw])
    cur = a
    for x, y in [*covered, (b, b)]:  # what nothing covers is OTHER (float slivers left out)
        if x - cur > _EPS:
            raw.append((cur, min(x, b), "other"))
        cur = max(cur, y)
    raw.sort()
    return _joined(raw)


def _steps(engine: Engine, ctx: Query, a: float, b: float, out: list[tuple[float, float, str]]) -> None:
    """Each step's pieces inside [a, b], plain runs in one segment each."""
    log = ctx.log
    times = log.times
    redone = ctx.redone()
    wasted: set[int] = set()
    for _, lo, hi in redone:
        wasted.update(range(lo, hi))
    special = engine.touched(log, ctx.acts)
    stall = engine.stall_factor * ctx.ideal
    for k, att in enumerate(ctx.atts):
        if att.i1 == att.i0 or att.end < a or att.start > b:
            continue
        i0 = max(att.i0, bisect_right(times, a, att.i0, att.i1) - 1)
        i1 = bisect_right(times, b, att.i0, att.i1)
        cuts = {att.i0, att.i1 - 1, *special.range(i0, i1), *(i for i in wasted if i0 <= i < i1)}
        long = _long_gaps(times, i0, i1, stall)  # every step of the range that runs past the limit
        start = i0
        for i in sorted(c for c in cuts if i0 <= c < i1):
            if i > start:
                _plain(times, start, i, long, ctx.ideal, a, b, out)
            start = i + 1
            for key, x, y in ctx.step_pieces(k, i, i in wasted):
                lo_t, hi_t = max(x, a), min(y, b)
                if hi_t > lo_t:
                    out.append((lo_t, hi_t, _STEP_BUCKET[key]))
        if i1 > start:
            _plain(times, start, i1, long, ctx.ideal, a, b, out)


def _long_gaps(ts: array[float], lo: int, hi: int, stall: float) -> list[int]:
    """Indices i in [lo, hi) whose gap to the next step start is over `stall`, in order."""
    hi = min(hi, len(ts) - 1)
    if hi <= lo:
        return []
    np = _fast.numpy()
    if np is not None and hi - lo >= _fast.MIN:
        t = np.frombuffer(ts, dtype=np.float64)
        return (np.nonzero(t[lo + 1 : hi + 1] - t[lo:hi] > stall)[0] + lo).tolist()  # type: ignore[no-any-return]
    return [i for i in range(lo, hi) if ts[i + 1] - ts[i] > stall]


def _plain(
    ts: array[float],
    lo: int,
    hi: int,
    long: list[int],
    ideal: float,
    a: float,
    b: float,
    out: list[tuple[float, float, str]],
) -> None:
    """Plain steps lo..hi-1: productive from their start for their gap, or for the ideal step
    time and the rest stall when the gap is longer than the stall limit (`long`)."""
    run = lo
    for j in range(bisect_left(long, lo), bisect_left(long, hi)):
        i = long[j]
        s, e = ts[i], ts[i + 1]
        _add(ts[run], s + ideal, "productive", a, b, out)
        _add(s + ideal, e, "stall", a, b, out)
        run = i + 1
    if hi > run:
        _add(ts[run], ts[hi], "productive", a, b, out)


def _add(x: float, y: float, bucket: str, a: float, b: float, out: list[tuple[float, float, str]]) -> None:
    lo, hi = max(x, a), min(y, b)
    if hi > lo:
        out.append((lo, hi, bucket))


def _joined(raw: list[tuple[float, float, str]]) -> list[Segment]:
    """Sorted segments with touching ones of the same bucket joined."""
    out: list[Segment] = []
    cx, cy, cb = raw[0] if raw else (0.0, 0.0, "")
    for x, y, bk in raw[1:]:
        if bk == cb and x <= cy + _EPS:
            cy = max(cy, y)
            continue
        out.append(Segment(cx, cy, cb))
        cx, cy, cb = x, y, bk
    if raw:
        out.append(Segment(cx, cy, cb))
    return out
