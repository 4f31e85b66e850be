"""The live console in a real terminal: tmux runs the server, we read its screen."""

from __future__ import annotations

import shutil

import pytest

from waiting import wait_for

from .tmux_console import console_in_tmux

pytestmark = pytest.mark.skipif(
    shutil.which("tmux") is None, reason="tmux is not installed (scripts/install-system-deps.sh installs it)"
)

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


@pytest.mark.slow
def test_live_console_in_tmux(sockdir: str) -> None:
    with console_in_tmux(sockdir, name="mlgc", job="tm", width=160, module="mlgoodput.console") as t:
        client = t.start_client(CLIENT)
        text = wait_for(
            lambda: (s := t.screen()) and "20/50" in s and "hello from the client" in s and s,
            what="log lines and the bar (its held-back update included) on screen",
        )
        assert "[#0]" in text and "loss=0.125" in text and "WARNING" in text
        bar_line = next(line for line in text.splitlines() if "epoch one" in line)
        assert "20/50" in bar_line and "━" in bar_line
        assert "export MLGOODPUT_CONSOLE=" in text or "connect with" in text
        open(t.flag, "w").close()
        client.wait(30)
        assert client.returncode == 0
        wait_for(lambda: "50" in t.screen() or "done" in t.screen() or "✓" in t.screen(), what="the finished bar")
        t.interrupt_server()
