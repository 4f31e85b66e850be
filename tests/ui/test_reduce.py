"""Reduction to screen resolution: block summaries grown step by step equal one pass, and
every bucket keeps its true min, max and mean."""

from __future__ import annotations

import itertools
import math
import random
from array import array

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlgoodput import _env, _numpy
from mlgoodput.ui import _reduce
from mlgoodput.ui._reduce import BLOCK, Blocks, minmax_points


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0.001, 100.0) | st.just(math.nan), min_size=1, max_size=3 * BLOCK + 7),
    st.lists(st.integers(1, 400), max_size=6),
    st.integers(1, 50),
)
def test_blocks_grown_in_pieces_equal_one_pass(ys: list[float], cuts: list[int], width: int) -> None:
    xs = [float(i) for i in range(len(ys))]
    one = Blocks()
    one.extend(xs, array("d", ys))
    grown = Blocks()
    n = 0
    for c in cuts:
        n = min(len(ys), n + c)
        grown.extend(xs[:n], array("d", ys[:n]))
    grown.extend(xs, array("d", ys))
    assert grown.reduce(width) == one.reduce(width)
    bx, mean, lo, hi = one.reduce(width)
    assert len(bx) <= max(width, 1) + 1
    vals = [v for v in ys if not math.isnan(v)]
    if vals:
        assert min(v for v in lo if v is not None) == min(vals)
        assert max(v for v in hi if v is not None) == max(vals)
        total = sum(m * c for m, c in zip(mean, _counts(one, width), strict=True) if m is not None)
        assert math.isclose(total, sum(vals), rel_tol=1e-9)


def _counts(b: Blocks, width: int) -> list[int]:
    per = max(1, math.ceil(len(b.x) / width))
    return [sum(b.n[k : k + per]) for k in range(0, len(b.x), per)]


def test_minmax_points_keep_every_spike() -> None:
    rng = random.Random(1)
    ys = [rng.random() for _ in range(100_000)]
    ys[31_337] = 50.0
    ys[77_000] = -3.0
    xs = [float(i) for i in range(len(ys))]
    ox, oy = minmax_points(xs, ys, 500)
    assert len(ox) <= 1000
    assert 50.0 in oy and -3.0 in oy
    assert ox == sorted(ox)


def test_blocks_with_numpy_equal_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """The numpy path (long series) gives the loop's own figures, bit for bit: sums added in
    order, NaN (a restart between two steps) left out, an all-NaN block empty."""
    if _reduce.numpy() is None:
        pytest.skip("numpy is not installed")
    rng = random.Random(7)
    ys = array("d", (rng.lognormvariate(-2, 0.5) for _ in range(9 * _reduce.FAST_MIN + 3)))
    for i in rng.sample(range(len(ys)), 40):
        ys[i] = math.nan
    ys[BLOCK * 5 : BLOCK * 6] = array("d", [math.nan] * BLOCK)
    xs = [float(i) for i in range(len(ys))]
    fast = Blocks()
    fast.extend(xs, ys)
    monkeypatch.setenv(_env.NUMPY, "0")
    _numpy.reset()
    try:
        assert _reduce.numpy() is None
        slow = Blocks()
        slow.extend(xs, ys)
    finally:
        monkeypatch.delenv(_env.NUMPY)
        _numpy.reset()
    assert len(fast.x) == len(slow.x) > 9 * _reduce.FAST_MIN // BLOCK
    assert (fast.x, fast.n, fast.sum, fast.done, fast.tail) == (slow.x, slow.n, slow.sum, slow.done, slow.tail)
    for a, b in ((fast.lo, slow.lo), (fast.hi, slow.hi)):
        assert [v if v == v else None for v in a] == [v if v == v else None for v in b]


@pytest.mark.parametrize("seed", range(20))
def test_timeline_pieces_keep_every_buckets_seconds(seed: int) -> None:
    """The timeline's reduction to pixels (ui/_charts.drawn) keeps each bucket's seconds and
    lays pieces end to end, at most about two a pixel."""
    from mlgoodput.ui._charts import drawn

    rng = random.Random(seed)
    t, segs = 1_700_000_000.0, []
    for _ in range(rng.randint(0, 400)):
        d = rng.choice((1e-4, 0.01, 0.3, 5.0, 60.0)) * rng.random()
        segs.append((t, t + d, rng.choice(("productive", "stall", "other", "custom_badput_events:EVAL"))))
        t += d
    px = rng.choice((1e-3, 0.1, 2.0, 50.0))
    out = drawn(segs, px)
    want: dict[str, float] = {}
    for x, y, b in segs:
        want[b] = want.get(b, 0.0) + (y - x)
    got: dict[str, float] = {}
    for p in out:
        for b, sec in p["mix"].items() if "mix" in p else [(p["bucket"], p["end"] - p["start"])]:
            got[b] = got.get(b, 0.0) + sec
    assert got.keys() == want.keys()
    for b, v in want.items():
        assert got[b] == pytest.approx(v, abs=1e-6)
    for a, b in itertools.pairwise(out):
        assert a["end"] <= b["start"] + 1e-9
    assert len(out) <= 2 * (t - segs[0][0]) / px + 2 if segs else not out
