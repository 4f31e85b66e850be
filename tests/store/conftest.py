"""Store fixtures: every store kind, including a real PostgreSQL server on loopback."""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import tests.store.dictstore  # noqa: F401  (registers the dict:// test backend)


def _pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    hits = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return hits[-1] if hits else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


#: fixtures that give a fresh URL of a backend that other processes can open, by backend name
#: (a process-local backend needs none: `SCHEME://contract-<uuid>` is a fresh store)
SHARED_URL_FIXTURES = {"sqlite": "sqlite_url", "postgres": "postgres_url", "cloudlogging": "cloud_logging_url"}


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite store file of its own (a path: the form users pass most)."""
    return str(tmp_path / "contract.db")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server of our own: initdb in a temp dir, listening on 127.0.0.1 only."""
    initdb, pg_ctl = _pg_bin("initdb"), _pg_bin("pg_ctl")
    if not (initdb and pg_ctl):
        pytest.skip(
            "PostgreSQL server programs not found (scripts/install-system-deps.sh installs Debian's postgresql)"
        )
    try:
        import psycopg
    except ImportError:
        pytest.skip("psycopg is not installed (pip install 'mlgoodput[postgres]')")
    base = tempfile.mkdtemp(prefix="mlgoodput-pg-")
    data = os.path.join(base, "data")
    as_user: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root: use the postgres account
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser: cannot start PostgreSQL")
        try:
            import pwd

            pw = pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and there is no postgres account to run the server")
        os.chown(base, pw.pw_uid, pw.pw_gid)
        as_user = ["runuser", "-u", "postgres", "--"]
    port = _free_port()
    subprocess.run(
        [*as_user, initdb, "-D", data, "-A", "trust", "-U", "mlgoodput", "--no-sync"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    opts = f"-h 127.0.0.1 -p {port} -k {base} -c fsync=off"
    subprocess.run(
        [*as_user, pg_ctl, "-D", data, "-o", opts, "-l", os.path.join(base, "log"), "-w", "start"],
        check=True,
        capture_output=True,
        timeout=120,
    )
    url = f"postgresql://mlgoodput@127.0.0.1:{port}/postgres"
    try:
        deadline = time.time() + 30
        import psycopg

        while True:
            try:
                psycopg.connect(url).close()
                break
            except psycopg.OperationalError:
                if time.time() > deadline:
                    raise
                time.sleep(0.2)
        yield url
    finally:
        subprocess.run([*as_user, pg_ctl, "-D", data, "-m", "immediate", "stop"], capture_output=True, timeout=60)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def fake_logging() -> Iterator[object]:
    """A fake Cloud Logging API on 127.0.0.1 (mlgoodput.testing.FakeLoggingService)."""
    pytest.importorskip(
        "google.cloud.logging_v2", reason="google-cloud-logging is not installed (pip install 'mlgoodput[gcp]')"
    )
    from mlgoodput.testing import FakeLoggingService

    with FakeLoggingService() as svc:
        yield svc


@pytest.fixture
def cloud_logging_url(fake_logging: object) -> str:
    """A cloudlogging:// store URL on the fake service, in a project of its own."""
    import uuid

    return fake_logging.url(f"p-{uuid.uuid4().hex[:12]}")  # type: ignore[attr-defined]
