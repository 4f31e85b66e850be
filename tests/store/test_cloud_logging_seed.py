"""Logs written by ml-goodput-measurement 0.2.3 itself (and Orbax's CloudLogger) through
the real google-cloud-logging client into a fake Cloud Logging API: `mlgoodput report`
on them gives the spec's numbers; what mlgoodput writes, ml-goodput-measurement reads."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlgoodput import cli
from mlgoodput.accounting import BadputType
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import from_cloud_logger, open_store
from timelines import TRUTH_KEYS, Timeline, all_timelines, load

goodput = pytest.importorskip(
    "ml_goodput_measurement.src.goodput", reason="pip install ml-goodput-measurement==0.2.3 (the test extra)"
)
goodput_elastic = pytest.importorskip("ml_goodput_measurement.src.goodput_elastic")

TOL = 0.05
PROJECT = "seed-project"


@pytest.fixture(scope="module")
def metadata() -> Iterator[Any]:
    """A GCE metadata server that knows nothing: this machine is not on Google Cloud."""
    from mlgoodput.testing import FakeMetadataServer

    with FakeMetadataServer({}) as md:
        yield md


@pytest.fixture
def seed_clients(fake_logging: Any, metadata: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """ml-goodput-measurement builds `google.cloud.logging.Client()` with no arguments (it
    would find the project and credentials of the machine): give it one of the fake. Its
    logging handler asks the metadata server what machine it runs on: ask ours, which
    answers at once, instead of waiting on a DNS lookup of metadata.google.internal."""
    import google.cloud.logging
    from google.cloud.logging_v2 import _helpers

    monkeypatch.setattr(google.cloud.logging, "Client", lambda *a, **k: fake_logging.client(PROJECT))
    monkeypatch.setattr(_helpers, "METADATA_URL", f"http://{metadata.host}/computeMetadata/v1/")
    yield fake_logging


def _utc(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, dt.UTC)


def seed_writes(tl: Timeline, log: str, svc: Any) -> None:
    """Replay a timeline through the seed's own recorders and Orbax's CloudLogger. As the
    seed's docs prescribe, only host 0 has logging_enabled=True (its entries carry no
    host). Events neither can record (step ends, compiles) are written by mlgoodput's
    store into the same log, as a mixed fleet would."""
    # Orbax (and with it JAX) loads here, not at collection: `make unit` runs the fork
    # tests first in a process that must not have JAX loaded.
    orbax_logging = pytest.importorskip("orbax.checkpoint.logging", reason="orbax-checkpoint (the jax extra)")
    step_statistics = orbax_logging.step_statistics
    recorders: dict[int, Any] = {}

    def rec(host: int) -> Any:
        if host not in recorders:
            recorders[host] = goodput_elastic.ElasticGoodputRecorder(
                tl.job_name, log, host == 0, background_max_latency_s=0.05, background_grace_period_s=0.5
            )
        return recorders[host]

    orbax = orbax_logging.CloudLogger(
        orbax_logging.CloudLoggerOptions(job_name=tl.job_name, logger_name=log, client=svc.client(PROJECT))
    )
    ours: list[Event] = []
    for e in tl.events:
        r, t = rec(e.host), _utc(e.time)
        k = e.kind
        if k is Kind.JOB_START:  # (a recorder of host > 0 records nothing, as in the seed)
            r.record_job_start_time(t)
        elif k is Kind.JOB_END:
            r.record_job_end_time(t)
        elif k is Kind.ACCEL_INIT_START:
            r.record_tpu_init_start_time(t)
        elif k is Kind.ACCEL_INIT_END:
            r.record_tpu_init_end_time(t)
        elif k is Kind.TRAINING_PREP_START:
            r.record_training_preparation_start_time(t)
        elif k is Kind.TRAINING_PREP_END:
            r.record_training_preparation_end_time(t)
        elif k is Kind.DATA_LOADING_START:
            r.record_data_loading_start_time(t)
        elif k is Kind.DATA_LOADING_END:
            r.record_data_loading_end_time(t)
        elif k is Kind.STEP_START:
            r.record_step_start_time(e.step, t)
        elif k is Kind.CUSTOM_START:
            r.record_custom_badput_event_start_time(t, e.name)
        elif k is Kind.CUSTOM_END:
            r.record_custom_badput_event_end_time(t, e.name)
        elif k is Kind.ELASTIC_WAIT_START:
            r.record_elastic_wait_start_time(e.name, t)
        elif k is Kind.ELASTIC_WAIT_END:
            r.record_elastic_wait_end_time(e.name, t)
        elif k is Kind.ELASTIC_REINIT_START:
            r.record_elastic_reinit_start_time(t)
        elif k is Kind.ELASTIC_REINIT_END:
            r.record_elastic_reinit_end_time(t)
        elif k is Kind.SLICE_COUNTS:
            a = e.attrs or {}
            r.record_elastic_slice_counts(a["active"], a["total"], a["available"], t)
        elif k is Kind.CKPT_SAVE:
            orbax.log_entry(
                dataclasses.asdict(
                    step_statistics.SaveStepStatistics(
                        step=e.step,
                        directory="gs://bucket/ckpt",
                        synchronous=True,
                        checkpointer_blocking_start_time=e.time,
                        checkpointer_blocking_duration_secs=e.value,
                        checkpoint_manager_blocking_start_time=e.time,
                        checkpoint_manager_blocking_duration_secs=e.value,
                        wait_for_prev_start_time=e.time,
                        wait_for_prev_duration_secs=0.0,
                        get_old_steps_start_time=e.time,
                        get_old_steps_duration_secs=0.0,
                    )
                )
            )
        elif k is Kind.CKPT_RESTORE:
            orbax.log_entry(
                dataclasses.asdict(
                    step_statistics.RestoreStepStatistics(
                        step=e.step,
                        directory="gs://bucket/ckpt",
                        checkpointer_start_time=e.time,
                        checkpointer_duration_secs=e.value,
                        checkpoint_manager_start_time=e.time,
                        checkpoint_manager_duration_secs=e.value,
                    )
                )
            )
        else:
            ours.append(e)
    for r in recorders.values():
        r.flush()
    if ours:
        st = open_store(svc.url(PROJECT))
        st.append(log, tl.job_name, EventBatch(uuid.uuid4().int >> 65, 0, ours))
        st.close()


def report(url: str, tl: Timeline, *extra: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert cli.main(["report", "--store", url, "--job", tl.job_name, "--at", repr(tl.query), "--json", *extra]) == 0
    return dict(json.loads(capsys.readouterr().out))


def assert_truth(r: dict[str, Any], tl: Timeline) -> None:
    truth = tl.truth
    crash_tol = TOL + r["ideal_step_time_s"] * truth["disruptions"]
    assert r["total_s"] == pytest.approx(truth["total_s"], abs=TOL)
    assert r["productive_s"] == pytest.approx(truth["productive_s"], abs=TOL)
    for key, bucket in TRUTH_KEYS.items():
        tol = crash_tol if key in ("wasted_progress", "infra_recovery") else TOL
        got = r["badput_s"].get(bucket.name.lower(), 0.0)
        assert got == pytest.approx(truth["badput_s"][key], abs=tol), key
    custom = r["badput_s"].get(BadputType.CUSTOM_BADPUT_EVENTS.name.lower(), {})
    assert set(custom) == set(truth["badput_s"]["custom"])
    for name, secs in truth["badput_s"]["custom"].items():
        assert custom[name] == pytest.approx(secs, abs=TOL)
    async_truth = truth["overlapped_s"].get("data_loading_async", 0.0)
    assert r["overlapped_s"].get("data_loading_async", 0.0) == pytest.approx(async_truth, abs=TOL)
    assert r["disruptions"] == truth["disruptions"]
    assert r["last_step"] == truth["last_step"]
    assert r["max_productive_step"] == truth["max_productive_step"]


@pytest.mark.slow
@pytest.mark.parametrize("path", all_timelines(), ids=lambda p: p.stem)
def test_report_on_logs_the_seed_wrote(path: Path, seed_clients: Any, capsys: pytest.CaptureFixture[str]) -> None:
    tl = load(path)
    log = f"goodput-{uuid.uuid4().hex[:8]}"
    seed_writes(tl, log, seed_clients)
    kinds = {p.get("event_type") for p in seed_clients.payloads(log)}
    if any(e.kind is Kind.CKPT_SAVE for e in tl.events):
        assert "save" in kinds  # Orbax's own entries are in the log
    # the URL names the log, so `report` finds the job's logger by itself
    assert_truth(report(seed_clients.url(PROJECT, log), tl, capsys=capsys), tl)


@pytest.mark.slow
@pytest.mark.parametrize("path", all_timelines(), ids=lambda p: p.stem)
def test_round_trip_gives_the_same_report_as_sqlite(
    path: Path, fake_logging: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tl = load(path)
    log = f"goodput_{tl.job_name}"
    url = fake_logging.url(PROJECT + "-rt")
    db = str(tmp_path / "x.db")
    for target in (url, db):
        st = open_store(target)
        st.append(log, tl.job_name, EventBatch(1, 0, tl.events))
        st.close()
    ours = report(url, tl, "--logger", log, capsys=capsys)
    assert_truth(ours, tl)
    ref = report(db, tl, "--logger", log, capsys=capsys)
    assert ours == ref


def _seed_numbers(calc: Any) -> tuple[float, dict[str, Any], int]:
    g, breakdown, step = calc.get_job_goodput(include_badput_breakdown=True)
    return round(g, 6), {k.name: (round(v, 6) if isinstance(v, float) else v) for k, v in breakdown.items()}, step


@pytest.mark.slow
@pytest.mark.parametrize(
    "stem",
    [
        "s1_clean_run",
        "s2_custom_and_async_data",
        "s3_checkpoint_save_restore",
        "s9_elastic_pause",
        "s10_recompile",
        "s11_step_end_sync_loading",
    ],
)
def test_the_seed_reads_what_mlgoodput_writes(stem: str, seed_clients: Any, tmp_path: Path) -> None:
    """ml-goodput-measurement's own calculator gets the same numbers from entries that
    mlgoodput wrote as from entries it wrote itself for the same job."""
    tl = load(next(p for p in all_timelines() if p.stem == stem))
    theirs, ours, bare = (f"{who}-{uuid.uuid4().hex[:6]}" for who in ("seed", "ours", "bare"))
    seed_writes(tl, theirs, seed_clients)
    st = open_store(seed_clients.url(PROJECT))
    st.append(ours, tl.job_name, EventBatch(uuid.uuid4().int >> 65, 0, tl.events))
    # the same job without the events only mlgoodput can write (step ends, compiles)
    seedable = [e for e in tl.events if e.kind not in (Kind.STEP_END, Kind.COMPILE)]
    st.append(bare, tl.job_name, EventBatch(uuid.uuid4().int >> 65, 0, seedable))
    st.close()
    calc_cls = goodput_elastic.ElasticGoodputCalculator if stem.startswith("s9") else goodput.GoodputCalculator
    numbers = [_seed_numbers(calc_cls(tl.job_name, log, cache_dir=str(tmp_path / log))) for log in (theirs, ours, bare)]
    assert numbers[0] == numbers[1] == numbers[2]  # entries of our own change nothing for it
    assert numbers[1][2] == tl.truth["last_step"]


def test_from_cloud_logger_over_the_seeds_cloud_logger(seed_clients: Any, tmp_path: Path) -> None:
    """`from_cloud_logger` wraps the seed's `_CloudLogger` (real client, fake service) as a
    store: mlgoodput's events go out through it and come back with the spec's numbers,
    and the seed's calculator on the same object reads them."""
    from mlgoodput.accounting import GoodputCalculator

    tl = load(next(p for p in all_timelines() if p.stem == "s2_custom_and_async_data"))
    log = f"wrapped-{uuid.uuid4().hex[:6]}"
    cloud_logger = goodput._CloudLogger(tl.job_name, log, background_max_latency_s=0.05, background_grace_period_s=0.5)
    store = from_cloud_logger(cloud_logger, log)
    store.append(log, tl.job_name, EventBatch(5, 0, tl.events))
    store.close()  # flushes the seed logger's background transport
    r = GoodputCalculator(tl.job_name, log, store=store, clock=lambda: tl.query).report()
    assert r.total_s == pytest.approx(tl.truth["total_s"], abs=TOL)
    assert r.productive_s == pytest.approx(tl.truth["productive_s"], abs=TOL)
    assert r.badput_s[BadputType.CUSTOM_BADPUT_EVENTS] == pytest.approx(tl.truth["badput_s"]["custom"], abs=TOL)
    seed_calc = goodput.GoodputCalculator(tl.job_name, log, cloud_logger, cache_dir=str(tmp_path))
    assert seed_calc.get_job_goodput()[2] == tl.truth["last_step"]
    # incremental: the next read passes the seed's (timestamp, insertId) cursor back
    first = store.read(log, tl.job_name)
    later = Event(Kind.CUSTOM_START, tl.query + 1, name="late")
    store.append(log, tl.job_name, EventBatch(5, len(tl.events), [later]))
    store.close()
    mark = len(seed_clients.list_requests)
    assert list(store.read(log, tl.job_name, first.cursor).columns.events()) == [later]
    assert "insertId >" in seed_clients.list_requests[mark][0]


@pytest.mark.slow
def test_the_cli_in_a_process_of_its_own(seed_clients: Any) -> None:
    tl = load(next(p for p in all_timelines() if p.stem == "s3_checkpoint_save_restore"))
    log = f"cli-{uuid.uuid4().hex[:6]}"
    seed_writes(tl, log, seed_clients)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mlgoodput",
            "report",
            "--store",
            seed_clients.url(PROJECT, log),
            "--job",
            tl.job_name,
            "--at",
            repr(tl.query),
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert_truth(json.loads(out.stdout), tl)


@pytest.mark.slow
def test_the_seeds_reader_pages_through_a_big_log(seed_clients: Any) -> None:
    """2,500 entries that mlgoodput wrote, read by the seed's `_CloudLogger` through the
    high-level client: it asks for a million a page, the service gives 1,000 and tokens."""
    log = f"big-{uuid.uuid4().hex[:6]}"
    st = open_store(seed_clients.url(PROJECT))
    st.append(
        log, "big-job", EventBatch(9, 0, [Event(Kind.STEP_START, 1_700_000_000.0 + i, step=i) for i in range(2500)])
    )
    st.close()
    mark = len(seed_clients.list_requests)
    payloads, _ = goodput._CloudLogger("big-job", log).read_cloud_logging_entries()
    assert sorted(int(p["step_count"]) for p in payloads) == list(range(2500))
    assert [bool(tok) for _, tok in seed_clients.list_requests[mark:]] == [False, True, True]
