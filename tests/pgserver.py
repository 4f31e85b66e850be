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


def fresh_database(url: str, prefix: str) -> str:
    """A new, empty database on the server of `url` (named `prefix` and a random suffix): its URL."""
    import secrets

    import psycopg

    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name}")
    return url.rsplit("/", 1)[0] + "/" + name


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


def pgbouncer_bin() -> str | None:
    return shutil.which("pgbouncer") or next(iter(glob.glob("/usr/sbin/pgbouncer")), None)


def why_not_bouncer() -> str | None:
    """Why no pgbouncer can be started here (None when one can)."""
    why = why_not()
    if why:
        return why
    if pgbouncer_bin() is None:
        return "pgbouncer not found (scripts/install-system-deps.sh installs Debian's pgbouncer)"
    return None


class PgBouncer:
    """Debian's pgbouncer on 127.0.0.1 in transaction pool mode in front of a `PgServer`:
    any database name is passed on to the server, at most `pool_size` server connections
    per database and user. `url` (the server's URL through the pooler), `pools()` (its
    SHOW POOLS rows), `stop()` / `start()`; `close()` stops it and removes its files."""

    def __init__(self, server: PgServer, *, pool_size: int = 4, max_client_conn: int = 2000) -> None:
        why = why_not_bouncer()
        if why:
            raise RuntimeError(why)
        self.server = server
        self.pool_size = int(pool_size)
        self.base = tempfile.mkdtemp(prefix="mlgoodput-pgbouncer-")
        self.as_user = server.as_user
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = int(s.getsockname()[1])
        self.ini = os.path.join(self.base, "pgbouncer.ini")
        self.pidfile = os.path.join(self.base, "pgbouncer.pid")
        with open(os.path.join(self.base, "userlist.txt"), "w") as f:
            f.write('"mlgoodput" ""\n"postgres" ""\n')
        with open(self.ini, "w") as f:
            f.write(
                "[databases]\n"
                f"* = host=127.0.0.1 port={server.port}\n"
                "[pgbouncer]\n"
                "listen_addr = 127.0.0.1\n"
                f"listen_port = {self.port}\n"
                "unix_socket_dir =\n"
                "auth_type = trust\n"
                f"auth_file = {self.base}/userlist.txt\n"
                "admin_users = mlgoodput\n"
                "pool_mode = transaction\n"
                f"default_pool_size = {self.pool_size}\n"
                "min_pool_size = 0\n"
                "reserve_pool_size = 0\n"
                f"max_client_conn = {int(max_client_conn)}\n"
                "ignore_startup_parameters = extra_float_digits,options\n"
                f"logfile = {self.base}/pgbouncer.log\n"
                f"pidfile = {self.pidfile}\n"
            )
        if self.as_user:  # pgbouncer refuses root as PostgreSQL does: the postgres account runs it
            import pwd

            pw = pwd.getpwnam("postgres")
            for p in (self.base, *(os.path.join(self.base, n) for n in os.listdir(self.base))):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        self.url = f"postgresql://mlgoodput@127.0.0.1:{self.port}/postgres"
        self.admin_url = f"postgresql://mlgoodput@127.0.0.1:{self.port}/pgbouncer"

    def start(self) -> None:
        subprocess.run(
            [*self.as_user, str(pgbouncer_bin()), "-d", self.ini], check=True, capture_output=True, timeout=60
        )
        import psycopg

        deadline = time.time() + 30
        while True:
            try:
                psycopg.connect(self.url, prepare_threshold=None).close()
                return
            except psycopg.OperationalError:
                if time.time() > deadline:
                    raise
                time.sleep(0.1)

    def pools(self) -> list[dict[str, object]]:
        """SHOW POOLS on the admin console (simple queries only: a client-side cursor)."""
        import psycopg

        with psycopg.connect(self.admin_url, autocommit=True, cursor_factory=psycopg.ClientCursor) as c:
            cur = c.execute("SHOW POOLS")
            names = [d.name for d in cur.description or ()]
            return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]

    def stop(self) -> None:
        """Stop the pooler (its pid file's process; the server keeps running)."""
        try:
            with open(self.pidfile) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            return
        try:
            os.kill(pid, 15)
        except ProcessLookupError:
            return
        deadline = time.time() + 10
        while time.time() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)
        os.kill(pid, 9)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.base, ignore_errors=True)
