"""One contract, every store: idempotent appends, cursors, listings, many writers at once."""

from __future__ import annotations

import multiprocessing as mp
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore, Store, StoreError, open_store


@pytest.fixture(params=["memory", "sqlite", "postgres", "cloudlogging"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "cloudlogging":  # the real google-cloud-logging client, a fake service
        yield request.getfixturevalue("cloud_logging_url")
    elif request.param == "memory":
        yield f"memory://contract-{uuid.uuid4().hex}"
    elif request.param == "sqlite":
        yield str(tmp_path / "contract.db")
    else:
        yield request.getfixturevalue("postgres_url")


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
    evs = [*steps(0, 6), Event(Kind.CUSTOM_START, 1010.0, 0, name="eval"),
           Event(Kind.SLICE_COUNTS, 1011.0, 0, attrs={"active": 2}), *steps(6, 4, t0=1006.0)]
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


@pytest.fixture(params=["sqlite", "postgres", "cloudlogging"])
def shared_store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Stores that several processes can open (a memory store lives in one process)."""
    if request.param == "cloudlogging":
        return str(request.getfixturevalue("cloud_logging_url"))
    if request.param == "sqlite":
        return str(tmp_path / "shared.db")
    return str(request.getfixturevalue("postgres_url"))


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
