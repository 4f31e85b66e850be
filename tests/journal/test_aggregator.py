"""The per-node aggregator (mlgoodput._aggregator): processes journaling into one store hand
their events to one node shipper, which stores a round in one transaction; a leader killed
mid-run is replaced and nothing is lost or stored twice; writers all killed leave their
files to recovery or the next process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mlgoodput import _aggregator, _env
from mlgoodput._journal import Journal
from mlgoodput._recovery import journal_dirs, recover_journals, store_url
from mlgoodput.events import Kind
from mlgoodput.store import open_store
from tests.store.conftest import pgbouncer, pgbouncer_url, postgres_url  # noqa: F401  (server fixtures)
from tests.waiting import wait_for

CHILD = str(Path(__file__).with_name("_aggregator_child.py"))
ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(params=["sqlite", "postgres", "pgbouncer"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return store_url(str(tmp_path / "agg.db"))
    return str(request.getfixturevalue(f"{request.param}_url"))


@pytest.fixture
def job() -> str:
    return f"agg-{uuid.uuid4().hex[:12]}"


def _spawn(*args: object) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env[_env.NODE_SHIPPER] = "1"
    return subprocess.Popen(
        [sys.executable, CHILD, *map(str, args)], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT
    )


def _result(p: subprocess.Popen[str]) -> dict[str, Any]:
    out, _ = p.communicate(timeout=600)  # (the child's flush may wait out a stalled disk: FLUSH_S)
    assert p.returncode == 0, out
    return dict(json.loads(out.strip().splitlines()[-1]))


def _steps(url: str, job: str) -> Counter[tuple[int, int]]:
    st = open_store(url)
    try:
        return Counter((int(e.host), int(e.step)) for e in st.read("ns", job).columns.events() if e.step is not None)
    finally:
        st.close()


def _once(url: str, job: str, counts: dict[int, int]) -> bool:
    """Every host's steps 0..count-1 stored exactly once, nothing else."""
    got = _steps(url, job)
    want = Counter((h, i) for h, n in counts.items() for i in range(n))
    return got == want


def _leader_pid(url: str) -> int | None:
    """The process holding the node shipper's lock of `url` (from /proc/locks)."""
    try:
        ino = os.stat(journal_dirs(url)[0] / _aggregator.LOCK_NAME).st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        f = line.split()
        if len(f) >= 6 and f[1] == "FLOCK" and f[5].endswith(f":{ino}"):
            return int(f[4])
    return None


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[str]]]:
    ps: list[subprocess.Popen[str]] = []
    yield ps
    for p in ps:
        if p.poll() is None:
            p.kill()
            p.wait(30)


def test_processes_share_one_shipper_and_one_transaction_a_round(
    url: str, job: str, procs: list[subprocess.Popen[str]]
) -> None:
    procs += [_spawn(url, job, h, 3000, "flush") for h in range(3)]
    results = [_result(p) for p in procs]
    assert all(r["flushed"] for r in results), results
    assert _once(url, job, {h: 3000 for h in range(3)})
    nodes = [r["node"] for r in results if r["node"]]
    assert any(n["events"] for n in nodes)  # a node shipper stored them (the others' went at its close)
    for n in nodes:  # at most one store transaction a round, whoever led
        assert n["transactions"] <= n["rounds"], n
        assert n["lost"] == 0
    assert not [f for f in os.listdir(journal_dirs(url)[0]) if f.endswith(".seg")]


def test_the_leader_killed_mid_run_is_replaced_and_nothing_is_lost_or_doubled(
    url: str, job: str, procs: list[subprocess.Popen[str]], tmp_path: Path
) -> None:
    stop = tmp_path / "stop"
    procs += [_spawn(url, job, h, 500, "run", stop) for h in range(3)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "running"
    leader = wait_for(lambda: _leader_pid(url), 60, "a leader")
    victim = next(p for p in procs if p.pid == leader)
    wait_for(lambda: sum(_steps(url, job).values()) >= 1500, 60, "the first steps stored")
    victim.send_signal(signal.SIGKILL)
    assert victim.wait(30) == -signal.SIGKILL
    new = wait_for(lambda: (pid := _leader_pid(url)) and pid != leader and pid, 60, "another leader")
    assert new in [p.pid for p in procs if p is not victim]
    stop.touch()
    results = {p.pid: _result(p) for p in procs if p is not victim}
    assert all(r["flushed"] for r in results.values()), results
    assert any(r["node"] and r["node"]["elections"] and r["node"]["events"] for r in results.values()), results
    hosts = {p.pid: h for h, p in enumerate(procs)}
    got = _steps(url, job)
    assert max(got.values()) == 1  # nothing stored twice
    dead_host = hosts[victim.pid]
    dead_n = 1 + max(i for h, i in got if h == dead_host)
    counts = {hosts[pid]: r["count"] for pid, r in results.items()} | {dead_host: dead_n}
    # everything the survivors appended, and the dead leader's steps with no gap (its last
    # append may have been torn by the kill: the step it was writing never returned)
    wait_for(lambda: _once(url, job, counts), 60, "every step stored once")


def test_all_writers_killed_leave_their_events_to_recovery(
    url: str, job: str, procs: list[subprocess.Popen[str]]
) -> None:
    procs += [_spawn(url, job, h, 2000, "hold") for h in range(3)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        p.send_signal(signal.SIGKILL)
        assert p.wait(30) == -signal.SIGKILL
    recover_journals(url)
    assert _once(url, job, {h: 2000 for h in range(3)})
    recover_journals(url)  # again: nothing twice
    assert _once(url, job, {h: 2000 for h in range(3)})


def test_the_next_process_ships_what_killed_writers_left(
    url: str, job: str, procs: list[subprocess.Popen[str]]
) -> None:
    procs += [_spawn(url, job, h, 2000, "hold") for h in range(2)]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        p.send_signal(signal.SIGKILL)
        p.wait(30)
    nxt = _spawn(url, job, 2, 10, "flush")
    procs.append(nxt)
    assert _result(nxt)["flushed"]
    wait_for(lambda: _once(url, job, {0: 2000, 1: 2000, 2: 10}), 60, "the dead writers' steps stored once")


def test_in_process_flush_and_close(tmp_path: Path) -> None:
    """Two journals of one process: the flush waits for the node shipper's watermark; the
    sealed segments it shipped are released; close leaves nothing behind."""
    db = str(tmp_path / "one.db")
    js = [Journal(db, "ns", "j", h, segment_size=64 << 10, node_shipper=True) for h in range(2)]
    for i in range(5000):  # several segments each
        for j in js:
            j.append(Kind.STEP_START, 1000.0 + i, i)
    assert all(j.flush(30) for j in js)
    assert all(j.pending() == 0 for j in js)
    stats = _aggregator.node_shipper_stats(store_url(db))
    assert stats is not None and stats["leader"] == 1 and stats["transactions"] <= stats["rounds"]
    assert all(j.close(30) for j in js)
    assert _aggregator.node_shipper_stats(store_url(db)) is None  # the last journal closed it
    assert _once(db, "j", {0: 5000, 1: 5000})
    assert [f for f in os.listdir(journal_dirs(store_url(db))[0]) if f.endswith(".seg")] == []


def test_a_journal_that_ships_itself_is_left_to_itself(tmp_path: Path) -> None:
    """The node shipper reads only live segments handed to it; another journal's live
    segment is its own to ship."""
    db = str(tmp_path / "mixed.db")
    own = Journal(db, "ns", "own", 0, node_shipper=False, interval_s=3600)
    own.append(Kind.STEP_START, 1.0, 0)  # starts its thread, which ships at once
    assert own.flush(30)
    own.append(Kind.STEP_START, 2.0, 1)  # not shipped: its interval is an hour
    ns = _aggregator.NodeShipper(store_url(db), interval_s=0.05)
    ns.start()
    try:
        assert ns.flush(30)
        assert ns.stats()["leader"] == 1 and ns.stats()["events"] == 0
    finally:
        ns.close(10)
    assert own.close(30)
    assert _once(db, "own", {0: 2})


def test_a_store_that_cannot_be_written_yet_gets_everything_later(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store's folder cannot be made (a file stands there): the journal and the node
    shipper's lock go to the per-user folder, the node shipper's rounds fail and are
    counted, and once the store can be written the flush holds with every event once."""
    blocker = tmp_path / "notadir"
    blocker.write_text("a file where the store's directory should be")
    db = str(blocker / "s.db")
    monkeypatch.setenv(_env.NODE_SHIPPER, "1")
    j = Journal.for_stream(db, "ns", "job", 0)
    assert j.node_shipper
    for i in range(200):
        j.append(Kind.STEP_START, float(i), i)
    assert j.flush(0.5) is False
    wait_for(lambda: (_aggregator.node_shipper_stats(j.url) or {}).get("failures", 0) >= 1, 30, "a failed round")
    blocker.unlink()
    assert j.flush(60)
    assert _once(db, "job", {0: 200})
    assert j.close(30)
