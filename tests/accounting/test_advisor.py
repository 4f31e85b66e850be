"""The checkpoint-interval advisor, verified against a seeded simulator of interruptions.

"Within 1%" means: the simulated goodput at the recommended interval is at least 99% of the
best simulated goodput over a sweep of intervals (same seed, so the same interruptions).
"""

from __future__ import annotations

import math

import pytest

from ckptsim import exponential, lognormal, simulate, weibull
from mlgoodput.accounting import CostStats, Productivity
from mlgoodput.accounting._advisor import (
    advise,
    daly_interval,
    expected_goodput,
    optimal_interval,
    young_interval,
)

M, SAVE, REC = 3600.0, 60.0, 300.0
WORK = 1500 * M


def sweep(draw: object, seed: int) -> tuple[float, float]:
    opt = optimal_interval(SAVE, M, REC)
    grid = [opt * 2 ** (k / 12) for k in range(-36, 37)]
    best = max(simulate(t, SAVE, REC, WORK, draw, seed) for t in grid)  # type: ignore[arg-type]
    return best, simulate(opt, SAVE, REC, WORK, draw, seed)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "draw",
    [exponential(M), weibull(M, 0.7), lognormal(M, 1.5)],
    ids=["exponential", "weibull-0.7", "lognormal-1.5"],
)
@pytest.mark.parametrize("seed", [1, 2])
def test_recommended_interval_is_within_1pct_of_the_sweep_best(draw: object, seed: int) -> None:
    best, rec = sweep(draw, seed)
    assert rec >= 0.99 * best, (rec, best)


def test_a_bad_interval_is_visibly_worse_so_the_check_can_fail() -> None:
    opt = optimal_interval(SAVE, M, REC)
    best, _ = sweep(exponential(M), 1)
    assert simulate(opt / 8, SAVE, REC, WORK, exponential(M), 1) < 0.95 * best
    assert simulate(opt * 8, SAVE, REC, WORK, exponential(M), 1) < 0.95 * best


def test_model_matches_simulation_for_exponential_interruptions() -> None:
    opt = optimal_interval(SAVE, M, REC)
    sim = simulate(opt, SAVE, REC, WORK, exponential(M), 3)
    assert sim == pytest.approx(expected_goodput(opt, SAVE, M, REC), abs=0.01)


def test_young_and_daly() -> None:
    assert young_interval(60, 3600) == pytest.approx(math.sqrt(2 * 60 * 3600))
    d = daly_interval(60, 3600)
    assert d < young_interval(60, 3600)
    assert d == pytest.approx(optimal_interval(60, 3600), rel=1e-3)  # Daly approximates the optimum
    assert daly_interval(10_000, 3600) == 3600  # save longer than 2 MTBI: checkpoint every MTBI


def _prod(**kw: object) -> Productivity:
    base: dict[str, object] = {name: None for name in Productivity.__slots__}  # type: ignore[attr-defined]
    base.update(
        steps_executed=0,
        steps_useful=0,
        attempts=(),
        interruptions=0,
        uptime_s=0.0,
        recoveries_s=(),
        lost_progress_s=0.0,
        checkpoint_save=CostStats(0, None, None),
        checkpoint_restore=CostStats(0, None, None),
    )
    base.update(kw)
    return Productivity(**base)  # type: ignore[arg-type]


def test_advice_recommends_a_change_and_counts_steps() -> None:
    p = _prod(
        interruptions=5,
        mtbi_s=M,
        mttr_s=REC,
        checkpoint_save=CostStats(10, SAVE, 70.0),
        checkpoint_interval_s=60.0 + SAVE,
    )
    a = advise(p, step_time_s=2.0)
    assert a.optimal_interval_s is not None and a.goodput_current is not None and a.goodput_optimal is not None
    assert a.goodput_optimal > a.goodput_current
    assert a.recommended_every_steps == round(a.optimal_interval_s / 2.0)
    assert "instead of every 30 steps" in a.recommendation
    same = advise(
        _prod(
            interruptions=5,
            mtbi_s=M,
            mttr_s=REC,
            checkpoint_save=CostStats(10, SAVE, 70.0),
            checkpoint_interval_s=a.optimal_interval_s + SAVE,
        ),
        step_time_s=2.0,
    )
    assert same.recommendation.startswith("Keep")


def test_advice_edge_cases() -> None:
    no_int = advise(_prod(checkpoint_save=CostStats(3, 5.0, 5.0)), step_time_s=1.0)
    assert no_int.optimal_interval_s is None and "No interruptions" in no_int.recommendation
    override = advise(_prod(checkpoint_save=CostStats(3, 5.0, 5.0)), step_time_s=1.0, mtbi_s=1000.0)
    assert override.optimal_interval_s == pytest.approx(optimal_interval(5.0, 1000.0))
    no_save = advise(_prod(interruptions=1, mtbi_s=100.0), step_time_s=1.0)
    assert no_save.optimal_interval_s is None and "No checkpoint save" in no_save.recommendation
