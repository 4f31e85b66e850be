"""The wire format and addresses, without a server."""

from __future__ import annotations

import os
import stat

import pytest

from mlgoodput.console import _protocol as P
from mlgoodput.console._address import parse_address, private_dir


def test_frames_round_trip_and_are_schema_checked() -> None:
    batch = P.Batch(7, [P.LogRec(1.5, 20, "x", "hello", "/a.py", 3), P.MarkRec(2.0, "step", 4)])
    data = P.frame(batch)
    assert P.frame_length(data[:4]) == len(data) - 4
    assert P.decode_client(data[4:]) == batch
    with pytest.raises(P.FrameError):
        P.decode_client(b"\xc1garbage")
    # the right shape with a value out of range (a NaN time) is refused, not stored
    bad = P.frame(P.Batch(0, [P.LogRec(1.0, 20, "x", "m", "f", 1)])).replace(
        b"\xcb?\xf0\x00\x00\x00\x00\x00\x00", b"\xcb\x7f\xf8\x00\x00\x00\x00\x00\x00"
    )
    with pytest.raises(P.FrameError):
        P.decode_client(bad[4:])
    # a server message is not a client message
    with pytest.raises(P.FrameError):
        P.decode_client(P.frame(P.Ack(3))[4:])


def test_oversized_frames_are_refused_before_reading() -> None:
    with pytest.raises(P.FrameError, match="maximum"):
        P.frame_length(P.HEADER.pack(P.MAX_FRAME_BYTES + 1))


def test_hmac_proves_the_token_for_one_nonce() -> None:
    m = P.mac("secret", b"n1")
    assert P.mac_ok("secret", b"n1", m)
    assert not P.mac_ok("secret", b"n2", m)
    assert not P.mac_ok("other", b"n1", m)


def test_addresses() -> None:
    a = parse_address(":7000")
    assert (a.host, a.port, a.is_unix) == ("127.0.0.1", 7000, False)
    assert str(parse_address("0.0.0.0:80")) == "0.0.0.0:80"
    assert parse_address("unix:/tmp/x.sock").path == "/tmp/x.sock"
    named = parse_address("myjob")
    assert named.is_unix and os.path.basename(named.path) == "myjob.sock"
    d = private_dir()
    st = os.stat(d)
    assert st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) == 0o700
    for bad in ("host:notaport", "a b", "unix:", ":99999"):
        with pytest.raises(ValueError, match="address"):
            parse_address(bad)
    with pytest.raises(TypeError, match="address"):
        parse_address(7000)
