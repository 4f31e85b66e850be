"""The server with real sockets: logging forms, TCP authentication, hostile input."""

from __future__ import annotations

import logging
import socket
import struct
import time

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mlgoodput.console as C
from mlgoodput.console import ConsoleClient, ConsoleServer
from mlgoodput.console import _protocol as P
from waiting import wait_for

from .conftest import stored_logs


def test_logging_forms_are_rendered_on_the_client_and_stored(sockdir: str) -> None:
    import rich.table

    store = f"{sockdir}/store.db"
    with C.session(f"unix:{sockdir}/s.sock", job="forms", store=store, display=False) as srv:
        log = logging.getLogger("forms")
        log.info("loss %.2f at step %d", 0.5, 3)
        log.info("message1", "message2", 3)
        table = rich.table.Table("col1", "col2")
        table.add_row("a", "b")
        log.warning("title of table", table)
        try:
            raise RuntimeError("boom")
        except RuntimeError:
            log.exception("it failed")
        logging.getLogger("forms.quiet").debug("not shown: below the level")
    assert srv.bad_frames == 0 and srv.refused == 0
    rows = [r for r in stored_logs(store, "forms") if r["logger"].startswith("forms")]
    assert [r["message"] for r in rows[:2]] == ["loss 0.50 at step 3", "message1 message2 3"]
    tab = rows[2]
    assert tab["level"] == "WARNING" and tab["message"].startswith("title of table\n")
    assert "col1" in tab["message"] and "\x1b[" in tab["ansi"]  # styled, rendered client-side
    assert rows[3]["message"] == "it failed" and "RuntimeError: boom" in rows[3]["exc"]
    assert len(rows) == 4
    assert all(r["process"] == 0 and r["file"].endswith("test_server.py") and r["line"] > 0 for r in rows)


def _raw_handshake(sock: socket.socket) -> P.Challenge:
    def exact(n: int) -> bytes:
        b = b""
        while len(b) < n:
            c = sock.recv(n - len(b))
            if not c:
                raise EOFError
            b += c
        return b

    msg = P.decode_server(exact(P.frame_length(exact(4))))
    assert isinstance(msg, P.Challenge)
    return msg


def _read_reply(sock: socket.socket) -> object:
    sock.settimeout(5)
    hdr = b""
    while len(hdr) < 4:
        c = sock.recv(4 - len(hdr))
        if not c:
            return None
        hdr += c
    n = P.frame_length(hdr)
    body = b""
    while len(body) < n:
        body += sock.recv(n - len(body))
    return P.decode_server(body)


def test_tcp_needs_the_token(sockdir: str) -> None:
    srv = ConsoleServer("127.0.0.1:0", job="auth", store=f"{sockdir}/store.db", token="s3cret", display=False)
    address = srv.start()
    try:
        host, port = address.rsplit(":", 1)
        # a raw client that does not know the token
        with socket.create_connection((host, int(port)), timeout=5) as s:
            ch = _raw_handshake(s)
            assert ch.auth
            s.sendall(P.frame(P.Hello(P.VERSION, 1, 1, "h", "x", P.mac("wrong", ch.nonce))))
            reply = _read_reply(s)
            assert isinstance(reply, P.Refuse) and "authentication" in reply.reason
            assert s.recv(1) == b""  # and the server hung up
        # our client without a token, and with a wrong one, is refused too
        for token in (None, "wrong"):
            c = ConsoleClient(address, token=token)
            c.start()
            wait_for(lambda c=c: c.refused_reason, what="refusal")
            c.close(1)
        assert srv.refused == 2  # the tokenless client never sends a hello
        assert srv.received == 0
        # the right token gets in
        c = ConsoleClient(address, token="s3cret")
        c.start()
        c.put(P.LogRec(time.time(), 20, "x", "authenticated", "f.py", 1))
        assert c.drain(10)
        c.close(2)
        assert srv.received == 1
    finally:
        srv.stop()
    assert [r["message"] for r in stored_logs(f"{sockdir}/store.db", "auth")] == ["authenticated"]


# -- hostile input --------------------------------------------------------------------------
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**63), 2**64 - 1),
    st.floats(allow_nan=True),
    st.text(max_size=12),
    st.binary(max_size=12),
)
_values = st.one_of(
    _scalars, st.lists(_scalars, max_size=4), st.dictionaries(st.text(max_size=4), _scalars, max_size=3)
)
_tags = st.sampled_from(["hello", "batch", "ping", "bye", "ack", "challenge", 0, 1, 2, 3, 99, ""])


@st.composite
def hostile_frame(draw: st.DrawFn) -> bytes:
    kind = draw(st.integers(0, 5))
    if kind == 0:  # random bytes behind a correct length
        body = draw(st.binary(max_size=64))
        return struct.pack(">I", len(body)) + body
    if kind == 1:  # a length far beyond the maximum, or one that lies
        n = draw(st.integers(P.MAX_FRAME_BYTES + 1, 2**32 - 1))
        return struct.pack(">I", n) + draw(st.binary(max_size=16))
    if kind == 2:  # any msgpack value
        body = msgpack.packb(draw(_values))
        return struct.pack(">I", len(body)) + body
    if kind == 3:  # a tag we know with fields of any type
        body = msgpack.packb([draw(_tags), *draw(st.lists(_values, max_size=6))])
        return struct.pack(">I", len(body)) + body
    if kind == 4:  # a batch whose records have the wrong types or out-of-range values
        rec = [draw(st.sampled_from([0, 1, 2, 3])), *draw(st.lists(_values, max_size=9))]
        body = msgpack.packb(["batch", draw(st.integers(-5, 2**63)), [rec]])
        return struct.pack(">I", len(body)) + body
    # a well-formed batch with hostile text: escape sequences, huge levels and lines
    text = draw(st.text(max_size=40)) + "\x1b]0;pwned\x07\x1b[2J"
    rec = P.LogRec(
        draw(st.floats(0, 1e10)),
        draw(st.integers(0, 2**31 - 1)),
        text,
        text,
        text,
        draw(st.integers(0, 2**31 - 1)),
        text,
    )
    return P.frame(P.Batch(draw(st.integers(0, 2**40)), [rec]))


@pytest.mark.slow
@pytest.mark.parametrize("store_process", [False, True], ids=["in-process-store", "store-helper"])
def test_fuzzed_frames_never_stop_the_server(sockdir: str, store_process: bool) -> None:
    server = ConsoleServer(
        f"unix:{sockdir}/f.sock", job="t", store=f"{sockdir}/store.db", display=False, store_process=store_process
    )
    server.start()
    try:
        _fuzz(server)
    finally:
        server.stop()


def _fuzz(server: ConsoleServer) -> None:
    path = server.address[len("unix:") :]
    sent = {"frames": 0, "client": 2**40}

    def connection(handshake: bool) -> socket.socket:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        s.connect(path)
        _raw_handshake(s)
        if handshake:
            sent["client"] += 1
            s.sendall(P.frame(P.Hello(P.VERSION, sent["client"], 1, "fuzz", "fuzz", b"")))
            assert isinstance(_read_reply(s), P.Welcome)
        return s

    @settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(handshake=st.booleans(), frames=st.lists(hostile_frame(), min_size=20, max_size=20))
    def attack(handshake: bool, frames: list[bytes]) -> None:
        # each frame on a fresh connection (the server hangs up on the first bad one),
        # before or after a proper handshake
        for f in frames:
            with connection(handshake) as s:
                try:
                    s.sendall(f)
                except OSError:
                    pass
            sent["frames"] += 1

    attack()
    assert sent["frames"] >= 10_000
    wait_for(
        lambda: server.bad_frames + server.refused + server.received >= 9_000, what="the server to read the frames"
    )
    # still answering: a real client connects and its record is stored
    c = ConsoleClient(server.address)
    c.start()
    c.put(P.LogRec(time.time(), 20, "after", "still alive", "f.py", 1))
    assert c.drain(20)
    c.close(2)
    server.sink.flush(10)
    assert "still alive" in [r["message"] for r in stored_logs(server.store.url, "t")]


def test_client_buffers_until_a_server_exists_and_bounds_its_buffer(
    sockdir: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="mlgoodput.console")
    address = f"unix:{sockdir}/late.sock"
    late = ConsoleClient(address)
    small = ConsoleClient(address, max_buffer=50)
    for c in (late, small):
        c.start()
        for i in range(120):
            c.put(P.LogRec(time.time(), 20, "late", f"r{i}", "f.py", i))
    wait_for(lambda: small.dropped == 70, what="the bounded buffer to drop the oldest")
    # both have tried the address and found nothing (each says so once): they buffer meanwhile
    wait_for(
        lambda: sum("cannot reach" in r.getMessage() for r in caplog.records) >= 2,
        what="both clients to find no server",
    )
    assert late.connects == small.connects == 0
    srv = ConsoleServer(address, job="late", store=f"{sockdir}/store.db", display=False)
    srv.start()
    try:
        assert late.drain(20) and small.drain(20)
        late.close(2)
        small.close(2)
    finally:
        srv.stop()
    msgs = [r["message"] for r in stored_logs(f"{sockdir}/store.db", "late")]
    assert sorted(msgs) == sorted([f"r{i}" for i in range(120)] + [f"r{i}" for i in range(70, 120)])


@pytest.mark.slow
def test_a_silent_client_is_reported_lost(sockdir: str) -> None:
    srv = ConsoleServer(
        f"unix:{sockdir}/hb.sock", job="hb", store=f"{sockdir}/store.db", display=False, heartbeat_timeout_s=0.5
    )
    srv.start()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(srv.address[5:])
            _raw_handshake(s)
            s.sendall(P.frame(P.Hello(P.VERSION, 77, 1, "h", "silent", b"")))
            assert isinstance(_read_reply(s), P.Welcome)
            wait_for(lambda: srv.clients[77].lost, what="the silent client marked lost")
            assert s.recv(1) == b""  # and dropped
        # a client that pings is kept
        c = ConsoleClient(srv.address, heartbeat_s=0.1)
        c.start()
        wait_for(lambda: c.process is not None, what="connection")
        time.sleep(1.2)  # the time passing is the test: over twice the timeout with pings only
        assert c.connects == 1 and not srv.clients[c.client_id].lost
        c.close(2)
    finally:
        srv.stop()


def test_a_reconnect_supersedes_the_old_connection(sockdir: str) -> None:
    srv = ConsoleServer(f"unix:{sockdir}/rc.sock", job="rc", store=f"{sockdir}/store.db", display=False)
    srv.start()
    try:
        socks = []
        for _ in range(2):  # the same client id twice: the second connection is the live one
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.connect(srv.address[5:])
            _raw_handshake(s)
            s.sendall(P.frame(P.Hello(P.VERSION, 99, 1, "h", "rc", b"")))
            assert isinstance(_read_reply(s), P.Welcome)
            socks.append(s)
        socks[0].shutdown(socket.SHUT_WR)  # the old connection breaks
        socks[0].settimeout(20)
        assert socks[0].recv(1) == b""  # the server is done with it: it closes its end last
        socks[0].close()
        assert not srv.clients[99].lost and srv.clients[99].connected
        socks[1].close()  # now the live one breaks
        wait_for(lambda: srv.clients[99].lost, what="the client marked lost")
    finally:
        srv.stop()
