"""Optional store abilities, same contract everywhere: saved state per stream, paged reads,
and the stream position a saved state is checked against."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from mlgoodput.events import EventBatch
from mlgoodput.store import open_store
from mlgoodput.store._state import PAGE_ROWS, PagedStore, StateListing, StateStore
from tests.store.test_store_contract import steps


@pytest.fixture(params=["memory", "sqlite", "postgres"])  # the stores that have these abilities
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "memory":
        yield f"memory://state-{uuid.uuid4().hex}"
    elif request.param == "sqlite":
        yield str(tmp_path / "state.db")
    else:
        yield request.getfixturevalue("postgres_url")


def test_saved_state_round_trips_and_is_replaced(store_url: str) -> None:
    st = open_store(store_url)
    assert isinstance(st, StateStore)
    job = uuid.uuid4().hex
    assert st.load_state("ns", job) is None
    big = bytes(range(256)) * 40_000  # 10 MB: several pieces in more than one transaction
    st.save_state("ns", job, iter([b"head", big, b"", b"tail"]))
    got = st.load_state("ns", job)
    assert got is not None and list(got) == [b"head", big, b"", b"tail"]
    st.save_state("ns", job, [b"second"])
    got = st.load_state("ns", job)
    assert got is not None and list(got) == [b"second"]
    assert st.load_state("ns", "other") is None
    st.close()


def test_single_piece_states_of_a_namespace_in_one_read(store_url: str) -> None:
    st = open_store(store_url)
    assert isinstance(st, StateListing)
    ns = f"ns-{uuid.uuid4().hex}"
    assert st.load_single_states(ns) == {}
    st.save_state(ns, "a", [b"one"])
    st.save_state(ns, "b", [b"two", b"pieces"])  # not one piece: left to load_state
    st.save_state(ns, "c", [b"first"])
    st.save_state(ns, "c", [b"second"])  # the current one only
    st.save_state("other", "d", [b"elsewhere"])
    assert st.load_single_states(ns) == {"a": b"one", "c": b"second"}
    st.close()


def test_saved_pieces_read_by_index_and_kept_for_one_newer_save(store_url: str) -> None:
    st = open_store(store_url)
    assert isinstance(st, StateStore)
    job = uuid.uuid4().hex
    pieces = [b"header", b"a" * 1000, b"", b"b" * 3]
    st.save_state("ns", job, iter(pieces))
    got = st.load_state("ns", job)
    assert got is not None
    assert [got.piece(i) for i in (3, 0, 1, 2)] == [pieces[3], pieces[0], pieces[1], pieces[2]]  # type: ignore[attr-defined]
    assert got.piece(4) is None and got.piece(-1) is None  # type: ignore[attr-defined]
    st.save_state("ns", job, [b"newer", b"n1"])
    newer = st.load_state("ns", job)
    assert newer is not None and list(newer) == [b"newer", b"n1"]
    # replaced once under the reader: its generation is kept, so it still reads its own bytes
    assert [got.piece(i) for i in (2, 0, 3, 1)] == [pieces[2], pieces[0], pieces[3], pieces[1]]  # type: ignore[attr-defined]
    st.save_state("ns", job, [b"newest"])
    # replaced twice: gone, never another save's bytes; the reader of the previous one still reads
    assert [got.piece(i) for i in range(4)] == [None] * 4  # type: ignore[attr-defined]
    assert [newer.piece(i) for i in range(2)] == [b"newer", b"n1"]  # type: ignore[attr-defined]
    st.save_state("ns", job, [b"last"])
    assert newer.piece(0) is None  # type: ignore[attr-defined]
    got = st.load_state("ns", job)
    assert got is not None and list(got) == [b"last"]
    st.close()


def test_paged_reads_and_stream_position(store_url: str) -> None:
    st = open_store(store_url)
    job = uuid.uuid4().hex
    w = uuid.uuid4().int >> 65
    n_chunks = PAGE_ROWS * 2 + 3
    for k in range(n_chunks):
        st.append("ns", job, EventBatch(w, k * 10, steps(k * 10, 10)))
    st.append("ns", "noise", EventBatch(w + 1, 0, steps(0, 4)))
    whole = st.read("ns", job)
    head, upto = st.stream_position("ns", job, whole.cursor)  # type: ignore[attr-defined]
    assert head >= whole.cursor and upto == 10 * n_chunks
    if isinstance(st, PagedStore):
        paged = list(st.scan("ns", job, 0))
        assert [c.steps.tolist() for _, c in paged] == [p.steps.tolist() for p in whole.parts]
        assert paged[-1][0] == whole.cursor
        mid = paged[4][0]
        assert st.stream_position("ns", job, mid)[1] == 50  # type: ignore[attr-defined]
        assert [cur for cur, _ in st.scan("ns", job, mid)] == [cur for cur, _ in paged[5:]]
    st.close()


def test_append_many_stores_each_writers_run_once(tmp_path: object) -> None:
    from mlgoodput.store import SQLiteStore

    st = SQLiteStore(f"{tmp_path}/many.db")
    a, b = 11, 22
    st.append_many("ns", "j", [EventBatch(a, 0, steps(0, 5)), EventBatch(b, 0, steps(100, 3))])
    # a replay overlapping what is stored, beside new runs, in one call
    st.append_many("ns", "j", [EventBatch(a, 3, steps(3, 4)), EventBatch(b, 0, steps(100, 3)), EventBatch(a, 7, [])])
    got = sorted(e.step for e in st.read("ns", "j").columns.events())
    assert got == [0, 1, 2, 3, 4, 5, 6, 100, 101, 102]
    assert [j.events for j in st.jobs()] == [10]
    st.close()
