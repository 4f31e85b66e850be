"""Goodput over time in one pass (accounting/_overtime.py) equals one windowed report per piece:
on every scenario timeline, and on a long job (numpy on and off) with checkpoints, stalls,
measured compiles, step ends and a restart that redoes steps."""

from __future__ import annotations

import itertools
import math
import random
from pathlib import Path

import pytest

from mlgoodput.accounting import GoodputCalculator, _fast, productive_by_piece
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore
from timelines import all_timelines, load


def _edges(a: float, b: float, n: int) -> list[float]:
    w = (b - a) / n
    return [a + k * w for k in range(n)] + [b]


def _check(calc: GoodputCalculator, pieces: int) -> None:
    r = calc.report()
    edges = _edges(r.start, r.end, pieces)
    got = productive_by_piece(calc, edges, r.ideal_step_time_s)
    want = [
        calc.report(a, b, configured_ideal_step_time=r.ideal_step_time_s).productive_s
        for a, b in itertools.pairwise(edges)
    ]
    assert got == pytest.approx(want, abs=1e-6)
    assert sum(got) == pytest.approx(r.productive_s, abs=1e-6)  # the pieces add up to the job


@pytest.mark.parametrize("path", all_timelines(), ids=lambda p: p.stem)
@pytest.mark.parametrize("pieces", [1, 7, 61])
def test_pieces_equal_windowed_reports(path: Path, pieces: int, tmp_path: Path) -> None:
    tl = load(path)
    st = SQLiteStore(tmp_path / "s.db")
    st.append("g", tl.job_name, EventBatch(1, 0, tl.events))
    calc = GoodputCalculator(tl.job_name, "g", store=st, clock=lambda: tl.query, snapshot=False)
    _check(calc, pieces)
    st.close()


def _long_job(seed: int) -> list[Event]:
    rng = random.Random(seed)
    t = 1_700_000_000.0
    ev = [Event(Kind.JOB_START, t), Event(Kind.ACCEL_INIT_START, t + 1), Event(Kind.ACCEL_INIT_END, t + 4)]
    t += 5
    step = 0
    for attempt in range(2):
        if attempt:
            t += 30
            ev.append(Event(Kind.JOB_START, t))
            ev.append(Event(Kind.CKPT_RESTORE_START, t + 1))
            ev.append(Event(Kind.CKPT_RESTORE_END, t + 3, step=9_000))
            t += 4
            step = 9_000  # steps 9,000 .. 11,999 of the first attempt are redone
        for _ in range(12_000):
            ev.append(Event(Kind.STEP_START, t, step=step))
            if rng.random() < 0.002:
                ev.append(Event(Kind.CKPT_SAVE, t + 0.01, step=step, value=0.5))
            if rng.random() < 0.001:
                ev.append(Event(Kind.COMPILE, t + 0.02, name="f", value=0.03))
            if rng.random() < 0.001:
                ev.append(Event(Kind.STEP_END, t + 0.05, step=step))
            t += rng.choice((0.1, 0.1, 0.1 + rng.random() / 20, 0.9 if rng.random() < 0.01 else 0.1))
            step += 1
    ev.append(Event(Kind.JOB_END, t + 1))
    return sorted(ev, key=lambda e: e.time)


@pytest.mark.slow
@pytest.mark.parametrize("numpy", ["1", "0"])
def test_long_job_pieces_equal_windowed_reports(numpy: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if numpy == "1":
        pytest.importorskip("numpy")
    monkeypatch.setenv("MLGOODPUT_NUMPY", numpy)
    _fast.reset()
    try:
        st = SQLiteStore(tmp_path / "s.db")
        ev = _long_job(3)
        st.append("g", "long", EventBatch(1, 0, ev))
        calc = GoodputCalculator("long", "g", store=st, clock=lambda: ev[-1].time + 10, snapshot=False)
        r = calc.report()
        assert r.disruptions == 1 and r.badput_s  # a restart, with its redone steps
        _check(calc, 40)
        st.close()
    finally:
        _fast.reset()


def test_empty_and_outside() -> None:
    calc = GoodputCalculator("none", "g", store="memory://", snapshot=False)
    calc.report()
    assert productive_by_piece(calc, [0.0, 1.0, 2.0], 1.0) == [0.0, 0.0]
    assert productive_by_piece(calc, [0.0], 1.0) == []
    assert not math.isnan(sum(productive_by_piece(calc, [0.0, 5.0], 0.0)))
