"""The fakes of `mlgoodput.testing` as a user's test would use them: a FakeClock drives the
monitor's "now", a CapturingExporter keeps what the monitor would upload."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from mlgoodput._monitoring._source import GoodputSource
from mlgoodput.goodput import GoodputRecorder
from mlgoodput.testing import CapturingExporter, FakeClock

T0 = 1_700_000_000.0


def _at(t: float) -> dt.datetime:
    return dt.datetime.fromtimestamp(t, dt.UTC)


def test_a_running_job_seen_through_a_fake_clock_and_a_capturing_exporter(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    rec = GoodputRecorder("fk", "goodput_fk", True, store=str(db))
    rec.record_job_start_time(_at(T0))
    for i in range(10):  # ten 1-second steps after 10 s of start-up; the job is still running
        rec.record_step_start_time(i, _at(T0 + 10 + i))
    assert rec.flush(30)
    clock = FakeClock(start=T0 + 20)
    source = GoodputSource("fk", "goodput_fk", "sqlite://" + str(db), clock=clock)
    exporter = CapturingExporter()

    exporter.export(source.collect(clock()))
    first = exporter.latest()
    assert first["goodput/total_elapsed_seconds"] == pytest.approx(20.0)
    assert first["goodput/last_step"] == 9.0

    clock.advance(30)  # no new event: the open job's elapsed time follows the clock
    exporter.export(source.collect(clock()))
    assert exporter.latest()["goodput/total_elapsed_seconds"] == pytest.approx(50.0)
    assert exporter.latest()["goodput/goodput_pct"] < first["goodput/goodput_pct"]

    exporter.fail_next()  # a backend outage, as an exporter contract test would make one
    with pytest.raises(ConnectionError):
        exporter.export(source.collect(clock()))
    assert len(exporter.batches) == 2  # the failed export kept nothing
    exporter.shutdown()
    assert exporter.shut_down
    rec.close()
