"""Productivity figures (docs/accounting.md, "Productivity") on timelines with a known truth."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlgoodput.accounting import GoodputCalculator
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore
from timelines import ORIGIN, all_timelines, load

PRODUCTIVITY = [p for p in all_timelines() if "productivity" in load(p).truth]


def calc_for(path: Path) -> tuple[GoodputCalculator, float]:
    tl = load(path)
    store = MemoryStore()
    store.append(f"goodput_{tl.job_name}", tl.job_name, EventBatch(1, 0, tl.events))
    return GoodputCalculator(tl.job_name, f"goodput_{tl.job_name}", store=store, clock=lambda: tl.query), tl.query


def test_there_are_productivity_timelines() -> None:
    assert len(PRODUCTIVITY) >= 2


@pytest.mark.parametrize("path", PRODUCTIVITY, ids=lambda p: p.stem)
def test_productivity_matches_truth(path: Path) -> None:
    truth = load(path).truth["productivity"]
    calc, _ = calc_for(path)
    r = calc.report()
    p = r.productivity
    assert p is not None
    d = p.to_dict()
    for key, want in truth.items():
        if key in ("attempt_queue_s", "attempt_waiting_s"):
            got = [a[key.removeprefix("attempt_")] for a in d["attempts"]]
            assert got == pytest.approx(want), key
        elif isinstance(want, dict):
            assert d[key] == pytest.approx(want), key
        elif want is None or isinstance(want, str):
            assert d[key] == want, key
        else:
            assert d[key] == pytest.approx(want, rel=1e-9, abs=1e-9), key
    # the product holds exactly, and the report's JSON carries the top-level keys
    j = r.to_dict()
    for key in ("mfu", "program_goodput", "scheduling_goodput", "ml_productivity_goodput", "ettr", "mtbi_s", "mttr_s"):
        assert j[key] == d[key]
    if p.ml_productivity_goodput is not None:
        assert p.scheduling_goodput is not None and p.program_goodput is not None
        assert p.ml_productivity_goodput == pytest.approx(
            p.scheduling_goodput * (r.goodput_pct / 100) * p.program_goodput, rel=1e-12
        )


def test_no_flops_no_peak_no_events() -> None:
    path = next(p for p in all_timelines() if p.stem == "s1_clean_run")
    calc, _ = calc_for(path)
    p = calc.report().productivity
    assert p is not None
    assert (p.mfu, p.program_goodput, p.achieved_flops_per_s, p.flops_per_step) == (None, None, None, None)
    assert (p.scheduling_goodput, p.ml_productivity_goodput, p.mtbi_s, p.mttr_s) == (None,) * 4
    assert p.interruptions == 0 and p.ettr is not None and 0 < p.ettr <= 1


def test_flops_without_peak_gives_achieved_only() -> None:
    store = MemoryStore()
    t0 = ORIGIN
    evs = [Event(Kind.JOB_START, t0), Event(Kind.STEP_FLOPS, t0 + 0.1, value=5e9)]
    evs += [Event(Kind.STEP_START, t0 + 1 + i, step=i) for i in range(5)]
    evs.append(Event(Kind.JOB_END, t0 + 6))
    store.append("g", "j", EventBatch(1, 0, evs))
    p = GoodputCalculator("j", "g", store=store, clock=lambda: t0 + 6).report().productivity
    assert p is not None
    assert p.achieved_flops_per_s == pytest.approx(5e9)  # 5 steps of 1 s, 5e9 FLOPs each
    assert p.mfu is None and p.program_goodput is None and p.peak_source is None


def test_running_step_is_not_counted_until_it_ends() -> None:
    store = MemoryStore()
    t0 = ORIGIN
    evs = [Event(Kind.JOB_START, t0), Event(Kind.STEP_FLOPS, t0, value=1e9)]
    evs += [Event(Kind.STEP_START, t0 + i, step=i) for i in range(4)]
    store.append("g", "j", EventBatch(1, 0, evs))
    p = GoodputCalculator("j", "g", store=store, clock=lambda: t0 + 3.5).report().productivity
    assert p is not None and p.steps_executed == 3 and p.steps_useful == 3


def test_window_excludes_queue_before_it() -> None:
    path = next(p for p in PRODUCTIVITY if p.stem.startswith("p1"))
    calc, _q = calc_for(path)
    r = calc.report(start=ORIGIN + 40.0)
    assert r.productivity is not None
    assert r.productivity.scheduling_goodput == pytest.approx(1.0)
    assert r.productivity.interruptions == 1


def test_incremental_queries_match_a_fresh_calculator() -> None:
    """Events arriving in batches (steps only, then a restart with new submit/FLOPs events)
    give the same figures as one calculator that reads them all at once."""
    tl = load(next(p for p in PRODUCTIVITY if p.stem.startswith("p1")))
    store = MemoryStore()
    ns = f"goodput_{tl.job_name}"
    now = [ORIGIN + 30.0]
    calc = GoodputCalculator(tl.job_name, ns, store=store, clock=lambda: now[0])
    seq = 0
    prev = -1e9
    for cut in (30.0, 31.0, 50.0, 70.0, 83.5):
        batch = [e for e in tl.events if prev <= e.time - ORIGIN < cut]
        prev = cut
        store.append(ns, tl.job_name, EventBatch(1, seq, batch))
        seq += len(batch)
        now[0] = ORIGIN + min(cut, 83.0)
        got = calc.report().productivity
        fresh = GoodputCalculator(tl.job_name, ns, store=store, clock=lambda: now[0]).report().productivity
        assert got == fresh, cut
    assert got is not None and got.interruptions == 1 and got.mttr_s == pytest.approx(27.0)


def test_a_recorded_peak_overrides_a_detected_one_whatever_the_order() -> None:
    store = MemoryStore()
    t0 = ORIGIN
    evs = [
        Event(Kind.JOB_START, t0),
        Event(Kind.STEP_FLOPS, t0, value=1e9),
        Event(Kind.PEAK_FLOPS, t0 + 0.1, value=5e9, name="recorded"),
        Event(Kind.PEAK_FLOPS, t0 + 0.2, value=8e9, name="table:NVIDIA L4 x1 bf16"),
    ]
    evs += [Event(Kind.STEP_START, t0 + 1 + i, step=i) for i in range(3)]
    evs.append(Event(Kind.JOB_END, t0 + 4))
    store.append("g", "j", EventBatch(1, 0, evs))
    p = GoodputCalculator("j", "g", store=store, clock=lambda: t0 + 4).report().productivity
    assert p is not None and (p.peak_flops_per_s, p.peak_source) == (5e9, "recorded")
    assert p.program_goodput == pytest.approx(1e9 / 5e9)
