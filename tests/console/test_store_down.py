"""The console keeps the recorder's promises when its store cannot take records: starting a
session never waits for the store, leaving it keeps the documented deadline, and every
record is stored once the store returns (from the console's journal) or counted as lost."""

from __future__ import annotations

import collections
import logging
import re
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import mlgoodput.console as C
from mlgoodput._recovery import recover_journals, stored_losses
from mlgoodput.console._api import SESSION_EXIT_S
from mlgoodput.console._sink import NAMESPACE, StoreSink
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import open_store
from waiting import wait_for

from .conftest import child_env, stored_logs

N = 1000


def _lines(url: str, job: str) -> collections.Counter[str]:
    return collections.Counter(r["message"] for r in stored_logs(url, job) if r["logger"] == "train")


def _session(url: str, job: str) -> tuple[float, float]:
    """A session of N lines against `url`: (seconds to enter, seconds to leave)."""
    log = logging.getLogger("train")
    t0 = time.monotonic()
    cm = C.session(job=job, store=url, display=False)
    cm.__enter__()
    entry = time.monotonic() - t0
    for i in range(N):
        log.info("line %d", i)
    t1 = time.monotonic()
    cm.__exit__(None, None, None)
    return entry, time.monotonic() - t1


@pytest.fixture
def locked_db(tmp_path: Path) -> Iterator[tuple[str, sqlite3.Connection]]:
    """A SQLite store whose write lock another connection holds until the test lets it go."""
    db = str(tmp_path / "c.db")
    st = open_store(db)
    st.jobs()
    st.close()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    try:
        yield db, blocker
    finally:
        if blocker.in_transaction:
            blocker.execute("ROLLBACK")
        blocker.close()


@pytest.mark.slow
def test_a_locked_sqlite_store_never_holds_up_training(locked_db: tuple[str, sqlite3.Connection]) -> None:
    db, blocker = locked_db
    entry, leave = _session(db, "locked")
    assert entry < 1.0  # it used to wait 30 s for the lock (the trial table gives the figure)
    assert leave <= SESSION_EXIT_S + 0.5
    blocker.execute("ROLLBACK")  # the store returns
    recover_journals(db)  # what any later process that opens the store does first
    got = _lines(db, "locked")
    assert got == collections.Counter(f"line {i}" for i in range(N))  # every line, each once


@pytest.mark.slow
def test_a_stopped_postgresql_store_never_holds_up_training() -> None:
    from pgserver import PgServer, why_not

    why = why_not()
    if why:
        pytest.skip(why)
    pg = PgServer()
    try:
        pg.start()
        open_store(pg.url).close()  # its tables exist: the store was in use before it went down
        pg.stop()
        entry, leave = _session(pg.url, "pgdown")
        assert entry < 1.0
        assert leave <= SESSION_EXIT_S + 0.5
        pg.start()
        recover_journals(pg.url)
        assert _lines(pg.url, "pgdown") == collections.Counter(f"line {i}" for i in range(N))
    finally:
        pg.close()


@pytest.mark.slow
def test_console_serve_stops_at_once_with_its_store_locked(
    locked_db: tuple[str, sqlite3.Connection], tmp_path: Path
) -> None:
    db, blocker = locked_db
    sock = tmp_path / "s.sock"
    srv = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "mlgoodput.console",
            "serve",
            "--address",
            f"unix:{sock}",
            "--job",
            "srv",
            "--store",
            db,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=child_env(),
        text=True,
    )
    try:
        wait_for(sock.exists, timeout_s=60, what="the server socket")
        client = subprocess.run(
            [
                sys.executable,
                "-c",
                "import logging, sys, mlgoodput.console as C; C.connect(sys.argv[1]);"
                " [logging.getLogger('train').info('line %d', i) for i in range(200)];"
                " print('delivered', C.disconnect(timeout_s=30))",
                f"unix:{sock}",
            ],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=120,
        )
        assert "delivered True" in client.stdout, client.stdout + client.stderr  # journaled, so acknowledged
        t0 = time.monotonic()
        srv.send_signal(signal.SIGINT)
        out, _ = srv.communicate(timeout=60)
        assert time.monotonic() - t0 < SESSION_EXIT_S  # it used to take 20 s
        assert "console's journal" in out
    finally:
        if srv.poll() is None:
            srv.kill()
            srv.wait(10)
    blocker.execute("ROLLBACK")
    recover_journals(db)
    assert _lines(db, "srv") == collections.Counter(f"line {i}" for i in range(200))


@pytest.mark.slow
def test_records_a_client_dropped_are_counted_where_users_look(tmp_path: Path) -> None:
    """A client that logs while its server cannot be reached keeps at most `max_buffer`
    records; the ones it dropped are counted in the lost stream, which `console logs` and the
    UI show, beside the ones delivered."""
    db = str(tmp_path / "d.db")
    sock = tmp_path / "d.sock"
    code = (
        "import logging, sys, time, mlgoodput.console as C\n"
        "c = C.connect(sys.argv[1], max_buffer=50)\n"
        "log = logging.getLogger('train')\n"
        "[log.info('line %d', i) for i in range(300)]\n"
        # until the client has dropped the oldest 250: its buffer is full (max_buffer), no sleep
        "deadline = time.monotonic() + 60\n"
        "while c.dropped < 250 and time.monotonic() < deadline: time.sleep(0.01)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        "print('delivered', C.disconnect(timeout_s=60), 'dropped', c.dropped, flush=True)\n"
    )
    p = subprocess.Popen(
        [sys.executable, "-c", code, f"unix:{sock}"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env=child_env(),
        text=True,
    )
    try:
        assert p.stdout is not None and p.stdin is not None
        assert p.stdout.readline().strip() == "ready"
        server = C.ConsoleServer(f"unix:{sock}", job="drop", store=db, display=False, goodput=False)
        server.start()
        try:
            wait_for(lambda: server._numbers_read, what="the store opened")
            p.stdin.write("\n")
            p.stdin.flush()
            out = p.stdout.read()
            m = re.search(r"delivered True dropped (\d+)", out)
            assert m, out
            dropped = int(m.group(1))  # the oldest 250 lines, and maybe the client's own warning
        finally:
            server.stop()
    finally:
        if p.poll() is None:
            p.kill()
        p.wait(30)
    assert dropped >= 250 and server.gaps == dropped and server.lost_records == dropped
    kept = _lines(db, "drop")
    assert sorted(kept) == sorted(f"line {i}" for i in range(300 - len(kept), 300))  # the newest, each once
    assert len(kept) + dropped >= 300
    st = open_store(db)
    try:
        assert stored_losses(st, "drop") == {(NAMESPACE, "drop"): dropped}
    finally:
        st.close()
    res = subprocess.run(
        [sys.executable, "-m", "mlgoodput", "console", "logs", "--job", "drop", "--store", db],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=120,
    )
    assert res.returncode == 0 and "line 299" in res.stdout
    assert f"{dropped} log records of console job drop were lost" in res.stderr


# -- the store writer and its journal, on their own ------------------------------------------
class _Flaky:
    """A store wrapper that fails appends while `down` is set (as a store that is down does)."""

    def __init__(self, url: str) -> None:
        self.inner = open_store(url)
        self.url = self.inner.url
        self.down = True
        self.appends = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.inner, name)

    def append(self, namespace: str, job: str, batch: EventBatch) -> None:
        if self.down:
            raise OSError("the store is down")
        self.appends += 1
        self.inner.append(namespace, job, batch)

    def append_many(self, namespace: str, job: str, batches: list[EventBatch]) -> None:
        for b in batches:
            self.append(namespace, job, b)


def _logs(writer_seq: int, n: int) -> list[Event]:
    return [
        Event(Kind.LOG, 1000.0 + writer_seq + i, 0, None, 20.0, "train", {"msg": f"m{writer_seq + i}"})
        for i in range(n)
    ]


def test_runs_the_store_refuses_are_journaled_acknowledged_and_stored_exactly_once(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    flaky = _Flaky(db)
    acked: list[int] = []
    sink = StoreSink(flaky, "j", spill_after_s=60.0)  # type: ignore[arg-type]
    sink.start()
    try:
        for k in range(5):
            sink.submit_run(7, 10 * k, _logs(10 * k, 10), lambda k=k: acked.append(k))
        wait_for(lambda: len(acked) == 5, what="every run acknowledged from the journal")
        assert sink.spilled_events == 50 and sink.stored_events == 0 and sink.pending_events == 0
        assert len(sink.spool.files) == 5
        sink.submit_run(7, 50, _logs(50, 10), lambda: acked.append(5))  # the same client goes on
        sink.submit_run(7, 20, _logs(20, 10), lambda: acked.append(-1))  # and one run is sent again
        flaky.down = False
        wait_for(lambda: len(acked) == 7, what="the store back")
        wait_for(lambda: not sink.spool.pending, what="the journal shipped")
    finally:
        sink.close(10)
    st = open_store(db)
    try:
        msgs = [a["msg"] for a in (st.read(NAMESPACE, "j").columns.attr(i) for i in range(60)) if a]
        assert sorted(msgs, key=lambda m: int(m[1:])) == [f"m{i}" for i in range(60)]
        assert len(st.read(NAMESPACE, "j").columns) == 60  # the resent run once
    finally:
        st.close()
