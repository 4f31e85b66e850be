"""The seed's calculator methods, helpers and constructor arguments, with the seed's meaning:
helpers are compared with the installed ml-goodput-measurement on the same inputs."""

from __future__ import annotations

import datetime as dt
import itertools
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ml_goodput_measurement import goodput_utils as seed_utils

from mlgoodput import goodput, goodput_elastic, goodput_utils, monitoring, monitoring_elastic
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore
from timelines import all_timelines, load

B = goodput.BadputType
T0 = 1_700_000_000.0


def _calc(
    events: list[Event],
    q: float,
    cls: type[goodput.GoodputCalculator] = goodput.GoodputCalculator,
) -> goodput.GoodputCalculator:
    store = MemoryStore()
    store.append("ns", "j", EventBatch(1, 0, events))
    return cls("j", "ns", store=store, clock=lambda: q)


def _scenario(stem: str) -> tuple[goodput.GoodputCalculator, float]:
    tl = load(next(p for p in all_timelines() if p.stem == stem))
    return _calc(tl.events, tl.query), tl.query


def _steps(times: list[float], first: int = 0) -> list[Event]:
    return [Event(Kind.JOB_START, T0)] + [Event(Kind.STEP_START, T0 + t, step=first + i) for i, t in enumerate(times)]


# -- helpers: same numbers as the seed's ------------------------------------------------------
times_st = st.lists(st.floats(0.0, 100.0, allow_nan=False), min_size=1, max_size=60)


@settings(max_examples=60, deadline=None)
@given(times_st)
def test_compute_ideal_step_time_is_the_seeds(times: list[float]) -> None:
    ours, theirs = goodput_utils.compute_ideal_step_time(times), seed_utils.compute_ideal_step_time(times)
    assert (ours is None) == (theirs is None)
    if ours is not None:
        assert ours == pytest.approx(float(theirs), rel=1e-9, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(times_st, st.floats(0, 100))
def test_compute_percentile_is_the_seeds(values: list[float], pct: float) -> None:
    assert goodput_utils.compute_percentile(values, pct) == pytest.approx(
        seed_utils.compute_percentile(values, pct), rel=1e-9, abs=1e-9
    )


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-5, 5, allow_nan=False), min_size=0, max_size=1300), st.sampled_from(["CUMULATIVE", "INTERVAL"])
)
def test_step_deviation_from_baseline_is_the_seeds(devs: list[float], mode: str) -> None:
    d = dict(enumerate(devs))
    ours = goodput_utils.compute_step_deviation_from_baseline(d, goodput_utils.MonitoringWindowType[mode])
    theirs = seed_utils.compute_step_deviation_from_baseline(d, seed_utils.MonitoringWindowType[mode])
    assert ours == pytest.approx(float(theirs), rel=1e-9, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(0.1, 100.0, allow_nan=False), min_size=2, max_size=60))
def test_anomalous_steps_are_the_seeds(times: list[float]) -> None:
    assert goodput_utils.get_anomalous_and_normal_step_times(times) == tuple(
        list(x) for x in seed_utils.get_anomalous_and_normal_step_times(times)
    )
    assert goodput_utils.get_extra_time_from_anomalous_steps(times) == pytest.approx(
        float(seed_utils.get_extra_time_from_anomalous_steps(times)), rel=1e-9, abs=1e-6
    )


def test_timestamp_from_log_entry_and_enums() -> None:
    entry = {"job_name": "j", "step_start_time": 1_700_000_001.5, "step_count": 3}
    assert goodput_utils.get_timestamp_from_log_entry(entry) == seed_utils.get_timestamp_from_log_entry(entry)
    assert goodput_utils.get_timestamp_from_log_entry({"job_name": "j"}) is None
    for enum_name in ("MetricType", "IntervalMetricType", "GoodputType", "MonitoringWindowType"):
        assert {m.name: m.value for m in getattr(goodput_utils, enum_name)} == {
            m.name: m.value for m in getattr(seed_utils, enum_name)
        }
    assert goodput_utils.MACHINE_TYPE_TO_ACCELERATOR_TYPE_MAPPING == seed_utils.MACHINE_TYPE_TO_ACCELERATOR_TYPE_MAPPING
    assert goodput_utils.BadputType is goodput.BadputType is monitoring.BadputType


def test_metadata_helpers_off_cloud(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(goodput_utils, "METADATA_SERVER_URL", "http://127.0.0.1:9/computeMetadata/v1/")
    assert goodput_utils.get_gcp_metadata("project", "project-id", timeout=1, retries=0) is None
    assert goodput_utils.get_accelerator_type() == "UNKNOWN"
    assert goodput_utils.get_node_zone() is None
    monkeypatch.setattr(
        goodput_utils, "get_gcp_metadata", lambda c, a, timeout=5, retries=3: "projects/1/machineTypes/ct5lp-hightpu-4t"
    )
    assert goodput_utils.get_accelerator_type() == "TPU-v5e"


# -- the calculator's seed methods ----------------------------------------------------------------
def test_step_deviation_has_the_seeds_meaning() -> None:
    """|start(n+1) - start(n) - ideal| for consecutive steps, ideal = the seed's trimmed mean."""
    starts = [0.0, 10.0, 12.0, 14.0, 16.0, 30.0, 32.0, 34.0]  # a slow first step, a hang at step 4
    calc = _calc(_steps(starts), T0 + 36)
    durations = [b - a for a, b in itertools.pairwise(starts)]
    ideal = seed_utils.compute_ideal_step_time(durations)
    got = calc.get_step_deviation()
    assert got == pytest.approx({i: abs(d - ideal) for i, d in enumerate(durations)})
    assert calc.get_step_deviation(2.0) == pytest.approx({i: abs(d - 2.0) for i, d in enumerate(durations)})
    signed = calc.get_signed_step_deviation()
    assert min(signed.values()) <= 0.0 < max(signed.values())  # ours: signed, median ideal
    with pytest.raises(ValueError, match="no step times"):
        _calc([Event(Kind.JOB_START, T0)], T0 + 5).get_step_deviation()


def test_third_element_is_the_last_productive_step() -> None:
    """s4: a crash after step 99's start, restart from the checkpoint of step 80."""
    calc, _ = _scenario("s4_disruption_restart")
    r = calc.report()
    _, _, third = calc.get_job_goodput()
    assert third == r.max_productive_step
    assert r.last_step is not None


def test_details_match_the_report() -> None:
    calc, q = _scenario("s3_checkpoint_save_restore")
    r = calc.report()
    d = calc.get_job_goodput_details()
    assert set(d) == {m.value for m in goodput_utils.MetricType}
    assert d["goodput_time"] == {goodput.GoodputType.TOTAL: pytest.approx(r.productive_s)}
    assert d["total_elapsed_time"] == pytest.approx(r.total_s)
    assert d["badput_time"][B.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME] == pytest.approx(
        r.badput_total_s(B.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME)
    )
    assert d["disruption_count"] == r.disruptions and d["total_excluded_time"] == 0.0
    assert d["ideal_step_time"] > 0 and d["step_time_deviation"]
    interval = calc.get_interval_metric_details(
        dt.datetime.fromtimestamp(q - 30, dt.UTC), dt.datetime.fromtimestamp(q, dt.UTC)
    )
    assert interval["interval_size"] == 30
    assert interval["interval_goodput"][goodput.GoodputType.TOTAL] == pytest.approx(calc.report(q - 30, q).goodput_pct)
    bad = calc.get_interval_metric_details(q, q - 30)  # end before start: empty, logged, no raise
    assert bad["interval_goodput"] == {} and bad["interval_badput"] == {}


def test_elastic_details_carry_slice_efficiency() -> None:
    tl = load(next(p for p in all_timelines() if p.stem == "s9_elastic_pause"))
    calc = _calc(tl.events, tl.query, goodput_elastic.ElasticGoodputCalculator)
    d = calc.get_job_goodput_details()
    assert d["stepping_slice_efficiency"] == pytest.approx(27 / 33, abs=1e-6)
    assert d["available_slice_efficiency"] == pytest.approx(27 / 33, abs=1e-6)


@pytest.mark.parametrize("stem", ["s1_clean_run", "s3_checkpoint_save_restore", "s4_disruption_restart"])
def test_exclusions_cut_windows_out_of_the_partition(stem: str) -> None:
    calc, _q = _scenario(stem)
    whole = calc.report()
    a, b = whole.start + 20.0, whole.start + 50.0
    windows = [
        (dt.datetime.fromtimestamp(a, dt.UTC), dt.datetime.fromtimestamp(b, dt.UTC)),
        (dt.datetime.fromtimestamp(b - 5, dt.UTC), dt.datetime.fromtimestamp(b + 5, dt.UTC)),
        (dt.datetime.fromtimestamp(b + 9, dt.UTC), dt.datetime.fromtimestamp(b + 8, dt.UTC)),
    ]  # skipped
    pct, breakdown, step, excluded = calc.get_job_goodput_with_exclusions(windows, include_badput_breakdown=True)
    assert excluded == pytest.approx(35.0)
    left, right = calc.report(whole.start, a), calc.report(b + 5, whole.end)
    productive = left.productive_s + right.productive_s
    assert pct == pytest.approx(100 * productive / (whole.total_s - 35.0))
    partition = sum(
        v if not isinstance(v, dict) else sum(v.values()) for k, v in breakdown.items() if k is not B.DATA_LOADING_ASYNC
    )
    assert pct + partition == pytest.approx(100.0)
    assert step == whole.max_productive_step
    assert calc.get_job_goodput_with_exclusions([])[0] == pytest.approx(whole.goodput_pct)


def test_calculator_accepts_the_seeds_arguments(tmp_path: object) -> None:
    c = goodput.GoodputCalculator("j", "ns", None, True, dt.timedelta(days=3), "gs://b/p", "/tmp", store=MemoryStore())
    assert c.using_pathways and c.max_logs_retention_period == dt.timedelta(days=3) and c.gcs_path == "gs://b/p"
    assert c.sync_to_gcs() is None
    assert goodput.GoodputCalculator(
        "j", "ns", max_logs_retention_period=3600, store=MemoryStore()
    ).max_logs_retention_period == dt.timedelta(hours=1)
    with pytest.raises(TypeError, match="max_logs_retention_period"):
        goodput.GoodputCalculator("j", "ns", max_logs_retention_period="7d", store=MemoryStore())
    with pytest.raises(ValueError, match="cloud_logger or store"):
        goodput.GoodputCalculator("j", "ns", object(), store=MemoryStore())


class _SeedStyleCloudLogger:
    """A cloud_logger as the seed's tests build one: its entries kept in memory."""

    def __init__(self, job_name: str) -> None:
        self.job_name = job_name
        self.entries: list[dict[str, object]] = []

    def write_cloud_logging_entry(self, entry: dict[str, object]) -> None:
        self.entries.append(dict(entry))

    def read_cloud_logging_entries(
        self, start_time: object = None, end_time: object = None, last_entry_info: object = None
    ) -> tuple[list[dict[str, object]], object]:
        return list(self.entries), (None, None)


def test_recorder_takes_cloud_logger_fourth() -> None:
    """The recorder writes through the cloud logger it is given (mlgoodput.store.from_cloud_logger),
    and a calculator given the same logger reads what it wrote."""
    cl = _SeedStyleCloudLogger("j")
    rec = goodput.GoodputRecorder("j", "ns", True, cl)
    rec.record_job_start_time(dt.datetime.fromtimestamp(T0, dt.UTC))
    rec.close()
    assert {"job_name": "j", "job_start_time": T0} in cl.entries  # (besides its signs of life)
    calc = goodput.GoodputCalculator("j", "ns", cl, clock=lambda: T0 + 1)
    assert calc.report().total_s == pytest.approx(1.0)
    marker = object()  # not a cloud logger: reading or writing it would raise
    off = goodput.GoodputRecorder("j", "ns", False, marker)  # logging off: the logger is not touched
    assert off.cloud_logger is marker


# -- the monitor's seed arguments ---------------------------------------------------------------
def test_monitor_takes_the_seeds_arguments(tmp_path: object) -> None:
    m = monitoring.GoodputMonitor(
        "j", "ns", None, 5, False, False, False, False, None, 10, None, False, 3, 60, "/tmp/c", 86400
    )
    assert m.final_flush_timeout_seconds == 3.0 and m.stop_timeout_s == 3.0
    assert m.gcs_sync_interval_seconds == 60 and m.cache_dir == "/tmp/c"
    assert m.max_logs_retention_period == dt.timedelta(days=1)
    assert monitoring.GoodputMonitor("j", "ns", final_flush_timeout_seconds=None).stop_timeout_s >= 3600
    with pytest.raises(ValueError, match="final_flush_timeout_seconds"):
        monitoring.GoodputMonitor("j", "ns", final_flush_timeout_seconds=0)
    with pytest.raises(TypeError, match="cache_dir"):
        monitoring.GoodputMonitor("j", "ns", cache_dir=3)


def test_elastic_monitor_reads_positional_arguments_in_the_seeds_order() -> None:
    m = monitoring_elastic.ElasticGoodputMonitor(
        "j", "ns", None, 7, False, True, True, True, 2.5, 11, None, True, 4, 120, "/tmp/e", None
    )
    assert (
        m.upload_interval,
        m.monitoring_enabled,
        m.include_badput_breakdown,
        m.include_step_deviation,
        m.include_slice_efficiency,
        m.configured_ideal_step_time,
        m.step_deviation_interval_seconds,
        m.skip_final_flush,
        m.final_flush_timeout_seconds,
        m.gcs_sync_interval_seconds,
        m.cache_dir,
    ) == (7.0, False, True, True, True, 2.5, 11.0, True, 4.0, 120.0, "/tmp/e")
    assert m.pathway_enabled  # as the seed's elastic monitor
    assert not math.isnan(m.stop_timeout_s)


def test_get_job_goodput_of_an_unknown_job_raises_like_the_seed(tmp_path: Path) -> None:
    # the seed raises ValueError("Total job time is zero ...") rather than reporting 0 %
    calc = goodput.GoodputCalculator(job_name="nope", logger_name="goodput_nope", store=f"sqlite://{tmp_path}/x.db")
    with pytest.raises(ValueError, match="no recorded time for job 'nope'"):
        calc.get_job_goodput()
