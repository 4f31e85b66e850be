"""Readers ship what journals hold before they read: the CLI's read commands and the
calculator run `recover_changed_journals`, which rescans only when the journals changed."""

from __future__ import annotations

import logging
import os
import sqlite3
import struct
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from mlgoodput._recovery import journal_dirs, recover_changed_journals
from mlgoodput._segment import HEADER_SIZE, MAGIC, SUFFIX, VERSION
from mlgoodput.accounting import GoodputCalculator
from mlgoodput.goodput import GoodputRecorder
from mlgoodput.store import open_store

SRC = str(Path(__file__).resolve().parents[2] / "src")

TRAINER = """
import sys
from mlgoodput.goodput import GoodputRecorder

store, job = sys.argv[1], sys.argv[2]
rec = GoodputRecorder(job, "goodput_" + job, True, store=store)
rec.record_job_start_time()
for i in range(1000):
    rec.record_step_start_time(i)
rec.record_job_end_time()
rec.close()
"""


def _env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MLGOODPUT_")}
    return {**env, "PYTHONPATH": SRC, "XDG_DATA_HOME": str(tmp_path / "xdg"), "NO_COLOR": "1", "COLUMNS": "200"}


def _cli(env: dict[str, str], *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mlgoodput", *argv], env=env, capture_output=True, text=True, timeout=120
    )


def _journal_files(url: str) -> list[Path]:
    return [p for d in journal_dirs(url) if d.is_dir() for p in d.iterdir() if p.name.endswith(SUFFIX)]


@pytest.mark.slow
def test_cli_reads_a_job_left_in_a_journal_while_the_store_was_locked(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    url = "sqlite://" + str(db)
    st = open_store(str(db))
    st.jobs()  # the store exists, as it would after earlier jobs
    st.close()
    env = _env(tmp_path)
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # another process holds the write lock all along
    try:
        trainer = subprocess.run(
            [sys.executable, "-c", TRAINER, str(db), "locked-job"], env=env, capture_output=True, text=True, timeout=120
        )
        assert "Traceback" not in trainer.stderr, trainer.stderr
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert _journal_files(url), "the trainer shipped despite the lock: this test tests nothing"
    assert "locked-job" not in [j.job for j in open_store(str(db)).jobs()]

    report = _cli(env, "report", "--job", "locked-job", "--store", str(db))
    assert report.returncode == 0, report.stdout + report.stderr
    assert "locked-job" in report.stdout
    jobs = _cli(env, "jobs", "--store", str(db))
    assert jobs.returncode == 0, jobs.stderr
    assert "locked-job" in jobs.stdout
    assert _journal_files(url) == []  # shipped, and the dead trainer's files are gone
    steps = [
        e
        for e in open_store(str(db)).read("goodput_locked-job", "locked-job").columns.events()
        if e.kind.name == "STEP_START"
    ]
    assert len(steps) == 1000


def _newer_segment(directory: Path, name: str) -> Path:
    """A journal file of a newer format: every scan leaves it alone and logs a warning."""
    directory.mkdir(parents=True, exist_ok=True)
    head = bytearray(HEADER_SIZE)
    for at in (0, 2048):
        head[at : at + 4] = MAGIC
        struct.pack_into("<I", head, at + 4, VERSION + 1)
    p = directory / f"{name}{SUFFIX}"
    p.write_bytes(bytes(head))
    return p


def _scans(caplog: pytest.LogCaptureFixture) -> int:
    n = sum("newer format" in r.getMessage() for r in caplog.records)
    caplog.clear()
    return n


def test_a_second_report_with_unchanged_journals_does_not_rescan(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = str(tmp_path / "r.db")
    rec = GoodputRecorder("r", "goodput_r", True, store=db)
    rec.record_job_start_time()
    rec.record_step_start_time(0)
    rec.record_step_start_time(1)
    rec.record_job_end_time()
    assert rec.flush(30)
    folder = journal_dirs("sqlite://" + db)[0]
    _newer_segment(folder, "999999-00000000000000aa")
    calc = GoodputCalculator("r", "goodput_r", store=db)
    with caplog.at_level(logging.WARNING, logger="mlgoodput"):
        calc.report()
        assert _scans(caplog) == 1  # the first read of this store in the process scans
        calc.report()
        assert _scans(caplog) == 0  # nothing changed: no rescan
        rec.record_step_start_time(2)  # this process's own journal changes: still none
        assert rec.flush(30)
        calc.report()
        assert _scans(caplog) == 0
        _newer_segment(folder, "999999-00000000000000ab")  # a new file appears
        calc.report()
        assert _scans(caplog) == 2
        assert recover_changed_journals(db) == 0
        assert _scans(caplog) == 0
    rec.close()


def test_another_live_journaling_process_means_a_rescan_every_time(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = str(tmp_path / "l.db")
    child = subprocess.Popen(
        [sys.executable, str(Path(__file__).with_name("_child.py")), db, "live", "50"],
        stdout=subprocess.PIPE,
        env=_env(tmp_path),
        text=True,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        folder = journal_dirs("sqlite://" + db)[0]
        _newer_segment(folder, "999999-00000000000000ac")
        with caplog.at_level(logging.WARNING, logger="mlgoodput"):
            recover_changed_journals(db)
            assert _scans(caplog) == 1
            recover_changed_journals(db)  # its files change without the listing showing it
            assert _scans(caplog) == 1
            child.kill()
            child.wait(30)
            recover_changed_journals(db)  # it was live at the last scan: once more, then quiet
            assert _scans(caplog) == 1
            recover_changed_journals(db)
            assert _scans(caplog) == 0
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(30)
    steps = [e for e in open_store(db).read("ns", "live").columns.events() if e.kind.name == "STEP_START"]
    assert len(steps) == 50


def test_quiet_folders_are_checked_by_their_mtimes_and_a_new_file_is_still_found(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mlgoodput import _recovery

    db = str(tmp_path / "q.db")
    rec = GoodputRecorder("q", "goodput_q", True, store=db)
    rec.record_job_start_time()
    rec.record_step_start_time(0)
    assert rec.flush(30)
    rec.close()
    folders = journal_dirs("sqlite://" + db)
    for d in folders:
        d.mkdir(parents=True, exist_ok=True)
    listings = []
    real = _recovery._folder_state
    monkeypatch.setattr(_recovery, "_folder_state", lambda dirs: listings.append(1) or real(dirs))
    calc = GoodputCalculator("q", "goodput_q", store=db)
    calc.report()
    calc.report()
    # folders changed a moment ago: their mtimes cannot tell a file made in the same clock tick
    n = len(listings)
    calc.report()
    assert len(listings) == n + 1
    for d in folders:  # changed long ago: one stat each tells that nothing came or went
        os.utime(d, ns=(os.stat(d).st_atime_ns, os.stat(d).st_mtime_ns - 60 * 10**9))
    calc.report()  # listed once more, found unchanged and quiet
    n = len(listings)
    calc.report()
    calc.report()
    assert len(listings) == n
    with caplog.at_level(logging.WARNING, logger="mlgoodput"):
        _newer_segment(folders[-1], "999999-00000000000000ad")  # a file comes: the folder's mtime moves
        calc.report()
        assert len(listings) > n
        assert _scans(caplog) == 1


def test_quiet_folders_are_listed_again_after_a_while(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A folder's mtime may not be trusted (a file system whose clock lags, a tool that sets
    mtimes back): a quiet folder is listed again once its quiet time is over."""
    from mlgoodput import _recovery

    db = str(tmp_path / "w.db")
    rec = GoodputRecorder("w", "goodput_w", True, store=db)
    rec.record_job_start_time()
    assert rec.flush(30)
    rec.close()
    folders = journal_dirs("sqlite://" + db)
    for d in folders:
        d.mkdir(parents=True, exist_ok=True)
        os.utime(d, ns=(os.stat(d).st_atime_ns, os.stat(d).st_mtime_ns - 60 * 10**9))
    listings = []
    real = _recovery._folder_state
    monkeypatch.setattr(_recovery, "_folder_state", lambda dirs: listings.append(1) or real(dirs))
    calc = GoodputCalculator("w", "goodput_w", store=db)
    calc.report()
    calc.report()  # found quiet
    n = len(listings)
    calc.report()
    assert len(listings) == n  # quiet: not listed
    later = types.SimpleNamespace(monotonic=lambda: time.monotonic() + _recovery._QUIET_FOR_S, time_ns=time.time_ns)
    monkeypatch.setattr(_recovery, "time", later)  # its clock, past the quiet time
    calc.report()  # the quiet state it finds is over: listed (and made quiet again from now on)
    assert len(listings) == n + 1
    calc.report()
    assert len(listings) == n + 1
