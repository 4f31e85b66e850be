"""The fleet view against a hand computation: jobs of known timelines, sizes and labels, some
only partly inside the range (edges that cut an hour, asked of the job's accounting), a
restart, a queue before the first start, a job outside the range; exact equality throughout
(every time is a whole second, so every sum is exact in floating point)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mlgoodput.accounting import FleetSource, GoodputCalculator, Prices
from mlgoodput.accounting._fleet import BUCKETS, NAMESPACE, JobSummary, key
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore

D = 1_700_006_400.0  # a UTC midnight (2023-11-15)
H = 3600.0


def _labels(t: float, labels: dict[str, str], n: int | None, kind: str | None) -> Event:
    return Event(Kind.JOB_LABELS, t, value=None if n is None else float(n), name=kind, attrs={"labels": labels})


def job_a() -> list[Event]:
    """nlp, 8 H100: queued from +400, starts +1000, init 10 s, idle 10 s, 3,000 steps of 2 s, ends +7020."""
    ev = [
        Event(Kind.JOB_SUBMIT, D + 300, value=D + 400, name="recorded"),
        Event(Kind.JOB_START, D + 1000),
        _labels(D + 1000, {"team": "nlp", "model": "llama"}, 8, "H100"),
        Event(Kind.ACCEL_INIT_START, D + 1000),
        Event(Kind.ACCEL_INIT_END, D + 1010),
    ]
    ev += [Event(Kind.STEP_START, D + 1020 + 2 * k, step=k) for k in range(3000)]
    return [*ev, Event(Kind.JOB_END, D + 7020)]


def job_b() -> list[Event]:
    """vision, 4 A100: 100 steps of 4 s from +5010, crashes; restarts at +5500 from step 0 (every
    step redone), 200 steps of 4 s from +5510, ends +6310."""
    ev = [Event(Kind.JOB_START, D + 5000), _labels(D + 5000, {"team": "vision"}, 4, "A100")]
    ev += [Event(Kind.STEP_START, D + 5010 + 4 * k, step=k) for k in range(100)]
    ev += [Event(Kind.JOB_START, D + 5500), _labels(D + 5500, {"team": "vision"}, 4, "A100")]
    ev += [Event(Kind.STEP_START, D + 5510 + 4 * k, step=k) for k in range(200)]
    return [*ev, Event(Kind.JOB_END, D + 6310)]


def job_c() -> list[Event]:
    """nlp, accelerators not recorded (counted as 1): 3,610 steps of 1 s from -1790, ends +1820."""
    ev = [Event(Kind.JOB_START, D - 1800), _labels(D - 1800, {"team": "nlp"}, None, None)]
    ev += [Event(Kind.STEP_START, D - 1790 + k, step=k) for k in range(3610)]
    return [*ev, Event(Kind.JOB_END, D + 1820)]


def job_d() -> list[Event]:
    """No team, 2 accelerators, over before the range starts."""
    ev = [Event(Kind.JOB_START, D - 7000), _labels(D - 7000, {"model": "bert"}, 2, "H100")]
    ev += [Event(Kind.STEP_START, D - 6990 + k, step=k) for k in range(100)]
    return [*ev, Event(Kind.JOB_END, D - 6890)]


JOBS = {"a": job_a, "b": job_b, "c": job_c, "d": job_d}


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    st = SQLiteStore(str(tmp_path / "fleet.db"))
    for w, (name, make) in enumerate(JOBS.items(), start=1):
        st.append("log", name, EventBatch(w, 0, make()))
    return st


def _src(st: SQLiteStore) -> FleetSource:
    return FleetSource(st, clock=lambda: D + 86400)


def _zero_but(**hours: float) -> dict[str, float]:
    out = dict.fromkeys(BUCKETS, 0.0)
    out.update(hours)
    return out


SINCE, UNTIL = D + 900, D + 6000  # both edges cut an hour: the exact path


def test_groups_jobs_and_days_equal_a_hand_computation(store: SQLiteStore) -> None:
    r = _src(store).report(SINCE, UNTIL, "team").to_dict()
    # inside [+900, +6000]: a from +1000 (init 10, idle 10, productive 4,980), c to +1820
    # (productive 920), b whole but its last 310 s (idle 10+10, wasted 400, down 90, productive 490)
    nlp = next(g for g in r["groups"] if g["key"] == "nlp")
    vision = next(g for g in r["groups"] if g["key"] == "vision")
    assert [g["key"] for g in r["groups"]] == ["vision", "nlp"]  # most hours lost first
    assert nlp["jobs"] == 2 and vision["jobs"] == 1
    assert nlp["accelerator_hours"] == (5000 * 8 + 920 * 1) / H
    assert nlp["productive_hours"] == (4980 * 8 + 920 * 1) / H
    assert nlp["badput_hours"] == _zero_but(tpu_initialization=10 * 8 / H, other=10 * 8 / H)
    assert nlp["lost_hours"] == (5000 * 8 + 920) / H - (4980 * 8 + 920) / H
    assert nlp["goodput"] == ((4980 * 8 + 920) / H) / ((5000 * 8 + 920) / H)
    # a queued from +400 to +1000: 100 s of it inside; c has no submit time (not weighted)
    assert nlp["queue_hours"] == 100 * 8 / H
    assert nlp["scheduling_goodput"] == (5000 * 8) / (5100 * 8)
    assert vision["accelerator_hours"] == 1000 * 4 / H
    assert vision["productive_hours"] == 490 * 4 / H
    assert vision["badput_hours"] == _zero_but(
        other=20 * 4 / H,
        wasted_progress_from_disruption=400 * 4 / H,
        infrastructure_recovery_from_disruption=90 * 4 / H,
    )
    assert vision["scheduling_goodput"] is None  # no submit time
    total = r["total"]
    assert total["jobs"] == 3  # d ended before the range
    assert total["accelerator_hours"] == (5000 * 8 + 920 + 1000 * 4) / H
    assert total["productive_hours"] == (4980 * 8 + 920 + 490 * 4) / H
    jobs = {j["job"]: j for j in r["jobs"]}
    assert set(jobs) == {"a", "b", "c"}
    assert (jobs["a"]["start"], jobs["a"]["end"]) == (D + 1000, UNTIL)
    assert (jobs["c"]["start"], jobs["c"]["end"]) == (SINCE, D + 1820)
    assert jobs["c"]["accelerators"] == 1 and not jobs["c"]["accelerators_recorded"]
    assert jobs["a"]["accelerators"] == 8 and jobs["a"]["accelerator_type"] == "H100"
    assert jobs["a"]["labels"] == {"team": "nlp", "model": "llama"}
    assert jobs["b"]["productive_hours"] == 490 * 4 / H
    assert [d["day"] for d in r["days"]] == ["2023-11-15"]
    assert r["days"][0]["accelerator_hours"] == total["accelerator_hours"]
    assert r["days"][0]["productive_hours"] == total["productive_hours"]


def test_a_job_inside_the_range_whole_counts_its_report(store: SQLiteStore) -> None:
    """Over the whole day every job but d lies inside: each job row is its own report."""
    r = _src(store).report(D - H, D + 86400, "job").to_dict()
    for row in r["jobs"]:
        rep = GoodputCalculator(row["job"], "log", store=store).report()
        w = row["accelerators"]
        assert row["accelerator_hours"] == rep.total_s * w / H
        assert row["productive_hours"] == rep.productive_s * w / H
        for b in BUCKETS:
            want = rep.to_dict()["badput_s"].get(b, 0.0)
            want = sum(want.values()) if isinstance(want, dict) else want
            assert row["badput_hours"][b] == want * w / H, (row["job"], b)
    assert {g["key"] for g in r["groups"]} == {"a", "b", "c"}
    # c began the hour before: two UTC days
    days = {d["day"]: d for d in r["days"]}
    assert set(days) == {"2023-11-14", "2023-11-15"}
    assert days["2023-11-14"]["accelerator_hours"] == 1800 / H
    assert days["2023-11-14"]["badput_hours"]["other"] == 10 / H  # c's start to its first step


def test_by_a_label_some_jobs_lack_and_prices(store: SQLiteStore) -> None:
    prices = Prices(default=2.0, by_type={"H100": 4.0}, currency="EUR")
    r = _src(store).report(D - 7200, D + 86400, "model", prices).to_dict()
    assert r["currency"] == "EUR"
    groups = {g["key"]: g for g in r["groups"]}
    assert set(groups) == {"llama", "bert", None}  # b and c have no model label
    assert groups["bert"]["accelerator_hours"] == 110 * 2 / H  # d: idle 10 s, 100 steps
    a = groups["llama"]
    assert a["cost"]["total"] == 6020 * 8 * 4.0 / H
    assert a["cost"]["productive"] == 6000 * 8 * 4.0 / H
    assert a["cost"]["lost"] == a["cost"]["total"] - a["cost"]["productive"]
    none = groups[None]
    assert none["cost"]["total"] == (1310 * 4 * 2.0 + 3620 * 1 * 2.0) / H  # b (A100) and c: the default


def test_summaries_are_saved_and_read_back_not_made_again(store: SQLiteStore) -> None:
    first = _src(store)
    want = first.report(SINCE, UNTIL, "team").to_dict()
    assert first.last_counts["made"] == 4
    again = _src(store)
    got = again.report(SINCE, UNTIL, "team").to_dict()
    assert again.last_counts == {"kept": 0, "read": 4, "made": 0}
    assert got == want
    raw = b"".join(store.load_state(NAMESPACE, key("log", "a")) or [])
    s = JobSummary.loads(raw)
    assert s is not None and s.accelerators == 8 and json.loads(raw)["format"] == 3
    # a job with something new is made again, the others are kept
    store.append("log", "c", EventBatch(99, 0, [Event(Kind.CUSTOM_START, D + 1000, name="eval")]))
    again.report(SINCE, UNTIL, "team")
    assert again.last_counts == {"kept": 3, "read": 0, "made": 1}


def test_a_damaged_saved_summary_is_made_again(store: SQLiteStore) -> None:
    want = _src(store).report(SINCE, UNTIL, "team").to_dict()
    store.save_state(NAMESPACE, key("log", "b"), [b'{"format": 1, "job": "b"'])
    src = _src(store)
    assert src.report(SINCE, UNTIL, "team").to_dict() == want
    assert src.last_counts["made"] == 1


def test_a_range_with_no_job_and_a_bad_range(store: SQLiteStore) -> None:
    r = _src(store).report(D + 50_000, D + 60_000, "team").to_dict()
    assert r["jobs"] == [] and r["groups"] == [] and r["total"]["accelerator_hours"] == 0.0
    assert r["total"]["goodput"] is None
    with pytest.raises(ValueError, match="until must be after since"):
        _src(store).report(D, D, "team")


def test_a_running_job_grows_with_the_clock(tmp_path: Path) -> None:
    st = SQLiteStore(str(tmp_path / "run.db"))
    ev = [Event(Kind.JOB_START, D), _labels(D, {"team": "x"}, 2, None)]
    ev += [Event(Kind.STEP_START, D + 10 + k, step=k) for k in range(100)]
    st.append("log", "r", EventBatch(1, 0, ev))
    now = [D + 110.0]
    src = FleetSource(st, clock=lambda: now[0])
    first = src.report(D - H, D + H, "team").to_dict()["total"]["accelerator_hours"]
    assert first == 110 * 2 / H
    now[0] = D + 200.0  # nothing new, later: the running job's window reaches the new now
    assert src.report(D - H, D + H, "team").to_dict()["total"]["accelerator_hours"] == 200 * 2 / H


def test_a_live_range_asks_cut_hours_once_and_frees_settled_engines(
    store: SQLiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _src(store)
    want = src.report(SINCE, UNTIL, "team").to_dict()
    assert src._calcs == {}  # every job settled: no engine kept
    asked: list[tuple[float, float]] = []
    real = GoodputCalculator.partition

    def counting(self: GoodputCalculator, *a: object, **k: object) -> object:
        asked.append((a[0], a[1]) if len(a) >= 2 else (0.0, 0.0))  # type: ignore[arg-type]
        return real(self, *a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(GoodputCalculator, "partition", counting)
    assert src.report(SINCE, UNTIL, "team").to_dict() == want
    assert asked == []  # the cut hours were remembered
    src.report(SINCE + 1, UNTIL, "team")
    assert asked  # a new edge is asked of the job's accounting


def test_a_peak_from_the_table_gives_the_size_when_none_was_recorded(tmp_path: Path) -> None:
    st = SQLiteStore(str(tmp_path / "peak.db"))
    ev = [
        Event(Kind.JOB_START, D),
        _labels(D, {"team": "x"}, None, None),
        Event(Kind.PEAK_FLOPS, D + 1, value=1e15, name="table:TPU v5p x64 bf16"),
    ]
    ev += [Event(Kind.STEP_START, D + 10 + k, step=k) for k in range(10)]
    st.append("log", "p", EventBatch(1, 0, [*ev, Event(Kind.JOB_END, D + 20)]))
    ev2 = [
        Event(Kind.JOB_START, D),
        _labels(D, {}, 3, "L4"),
        Event(Kind.PEAK_FLOPS, D, value=1.0, name="table:L4 x8 bf16"),
    ]
    st.append("log", "q", EventBatch(2, 0, [*ev2, Event(Kind.JOB_END, D + 20)]))
    jobs = {j["job"]: j for j in _src(st).report(D - H, D + H, "team").to_dict()["jobs"]}
    assert (jobs["p"]["accelerators"], jobs["p"]["accelerator_type"]) == (64, "TPU v5p")
    assert jobs["p"]["accelerators_recorded"] is True
    assert jobs["p"]["accelerator_hours"] == 20 * 64 / H
    assert (jobs["q"]["accelerators"], jobs["q"]["accelerator_type"]) == (3, "L4")  # recorded wins


def test_a_new_process_reads_every_summary_at_once_and_asks_no_job(store: SQLiteStore) -> None:
    """Warm: one listing and one read of every saved summary, no query per job."""
    want = _src(store).report(SINCE, UNTIL, "team").to_dict()
    calls: list[str] = []
    for name in ("load_state", "stream_position", "read"):
        real = getattr(store, name)

        def counted(*a: object, _real: object = real, _name: str = name, **k: object) -> object:
            calls.append(_name)
            return _real(*a, **k)  # type: ignore[operator]

        setattr(store, name, counted)
    src = _src(store)
    got = src.report(D - H, D + 86400, "team").to_dict()  # edges on the hour: no job's accounting
    assert calls == [] and src.last_counts == {"kept": 0, "read": 4, "made": 0}
    assert got["total"]["jobs"] == want["total"]["jobs"] == 3  # d ended before either range


def test_a_job_that_restarts_at_another_size_weighs_each_hour_by_its_size_then(tmp_path: Path) -> None:
    """8 accelerators for 2 h, a restart at 64 for 1 h (mid-hour: the hour is cut there)."""
    st = SQLiteStore(str(tmp_path / "resize.db"))
    ev = [Event(Kind.JOB_START, D), _labels(D, {"team": "x"}, None, None)]
    ev += [Event(Kind.STEP_START, D + k, step=k) for k in range(7200)]
    ev += [_labels(D + 60, {"team": "x"}, 8, "H100")]  # the size found at the first step: from the start
    ev += [Event(Kind.JOB_START, D + 7200 + 1800), _labels(D + 9000, {"team": "x"}, 64, "H100")]
    ev += [Event(Kind.STEP_START, D + 9000 + k, step=7200 + k) for k in range(3600)]
    st.append("log", "r", EventBatch(1, 0, [*ev, Event(Kind.JOB_END, D + 12600)]))
    src = _src(st)
    first = src.report(D, D + 7200, "team").to_dict()["total"]
    assert first["accelerator_hours"] == 2 * 8
    assert first["productive_hours"] == 16.0  # the crashed attempt's last step: one ideal step
    whole = src.report(D - H, D + 86400, "team").to_dict()
    # 8 until the restart at +9000 (the 1,800 s down included), 64 from then
    assert whole["total"]["accelerator_hours"] == (9000 * 8 + 3600 * 64) / H
    assert whole["jobs"][0]["accelerators"] == 64
    assert sum(d["accelerator_hours"] for d in whole["days"]) == whole["total"]["accelerator_hours"]


def test_queue_time_counts_even_when_the_job_ran_only_after_the_range(tmp_path: Path) -> None:
    st = SQLiteStore(str(tmp_path / "queue.db"))
    ev = [
        Event(Kind.JOB_SUBMIT, D + 10, value=D, name="recorded"),
        Event(Kind.JOB_START, D + 3600),
        _labels(D + 3600, {"team": "q"}, 4, None),
        *[Event(Kind.STEP_START, D + 3610 + k, step=k) for k in range(10)],
        Event(Kind.JOB_END, D + 3620),
    ]
    st.append("log", "late", EventBatch(1, 0, ev))
    ev = [
        Event(Kind.JOB_SUBMIT, D + 10, value=D + 100, name="recorded"),
        Event(Kind.JOB_START, D + 100),  # submitted and started at once: a queue of 0 s
        _labels(D + 100, {"team": "q"}, 4, None),
        *[Event(Kind.STEP_START, D + 110 + k, step=k) for k in range(10)],
        Event(Kind.JOB_END, D + 120),
    ]
    st.append("log", "now", EventBatch(2, 0, ev))
    g = _src(st).report(D, D + 1800, "team").to_dict()["groups"][0]
    assert g["jobs"] == 2
    assert g["queue_hours"] == 1800 * 4 / H  # "late" queued the whole range
    assert g["accelerator_hours"] == 20 * 4 / H  # only "now" ran in it
    assert g["scheduling_goodput"] == (20 * 4) / (20 * 4 + 1800 * 4)
    rows = {j["job"]: j for j in _src(st).report(D, D + 1800, "team").to_dict()["jobs"]}
    assert rows["now"]["scheduling_goodput"] == 1.0  # a known submit time with no wait
    assert rows["late"]["start"] is None and rows["late"]["accelerator_hours"] == 0.0


def test_by_job_keeps_jobs_of_two_loggers_apart(tmp_path: Path) -> None:
    st = SQLiteStore(str(tmp_path / "names.db"))
    for w, ns in enumerate(("la", "lb"), start=1):
        ev = [Event(Kind.JOB_START, D), *[Event(Kind.STEP_START, D + 1 + k, step=k) for k in range(5)]]
        st.append(ns, "train", EventBatch(w, 0, [*ev, Event(Kind.JOB_END, D + 6)]))
    keys = sorted(g["key"] for g in _src(st).report(D - H, D + H, "job").to_dict()["groups"])
    assert keys == ["train (la)", "train (lb)"]


def test_running_jobs_are_not_saved_and_jobs_without_a_summary_are_not_asked_again(tmp_path: Path) -> None:
    st = SQLiteStore(str(tmp_path / "quiet.db"))
    ev = [Event(Kind.JOB_START, D), *[Event(Kind.STEP_START, D + 1 + k, step=k) for k in range(5)]]
    st.append("log", "run", EventBatch(1, 0, ev))  # running at the clock below
    st.append("log", "nothing", EventBatch(2, 0, [Event(Kind.JOB_SUBMIT, D, value=D - 5)]))  # no job start
    saves: list[str] = []
    bulk: list[str] = []
    real_save, real_bulk = st.save_state, st.load_single_states
    st.save_state = lambda ns, job, pieces: (saves.append(job), real_save(ns, job, pieces))[1]  # type: ignore[method-assign]
    st.load_single_states = lambda ns: (bulk.append(ns), real_bulk(ns))[1]  # type: ignore[method-assign]
    src = FleetSource(st, clock=lambda: D + 7.0)
    for _ in range(3):
        assert src.report(D - H, D + H, "team").to_dict()["total"]["jobs"] == 1
    assert [s for s in saves if "run" in s or "nothing" in s] == []  # the running job's summary moves with the clock
    assert len(bulk) == 1  # "nothing" has no summary: remembered, so the saved ones are not read again
    assert src.last_counts == {"kept": 0, "read": 0, "made": 1}
