"""torch.profiler traces through mlgoodput's profiling API: programmatic `xprof()` and an
on-demand capture write Chrome traces into the run's session layout and record the session."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

import mlgoodput.torch as mt
from mlgoodput.diagnostics import load_run, machinelearning_run, xprof
from mlgoodput.diagnostics._ondemand import capture

HOST = socket.gethostname()


@pytest.fixture(autouse=True)
def _profiles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("MLGOODPUT_STORE", str(tmp_path / "store.db"))
    monkeypatch.setenv("MLGOODPUT_RUNTIME_DIR", str(tmp_path / "rt"))
    monkeypatch.setenv("MLGOODPUT_PROFILE_DIR", str(tmp_path / "profiles"))
    mt.use_torch_profiler()
    yield
    mt.use_torch_profiler(False)
    from mlgoodput.diagnostics import current_run

    run = current_run()
    if run is not None:
        run.end()


def work() -> None:
    x = torch.randn(32, 32)
    for _ in range(3):
        x = torch.relu(x @ x)


def ops(path: Path) -> set[str]:
    return {e.get("name", "") for e in json.loads(path.read_text())["traceEvents"]}


def test_xprof_captures_a_torch_trace_and_records_the_session() -> None:
    run = machinelearning_run(name="tprof")
    with xprof() as p:
        work()
    sdir = Path(run.profile_dir) / "plugins" / "profile" / str(p.session_id)
    trace = sdir / f"{HOST}-0.trace.json"
    assert trace.is_file(), sorted(x.name for x in sdir.iterdir())
    assert "aten::mm" in ops(trace) and "aten::relu" in ops(trace)
    run.end()
    (prof,) = load_run("tprof").profiles
    assert prof["complete"] and prof["files"] == [f"{HOST}-0.trace.json"]


@pytest.mark.slow
def test_on_demand_capture_of_a_torch_process() -> None:
    run = machinelearning_run(name="tod", on_demand_xprof=True)
    stop = threading.Event()

    def train() -> None:
        while not stop.is_set():
            work()

    t = threading.Thread(target=train)
    t.start()
    try:
        (res,) = capture("tod", 0.5, session="od1")
    finally:
        stop.set()
        t.join()
    assert res["ok"], res
    trace = Path(run.profile_dir) / "plugins" / "profile" / "od1" / f"{HOST}-0.trace.json"
    assert "aten::mm" in ops(trace)  # the training thread's ops, captured from the endpoint's
