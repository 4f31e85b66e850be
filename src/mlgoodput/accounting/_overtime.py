"""Goodput over time in one pass: the productive seconds of consecutive pieces of a job.

A windowed report lays each step's time out over the step's unclaimed gaps (its startup
first, then its productive time, then any stall) and counts what falls inside the window
(`_query.Query.layout`). With the ideal step time given, that layout does not depend on the
window, so the productive seconds of consecutive pieces are the parts of one layout that fall
in each: what a windowed report of each piece says, from one pass over the steps instead of
one report per piece.

Most steps are plain: neither the first nor the last of their attempt, reached by no claim,
measured compile or step_end, and not redone by a later attempt. Such a step's productive time
starts at its start and lasts its gap to the next step, or the ideal step time when the gap is
a stall; those are summed by numpy where it is there. Every other step is laid out by the
report's own per-step code (`Query._parts` and the claims' gaps).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from mlgoodput.accounting import _fast
from mlgoodput.accounting._query import Query

if TYPE_CHECKING:
    from mlgoodput.accounting._engine import Engine


class PieceSource(Protocol):
    """What `productive_by_piece` asks (a GoodputCalculator: it holds the engine and its lock)."""

    def productive_by_piece(self, edges: Sequence[float], configured_ideal_step_time: float) -> list[float]: ...


def productive_by_piece(calc: PieceSource, edges: Sequence[float], configured_ideal_step_time: float) -> list[float]:
    """Productive seconds of each piece [edges[k], edges[k+1]] of the calculator's job as it
    read it last (no read of the store: query it first), with the given ideal step time: what
    `calc.report(edges[k], edges[k + 1], configured_ideal_step_time=...)` says of each
    (`GoodputCalculator.productive_by_piece`)."""
    return calc.productive_by_piece(edges, configured_ideal_step_time)


def by_piece(engine: Engine, q: float, edges: Sequence[float], ideal_s: float) -> list[float]:
    """`productive_by_piece` of the engine's job as of `q` (pure: the caller holds the engine)."""
    out = [0.0] * max(0, len(edges) - 1)
    if not out:
        return out
    got = engine.query(q, None, None, ideal_s)  # the whole job's query, as the report sets it up
    if got is None:
        return out
    ctx, w0, w1 = got
    log, atts, acts = ctx.log, ctx.atts, ctx.acts
    lo_t, hi_t = max(edges[0], w0), min(edges[-1], w1)
    if hi_t <= lo_t:
        return out
    times = log.times
    redone = ctx.redone()
    special = engine.touched(log, acts)
    ideal = ctx.ideal
    stall = engine.stall_factor * ideal
    plain: list[tuple[int, int]] = []  # index ranges of plain steps
    for k, att in enumerate(atts):
        if att.i1 == att.i0 or att.end < lo_t or att.start > hi_t:
            continue
        i0 = max(att.i0, bisect_right(times, lo_t, att.i0, att.i1) - 1)
        i1 = bisect_right(times, hi_t, att.i0, att.i1)
        cuts = {att.i0, att.i1 - 1, *special.range(i0, i1)}
        for _, a, b in redone:  # redone steps count as wasted progress, not productive
            if a < i1 and b > i0:
                cuts.update(range(max(a, i0), min(b, i1)))
        start = i0
        for i in sorted(c for c in cuts if i0 <= c < i1):
            if i > start:
                plain.append((start, i))
            start = i + 1
            if not _redone(redone, i):
                _laid_out(ctx, k, i, edges, out)
        if i1 > start:
            plain.append((start, i1))
    _plain(times, plain, stall, ideal, edges, out)
    return out


def _redone(redone: list[tuple[int, int, int]], i: int) -> bool:
    return any(a <= i < b for _, a, b in redone)


def _laid_out(ctx: Query, k: int, i: int, edges: Sequence[float], out: list[float]) -> None:
    """Step i of attempt k as the report lays it out: its productive part of its gaps."""
    for key, x, y in ctx.step_pieces(k, i, False):
        if key == "productive" and y > x:
            _spread(x, y, edges, out)


def _spread(x: float, y: float, edges: Sequence[float], out: list[float]) -> None:
    """Add the seconds of [x, y] that fall in each piece."""
    k = max(0, bisect_right(edges, x) - 1)
    while k < len(out) and edges[k] < y:
        lo, hi = max(x, edges[k]), min(y, edges[k + 1])
        if hi > lo:
            out[k] += hi - lo
        k += 1


def _plain(
    times: Sequence[float],
    ranges: list[tuple[int, int]],
    stall: float,
    ideal: float,
    edges: Sequence[float],
    out: list[float],
) -> None:
    """Plain steps: productive from their start for their gap (the ideal when it stalls)."""
    np = _fast.numpy()
    if np is None or sum(b - a for a, b in ranges) < _fast.MIN:
        for a, b in ranges:
            for i in range(a, b):
                g = times[i + 1] - times[i]
                _spread(times[i], times[i] + (ideal if g > stall else g), edges, out)
        return
    lo, hi = ranges[0][0], ranges[-1][1]  # every step in between, the others counted as 0 s
    t = np.frombuffer(times, dtype=np.float64)
    s = t[lo:hi]
    g = t[lo + 1 : hi + 1] - s
    keep = np.zeros(hi - lo, dtype=bool)
    for a, b in ranges:
        keep[a - lo : b - lo] = True
    p = np.where(keep, np.where(g > stall, ideal, g), 0.0)
    e = np.asarray(edges, dtype=np.float64)
    j = np.maximum(np.searchsorted(s, e, side="right") - 1, 0)  # the last step started by each edge
    part = np.clip(e - s[j], 0.0, p[j])  # that step's productive seconds before the edge
    for k in range(len(out)):  # the steps in between are whole (sums of slices: one pass)
        out[k] += float(p[j[k] : j[k + 1]].sum()) + float(part[k + 1]) - float(part[k])
