"""A TensorBoard folder that cannot be written when the uploader starts (a path that is not a
folder, a read-only or full file system): `start_goodput_uploader()` returns, training goes
on, a warning says what is wrong, and uploads resume once the folder can be written."""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from monitor_helpers import finished_job, write_events

from mlgoodput import monitoring
from waiting import tensorboard_has, wait_for

JOB, LOGGER = "run-tb", "goodput_run-tb"


def _monitor(db: Path, tb: Path) -> monitoring.GoodputMonitor:
    return monitoring.GoodputMonitor(
        job_name=JOB,
        logger_name=LOGGER,
        tensorboard_dir=str(tb),
        upload_interval=1,
        monitoring_enabled=True,
        store=str(db),
    )


@pytest.mark.slow
def test_a_folder_blocked_by_a_file_is_retried(
    db: Path, t0: float, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    write_events(db, LOGGER, JOB, finished_job(t0))
    tb = tmp_path / "tb"
    tb.write_text("not a folder")  # every write under it fails with an OSError
    m = _monitor(db, tb)
    with caplog.at_level(logging.WARNING, logger="mlgoodput"):
        m.start_goodput_uploader()  # returns: never raised into the training script
    assert any("cannot open yet" in r.getMessage() and "retrying" in r.getMessage() for r in caplog.records)
    tb.unlink()  # the folder can be made now: the uploads resume
    wait_for(lambda: tensorboard_has(tb / "goodput", "goodput/goodput_pct"), timeout_s=60, what="uploads resumed")
    assert m.stop_goodput_uploader()
    assert m.wait_for_final_uploads()


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "fs"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"mounting a tmpfs is not allowed here: {r.stderr.strip() or 'mount failed'}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.slow
def test_a_read_only_file_system_is_retried(db: Path, t0: float, tmpfs: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_events(db, LOGGER, JOB, finished_job(t0))
    subprocess.run(["mount", "-o", "remount,ro", str(tmpfs)], check=True)
    m = _monitor(db, tmpfs / "tb")
    with caplog.at_level(logging.WARNING, logger="mlgoodput"):
        m.start_goodput_uploader()
    assert any("Read-only file system" in r.getMessage() for r in caplog.records)
    subprocess.run(["mount", "-o", "remount,rw", str(tmpfs)], check=True)
    wait_for(lambda: tensorboard_has(tmpfs / "tb" / "goodput", "goodput/goodput_pct"), timeout_s=60, what="uploads")
    assert m.stop_goodput_uploader()
    assert m.wait_for_final_uploads()


@pytest.mark.slow
def test_a_full_file_system_is_retried(db: Path, t0: float, tmpfs: Path, caplog: pytest.LogCaptureFixture) -> None:
    write_events(db, LOGGER, JOB, finished_job(t0))
    filler = tmpfs / "filler"
    with open(filler, "wb") as f:  # fill it to the last block
        try:
            while True:
                f.write(b"\0" * 65536)
                f.flush()
        except OSError:
            pass
    m = _monitor(db, tmpfs / "tb")
    with caplog.at_level(logging.WARNING, logger="mlgoodput"):
        m.start_goodput_uploader()
    assert any("No space left" in r.getMessage() for r in caplog.records)
    filler.unlink()
    wait_for(lambda: tensorboard_has(tmpfs / "tb" / "goodput", "goodput/goodput_pct"), timeout_s=60, what="uploads")
    assert m.stop_goodput_uploader()
    assert m.wait_for_final_uploads()
    shutil.rmtree(tmpfs / "tb", ignore_errors=True)
