"""The client's buffer is bounded where records come in: while its sender is stuck in a connect
that blocks, `put` drops the oldest records (counted), and the buffer never holds more than
`max_buffer`."""

from __future__ import annotations

import socket
import time

import pytest

from mlgoodput.console import ConsoleClient
from mlgoodput.console import _protocol as P


@pytest.mark.slow
def test_a_blocked_connect_does_not_let_the_buffer_grow(sockdir: str) -> None:
    path = f"{sockdir}/silent.sock"
    silent = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)  # accepts, never says a word
    silent.bind(path)
    silent.listen(8)
    silent.settimeout(10)
    c = ConsoleClient(f"unix:{path}", max_buffer=100, timeout_s=60.0)
    try:
        c.start()
        conn, _ = silent.accept()  # the sender connected: it now waits for a challenge that never comes
        try:
            most = 0
            for i in range(350):
                c.put(P.LogRec(time.time(), 20, "bound", f"r{i}", "f.py", i))
                most = max(most, c.pending)
            assert most == 100  # never more than max_buffer, though the sender took none
            assert c.dropped == 250  # the oldest, counted
            assert [r.msg for r in list(c.queue)[:2]] == ["r250", "r251"]  # the newest are kept
        finally:
            conn.close()  # the handshake fails now: the sender's round ends
    finally:
        c.close(2)
        silent.close()
