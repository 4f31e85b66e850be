"""mlgoodput._spawn: the one way a child Python is started (exporter process, console store
process, demos): this interpreter, this mlgoodput, a chosen environment, Ctrl-C ignored on
request."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import mlgoodput
from mlgoodput._spawn import child_env, package_root, python_path, start_python

PKG = str(Path(mlgoodput.__file__).resolve().parent)


def test_child_env_puts_this_package_first_and_keeps_the_rest() -> None:
    env = child_env({"EXTRA": "1"}, base={"PYTHONPATH": "/some/where", "KEEP": "k"})
    parts = env["PYTHONPATH"].split(os.pathsep)
    assert parts[0] == package_root() == str(Path(PKG).parent)
    assert "/some/where" in parts and len(parts) == len(set(parts))
    assert env["KEEP"] == "k" and env["EXTRA"] == "1"
    assert child_env({"PYTHONPATH": "/only"})["PYTHONPATH"] == "/only"  # extra wins
    assert python_path({}).split(os.pathsep)[0] == package_root()


def test_the_child_imports_this_mlgoodput_from_anywhere(tmp_path: Path) -> None:
    base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    p = start_python(
        [
            "-c",
            "import mlgoodput, os, sys; print(os.path.dirname(mlgoodput.__file__)); "
            "print(os.environ['MARK']); print(sys.executable)",
        ],
        env=base,
        extra_env={"MARK": "here"},
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = p.communicate(timeout=120)
    assert p.returncode == 0
    pkg, mark, exe = out.split("\n")[:3]
    assert Path(pkg).resolve() == Path(PKG) and mark == "here" and exe == sys.executable


def _interrupted(ignore: bool) -> tuple[int, str]:
    code = "import sys; print('ready', flush=True); sys.stdin.read(); print('done', flush=True)"
    p = start_python(
        ["-c", code],
        ignore_sigint=ignore,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert p.stdout is not None and p.stdin is not None
    assert p.stdout.readline().strip() == "ready"  # its handlers are in place
    p.send_signal(signal.SIGINT)
    try:
        p.stdin.close()
    except BrokenPipeError:
        pass
    rest = p.stdout.read()
    return p.wait(timeout=60), rest


def test_ignore_sigint_keeps_the_child_running_through_ctrl_c() -> None:
    rc, rest = _interrupted(True)
    assert (rc, rest.strip()) == (0, "done")
    rc, rest = _interrupted(False)
    assert rc != 0 and "done" not in rest  # the control: without it, Ctrl-C stops the child


def test_arguments_are_checked() -> None:
    with pytest.raises(ValueError, match="ignore_sigint"):
        start_python(["-m", "mlgoodput"], ignore_sigint=True)
    with pytest.raises(ValueError, match="args"):
        start_python([])


def test_helper_env_gives_our_helpers_one_blas_thread_and_keeps_a_users_choice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mlgoodput._spawn import helper_env

    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    assert helper_env() == {"OPENBLAS_NUM_THREADS": "1"}
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "4")
    assert helper_env() == {"OPENBLAS_NUM_THREADS": "4"}
