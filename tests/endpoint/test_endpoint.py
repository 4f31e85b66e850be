"""mlgoodput._endpoint: one address parser for every server and client, token helpers,
and the exposure rule (loopback by default; beyond it a token)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from mlgoodput._endpoint import (
    HostPort,
    check_exposure,
    check_host,
    check_port,
    is_loopback,
    new_token,
    parse_address,
    token_matches,
)
from mlgoodput.console._address import parse_address as console_address
from mlgoodput.diagnostics._ondemand import parse_address as ondemand_address

ACCEPTED = [
    ("example.org:8080", ("example.org", 8080)),
    ("10.1.2.3:0", ("10.1.2.3", 0)),
    ("[::1]:7000", ("::1", 7000)),
    ("[fe80::1%eth0]:9", ("fe80::1%eth0", 9)),
    (":7000", ("127.0.0.1", 7000)),
    ("7000", ("127.0.0.1", 7000)),
    ("  localhost:65535 ", ("localhost", 65535)),
    ("my_host-1.local:1", ("my_host-1.local", 1)),
]

REFUSED = [
    "host:",
    "host:port",
    "host:65536",
    "host:-1",
    "host: 80",
    "::1:80",  # IPv6 needs brackets
    "[::1]",
    "[::1]80",
    "[host]:80",
    "[1.2.3.4]:80",
    "a b:80",
    "h/x:80",
    "70000",
    ":",
]


@pytest.mark.parametrize(("text", "want"), ACCEPTED)
def test_accepted_forms_read_the_same_everywhere(text: str, want: tuple[str, int]) -> None:
    hp = parse_address(text)
    assert (hp.host, hp.port) == want
    c = console_address(text)
    assert (c.host, c.port, c.is_unix) == (*want, False)
    fam, bind = ondemand_address(text)
    assert bind == want and fam == (socket.AF_INET6 if ":" in want[0] else socket.AF_INET)


@pytest.mark.parametrize("text", REFUSED)
def test_refused_forms_are_refused_everywhere(text: str) -> None:
    with pytest.raises(ValueError, match="address"):
        parse_address(text)
    with pytest.raises(ValueError, match="address"):
        console_address(text)
    with pytest.raises(ValueError, match="on_demand_address"):
        ondemand_address(text)


def test_errors_name_the_argument_and_the_value() -> None:
    with pytest.raises(ValueError, match=r"--connect.*'host:x'"):
        parse_address("host:x", "--connect")
    with pytest.raises(TypeError, match="address"):
        parse_address(None)
    assert parse_address(8080) == HostPort("127.0.0.1", 8080)
    assert parse_address(":1", default_host="0.0.0.0") == HostPort("0.0.0.0", 1)


def test_unix_forms_stay_with_their_servers(tmp_path: Path) -> None:
    assert console_address(f"unix:{tmp_path}/c.sock").path == f"{tmp_path}/c.sock"
    assert ondemand_address(f"unix:{tmp_path}/o.sock") == (socket.AF_UNIX, f"{tmp_path}/o.sock")


def test_host_port_prints_back_to_what_it_parses() -> None:
    for text, _ in ACCEPTED:
        hp = parse_address(text)
        assert parse_address(str(hp)) == hp
    assert str(HostPort("::1", 80)) == "[::1]:80" and HostPort("::1", 80).family == socket.AF_INET6


def test_check_host_and_port() -> None:
    assert check_host("[::1]") == "::1" and check_host(" 0.0.0.0 ") == "0.0.0.0"
    for bad in ("", "a b", "[x]", "1::2::3", "host:80"):
        with pytest.raises(ValueError, match="--host"):
            check_host(bad, "--host")
    with pytest.raises(TypeError, match="host"):
        check_host(None)
    assert check_port("80") == 80 and check_port(0) == 0
    for badp in (-1, 65536, True, "x", 1.5):
        with pytest.raises(ValueError, match="--port"):
            check_port(badp, "--port")


def test_loopback() -> None:
    for h in ("127.0.0.1", "127.8.0.1", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(h), h
    for h in ("0.0.0.0", "::", "10.0.0.1", "example.org", ""):
        assert not is_loopback(h), h


def test_tokens_are_random_and_compared_exactly() -> None:
    a, b = new_token(), new_token()
    assert a != b and len(a) >= 43
    assert token_matches(a, a) and token_matches(a.encode(), a)
    assert not token_matches(a[:-1], a) and not token_matches(a + "x", a) and not token_matches("", a)
    assert not token_matches(None, a) and not token_matches(123, a) and not token_matches(a, None)


def test_exposure_loopback_needs_no_token_anything_else_does() -> None:
    assert check_exposure("127.0.0.1", None) is None
    assert check_exposure("::1", "given") == "given"
    made = check_exposure("0.0.0.0", None)
    assert made is not None and len(made) >= 43
    assert check_exposure("0.0.0.0", "mine") == "mine"
    assert check_exposure("127.0.0.1", None, always=True) is not None
    with pytest.raises(TypeError, match="token"):
        check_exposure("0.0.0.0", 5)  # type: ignore[arg-type]


def test_servers_apply_the_rule(tmp_path: Path) -> None:
    from mlgoodput.console._server import ConsoleServer
    from mlgoodput.store import open_store
    from mlgoodput.ui._server import UIServer

    st = open_store("memory://endpoint-ui")
    local = UIServer(st, "127.0.0.1", 0)
    try:
        assert local.token is None and local.loopback
    finally:
        local.server_close()
    wide = UIServer(st, "0.0.0.0", 0)
    try:
        assert wide.token and not wide.loopback and "token=" in wide.url
    finally:
        wide.server_close()
    with pytest.raises(ValueError, match="host"):
        UIServer(st, "no such host", 0)
    cs = ConsoleServer("127.0.0.1:0", store="memory://endpoint-console", display=False, goodput=False)
    assert cs.token  # TCP on loopback still needs one: other users reach loopback ports
    given = ConsoleServer(":0", store="memory://endpoint-console2", display=False, goodput=False, token="t0k")
    assert given.token == "t0k"
