"""The SQLite store's pages of a stream: walked in rowid order when the whole store holds few
rows after the cursor, found through the stream's index otherwise; the same rows either way,
whatever other streams' rows lie between."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import _sqlite
from mlgoodput.store._sqlite import SQLiteStore


def _by_index(conn: sqlite3.Connection, ns: str, job: str, cursor: int, limit: int) -> list[object]:
    return conn.execute(
        "SELECT seq, kinds, times, hosts, steps, vals, names, attrs FROM chunks"
        " WHERE ns = ? AND job = ? AND seq > ? ORDER BY seq LIMIT ?",
        (ns, job, cursor, limit),
    ).fetchall()


def test_pages_are_the_streams_rows_either_way(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    st = SQLiteStore(tmp_path / "s.db")
    rnd = random.Random(7)
    streams = [("goodput", "a"), ("goodput", "b"), ("other", "a")]
    seq = dict.fromkeys(range(6), 0)
    for i in range(240):  # the three streams' rows interleaved at random, a few runs of one
        w = rnd.randrange(6)
        ns, job = streams[w % 3]
        events = [Event(Kind.STEP_START, 1000.0 + i + k * 0.1, w, step=i * 3 + k) for k in range(rnd.randrange(1, 4))]
        st.append(ns, job, EventBatch(w, seq[w], events))
        seq[w] += len(events)
    conn = sqlite3.connect(tmp_path / "s.db")
    top = conn.execute("SELECT max(seq) FROM chunks").fetchone()[0]
    walked = []
    for ns, job in streams:
        for cursor in [0, 1, top // 2, top - 40, top - 7, top - 1, top, top + 5]:
            for limit in (1, 5, 20, 64, 1000):
                got = _sqlite._page(ns, job, cursor, limit, conn)
                assert got == _by_index(conn, ns, job, cursor, limit), (ns, job, cursor, limit)
                walked.append(top - cursor <= 2 * limit)
    assert any(walked) and not all(walked)  # (both ways were taken)
    # and whole reads through the store's pages (small pages: many of them) give every row once
    monkeypatch.setattr(_sqlite, "PAGE_ROWS", 3)
    monkeypatch.setattr(_sqlite, "_MAX_PAGE_ROWS", 7)
    for ns, job in streams:
        for cursor in (0, top // 3, top - 30):
            rows = [r for page in st.scan_pages(ns, job, cursor) for r in page]
            assert rows == _by_index(conn, ns, job, cursor, 10**6)
    conn.close()
    st.close()
