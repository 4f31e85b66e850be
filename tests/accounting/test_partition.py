"""The report's partition placed in time (GoodputCalculator.partition): disjoint segments that
cover the window, whose seconds per bucket equal the report's, on every scenario timeline,
random jobs, windows, and a long job with checkpoints, stalls, compiles, step ends and a
restart (numpy on and off)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path

import pytest
from hypothesis import given

from mlgoodput.accounting import Engine, GoodputCalculator, GoodputReport, Segment, _fast
from mlgoodput.accounting._partition import partition
from mlgoodput.events import Event, EventBatch
from mlgoodput.store import SQLiteStore
from mlgoodput.store._columns import Columns
from tests.accounting.test_overtime import _long_job
from tests.accounting.test_properties import SETTINGS, jobs
from timelines import all_timelines, load

EPS = 1e-6


def by_bucket(r: GoodputReport) -> dict[str, float]:
    """The report's seconds per bucket, named as the segments name them."""
    d = r.to_dict()
    out = {"productive": r.productive_s}
    for k, v in d["badput_s"].items():
        if isinstance(v, dict):
            out.update({f"{k}:{n}": s for n, s in v.items()})
        else:
            out[k] = v
    return out


def assert_laid_out(segs: Sequence[Segment], r: GoodputReport) -> None:
    """Disjoint, sorted, covering [r.start, r.end], and the report's seconds per bucket."""
    if r.total_s <= 0:
        assert not segs
        return
    assert segs[0].start == pytest.approx(r.start, abs=EPS)
    assert segs[-1].end == pytest.approx(r.end, abs=EPS)
    for x, y in itertools.pairwise(segs):
        assert x.end <= y.start + 1e-9, (x, y)  # disjoint
        assert y.start - x.end < EPS, (x, y)  # no hole
        assert x.end > x.start
    got: dict[str, float] = {}
    for s in segs:
        got[s.bucket] = got.get(s.bucket, 0.0) + s.seconds
    want = by_bucket(r)
    for k in set(got) | set(want):
        assert got.get(k, 0.0) == pytest.approx(want.get(k, 0.0), abs=EPS), k


@pytest.mark.parametrize("path", all_timelines(), ids=lambda p: p.stem)
def test_every_timeline(path: Path, tmp_path: Path) -> None:
    tl = load(path)
    st = SQLiteStore(tmp_path / "s.db")
    st.append("g", tl.job_name, EventBatch(1, 0, tl.events))
    calc = GoodputCalculator(tl.job_name, "g", store=st, clock=lambda: tl.query, snapshot=False)
    r = calc.report()
    assert_laid_out(calc.partition(), r)
    a, b = r.start + 0.3 * r.total_s, r.start + 0.8 * r.total_s  # a window: the whole one clipped
    assert_laid_out(calc.partition(a, b), calc.report(a, b))
    st.close()


def _engine(events: Sequence[Event]) -> Engine:
    e = Engine()
    e.timeline.ingest(Columns.from_events(events))
    return e


@pytest.mark.slow
@SETTINGS
@given(jobs())
def test_random_jobs(job: tuple[list[Event], float]) -> None:
    events, q = job
    r = _engine(events).report("j", "l", q)
    assert_laid_out(partition(_engine(events), q, None, None, None), r)


@pytest.mark.parametrize("numpy", ["1", "0"])
def test_long_job(numpy: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if numpy == "1":
        pytest.importorskip("numpy")
    monkeypatch.setenv("MLGOODPUT_NUMPY", numpy)
    _fast.reset()
    try:
        ev = _long_job(5)
        st = SQLiteStore(tmp_path / "s.db")
        st.append("g", "long", EventBatch(1, 0, ev))
        calc = GoodputCalculator("long", "g", store=st, clock=lambda: ev[-1].time + 10, snapshot=False)
        r = calc.report()
        segs = calc.partition()
        assert_laid_out(segs, r)
        buckets = {s.bucket for s in segs}
        assert {"stall", "unproductive_checkpoint_save_time", "wasted_progress_from_disruption"} <= buckets
        # a plain run of steps is one segment: far fewer segments than steps
        assert len(segs) < len(ev) / 10
        st.close()
    finally:
        _fast.reset()


def test_stall_only_where_the_report_counts_it(tmp_path: Path) -> None:
    """A checkpoint, an evaluation and a recompile inside steps are their own buckets, never
    stall; the one hang is the only stall."""
    from mlgoodput.events import Kind

    t = 1_700_000_000.0
    ev = [Event(Kind.JOB_START, t)]
    t += 1
    for step in range(300):
        ev.append(Event(Kind.STEP_START, t, step=step))
        if step and step % 100 == 0:
            ev.append(Event(Kind.CKPT_SAVE, t + 0.01, step=step, value=2.0))
            ev.append(Event(Kind.CUSTOM_START, t + 2.1, name="eval"))
            ev.append(Event(Kind.CUSTOM_END, t + 3.1, name="eval"))
            ev.append(Event(Kind.COMPILE, t + 3.1, name="f", value=1.4))
            t += 4.4  # the step is as long as what it holds plus the ideal step time
        t += 30.0 if step == 150 else 0.1
    ev.append(Event(Kind.JOB_END, t))
    st = SQLiteStore(tmp_path / "s.db")
    st.append("g", "j", EventBatch(1, 0, ev))
    calc = GoodputCalculator("j", "g", store=st, snapshot=False)
    r = calc.report()
    segs = calc.partition()
    assert_laid_out(segs, r)
    stalls = [s for s in segs if s.bucket == "stall"]
    assert len(stalls) == 1 and stalls[0].seconds == pytest.approx(29.9)  # the hang, once
    assert sum(s.seconds for s in segs if s.bucket == "unproductive_checkpoint_save_time") == pytest.approx(4.0)
    assert sum(s.seconds for s in segs if s.bucket == "custom_badput_events:EVAL") == pytest.approx(2.0)
    assert sum(s.seconds for s in segs if s.bucket == "program_startup") == pytest.approx(2 * 1.4 + 0.0, abs=0.2)
    st.close()


def test_empty() -> None:
    calc = GoodputCalculator("none", "g", store="memory://", snapshot=False)
    assert calc.partition() == ()
