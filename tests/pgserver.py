"""A PostgreSQL server of the test's own: initdb in a temporary folder, listening on 127.0.0.1
only, that a test can stop and start again (the store fixtures and the fault tests use it)."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time


def pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return hits[-1] if hits else None


def why_not() -> str | None:
    """Why no server can be started here (None when one can)."""
    if not (pg_bin("initdb") and pg_bin("pg_ctl")):
        return "PostgreSQL server programs not found (scripts/install-system-deps.sh installs Debian's postgresql)"
    try:
        import psycopg  # noqa: F401
    except ImportError:
        return "psycopg is not installed (pip install 'mlgoodput[postgres]')"
    if os.geteuid() == 0:
        if shutil.which("runuser") is None:
            return "running as root without runuser: cannot start PostgreSQL"
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            return "running as root and there is no postgres account to run the server"
    return None


class PgServer:
    """`start()`, `stop()`, `url`; `close()` stops it and removes its files."""

    def __init__(self) -> None:
        why = why_not()
        if why:
            raise RuntimeError(why)
        self.base = tempfile.mkdtemp(prefix="mlgoodput-pg-")
        self.data = os.path.join(self.base, "data")
        self.as_user: list[str] = []
        if os.geteuid() == 0:  # the server refuses to run as root: use the postgres account
            import pwd

            pw = pwd.getpwnam("postgres")
            os.chown(self.base, pw.pw_uid, pw.pw_gid)
            self.as_user = ["runuser", "-u", "postgres", "--"]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        subprocess.run(
            [*self.as_user, str(pg_bin("initdb")), "-D", self.data, "-A", "trust", "-U", "mlgoodput", "--no-sync"],
            check=True,
            capture_output=True,
            timeout=120,
        )
        self.url = f"postgresql://mlgoodput@127.0.0.1:{self.port}/postgres"

    def _ctl(self, *args: str) -> None:
        subprocess.run(
            [*self.as_user, str(pg_bin("pg_ctl")), "-D", self.data, *args], check=True, capture_output=True, timeout=120
        )

    def start(self) -> None:
        opts = f"-h 127.0.0.1 -p {self.port} -k {self.base} -c fsync=off"
        self._ctl("-o", opts, "-l", os.path.join(self.base, "log"), "-w", "start")
        import psycopg

        deadline = time.time() + 30
        while True:
            try:
                psycopg.connect(self.url).close()
                return
            except psycopg.OperationalError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)

    def stop(self) -> None:
        self._ctl("-m", "immediate", "stop")

    def close(self) -> None:
        subprocess.run(
            [*self.as_user, str(pg_bin("pg_ctl")), "-D", self.data, "-m", "immediate", "stop"],
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.base, ignore_errors=True)
