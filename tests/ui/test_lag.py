"""The job page's straggler figures are the accounting's analysis (`GoodputCalculator.stragglers`,
no second matcher in the UI): the same as the full pass (`analyze`), also on jobs whose lead
host holds far more steps than the others, in a window, and with no cap on the job's length."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ui_helpers import scenario

from mlgoodput.accounting import GoodputCalculator, analyze_stragglers
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore, SQLiteStore
from mlgoodput.ui import _job as job_module
from mlgoodput.ui._job import JobView


def _same(events: list[Event], start: float, end: float) -> None:
    """The calculator's analysis of the window equals the full pass over the same step starts."""
    store = MemoryStore()
    store.append("g", "j", EventBatch(1, 0, sorted(events, key=lambda e: e.time)))
    calc = GoodputCalculator("j", "g", store=store, snapshot=False)
    got = calc.stragglers(None if math.isinf(start) else start, None if math.isinf(end) else end)
    tl = calc.timeline
    js = {h: list(log.job_starts) for h, log in tl.hosts.items()}
    steps = {
        h: list(zip(log.times, log.nums, strict=True)) for h in sorted(tl.hosts) if len((log := tl.hosts[h]).times)
    }
    assert got == analyze_stragglers(js, steps, start, end)  # every float bit for bit


def _job(
    lead_steps: int, others: list[tuple[int, float]], restarts: list[float], order: list[int] | None
) -> list[Event]:
    """A lead host (0) with `lead_steps` steps and hosts with (steps, lateness) each; restarts at
    the given times on every host; `order`: step numbers of the lead (not monotonic when shuffled)."""
    ev = [Event(Kind.JOB_START, 0.0, 0)]
    ev += [Event(Kind.JOB_START, t, 0) for t in restarts]
    nums = order if order is not None else list(range(lead_steps))
    ev += [Event(Kind.STEP_START, 1.0 + k, 0, nums[k]) for k in range(lead_steps)]
    for h, (n, late) in enumerate(others, 1):
        ev.append(Event(Kind.JOB_START, 0.01 * h, h))
        ev += [Event(Kind.JOB_START, t + 0.01 * h, h) for t in restarts]
        ev += [Event(Kind.STEP_START, 1.0 + k + late * (k % 3 == 0), h, k) for k in range(n)]
    return ev


@pytest.mark.slow
@settings(max_examples=60, deadline=None)
@given(
    st.integers(2, 400),
    st.lists(st.tuples(st.integers(0, 60), st.floats(0.0, 0.5)), min_size=1, max_size=4),
    st.lists(st.floats(1.5, 300.0), max_size=3),
    st.booleans(),
    st.randoms(use_true_random=False),
)
def test_the_page_analysis_equals_the_full_pass(
    lead: int, others: list[tuple[int, float]], restarts: list[float], shuffle: bool, rng: object
) -> None:
    order = None
    if shuffle:
        order = list(range(lead))
        rng.shuffle(order)  # type: ignore[attr-defined]
    ev = _job(lead, others, restarts, order)
    _same(ev, -math.inf, math.inf)
    _same(ev, 3.0, 40.0)


@pytest.mark.slow
def test_a_long_lead_host_gives_the_full_pass() -> None:
    """200,000 steps on the lead, 300 on each of three others (host 2 late): the same figures
    as the full pass, which compares the 300 shared steps."""
    ev = _job(200_000, [(300, 0.0), (300, 0.4), (300, 0.01)], [], None)
    _same(ev, -math.inf, math.inf)
    store = MemoryStore()
    store.append("g", "j", EventBatch(1, 0, sorted(ev, key=lambda e: e.time)))
    assert GoodputCalculator("j", "g", store=store, snapshot=False).stragglers().straggler == 2


@pytest.mark.parametrize("name", ["s8_multihost_duplicates"])
def test_job_page_straggler_rows(name: str, tmp_path: Path) -> None:
    """The job page's hosts rows and straggler are the accounting's analysis (no step cap)."""
    sc = scenario(name)
    store = SQLiteStore(tmp_path / "s.db")
    store.append("g", sc.job_name, EventBatch(1, 0, sc.events))
    v = JobView(store, sc.job_name, "g", clock=lambda: sc.query)
    d = v.detail()
    rows = d["hosts"]
    assert len(rows) == 3 and all("held_back_s" in r for r in rows)
    r = v.report()
    js = {h: list(hs.job_starts) for h, hs in v.hosts.items()}
    steps = {h: list(zip(hs.times, hs.nums, strict=True)) for h, hs in sorted(v.hosts.items())}
    want = analyze_stragglers(js, steps, r.start, r.end)
    by = {x.rank: x for x in want.ranks}
    for row in rows:  # the same figures, to the bit
        assert (row["held_back_s"], row["late_s"]) == (by[row["host"]].held_back_s, by[row["host"]].mean_lag_s)
    assert d["straggler_verdict"]["text"] == want.verdict.text()
    store.close()


def test_long_job_lag_is_computed_later(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above LAG_LATER_STEPS the page opens without the lateness columns (`lag_pending`), and
    after the background worker's `lag_now` shows the figures an inline analysis gives."""
    sc = scenario("s8_multihost_duplicates")
    store = SQLiteStore(tmp_path / "s.db")
    store.append("g", sc.job_name, EventBatch(1, 0, sc.events))
    inline = JobView(store, sc.job_name, "g", clock=lambda: sc.query).detail()
    monkeypatch.setattr(job_module, "LAG_LATER_STEPS", 1)
    v = JobView(store, sc.job_name, "g", clock=lambda: sc.query)
    d = v.detail()
    assert d["lag_pending"] and v.lag_wanted
    assert not any("held_back_s" in r for r in d["hosts"])
    v.lag_now()
    later = v.detail()
    assert not later["lag_pending"] and not v.lag_wanted
    assert later == inline
    store.close()
