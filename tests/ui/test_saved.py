"""The UI's saved series (state namespace `mlgoodput.ui`): a server started again opens a job
from them and shows what a view summarizing every step shows; a saved series that no longer
fits the job's steps is not used."""

from __future__ import annotations

from pathlib import Path

import pytest
from ui_helpers import scenario

from mlgoodput.accounting import GoodputCalculator
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore, SQLiteStore
from mlgoodput.ui import _charts, _saved
from mlgoodput.ui._job import JobView


def _big(n: int, restart_at: int | None = None) -> list[Event]:
    ev = [Event(Kind.JOB_START, 0.0)]
    t = 1.0
    for k in range(n):
        if k == restart_at:
            ev.append(Event(Kind.JOB_START, t + 0.5))
            t += 3.0
        ev.append(Event(Kind.STEP_START, t, 0, k))
        t += 0.1 + (0.9 if k % 997 == 0 else 0.0)  # a stall now and then
        if k % 500 == 499:
            ev.append(Event(Kind.CKPT_SAVE, t - 0.05, 0, k, 0.02))
    return ev


def _same(a: JobView, b: JobView) -> None:
    assert a.report().to_dict() == b.report().to_dict()
    assert _charts.steps(a, 300) == _charts.steps(b, 300)
    assert _charts.timeline(a, 800) == _charts.timeline(b, 800)
    assert a.detail() == b.detail()
    for h in b.hosts:
        assert a.hosts[h].blocks.reduce(50) == b.hosts[h].blocks.reduce(50)


@pytest.mark.parametrize("restart_at", [None, 3_000])
def test_reopen_uses_saved_series(restart_at: int | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_saved, "MIN_STEPS", 1_000)
    ev = _big(6_000, restart_at)
    half = len(ev) // 2
    st = SQLiteStore(tmp_path / "s.db")
    st.append("g", "big", EventBatch(1, 0, ev[:half]))
    first = JobView(st, "big", "g", clock=lambda: 1e6)
    first.refresh()
    assert first.keep_due() and first.keep()
    assert not first.keep()  # nothing new: no second save
    assert _saved.load(st, "g", "big") is not None
    st.append("g", "big", EventBatch(1, half, ev[half:]))
    again = JobView(st, "big", "g", clock=lambda: 1e6)
    again.refresh()
    assert again._saved_steps > 0  # the saved series were used
    fresh = SQLiteStore(tmp_path / "fresh.db")
    fresh.append("g", "big", EventBatch(1, 0, ev))
    once = JobView(fresh, "big", "g", clock=lambda: 1e6)
    once.refresh()
    assert once._saved_steps == 0
    _same(again, once)
    st.close()
    fresh.close()


def test_saved_series_that_no_longer_fit_are_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A late step stored among the summarized ones (another writer, a retried batch): the
    saved summaries are not used; the page equals one summarized from the steps."""
    monkeypatch.setattr(_saved, "MIN_STEPS", 1_000)
    ev = _big(4_000)
    st = SQLiteStore(tmp_path / "s.db")
    st.append("g", "big", EventBatch(1, 0, ev))
    first = JobView(st, "big", "g", clock=lambda: 1e6)
    first.refresh()
    assert first.keep()
    late = [Event(Kind.STEP_START, 100.05, 0, 10_000)]  # between two summarized steps
    st.append("g", "big", EventBatch(2, 0, late))
    again = JobView(st, "big", "g", clock=lambda: 1e6)
    again.refresh()
    assert again._saved_steps == 0
    fresh = SQLiteStore(tmp_path / "fresh.db")
    fresh.append("g", "big", EventBatch(1, 0, ev))
    fresh.append("g", "big", EventBatch(2, 0, late))
    once = JobView(fresh, "big", "g", clock=lambda: 1e6)
    once.refresh()
    _same(again, once)
    st.close()
    fresh.close()


def test_reopen_on_a_memory_store(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_saved, "MIN_STEPS", 10)
    sc = scenario("s4_disruption_restart")
    st = MemoryStore()
    st.append("g", sc.job_name, EventBatch(1, 0, sc.events))
    v = JobView(st, sc.job_name, "g", clock=lambda: sc.query)
    v.refresh()
    v.keep()
    again = JobView(st, sc.job_name, "g", clock=lambda: sc.query)
    again.refresh()
    assert again.detail() == v.detail()


def test_damaged_saved_series_are_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_saved, "MIN_STEPS", 1_000)
    st = SQLiteStore(tmp_path / "s.db")
    st.append("g", "big", EventBatch(1, 0, _big(3_000)))
    st.save_state(_saved.NAMESPACE, _saved.key("g", "big"), [b'{"format": 1, "hosts": [{"host": 0}]}'])
    assert _saved.load(st, "g", "big") is None
    st.save_state(_saved.NAMESPACE, _saved.key("g", "big"), [b"not json"])
    v = JobView(st, "big", "g", clock=lambda: 1e6)
    v.refresh()
    assert v._saved_steps == 0 and _charts.steps(v, 300)["points"] == 2_999
    st.close()


def test_reopen_of_a_finished_job_shows_the_saved_straggler_analysis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The page's analysis is the accounting's, saved with the accounting's state when the page
    saves (`keep`): a calculator opened again answers from it without computing it."""
    from mlgoodput.accounting import _calculator, _stragglers

    monkeypatch.setattr(_saved, "MIN_STEPS", 1_000)
    monkeypatch.setattr(_calculator, "SNAPSHOT_EVERY", 1_000)  # the accounting saves this small job too
    ev = _big(5_000)
    for h in (1, 2, 3):
        ev.append(Event(Kind.JOB_START, 0.01 * h, h))
        ev += [
            Event(Kind.STEP_START, e.time + (0.05 if h == 2 else 0.001 * h), h, e.step)
            for e in ev[:900]
            if e.kind == Kind.STEP_START and e.host == 0
        ]
    ev.append(Event(Kind.JOB_END, max(e.time for e in ev) + 1.0))
    st = SQLiteStore(tmp_path / "s.db")
    st.append("g", "big", EventBatch(1, 0, sorted(ev, key=lambda e: e.time)))
    first = JobView(st, "big", "g", clock=lambda: 1e6)
    d1 = first.detail()
    assert d1["straggler"] is not None and d1["straggler"]["host"] == 2
    assert first.keep()
    assert st.load_state(_stragglers.STATE_NAMESPACE, _stragglers.state_key("g", "big")) is not None

    def boom(*a: object, **k: object) -> None:
        raise AssertionError("computed again")

    monkeypatch.setattr(_stragglers.HostStragglers, "report", boom)
    again = GoodputCalculator("big", "g", store=st, clock=lambda: 1e6)
    rep = again.stragglers(d1["report"]["start"], d1["report"]["end"])
    assert rep.straggler == 2 and rep.straggler_cost_s == d1["straggler"]["cost_s"]
    assert {k: d1["straggler_verdict"][k] for k in rep.verdict.__slots__} == rep.verdict.to_dict()
    st.close()


def _goodput(v: JobView) -> dict[str, object]:
    while True:  # the pieces come from a background thread: ask until complete
        g = _charts.goodput_series(v, 40, 60.0, wait_s=5.0)
        if g["complete"]:
            return g


def test_reopen_starts_from_the_saved_goodput_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_saved, "MIN_STEPS", 1_000)
    ev = _big(4_000, 2_000)
    ev.append(Event(Kind.JOB_END, ev[-1].time + 1.0))
    st = SQLiteStore(tmp_path / "s.db")
    st.append("g", "big", EventBatch(1, 0, ev))
    first = JobView(st, "big", "g", clock=lambda: 1e6)
    first.refresh()
    g1 = _goodput(first)
    first.keep()
    got = _saved.load(st, "g", "big")
    assert got is not None and got.pieces is not None and len(got.pieces.rows) >= 20
    again = JobView(st, "big", "g", clock=lambda: 1e6)
    calls = []
    real = again.calc.report

    def counted(*a: object, **k: object) -> object:
        if a or k:
            calls.append(a)
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(again.calc, "report", counted)
    again.refresh()
    assert _goodput(again) == g1
    assert len(calls) <= 2  # the pieces not settled when saved (the last one) only
    st.close()


def test_snapshot_off_saves_and_reads_no_series(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_saved, "MIN_STEPS", 1_000)
    st = SQLiteStore(tmp_path / "s.db")
    st.append("g", "big", EventBatch(1, 0, _big(3_000)))
    v = JobView(st, "big", "g", clock=lambda: 1e6)
    v.refresh()
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "0")
    assert not v.keep() and st.load_state(_saved.NAMESPACE, _saved.key("g", "big")) is None
    monkeypatch.delenv("MLGOODPUT_SNAPSHOT")
    assert v.keep()
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "off")
    assert _saved.load(st, "g", "big") is None
    st.close()
