"""The live console in a real terminal: tmux runs the server, we read its screen."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from .conftest import SRC, child_env, wait_for

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed (scripts/install-system-deps.sh installs it)")

CLIENT = r"""
import logging, os, sys, time
import mlgoodput.console as C
from mlgoodput.console import Progress
C.connect(sys.argv[1])
logging.getLogger("train").info("hello from the client, loss=%.3f", 0.125)
logging.getLogger("train").warning("a warning with %s", "style")
bar = Progress.new(total=50, msg=("epoch", "one"))
bar.advance(20)
while not os.path.exists(sys.argv[2]):
    time.sleep(0.05)
bar.close()
C.disconnect(timeout_s=10)
"""


def _tmux(sock: str, *args: str) -> str:
    return subprocess.run(["tmux", "-L", sock, *args], check=True, capture_output=True, text=True).stdout


@pytest.mark.slow
def test_live_console_in_tmux(sockdir: str) -> None:
    sock = f"mlgc-{os.getpid()}"
    address, store, flag = f"unix:{sockdir}/t.sock", f"{sockdir}/store.db", f"{sockdir}/go"
    _tmux(sock, "new-session", "-d", "-s", "console", "-x", "160", "-y", "40")
    client: subprocess.Popen[bytes] | None = None
    try:
        cmd = (f"PYTHONPATH={os.path.abspath(SRC)} {sys.executable} -m mlgoodput.console serve"
               f" --address {address} --job tm --store {store}")
        _tmux(sock, "send-keys", "-t", "console", cmd, "Enter")
        wait_for(lambda: os.path.exists(address[5:]), what="the server socket")
        client = subprocess.Popen([sys.executable, "-c", CLIENT, address, flag], env=child_env())

        def screen() -> str:
            return _tmux(sock, "capture-pane", "-p", "-t", "console")

        text = wait_for(lambda: (s := screen()) and "20/50" in s and "hello from the client" in s and s,
                        what="log lines and the bar (its held-back update included) on screen")
        assert "[#0]" in text and "loss=0.125" in text and "WARNING" in text
        bar_line = next(line for line in text.splitlines() if "epoch one" in line)
        assert "20/50" in bar_line and "━" in bar_line
        assert "export MLGOODPUT_CONSOLE=" in text or "connect with" in text
        open(flag, "w").close()
        client.wait(30)
        assert client.returncode == 0
        wait_for(lambda: "50" in screen() or "done" in screen() or "✓" in screen(), what="the finished bar")
        _tmux(sock, "send-keys", "-t", "console", "C-c", "")
        wait_for(lambda: not os.path.exists(address[5:]), what="the server to stop on Ctrl-C")
    finally:
        if client is not None and client.poll() is None:
            client.kill()  # a failed check must not leave the client waiting forever
            client.wait(10)
        subprocess.run(["tmux", "-L", sock, "kill-server"], capture_output=True)
