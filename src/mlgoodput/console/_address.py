"""Console addresses: `HOST:PORT`, `[IPv6]:PORT`, `:PORT` or `PORT` (TCP, parsed by
`mlgoodput._endpoint.parse_address` as every server does), `unix:/path` or a bare name (Unix socket).

A bare name lives in a private per-user directory (mode 0700, owned by the user), so only
the user's own processes can reach it; TCP needs a token instead.
"""

from __future__ import annotations

import os
import re
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

from mlgoodput._endpoint import parse_address as parse_host_port

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


@dataclass(frozen=True, slots=True)
class Address:
    """A parsed address: `path` for a Unix socket, else `host` and `port` for TCP."""

    host: str = ""
    port: int = 0
    path: str = ""

    @property
    def is_unix(self) -> bool:
        return bool(self.path)

    def __str__(self) -> str:
        if self.path:
            return "unix:" + self.path
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def private_dir() -> Path:
    """The per-user directory of named console sockets, created 0700 and checked."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    if base and os.path.isdir(base):
        d = Path(base) / "mlgoodput-console"
    else:
        d = Path(tempfile.gettempdir()) / f"mlgoodput-console-{os.getuid()}"
    d.mkdir(mode=0o700, exist_ok=True)
    st = os.lstat(d)
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
        raise PermissionError(f"console socket directory {str(d)!r} is not a directory owned by this user")
    if st.st_mode & 0o077:
        os.chmod(d, 0o700)
    return d


def parse_address(address: object, arg: str = "address") -> Address:
    """Parse a console address; ValueError naming `arg` and the value when it is not one."""
    if not isinstance(address, str):
        raise TypeError(f"{arg} must be a string such as ':7000', 'host:7000', 'unix:/path' or a name, got {address!r}")
    a = address.strip()
    if a.startswith("unix:"):
        path = a[5:]
        if not path:
            raise ValueError(f"{arg}: 'unix:' needs a path, got {address!r}")
        return Address(path=os.path.abspath(os.path.expanduser(path)))
    if ":" in a or a.isdigit():
        hp = parse_host_port(a, arg)
        return Address(host=hp.host, port=hp.port)
    if _NAME.match(a):
        return Address(path=str(private_dir() / f"{a}.sock"))
    raise ValueError(f"{arg} must be 'HOST:PORT', ':PORT', 'unix:/path/to.sock' or a plain name, got {address!r}")
