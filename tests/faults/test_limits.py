"""Smaller checks behind the trials: old journal files, bad frames, lock waits, odd store paths."""

from __future__ import annotations

import json
import logging
import socket
import sqlite3
import struct
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mlgoodput._recovery import journal_dirs, recover_journals
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import SQLiteStore, StoreError
from waiting import wait_for


def test_a_version_1_journal_file_is_still_recovered(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    url = "sqlite://" + str(db)
    meta = json.dumps({"store": url, "namespace": "ns", "job": "job", "host": 2}).encode()
    head = struct.pack("<4sIqqqiiBxxxI", b"MLGJ", 1, 77, 0, 4096, 1, 2, 0, len(meta)) + meta
    recs = b"".join(
        struct.pack("<IBBHdqd", 32, int(Kind.STEP_START), 0, 0, float(i), i, float("nan")) for i in range(5)
    )
    d = journal_dirs(url)[0]
    d.mkdir(parents=True)
    (d / "1-000000000000004d.seg").write_bytes(head.ljust(4096, b"\0") + recs + bytes(4096))
    assert recover_journals(str(db)) == 5
    got = list(SQLiteStore(str(db)).read("ns", "job").columns.events())
    assert got == [Event(Kind.STEP_START, float(i), 2, i) for i in range(5)]


def test_invalid_utf8_in_a_console_frame_is_a_bad_frame() -> None:
    pytest.importorskip("msgspec")
    from mlgoodput.console import ConsoleServer
    from mlgoodput.console import _protocol as P

    srv = ConsoleServer("127.0.0.1:0", store="memory://utf8", display=False, job="utf8")
    port = int(srv.start().rsplit(":", 1)[1])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.recv(4096)  # the challenge
            # a hello whose hostname is a msgpack str holding invalid UTF-8
            body = b"\x97\xa5hello\x01\x01\x01\xa2\xff\xfe\xa0\xc4\x00"
            s.sendall(P.HEADER.pack(len(body)) + body)
            s.settimeout(5)
            while s.recv(4096):
                pass
        assert wait_for(lambda: srv.bad_frames + srv.refused >= 1, 5)
        assert not any(k.startswith("error") for k in srv.refusals())  # not an internal error
    finally:
        srv.stop(5)


def test_a_hello_larger_than_the_preauth_limit_is_refused_before_it_is_read() -> None:
    pytest.importorskip("msgspec")
    from mlgoodput.console import ConsoleServer
    from mlgoodput.console import _protocol as P

    srv = ConsoleServer("127.0.0.1:0", store="memory://big", display=False, job="big")
    port = int(srv.start().rsplit(":", 1)[1])
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
            s.recv(4096)
            s.sendall(P.HEADER.pack(P.MAX_HELLO_BYTES + 1))
            s.settimeout(5)
            assert s.recv(4096) == b""  # closed at once, nothing more read
        assert srv.bad_frames == 1
    finally:
        srv.stop(5)


@pytest.mark.slow
def test_a_long_sqlite_lock_wait_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    db = tmp_path / "s.db"
    st = SQLiteStore(str(db))
    st.jobs()
    holder = sqlite3.connect(str(db), isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(1.3, lambda: holder.execute("ROLLBACK"))
    release.start()
    with caplog.at_level(logging.WARNING, logger="mlgoodput"):
        st.append("ns", "job", EventBatch(1, 0, [Event(Kind.JOB_START, 1.0, 0)]))
    assert any("waiting for its lock" in r.getMessage() for r in caplog.records)
    release.join()  # the holder is closed only after its ROLLBACK ran (a connection used by two threads at once can crash)
    holder.close()
    st.close()


def test_a_store_path_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a regular file"):
        SQLiteStore("/dev/null").jobs()
    with pytest.raises(StoreError, match="not a regular file"):
        SQLiteStore(str(tmp_path)).jobs()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_sqlite_store_identity_changes_with_the_file(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    st = SQLiteStore(str(db))
    a = st.identity()
    assert a == st.identity()
    db.unlink()
    with pytest.raises(StoreError, match="deleted"):
        st.identity()
    b = st.identity()  # a fresh store at the path, with a store id of its own
    assert b != a and b.split("@")[0] != a.split("@")[0]
    st.close()


def test_jobs_and_report_show_events_lost_to_damage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from mlgoodput.cli import main

    from . import trials as T

    db = tmp_path / "s.db"
    jdir = journal_dirs("sqlite://" + str(db))[0]
    jdir.mkdir(parents=True)
    path, _ = T._write_segment(jdir, "sqlite://" + str(db), 50)
    with open(path, "r+b") as f:
        f.seek(4096 + 48 * 10 + 20)  # inside the 11th record
        f.write(b"\xff\xff")
    recover_journals(str(db))
    assert main(["jobs", "--store", str(db)]) == 0
    out = capsys.readouterr().out
    assert "warning: 1 events of job job (logger ns) were lost" in out
    main(["report", "--job", "job", "--store", str(db)])
    assert "were lost to damaged journal records" in capsys.readouterr().out


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(
    names=st.lists(st.one_of(st.none(), st.text(max_size=12)), min_size=1, max_size=40),
    flips=st.lists(st.tuples(st.integers(0, 10_000), st.integers(1, 255)), min_size=1, max_size=3),
    sealed=st.booleans(),
)
def test_property_damaged_bytes_are_skipped_counted_and_never_wrong(
    names: list[str | None], flips: list[tuple[int, int]], sealed: bool
) -> None:
    """A sealed segment's header gives its exact record count, so any damage is counted
    exactly; without it (a segment whose writer died) one damaged byte is."""
    from mlgoodput._segment import HEADER_SIZE, decode_records, encode_extra, write_record

    buf = bytearray(HEADER_SIZE + 64 * len(names) + 2048)
    off = HEADER_SIZE
    want = []
    last = off
    for i, name in enumerate(names):
        last = off
        flags, extra, nl = (
            encode_extra(name, {"i": i} if i % 3 == 0 else None) if (name is not None or i % 3 == 0) else (0, b"", 0)
        )
        off += write_record(buf, off, i, int(Kind.STEP_START), flags, nl, float(i), i, 1.5 * i, extra)
        want.append(Event(Kind.STEP_START, float(i), 0, i, 1.5 * i, name, {"i": i} if i % 3 == 0 else None))
    end = off
    damaged = set()
    for at, x in flips if sealed else flips[:1]:
        p = HEADER_SIZE + at % (end - HEADER_SIZE)
        if not sealed and last <= p < last + 4:
            # the last record's length: damage that reads as zero looks exactly like an append
            # cut short by its process's death (never committed), a documented limit; skip it
            continue
        buf[p] ^= x
        damaged.add(p)
    got: list[Event] = []
    lost = 0
    off, nxt = HEADER_SIZE, 0
    while True:
        d = decode_records(bytes(buf), off, len(buf), 0, 1 << 20, nxt, len(names) if sealed else None, sealed)
        got += d.events
        lost += d.lost
        off, nxt = d.end, d.next_index
        if d.at_end:
            break
    assert all(e == want[e.step or 0] for e in got)  # nothing wrong is ever returned
    assert len(got) + lost == len(names)  # every record is either returned or counted lost
    assert lost <= len(damaged)  # at most one record per damaged byte
