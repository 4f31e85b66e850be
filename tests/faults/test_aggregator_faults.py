"""The journal's fault trials again with the node shipper on (MLGOODPUT_NODE_SHIPPER=1 for
the trial and the processes it starts): a store deleted or replaced mid-run, damaged bytes
and headers, small disks and file-size limits, a torn last record, the first report after a
crash. What each trial promises holds when the node's shipper stores the events."""

from __future__ import annotations

import signal
import subprocess
from pathlib import Path

import pytest

from mlgoodput import _env
from mlgoodput._aggregator import NodeShipper
from mlgoodput._recovery import journal_dirs, store_url
from tests.faults import test_faults as _faults
from tests.faults import trials
from tests.journal.test_aggregator import _leader_pid, _once, _result, _spawn, _steps
from tests.journal.test_aggregator_cli import start_aggregate
from tests.waiting import wait_for

_TAKEN = (
    "test_store_deleted_or_replaced_mid_run_loses_nothing",
    "test_flipped_bytes_never_store_wrong_values_and_every_loss_is_reported",
    "test_a_file_with_both_headers_damaged_is_set_aside_and_reported",
    "test_file_size_limit_loses_nothing",
    "test_small_filesystem_gets_small_segments_and_loses_nothing",
    "test_a_last_record_whose_length_reads_zero_is_kept",
    "test_the_first_report_after_a_crash_reads_every_step",
    "test_memory_fallback_is_reported_with_count_and_place",
)


@pytest.fixture(autouse=True)
def _node_shipper_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(_env.NODE_SHIPPER, "1")


_HERE = globals()
for _name in _TAKEN:
    _HERE[_name] = getattr(_faults, _name)


def test_the_side_aggregator_killed_mid_run_loses_nothing(tmp_path: Path) -> None:
    """`mlgoodput aggregate` leads while two processes record, and is SIGKILLed mid-run:
    a recording process's own node shipper takes over; every step is stored once."""
    db = str(tmp_path / "killed.db")
    url = store_url(db)
    job = "side-killed"
    stop = tmp_path / "stop"
    agg = start_aggregate(db)
    writers: list[subprocess.Popen[str]] = []
    try:
        wait_for(lambda: _leader_pid(url) == agg.pid, 60, "the side process leading")
        writers += [_spawn(url, job, h, 300, "run", stop) for h in range(2)]
        for w in writers:
            assert w.stdout is not None and w.stdout.readline().strip() == "running"
        wait_for(lambda: sum(_steps(url, job).values()) >= 600, 60, "the first steps stored by the side process")
        agg.send_signal(signal.SIGKILL)
        assert agg.wait(30) == -signal.SIGKILL
        wait_for(lambda: _leader_pid(url) in [w.pid for w in writers], 60, "a recording process leading")
        stop.touch()
        results = [_result(w) for w in writers]
        assert all(r["flushed"] for r in results), results
        assert _once(url, job, {h: r["count"] for h, r in enumerate(results)})
    finally:
        for p in [agg, *writers]:
            if p.poll() is None:
                p.kill()
                p.wait(30)


@pytest.mark.slow
def test_the_node_shipper_never_stores_a_flipped_byte_and_reports_every_loss(tmp_path: Path) -> None:
    """A dead segment with one byte flipped (in a header copy, the watermark or a record),
    shipped by the node shipper: no wrong value is stored, and every record is either
    stored or reported lost (in the store's lost stream)."""
    n = 200
    for k, at in enumerate(trials.default_offsets(n)[::3]):
        db = tmp_path / f"t{k}" / "s.db"
        url = store_url(str(db))
        jdir = journal_dirs(url)[0]
        jdir.mkdir(parents=True)
        path, events = trials._write_segment(jdir, url, n, sealed=k % 2 == 1)
        with open(path, "r+b") as f:
            f.seek(at)
            b = f.read(1)
            f.seek(at)
            f.write(bytes([b[0] ^ 0xFF]))
        shipper = NodeShipper(url, interval_s=0.05)
        shipper.start()
        try:
            assert shipper.flush(30)
        finally:
            assert shipper.close(30)
        got = trials._stored_events(db)
        assert [e for e in got if e != events[e.step or 0]] == [], f"offset {at}: wrong values stored"
        lost = trials._losses(db)
        assert len(got) + lost >= n, f"offset {at}: {len(got)} stored, {lost} reported lost of {n}"
        assert len({e.step for e in got}) == len(got), f"offset {at}: a record stored twice"
