"""A stop returns at once and the final upload still goes out (issue 26).

The exporter here hangs (FileExporter's hang flag) while the stop is called: the stop must
return while nothing could be exported yet, and once the backend answers the final upload
must hold everything recorded before the stop. Nothing here waits on time: the tests wait
on the final upload (`wait_for_final_uploads`) or on the training process's own output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from monitor_helpers import finished_job, write_events

from mlgoodput import monitoring, monitoring_elastic
from mlgoodput.accounting import GoodputCalculator
from mlgoodput.events import Event, Kind
from mlgoodput.testing import FileExporter
from waiting import wait_for

JOB, LOGGER = "fast-stop", "goodput_fast-stop"

Starter = Callable[[Any], None]
Stopper = Callable[[Any, bool], bool]

#: (kind, monitor keywords, start, stop): every stop method of the monitors.
KINDS: list[tuple[str, dict[str, Any], Starter, Stopper]] = [
    (
        "cumulative",
        {},
        lambda m: m.start_goodput_uploader(),
        lambda m, skip: m.stop_goodput_uploader(skip_final_flush=skip),
    ),
    (
        "rolling",
        {},
        lambda m: m.start_rolling_window_goodput_uploader([60, 600]),
        lambda m, skip: m.stop_rolling_window_goodput_uploader(skip_final_flush=skip),
    ),
    (
        "interval",
        {},
        lambda m: m.start_goodput_interval_uploader(600),
        lambda m, skip: m.stop_goodput_interval_uploader(skip_final_flush=skip),
    ),
    (
        "step_deviation",
        {"include_step_deviation": True},
        lambda m: m.start_step_deviation_uploader(),
        lambda m, skip: m.stop_step_deviation_uploader(skip_final_flush=skip),
    ),
    (
        "elastic",
        {"elastic": True, "include_slice_efficiency": True},
        lambda m: m.start_goodput_uploader(),
        lambda m, skip: m.stop_goodput_uploader(skip_final_flush=skip),
    ),
]


def _monitor(db: Path, out: Path, kw: dict[str, Any], hang: Path | None = None) -> Any:
    kw = dict(kw)
    cls: Any = monitoring_elastic.ElasticGoodputMonitor if kw.pop("elastic", False) else monitoring.GoodputMonitor
    return cls(
        JOB,
        LOGGER,
        upload_interval=600,  # no upload but the one at start and the final one
        monitoring_enabled=True,
        include_badput_breakdown=True,
        store=str(db),
        exporters=[FileExporter(out, hang_flag=None if hang is None else str(hang))],
        stop_timeout_s=120,  # the deadline stays out of the way: the hang ends when the test says
        **kw,
    )


def _samples(out: Path) -> list[dict[str, Any]]:
    return [s for r in FileExporter.read(out) for s in r.get("samples", [])]  # type: ignore[attr-defined]


def _job(t0: float) -> list[Event]:
    events = finished_job(t0)
    events.insert(1, Event(Kind.SLICE_COUNTS, t0 + 0.1, attrs={"active": 2, "total": 4, "available": 4}))
    return events


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS, ids=[k[0] for k in KINDS])
def test_a_stop_returns_before_the_final_upload_which_still_holds_everything(
    kind: tuple[str, dict[str, Any], Starter, Stopper], db: Path, t0: float, tmp_path: Path
) -> None:
    name, kw, start, stop = kind
    events = _job(t0)
    write_events(db, LOGGER, JOB, events[:20])
    out, hang = tmp_path / "out.jsonl", tmp_path / "hang"
    hang.write_text("")  # the backend hangs: nothing can be exported until the test says so
    m = _monitor(db, out, kw, hang)
    start(m)
    write_events(db, LOGGER, JOB, events[20:])  # recorded before the stop: the final upload must hold it
    assert stop(m, False)  # returned, with the backend still hanging
    assert _samples(out) == []  # so nothing had been exported: the stop did not wait for it
    assert m.uploader_pid is None  # the process is ending in the background, a new start gets a new one
    hang.unlink()  # the backend answers
    assert m.wait_for_final_uploads()
    # the last batch is the final upload (the upload at start, held up by the hang, came before it)
    samples = [r["samples"] for r in FileExporter.read(out) if r.get("samples")][-1]
    r = GoodputCalculator(JOB, LOGGER, store=str(db)).report()
    assert samples and {s["step"] for s in samples} == {r.last_step}  # the job's last step, nothing older
    got = FileExporter.latest(out)
    if name in ("cumulative", "elastic"):
        assert got["goodput/goodput_pct"] == pytest.approx(r.goodput_pct)
        assert got["goodput/total_elapsed_seconds"] == pytest.approx(r.total_s)
    if name == "elastic":
        assert r.slice_efficiency is not None
        assert got["elastic/stepping_slice_efficiency_pct"] == pytest.approx(100 * r.slice_efficiency.stepping)
    if name == "rolling":
        assert {"rolling/{window}/goodput_pct|window=60s", "rolling/{window}/goodput_pct|window=600s"} <= set(got)
    if name == "interval":
        assert "rolling/{window}/goodput_pct|window=600s" in got
    if name == "step_deviation":
        assert "goodput/step_time_deviation_seconds" in got


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS, ids=[k[0] for k in KINDS])
def test_skip_final_flush_adds_no_upload(
    kind: tuple[str, dict[str, Any], Starter, Stopper], db: Path, t0: float, tmp_path: Path
) -> None:
    _, kw, start, stop = kind
    write_events(db, LOGGER, JOB, _job(t0))
    out = tmp_path / "out.jsonl"
    m = _monitor(db, out, kw)
    start(m)
    at_start = wait_for(lambda: _samples(out), 120, "the upload at start")
    assert stop(m, True)
    assert m.wait_for_final_uploads()
    assert _samples(out) == at_start  # nothing uploaded at the stop
    assert any(r.get("shutdown") for r in FileExporter.read(out))  # the exporter was shut down all the same


@pytest.mark.slow
def test_one_uploader_stopped_while_another_runs_on(db: Path, t0: float, tmp_path: Path) -> None:
    """axlearn's pair in one monitor: the rolling stop leaves the process running for the
    cumulative one; both final uploads go out, each holding the whole job."""
    write_events(db, LOGGER, JOB, _job(t0))
    out, hang = tmp_path / "out.jsonl", tmp_path / "hang"
    hang.write_text("")
    m = _monitor(db, out, {}, hang)
    m.start_goodput_uploader()
    m.start_rolling_window_goodput_uploader([60])
    pid = m.uploader_pid
    assert m.stop_rolling_window_goodput_uploader()
    assert m.uploader_pid == pid  # the cumulative uploader still runs there
    assert m.stop_goodput_uploader()
    assert _samples(out) == []
    hang.unlink()
    assert m.wait_for_final_uploads()
    got = FileExporter.latest(out)
    r = GoodputCalculator(JOB, LOGGER, store=str(db)).report()
    assert got["goodput/goodput_pct"] == pytest.approx(r.goodput_pct)
    assert "rolling/{window}/goodput_pct|window=60s" in got


@pytest.mark.slow
def test_the_final_upload_of_a_stop_right_before_exit_is_not_lost(db: Path, tmp_path: Path) -> None:
    """The training process stops its monitor and exits at once, as MaxText and axlearn do at
    the end of a job: the interpreter's exit waits for the final upload (here held up by a
    hanging backend until the test sees the stop return), so it lands with the last step."""
    out, hang = tmp_path / "out.jsonl", tmp_path / "hang"
    hang.write_text("")
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from monitor_helpers import write_events
        from mlgoodput.events import Event, Kind
        from mlgoodput import monitoring
        from mlgoodput.testing import FileExporter
        db = {str(db)!r}
        m = monitoring.GoodputMonitor({JOB!r}, {LOGGER!r}, upload_interval=600, monitoring_enabled=True,
                                      store=db, exporters=[FileExporter({str(out)!r}, hang_flag={str(hang)!r})],
                                      stop_timeout_s=120)
        t = time.time()
        write_events(db, {LOGGER!r}, {JOB!r}, [Event(Kind.JOB_START, t)])
        m.start_goodput_uploader()
        write_events(db, {LOGGER!r}, {JOB!r}, [Event(Kind.STEP_START, t + 1 + i, step=i) for i in range(7)])
        print("stopped", m.stop_goodput_uploader(), flush=True)
        write_events(db, {LOGGER!r}, {JOB!r}, [Event(Kind.JOB_END, t + 9)])
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    p = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "stopped True"  # the stop returned with the backend hung
        assert _samples(out) == []
        hang.unlink()
        assert p.wait(120) == 0
    finally:
        if p.poll() is None:
            p.kill()
    got = FileExporter.latest(out)
    assert got["goodput/last_step"] == 6.0  # the final upload landed before the process was gone
    assert any(r.get("shutdown") for r in FileExporter.read(out))


@pytest.mark.slow
def test_a_bad_timeout_is_misuse_not_an_exception(db: Path, t0: float, tmp_path: Path) -> None:
    from mlgoodput import MlGoodputWarning

    write_events(db, LOGGER, JOB, _job(t0))
    m = _monitor(db, tmp_path / "out.jsonl", {})
    m.start_goodput_uploader()
    with pytest.warns(MlGoodputWarning, match="timeout_s"):
        assert m.stop_goodput_uploader(timeout_s=-1)  # the monitor's own timeout instead
    assert m.wait_for_final_uploads()
    assert m.misuse_counts == {"bad_timeout": 1}
    with pytest.raises(ValueError, match="timeout_s"):
        m.wait_for_final_uploads(timeout_s="soon")  # type: ignore[arg-type]
