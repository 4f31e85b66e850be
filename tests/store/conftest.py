"""Store fixtures: every store kind, including a real PostgreSQL server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import tests.store.dictstore  # noqa: F401  (registers the dict:// test backend)

#: fixtures that give a fresh URL of a backend that other processes can open, by backend name
#: (a process-local backend needs none: `SCHEME://contract-<uuid>` is a fresh store)
SHARED_URL_FIXTURES = {
    "sqlite": "sqlite_url",
    "postgres": "postgres_url",
    "cloudlogging": "cloud_logging_url",
    "postgres+pgbouncer": "pgbouncer_url",  # a variant: the same backend through a pooler
}
#: "BACKEND+HOW": a backend reached another way, that the contract runs as a backend of its own
VARIANTS = [name for name in SHARED_URL_FIXTURES if "+" in name]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite store file of its own (a path: the form users pass most)."""
    return str(tmp_path / "contract.db")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A PostgreSQL server of our own: initdb in a temp dir, listening on 127.0.0.1 only."""
    from pgserver import PgServer, why_not

    why = why_not()
    if why:
        pytest.skip(why)
    srv = PgServer()
    try:
        srv.start()
        yield srv.url
    finally:
        srv.close()


@pytest.fixture(scope="session")
def pgbouncer() -> Iterator[Any]:
    """pgbouncer in transaction pool mode (4 server connections) in front of a PostgreSQL
    server of its own, both on 127.0.0.1 (tests/pgserver.py `PgBouncer`)."""
    from pgserver import PgBouncer, PgServer, why_not_bouncer

    why = why_not_bouncer()
    if why:
        pytest.skip(why)
    srv = PgServer()
    bouncer = None
    try:
        srv.start()
        bouncer = PgBouncer(srv, pool_size=4)
        bouncer.start()
        yield bouncer
    finally:
        if bouncer is not None:
            bouncer.close()
        srv.close()


@pytest.fixture(scope="session")
def pgbouncer_url(pgbouncer: Any) -> str:
    """The PostgreSQL store URL through the pooler."""
    return str(pgbouncer.url)


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
