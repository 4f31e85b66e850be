"""A process forked while its node shipper is in the middle of a round (a data loader worker)
does not keep the dead segments that round holds locked: they stay dead to the next round."""

from __future__ import annotations

import fcntl
import os
import signal
import sqlite3
import uuid
from pathlib import Path

import pytest

from mlgoodput import _aggregator
from mlgoodput._recovery import journal_dirs, store_url
from mlgoodput.store import open_store
from tests.journal.test_aggregator import _spawn

pytestmark = pytest.mark.forks


def _locked_by_someone(p: Path) -> bool:
    fd = os.open(p, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return True
    finally:
        os.close(fd)
    return False


def test_a_child_forked_mid_round_leaves_the_dead_segments_unlocked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = str(tmp_path / "fork.db")
    job = f"fork-{uuid.uuid4().hex[:8]}"
    open_store(db).jobs()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")  # the writer ships nothing before it dies
    p = _spawn(db, job, 0, 2000, "hold")
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGKILL)
        p.wait(30)
    finally:
        if p.poll() is None:
            p.kill()
        blocker.execute("ROLLBACK")
        blocker.close()
    segs = [f for f in journal_dirs(store_url(db))[0].iterdir() if f.name.endswith(".seg")]
    assert segs, "the killed writer left its segment"

    monkeypatch.setattr(_aggregator, "ROUND_EVENTS", 500)  # the round reads a part: the file stays
    ns = _aggregator.NodeShipper(store_url(db), interval_s=3600)
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    children: list[int] = []
    real = ns._store_all

    def store_and_fork(store: object, items: list[object]) -> None:
        real(store, items)  # type: ignore[arg-type]
        if not children:
            pid = os.fork()
            if pid == 0:  # the child lives on, holding whatever it inherited, until told
                try:  # (its fork handlers have run by now: os.fork returns after them)
                    os.write(ready_w, b"r")
                    os.read(go_r, 1)
                finally:
                    os._exit(0)
            children.append(pid)

    monkeypatch.setattr(ns, "_store_all", store_and_fork)
    try:
        ns._work()  # one round, as the leader: it forks in the middle
        assert children
        assert os.read(ready_r, 1) == b"r"  # the child is past its fork handlers
        assert not any(_locked_by_someone(s) for s in segs if s.exists())
    finally:
        os.write(go_w, b"x" * len(children))
        for pid in children:
            os.waitpid(pid, 0)
        ns.close(10)
