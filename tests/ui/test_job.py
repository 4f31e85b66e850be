"""A job's view grown batch by batch (as a live page sees it) equals the view read at once."""

from __future__ import annotations

from pathlib import Path

import pytest
from ui_helpers import scenario

from mlgoodput.events import EventBatch
from mlgoodput.store import SQLiteStore
from mlgoodput.ui import _charts
from mlgoodput.ui._job import JobView

NAMES = [
    "s2_custom_and_async_data",
    "s3_checkpoint_save_restore",
    "s4_disruption_restart",
    "s7_crash_loop",
    "s8_multihost_duplicates",
    "s9_elastic_pause",
    "s12_custom_at_edges",
]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("batch", [1, 7])
def test_incremental_view_equals_one_read(name: str, batch: int, tmp_path: Path) -> None:
    tl = scenario(name)
    q = tl.query
    whole = SQLiteStore(tmp_path / "whole.db")
    whole.append("g", tl.job_name, EventBatch(1, 0, tl.events))
    grown = SQLiteStore(tmp_path / "grown.db")
    live = JobView(grown, tl.job_name, "g", clock=lambda: q)
    for i in range(0, len(tl.events), batch):
        grown.append("g", tl.job_name, EventBatch(1, i, tl.events[i : i + batch]))
        live.refresh()
        live.detail()
        _charts.timeline(live, 800)
    once = JobView(whole, tl.job_name, "g", clock=lambda: q)
    once.refresh()
    assert live.report().to_dict() == once.report().to_dict()
    for h in once.hosts:
        assert live._pairs(live.hosts[h]) == once._pairs(once.hosts[h])
        assert list(live.hosts[h].durs) == pytest.approx(list(once.hosts[h].durs), nan_ok=True)
    assert live.attempts() == once.attempts()
    assert _charts.timeline(live, 800) == _charts.timeline(once, 800)
    assert _charts.steps(live, 300) == _charts.steps(once, 300)
    d1, d2 = live.detail(), once.detail()
    assert d1 == d2
    whole.close()
    grown.close()


@pytest.mark.parametrize("name", NAMES)
def test_view_from_saved_state_equals_one_read(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A server started again on a store holding the accounting's saved state starts from it
    (reading only the events stored since) and shows what a view read from the start shows."""
    tl = scenario(name)
    q = tl.query
    half = len(tl.events) // 2
    st = SQLiteStore(tmp_path / "s.db")
    st.append("g", tl.job_name, EventBatch(1, 0, tl.events[:half]))
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "always")
    first = JobView(st, tl.job_name, "g", clock=lambda: q)
    first.refresh()
    assert st.load_state("g", tl.job_name) is None  # the page's read leaves the save to keep()
    assert first.keep_due() and first.keep()  # (the server's background worker calls it)
    assert st.load_state("g", tl.job_name) is not None
    st.append("g", tl.job_name, EventBatch(1, half, tl.events[half:]))
    again = JobView(st, tl.job_name, "g", clock=lambda: q)
    again.refresh()
    assert again.calc._engine.timeline.events == len(tl.events)
    seeded = again.events
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "0")
    once = JobView(st, tl.job_name, "g", clock=lambda: q)
    once.refresh()
    assert seeded == once.events == len(tl.events)
    assert again.report().to_dict() == once.report().to_dict()
    assert sorted(again.hosts) == sorted(once.hosts)
    for h in once.hosts:
        assert list(again.hosts[h].times) == list(once.hosts[h].times)
        assert list(again.hosts[h].nums) == list(once.hosts[h].nums)
        assert again._pairs(again.hosts[h]) == once._pairs(once.hosts[h])
    assert again.attempts() == once.attempts()
    assert _charts.timeline(again, 800) == _charts.timeline(once, 800)
    assert _charts.steps(again, 300) == _charts.steps(once, 300)
    assert again.detail() == once.detail()
    st.close()


def test_block_summaries_grown_with_restarts_equal_one_pass(tmp_path: Path) -> None:
    """The step-duration blocks kept while a job grows (restarts arriving after their steps,
    one stored late among steps already summarized) equal those of one read."""
    from mlgoodput.events import Event, Kind

    ev = [Event(Kind.JOB_START, 0.0)]
    t = 1.0
    for k in range(3_000):
        if k in (700, 1_900):
            ev.append(Event(Kind.JOB_START, t + 0.2))
            t += 2.0
        ev.append(Event(Kind.STEP_START, t, 0, k))
        t += 0.1 + (0.05 if k % 13 == 0 else 0.0)
    late = Event(Kind.JOB_START, 50.05)  # between two steps summarized long before it is stored
    grown = SQLiteStore(tmp_path / "grown.db")
    live = JobView(grown, "j", "g", clock=lambda: 1e6)
    for i in range(0, len(ev), 250):
        grown.append("g", "j", EventBatch(1, i, ev[i : i + 250]))
        live.refresh()
    grown.append("g", "j", EventBatch(2, 0, [late]))
    live.refresh()
    whole = SQLiteStore(tmp_path / "whole.db")
    whole.append("g", "j", EventBatch(1, 0, sorted([*ev, late], key=lambda e: e.time)))
    once = JobView(whole, "j", "g", clock=lambda: 1e6)
    once.refresh()
    a, b = live.hosts[0].blocks, once.hosts[0].blocks
    assert list(a.x) == list(b.x) and list(a.n) == list(b.n) and a.done == b.done
    for mine, want in ((a.sum, b.sum), (a.lo, b.lo), (a.hi, b.hi)):
        assert list(mine) == pytest.approx(list(want), nan_ok=True)
    assert _charts.steps(live, 60) == _charts.steps(once, 60)
    grown.close()
    whole.close()


def test_a_running_jobs_timeline_is_its_report(tmp_path: Path) -> None:
    """While a job runs (a clock that moves at every look), the timeline colours exactly the
    seconds of the report the page shows beside it, not the job a moment later."""
    from test_api import lane_seconds, report_seconds

    from mlgoodput.events import Event, Kind

    t0 = 1_700_000_000.0
    ev = [Event(Kind.JOB_START, t0)] + [Event(Kind.STEP_START, t0 + 1 + 0.5 * k, step=k) for k in range(40)]
    st = SQLiteStore(tmp_path / "s.db")
    st.append("g", "live", EventBatch(1, 0, ev))
    now = [t0 + 30.0]

    def clock() -> float:
        now[0] += 0.25  # every look is a quarter second later
        return now[0]

    view = JobView(st, "live", "g", clock=clock)
    tl = _charts.timeline(view, 800)
    rep = view.report(max_age_s=1e9)  # the report the timeline was drawn beside
    assert rep.status == "running"
    want, got = report_seconds(rep.to_dict()), lane_seconds(tl)
    assert want.get("stall", 0.0) > 0  # the step still running stalls
    for k in set(want) | set(got):
        assert got.get(k, 0.0) == pytest.approx(want.get(k, 0.0), abs=1e-9), k
    st.close()
