"""The client's buffer is bounded where records come in: while its sender is stuck in a connect
that blocks, `put` drops the oldest records (counted), and the buffer never holds more than
`max_buffer`."""

from __future__ import annotations

import socket
import sys
import threading
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


def _put_from_threads(c: ConsoleClient, threads: int, each: int) -> None:
    """`threads` threads put `each` records apiece, with the interpreter switching threads as
    often as it can, so that putters meet at a full buffer (and the sender, when one runs)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        go = threading.Barrier(threads)

        def putter(t: int) -> None:
            go.wait()
            for i in range(each):
                c.put(P.LogRec(0.0, 20, "race", f"t{t}r{i}", "f.py", i))

        ts = [threading.Thread(target=putter, args=(t,)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
    finally:
        sys.setswitchinterval(old)


def test_putters_racing_at_a_full_buffer_count_every_record_pushed_out(sockdir: str) -> None:
    """Several threads put while the sender takes nothing: every record put is either still
    in the buffer or counted as dropped, none more and none less."""
    c = ConsoleClient(f"unix:{sockdir}/nobody.sock", max_buffer=7)  # never started: takes nothing
    _put_from_threads(c, threads=4, each=5_000)
    assert len(c.queue) == 7
    assert c.pending + c.dropped == 4 * 5_000


def test_putters_and_a_sender_taking_the_queue_agree_on_the_drops(sockdir: str) -> None:
    """The sender takes the queue (and numbers the drops made before) while threads put into
    a full buffer: held + queued + dropped is exactly what was put, and the numbers the
    sender gave (gaps for drops included) plus the queued records are what was put too."""
    c = ConsoleClient(f"unix:{sockdir}/nobody.sock", max_buffer=5)  # no server: rounds fail fast
    stop = threading.Event()

    def sender() -> None:
        while not stop.is_set():
            c._work()  # one round: take the queue, fail to connect

    s = threading.Thread(target=sender)
    s.start()
    try:
        _put_from_threads(c, threads=4, each=5_000)
    finally:
        stop.set()
        s.join()
    c._work()  # the last take
    assert c.pending + c.dropped == 4 * 5_000
    assert c._next == 4 * 5_000
