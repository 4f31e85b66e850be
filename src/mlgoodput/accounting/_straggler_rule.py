"""The straggler rule: which rank, if any, starts steps late more often than noise explains.

Every compared step gives each rank a lateness: its start minus the median start of the other
ranks of that step (two ranks: the difference of their starts). Each lateness is counted in a
histogram on a fixed grid of thresholds (`EDGES`, 2^(1/4) apart), one per rank for late starts
and one pooled over ranks and signs; counts only add up, so the analysis keeps them as steps
arrive. The verdict reads them (docs/torch.md, "Stragglers"):

- a rank's late steps at a threshold are the steps it started at least that much behind the
  median of the others. Thresholds tried: the floor (`MIN_LEAD_S`, `MIN_LEAD_FRACTION` of the
  typical step: less is never worth naming) and twice the noise (the median of every rank's
  |lateness|), each rounded up to the grid;
- if no rank stands out, every late step is equally likely to be any rank's (the ranks of one
  step are exchangeable), so the most late steps of any rank is compared with a binomial of
  all ranks' late steps and chance 1 / ranks; the p-value is multiplied by the ranks and the
  thresholds tried (Bonferroni);
- the rank is named when that p-value is below `ALPHA` and its late steps exceed their share
  by `MIN_EXCESS_SHARE` of the compared steps (a tiny but steady excess in a long job is not a
  straggler). Anything else is noise: no straggler.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

__all__ = [
    "BINS",
    "EDGES",
    "StragglerVerdict",
    "count_late",
    "count_late_block",
    "count_late_full",
    "straggler_verdict",
]

#: Lateness thresholds (seconds): 10 microseconds up to about two days, 2^(1/4) apart. Bin 0 holds
#: what is under EDGES[0]; bin b (1 <= b < len(EDGES)) holds [EDGES[b-1], EDGES[b]); the last bin
#: what is at or over EDGES[-1].
EDGES: tuple[float, ...] = tuple(1e-5 * 2 ** (k / 4) for k in range(141))
BINS = len(EDGES) + 1
#: The floor of the lateness that counts: a step counts as late only when the rank started it
#: more than this (and this share of the typical step) behind the other ranks.
MIN_LEAD_S = 0.005
MIN_LEAD_FRACTION = 0.05
NOISE_MULTIPLE = 2.0  # the other threshold tried: this many times the median |lateness|
ALPHA = 0.01  # a rank is named when late steps this many or more arise by chance less often
MIN_EXCESS_SHARE = 0.05  # ... and its late steps exceed their share by this share of the steps


@dataclass(frozen=True, slots=True)
class StragglerVerdict:
    """The straggler rule's answer and its evidence: the rank with the most late steps at the
    deciding threshold, how many it had against how many chance gives it, and the p-value."""

    straggler: int | None  # the rank named; None: no rank stands out from noise
    rank: int | None  # the rank with the most late steps (None: no step was late at all)
    late_steps: int  # its steps started at least `threshold_s` behind the others' median
    expected_late_steps: float  # what chance gives it: every rank's late steps / ranks
    steps: int  # steps compared
    threshold_s: float  # the lateness that counted as late
    noise_s: float  # the median |lateness| of every rank in every compared step
    p_value: float  # chance of as many late steps if no rank stood out (Bonferroni-adjusted)

    def to_dict(self) -> dict[str, Any]:
        return {f: getattr(self, f) for f in self.__slots__}

    def text(self) -> str:
        """One line saying what the evidence is, for consoles and pages."""
        if self.rank is None:
            return f"no rank started a step late by {_ms(self.threshold_s)} or more over {self.steps} steps"
        what = (
            f"rank {self.rank} started {self.late_steps} of {self.steps} steps at least {_ms(self.threshold_s)}"
            f" behind the other ranks (chance gives {self.expected_late_steps:.1f}; p = {self.p_value:.2g};"
            f" noise {_ms(self.noise_s)})"
        )
        return what if self.straggler is not None else f"within noise: {what}"


def _ms(s: float) -> str:
    return f"{s * 1000:.3g} ms" if s < 1 else f"{s:.3g} s"


def count_late(order: Sequence[tuple[int, float]], late: Any, pooled: Any) -> None:
    """Count one step: `order` its (rank, start) by start (two or more), each rank's lateness
    behind the median of the others added to `late[rank]` (late starts) and `pooled` (its size)."""
    m = len(order) - 1
    j1, j2 = (m - 1) // 2, m // 2
    lo, lo_next, hi, hi_next = order[j1][1], order[j1 + 1][1], order[j2][1], order[j2 + 1][1]
    for r, t in order:
        # the others' median: this start taken out of the sorted starts (by value: ties alike)
        if t <= lo:
            x = t - (lo_next + hi_next) / 2
        elif t >= hi_next:
            x = t - (lo + hi) / 2
        else:
            x = t - (lo + hi_next) / 2
        if x > 0:
            b = bisect.bisect_right(EDGES, x)
            late[r][b] += 1
        else:
            b = bisect.bisect_right(EDGES, -x)
        pooled[b] += 1


def count_late_block(np: Any, blk: Any, present: Any, late: Any, pooled: Any) -> None:
    """`count_late` of every column of `blk` (rank index x step; `present`: reported; every
    column has two or more), in numpy: the same operations on the same values, so the same
    counts. `late`: counts by rank index x bin (added into); `pooled`: counts by bin."""
    if present.all():
        count_late_full(np, blk, np.sort(blk.T, axis=1), late, pooled)
        return
    s = np.sort(np.where(present, blk, np.inf), axis=0)  # (missing ranks sorted last)
    m = present.sum(axis=0) - 1
    j1, j2 = (m - 1) // 2, m // 2

    def at(j: Any) -> Any:
        return np.take_along_axis(s, j[None, :], axis=0)[0]

    lo, lo_next, hi, hi_next = at(j1), at(j1 + 1), at(j2), at(j2 + 1)
    x = blk - np.where(blk <= lo, (lo_next + hi_next) / 2, np.where(blk >= hi_next, (lo + hi) / 2, (lo + hi_next) / 2))
    rows = np.broadcast_to(np.arange(blk.shape[0])[:, None], blk.shape)
    x, rows = x[present], rows[present]
    pos = x > 0
    bins = _bins(np, np.abs(x))
    _add_late(np, late, rows[pos] * BINS + bins[pos])
    pooled += np.bincount(bins.ravel(), minlength=BINS)


def count_late_full(np: Any, blk: Any, ranked: Any, late: Any, pooled: Any) -> None:
    """`count_late_block` of a block in which every rank reported every step (two ranks or
    more): `ranked` is the block's steps with their starts sorted (step x sorted starts, as
    `np.sort(blk.T, axis=1)`), which the caller has made already. The same values as
    `count_late`: each start's lateness behind the median of the other starts of its step."""
    n = blk.shape[0]
    j1, j2 = (n - 2) // 2, (n - 1) // 2
    # (contiguous: each is read again for every rank's row)
    lo, lo_next, hi, hi_next = (np.ascontiguousarray(ranked[:, j]) for j in (j1, j1 + 1, j2, j2 + 1))
    if j1 == j2:
        # an even count: no start lies strictly between the two middle ones, so a start is
        # either at or under the lower (the others' median is then (lo_next + hi_next) / 2) or
        # at or over the upper ((lo + hi) / 2), as `count_late` decides
        x = np.where(blk <= lo, (lo_next + hi_next) / 2, (lo + hi) / 2)
    else:
        x = np.where(blk <= lo, (lo_next + hi_next) / 2, np.where(blk >= hi_next, (lo + hi) / 2, (lo + hi_next) / 2))
    if float(ranked[:, 0].min()) > 0 and math.isfinite(float(ranked[:, -1].max())):
        _count_signed(np, blk, x, late, pooled)
        return
    np.subtract(blk, x, out=x)  # each start's lateness
    # one count of (rank, bin) for late starts, of (an extra row, bin) for the others: the
    # pooled counts are every row's
    at = np.where(x > 0, np.arange(0, n * BINS, BINS, dtype=np.intp)[:, None], n * BINS)
    at += _bins(np, np.abs(x, out=x))
    if _sparse(at.size, late.size):  # (an upload's few new steps: see `_add_late`)
        flat = at.ravel()
        pooled += np.bincount(flat % BINS, minlength=BINS)
        _add_late(np, late, flat[flat < n * BINS])
        return
    got = np.bincount(at.ravel(), minlength=(n + 1) * BINS).reshape(n + 1, BINS)
    late += got[:n]
    pooled += got.sum(axis=0)


def _count_signed(np: Any, blk: Any, med: Any, late: Any, pooled: Any) -> None:
    """The counts of `count_late_full` when every start is positive and finite (`med`: each
    start's others' median, overwritten). Then the negated lateness med - start is exactly
    -(start - med), and +0.0 when they are equal, so its sign bit says "late", and its top
    bits (sign, exponent and 6 bits of mantissa) name both that and the range of 1/64 of an
    octave its size lies in: one table look-up gives the bin of the range's start (moved to
    the late half of a rank's counts when late), one comparison of the size's bits with the
    range's edge adds the one bin more. The same counts, in half the passes."""
    if not _SIGNED:
        first, edge = _table(np)
        bits = edge.view(np.int64).copy()
        bits[np.isnan(edge)] = np.iinfo(np.int64).max  # (no edge: never reached)
        # by the top bits as a signed index: >= 0 for a non-negative value, < 0 (numpy counts
        # from the end) for a negative one, i.e. a late start
        _SIGNED.append(np.concatenate((first, first + BINS)))
        _SIGNED.append(np.concatenate((bits, bits)))
    at_first, at_edge = _SIGNED
    n = blk.shape[0]
    np.subtract(med, blk, out=med)
    bits = med.view(np.int64)
    key = bits >> 46
    at = at_first[key]
    np.bitwise_and(bits, np.int64(0x7FFF_FFFF_FFFF_FFFF), out=bits)  # the size's bits
    at += bits >= at_edge[key]
    at += np.arange(0, n * 2 * BINS, 2 * BINS, dtype=np.intp)[:, None]  # each rank's two halves
    if _sparse(at.size, late.size):  # (an upload's few new steps: see `_add_late`)
        flat = at.ravel()
        bins = flat % BINS  # (a rank's halves start at multiples of BINS)
        pooled += np.bincount(bins, minlength=BINS)
        is_late = flat % (2 * BINS) >= BINS
        _add_late(np, late, flat[is_late] // (2 * BINS) * BINS + bins[is_late])
        return
    got = np.bincount(at.ravel(), minlength=n * 2 * BINS).reshape(n, 2, BINS)
    late += got[:, 1]
    pooled += got.sum(axis=(0, 1))


def _sparse(entries: int, cells: int) -> bool:
    """Whether `entries` counts into `cells` counters are added cell by cell (`_add_late`)
    rather than as a count of every cell."""
    return entries * 4 < cells


def _add_late(np: Any, late: Any, idx: Any) -> None:
    """One more in late's cell of each flat index in `idx` (late: ranks x bins; an index may
    repeat). Counted over every cell when the indices are many; else only in the cells met: an
    upload's block holds a few steps of thousands of ranks, and a count of every rank's bins
    (thousands x BINS, zeroed, summed and added) cost more than the block itself. The same
    integers either way."""
    if not _sparse(idx.size, late.size):
        late += np.bincount(idx, minlength=late.size).reshape(late.shape)
        return
    cells, k = np.unique(idx, return_counts=True)
    late[cells // BINS, cells % BINS] += k


_SIGNED: list[Any] = []  # `_count_signed`'s table (made once)
_TABLE: list[Any] = []  # (first bin, next edge) by the top 17 bits of a double (made once)


def _table(np: Any) -> tuple[Any, Any]:
    """`_bins`'s table: the first bin and the next edge of each range of top 17 bits."""
    if not _TABLE:
        starts = (np.arange(1 << 17, dtype=np.int64) << 46).view(np.float64)
        first = np.searchsorted(np.asarray(EDGES), starts, side="right")
        _TABLE.append(first.astype(np.intp))
        _TABLE.append(np.append(np.asarray(EDGES), np.nan)[first])
    return _TABLE[0], _TABLE[1]


def _bins(np: Any, ax: Any) -> Any:
    """`bisect_right(EDGES, v)` of each v of ax (none negative or NaN), by table: the top 17
    bits of a non-negative double (its exponent and 6 bits of mantissa) name a range of 1/64
    of an octave, narrower than the grid's quarter octave, so it holds at most one edge. The
    table gives the bin of the range's start and the next edge (NaN beyond the last: v >= NaN
    is never true); a value's bin is the first, plus one when it is at or over the edge."""
    first, edge = _table(np)
    key = ax.view(np.int64) >> 46
    b = first[key]
    b += ax >= edge[key]
    return b


def _at_least(late: Any, i: int) -> list[int]:
    """Each rank's late steps at EDGES[i] or more: its counts of the bins above i (one numpy
    pass when `late` is a numpy array of ranks x bins)."""
    if hasattr(late, "shape"):
        return cast("list[int]", late[:, i + 1 :].sum(axis=1).tolist())  # (Python ints)
    return [sum(row[i + 1 :]) for row in late]


def _edge_at_least(v: float) -> int:
    """The index of the smallest threshold of the grid that is v or more (the largest if none)."""
    return min(bisect.bisect_left(EDGES, v), len(EDGES) - 1)


def _binomial_tail(n: int, k: int, p: float) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed from k upward (the terms fall beyond the mean)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    if k <= n * p:
        return 1.0  # (at or under the mean: not evidence of anything)
    log_term = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
    log_term += k * math.log(p) + (n - k) * math.log1p(-p)
    if log_term < -700:
        return 0.0
    term = math.exp(log_term)
    odds = p / (1 - p)
    total = 0.0
    for j in range(k, n + 1):
        total += term
        if term <= total * 1e-15 or total >= 1.0:
            break
        term *= (n - j) / (j + 1) * odds
    return min(1.0, total)


def straggler_verdict(
    ranks: Sequence[int],
    late: Sequence[Sequence[int]],
    pooled: Sequence[int],
    steps: int,
    min_ranks: int,
    typical_step_s: float,
) -> StragglerVerdict:
    """The verdict from the counts: `late[i]` rank ranks[i]'s late starts by bin (or all of them
    as a numpy array of ranks x bins), `pooled` every lateness's size by bin, over `steps`
    compared steps of `min_ranks` ranks or more each; `typical_step_s`: the median of the
    ranks' median step times (for the floor)."""
    floor = max(MIN_LEAD_S, MIN_LEAD_FRACTION * typical_step_s)
    total = sum(pooled)
    noise = 0.0
    if total:
        at, seen = (total - 1) // 2, 0  # the median entry's bin: its upper edge
        for b, k in enumerate(pooled):
            seen += k
            if seen > at:
                noise = EDGES[min(b, len(EDGES) - 1)]
                break
    tried = sorted({_edge_at_least(floor), _edge_at_least(max(floor, NOISE_MULTIPLE * noise))})
    n = max(2, min_ranks)
    best: StragglerVerdict | None = None
    for i in tried:
        counts = _at_least(late, i)
        all_late = sum(counts)
        top = counts.index(max(counts)) if counts else None  # the most, the first of a tie
        c = counts[top] if top is not None else 0
        p = min(1.0, len(ranks) * len(tried) * _binomial_tail(all_late, c, 1 / n)) if c else 1.0
        v = StragglerVerdict(
            None,
            ranks[top] if top is not None and c else None,
            c,
            all_late / n,
            steps,
            EDGES[i],
            noise,
            p,
        )
        if best is None or p < best.p_value:
            best = v
    assert best is not None
    if (
        best.rank is not None
        and best.p_value < ALPHA
        and best.late_steps - best.expected_late_steps >= MIN_EXCESS_SHARE * steps
    ):
        return StragglerVerdict(best.rank, *[getattr(best, f) for f in best.__slots__[1:]])
    return best
