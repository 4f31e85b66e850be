"""One writer's records spread over several segment files (the console's journal) reach the
store in order, also when two processes recover them at once: a recoverer that finds one of
them held by the other never ships that writer's later files first (the store's exactly-once
mark would then skip the earlier records for good)."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

import pytest

from mlgoodput._recovery import journal_dirs, recover_files, recover_journals
from mlgoodput._segment import HEADER_SIZE, create_segment, write_record
from mlgoodput.events import Kind
from mlgoodput.store import open_store


def _segment(d: Path, url: str, writer: int, base: int, n: int) -> Path:
    meta = {"store": url, "namespace": "ns", "job": "j", "host": 0, "base": base}
    seg = create_segment(d, HEADER_SIZE + 64 * n + 4096, 0, meta, writer)
    off = seg.off
    for i in range(n):
        off += write_record(seg.buf, off, i, int(Kind.STEP_START), 0, 0, float(base + i), base + i, float("nan"), b"")
    seg.count, seg.off = n, off
    seg.seal()
    path = seg.path
    assert path is not None
    seg.release(delete=False)
    return path


def test_a_held_file_holds_back_its_writers_later_files(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    st = open_store(db)
    d = journal_dirs(st.url)[0]
    first = _segment(d, st.url, 99, 0, 50)
    second = _segment(d, st.url, 99, 50, 50)
    other = _segment(d, st.url, 7, 0, 10)  # another writer is not held back
    fd = os.open(first, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process is shipping the first file
    try:
        assert recover_files(st, [first, second, other]) == 10
        assert first.exists() and second.exists() and not other.exists()
    finally:
        os.close(fd)
    assert recover_files(st, [first, second]) == 100  # once it is free, in order
    steps = sorted(int(s) for s in st.read("ns", "j").columns.steps)
    assert steps == sorted([*range(100), *range(10)])
    st.close()


def test_recovery_on_read_waits_the_same_way(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    st = open_store(db)
    d = journal_dirs(st.url)[0]
    first = _segment(d, st.url, 5, 0, 30)
    second = _segment(d, st.url, 5, 30, 30)
    fd = os.open(first, os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        from mlgoodput._recovery import recover_dead

        assert recover_dead(st, st.url, [d]) == 0  # what a new journal does for dead ones
        assert second.exists()
    finally:
        os.close(fd)
    assert recover_journals(db) == 60
    assert sorted(int(s) for s in st.read("ns", "j").columns.steps) == list(range(60))
    st.close()


def test_a_file_shipped_and_removed_by_another_recoverer_meanwhile_is_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two recoverers open the same dead file; the first ships it, removes it and lets go of
    its lock; the second then gets the lock of a file no longer in the folder. It ships
    nothing more and raises nothing (it used to fail on removing the file again)."""
    from mlgoodput import _recovery

    db = str(tmp_path / "s.db")
    st = open_store(db)
    d = journal_dirs(st.url)[0]
    path = _segment(d, st.url, 3, 0, 20)
    real_flock = fcntl.flock
    raced: list[Path] = []

    def flock_after_the_other(fd: int, op: int) -> None:
        if not raced:  # the other recoverer finishes between this one's open and its lock
            raced.append(path)
            assert recover_files(st, [path]) == 20
            assert not path.exists()
        real_flock(fd, op)

    monkeypatch.setattr(_recovery.fcntl, "flock", flock_after_the_other)
    assert recover_files(st, [path]) == 0
    assert raced == [path]
    monkeypatch.setattr(_recovery.fcntl, "flock", real_flock)
    assert sorted(int(s) for s in st.read("ns", "j").columns.steps) == list(range(20))
    st.close()
