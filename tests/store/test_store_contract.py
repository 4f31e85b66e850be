"""One contract, every store: idempotent appends, cursors, listings, many writers at once."""

from __future__ import annotations

import multiprocessing as mp
import uuid
from pathlib import Path
from typing import Any

import pytest

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore, Store, StoreError, _exactly_once, open_store
from mlgoodput.store._registry import backends
from tests.store.conftest import SHARED_URL_FIXTURES, VARIANTS

ALL = [b.name for b in backends()] + VARIANTS  # every registered backend runs this suite
SHARED = [b.name for b in backends() if not b.process_local] + VARIANTS


def fresh_url(request: pytest.FixtureRequest, name: str) -> str:
    """A URL of a new, empty store of the backend `name`."""
    backend = next(b for b in backends() if b.name == name.split("+")[0])
    if backend.process_local:
        return f"{backend.schemes[0]}://contract-{uuid.uuid4().hex}"
    fixture = SHARED_URL_FIXTURES.get(name)
    if fixture is None:
        pytest.fail(f"backend {name!r} is shared between processes: add a URL fixture for it to SHARED_URL_FIXTURES")
    return str(request.getfixturevalue(fixture))


@pytest.fixture(params=ALL)
def store_url(request: pytest.FixtureRequest) -> str:
    return fresh_url(request, request.param)


def steps(first: int, n: int, host: int = 0, t0: float = 1000.0) -> list[Event]:
    return [Event(Kind.STEP_START, t0 + i, host, step=i) for i in range(first, first + n)]


def test_append_read_cursor(store_url: str) -> None:
    st = open_store(store_url)
    job = uuid.uuid4().hex
    W1 = uuid.uuid4().int >> 65
    st.append("ns", job, EventBatch(W1, 0, steps(0, 5)))
    r1 = st.read("ns", job)
    assert [e.step for e in r1.columns.events()] == [0, 1, 2, 3, 4]
    st.append("ns", job, EventBatch(W1, 5, steps(5, 3)))
    r2 = st.read("ns", job, r1.cursor)
    assert [e.step for e in r2.columns.events()] == [5, 6, 7]
    assert len(st.read("ns", job, r2.cursor)) == 0
    assert len(st.read("other-ns", job)) == 0
    st.close()


def test_replays_store_nothing_twice(store_url: str) -> None:
    st = open_store(store_url)
    job = uuid.uuid4().hex
    evs = steps(0, 10)
    w = uuid.uuid4().int >> 65
    st.append("ns", job, EventBatch(w, 0, evs[:6]))
    st.append("ns", job, EventBatch(w, 0, evs[:6]))  # the same batch again
    st.append("ns", job, EventBatch(w, 4, evs[4:]))  # overlapping with what is stored
    got = [e.step for e in st.read("ns", job).columns.events()]
    assert got == list(range(10))
    info = {j.job: j for j in st.jobs()}[job]
    assert info.events == 10 and info.namespace == "ns"
    assert info.first_time == 1000.0 and info.last_time == 1009.0
    st.close()


def test_fields_round_trip(store_url: str) -> None:
    st = open_store(store_url)
    job = uuid.uuid4().hex
    evs = [
        Event(Kind.CUSTOM_START, 1.5, 3, name="eval"),
        Event(Kind.CKPT_SAVE, 2.25, 0, step=40, value=1.75),
        Event(Kind.SLICE_COUNTS, 3.0, 0, attrs={"active": 2, "total": 4, "available": 3}),
        Event(Kind.METRIC, 4.0, 1, step=None, value=0.5, name="loss", attrs={"unit": "nats", "tags": [1, 2]}),
    ]
    st.append("ns", job, EventBatch(uuid.uuid4().int >> 65, 0, evs))
    assert list(st.read("ns", job).columns.events()) == evs
    st.close()


def test_column_batches_store_what_event_batches_store(store_url: str) -> None:
    """A journal ships columns (ColumnEvents); every store keeps them as it keeps events,
    replays of them included."""
    from mlgoodput.store._columns import ColumnEvents, Columns

    st = open_store(store_url)
    job = uuid.uuid4().hex
    evs = [
        *steps(0, 6),
        Event(Kind.CUSTOM_START, 1010.0, 0, name="eval"),
        Event(Kind.SLICE_COUNTS, 1011.0, 0, attrs={"active": 2}),
        *steps(6, 4, t0=1006.0),
    ]
    cols = ColumnEvents(Columns.from_events(evs))
    w = uuid.uuid4().int >> 65
    st.append("ns", job, EventBatch(w, 0, cols[:7]))
    st.append("ns", job, EventBatch(w, 0, cols[:7]))  # the same batch again
    st.append("ns", job, EventBatch(w, 5, cols[5:]))  # overlapping with what is stored
    assert list(st.read("ns", job).columns.events()) == evs
    assert {j.job: j for j in st.jobs()}[job].events == len(evs)
    st.close()


def _writer(url: str, job: str, host: int, n: int) -> None:
    st = open_store(url)
    writer = uuid.uuid4().int >> 65  # a fresh 63-bit writer id, as a journal has
    for b in range(0, n, 50):
        st.append("ns", job, EventBatch(writer, b, steps(b, 50, host=host)))
    st.close()


@pytest.fixture(params=SHARED)
def shared_store_url(request: pytest.FixtureRequest) -> str:
    """Stores that several processes can open (a process-local store lives in one process)."""
    return fresh_url(request, request.param)


@pytest.mark.slow
def test_many_processes_write_at_once(shared_store_url: str) -> None:
    store_url = shared_store_url
    job = uuid.uuid4().hex
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(store_url, job, w, 400)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    st = open_store(store_url)
    seen = [(e.host, e.step) for e in st.read("ns", job).columns.events()]
    assert sorted(seen) == [(w, i) for w in range(4) for i in range(400)]
    st.close()


def test_unknown_and_unwritable_stores(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"store: unknown store URL scheme 'mysql'"):
        open_store("mysql://x/y")
    with pytest.raises(TypeError, match="store"):
        open_store(42)
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    st = open_store(str(blocker / "sub" / "x.db"))  # opening is lazy; using it fails clearly
    with pytest.raises(StoreError, match="cannot open SQLite store"):
        st.append("ns", "j", EventBatch(1, 0, steps(0, 1)))
    assert isinstance(open_store(MemoryStore()), Store)


def test_every_backend_is_in_the_suite() -> None:
    names = {b.name for b in backends()}
    assert {"sqlite", "postgres", "memory", "cloudlogging", "dict"} <= names


def _stored(url: str, job: str) -> list[tuple[int, int | None]]:
    """(host, step) of every stored event, as a fresh reader sees them."""
    st = open_store(url)
    try:
        return [(e.host, e.step) for e in st.read("ns", job).columns.events()]
    finally:
        st.close()


def test_replayed_part_stored_once(store_url: str) -> None:
    """A journal segment shipped again, whole, inside or across what is stored, even by
    another store object (the next process replaying a dead one's journal)."""
    st = open_store(store_url)
    job, w = uuid.uuid4().hex, uuid.uuid4().int >> 65
    evs = steps(0, 15)
    st.append("ns", job, EventBatch(w, 0, evs[:10]))
    st.append("ns", job, EventBatch(w, 3, evs[3:8]))  # a part inside what is stored
    st.append("ns", job, EventBatch(w, 5, evs[5:15]))  # a part across the end
    st.close()
    again = open_store(store_url)  # as the next process opens it
    again.append("ns", job, EventBatch(w, 0, evs))  # the whole segment replayed
    again.close()
    assert _stored(store_url, job) == [(0, i) for i in range(15)]


def test_two_writers_interleaved(store_url: str) -> None:
    """Two writers' marks are independent: one's replay never hides the other's events."""
    st = open_store(store_url)
    job = uuid.uuid4().hex
    a, b = uuid.uuid4().int >> 65, uuid.uuid4().int >> 65
    ea, eb = steps(0, 12, host=1), steps(0, 12, host=2)
    st.append("ns", job, EventBatch(a, 0, ea[:6]))
    st.append("ns", job, EventBatch(b, 0, eb[:4]))
    st.append("ns", job, EventBatch(a, 0, ea[:6]))  # a's replay
    st.append("ns", job, EventBatch(b, 4, eb[4:12]))
    st.append("ns", job, EventBatch(a, 6, ea[6:12]))
    st.append("ns", job, EventBatch(b, 2, eb[2:12]))  # b's overlapping replay
    assert sorted(_stored(store_url, job)) == sorted([(1, i) for i in range(12)] + [(2, i) for i in range(12)])
    info = {j.job: j for j in st.jobs()}[job]
    assert info.events == 24
    st.close()


class _Crash(Exception):
    pass


def test_crash_between_write_and_mark(store_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer that dies after writing a part and before recording its mark: the replay
    that follows (by the next process) leaves every event stored once."""
    st = open_store(store_url)
    job, w = uuid.uuid4().hex, uuid.uuid4().int >> 65
    evs = steps(0, 8)
    st.append("ns", job, EventBatch(w, 0, evs[:3]))
    crashed: list[Any] = []

    def crash(part: _exactly_once.NewPart) -> None:
        crashed.append(part)
        raise _Crash

    monkeypatch.setattr(_exactly_once, "before_mark", crash)
    with pytest.raises(_Crash):
        st.append("ns", job, EventBatch(w, 0, evs))
    monkeypatch.undo()
    assert crashed and crashed[0].first == 3 and crashed[0].mark == 8
    st.close()
    again = open_store(store_url)
    again.append("ns", job, EventBatch(w, 0, evs))  # the journal's replay
    again.append("ns", job, EventBatch(w, 0, evs))  # and once more
    again.close()
    assert _stored(store_url, job) == [(0, i) for i in range(8)]


def _die_before_mark(url: str, job: str, writer: int) -> None:
    """A writer process killed between writing a part and recording its mark."""
    import os

    def die(part: _exactly_once.NewPart) -> None:
        os._exit(3)

    _exactly_once.before_mark = die  # type: ignore[assignment]
    open_store(url).append("ns", job, EventBatch(writer, 0, steps(0, 8)))
    os._exit(0)  # not reached


@pytest.mark.slow
def test_writer_process_killed_between_write_and_mark(shared_store_url: str) -> None:
    job, w = uuid.uuid4().hex, uuid.uuid4().int >> 65
    p = mp.get_context("spawn").Process(target=_die_before_mark, args=(shared_store_url, job, w))
    p.start()
    p.join(120)
    assert p.exitcode == 3
    st = open_store(shared_store_url)  # the next process replays the dead one's journal
    st.append("ns", job, EventBatch(w, 0, steps(0, 8)))
    st.close()
    assert _stored(shared_store_url, job) == [(0, i) for i in range(8)]
