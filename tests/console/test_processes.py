"""Real child processes (spawn, fork, forkserver; Pool and concurrent.futures) joining a session."""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import signal
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import mlgoodput.console as C
from mlgoodput.console import Progress
from waiting import wait_for

from .conftest import stored_logs


def _task(i: int) -> int:
    logging.getLogger("child").info("task %d in pid %d", i, os.getpid())
    return os.getpid()


def _advance(bar: Progress, n: int) -> None:
    for _ in range(n):
        bar.advance(1)


def _die_with_a_bar() -> None:
    bar = Progress.new(total=10, msg=("doomed", "bar"))
    bar.advance(3)
    from mlgoodput.console._progress import flush_dirty

    flush_dirty(force=True)  # the bar's newest state, held back or not, is queued
    client = C.current_client()
    assert client is not None and client.drain(30)  # and the server has it
    os.kill(os.getpid(), signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["spawn", "forkserver", pytest.param("fork", marks=pytest.mark.forks)])
def test_children_join_on_their_own(sockdir: str, method: str) -> None:
    store = f"{sockdir}/store.db"
    ctx = mp.get_context(method)
    with C.session(f"unix:{sockdir}/s.sock", job="kids", store=store, display=False) as srv:
        logging.info("parent here")
        p = ctx.Process(target=_task, args=(100,))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        with ctx.Pool(2) as pool:  # leaves through Pool.terminate (SIGTERM)
            pids = set(pool.map(_task, range(6)))
        with ProcessPoolExecutor(2, mp_context=ctx) as ex:
            pids |= set(ex.map(_task, range(6, 12)))
    rows = stored_logs(store, "kids")
    msgs = {r["message"].split(" in pid")[0] for r in rows}
    assert {"parent here", "task 100"} | {f"task {i}" for i in range(12)} <= msgs
    by_pid = {r["pid"]: r["process"] for r in rows if r["logger"] == "child"}
    assert pids <= set(by_pid) and len(set(by_pid.values())) == len(by_pid)  # one short id each
    assert 0 not in by_pid.values()  # the parent is #0
    assert srv.bad_frames == 0
    # every child said goodbye: none is reported lost
    lost = [c for c in srv.clients.values() if c.lost]
    assert not lost, lost


@pytest.mark.slow
def test_distributed_bar_exact_and_dead_bar_marked(sockdir: str) -> None:
    ctx = mp.get_context("spawn")
    with C.session(f"unix:{sockdir}/s.sock", job="bars", store=f"{sockdir}/store.db", display=False) as srv:
        with Progress.new(total=3 * 500 + 7, msg=("shared", "work"), distributed=True) as bar:
            procs = [ctx.Process(target=_advance, args=(bar, 500)) for _ in range(3)]
            for p in procs:
                p.start()
            _advance(bar, 7)
            for p in procs:
                p.join(60)
                assert p.exitcode == 0
        doomed = ctx.Process(target=_die_with_a_bar)
        doomed.start()
        doomed.join(60)
        assert doomed.exitcode == -signal.SIGKILL
        wait_for(lambda: any(b.lost for b in srv.bars.values()), what="the dead process's bar marked")
        shared = next(b for b in srv.bars.values() if b.desc == "shared work")
        wait_for(lambda: shared.completed == 1507, what="the exact final count")
        assert shared.done and not shared.lost
        dead = next(b for b in srv.bars.values() if b.desc == "doomed bar")
        assert dead.lost and not dead.done and dead.completed == 3


def _fail_in_child() -> None:
    raise ValueError("child exploded")


SCRIPT = r"""
import sys, threading
import mlgoodput.console as C
C.connect(sys.argv[1])
t = threading.Thread(target=lambda: 1 / 0, name="worker-thread")
t.start(); t.join()
raise KeyError("top-level failure")
"""


@pytest.mark.slow
def test_uncaught_exceptions_are_forwarded(sockdir: str) -> None:
    import subprocess
    import sys

    from .conftest import child_env

    store = f"{sockdir}/store.db"
    with C.session(f"unix:{sockdir}/s.sock", job="exc", store=store, display=False) as srv:
        p = mp.get_context("spawn").Process(target=_fail_in_child)
        p.start()
        p.join(60)
        assert p.exitcode == 1
        r = subprocess.run(
            [sys.executable, "-c", SCRIPT, srv.address], env=child_env(), capture_output=True, text=True, timeout=60
        )
        assert r.returncode == 1 and "top-level failure" in r.stderr  # still printed locally too
    rows = [x for x in stored_logs(store, "exc") if x["level"] == "CRITICAL"]
    texts = [x["message"] + "\n" + x.get("exc", "") for x in rows]
    assert any("child exploded" in t and "Traceback" in t and "_fail_in_child" in t for t in texts), texts
    assert any("worker-thread" in t and "ZeroDivisionError" in t for t in texts), texts
    assert any("KeyError: 'top-level failure'" in t and "Traceback" in t for t in texts), texts


def _fork_child_logs(srv: C.ConsoleServer) -> None:
    logging.getLogger("forked").info("from a forked child")
    time.sleep(0.2)
    # the server's screen and store writer stay in the server's process
    assert srv.display is not None
    from mlgoodput.console._storeproc import StoreProcess

    assert isinstance(srv.sink, StoreProcess) and srv.sink._reader is not None
    if srv.display.running or srv.sink.running or srv.sink._reader.running:
        os._exit(3)


@pytest.mark.slow
@pytest.mark.forks
def test_forked_children_do_not_draw_or_store_for_the_server(sockdir: str) -> None:
    store, screen_path = f"{sockdir}/store.db", f"{sockdir}/screen.txt"
    # a real file: a forked child writing to it would show
    with (
        open(screen_path, "w") as screen,
        C.session(f"unix:{sockdir}/s.sock", job="fk", store=store, display=screen, store_process=True) as srv,
    ):
        logging.info("before the fork")
        assert wait_for(
            lambda: (
                "before the fork" in Path(screen_path).read_text()
                and any(r["message"] == "before the fork" for r in stored_logs(store, "fk"))
            ),
            30,
        )
        p = mp.get_context("fork").Process(target=_fork_child_logs, args=(srv,))
        p.start()
        p.join(30)
        assert p.exitcode == 0
        assert wait_for(lambda: any(r["message"] == "from a forked child" for r in stored_logs(store, "fk")), 30)
    assert srv.display is not None and not srv.display.running
    with open(screen_path) as f:
        out = f.read()
    assert out.count("before the fork") == 1 and out.count("from a forked child") == 1
    msgs = [r["message"] for r in stored_logs(store, "fk")]
    assert msgs.count("before the fork") == 1 and msgs.count("from a forked child") == 1


def _check_sigterm_after_leaving(out: Any) -> None:
    def check() -> None:  # runs after the console's own finalizer (exitpriority 100): left
        out.value = 1 if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL else 2

    mp.util.Finalize(None, check, exitpriority=50)
    logging.getLogger("child").info("leaving")


@pytest.mark.slow
def test_a_child_that_left_dies_by_sigterm_at_once(sockdir: str) -> None:
    """Pool.terminate() SIGTERMs workers that may be exiting already and joins them with no
    timeout. Once a child has left the console, SIGTERM must have its default again: a Python
    handler no longer runs while a spawned child's interpreter finalizes (seconds under load),
    so it would keep the child alive and terminate() waiting."""
    ctx = mp.get_context("spawn")
    with C.session(f"unix:{sockdir}/s.sock", job="term", store=f"{sockdir}/store.db", display=False):
        out = ctx.Value("i", 0)
        p = ctx.Process(target=_check_sigterm_after_leaving, args=(out,))
        p.start()
        p.join(60)
        assert p.exitcode == 0
        assert out.value == 1, "SIGTERM still had the console's handler after the child left"


def _blocked_in_c(ready: Any, lock: Any) -> None:
    logging.getLogger("child").info("about to block")
    # the main thread cannot run a Python handler, as when it sleeps in C: SIGTERM goes to
    # another thread, the handler stays pending
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    ready.set()
    lock.acquire()  # held by the parent, as Pool's task queue lock is during terminate()


@pytest.mark.slow
def test_sigterm_ends_a_child_whose_main_thread_is_blocked(sockdir: str) -> None:
    """Pool.terminate() hung: a worker's main thread waiting on the task queue's lock (held
    by the terminating parent) never ran the console's SIGTERM handler, so the SIGTERM did
    not end it and terminate() joined it forever. It ends, and what it logged is delivered."""
    ctx = mp.get_context("spawn")
    store = f"{sockdir}/store.db"
    with C.session(f"unix:{sockdir}/s.sock", job="blocked", store=store, display=False):
        lock, ready = ctx.Lock(), ctx.Event()
        lock.acquire()
        p = ctx.Process(target=_blocked_in_c, args=(ready, lock))
        p.start()
        try:
            assert ready.wait(60)
            p.terminate()
            p.join(30)
            assert p.exitcode is not None, "SIGTERM did not end a child whose main thread was blocked"
        finally:
            if p.exitcode is None:
                p.kill()
                p.join(10)
            lock.release()
    assert "about to block" in [r["message"] for r in stored_logs(store, "blocked")]


def _own_sigterm_handler(ready: Any, out: Any) -> None:
    """A child that installs its own SIGTERM handler (a graceful stop that takes a while)."""
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    logging.getLogger("child").info("graceful child")
    ready.set()
    deadline = time.monotonic() + 60
    while not stop and time.monotonic() < deadline:
        time.sleep(0.05)
    if stop:
        time.sleep(2.5)  # the graceful stop: longer than the console's backstop waits
        out.value = 1


@pytest.mark.slow
def test_a_child_with_its_own_sigterm_handler_is_not_ended_by_the_console(sockdir: str) -> None:
    """The console's SIGTERM backstop (a thread on the wakeup fd) ended any child 1 s after a
    SIGTERM whose console handler did not run, also when the program had put its own handler
    in its place: that handler's graceful stop was cut short by os._exit(143)."""
    ctx = mp.get_context("spawn")
    with C.session(f"unix:{sockdir}/s.sock", job="own", store=f"{sockdir}/store.db", display=False):
        ready, out = ctx.Event(), ctx.Value("i", 0)
        p = ctx.Process(target=_own_sigterm_handler, args=(ready, out))
        p.start()
        try:
            assert ready.wait(60)
            p.terminate()
            p.join(30)
            assert p.exitcode == 0, f"the child was ended (exit code {p.exitcode}) during its own SIGTERM handling"
            assert out.value == 1
        finally:
            if p.exitcode is None:
                p.kill()
                p.join(10)
