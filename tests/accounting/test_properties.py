"""Properties of the accounting that hold for every job (spec/accounting.md), checked with hypothesis."""

from __future__ import annotations

import random
from collections.abc import Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlgoodput.accounting import BadputType, Engine, GoodputReport
from mlgoodput.events import Event, Kind
from mlgoodput.store._columns import Columns

T0 = 1_700_000_000.0
EPS = 1e-6


@st.composite
def jobs(draw: st.DrawFn) -> tuple[list[Event], float]:
    """A random job of one host on a quarter-second grid: attempts with init, prep, loads,
    steps, custom events, checkpoints, restores, compiles, hangs, crashes and job ends."""
    q = lambda lo, hi: draw(st.integers(lo, hi)) / 4.0  # noqa: E731
    t = 0.0
    events: list[Event] = []
    step = 0
    for _ in range(draw(st.integers(1, 3))):
        events.append(Event(Kind.JOB_START, T0 + t))
        for start, end in (
            (Kind.ACCEL_INIT_START, Kind.ACCEL_INIT_END),
            (Kind.TRAINING_PREP_START, Kind.TRAINING_PREP_END),
        ):
            if draw(st.booleans()):
                d = q(0, 12)
                events += [Event(start, T0 + t), Event(end, T0 + t + d)]
                t += d
        if step and draw(st.booleans()):
            back = draw(st.integers(0, step))
            events.append(Event(Kind.CKPT_RESTORE, T0 + t, step=back, value=q(0, 8)))
            t += q(0, 8)
            step = back + 1 if draw(st.booleans()) else back
        if draw(st.booleans()):
            d = q(0, 8)
            events += [Event(Kind.DATA_LOADING_START, T0 + t), Event(Kind.DATA_LOADING_END, T0 + t + d)]
            t += d
        for _ in range(draw(st.integers(0, 12))):
            events.append(Event(Kind.STEP_START, T0 + t, step=step))
            dur = q(1, 8) if draw(st.integers(0, 9)) else q(20, 80)  # sometimes a hang
            if draw(st.integers(0, 5)) == 0:
                name = draw(st.sampled_from(["eval", "sdc_check"]))
                off, d = q(0, 4), q(0, 8)
                events += [
                    Event(Kind.CUSTOM_START, T0 + t + off, name=name),
                    Event(Kind.CUSTOM_END, T0 + t + off + d, name=name),
                ]
            if draw(st.integers(0, 6)) == 0:
                events.append(Event(Kind.CKPT_SAVE, T0 + t + q(0, 4), step=step, value=q(0, 6)))
            if draw(st.integers(0, 6)) == 0:
                events.append(Event(Kind.COMPILE, T0 + t, value=q(0, 8), name="f"))
            if draw(st.integers(0, 6)) == 0:
                d = q(0, 2)
                events += [
                    Event(Kind.DATA_LOADING_START, T0 + t + q(0, 2)),
                    Event(Kind.DATA_LOADING_END, T0 + t + q(2, 6)),
                ]
            if draw(st.integers(0, 8)) == 0:
                events.append(Event(Kind.STEP_END, T0 + t + dur, step=step))
                dur += q(0, 4)
            t += dur
            step += 1
        if draw(st.booleans()):
            if draw(st.booleans()):
                events.append(Event(Kind.CUSTOM_START, T0 + t, name="eval"))  # never ended
            t += q(0, 8)
            events.append(Event(Kind.JOB_END, T0 + t))
        else:
            t += q(0, 12)  # crash: the next job_start supersedes this attempt
        t += q(0, 40)
    return events, T0 + t + q(0, 8)


def report(events: Sequence[Event], query: float, chunks: int = 1, **kw: object) -> GoodputReport:
    e = Engine()
    n = max(1, len(events) // chunks)
    for i in range(0, len(events), n):
        e.timeline.ingest(Columns.from_events(events[i : i + n]))
    return e.report("j", "l", query, **kw)  # type: ignore[arg-type]


def flat(r: GoodputReport) -> dict[str, float]:
    out = {"total": r.total_s, "productive": r.productive_s, "ideal": r.ideal_step_time_s}
    for b, v in r.badput_s.items():
        if isinstance(v, dict):
            for k, s in v.items():
                out[f"custom:{k}"] = s
        else:
            out[b.name] = float(v)
    out["async"] = r.overlapped_s[BadputType.DATA_LOADING_ASYNC]
    return out


def assert_same(r1: GoodputReport, r2: GoodputReport) -> None:
    a, b = flat(r1), flat(r2)
    for k in set(a) | set(b):
        assert a.get(k, 0.0) == pytest.approx(b.get(k, 0.0), abs=EPS), k
    assert (r1.disruptions, r1.last_step, r1.max_productive_step) == (
        r2.disruptions,
        r2.last_step,
        r2.max_productive_step,
    )


def assert_partition(r: GoodputReport) -> None:
    total = r.productive_s
    assert r.productive_s >= -EPS
    for b, v in r.badput_s.items():
        for s in v.values() if isinstance(v, dict) else [v]:
            assert s >= -EPS, (b, s)  # nothing is clamped: a negative bucket is a bug
            total += s
    assert total == pytest.approx(r.total_s, abs=EPS)


SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow
@SETTINGS
@given(jobs())
def test_partition_is_exact(job: tuple[list[Event], float]) -> None:
    events, q = job
    r = report(events, q)
    assert_partition(r)
    assert_same(r, report(events, q, force_layout=True))


@pytest.mark.slow
@SETTINGS
@given(jobs(), st.randoms(use_true_random=False))
def test_order_and_batching_do_not_matter(job: tuple[list[Event], float], rnd: random.Random) -> None:
    events, q = job
    shuffled = list(events)
    rnd.shuffle(shuffled)
    assert_same(report(events, q), report(shuffled, q, chunks=rnd.randint(1, 5)))


@pytest.mark.slow
@SETTINGS
@given(jobs(), st.randoms(use_true_random=False))
def test_duplicates_and_other_hosts_do_not_matter(job: tuple[list[Event], float], rnd: random.Random) -> None:
    events, q = job
    dup = list(events) + [e for e in events if rnd.random() < 0.3]
    # every other host records the same events a little later: they must not count
    from dataclasses import replace

    others = [replace(e, host=h, time=e.time + 0.01 * h) for h in (1, 2) for e in events]
    assert_same(report(events, q), report(dup + others, q))


@pytest.mark.slow
@SETTINGS
@given(jobs(), st.floats(0.0, 1.0), st.floats(0.0, 1.0), st.floats(0.25, 4.0))
def test_windows_add_up(job: tuple[list[Event], float], f1: float, f2: float, ideal: float) -> None:
    events, q = job
    whole = report(events, q, configured_ideal=ideal)
    lo, hi = sorted((f1, f2))
    m1 = whole.start + lo * whole.total_s
    m2 = whole.start + hi * whole.total_s
    parts = [
        report(events, q, start=a, end=b, configured_ideal=ideal)
        for a, b in ((whole.start, m1), (m1, m2), (m2, whole.end))
    ]
    for p in parts:
        assert_partition(p)
    fw = flat(whole)
    fp = [flat(p) for p in parts]
    for k in fw:
        if k == "ideal":
            continue
        assert sum(p.get(k, 0.0) for p in fp) == pytest.approx(fw[k], abs=1e-5), k


@pytest.mark.slow
@SETTINGS
@given(jobs(), st.integers(1, 6))
def test_incremental_queries_match_one_shot(job: tuple[list[Event], float], parts: int) -> None:
    """A calculator asked between arrivals ends where a fresh one starts, including the tail."""
    events, q = job
    ordered = sorted(events, key=lambda e: e.time)
    e = Engine()
    n = max(1, len(ordered) // parts)
    for i in range(0, len(ordered), n):
        e.timeline.ingest(Columns.from_events(ordered[i : i + n]))
        e.report("j", "l", max(ev.time for ev in ordered[: i + n]))
    assert_same(e.report("j", "l", q), report(events, q))


@pytest.mark.slow
@SETTINGS
@given(jobs(), st.lists(st.integers(0, 80), min_size=1, max_size=5), st.booleans())
def test_asking_again_with_nothing_new_matches_one_shot(
    job: tuple[list[Event], float], deltas: list[int], window: bool
) -> None:
    """A query that finds nothing new reuses what the last one derived: it must equal a fresh
    engine's answer at every later query time (a running attempt's end moves with the clock)."""
    events, _ = job
    e = Engine()
    e.timeline.ingest(Columns.from_events(events))
    q = max(ev.time for ev in events)
    for d in deltas:
        q += d / 4.0
        kw: dict[str, object] = {"start": q - 30.0} if window else {}
        assert_same(e.report("j", "l", q, **kw), report(events, q, **kw))  # type: ignore[arg-type]
