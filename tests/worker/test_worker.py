"""BackgroundWorker exercised directly: the queue, the deadlines, fork, errors, statuses."""

from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import pytest

from mlgoodput._worker import (
    EXIT_DEADLINE_S,
    BackgroundWorker,
    BoundedQueue,
    WorkerStatus,
    worker_statuses,
)


class Collector(BackgroundWorker):
    """A queue worker whose backend can be told to hang or fail."""

    def __init__(self, name: str = "test-collector", **kw: Any) -> None:
        super().__init__(name, interval_s=0.05, max_backoff_s=0.05, **kw)
        self.got: list[Any] = []
        self.hang = threading.Event()  # set: the backend blocks until `release` is set
        self.release = threading.Event()
        self.entered = threading.Event()
        self.fail = 0  # rounds still to fail
        self.closed_with: float | None = None

    def _handle(self, items: list[Any]) -> None:
        self.entered.set()
        if self.hang.is_set():
            self.release.wait(60)
        if self.fail:
            self.fail -= 1
            raise OSError("backend down")
        self.got.extend(items)

    def _on_close(self, timeout_s: float) -> None:
        self.closed_with = timeout_s


class SmallQueue(Collector):
    queue_size = 3


class SmallDropOldest(Collector):
    queue_size = 3
    queue_policy = "drop-oldest"


def test_submit_flush_close_deliver_everything() -> None:
    w = Collector()
    for i in range(100):
        assert w.submit(i)
    assert w.flush(10.0)
    assert w.got == list(range(100))
    w.submit(100)
    assert w.close(10.0)
    assert w.got == list(range(101))
    assert w.closed and not w.running
    assert w.close() is True  # twice is fine


def test_close_without_start_runs_the_last_round_on_the_worker_thread() -> None:
    seen: list[str] = []

    class Once(BackgroundWorker):
        def _work(self) -> bool:
            seen.append(threading.current_thread().name)
            return True

    w = Once("test-once")
    assert w.close(5.0)
    assert seen and set(seen) == {"test-once"}  # never the caller's thread: a hang there would block the caller


def test_bounded_queue_drop_new_counts_and_warns_once(caplog: pytest.LogCaptureFixture) -> None:
    q: BoundedQueue[int] = BoundedQueue(3, "drop-new", "q")
    with caplog.at_level(logging.WARNING, logger="mlgoodput"):
        results = [q.put(i) for i in range(6)]
    assert results == [True, True, True, False, False, False]
    assert q.take() == [0, 1, 2]
    assert q.dropped == 3
    assert sum("q is full" in r.getMessage() for r in caplog.records) == 1


def test_bounded_queue_drop_oldest_keeps_the_latest() -> None:
    q: BoundedQueue[int] = BoundedQueue(3, "drop-oldest", "q")
    for i in range(6):
        q.put(i)
    assert q.take() == [3, 4, 5]
    assert q.dropped == 3


def test_bounded_queue_fails_fast_on_bad_arguments() -> None:
    with pytest.raises(ValueError, match="maxsize"):
        BoundedQueue(0)
    with pytest.raises(ValueError, match="policy"):
        BoundedQueue(3, "drop-some")  # type: ignore[arg-type]


def test_a_full_queue_never_blocks_the_caller() -> None:
    w = SmallQueue()
    w.hang.set()
    w.submit("first")  # taken by the round that hangs
    assert w.entered.wait(10)
    t = time.monotonic()
    accepted = [w.submit(i) for i in range(10)]
    assert time.monotonic() - t < 1.0
    assert accepted == [True] * 3 + [False] * 7
    assert w.dropped == 7
    assert w.worker_status().dropped == 7
    w.release.set()
    assert w.flush(10)
    assert w.got == ["first", 0, 1, 2]
    w.close(5)


def test_drop_oldest_worker_keeps_the_newest_items() -> None:
    w = SmallDropOldest()
    w.hang.set()
    w.submit("first")
    assert w.entered.wait(10)
    for i in range(10):
        w.submit(i)
    w.release.set()
    assert w.flush(10)
    assert w.got == ["first", 7, 8, 9]
    assert w.dropped == 7
    w.close(5)


def test_submit_after_close_is_dropped_and_counted() -> None:
    w = Collector()
    w.close(5)
    assert w.submit(1) is False
    assert w.dropped == 1
    assert w.got == []


def test_flush_and_close_return_by_their_deadline_when_the_backend_hangs() -> None:
    w = Collector()
    w.hang.set()
    w.submit("stuck")
    assert w.entered.wait(10)
    t = time.monotonic()
    assert w.flush(0.3) is False
    assert 0.25 <= time.monotonic() - t < 2.0
    t = time.monotonic()
    assert w.close(0.5) is False
    took = time.monotonic() - t
    assert took < 2.0
    assert w.abandoned == 1
    assert w.closed
    assert w.closed_with is not None and w.closed_with <= 0.5
    st = w.worker_status()
    assert st.abandoned == 1 and st.closed
    w.release.set()  # the abandoned round ends on its own thread; nothing else runs
    assert w._queue.take() == []


def test_a_failing_round_keeps_its_items_for_the_next_one() -> None:
    w = Collector()
    w.fail = 2
    for i in range(5):
        w.submit(i)
    assert w.flush(10)
    assert w.got == [0, 1, 2, 3, 4]
    assert w.failures == 2
    w.close(5)


def test_errors_are_counted_kept_and_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    w = Collector("test-errors")
    w.fail = 5
    with caplog.at_level(logging.WARNING, logger="mlgoodput"):
        w.submit(1)
        assert w.flush(10)
    assert w.failures == 5
    assert isinstance(w.last_error, OSError)
    assert sum("backend down" in r.getMessage() for r in caplog.records) == 1
    st = w.worker_status()
    assert st.failures == 5 and st.last_error == "OSError: backend down"
    w.close(5)


def test_final_flush_gives_up_after_one_failing_round() -> None:
    w = Collector()
    w.fail = 1000
    w.submit(1)
    t = time.monotonic()
    assert w.final_flush(10) is False
    assert time.monotonic() - t < 5
    w.fail = 0
    assert w.close(5)
    assert w.got == [1]


def test_worker_statuses_lists_live_workers() -> None:
    w = Collector("test-status-a")
    w.submit(1)
    assert w.flush(5)
    names = {s.name: s for s in worker_statuses()}
    st = names["test-status-a"]
    assert isinstance(st, WorkerStatus)
    assert st.kind == "Collector" and st.submitted == 1 and st.pending == 0 and st.running
    assert "test-status-a (Collector): running" in st.line()
    with pytest.raises(AttributeError):
        st.name = "x"  # type: ignore[misc]
    w.close(5)
    assert not w.worker_status().running


def test_exit_deadline_is_one_shared_constant() -> None:
    import mlgoodput._journal as journal

    assert EXIT_DEADLINE_S == 5.0
    assert not hasattr(journal, "EXIT_TIMEOUT_S")
    # the first at-exit closer fixes the deadline; the next ones get what is left of it
    # (in a child: fixing it here would leave this process's own closers no time)
    import subprocess
    import sys

    code = (
        "import time; from mlgoodput._worker import exit_time_left as left\n"
        "a = left(); time.sleep(0.3); b = left(); print(a, b)"
    )
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)),
    )
    a, b = map(float, r.stdout.split())
    assert 4.9 <= a <= 5.0 and b <= a - 0.3


def _in_child(fn: Any) -> int:
    """Run `fn` in a forked child; its exit code (0: all its asserts held)."""
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            fn()
            code = 0
        except BaseException:
            import traceback

            traceback.print_exc()
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


class StopsInChild(Collector):
    after_fork = "stop"

    def _on_fork_in_child(self) -> None:
        self.got = ["reset in child"]


class RestartsInChild(Collector):
    def _on_fork_in_child(self) -> None:
        self.got = []


@pytest.mark.forks
def test_fork_restart_gives_the_child_a_worker_of_its_own() -> None:
    w = RestartsInChild()
    w.submit("parent")
    assert w.flush(5)

    def child() -> None:
        assert w.running and not w.closed  # restarted in the child
        assert w.got == []
        w.submit("child")
        assert w.flush(5)
        assert w.got == ["child"]
        assert w.close(5)

    assert _in_child(child) == 0
    assert w.got == ["parent"]
    assert w.close(5)


@pytest.mark.forks
def test_fork_stop_leaves_the_child_closed() -> None:
    w = StopsInChild()
    w.submit("parent")
    assert w.flush(5)

    def child() -> None:
        assert w.closed and not w.running
        assert w.got == ["reset in child"]
        assert w.submit("x") is False
        assert w.close(1) is True

    assert _in_child(child) == 0
    assert w.running and w.got == ["parent"]
    assert w.close(5)


@pytest.mark.forks
def test_fork_while_a_round_hangs_does_not_inherit_the_hang() -> None:
    w = RestartsInChild()
    w.hang.set()
    w.submit("stuck")
    assert w.entered.wait(10)

    def child() -> None:
        w.hang.clear()
        assert len(w._queue) == 0  # the parent's items stay the parent's
        w.submit("child")
        assert w.flush(5)
        assert w.got == ["child"]

    assert _in_child(child) == 0
    w.release.set()
    assert w.close(5)


@pytest.mark.slow
def test_debug_prints_one_line_per_worker_at_exit(tmp_path: Any) -> None:
    import subprocess
    import sys

    env = dict(
        os.environ,
        XDG_DATA_HOME=str(tmp_path / "xdg"),
        MLGOODPUT_DEBUG="1",
        PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
    )
    env.pop("MLGOODPUT_JOURNAL_DIR", None)
    script = (
        "from mlgoodput import goodput\n"
        f"rec = goodput.GoodputRecorder(job_name='j', logger_name='ns', logging_enabled=True,"
        f" store='sqlite://{tmp_path}/d.db')\n"
        "rec.record_job_start_time()\n"
    )
    r = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("mlgoodput: worker ")]
    assert len(lines) == 1 and "(Journal): closed pending=0" in lines[0], r.stderr
    env.pop("MLGOODPUT_DEBUG")
    r = subprocess.run(
        [sys.executable, "-m", "mlgoodput", "--debug", "jobs", "--store", f"{tmp_path}/d.db"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "mlgoodput: no background workers in this process" in r.stderr


def test_two_closers_at_once_release_resources_once() -> None:
    calls: list[float] = []

    class Counted(Collector):
        def _on_close(self, timeout_s: float) -> None:
            calls.append(timeout_s)

    w = Counted()
    w.submit(1)
    results: list[bool] = []
    ts = [threading.Thread(target=lambda: results.append(w.close(5))) for _ in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(10)
    assert results == [True] * 4
    assert len(calls) == 1
    assert w.got == [1]


@pytest.mark.forks
def test_at_fork_in_child_runs_callbacks_and_holds_methods_weakly() -> None:
    import gc

    from mlgoodput import _worker

    class Holder:
        def __init__(self) -> None:
            self.reset = False

        def on_fork(self) -> None:
            self.reset = True

    kept, gone = Holder(), Holder()
    _worker.at_fork_in_child(kept.on_fork)
    _worker.at_fork_in_child(gone.on_fork)
    gone_ref = _worker._fork_resets[-1]
    del gone
    gc.collect()
    assert gone_ref() is None

    def child() -> None:
        assert kept.reset
        # the dead object's entry is dropped (other entries may come and go with other tests' objects)
        assert all(r is not gone_ref for r in _worker._fork_resets)
        assert all(r() is not None for r in _worker._fork_resets)

    assert _in_child(child) == 0
    assert not kept.reset  # only in the child


class OneAtATime(BackgroundWorker):
    """A queue worker that takes one item a round, with a long back-off."""

    batch_size = 1

    def __init__(self) -> None:
        super().__init__("test-one-at-a-time", interval_s=30.0, max_backoff_s=30.0)
        self.got: list[Any] = []

    def _handle(self, items: list[Any]) -> None:
        self.got.extend(items)


@pytest.mark.slow
def test_a_backlog_of_many_batches_is_worked_off_at_once_not_a_back_off_apart() -> None:
    """A round that leaves items (more than one batch) is not a failure: the next round starts
    at once. Before, each such round waited out a back-off (0.1 s, doubling up to max_backoff_s)."""
    w = OneAtATime()
    w.start()
    try:
        for i in range(6):
            assert w.submit(i)
        deadline = time.monotonic() + 1.5  # the old back-offs alone took 0.1 + 0.2 + 0.4 + 0.8 + 1.6 s
        while len(w.got) < 6 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert w.got == list(range(6))
    finally:
        w.close(5)
