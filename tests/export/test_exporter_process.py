"""ExporterProcess: a real child process, real files, real signals."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

import pytest

from mlgoodput.export import ExporterProcess, PrometheusExporter, Sample
from mlgoodput.testing import FileExporter
from waiting import wait_for

JOB = {"job_name": "j"}


def test_child_is_out_of_the_terminals_process_group(tmp_path: Path) -> None:
    """A terminal's Ctrl-C goes to the foreground process group; the exporter child must not be
    in it, or a Ctrl-C while it is still starting kills it before it can ignore SIGINT."""
    proc = ExporterProcess([FileExporter(tmp_path / "out.jsonl")], interval_s=60)
    proc.start()
    try:
        assert proc.pid is not None and os.getpgid(proc.pid) != os.getpgid(0)
    finally:
        assert proc.stop(10)


def test_submit_flush_stop_delivers_latest_and_shuts_down(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = ExporterProcess([FileExporter(out)], interval_s=60)
    proc.start()
    assert proc.alive and proc.pid != os.getpid()
    proc.submit([Sample("a", 1.0, JOB), Sample("b", 1.0, JOB)])
    proc.submit([Sample("a", 2.0, JOB)])
    assert proc.flush(10)
    assert FileExporter.latest(out) == {"a": 2.0, "b": 1.0}
    proc.submit([Sample("a", 3.0, JOB)])
    assert proc.stop(10)
    rows = FileExporter.read(out)
    assert FileExporter.latest(out)["a"] == 3.0  # the final flush carried the last value
    assert rows[-1].get("shutdown") is True
    assert all(r["pid"] == rows[0]["pid"] != os.getpid() for r in rows)
    assert not proc.alive
    assert proc.stop(1)  # twice is fine


@pytest.mark.slow
def test_outage_is_retried_and_the_latest_value_arrives(tmp_path: Path) -> None:
    out, flag = tmp_path / "out.jsonl", tmp_path / "down"
    flag.write_text("")
    proc = ExporterProcess([FileExporter(out, fail_flag=str(flag))], interval_s=60, max_backoff_s=0.2)
    proc.start()
    for v in (1.0, 2.0, 3.0):
        proc.submit([Sample("goodput", v, JOB)])
    assert not proc.flush(1.0)  # backend down: not delivered, and no exception
    assert FileExporter.read(out) == []
    flag.unlink()
    assert proc.flush(10)
    rows = [r for r in FileExporter.read(out) if "samples" in r]
    assert len(rows) == 1 and rows[0]["samples"][0]["value"] == 3.0  # only the latest value is sent
    assert proc.stop(10)


@pytest.mark.slow
def test_stop_returns_within_its_timeout_when_a_backend_hangs(tmp_path: Path) -> None:
    out, hang = tmp_path / "out.jsonl", tmp_path / "hang"
    hang.write_text("")
    good = tmp_path / "good.jsonl"
    proc = ExporterProcess([FileExporter(out, hang_flag=str(hang)), FileExporter(good)], interval_s=60)
    proc.start()
    proc.submit([Sample("x", 1.0, JOB)])
    assert wait_for(lambda: FileExporter.latest(good) == {"x": 1.0})  # a hung backend holds up no other
    t0 = time.monotonic()
    ok = proc.stop(timeout_s=1.5)
    elapsed = time.monotonic() - t0
    assert ok is False
    assert not proc.alive
    assert elapsed < 1.5 + 3.0  # bounded by the timeout (plus the kill), not by the backend


@pytest.mark.slow
def test_a_dead_child_is_restarted_with_the_latest_samples(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = ExporterProcess([FileExporter(out)], interval_s=60)
    proc.start()
    proc.submit([Sample("v", 7.0, JOB)])
    assert proc.flush(10)
    first = proc.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    assert wait_for(lambda: proc.restarts == 1 and proc.alive)
    assert proc.pid != first
    assert proc.flush(10)
    pids = {r["pid"] for r in FileExporter.read(out) if "samples" in r}
    assert pids == {first, proc.pid}  # the new child re-sent the latest value
    assert proc.stop(10)


class CountingSource:
    """A picklable source: reports how many times it was asked."""

    def __init__(self) -> None:
        self.n = 0

    def collect(self, now: float, final: bool = False) -> list[Sample]:
        self.n += 1
        return [Sample("collects", float(self.n), JOB)]


@pytest.mark.slow
def test_sources_run_in_the_child_at_the_interval(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = ExporterProcess([FileExporter(out)], interval_s=0.2)
    src = CountingSource()
    proc.start()
    proc.add_source("count", src)
    assert wait_for(lambda: FileExporter.latest(out).get("collects", 0) >= 3)
    assert src.n == 0  # it ran in the child, not here
    assert proc.remove_source("count", final=True, timeout_s=10)
    last = FileExporter.latest(out)["collects"]
    assert proc.flush(10)  # a flush collects every source there is: the removed one is not
    assert FileExporter.latest(out)["collects"] == last  # removed: no more collects
    assert proc.stop(10)


@pytest.mark.slow
def test_child_flushes_and_exits_when_its_parent_dies(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    code = textwrap.dedent(f"""
        import os
        from mlgoodput.export import ExporterProcess, Sample
        from mlgoodput.testing import FileExporter
        p = ExporterProcess([FileExporter({str(out)!r})], interval_s=60)
        p.start()
        print(p.pid, flush=True)
        p.submit([Sample("final", 99.0, {{}})])
        os._exit(0)  # the training process dies without stopping anything
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    child = int(res.stdout.strip())
    assert wait_for(lambda: not _pid_alive(child))
    assert FileExporter.latest(out) == {"final": 99.0}
    assert FileExporter.read(out)[-1].get("shutdown") is True


@pytest.mark.slow
def test_child_exits_when_its_parent_dies_while_a_fork_of_the_parent_holds_the_pipe(tmp_path: Path) -> None:
    """A data-loader worker forked from the training process keeps the pipe to the exporter
    open after the training process dies: the exporter still sees its parent go (a pidfd, or
    its parent pid where there is none), delivers what it has and exits."""
    out = tmp_path / "out.jsonl"
    code = textwrap.dedent(f"""
        import os, time
        from mlgoodput.export import ExporterProcess, Sample
        from mlgoodput.testing import FileExporter
        p = ExporterProcess([FileExporter({str(out)!r})], interval_s=60)
        p.start()
        p.submit([Sample("final", 7.0, {{}})])
        worker = os.fork()
        if worker == 0:  # holds every fd of the parent, the pipe included (not the output)
            os.dup2(os.open(os.devnull, os.O_WRONLY), 1)
            time.sleep(60)
            os._exit(0)
        print(p.pid, worker, flush=True)
        os._exit(0)
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    res = subprocess.run([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env, timeout=60)
    child, worker = map(int, res.stdout.split())
    try:
        assert wait_for(lambda: not _pid_alive(child), timeout_s=20)
        assert FileExporter.latest(out) == {"final": 7.0}
        assert FileExporter.read(out)[-1].get("shutdown") is True
    finally:
        os.kill(worker, signal.SIGKILL)


def _switches(pid: int) -> int:
    """Context switches of all of a process's threads so far (each wake-up counts one)."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except FileNotFoundError:
            pass  # a thread that ended meanwhile
    return total


@pytest.mark.slow
@pytest.mark.skipif(
    not hasattr(os, "pidfd_open") or not os.path.isdir("/proc/self/task"),
    reason="without pidfds (Linux 5.3+) the exporter looks at its parent pid every second",
)
def test_an_idle_exporter_process_sleeps_until_something_comes(tmp_path: Path) -> None:
    """Between rounds nothing wakes the exporter process: no loop looking at its parent, no
    exporter thread checking for samples (each wake-up costs CPU a monitor is measured by)."""
    out = tmp_path / "out.jsonl"
    proc = ExporterProcess([FileExporter(out), FileExporter(tmp_path / "two.jsonl")], interval_s=60)
    proc.start()
    try:
        proc.submit([Sample("a", 1.0, JOB)])
        assert proc.flush(10)
        assert proc.pid is not None
        time.sleep(0.5)  # the flush's reply and the threads' last steps
        before = _switches(proc.pid)
        time.sleep(3.0)  # before: 3 threads waking every second, some 9 switches
        assert _switches(proc.pid) - before <= 2
        proc.submit([Sample("a", 2.0, JOB)])  # and samples still wake it at once
        assert wait_for(lambda: FileExporter.latest(out).get("a") == 2.0)
    finally:
        assert proc.stop(10)


@pytest.mark.slow
@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts a thread's wake-ups in /proc")
def test_the_supervisor_leaves_an_idle_training_process_alone(tmp_path: Path) -> None:
    """The parent's supervisor thread waits on the child's socket: replies and the child's
    exit wake it, nothing else (before: some 8 wake-ups a second, each taking the training
    process's interpreter lock). A reply still arrives at once and a dead child is restarted."""
    import threading

    out = tmp_path / "out.jsonl"
    proc = ExporterProcess([FileExporter(out)], interval_s=60)
    proc.start()
    try:
        (sup,) = [t for t in threading.enumerate() if t.name == proc.name + "-supervisor"]
        path = f"/proc/{os.getpid()}/task/{sup.native_id}/status"

        def switches() -> int:
            with open(path) as f:
                return sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)

        assert proc.flush(10)
        time.sleep(0.3)
        before = switches()
        time.sleep(3.0)
        assert switches() - before <= 2
        proc.submit([Sample("a", 1.0, JOB)])
        assert proc.flush(10) and FileExporter.latest(out) == {"a": 1.0}
        assert proc.pid is not None
        os.kill(proc.pid, signal.SIGKILL)
        assert wait_for(lambda: proc.restarts == 1 and proc.alive, timeout_s=20)
        assert proc.flush(10)
    finally:
        assert proc.stop(10)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_bad_configuration_is_refused_up_front(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="interval_s"):
        ExporterProcess([FileExporter(tmp_path / "o")], interval_s=0)
    with pytest.raises(TypeError, match="Exporter protocol"):
        ExporterProcess([object()])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="cannot be sent"):
        ExporterProcess([_Unpicklable()])


class _Unpicklable:
    def __init__(self) -> None:
        self.lock = __import__("threading").Lock()

    def export(self, samples: object) -> None: ...

    def shutdown(self, timeout_s: float | None = None) -> None: ...


def test_a_port_in_use_is_retried_in_the_background_never_an_error(caplog: pytest.LogCaptureFixture) -> None:
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    exp = PrometheusExporter(port=port)  # busy now: a warning, not an error
    assert any(str(port) in r.getMessage() for r in caplog.records)
    exp.start()
    try:
        assert not exp.serving and "waiting for port" in exp.status
        exp.export([Sample("goodput/goodput_pct", 42.0, JOB)])  # never raises into training
        holder.close()
        assert wait_for(lambda: exp.serving, timeout_s=20)
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        assert "mlgoodput_goodput_ratio" in body and "serving" in exp.status
    finally:
        holder.close()
        exp.shutdown()


@pytest.mark.forks
def test_a_forked_child_of_the_parent_leaves_the_exporter_alone(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = ExporterProcess([FileExporter(out)], interval_s=60)
    proc.start()
    pid = os.fork()
    if pid == 0:  # a data-loader worker forked from the training process
        code = 0
        try:
            time.sleep(0.5)  # long enough for a wrongly running supervisor to act
            proc.submit([Sample("from_fork", 1.0, JOB)])
            code = 0 if (not proc.alive and proc.pid is None) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert proc.alive and proc.restarts == 0
    proc.submit([Sample("from_parent", 2.0, JOB)])
    assert proc.stop(10)
    assert FileExporter.latest(out) == {"from_parent": 2.0}


@pytest.mark.forks
def test_a_fork_after_stop_leaves_files_that_reuse_the_supervisors_numbers_alone(tmp_path: Path) -> None:
    """The stopped supervisor closed its wake pipe; a file opened later may get the same
    numbers, and a fork then (a data-loader worker) must not close it in the child."""
    proc = ExporterProcess([FileExporter(tmp_path / "out.jsonl")], interval_s=60)
    proc.start()
    sup = proc._supervisor
    assert sup is not None
    old = (sup._wake_r, sup._wake_w)
    assert proc.stop(10)
    r, w = os.pipe()
    os.dup2(w, old[1])  # the parent's new pipe, under the number the supervisor had
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.write(old[1], b"ok")
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    try:
        assert os.waitstatus_to_exitcode(status) == 0
        assert os.read(r, 2) == b"ok"
    finally:
        for fd in (r, w, old[1]):
            os.close(fd)


def test_export_interval_batches_submits_but_flush_is_immediate(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = ExporterProcess([FileExporter(out)], interval_s=60, export_interval_s=0.5)
    proc.start()
    for v in range(20):
        proc.submit([Sample("loss", float(v), JOB)])
    assert wait_for(lambda: FileExporter.latest(out).get("loss") == 19.0)
    batches = [r for r in FileExporter.read(out) if "samples" in r]
    assert len(batches) < 20  # batched, not one export per submit
    proc.submit([Sample("loss", 99.0, JOB)])
    assert proc.flush(10)
    assert FileExporter.latest(out)["loss"] == 99.0
    assert proc.stop(10)


def test_settle_gc_keeps_history_out_of_sight_and_frees_frozen_cycles_later() -> None:
    """The exporter process freezes what its sources keep after each round (the collector no
    longer walks a job's history), and every GC_FULL_EVERY rounds collects everything once:
    a garbage cycle frozen meanwhile is freed then."""
    import gc
    import weakref

    from mlgoodput.export import _process_child as child

    class Node:
        other: object = None

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: only the collector frees it
    ref = weakref.ref(a)
    try:
        child.settle_gc(1)
        assert gc.get_freeze_count() > 0
        del a, b
        gc.collect()
        assert ref() is not None  # frozen: out of the collector's sight
        child.settle_gc(child.GC_FULL_EVERY)
        assert ref() is None  # the periodic full collection freed it
        assert gc.get_freeze_count() > 0
    finally:
        gc.unfreeze()


def test_a_round_starts_with_what_the_exporters_built_since_the_last_one_frozen() -> None:
    """What the exporter threads built between two rounds (their first export imports their
    backend: a module's worth of objects) is frozen when the next round starts, so the
    collections that round's allocations trigger do not walk it; the first round freezes
    nothing before it (that happens after it, with what the sources read)."""
    import gc

    from mlgoodput.export import _process_child as child

    seen: list[bool] = []
    between: list[object] = []

    class Source:
        def collect(self, now: float, final: bool = False) -> list[Sample]:
            seen.append(gc.is_tracked(between) and not any(between is o for o in gc.get_objects()))
            return []

    c = child._Child(None, [], 1.0, None, 1.0, "t", os.getpid())  # type: ignore[arg-type]
    c.sources["s"] = Source()  # type: ignore[assignment]
    try:
        gc.unfreeze()
        c.collect()  # the first round: nothing frozen before it
        gc.unfreeze()
        between.append(object())  # built between the rounds (an exporter's import)
        c.collect()
        assert seen == [False, True]  # out of the collector's generations while the round runs
    finally:
        gc.unfreeze()


def test_sources_run_without_collections_and_the_collector_is_back_after() -> None:
    """A round runs its sources with the collector off (their many short-lived objects
    triggered collections that cost ~1.5 ms a round at 256 hosts), and turns it back on after,
    also when a source fails; a collector that was off stays off."""
    import gc

    from mlgoodput.export import _process_child as child

    seen: list[bool] = []

    class Source:
        def __init__(self, fail: bool) -> None:
            self.fail = fail

        def collect(self, now: float, final: bool = False) -> list[Sample]:
            seen.append(gc.isenabled())
            if self.fail:
                raise RuntimeError("broken source")
            return []

    c = child._Child(None, [], 1.0, None, 1.0, "t", os.getpid())  # type: ignore[arg-type]
    c.sources["ok"] = Source(False)  # type: ignore[assignment]
    c.sources["bad"] = Source(True)  # type: ignore[assignment]
    try:
        assert gc.isenabled()
        c.collect()
        assert seen == [False, False] and gc.isenabled()
        gc.disable()
        c.collect()
        assert not gc.isenabled()  # left as it was
    finally:
        gc.enable()
        gc.unfreeze()


def test_series_keys_are_the_same_from_the_cache() -> None:
    from mlgoodput.export._process import series_key

    labels = {"job_name": "j", "rank": "3"}
    first = series_key(Sample("a/b", 1.0, labels))
    assert first == ("a/b", (("job_name", "j"), ("rank", "3")))
    assert series_key(Sample("a/b", 2.0, {"rank": "3", "job_name": "j"})) == first  # any label order
    # labels equal as Python values but named differently are never mixed up
    assert series_key(Sample("a/b", 1.0, {"x": True}))[1] == (("x", "True"),)  # type: ignore[dict-item]
    assert series_key(Sample("a/b", 1.0, {"x": 1}))[1] == (("x", "1"),)  # type: ignore[dict-item]
    assert series_key(Sample("a/b", 1.0, {"x": 1.0}))[1] == (("x", "1.0"),)  # type: ignore[dict-item]
