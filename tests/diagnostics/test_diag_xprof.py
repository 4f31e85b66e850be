"""xprof with real JAX on the CPU: traces appear in the TensorBoard layout, parse, and are events of the run."""

from __future__ import annotations

import gzip
import http.server
import json
import socket
import threading
from pathlib import Path

import fsspec
import jax
import jax.numpy as jnp
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from mlgoodput import _profiler
from mlgoodput._misuse import MlGoodputWarning, reset_warned
from mlgoodput.diagnostics import load_run, machinelearning_run, xprof

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


@pytest.mark.slow
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


def test_profiling_twice_at_once_warns_and_goes_on(tmp_path: Path) -> None:
    machinelearning_run(name="busy")
    with xprof() as outer:
        with pytest.warns(MlGoodputWarning, match="already being captured"):
            xprof().start()  # the running capture is not disturbed
        work()
    assert outer.files
    # one started directly through JAX is caught too
    jax.profiler.start_trace(str(tmp_path / "direct"))
    try:
        reset_warned()
        with pytest.warns(MlGoodputWarning, match="outside mlgoodput"):
            xprof().start()
    finally:
        jax.profiler.stop_trace()
    assert _profiler.active_trace() is None
    with pytest.warns(MlGoodputWarning, match="nothing to stop"):
        assert xprof().stop() == []  # stop without start: a warning, as in the SDK
    p = xprof()
    p.start()
    with pytest.warns(MlGoodputWarning, match="already capturing"):
        p.start()  # start twice: the second is ignored
    work()
    assert p.stop()
    with xprof() as q:  # and the profiler works again afterwards
        work()
    assert q.files


def test_strict_mode_turns_profiler_misuse_into_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    machinelearning_run(name="strictprof")
    monkeypatch.setenv("MLGOODPUT_STRICT", "1")
    with pytest.raises(ValueError, match="nothing to stop"):
        xprof().stop()


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
    p = xprof()
    with pytest.warns(MlGoodputWarning, match="session_id"):
        p.start(session_id="../escape")  # a call from the training loop: warned, profiled anyway
    assert p.session_id is not None and "/" not in p.session_id
    assert p.stop()


def test_unwritable_profile_directory_warns_at_start() -> None:
    import shutil

    run = machinelearning_run(name="gone")
    shutil.rmtree(run.profile_dir)
    Path(run.profile_dir).write_text("now a file")
    with pytest.warns(MlGoodputWarning, match="cannot write profiles"):
        xprof().start()
    assert _profiler.active_trace() is None


def test_bare_decorator_gets_a_hint() -> None:
    with pytest.raises(TypeError, match=r"@xprof\(\)"):

        @xprof  # type: ignore[arg-type]
        def f() -> None: ...


def test_xprof_without_a_run_warns() -> None:
    p = xprof()
    with pytest.warns(MlGoodputWarning, match="machinelearning_run"):
        p.start()
    assert _profiler.active_trace() is None
    with xprof():  # the context manager too
        pass


def test_fsspec_url_profile_directory() -> None:
    import fsspec

    run = machinelearning_run(name="remote", gcs_path="memory://bucket/profiles")
    with xprof(session_id="up"):
        work()
    assert run.flush(30.0)  # the upload runs in the background
    fs = fsspec.filesystem("memory")
    names = sorted(Path(p).name for p in fs.ls(f"/bucket/profiles/{run.name}/plugins/profile/up", detail=False))
    assert names == [f"{HOST}-0.trace.json.gz", f"{HOST}-0.xplane.pb"]
    blob = fs.cat(f"/bucket/profiles/{run.name}/plugins/profile/up/{HOST}-0.trace.json.gz")
    assert json.loads(gzip.decompress(blob))["traceEvents"]


class _BrokenFS(MemoryFileSystem):  # type: ignore[misc]
    """An fsspec memory filesystem whose uploads fail, as a bucket without write access does."""

    protocol = "brokenmem"

    def put_file(self, lpath: str, rpath: str, **kwargs: object) -> None:
        raise PermissionError(f"403 Forbidden: no write access to {rpath}")


def test_failed_upload_keeps_the_trace_locally_and_says_where(tmp_path: Path) -> None:
    fsspec.register_implementation("brokenmem", _BrokenFS, clobber=True)
    run = machinelearning_run(name="upfail", gcs_path="brokenmem://bucket/profiles")
    local = tmp_path / "profiles" / run.name / "plugins" / "profile" / "kept"
    with pytest.warns(MlGoodputWarning, match=r"upload to brokenmem://bucket/profiles/.*failed.*403.*kept in"):
        with xprof(session_id="kept") as p:
            work()
        assert p.files == [
            f"brokenmem://bucket/profiles/{run.name}/plugins/profile/kept/{n}"
            for n in (f"{HOST}-0.trace.json.gz", f"{HOST}-0.xplane.pb")
        ]
        check_trace(local, f"{HOST}-0")  # on local disk as soon as stop() returns
        run.end()  # waits for the background upload, which fails
    check_trace(local, f"{HOST}-0")  # and the trace is still there
    prof = load_run(run.name).profiles[0]
    assert prof["complete"] and prof["files"]


def test_successful_upload_removes_the_local_copy(tmp_path: Path) -> None:
    run = machinelearning_run(name="upok", gcs_path="memory://up/profiles")
    with xprof(session_id="s1"):
        work()
    run.end()
    fs = fsspec.filesystem("memory")
    assert fs.exists(f"/up/profiles/{run.name}/plugins/profile/s1/{HOST}-0.xplane.pb")
    assert not (tmp_path / "profiles" / run.name / "plugins" / "profile" / "s1").exists()


class _Forbidden(http.server.BaseHTTPRequestHandler):
    """A storage endpoint that refuses every request, as a bucket without access does."""

    def _deny(self) -> None:
        body = b'{"error": {"code": 403, "message": "no access to this bucket"}}'
        self.send_response(403)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _deny

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.slow
def test_gs_profile_path_never_loses_the_trace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("gcsfs", reason="gcsfs is in the test extra (mlgoodput[gcs])")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Forbidden)
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    try:
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{server.server_address[1]}")
        run = machinelearning_run(name="gsfail", gcs_path="gs://no-such-bucket//profiles/")
        assert run.gcs_path == "gs://no-such-bucket/profiles"  # the SDK's normalization
        with pytest.warns(MlGoodputWarning, match="upload to gs://no-such-bucket/profiles/.*kept in"):
            with xprof(session_id="gs"):
                work()
            run.end(timeout_s=60.0)
    finally:
        server.shutdown()
        server.server_close()
    check_trace(tmp_path / "profiles" / run.name / "plugins" / "profile" / "gs", f"{HOST}-0")


def test_configs_from_an_fsspec_url() -> None:
    fs = fsspec.filesystem("memory")
    fs.pipe("/cfg/train.yaml", b"epochs: 3\nbatch_size: 32\n")
    run = machinelearning_run(name="urlcfg", configs="memory://cfg/train.yaml")
    assert run.configs == {"epochs": 3, "batch_size": 32}
    run.configs.batch_size = 64  # the SDK's attribute style: stored with the run
    run.end()
    assert load_run(run.name).configs["batch_size"] == 64
