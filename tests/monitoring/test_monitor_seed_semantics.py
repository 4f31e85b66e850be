"""The monitor's calls with the seed's meaning: a stop without a start makes one final
upload (the seed's cold flush) and warns; `skip_final_flush` makes it a no-op."""

from __future__ import annotations

from pathlib import Path

import pytest
from monitor_helpers import finished_job, write_events

from mlgoodput import MlGoodputWarning, monitoring
from mlgoodput.testing import FileExporter

JOB, LOGGER = "cold-7", "goodput_cold-7"


def test_stop_without_start_makes_one_final_upload(db: Path, t0: float, tmp_path: Path) -> None:
    write_events(db, LOGGER, JOB, finished_job(t0))
    out = tmp_path / "out.jsonl"
    m = monitoring.GoodputMonitor(
        JOB, LOGGER, None, 30, True, store=str(db), exporters=[FileExporter(out)], final_flush_timeout_seconds=20
    )
    with pytest.warns(MlGoodputWarning, match="not running; one final upload"):
        assert m.stop_goodput_uploader()
    assert m.wait_for_final_uploads()
    got = FileExporter.latest(out)
    assert got["goodput/goodput_pct"] > 0
    assert m.uploader_pid is None  # nothing left running
    m2 = monitoring.GoodputMonitor(
        JOB, LOGGER, None, 30, True, store=str(db), exporters=[FileExporter(tmp_path / "none.jsonl")]
    )
    with pytest.warns(MlGoodputWarning, match="the call did nothing"):
        assert m2.stop_goodput_uploader(skip_final_flush=True)
        assert m2.stop_rolling_window_goodput_uploader()  # never started: no windows to upload
    assert not (tmp_path / "none.jsonl").exists()


def test_monitoring_disabled_does_nothing(tmp_path: Path) -> None:
    m = monitoring.GoodputMonitor(JOB, LOGGER, str(tmp_path / "tb"), 30, False, store=str(tmp_path / "s.db"))
    m.start_goodput_uploader()
    assert m.uploader_pid is None
    assert m.stop_goodput_uploader()
    assert m.misuse_counts == {}
