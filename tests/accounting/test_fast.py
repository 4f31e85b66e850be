"""The optional numpy kernels (accounting/_fast.py) give bit for bit what the pure-Python
passes give, and a whole report is the same with them on and off ($MLGOODPUT_NUMPY=0)."""

from __future__ import annotations

import itertools
import math
import operator
import random
import sys
from array import array
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlgoodput.accounting import GoodputCalculator, _fast
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import open_store

pytest.importorskip("numpy")


@pytest.fixture
def numpy_on(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("MLGOODPUT_NUMPY", raising=False)
    _fast.reset()
    yield
    _fast.reset()


@pytest.mark.parametrize("seed", range(5))
def test_kernels_equal_the_python_passes(numpy_on: None, seed: int) -> None:
    rng = random.Random(seed)
    n = _fast.MIN + rng.randrange(5000)
    times = array("d", itertools.accumulate(rng.choice((0.1, 0.1, rng.random(), 1e-9, 0.0)) for _ in range(n)))
    nums = array("q", (rng.randrange(-5, 1 << 40) for _ in range(n)))
    mask = bytes(rng.random() < 0.9 for _ in range(n))
    sel = _fast.select(times, mask)
    assert sel is not None and sel.tobytes() == array("d", itertools.compress(times, mask)).tobytes()
    sel_n = _fast.select(nums, mask)
    assert sel_n is not None and sel_n.tobytes() == array("q", itertools.compress(nums, mask)).tobytes()
    lo, hi = rng.randrange(10), n - 1 - rng.randrange(10)
    g = _fast.gaps(times, lo, hi)
    want = array("d", map(operator.sub, times[lo + 1 : hi + 1], times[lo:hi]))
    assert g is not None and g.tobytes() == want.tobytes()
    vals = array("d", (rng.choice((0.0, -0.0, 0.1, rng.random(), -rng.random(), 1e300)) for _ in range(n)))
    srt = _fast.sort(vals)
    assert srt is not None and srt.tobytes() == array("d", sorted(vals)).tobytes()  # -0.0 and 0.0 in place
    plain = array("d", (0.0 if v == 0 else v for v in vals))  # no -0.0: any order of ties is the stable one
    assert not any(v == 0 and math.copysign(1.0, v) < 0 for v in plain)
    got = _fast.sort(plain)
    assert got is not None and got.tobytes() == array("d", sorted(plain)).tobytes()
    assert _fast.sort(array("d", [float("nan")] * n)) is None and _fast.gaps(times, 0, 10) is None
    assert _fast.strictly_increasing(times) is all(map(operator.lt, times[:-1], times[1:]))
    up = array("d", (k * 0.1 for k in range(n)))
    assert _fast.strictly_increasing(up) is True and _fast.maximum(vals) == max(vals)
    assert _fast.maximum(array("d", [float("nan")] * n)) is None


@pytest.mark.parametrize("seed", range(4))
def test_bucket_sums_equal_sum_per_bucket(numpy_on: None, seed: int) -> None:
    if sys.version_info >= (3, 12):  # sum() compensates its rounding there: the kernel stands aside
        assert _fast.bucket_sums(array("d", [0.1] * _fast.MIN), 7) is None
        return
    rng = random.Random(seed)
    n = _fast.MIN + rng.randrange(40_000)
    pool = (0.1, 1e16, -1e16, 0.0, -0.0, math.inf, -math.inf, 1e308, rng.random())
    mixed = array("d", (rng.choice(pool) if rng.random() < 0.5 else rng.uniform(-1e9, 1e9) for _ in range(n)))
    for vals in (mixed, array("d", [-0.0] * n), array("d", sorted(rng.random() for _ in range(n)))):
        for load in (1, 7, 2048, n + 1):
            got = _fast.bucket_sums(vals, load)
            want = [sum(vals[i : i + load]) for i in range(0, n, load)]
            assert got is not None and array("d", got).tobytes() == array("d", want).tobytes(), load


def test_steps_by_one(numpy_on: None) -> None:
    from mlgoodput.accounting._stepnums import counts_up

    n = _fast.MIN
    up = array("q", range(7, 7 + n))
    assert _fast.steps_by_one(up) is True and counts_up(up)
    skip = array("q", up)
    skip[n // 2] += 1
    assert _fast.steps_by_one(skip) is False and not counts_up(skip)
    swap = array("q", up)
    swap[1], swap[2] = swap[2], swap[1]
    assert not counts_up(swap)
    top = (1 << 63) - 1  # a difference that wraps around in int64: caught by the ends' check
    wrap = array("q", [top - 1, top, -(1 << 63), *range(-(1 << 63) + 1, -(1 << 63) + n - 2)])
    assert not counts_up(wrap)
    assert _fast.steps_by_one(array("q", range(10))) is None


def test_off_switch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLGOODPUT_NUMPY", "0")
    _fast.reset()
    try:
        assert _fast.numpy() is None and _fast.select(array("d", [1.0] * 10_000), b"\x01" * 10_000) is None
    finally:
        _fast.reset()


def _job(path: Path, seed: int) -> str:
    rng = random.Random(seed)
    store = f"sqlite://{path}"
    st = open_store(store)
    t = 1_700_000_000.0
    ev = [Event(Kind.JOB_START, t, 0), Event(Kind.ACCEL_INIT_START, t + 1, 0), Event(Kind.ACCEL_INIT_END, t + 5, 0)]
    t += 10
    for k in range(3 * _fast.MIN):
        ev.append(Event(Kind.STEP_START, t, 0, step=k))
        if rng.random() < 0.01:
            ev.append(Event(Kind.CUSTOM_START, t + 0.01, 0, name="eval"))
            ev.append(Event(Kind.CUSTOM_END, t + 0.01 + rng.random() / 20, 0, name="eval"))
        if rng.random() < 0.002:
            ev.append(Event(Kind.DATA_LOADING_START, t + 0.001, 0))
            ev.append(Event(Kind.DATA_LOADING_END, t + 0.5, 0))
        t += rng.choice((0.1, 0.1, 0.1 + rng.random() / 10, 2 * rng.random()))
    ev.append(Event(Kind.JOB_END, t + 1, 0))
    for i in range(0, len(ev), 5000):
        st.append("goodput", "j", EventBatch(1, i, ev[i : i + 5000]))
    # a second host (the per-host step statistics), restarted halfway: no gap across the restart
    t = 1_700_000_000.0 + 10
    ev = [Event(Kind.JOB_START, t - 5, 1)]
    for k in range(2 * _fast.MIN):
        if k == _fast.MIN:
            ev.append(Event(Kind.JOB_START, t, 1))
            t += 3
        ev.append(Event(Kind.STEP_START, t, 1, step=k))
        t += 0.1 + rng.random() / 10
    st.append("goodput", "j", EventBatch(2, 0, ev))
    st.close()
    return store


@pytest.mark.parametrize("seed", range(2))
def test_reports_equal_with_numpy_on_and_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    store = _job(tmp_path / "s.db", seed)
    got = []
    for env in ("1", "0"):
        monkeypatch.setenv("MLGOODPUT_NUMPY", env)
        _fast.reset()
        c = GoodputCalculator("j", "goodput", store=store, snapshot=False)
        got.append((c.report(), c.get_signed_step_deviation()))
    _fast.reset()
    assert len(got[0][0].hosts) == 2
    assert got[0] == got[1]


@pytest.mark.parametrize("seed", range(4))
def test_host_stats_by_selection_equal_the_sorted_ones(monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    from mlgoodput.accounting._hoststats import HostSteps
    from mlgoodput.accounting._timeline import HostLog

    rng = random.Random(seed)
    n = 2 * _fast.MIN + 10 + rng.randrange(3 * _fast.MIN)
    gaps = [rng.choice((0.1, 0.1, 0.25, rng.random() + 1e-3)) for _ in range(n)]
    times = array("d", itertools.accumulate(gaps, initial=1e9))
    if seed % 2:
        times[n // 4] = times[n // 4 - 1]  # a zero gap: the selection stands aside, the sort decides
    cut = times[n // 3] - 0.01

    lazy = []

    def run() -> tuple[object, ...]:
        log = HostLog(0)
        log.add_steps(times[: n // 2], list(range(n // 2)))
        log.job_starts[:] = [times[0] - 1, cut]
        hs = HostSteps()
        first = hs.update(log)
        lazy.append(hs._raw is not None)
        mid = hs.diffs.values().tobytes()  # the gaps put in order on first use
        log.add_steps(times[n // 2 :], list(range(n // 2, len(times))))
        return first, mid, hs.update(log), hs.diffs.values().tobytes(), hs.diffs.bucket_sizes()

    _fast.reset()
    monkeypatch.delenv("MLGOODPUT_NUMPY", raising=False)
    fast = run()
    monkeypatch.setenv("MLGOODPUT_NUMPY", "0")
    _fast.reset()
    slow = run()
    _fast.reset()
    assert fast == slow and fast[0] is not None
    assert lazy == [seed % 2 == 0, False]  # the selection ran where it applies


@pytest.mark.parametrize("seed", range(5))
def test_merge_equals_insort(numpy_on: None, seed: int) -> None:
    import bisect

    rng = random.Random(seed)
    pool = [0.0, -0.0, 0.1, 0.1 + 1e-17, 1.0, rng.random(), -rng.random(), 1e300, -1e300]
    for _ in range(20):
        base = array(
            "d", sorted(rng.choice(pool) if rng.random() < 0.5 else rng.random() for _ in range(rng.randrange(0, 3000)))
        )
        new = sorted(rng.choice(pool) if rng.random() < 0.5 else rng.random() for _ in range(rng.randrange(16, 300)))
        want = array("d", base)
        for x in new:
            bisect.insort(want, x)
        got = _fast.merge(base, new)
        assert got is not None and got.tobytes() == want.tobytes()  # -0.0 and 0.0 where insort puts them
    assert _fast.merge(array("d", [1.0]), [0.5] * 3) is None  # short: the caller inserts them
    assert _fast.merge(array("d", [1.0]), [0.5] * 20 + [float("nan")]) is None
