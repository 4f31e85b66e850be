"""xprof with real JAX on the CPU: traces appear in the TensorBoard layout, parse, and are events of the run."""

from __future__ import annotations

import gzip
import json
import socket
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

from mlgoodput.diagnostics import (
    ProfilerBusyError,
    ProfilerNotActiveError,
    load_run,
    machinelearning_run,
    xprof,
)
from mlgoodput.jax import _profiler

HOST = socket.gethostname()


def work() -> float:
    x = jnp.arange(64.0).reshape(8, 8)
    return float((x @ x).sum())


def check_trace(session_dir: Path, host: str) -> None:
    """The session holds this host's XSpace and Chrome trace, and both parse."""
    xplane = session_dir / f"{host}.xplane.pb"
    assert xplane.is_file(), sorted(p.name for p in session_dir.iterdir())
    data = jax.profiler.ProfileData.from_file(str(xplane))
    assert any("CPU" in p.name or "host" in p.name for p in data.planes)
    trace = json.loads(gzip.decompress((session_dir / f"{host}.trace.json.gz").read_bytes()))
    assert trace["traceEvents"]


def test_context_manager_writes_a_session_and_records_it() -> None:
    run = machinelearning_run(name="prof")
    with xprof() as p:
        work()
    assert p.session_id and p.session_path
    sdir = Path(run.profile_dir) / "plugins" / "profile" / p.session_id
    assert p.session_path == str(sdir)
    check_trace(sdir, f"{HOST}-0")
    assert not (Path(run.profile_dir) / ".staging").exists() or not any((Path(run.profile_dir) / ".staging").iterdir())
    run.end()
    (prof,) = load_run(run.name).profiles
    assert prof["session"] == p.session_id and prof["hosts"] == [0] and prof["complete"]
    assert prof["trigger"] == "programmatic" and prof["path"] == str(sdir)
    assert set(prof["files"]) == {f"{HOST}-0.xplane.pb", f"{HOST}-0.trace.json.gz"}
    assert prof["duration_s"] > 0


def test_start_stop_with_session_id_and_decorator() -> None:
    run = machinelearning_run(name="prof2")
    prof = xprof(run)
    prof.start(session_id="manual")
    work()
    files = prof.stop()
    assert {Path(f).name for f in files} == {f"{HOST}-0.xplane.pb", f"{HOST}-0.trace.json.gz"}

    @xprof(session_id="decorated")
    def step() -> float:
        return work()

    assert step() == work()
    check_trace(Path(run.profile_dir) / "plugins" / "profile" / "decorated", f"{HOST}-0")
    run.end()
    assert [p["session"] for p in load_run(run.name).profiles] == ["manual", "decorated"]


def test_profiling_twice_at_once_is_a_clear_error(tmp_path: Path) -> None:
    machinelearning_run(name="busy")
    with xprof(), pytest.raises(ProfilerBusyError, match="already being captured"):
        xprof().start()
    # one started directly through JAX is caught too
    jax.profiler.start_trace(str(tmp_path / "direct"))
    try:
        with pytest.raises(ProfilerBusyError, match="outside mlgoodput"):
            xprof().start()
    finally:
        jax.profiler.stop_trace()
    assert _profiler.active_trace() is None
    with pytest.raises(ProfilerNotActiveError):
        xprof().stop()
    with xprof() as p:  # and the profiler works again afterwards
        work()
    assert p.files


def test_process_index_list_limits_who_profiles(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLGOODPUT_PROCESS_INDEX", "1")
    run = machinelearning_run(name="limited")
    p = xprof(process_index_list=[0, 2])
    p.start()
    assert _profiler.active_trace() is None
    assert p.stop() == []
    with xprof(process_index_list=[1]) as q:
        work()
    assert q.files
    run.end()
    assert [pr["hosts"] for pr in load_run(run.name).profiles] == [[1]]


def test_bad_xprof_arguments() -> None:
    machinelearning_run(name="args")
    with pytest.raises(ValueError, match="process_index_list"):
        xprof(process_index_list=[-1])
    with pytest.raises(TypeError, match="process_index_list"):
        xprof(process_index_list=0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="session_id"):
        xprof().start(session_id="../escape")


def test_unwritable_profile_directory_is_a_clear_error_at_start() -> None:
    import shutil

    run = machinelearning_run(name="gone")
    shutil.rmtree(run.profile_dir)
    Path(run.profile_dir).write_text("now a file")
    with pytest.raises(ValueError, match="cannot write profiles"):
        xprof().start()
    assert _profiler.active_trace() is None


def test_bare_decorator_gets_a_hint() -> None:
    with pytest.raises(TypeError, match=r"@xprof\(\)"):
        @xprof  # type: ignore[arg-type]
        def f() -> None: ...


def test_xprof_needs_a_run() -> None:
    with pytest.raises(RuntimeError, match="machinelearning_run"):
        xprof().start()


def test_fsspec_url_profile_directory() -> None:
    import fsspec

    run = machinelearning_run(name="remote", gcs_path="memory://bucket/profiles")
    with xprof(session_id="up"):
        work()
    fs = fsspec.filesystem("memory")
    names = sorted(Path(p).name for p in fs.ls(f"/bucket/profiles/{run.name}/plugins/profile/up", detail=False))
    assert names == [f"{HOST}-0.trace.json.gz", f"{HOST}-0.xplane.pb"]
    blob = fs.cat(f"/bucket/profiles/{run.name}/plugins/profile/up/{HOST}-0.trace.json.gz")
    assert json.loads(gzip.decompress(blob))["traceEvents"]
