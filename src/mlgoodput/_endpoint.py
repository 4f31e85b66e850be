"""Network endpoints: the one parser of TCP addresses, and the token rules of every server.

Every server and client of mlgoodput (the console, the on-demand profiler, the web UI, the
Prometheus endpoint, the CLI's `--host`/`--port` and `--address`) parses a TCP address with
`parse_address`, so they accept and refuse the same spellings:

    host:port     a name or an IPv4 address, and a port 0..65535
    [v6]:port     an IPv6 address in brackets
    :port         the default host (127.0.0.1)
    port          the same

A server binds to loopback unless told otherwise, and one that listens beyond this machine
requires a token (`check_exposure`); tokens are `new_token()` and compared in constant time
(`token_matches`).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
from dataclasses import dataclass

__all__ = [
    "DEFAULT_HOST",
    "HostPort",
    "check_exposure",
    "check_host",
    "check_port",
    "is_loopback",
    "new_token",
    "parse_address",
    "token_matches",
]

DEFAULT_HOST = "127.0.0.1"
_FORMS = "'HOST:PORT', '[IPv6]:PORT', ':PORT' or 'PORT'"


@dataclass(frozen=True, slots=True)
class HostPort:
    """A TCP address: `host` (a name, an IPv4 or an IPv6 address, no brackets) and `port`."""

    host: str
    port: int

    @property
    def family(self) -> socket.AddressFamily:
        return socket.AF_INET6 if ":" in self.host else socket.AF_INET

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def check_port(port: object, arg: str = "port") -> int:
    """`port` as an int 0..65535 (a string of digits too); ValueError naming `arg` otherwise."""
    if isinstance(port, str) and port.strip().isascii() and port.strip().isdigit():
        port = int(port.strip())
    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ValueError(f"{arg}: the port must be a number 0..65535, got {port!r}")
    return port


def check_host(host: object, arg: str = "host") -> str:
    """`host` as a bind or connect host: a name, an IPv4 address, or an IPv6 address (with or
    without brackets, returned without); ValueError naming `arg` otherwise."""
    if not isinstance(host, str):
        raise TypeError(f"{arg} must be a host name or address string, got {host!r}")
    h = host.strip()
    if h.startswith("[") and h.endswith("]"):
        h = h[1:-1]
        if ":" not in h:
            raise ValueError(f"{arg}: brackets are for IPv6 addresses, got {host!r}")
    if ":" in h:
        try:
            ipaddress.IPv6Address(h.split("%", 1)[0])
        except ValueError:
            raise ValueError(f"{arg}: not an IPv6 address: {host!r}") from None
        return h
    if not h or not all(c.isalnum() or c in ".-_" for c in h) or not h.isascii():
        raise ValueError(f"{arg}: not a host name or address: {host!r}")
    return h


def parse_address(address: object, arg: str = "address", *, default_host: str = DEFAULT_HOST) -> HostPort:
    """Parse one of the forms in the module's docstring; ValueError (TypeError for a
    non-string) naming `arg` and the value when it is not one."""
    if isinstance(address, int) and not isinstance(address, bool):
        return HostPort(default_host, check_port(address, arg))
    if not isinstance(address, str):
        raise TypeError(f"{arg} must be a string such as {_FORMS}, got {address!r}")
    a = address.strip()
    if a.isascii() and a.isdigit():
        return HostPort(default_host, check_port(a, arg))
    if a.startswith("["):
        host, sep, port = a.partition("]:")
        if not sep:
            raise ValueError(f"{arg} must be {_FORMS}, got {address!r}")
        host = host + "]"
    else:
        host, sep, port = a.rpartition(":")
        if not sep:
            raise ValueError(f"{arg} must be {_FORMS}, got {address!r}")
    if not (port.isascii() and port.isdigit()):
        raise ValueError(f"{arg}: the port must be a number 0..65535, got {address!r}")
    if ":" in host and not host.startswith("["):
        raise ValueError(f"{arg}: write an IPv6 address in brackets, '[{host}]:{port}', got {address!r}")
    try:
        h = check_host(host, arg) if host else default_host
        return HostPort(h, check_port(port, arg))
    except ValueError as e:
        raise ValueError(f"{e} (in {address!r})") from None


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine only: `localhost` or a loopback address."""
    h = host.strip().strip("[]").split("%", 1)[0]
    if h.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(h).is_loopback
    except ValueError:
        return False


def new_token() -> str:
    """A fresh random token (256 bits, URL-safe)."""
    return secrets.token_urlsafe(32)


def token_matches(given: object, want: str | bytes | None) -> bool:
    """Whether `given` is the token `want`, compared in constant time; False for a missing
    or non-string `given`, and when there is no token to match."""
    if want is None or not isinstance(given, (str, bytes)):
        return False
    g = given.encode() if isinstance(given, str) else given
    w = want.encode() if isinstance(want, str) else want
    return hmac.compare_digest(g, w)


def check_exposure(host: str, token: str | None, *, always: bool = False) -> str | None:
    """The token a server bound to `host` requires: `token` when given; else a new one when
    `host` reaches beyond this machine (or `always`); else None (loopback needs none)."""
    if token is not None and not isinstance(token, str):
        raise TypeError(f"token must be a string or None, got {token!r}")
    if token:
        return token
    if always or not is_loopback(host):
        return new_token()
    return None
