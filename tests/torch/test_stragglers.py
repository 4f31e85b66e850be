"""Straggler analysis on a known timeline of three ranks, and its lines in `mlgoodput report`."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

import mlgoodput.torch as mt
from mlgoodput import cli
from mlgoodput._recorder import GoodputRecorder

T0 = 1_800_000_000.0
STEP = 1.0
LATE = {0: 0.0, 1: 0.04, 2: 0.3}  # rank -> how late it starts every step


def at(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC)


def record(store: str) -> None:
    for rank, late in LATE.items():
        r = GoodputRecorder("j", "goodput", True, store=store, process_index=rank)
        r.record_job_start_time(at(T0))
        for n in range(10):
            r.record_step_start_time(n, at(T0 + 1 + n * STEP + late))
        # a restart: attempt 2 redoes steps 8 and 9, rank 2 no longer late
        r.record_job_start_time(at(T0 + 20))
        for n in (8, 9):
            r.record_step_start_time(n, at(T0 + 21 + (n - 8) * STEP + (late if rank < 2 else 0.0)))
        r.record_job_end_time(at(T0 + 23))
        r.close()


def test_the_late_rank_and_what_it_cost(tmp_path: Path) -> None:
    store = f"sqlite://{tmp_path}/s.db"
    record(store)
    s = mt.stragglers("j", store=store)
    assert s.steps_compared == 12  # steps are matched by attempt and number
    assert s.straggler == 2
    assert s.straggler_cost_s == pytest.approx(10 * (0.3 - 0.04))
    by = {r.rank: r for r in s.ranks}
    assert by[2].last_steps == 10 and by[1].last_steps == 2  # rank 1 is last after the restart
    assert by[1].held_back_s == pytest.approx(2 * 0.04)
    assert by[2].mean_lag_s == pytest.approx((10 * 0.3) / 12)
    assert by[0].median_step_s == pytest.approx(STEP)
    assert s.max_spread_s == pytest.approx(0.3)
    # a window of the second attempt only: rank 1 leads by 0.04 s of 1 s steps, under 5 % of a step: noise
    late = mt.stragglers("j", store=store, start=T0 + 20)
    assert late.steps_compared == 2 and late.straggler is None
    assert late.lines()[0].startswith("stragglers: none")


def test_report_shows_stragglers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    store = f"sqlite://{tmp_path}/s.db"
    record(store)
    assert cli.main(["report", "--job", "j", "--store", store]) == 0
    text = capsys.readouterr().out
    assert "straggler: rank 2 held the others back 2.60 s over 12 steps" in text
    assert cli.main(["report", "--job", "j", "--store", store, "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["stragglers"]["straggler"] == 2 and len(d["stragglers"]["ranks"]) == 3


def test_monitor_exports_stragglers(tmp_path: Path) -> None:
    from mlgoodput._monitoring._source import GoodputSource

    store = f"sqlite://{tmp_path}/s.db"
    record(store)
    src = GoodputSource("j", "goodput", store)
    samples = {(x.name, x.labels.get("rank")): x.value for x in src.collect(T0 + 30)}
    assert samples[("stragglers/straggler_rank", None)] == 2
    assert samples[("stragglers/straggler_cost_seconds", None)] == pytest.approx(2.6)
    assert samples[("stragglers/held_back_seconds", "2")] == pytest.approx(2.6)
    assert samples[("stragglers/median_step_seconds", "0")] == pytest.approx(STEP)
    assert ("goodput/goodput_pct", None) in samples


def test_ui_job_page_shows_stragglers(tmp_path: Path) -> None:
    from mlgoodput.store import open_store
    from mlgoodput.ui._job import JobView

    store = f"sqlite://{tmp_path}/s.db"
    record(store)
    view = JobView(open_store(store), "j", "goodput", clock=lambda: T0 + 30)
    view.refresh()
    d = view.detail()
    assert d["straggler"] == {"host": 2, "cost_s": pytest.approx(2.6)}
    v = d["straggler_verdict"]  # with its evidence: rank 2 late in its 10 steps of attempt 1
    assert (v["straggler"], v["rank"], v["late_steps"], v["steps"]) == (2, 2, 10, 12)
    assert v["p_value"] < 0.01 and v["text"].startswith("rank 2 started 10 of 12 steps")
    rows = {r["host"]: r for r in d["hosts"]}
    assert rows[2]["held_back_s"] == pytest.approx(2.6) and rows[2]["last_steps"] == 10
    assert rows[0]["late_s"] == 0.0


def test_compare_step_starts_equals_analyze() -> None:
    """Steps matched by the caller (the UI matches its own) give `analyze`'s report."""
    js = {r: [T0, T0 + 20] for r in LATE}
    steps = {r: [(T0 + 1 + n * STEP + late, n) for n in range(10)] for r, late in LATE.items()}
    for r, late in LATE.items():
        steps[r] += [(T0 + 21 + k * STEP + (late if r < 2 else 0.0), 8 + k) for k in range(2)]
    want = mt.analyze_stragglers(js, steps)
    starts: dict[tuple[int, int], dict[int, float]] = {}
    for r, seq in steps.items():
        for t, n in seq:
            starts.setdefault((1 + (t >= T0 + 20), n), {})[r] = t
    stats = {x.rank: (x.steps, x.median_step_s, x.p90_step_s, x.max_step_s) for x in want.ranks}
    got = mt.compare_step_starts(starts, stats)
    assert got.straggler == want.straggler == 2
    assert got == want  # the same per-step sums, in the same order
