"""Provenance recorded at a run's start (git, command line, host, user, versions), the
framework in use (never jax by default), no cloud defaults off the cloud, and a run's status."""

from __future__ import annotations

import getpass
import http.server
import os
import shlex
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from diag_helpers import child_env

from mlgoodput.diagnostics import load_run, machinelearning_run
from mlgoodput.diagnostics._load import Run
from mlgoodput.diagnostics._provenance import git_state, where
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="no git here")


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@x", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@x"}
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True, env={**os.environ, **env}
    ).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "repo"
    r.mkdir()
    _git(r, "init", "-q", "-b", "main")
    (r / "train.py").write_text("print('train')\n")
    _git(r, "add", "train.py")
    _git(r, "commit", "-q", "-m", "first")
    return r


@needs_git
def test_git_commit_and_dirty_flag(repo: Path) -> None:
    head = _git(repo, "rev-parse", "HEAD")
    g = git_state(str(repo))
    assert g["commit"] == head and g["dirty"] is False and g["branch"] == "main"
    assert Path(g["root"]).resolve() == repo.resolve()
    (repo / "train.py").write_text("print('changed')\n")
    assert git_state(str(repo))["dirty"] is True
    (repo / "new.txt").write_text("untracked files do not make it dirty\n")
    (repo / "train.py").write_text("print('train')\n")
    assert git_state(str(repo))["dirty"] is False


def test_no_repository_or_no_git_is_absent_not_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))  # no repository above tmp_path counts
    assert git_state(str(plain)) == {}
    monkeypatch.setenv("PATH", str(tmp_path / "nothing"))  # no git at all
    assert git_state(str(plain)) == {}


@needs_git
def test_a_run_records_its_provenance(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = [str(repo / "train.py"), "--lr", "0.1", "--name", "two words"]
    monkeypatch.setattr(sys, "argv", argv)
    run = machinelearning_run(name="prov")
    run.end()
    p = load_run(run.name).provenance
    assert p["command"] == shlex.join(argv) and p["argv"] == argv
    assert p["git"]["commit"] == _git(repo, "rev-parse", "HEAD") and p["git"]["dirty"] is False
    assert p["user"] == getpass.getuser() and p["host"] and p["python"].count(".") == 2
    off = machinelearning_run(name="noprov", provenance=False)
    off.end()
    assert load_run(off.name).provenance == {}


@pytest.mark.slow
@pytest.mark.parametrize(
    ("imports", "want"),
    [("", None), ("import torch", "torch"), ("import jax", "jax")],
    ids=["nothing", "torch", "jax"],
)
def test_the_framework_is_the_one_in_use(imports: str, want: str | None, tmp_path: Path) -> None:
    """A run in a process that imported no framework names none (never jax by default)."""
    if want:
        pytest.importorskip(want)
    code = (
        f"{imports}\nfrom mlgoodput.diagnostics import machinelearning_run, load_run\n"
        "r = machinelearning_run(name='fw'); r.end()\n"
        "run = load_run(r.name)\n"
        "print(repr((run.software['framework'], run.provenance['framework'], sorted(run.provenance['versions']))))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=child_env(tmp_path, MLGOODPUT_STORE=str(tmp_path / "fw.db")),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    software, prov, versions = eval(out.strip().splitlines()[-1])
    assert software == want and prov == want
    if want:
        assert want in versions  # installed: its version is recorded


def test_no_cloud_defaults_off_the_cloud() -> None:
    run = machinelearning_run(name="local")
    run.end()
    assert run.region == "us-central1" and run.environment == "prod"  # the SDK's attributes, unchanged
    info = load_run(run.name).info
    assert info["region"] is None and info["environment"] is None
    given = machinelearning_run(name="given", region="europe-west4", environment="staging")
    given.end()
    info = load_run(given.name).info
    assert info["region"] == "europe-west4" and info["environment"] == "staging"


@pytest.fixture
def metadata_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A stand-in GCE metadata server on loopback that knows the VM's zone."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/computeMetadata/v1/instance/zone" and self.headers.get("Metadata-Flavor") == "Google":
                body = b"projects/123/zones/europe-west4-b"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            else:
                self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    host = f"127.0.0.1:{srv.server_address[1]}"
    monkeypatch.setenv("GCE_METADATA_HOST", host)
    yield host
    srv.shutdown()
    srv.server_close()


def test_on_google_cloud_the_region_is_detected(metadata_server: str) -> None:
    assert where("us-central1", "prod") == ("europe-west4", "prod")
    assert where("asia-east1", "dev") == ("asia-east1", "dev")  # what the user gave wins


def _store_run(store: SQLiteStore, events: list[Event]) -> Run:
    store.append("mlgoodput.run", "r", EventBatch(1, 0, events))
    run = Run("r")
    for part in store.read("mlgoodput.run", "r").parts:
        run.add(part)
    return run


def test_status_from_ends_and_signs_of_life(tmp_path: Path) -> None:
    st = SQLiteStore(tmp_path / "s.db")
    t0 = 1_700_000_000.0
    run = _store_run(
        st,
        [
            Event(Kind.RUN_START, t0, host=0, attrs={"alive_s": 10.0}),
            Event(Kind.RUN_START, t0, host=1, attrs={"alive_s": 10.0}),
            Event(Kind.METRIC, t0 + 5, step=1, value=0.5, name="loss"),
            Event(Kind.RUN_CONFIG, t0 + 6, host=0, attrs={"run_phase": "COMPLETED"}),
        ],
    )
    assert run.status(t0 + 7) == "running"  # process 1 has not ended
    assert run.duration_s(t0 + 7) == 7
    assert run.status(t0 + 6 + 121) == "crashed"  # silent past the dead limit (120 s)
    assert run.duration_s(t0 + 1000) == 6  # to its last event
    st.close()
    st = SQLiteStore(tmp_path / "s2.db")
    old = _store_run(st, [Event(Kind.RUN_START, t0), Event(Kind.METRIC, t0 + 1, step=1, value=1.0, name="loss")])
    assert old.status(t0 + 1000) == "stale"  # an older run: no signs of life to go by
    st.close()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("body", "want"),
    [
        ("pass", "finished"),
        ("raise RuntimeError('boom')", "failed"),
        ("import sys; sys.exit(0)", "finished"),
    ],
    ids=["returns", "raises", "exit-0"],
)
def test_a_run_that_ends_says_how(body: str, want: str, tmp_path: Path) -> None:
    """The end at exit: failed after an uncaught exception (`sys.exit(N)` is not seen there)."""
    code = f"from mlgoodput.diagnostics import machinelearning_run\nmachinelearning_run(name='ends')\n{body}\n"
    db = tmp_path / "e.db"
    subprocess.run([sys.executable, "-c", code], env=child_env(tmp_path, MLGOODPUT_STORE=str(db)), timeout=120)
    run = load_run("ends", store=str(db))
    assert run.status(time.time()) == want


def test_a_with_block_that_raises_is_failed() -> None:
    with pytest.raises(ValueError), machinelearning_run(name="blk") as run:
        raise ValueError("bad batch")
    assert load_run(run.name).status(time.time()) == "failed"


@needs_git
def test_cli_lists_status_and_shows_provenance(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from diag_helpers import run_cli

    monkeypatch.setattr(sys, "argv", [str(repo / "train.py")])
    run = machinelearning_run(name="cli")
    run.end()
    capsys.readouterr()
    assert run_cli(["runs"]) == 0
    listing = capsys.readouterr().out
    assert "STATUS" in listing and "finished" in listing
    assert run_cli(["runs", "show", run.name]) == 0
    shown = capsys.readouterr().out
    assert "status: finished" in shown and f"git: {_git(repo, 'rev-parse', 'HEAD')[:12]}" in shown
    assert f"user: {getpass.getuser()}" in shown


def test_on_google_cloud_is_one_answer_from_the_environment_or_the_dmi_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The one check the provenance, the JAX resource detection and the monitor ask."""
    from mlgoodput import _env
    from mlgoodput._gcp_metadata import on_google_cloud

    for v in (_env.GCE_METADATA_HOST, _env.TPU_WORKER_ID, _env.TPU_NAME):
        monkeypatch.delenv(v, raising=False)
    assert not on_google_cloud(read=lambda path: "Standard PC (Q35)")
    assert on_google_cloud(read=lambda path: "Google" if path.endswith("bios_vendor") else "x")
    assert on_google_cloud(read=lambda path: "Google Compute Engine" if path.endswith("product_name") else "x")
    for v in (_env.GCE_METADATA_HOST, _env.TPU_WORKER_ID, _env.TPU_NAME):
        with monkeypatch.context() as m:
            m.setenv(v, "1")
            assert on_google_cloud(read=lambda path: "x"), v
