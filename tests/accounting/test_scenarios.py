"""Every timeline in tests/data/timelines comes out as its known truth (spec/accounting.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mlgoodput.accounting import BadputType, GoodputCalculator
from mlgoodput.events import EventBatch
from mlgoodput.store import MemoryStore
from timelines import all_timelines, assert_matches_truth, load

TOL = 0.05


def calculator_for(path: Path) -> tuple[GoodputCalculator, float]:
    tl = load(path)
    store = MemoryStore()
    store.append(f"goodput_{tl.job_name}", tl.job_name, EventBatch(1, 0, tl.events))
    calc = GoodputCalculator(tl.job_name, f"goodput_{tl.job_name}", store=store, clock=lambda: tl.query)
    return calc, tl.query


@pytest.mark.parametrize("path", all_timelines(), ids=lambda p: p.stem)
@pytest.mark.parametrize("path_kind", ["aggregate", "layout"])
def test_timeline_matches_truth(path: Path, path_kind: str) -> None:
    tl = load(path)
    calc, q = calculator_for(path)
    # a window that covers the whole job goes through the per-step layout
    r = calc.report() if path_kind == "aggregate" else calc.report(start=q - 1e6, end=q + 1e6)
    truth = tl.truth
    assert_matches_truth(r, truth, TOL)
    # the partition is exact, whatever the tolerance on single buckets
    total = r.productive_s + sum(r.badput_total_s(b) for b in r.badput_s)
    assert total == pytest.approx(r.total_s, abs=1e-9)


def test_seed_tuple_api_on_a_scenario() -> None:
    path = next(p for p in all_timelines() if p.stem == "s2_custom_and_async_data")
    calc, _ = calculator_for(path)
    goodput, breakdown, last_step = calc.get_job_goodput(include_badput_breakdown=True)
    assert goodput == pytest.approx(100 * 100 / 145, abs=0.05)
    assert last_step == 99
    assert breakdown[BadputType.CUSTOM_BADPUT_EVENTS]["EVAL"] == pytest.approx(100 * 20 / 145, abs=0.05)
    assert breakdown[BadputType.DATA_LOADING_ASYNC] == pytest.approx(100 * 30 / 145, abs=0.05)
    assert calc.get_job_goodput()[1] == {}


def test_slice_efficiency_is_time_weighted() -> None:
    path = next(p for p in all_timelines() if p.stem == "s9_elastic_pause")
    calc, _ = calculator_for(path)
    r = calc.report()
    assert r.slice_efficiency is not None
    assert r.slice_efficiency.stepping == pytest.approx(100 * 27 / 33, abs=1e-6)
    assert r.slice_efficiency.available == pytest.approx(100 * 27 / 33, abs=1e-6)


def test_without_compile_events_a_recompile_is_a_stall() -> None:
    """The measured compile is what turns step 50's extra time into program startup."""
    tl = load(next(p for p in all_timelines() if p.stem == "s10_recompile"))
    from mlgoodput.events import Kind

    events = [e for e in tl.events if e.kind != Kind.COMPILE]
    store = MemoryStore()
    store.append("ns", "j", EventBatch(1, 0, events))
    r = GoodputCalculator("j", "ns", store=store, clock=lambda: tl.query).report()
    assert r.badput_s[BadputType.STALL] == pytest.approx(5.0)
    assert r.badput_s[BadputType.PROGRAM_STARTUP] == pytest.approx(3.0)


def test_mid_run_view_with_at() -> None:
    path = next(p for p in all_timelines() if p.stem == "s1_clean_run")
    calc, q = calculator_for(path)
    r = calc.report(at=q - 138 + 60.5)  # 60.5 s in: step k>0 starts at 37 + k, so step 23 runs
    assert r.total_s == pytest.approx(60.5)
    assert r.last_step == 23
    assert r.badput_s[BadputType.TPU_INITIALIZATION] == pytest.approx(10.0)
    assert r.productive_s == pytest.approx(1.0 + 22 + 0.5)


def test_interval_query_and_rolling_windows() -> None:
    path = next(p for p in all_timelines() if p.stem == "s4_disruption_restart")
    calc, q = calculator_for(path)
    origin = q - 245.5
    _, breakdown, _, total, disruptions = calc.get_job_goodput_interval(origin + 100, origin + 170)
    assert total == pytest.approx(70.0)
    assert disruptions == 1
    inf = breakdown[BadputType.INFRASTRUCTURE_RECOVERY_FROM_DISRUPTION]
    # the outage runs from the crash (~96.5 s) to the restart at 156.5 s: 56.5 s of it is inside
    assert inf == pytest.approx(100 * 56.5 / 70, abs=100 * 1.0 / 70 + 0.1)
    windows = calc.rolling_windows([10, 60])
    assert windows[10].total_s == pytest.approx(10.0)
    assert windows[10].productive_s == pytest.approx(10.0)  # steps 90..99 fill the last 10 s
    assert windows[60].disruptions == 0
    with pytest.raises(ValueError, match="windows_s"):
        calc.rolling_windows([0])


def test_bad_arguments_name_themselves() -> None:
    calc = GoodputCalculator("j", "l", store=MemoryStore())
    with pytest.raises(TypeError, match="start"):
        calc.report(start="yesterday")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="configured_ideal_step_time"):
        calc.report(configured_ideal_step_time=-1.0)
    with pytest.raises(ValueError, match="interval_end"):
        calc.get_job_goodput_interval(10.0, 5.0)
    with pytest.raises(ValueError, match="job_name"):
        GoodputCalculator("", "l", store=MemoryStore())
    with pytest.raises(ValueError, match="unknown store URL scheme 'ftp'"):
        GoodputCalculator("j", "l", store="ftp://x")
