"""The deadline on each PostgreSQL store call (store/_deadline.py): a call that waits on the
server past `call_timeout_s` ends in a StoreError that says why (its query cancelled, or its
connection cut when the server does not answer even that), nothing of it is stored, and the
store's next call works."""

from __future__ import annotations

import os
import signal
import threading
import uuid
from typing import Any

import pytest

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import StoreError, _deadline
from mlgoodput.store._postgres import PostgresStore
from tests.pgserver import fresh_database

pytestmark = pytest.mark.slow


def _steps(first: int, n: int) -> list[Event]:
    return [Event(Kind.STEP_START, 1.7e9 + i, 0, step=i) for i in range(first, first + n)]


def _append_in_thread(st: PostgresStore, job: str, batch: EventBatch) -> tuple[threading.Thread, list[Any]]:
    """`st.append` on a thread of its own; its outcome (None or the exception) lands in the list."""
    out: list[Any] = []

    def run() -> None:
        try:
            st.append("ns", job, batch)
            out.append(None)
        except Exception as e:
            out.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


#: the deadline under test: long enough for any call that does not wait on a lock or a stopped
#: server, even on a loaded machine (the schema and the writer's row are made before, without it)
LIMIT_S = 5.0


def _made(url: str, job: str, writer: int) -> None:
    """The store's schema, the job and the writer's row, and its first two steps (no deadline asked)."""
    st = PostgresStore(url)
    st.append("ns", job, EventBatch(writer, 0, _steps(0, 2)))
    st.close()


def _stored(url: str, job: str) -> list[int]:
    st = PostgresStore(url)
    try:
        return [int(e.step) for e in st.read("ns", job).columns.events() if e.step is not None]
    finally:
        st.close()


@pytest.mark.parametrize("via", ["direct", "pgbouncer"])
def test_a_call_waiting_on_a_lock_past_its_deadline_is_cancelled_and_the_next_works(
    via: str, request: pytest.FixtureRequest
) -> None:
    import psycopg

    if via == "direct":
        url = direct = fresh_database(request.getfixturevalue("postgres_url"), "deadline")
    else:  # the store through the pooler (transaction mode): the cancel goes through it too
        bouncer = request.getfixturevalue("pgbouncer")
        direct = fresh_database(bouncer.server.url, "deadline")
        url = str(bouncer.url).rsplit("/", 1)[0] + "/" + direct.rsplit("/", 1)[1]
    job, writer = uuid.uuid4().hex, uuid.uuid4().int >> 65
    _made(url, job, writer)
    st = PostgresStore(url, call_timeout_s=LIMIT_S)
    with psycopg.connect(direct) as holder:  # holds the writer's row lock: the next append waits on it
        holder.execute("SELECT 1 FROM mlgoodput_writers WHERE writer = %s FOR UPDATE", (writer,))
        t, out = _append_in_thread(st, job, EventBatch(writer, 2, _steps(2, 3)))
        t.join(120)
        assert not t.is_alive(), "the append still waits: the deadline did not end it"
        holder.rollback()
    (err,) = out
    assert isinstance(err, StoreError), err
    assert "no answer from the server within 5 s (the query was cancelled)" in str(err)
    assert _stored(url, job) == [0, 1]  # nothing of the cut append
    st.append("ns", job, EventBatch(writer, 2, _steps(2, 3)))  # retried: a new connection
    assert _stored(url, job) == [0, 1, 2, 3, 4]
    st.close()


def test_a_server_that_stops_answering_has_the_connection_cut(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_deadline, "CANCEL_GRACE_S", 0.5)
    url = fresh_database(postgres_url, "deadline")
    job, writer = uuid.uuid4().hex, uuid.uuid4().int >> 65
    _made(url, job, writer)
    st = PostgresStore(url, call_timeout_s=LIMIT_S)
    assert _stored(url, job) == [0, 1] and st.identity()  # (its connection made)
    backend = int(st._conn.info.backend_pid)
    os.kill(backend, signal.SIGSTOP)  # the server's process for this connection answers nothing now, not even a cancel
    try:
        t, out = _append_in_thread(st, job, EventBatch(writer, 2, _steps(2, 3)))
        t.join(120)
        assert not t.is_alive(), "the append still waits: the deadline did not cut the connection"
    finally:
        os.kill(backend, signal.SIGCONT)
    (err,) = out
    assert isinstance(err, StoreError), err
    assert "no answer from the server within 5 s (the connection was closed)" in str(err)
    st.append("ns", job, EventBatch(writer, 2, _steps(2, 3)))  # a new connection
    assert _stored(url, job) == [0, 1, 2, 3, 4]
    assert _deadline.watcher().in_flight() == 0
    st.close()


@pytest.mark.parametrize("value", [0, -1.0, float("inf"), float("nan"), True, "30"])
def test_a_call_timeout_that_is_not_a_positive_number_is_refused(value: object) -> None:
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'mlgoodput[postgres]')")
    with pytest.raises(ValueError, match=r"call_timeout_s must be a positive number of seconds, got"):
        PostgresStore("postgresql://u@127.0.0.1:1/db", call_timeout_s=value)  # type: ignore[arg-type]


def test_the_call_timeout_comes_from_the_environment_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("psycopg", reason="psycopg is not installed (pip install 'mlgoodput[postgres]')")
    url = "postgresql://u@127.0.0.1:1/db"
    assert PostgresStore(url)._call_timeout == 30.0
    monkeypatch.setenv("MLGOODPUT_PG_CALL_TIMEOUT_S", "120")
    assert PostgresStore(url)._call_timeout == 120.0  # (uploader processes inherit it)
    assert PostgresStore(url, call_timeout_s=7)._call_timeout == 7.0  # the keyword wins
    monkeypatch.setenv("MLGOODPUT_PG_CALL_TIMEOUT_S", "soon")
    with pytest.raises(
        ValueError, match=r"\$MLGOODPUT_PG_CALL_TIMEOUT_S must be a positive number of seconds, got 'soon'"
    ):
        PostgresStore(url)
