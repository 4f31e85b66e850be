"""Real processes: one multi-host session from several processes, and on-demand capture from outside."""

from __future__ import annotations

import json
import socket
import subprocess
from pathlib import Path

import pytest
from diag_helpers import CHILD, child_env, run_cli

from mlgoodput.diagnostics import load_run, machinelearning_run, xprof
from mlgoodput.diagnostics._ondemand import endpoints, request

HOST = socket.gethostname()
pytestmark = pytest.mark.slow


def test_processes_with_one_session_id_form_one_session(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen(
            [*CHILD, "session", "mh", "shared-session"],
            env=child_env(tmp_path, MLGOODPUT_WORKLOAD_ID="launch-1", MLGOODPUT_PROCESS_INDEX=str(i)),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(2)
    ]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    names = {o[0].strip() for o in outs}
    assert len(names) == 1  # one run, from the shared workload id
    run = load_run(names.pop())
    (sess,) = run.profiles
    assert sess["session"] == "shared-session" and sess["hosts"] == [0, 1] and sess["complete"]
    sdir = Path(sess["path"])
    assert sorted(p.name for p in sdir.iterdir()) == sorted(
        f"{HOST}-{i}{suf}" for i in (0, 1) for suf in (".trace.json.gz", ".xplane.pb")
    )
    assert sorted(s["host"] for s in run.starts) == [0, 1]
    assert [p[1] for p in sorted(run.metrics["host_marker"], key=lambda p: p[1])] == [0.0, 1.0]


def _start_server(tmp_path: Path, stop: Path) -> tuple[subprocess.Popen[str], str]:
    p = subprocess.Popen(
        [*CHILD, "serve", "od", str(stop)],
        env=child_env(tmp_path, MLGOODPUT_WORKLOAD_ID="od-launch"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    line = p.stdout.readline().split()
    assert line, p.stderr.read() if p.stderr else ""
    return p, line[0]


def test_on_demand_capture_from_another_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stop = tmp_path / "stop"
    child, name = _start_server(tmp_path, stop)
    try:
        (ep,) = endpoints("od")  # found by the name given to machinelearning_run
        assert ep["address"].startswith("127.0.0.1:")
        ep_file = Path(tmp_path / "rt" / "ondemand" / name).glob("*.json")
        assert all((f.stat().st_mode & 0o777) == 0o600 for f in ep_file)
        # without the token: refused, and nothing is traced
        bad = request(ep["address"], "wrong", {"op": "capture", "duration_s": 0.2}, timeout_s=10)
        assert not bad["ok"] and "unauthorized" in bad["error"]
        capsys.readouterr()
        rc = run_cli(["profile", "--run", name, "--duration", "500ms", "--session", "od1"])
        out = capsys.readouterr().out
        assert rc == 0, out
        assert "session od1" in out
    finally:
        stop.write_text("")
        child.communicate(timeout=60)
    assert child.returncode == 0
    run = load_run(name)
    (sess,) = run.profiles
    assert sess["session"] == "od1" and sess["trigger"] == "on_demand" and sess["complete"]
    assert 0.4 < sess["duration_s"] < 30
    sdir = Path(sess["path"])
    assert (sdir / f"{HOST}-0.xplane.pb").stat().st_size > 0
    trace = (sdir / f"{HOST}-0.trace.json.gz").read_bytes()
    import gzip

    assert json.loads(gzip.decompress(trace))["traceEvents"]
    assert not list((tmp_path / "rt" / "ondemand" / name).glob("*.json"))  # endpoint removed at exit
    with pytest.raises(LookupError, match="no"):
        endpoints(name)


def test_on_demand_while_programmatic_profiling_says_busy(tmp_path: Path) -> None:
    sock = str(tmp_path / "od.sock")
    run = machinelearning_run(name="odbusy", on_demand_xprof=True, on_demand_address=f"unix:{sock}")
    assert run.on_demand_address == f"unix:{sock}"
    (ep,) = endpoints(run.name)
    with xprof():
        reply = request(ep["address"], ep["token"], {"op": "capture", "duration_s": 0.2}, timeout_s=10)
    assert not reply["ok"] and reply["busy"] and "already being captured" in reply["error"]
    ok = request(ep["address"], ep["token"], {"op": "capture", "duration_s": 0.2, "session": "after"}, timeout_s=30)
    assert ok["ok"] and ok["session"] == "after" and len(ok["files"]) == 2
    bad = request(ep["address"], ep["token"], {"op": "capture", "duration_s": -1}, timeout_s=10)
    assert not bad["ok"] and "duration_s" in bad["error"]
    run.end()
    assert not Path(sock).exists()
    assert [p["trigger"] for p in load_run(run.name).profiles] == ["programmatic", "on_demand"]


def test_profile_command_without_a_server_fails_clearly(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(["profile", "--run", "nothing-here", "--duration", "1s"]) == 2
    assert "on_demand_xprof=True" in capsys.readouterr().err
