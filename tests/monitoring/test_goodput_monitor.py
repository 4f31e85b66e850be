"""GoodputMonitor end to end: a real store, a real uploader process, real exporters."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from monitor_helpers import CountingFileExporter, finished_job, write_events

from mlgoodput import MlGoodputMisuseError, MlGoodputWarning, monitoring, monitoring_elastic
from mlgoodput.accounting import BadputType, GoodputCalculator
from mlgoodput.events import Event, Kind
from mlgoodput.export import PrometheusExporter
from mlgoodput.testing import FileExporter
from waiting import tensorboard_has, wait_for

JOB, LOGGER = "run-7", "goodput_run-7"


def expected(db: Path) -> dict[str, float]:
    r = GoodputCalculator(JOB, LOGGER, store=str(db)).report()
    return {
        "goodput/goodput_pct": r.goodput_pct,
        "goodput/productive_seconds": r.productive_s,
        "goodput/total_elapsed_seconds": r.total_s,
        "goodput/max_productive_step": float(r.max_productive_step or 0),
        "goodput/disruptions": float(r.disruptions),
        "goodput/ideal_step_time_seconds": r.ideal_step_time_s,
        "badput/{bucket}_seconds|bucket=program_startup": r.badput_total_s(BadputType.PROGRAM_STARTUP),
        "badput/{bucket}_seconds|bucket=tpu_initialization": r.badput_total_s(BadputType.TPU_INITIALIZATION),
        "badput/{bucket}_seconds|bucket=unproductive_checkpoint_save_time": r.badput_total_s(
            BadputType.UNPRODUCTIVE_CHECKPOINT_SAVE_TIME
        ),
        "badput/custom/{event}_seconds|event=EVAL_STEP": r.badput_total_s(BadputType.CUSTOM_BADPUT_EVENTS),
    }


def assert_matches(got: dict[str, float], want: dict[str, float]) -> None:
    for k, v in want.items():
        assert k in got, f"{k} not exported; got {sorted(got)}"
        assert got[k] == pytest.approx(v, abs=1e-6), k


@pytest.mark.slow
def test_seed_api_end_to_end(db: Path, t0: float, tmp_path: Path) -> None:
    write_events(db, LOGGER, JOB, finished_job(t0))
    out = tmp_path / "out.jsonl"
    tb = tmp_path / "tb"
    m = monitoring.GoodputMonitor(
        job_name=JOB,
        logger_name=LOGGER,
        tensorboard_dir=str(tb),
        upload_interval=30,
        monitoring_enabled=True,
        include_badput_breakdown=True,
        include_step_deviation=True,
        configured_ideal_step_time=None,
        store=str(db),
        exporters=[FileExporter(out)],
    )
    m.start_goodput_uploader()
    m.start_rolling_window_goodput_uploader(rolling_windows_seconds=[60, 300, 900])
    pid = m.uploader_pid
    assert pid is not None and pid != os.getpid()
    with pytest.warns(MlGoodputWarning, match="already running"):
        m.start_goodput_uploader()  # as the seed: a warning, and the running uploader stays
    assert m.uploader_pid == pid
    assert m.stop_rolling_window_goodput_uploader()
    with pytest.warns(MlGoodputWarning, match="not running"):
        assert m.stop_rolling_window_goodput_uploader()
    assert m.uploader_pid == pid  # the cumulative uploader still runs in the same process
    assert m.stop_goodput_uploader()  # final upload, handed to the background
    assert m.wait_for_final_uploads()
    got = FileExporter.latest(out)
    assert_matches(got, expected(db))
    assert "goodput/step_time_deviation_seconds" in got
    assert {f"rolling/{{window}}/goodput_pct|window={w}s" for w in (60, 300, 900)} <= set(got)
    assert got["rolling/{window}/total_seconds|window=900s"] > 0

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb / "goodput"))
    acc.Reload()
    tags = acc.Tags()["scalars"]
    assert {
        "goodput/goodput_pct",
        "badput/program_startup_pct",
        "rolling/60s/goodput_pct",
        "badput/custom/eval_step_seconds",
    } <= set(tags)
    last = acc.Scalars("goodput/goodput_pct")[-1]
    assert last.step == 39 and last.value == pytest.approx(expected(db)["goodput/goodput_pct"], rel=1e-6)
    assert m.stop_goodput_uploader()  # not running: a no-op (this kind was warned once above)
    assert m.misuse_counts == {"uploader_started_twice": 1, "uploader_not_running": 2}
    strict = monitoring.GoodputMonitor(JOB, LOGGER, str(tb), 30, True, store=str(db), strict=True)
    with pytest.raises(MlGoodputMisuseError, match="not running"):
        strict.stop_goodput_uploader()


@pytest.mark.slow
def test_training_and_monitor_in_separate_processes(db: Path, tmp_path: Path) -> None:
    """A training process records steps and runs the monitor; the final upload has the final state."""
    out = tmp_path / "out.jsonl"
    script = textwrap.dedent(f"""
        import os, sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from monitor_helpers import write_events
        from mlgoodput.events import Event, Kind
        from mlgoodput import monitoring
        from mlgoodput.testing import FileExporter
        db, out = {str(db)!r}, {str(out)!r}
        m = monitoring.GoodputMonitor({JOB!r}, {LOGGER!r}, upload_interval=0.2, monitoring_enabled=True,
                                      include_badput_breakdown=True, store=db, exporters=[FileExporter(out)])
        t = time.time()
        write_events(db, {LOGGER!r}, {JOB!r}, [Event(Kind.JOB_START, t)])
        m.start_goodput_uploader()
        print(m.uploader_pid, flush=True)
        for i in range(12):
            write_events(db, {LOGGER!r}, {JOB!r}, [Event(Kind.STEP_START, time.time(), step=i)])
            time.sleep(0.05)
        write_events(db, {LOGGER!r}, {JOB!r}, [Event(Kind.JOB_END, time.time())])
        ok = m.stop_goodput_uploader()
        print("stopped", ok, flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    pid_line, stopped = res.stdout.split("\n")[:2]
    assert stopped == "stopped True"
    uploader = int(pid_line)
    rows = [r for r in FileExporter.read(out) if "samples" in r]
    assert rows and {r["pid"] for r in rows} == {uploader}
    got = FileExporter.latest(out)
    want = expected(db)
    assert got["goodput/max_productive_step"] == 11.0
    assert_matches(
        got,
        {k: want[k] for k in ("goodput/goodput_pct", "goodput/productive_seconds", "goodput/total_elapsed_seconds")},
    )


@pytest.mark.slow
def test_backend_outage_loses_no_final_value(db: Path, t0: float, tmp_path: Path) -> None:
    out, flag, tries = tmp_path / "out.jsonl", tmp_path / "down", tmp_path / "tries"
    events = finished_job(t0)
    write_events(db, LOGGER, JOB, events[: len(events) // 2])
    flag.write_text("")
    m = monitoring.GoodputMonitor(
        JOB,
        LOGGER,
        upload_interval=0.2,
        monitoring_enabled=True,
        include_badput_breakdown=True,
        store=str(db),
        exporters=[CountingFileExporter(out, tries, fail_flag=str(flag))],
    )
    m.start_goodput_uploader()
    wait_for(lambda: CountingFileExporter.count(tries) >= 3, what="several failing rounds")
    assert FileExporter.read(out) == []
    write_events(db, LOGGER, JOB, events[len(events) // 2 :])
    flag.unlink()  # the backend comes back
    assert m.stop_goodput_uploader(timeout_s=20)
    assert m.wait_for_final_uploads()
    assert_matches(FileExporter.latest(out), expected(db))


@pytest.mark.slow
def test_stop_is_bounded_when_the_backend_hangs(db: Path, t0: float, tmp_path: Path) -> None:
    hang = tmp_path / "hang"
    hang.write_text("")
    write_events(db, LOGGER, JOB, finished_job(t0))
    m = monitoring.GoodputMonitor(
        JOB,
        LOGGER,
        upload_interval=0.2,
        monitoring_enabled=True,
        store=str(db),
        exporters=[FileExporter(tmp_path / "o", hang_flag=str(hang))],
    )
    m.start_goodput_uploader()
    pid = m.uploader_pid
    t = time.monotonic()
    assert m.stop_goodput_uploader(timeout_s=1.0)  # handed over at once
    assert m.wait_for_final_uploads() is False  # reported, not raised
    assert time.monotonic() - t < 1.0 + 3.0
    assert pid is not None and wait_for(lambda: not _alive(pid))


@pytest.mark.slow
def test_a_killed_uploader_is_restarted_and_resumes(db: Path, t0: float, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    events = finished_job(t0)
    write_events(db, LOGGER, JOB, events[:30])
    m = monitoring.GoodputMonitor(
        JOB,
        LOGGER,
        upload_interval=60,
        monitoring_enabled=True,
        include_badput_breakdown=True,
        store=str(db),
        exporters=[FileExporter(out)],
    )
    m.start_goodput_uploader()
    assert m.flush(20)
    first = m.uploader_pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    assert wait_for(lambda: m.uploader_pid not in (None, first) and m.flush(5))
    write_events(db, LOGGER, JOB, events[30:])
    assert m.stop_goodput_uploader()
    assert m.wait_for_final_uploads()
    assert_matches(FileExporter.latest(out), expected(db))


def test_bad_configuration_is_a_clear_error(db: Path, tmp_path: Path) -> None:
    kw = dict(job_name=JOB, logger_name=LOGGER, monitoring_enabled=True, store=str(db))
    with pytest.raises(ValueError, match="upload_interval"):
        monitoring.GoodputMonitor(upload_interval=0, **kw)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Exporter protocol"):
        monitoring.GoodputMonitor(exporters=["tensorboard"], **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory"):
        monitoring.GoodputMonitor(job_name=JOB, logger_name=LOGGER, store="memory://x", monitoring_enabled=True)
    m = monitoring.GoodputMonitor(exporters=[FileExporter(tmp_path / "o")], **kw)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="positive"):
        m.start_rolling_window_goodput_uploader([60, -5])
    with pytest.raises(TypeError, match="rolling_windows_seconds"):
        m.start_rolling_window_goodput_uploader([])
    with socket.socket() as s:  # a busy port is a condition time resolves: a warning, never an error
        s.bind(("127.0.0.1", 0))
        s.listen()
        monitoring.GoodputMonitor(exporters=[PrometheusExporter(port=s.getsockname()[1])], **kw)  # type: ignore[arg-type]


def test_disabled_monitor_does_nothing(db: Path, tmp_path: Path) -> None:
    m = monitoring.GoodputMonitor(
        JOB, LOGGER, tensorboard_dir=str(tmp_path / "tb"), monitoring_enabled=False, store=str(db)
    )
    m.start_goodput_uploader()
    assert m.uploader_pid is None
    assert m.stop_goodput_uploader()
    assert not (tmp_path / "tb").exists()


@pytest.mark.slow
def test_elastic_monitor_uploads_slice_efficiency(db: Path, t0: float, tmp_path: Path) -> None:
    events = finished_job(t0)
    events.append(Event(Kind.SLICE_COUNTS, t0 + 6.0, attrs={"active": 2, "total": 4, "available": 4}))
    write_events(db, LOGGER, JOB, events)
    out = tmp_path / "out.jsonl"
    m = monitoring_elastic.ElasticGoodputMonitor(
        job_name=JOB,
        logger_name=LOGGER,
        upload_interval=60,
        monitoring_enabled=True,
        include_badput_breakdown=True,
        include_slice_efficiency=True,
        store=str(db),
        exporters=[FileExporter(out)],
        gcp_options=monitoring_elastic.GCPOptions(
            enable_gcp_goodput_metrics=False, enable_gcp_step_deviation_metrics=False
        ),
    )
    m.start_goodput_uploader()
    assert m.stop_goodput_uploader()
    assert m.wait_for_final_uploads()
    r = GoodputCalculator(JOB, LOGGER, store=str(db)).report()
    assert r.slice_efficiency is not None
    got = FileExporter.latest(out)
    assert got["elastic/stepping_slice_efficiency_pct"] == pytest.approx(100 * r.slice_efficiency.stepping)
    assert got["elastic/available_slice_efficiency_pct"] == pytest.approx(100 * r.slice_efficiency.available)


@pytest.mark.slow
def test_cli_monitor_stops_cleanly_on_ctrl_c(db: Path, t0: float, tmp_path: Path) -> None:
    write_events(db, LOGGER, JOB, finished_job(t0))
    tb = tmp_path / "tb"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    cmd = [
        sys.executable,
        "-m",
        "mlgoodput",
        "monitor",
        "--job",
        JOB,
        "--logger-name",
        LOGGER,
        "--store",
        str(db),
        "--interval",
        "0.3",
        "--tensorboard-dir",
        str(tb),
        "--rolling-windows",
        "60,300",
    ]
    err_file = tmp_path / "stderr"
    with open(err_file, "w") as errors:
        p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=errors, text=True)
    try:
        # the first upload, not just the folder: the exporter process may still be importing
        # its writer (seconds on a loaded machine), and a final upload is bounded by 10 s
        assert wait_for(lambda: tensorboard_has(tb / "goodput", "goodput/goodput_pct"), 180)
        # and its loop: the progress line says the command is past its start, Ctrl-C is its own
        wait_for(lambda: "disruptions" in err_file.read_text(), 60, what="the monitor's progress line")
        p.send_signal(signal.SIGINT)
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    err = err_file.read_text()
    assert p.returncode == 0, err
    assert "goodput" in err and "stopped" in err
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(tb / "goodput"))
    acc.Reload()
    assert acc.Scalars("goodput/goodput_pct")[-1].value == pytest.approx(expected(db)["goodput/goodput_pct"], rel=1e-6)
    assert "rolling/300s/goodput_pct" in acc.Tags()["scalars"]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_every_exporter_at_once_from_one_uploader(db: Path, t0: float, tmp_path: Path) -> None:
    """TensorBoard, Prometheus, OTLP and Cloud Monitoring fed by one monitor's uploader process."""
    from monitor_helpers import finished_job as job_events

    from mlgoodput.export import CloudMonitoringExporter, GCPOptions, OTLPExporter
    from mlgoodput.testing import FakeMetricService, OTLPReceiver

    write_events(db, LOGGER, JOB, job_events(t0))
    want = expected(db)
    with OTLPReceiver("grpc") as rx, FakeMetricService(min_point_interval_s=0.0) as svc:
        gcm = CloudMonitoringExporter(
            GCPOptions(project_id="p", location="us-central2-b", acc_type="v4-8"),
            api_endpoint=svc.endpoint,
            insecure=True,
            min_point_interval_s=0.0,
        )
        m = monitoring.GoodputMonitor(
            JOB,
            LOGGER,
            tensorboard_dir=str(tmp_path / "tb"),
            upload_interval=60,
            monitoring_enabled=True,
            include_badput_breakdown=True,
            store=str(db),
            # (port 0: the uploader's endpoint binds a free port itself, no race with a port
            # picked here and let go)
            exporters=[PrometheusExporter(port=0), OTLPExporter(endpoint=rx.endpoint), gcm],
        )
        m.start_goodput_uploader()
        m.start_goodput_interval_uploader(window_size_seconds=120)
        assert m.flush(30)
        import urllib.request

        [url] = m.endpoints
        text = urllib.request.urlopen(url, timeout=5).read().decode()
        line = next(x for x in text.splitlines() if x.startswith("mlgoodput_goodput_ratio{"))
        assert float(line.rsplit(" ", 1)[1]) == pytest.approx(want["goodput/goodput_pct"] / 100)
        assert 'window="120s"' in text
        assert m.stop_goodput_interval_uploader()
        assert m.stop_goodput_uploader()
        assert m.wait_for_final_uploads()
        assert rx.latest("mlgoodput.goodput.productive.seconds", job_name=JOB) == pytest.approx(
            want["goodput/productive_seconds"]
        )
        assert svc.latest("compute.googleapis.com/workload/goodput_time", workload_id=JOB) == pytest.approx(
            want["goodput/productive_seconds"]
        )
        assert svc.latest("compute.googleapis.com/workload/interval_goodput", rolling_window_size="120") is not None
        assert svc.rejected == 0


@pytest.mark.slow
def test_a_monitor_started_again_resumes(db: Path, t0: float, tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    events = finished_job(t0)
    write_events(db, LOGGER, JOB, events[:25])
    m = monitoring.GoodputMonitor(
        JOB,
        LOGGER,
        upload_interval=60,
        monitoring_enabled=True,
        include_badput_breakdown=True,
        store=str(db),
        exporters=[FileExporter(out)],
    )
    m.start_goodput_uploader()
    first = m.uploader_pid
    assert m.stop_goodput_uploader()
    write_events(db, LOGGER, JOB, events[25:])
    m.start_goodput_uploader()  # after the first process's final upload: it ends first
    assert m.uploader_pid != first
    assert m.stop_goodput_uploader()
    assert m.wait_for_final_uploads()
    assert_matches(FileExporter.latest(out), expected(db))


@pytest.mark.slow
def test_seed_usage_with_the_real_recorder_in_a_training_process(db: Path, tmp_path: Path) -> None:
    """The seed's pattern: record with GoodputRecorder, monitor with GoodputMonitor, in one
    training process; the uploader runs beside it and the final upload sees the job end."""
    out = tmp_path / "out.jsonl"
    script = textwrap.dedent(f"""
        import time
        from mlgoodput import goodput, monitoring
        from mlgoodput.testing import FileExporter
        rec = goodput.GoodputRecorder({JOB!r}, {LOGGER!r}, logging_enabled=True, store={str(db)!r})
        mon = monitoring.GoodputMonitor(job_name={JOB!r}, logger_name={LOGGER!r}, upload_interval=0.2,
                                        monitoring_enabled=True, include_badput_breakdown=True,
                                        store={str(db)!r}, exporters=[FileExporter({str(out)!r})])
        rec.record_job_start_time()
        mon.start_goodput_uploader()
        rec.record_tpu_init_start_time(); time.sleep(0.1); rec.record_tpu_init_end_time()
        for step in range(15):
            rec.record_step_start_time(step)
            time.sleep(0.03)
        rec.record_job_end_time()
        print(mon.stop_goodput_uploader(), flush=True)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    res = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "True"
    got, want = FileExporter.latest(out), expected(db)
    assert got["goodput/max_productive_step"] == 14.0
    assert want["badput/{bucket}_seconds|bucket=tpu_initialization"] > 0.05
    assert_matches(got, {k: v for k, v in want.items() if "custom" not in k and "checkpoint" not in k})
