"""A process whose console token is wrong or missing fails where it connects, with a non-zero
exit code and a clear line, instead of losing every log record silently."""

from __future__ import annotations

import subprocess
import sys

import pytest

from mlgoodput.console import ConsoleServer
from tests.console.conftest import child_env

CHILD = """
import logging, sys
from mlgoodput import console
console.connect(sys.argv[1], token=sys.argv[2] or None)
logging.getLogger("train").warning("this line must reach the console")
console.disconnect(5)
"""


@pytest.mark.slow
@pytest.mark.parametrize(("token", "reason"), [("wrong", "authentication failed"), ("", "needs a token")])
def test_refused_client_exits_non_zero_and_says_why(sockdir: str, token: str, reason: str) -> None:
    srv = ConsoleServer("127.0.0.1:0", job="loud", store=f"{sockdir}/store.db", token="s3cret", display=False)
    address = srv.start()
    try:
        res = subprocess.run(
            [sys.executable, "-c", CHILD, address, token], capture_output=True, text=True, env=child_env(), timeout=60
        )
    finally:
        srv.stop()
    assert res.returncode != 0
    assert "ConsoleError" in res.stderr and reason in res.stderr, res.stderr


@pytest.mark.slow
def test_right_token_still_delivers(sockdir: str) -> None:
    from tests.console.conftest import stored_logs

    srv = ConsoleServer("127.0.0.1:0", job="ok", store=f"{sockdir}/store.db", token="s3cret", display=False)
    address = srv.start()
    try:
        res = subprocess.run(
            [sys.executable, "-c", CHILD, address, "s3cret"],
            capture_output=True,
            text=True,
            env=child_env(),
            timeout=60,
        )
    finally:
        srv.stop()
    assert res.returncode == 0, res.stderr
    assert [r["message"] for r in stored_logs(f"{sockdir}/store.db", "ok")] == ["this line must reach the console"]
