"""An engine fed in batches, asked after each, equals an engine that reads everything at once:
the activities, step times, partition totals, productivity scan and checkpoint figures it extends with each batch
are what a from-scratch derivation gives (late batches, restarts, activities open across
batches, a second host), and what reaches back is counted as a fallback."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlgoodput.accounting import BadputType, Engine, GoodputReport
from mlgoodput.accounting._facts import FactsCache, facts_from_timeline
from mlgoodput.accounting._productivity import productivity
from mlgoodput.events import Event, Kind
from mlgoodput.store._columns import Columns
from tests.accounting.test_properties import flat, jobs

T0 = 1_700_000_000.0


def fresh(events: list[Event]) -> Engine:
    e = Engine()
    e.timeline.ingest(Columns.from_events(sorted(events, key=lambda x: x.time)))
    return e


def assert_same(a: GoodputReport, b: GoodputReport) -> None:
    fa, fb = flat(a), flat(b)
    assert fa.keys() == fb.keys()
    for k in fa:
        assert fa[k] == pytest.approx(fb[k], rel=1e-9, abs=1e-9), k
    assert (a.last_step, a.max_productive_step, a.stops, a.status, a.disruptions, a.hosts) == (
        b.last_step,
        b.max_productive_step,
        b.stops,
        b.status,
        b.disruptions,
        b.hosts,
    )


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    jobs(),
    st.lists(st.integers(0, 1000), max_size=8),
    st.integers(0, 3),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_batches_in_any_split_equal_one_read(
    job: tuple[list[Event], float], cuts: list[int], late: int, two_hosts: bool, rnd: random.Random
) -> None:
    events, q = job
    ordered = sorted(events, key=lambda e: e.time)
    if two_hosts:
        ordered = sorted(ordered + [replace(e, host=1, time=e.time + 0.125) for e in ordered], key=lambda e: e.time)
    n = len(ordered)
    pts = sorted({c % (n + 1) for c in cuts} | {0, n})
    chunks = [ordered[a:b] for a, b in itertools.pairwise(pts) if b > a]
    for _ in range(late):  # a batch delivered after the next one: it reaches back
        if len(chunks) > 1:
            i = rnd.randrange(len(chunks) - 1)
            chunks[i], chunks[i + 1] = chunks[i + 1], chunks[i]
    e = Engine()
    cache = FactsCache()
    seen: list[Event] = []
    for ch in chunks:
        e.timeline.ingest(Columns.from_events(ch))
        seen += ch
        latest = max(ev.time for ev in seen)
        for d in (0.0, 0.5, 3.0):
            f = fresh(seen)
            assert_same(e.report("j", "l", latest + d), f.report("j", "l", latest + d))
            a = facts_from_timeline(e.timeline, latest + d, cache)
            b = facts_from_timeline(f.timeline, latest + d)
            assert _facts(a) == _facts(b)
            r = f.report("j", "l", latest + d)
            assert productivity(a, r) == productivity(b, r)  # (checkpoint figures kept as they came)
    assert_same(e.report("j", "l", q), fresh(ordered).report("j", "l", q))
    assert_same(e.report("j", "l", q + 100), fresh(ordered).report("j", "l", q + 100))


def _facts(f: Any) -> tuple[object, ...]:
    """What the productivity figures take of a JobFacts."""
    return (f.attempts, f.step_ends, f.saves, f.save_steps, f.restores)


def _job(n_steps: int, first: int = 0) -> list[Event]:
    """Steps of 1 s with an eval every 10 steps (0.25 s, inside the step)."""
    out: list[Event] = [Event(Kind.JOB_START, T0)] if first == 0 else []
    for k in range(first, first + n_steps):
        t = T0 + 1 + k
        out.append(Event(Kind.STEP_START, t, step=k))
        if k % 10 == 5:
            out += [Event(Kind.CUSTOM_START, t + 0.5, name="eval"), Event(Kind.CUSTOM_END, t + 0.75, name="eval")]
    return out


def test_new_steps_extend_without_going_back() -> None:
    e = Engine()
    e.timeline.ingest(Columns.from_events(_job(100)))
    e.report("j", "l", T0 + 200)
    for b in range(1, 6):
        e.timeline.ingest(Columns.from_events(_job(50, first=50 + 50 * b)))
        r = e.report("j", "l", T0 + 200 + 50 * b)
        assert_same(r, fresh(_job(50 + 50 * (b + 1))).report("j", "l", T0 + 200 + 50 * b))
    assert e.fallbacks == {"activities": 0, "steps": 0, "steps_all": 0, "partition": 0}


def test_an_activity_open_across_batches_is_laid_up_to_the_query_time() -> None:
    events = [*_job(20), Event(Kind.CUSTOM_START, T0 + 20.5, name="sdc")]
    e = Engine()
    e.timeline.ingest(Columns.from_events(events))
    r = e.report("j", "l", T0 + 30)
    assert r.badput_s[BadputType.CUSTOM_BADPUT_EVENTS]["SDC"] == pytest.approx(9.5)
    late = [Event(Kind.CUSTOM_END, T0 + 25.0, name="sdc"), *_job(5, first=20)[1:]]
    e.timeline.ingest(Columns.from_events(late))
    assert_same(e.report("j", "l", T0 + 40), fresh(events + late).report("j", "l", T0 + 40))
    assert e.fallbacks["activities"] == 0


def test_a_late_event_goes_back_to_its_attempt_and_is_counted() -> None:
    e = Engine()
    first = _job(100)
    e.timeline.ingest(Columns.from_events(first))
    e.report("j", "l", T0 + 200)
    late = [Event(Kind.CUSTOM_START, T0 + 40.1, name="late"), Event(Kind.CUSTOM_END, T0 + 40.3, name="late")]
    e.timeline.ingest(Columns.from_events(late))
    r = e.report("j", "l", T0 + 200)
    assert_same(r, fresh(first + late).report("j", "l", T0 + 200))
    assert e.fallbacks["activities"] == 1
    assert e.fallbacks["steps"] == 1 and e.fallbacks["steps_all"] == 0  # from step 39 on, not from the start


def test_a_restart_closes_the_running_attempt_in_place() -> None:
    e = Engine()
    first = [*_job(30), Event(Kind.CUSTOM_START, T0 + 30.5, name="eval")]
    e.timeline.ingest(Columns.from_events(first))
    e.report("j", "l", T0 + 35)
    again = [Event(Kind.JOB_START, T0 + 40), *[Event(Kind.STEP_START, T0 + 41 + k, step=25 + k) for k in range(10)]]
    e.timeline.ingest(Columns.from_events(again))
    assert_same(e.report("j", "l", T0 + 60), fresh(first + again).report("j", "l", T0 + 60))
    assert e.fallbacks["activities"] == 0 and e.fallbacks["steps_all"] == 0


def test_the_scan_of_other_events_kept_while_only_steps_come_and_made_again_after() -> None:
    """Facts asked after batches of step starts only keep the last scan of the other events
    without a pass over the hosts (FactsCache.quiet); a batch with another event (a save, a
    restart), or a new host, makes it again: each answer is what a fresh timeline gives."""
    e = Engine()
    cache = FactsCache()
    events = _job(0) + [Event(Kind.STEP_START, T0 + 1 + k, step=k) for k in range(20)]
    batches: list[list[Event]] = []
    for b in range(2, 12):
        t = T0 + 1 + 10 * b
        batch = [Event(Kind.STEP_START, t + k, step=10 * b + k) for k in range(10)]
        if b == 5:  # a save in the middle of a batch of steps
            batch.append(Event(Kind.CKPT_SAVE, t + 2.1, step=10 * b + 2, value=0.5))
        if b == 8:  # a restart: a job start, and the steps from a few steps back
            batch = [
                Event(Kind.JOB_START, t),
                *[Event(Kind.STEP_START, t + 1 + k, step=10 * b - 3 + k) for k in range(9)],
            ]
        if b == 10:  # a second host, stepping only
            batch += [Event(Kind.STEP_START, t + 0.5 + k, 1, step=10 * b + k) for k in range(10)]
        batches.append(batch)
    e.timeline.ingest(Columns.from_events(events))
    seen = list(events)
    quiet = 0
    for batch in [[], *batches]:
        e.timeline.ingest(Columns.from_events(sorted(batch, key=lambda x: x.time)))
        seen += batch
        q = max(ev.time for ev in seen) + 0.5
        was = cache.quiet
        a = facts_from_timeline(e.timeline, q, cache)
        quiet += was is not None and cache.seen is not None and cache.quiet is was
        b = facts_from_timeline(fresh(seen).timeline, q)
        assert _facts(a) == _facts(b)
    assert quiet >= 5  # (most batches held only steps)
    assert len(a.attempts) == 2 and a.saves
