"""A saved state of many pieces costs PostgreSQL a transaction per group of pieces, not one a
piece, and a reader that wants only the first piece fetches only that one."""

from __future__ import annotations

import uuid

from mlgoodput.store import open_store
from mlgoodput.store._postgres import PostgresStore


def test_many_pieces_save_in_groups_and_read_ahead_in_order(postgres_url: str) -> None:
    st = open_store(postgres_url)
    assert isinstance(st, PostgresStore)
    job = uuid.uuid4().hex
    pieces = [f"piece {i}".encode() * (1 + i % 7) for i in range(1300)]
    before = st.transactions
    st.save_state("ns", job, iter(pieces))
    saved_with = st.transactions - before
    assert saved_with <= 6, saved_with  # schema check, 3 groups of at most 512, the flip

    got = st.load_state("ns", job)
    assert got is not None
    before = st.transactions
    assert list(got) == pieces
    read_with = st.transactions - before
    assert read_with <= 1300 // 64 + 8, read_with  # 1, 2, 4, ..., then 64 a query

    head_only = st.load_state("ns", job)
    assert head_only is not None
    first = head_only.piece(0)
    assert first == pieces[0]
    assert head_only.piece(900) == pieces[900]  # out of order: fetched on its own
    assert head_only.piece(901) == pieces[901]
    st.close()


def test_a_replaced_generation_reads_as_missing_pieces(postgres_url: str) -> None:
    st = open_store(postgres_url)
    job = uuid.uuid4().hex
    st.save_state("ns", job, [b"a", b"b", b"c"])
    old = st.load_state("ns", job)
    assert old is not None and old.piece(0) == b"a"
    st.save_state("ns", job, [b"x"])
    st.save_state("ns", job, [b"y"])  # the first generation is dropped now
    assert old.piece(2) is None  # not a stale cached piece: read again and found gone
    st.close()
