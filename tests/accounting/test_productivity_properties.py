"""Properties of the productivity figures on random jobs (the generator of test_properties)."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlgoodput.accounting import Engine
from mlgoodput.accounting._facts import FactsCache, facts_from_timeline
from mlgoodput.accounting._productivity import productivity
from mlgoodput.events import Event, Kind
from mlgoodput.store._columns import Columns
from tests.accounting.test_properties import T0, jobs

EPS = 1e-6


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jobs(), st.floats(1e6, 1e12), st.floats(1e9, 1e15), st.floats(0, 100))
def test_bounds_and_the_product(job: tuple[list[Event], float], fl: float, peak: float, queue: float) -> None:
    events, q = job
    events = [
        *events,
        Event(Kind.STEP_FLOPS, T0, value=fl),
        Event(Kind.PEAK_FLOPS, T0, value=peak),
        Event(Kind.JOB_SUBMIT, T0, value=T0 - queue),
    ]
    e = Engine()
    e.timeline.ingest(Columns.from_events(events))
    r = e.report("j", "l", q)
    p = productivity(facts_from_timeline(e.timeline, q, FactsCache()), r)
    # reliability: ETTR is a share of the wall time; recoveries are durations
    if r.total_s > 0:
        assert p.ettr is not None and -EPS <= p.ettr <= 1 + EPS, p
    assert all(x >= -EPS for x in p.recoveries_s)
    assert p.interruptions == r.disruptions
    if p.interruptions:
        assert p.mtbi_s is not None and abs(p.mtbi_s * p.interruptions - p.uptime_s) < EPS
    else:
        assert p.mtbi_s is None and p.mttr_s is None
    # steps: useful ones are executed ones, FLOPs follow the counts
    assert 0 <= p.steps_useful <= p.steps_executed
    if p.achieved_flops_per_s is not None:
        assert abs(p.achieved_flops_per_s * r.productive_s - fl * p.steps_useful) <= 1e-6 * fl * max(1, p.steps_useful)
    # scheduling goodput and the product; the queue as the stored submit time gives it (a tiny
    # queue next to a UNIX time rounds to no queue at all)
    queue = T0 - (T0 - queue)
    if r.total_s + queue > 0:
        assert p.scheduling_goodput is not None and 0 <= p.scheduling_goodput <= 1 + EPS
        assert abs(p.scheduling_goodput - r.total_s / (r.total_s + queue)) < 1e-6  # UNIX-second rounding
    if p.ml_productivity_goodput is not None:
        assert p.scheduling_goodput is not None
        assert p.program_goodput is not None and p.runtime_goodput is not None
        assert math.isclose(
            p.ml_productivity_goodput, p.scheduling_goodput * p.runtime_goodput * p.program_goodput, rel_tol=1e-12
        )
