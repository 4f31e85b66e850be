"""A segment whose header copies are both damaged still says whose it was: its file name
carries its stream, and its loss goes to the store's lost stream under that job and host,
where `mlgoodput jobs` and `report` show it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mlgoodput._cli.report import journal_losses
from mlgoodput._recovery import UNKNOWN_STREAM, journal_dirs, recover_journals
from mlgoodput._segment import HEADER_SIZE, create_segment, stream_of_name, stream_tag, write_record
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import open_store

NAMES = ["job", "a+b/c%d e.f", "ünïcode-ジョブ", "x" * 300]


@pytest.mark.parametrize("job", NAMES)
def test_a_segment_name_gives_its_stream_back(job: str) -> None:
    meta = {"store": "u", "namespace": "goodput+x", "job": job, "host": 7}
    tag = stream_tag(meta)
    name = f"123-{5:016x}{tag}.seg"
    assert len(name.encode()) <= 200
    got = stream_of_name(name)
    assert got is not None and got.writer == 5 and got.host == 7
    if len(job) < 100:
        assert (got.namespace, got.job) == ("goodput+x", job)
    else:
        assert got.job is None and got.hashed  # too long for a file name: its hash
    again = stream_of_name(f"123-{5:016x}-00ab{tag}.damaged")
    assert again is not None and again.host == 7
    assert stream_of_name("123-0000000000000005.seg") == type(got)(5)  # names before the tag
    assert stream_of_name("notes.txt") is None


def _damaged(db: str, job: str, n: int) -> Path:
    url = open_store(db).url
    seg = create_segment(
        journal_dirs(url)[0], HEADER_SIZE + 64 * n + 4096, 2, {"store": url, "namespace": "ns", "job": job, "host": 2}
    )
    off = seg.off
    for i in range(n):
        off += write_record(seg.buf, off, i, int(Kind.STEP_START), 0, 0, float(i), i, float("nan"), b"")
    path = seg.path
    assert path is not None
    seg.buf[4] ^= 0xFF  # both header copies
    seg.buf[2052] ^= 0xFF
    seg.release(delete=False)
    return path


@pytest.mark.parametrize("job", ["train-7", "y" * 300])
def test_the_loss_lands_in_the_lost_stream_of_its_job(tmp_path: Path, job: str) -> None:
    db = str(tmp_path / "s.db")
    st = open_store(db)
    st.append("ns", job, EventBatch(1, 0, [Event(Kind.JOB_START, 0.0)]))  # a long name is found by its hash
    st.close()
    path = _damaged(db, job, 40)
    recover_journals(db)
    assert path.with_suffix(".damaged").exists() and not path.exists()
    st = open_store(db)
    assert journal_losses(st) == {("ns", job): 40}
    st.close()
    recover_journals(db)  # once only
    st = open_store(db)
    assert journal_losses(st) == {("ns", job): 40}
    st.close()


def test_a_hashed_name_of_a_job_the_store_never_saw_is_an_unknown_loss(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    _damaged(db, "z" * 300, 5)
    recover_journals(db)
    st = open_store(db)
    assert journal_losses(st) == {(UNKNOWN_STREAM, UNKNOWN_STREAM): 5}
    st.close()


@pytest.mark.slow
def test_jobs_and_report_say_it(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    _damaged(db, "only-lost", 30)
    cli = [sys.executable, "-m", "mlgoodput"]
    jobs = subprocess.run([*cli, "jobs", "--store", db], capture_output=True, text=True, timeout=120)
    assert "30 events of job only-lost (logger ns) were lost" in jobs.stdout + jobs.stderr
    rep = subprocess.run(
        [*cli, "report", "--store", db, "--job", "only-lost"], capture_output=True, text=True, timeout=120
    )
    assert rep.returncode != 0
    assert "30 events of job only-lost" in rep.stdout + rep.stderr
    assert "Traceback" not in rep.stderr
