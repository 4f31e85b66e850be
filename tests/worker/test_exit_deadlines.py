"""A hanging backend never makes a real process's exit take longer than EXIT_DEADLINE_S,
and nothing recorded is lost: a locked SQLite store, an OTLP endpoint that accepts and
never answers, a Prometheus port that is taken."""

from __future__ import annotations

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlgoodput._worker import EXIT_DEADLINE_S
from mlgoodput.store import open_store

#: Process start-up and interpreter teardown on a loaded machine, beyond the deadline.
SLACK_S = 3.0

pytestmark = pytest.mark.slow  # real processes, and a deadline of 5 s to wait out
STEPS = 200


@pytest.fixture
def env() -> dict[str, str]:
    e = dict(os.environ)  # isolated by tests/conftest.py (data directory in tmp, no MLGOODPUT_*)
    e["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    return e


@pytest.fixture
def db(tmp_path: Path) -> str:
    path = tmp_path / "store.db"
    open_store(f"sqlite://{path}").close()  # the store exists before it is locked
    return str(path)


PRELUDE = """
import sys, time
from mlgoodput import goodput
rec = goodput.GoodputRecorder(job_name="job", logger_name="ns", logging_enabled=True, store="sqlite://{db}")
rec.record_job_start_time()
for i in range({steps}):
    rec.record_step_start_time(i)
"""
EPILOGUE = """
print("EXITING", time.monotonic(), flush=True)
"""


def run_child(body: str, env: dict[str, str], tmp_path: Path, **fmt: object) -> tuple[float, str]:
    """Run the script; (seconds from its last line to its end, its stderr)."""
    # The exit time is printed: `pytest -s tests/worker/test_exit_deadlines.py` shows it.
    script = textwrap.dedent(PRELUDE + body + EPILOGUE).format(steps=STEPS, **fmt)
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with open(out, "w") as o, open(err, "w") as e:  # files, not pipes: a grandchild cannot hold them open
        p = subprocess.Popen([sys.executable, "-c", script], env=env, stdout=o, stderr=e, start_new_session=True)
        try:
            rc = p.wait(60)
            ended = time.monotonic()
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # what the child started (an exporter process)
            except OSError:
                pass
    text, errs = out.read_text(), err.read_text()
    assert rc == 0, errs
    marks = [float(line.split()[1]) for line in text.splitlines() if line.startswith("EXITING")]
    assert marks, (text, errs)
    print(f"exit took {ended - marks[0]:.2f} s")
    return ended - marks[0], errs


def steps_in_store(db: str) -> int:
    from mlgoodput._recovery import recover_journals

    st = open_store(f"sqlite://{db}")
    try:
        recover_journals(st)
        cols = st.read("ns", "job").columns
        return sum(1 for k in cols.kinds if k == _step_kind())
    finally:
        st.close()


def _step_kind() -> int:
    from mlgoodput.events import Kind

    return int(Kind.STEP_START)


@pytest.fixture
def silent_server() -> Iterator[int]:
    """A TCP port that accepts connections (the kernel's backlog) and never answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    conns: list[socket.socket] = []
    s.settimeout(0.05)
    try:
        yield s.getsockname()[1]
    finally:
        for c in conns:
            c.close()
        s.close()


def test_exit_with_the_sqlite_store_locked_by_another_process(db: str, env: dict[str, str], tmp_path: Path) -> None:
    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        took, errs = run_child("", env, tmp_path, db=db)
    finally:
        lock.rollback()
        lock.close()
    assert took < EXIT_DEADLINE_S + SLACK_S, errs
    assert "stay in the journal" in errs  # said, not silent
    assert steps_in_store(db) == STEPS  # shipped later, by the next process of the store


def test_exit_with_an_otlp_endpoint_that_never_answers(
    db: str, env: dict[str, str], tmp_path: Path, silent_server: int
) -> None:
    body = """
from mlgoodput.diagnostics import machinelearning_run, metrics
from mlgoodput.export import OTLPExporter
run = machinelearning_run(name="r", store="sqlite://{db}", gcs_path="{tmp}",
                          exporters=[OTLPExporter("http://127.0.0.1:{port}", protocol="http", timeout_s=60)])
for i in range(20):
    metrics.record("loss", 1.0 / (i + 1), step=i)
"""
    took, errs = run_child(body, env, tmp_path, db=db, port=silent_server, tmp=tmp_path / "profiles")
    assert took < EXIT_DEADLINE_S + SLACK_S, errs
    assert steps_in_store(db) == STEPS
    from mlgoodput.diagnostics import load_run

    run = load_run("r", store=f"sqlite://{db}")
    assert len(run.metrics["loss"]) == 20


def test_exit_with_the_prometheus_port_taken(db: str, env: dict[str, str], tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    body = """
from mlgoodput.export import PrometheusExporter
from mlgoodput.export._process import ExporterProcess
proc = ExporterProcess([PrometheusExporter(port={port})], interval_s=0.1)
proc.start()  # the port is taken: the exporter says so and keeps trying in its own process
proc.submit([])
for i in range({steps}, 2 * {steps}):
    rec.record_step_start_time(i)
"""
    try:
        took, errs = run_child(body, env, tmp_path, db=db, port=taken.getsockname()[1])
    finally:
        taken.close()
    assert took < EXIT_DEADLINE_S + SLACK_S, errs
    assert "not available" in errs
    assert steps_in_store(db) == 2 * STEPS


def test_jax_shipper_close_keeps_its_deadline_with_the_store_locked(db: str, env: dict[str, str]) -> None:
    """The known bug: Shipper.close(1.0) took 10 s and more (its journal closed with no
    deadline) while another connection held the SQLite store locked."""
    from mlgoodput._journal import Journal
    from mlgoodput._metric_pipeline import Aggregator, Shipper
    from mlgoodput.events import Kind

    lock = sqlite3.connect(db, isolation_level=None)
    lock.execute("BEGIN EXCLUSIVE")
    try:
        j = Journal.for_stream(f"sqlite://{db}", "mlgoodput.jax", "job", 0)
        s = Shipper(Aggregator(), {}, None, j, lambda: 0, interval_s=0.05)
        s.start()
        for i in range(STEPS):
            j.append(Kind.STEP_START, time.time(), step=i)
        t = time.monotonic()
        ok = s.close(1.0)
        took = time.monotonic() - t
    finally:
        lock.rollback()
        lock.close()
    assert took < 1.0 + 0.5
    assert ok is False  # its journal could not ship: said, not hidden
    assert j.closed and j.abandoned == 1
    st = open_store(f"sqlite://{db}")
    try:
        from mlgoodput._recovery import recover_journals

        recover_journals(st)  # the journal files kept them; the next process ships them
        kinds = st.read("mlgoodput.jax", "job").columns.kinds
        assert sum(1 for k in kinds if k == _step_kind()) == STEPS
    finally:
        st.close()
