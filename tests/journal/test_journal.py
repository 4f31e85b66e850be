"""The journal: what is appended reaches the store exactly once, whatever happens to the
process or the storage on the way."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mlgoodput._journal import Journal
from mlgoodput._recovery import journal_dirs, recover_journals
from mlgoodput.events import Event, Kind
from mlgoodput.store import MemoryStore, open_store

SRC = str(Path(__file__).resolve().parents[2] / "src")
CHILD = str(Path(__file__).with_name("_child.py"))


def _events(store_url: str, job: str = "job", ns: str = "ns") -> list[Event]:
    st = open_store(store_url)
    try:
        return list(st.read(ns, job).columns.events())
    finally:
        if not store_url.startswith("memory://"):
            st.close()


def _segments(url: str) -> list[Path]:
    return [p for d in journal_dirs(url) if d.exists() for p in d.glob("*.seg")]


def test_append_flush_round_trip(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    j = Journal.for_stream(db, "ns", "job", 3)
    j.append(Kind.JOB_START, 10.0)
    j.append(Kind.STEP_START, 11.0, 0)
    j.append(Kind.CKPT_SAVE, 12.0, 5, 1.5)
    j.append(Kind.CUSTOM_START, 13.0, name="eval_step")
    j.append(Kind.SLICE_COUNTS, 14.0, attrs={"active": 2, "total": 4, "available": 3})
    assert j.flush(30)
    got = _events(db)
    assert got == [
        Event(Kind.JOB_START, 10.0, 3),
        Event(Kind.STEP_START, 11.0, 3, step=0),
        Event(Kind.CKPT_SAVE, 12.0, 3, step=5, value=1.5),
        Event(Kind.CUSTOM_START, 13.0, 3, name="eval_step"),
        Event(Kind.SLICE_COUNTS, 14.0, 3, attrs={"active": 2, "total": 4, "available": 3}),
    ]
    j.close()
    assert _segments("sqlite://" + db) == []  # everything shipped: nothing left on disk


def test_for_stream_shares_one_instance_per_stream(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    a = Journal.for_stream(db, "ns", "job", 0)
    b = Journal.for_stream("sqlite://" + db, "ns", "job", 0)
    c = Journal.for_stream(db, "ns", "job", 1)
    assert a is b and a is not c
    a.append(Kind.STEP_START, 1.0, 1)
    a.close()
    b.append(Kind.STEP_START, 2.0, 2)  # b still holds a use
    assert b.close()
    c.close()
    assert [e.step for e in _events(db)] == [1, 2]
    assert Journal.for_stream(db, "ns", "job", 0) is not a
    Journal.for_stream(db, "ns", "job", 0).close()


@pytest.mark.parametrize(("arg", "value"), [("namespace", ""), ("job", ""), ("host", -1)])
def test_for_stream_rejects_bad_names(tmp_path: Path, arg: str, value: object) -> None:
    kw: dict[str, object] = {"namespace": "ns", "job": "job", "host": 0, arg: value}
    with pytest.raises(ValueError, match=arg):
        Journal.for_stream(str(tmp_path / "s.db"), **kw)  # type: ignore[arg-type]


def test_unknown_store_scheme_is_rejected() -> None:
    with pytest.raises(ValueError, match="nosuch"):
        Journal.for_stream("nosuch://x", "ns", "job", 0)


def test_rotation_ships_and_deletes_full_segments(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    j = Journal(db, "ns", "job", 0, segment_size=4096 + 32 * 50)
    for i in range(1000):
        j.append(Kind.STEP_START, float(i), i, name="x" * (i % 7) if i % 3 else None)
    assert j.flush(30)
    assert len(_segments(j.url)) <= 2  # the active one and maybe a spare
    got = _events(db)
    assert [e.step for e in got] == list(range(1000))
    assert [e.name for e in got][:4] == [None, "x", "xx", None]
    j.close()
    assert _segments(j.url) == []


def test_sigkill_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    st = open_store(str(db))
    st.jobs()  # create the database
    st.close()
    # Hold the write lock so the child can ship nothing before it dies.
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    env = {**os.environ, "PYTHONPATH": SRC}
    p = subprocess.Popen([sys.executable, CHILD, str(db), "job", "3000"], stdout=subprocess.PIPE, env=env, text=True)
    try:
        assert p.stdout is not None
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGKILL)
        assert p.wait(30) == -signal.SIGKILL
    finally:
        if p.poll() is None:
            p.kill()
        blocker.execute("ROLLBACK")
        blocker.close()
    assert _events(str(db)) == []
    assert len(_segments("sqlite://" + str(db))) >= 1
    assert recover_journals(str(db)) == 3001
    got = _events(str(db))
    assert [e.step for e in got[:3000]] == list(range(3000))
    assert got[3000] == Event(Kind.CUSTOM_START, 5000.0, 0, name="eval", attrs={"k": [1, 2]})
    assert _segments("sqlite://" + str(db)) == []  # a dead process's files are removed
    assert recover_journals(str(db)) == 0
    assert len(_events(str(db))) == 3001


def test_recovery_of_a_live_journal_stores_nothing_twice(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    j = Journal(db, "ns", "job", 0, interval_s=3600)
    for i in range(100):
        j.append(Kind.STEP_START, float(i), i)
    assert recover_journals(db) == 100  # read from the live file, which stays
    assert len(_segments(j.url)) == 1
    for i in range(100, 150):
        j.append(Kind.STEP_START, float(i), i)
    assert j.flush(30)
    assert [e.step for e in _events(db)] == list(range(150))
    j.close()


def test_new_journal_recovers_dead_ones_of_its_store(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    env = {**os.environ, "PYTHONPATH": SRC}
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    p = subprocess.Popen([sys.executable, CHILD, str(db), "dead", "10"], stdout=subprocess.PIPE, env=env, text=True)
    assert p.stdout is not None
    assert p.stdout.readline().strip() == "ready"
    p.kill()
    p.wait(30)
    blocker.execute("ROLLBACK")
    blocker.close()
    j = Journal.for_stream(str(db), "ns", "other", 0)
    j.append(Kind.JOB_START, 1.0)
    assert j.flush(30)
    assert len(_events(str(db), "dead")) == 11
    j.close()


def test_locked_database_never_raises_and_loses_nothing(tmp_path: Path) -> None:
    db = tmp_path / "s.db"
    st = open_store(str(db))
    st.jobs()
    st.close()
    blocker = sqlite3.connect(db, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    j = Journal.for_stream(str(db), "ns", "job", 0)
    try:
        for i in range(500):
            j.append(Kind.STEP_START, float(i), i)
        assert j.flush(0.3) is False  # cannot ship now, and says so
        assert j.pending() == 500
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()
    assert j.flush(60)
    assert [e.step for e in _events(str(db))] == list(range(500))
    j.close()


def test_unwritable_store_path_recovers_later(tmp_path: Path) -> None:
    blocker = tmp_path / "notadir"
    blocker.write_text("a file where the store's directory should be")
    db = str(blocker / "s.db")
    j = Journal.for_stream(db, "ns", "job", 0)
    for i in range(200):
        j.append(Kind.STEP_START, float(i), i)
    assert j.flush(0.5) is False
    assert j.failures >= 1
    # the journal fell back to the per-user directory, so the events are on disk
    assert sum(1 for p in _segments(j.url) if "xdg" in str(p)) >= 1
    blocker.unlink()
    assert j.flush(60)
    assert [e.step for e in _events(db)] == list(range(200))
    j.close()


def test_no_journal_directory_keeps_events_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bad = tmp_path / "file"
    bad.write_text("x")
    monkeypatch.setenv("MLGOODPUT_JOURNAL_DIR", str(bad / "sub"))
    j = Journal.for_stream("memory://nodir", "ns", "job", 0)
    j.append(Kind.JOB_START, 1.0)
    assert j.flush(30)
    assert j.volatile == 1 and j.failures >= 1
    assert _events("memory://nodir") == [Event(Kind.JOB_START, 1.0, 0)]
    j.close()


def test_oversized_name_is_the_callers_error(tmp_path: Path) -> None:
    j = Journal.for_stream("memory://big", "ns", "job", 0)
    with pytest.raises(ValueError, match="name"):
        j.append(Kind.CUSTOM_START, 1.0, name="x" * 70000)
    j.close()


@pytest.mark.forks
def test_fork_child_gets_its_own_journal_file(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    j = Journal.for_stream(db, "ns", "job", 0)
    j.append(Kind.STEP_START, 1.0, 1)
    assert j.flush(30)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            for i in range(100, 200):
                j.append(Kind.STEP_START, float(i), i)
            code = 0 if j.flush(30) else 2
        finally:
            os._exit(code)
    for i in range(2, 50):
        j.append(Kind.STEP_START, float(i), i)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert j.flush(30)
    steps = sorted(e.step or 0 for e in _events(db))
    assert steps == list(range(1, 50)) + list(range(100, 200))
    j.close()


_names = st.one_of(st.none(), st.text(max_size=20))
_attrs = st.one_of(st.none(), st.dictionaries(st.text(max_size=5), st.integers(-10, 10), max_size=3))
_events_st = st.lists(
    st.tuples(
        st.sampled_from(list(Kind)),
        st.floats(0, 2e9, allow_nan=False),
        st.one_of(st.none(), st.integers(0, 2**62)),
        st.one_of(st.none(), st.floats(-1e9, 1e9, allow_nan=False)),
        _names,
        _attrs,
    ),
    max_size=60,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_events_st)
def test_property_whatever_is_appended_comes_out_the_same(evs: list[tuple]) -> None:  # type: ignore[type-arg]
    store = MemoryStore("memory://prop")
    j = Journal(store, "ns", "job", 7, segment_size=4096 + 256)
    for kind, t, step, value, name, attrs in evs:
        j.append(kind, t, step, value, name, attrs)
    assert j.flush(30)
    got = list(store.read("ns", "job").columns.events())
    want = [Event(k, t, 7, s, v, n, a or None) for k, t, s, v, n, a in evs]  # stores keep {} as None
    assert got == want
    j.close()


def test_damaged_journal_files_are_skipped(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    d = journal_dirs("sqlite://" + db)[0]
    d.mkdir(parents=True)
    (d / "1-00000000000000aa.seg").write_bytes(b"not a journal at all" * 300)
    j = Journal.for_stream(db, "ns", "job", 0)
    j.append(Kind.JOB_START, 1.0)
    assert j.flush(30)
    assert recover_journals(db) == 0
    assert _events(db) == [Event(Kind.JOB_START, 1.0, 0)]
    j.close()


def test_memory_store_objects_never_share_a_journal() -> None:
    a, b = MemoryStore(), MemoryStore()  # same URL "memory://", different stores
    ja = Journal.for_stream(a, "ns", "job", 0)
    jb = Journal.for_stream(b, "ns", "job", 0)
    assert ja is not jb
    ja.append(Kind.STEP_START, 1.0, 1)
    jb.append(Kind.STEP_START, 2.0, 2)
    assert ja.flush(30) and jb.flush(30)
    assert recover_journals(b) == 0
    assert [e.step for e in a.read("ns", "job").columns.events()] == [1]
    assert [e.step for e in b.read("ns", "job").columns.events()] == [2]
    ja.close()
    jb.close()


def test_threads_append_concurrently_without_loss(tmp_path: Path) -> None:
    import threading

    db = str(tmp_path / "s.db")
    j = Journal(db, "ns", "job", 0, segment_size=4096 + 32 * 300)

    def worker(t: int) -> None:
        for i in range(2000):
            j.append(Kind.STEP_START, float(i), t * 10_000 + i, name=None if i % 5 else f"t{t}")

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert j.flush(60)
    got = _events(db)
    assert sorted(e.step or 0 for e in got) == sorted(t * 10_000 + i for t in range(4) for i in range(2000))
    assert all(e.name in (None, f"t{(e.step or 0) // 10_000}") for e in got)
    j.close()


@pytest.mark.parametrize("attrs", [None, {"k": [1, 2], "s": "x"}])
def test_a_whole_record_whose_length_reads_zero_is_kept(tmp_path: Path, attrs: dict[str, object] | None) -> None:
    """The length is written last. A record whose marker and checksum hold but whose length
    reads zero (damaged, or written whole a moment before its writer died) is kept; one whose
    checksum fails is a reported loss; bytes without a marker (an append cut before its marker
    and checksum were written) are a torn append: nothing was committed, nothing is lost."""
    from mlgoodput._segment import LEN, SYNC, TAG, create_segment, decode_records, encode_extra, write_record
    from mlgoodput._segment_columns import decode_columns

    seg = create_segment(tmp_path, 4096 + 4096, 0, {"store": "x"})
    off = seg.off
    for i in range(3):
        off += write_record(seg.buf, off, i, int(Kind.STEP_START), 0, 0, float(i), i, float("nan"), b"")
    flags, extra, name_len = encode_extra("eval", attrs)
    write_record(seg.buf, off, 3, int(Kind.CUSTOM_START), flags, name_len, 9.0, 9, float("nan"), extra)
    LEN.pack_into(seg.buf, off, 0)
    for decode in (decode_records, decode_columns):
        d = decode(seg.buf, seg.off, seg.size, 0, 100)
        got = d.events if decode is decode_records else list(d.columns.events())  # type: ignore[attr-defined]
        if len(got) == 3:  # a decoder may stop before it and take it on the next call
            d = decode(seg.buf, d.end, seg.size, 0, 100, d.next_index)
            got = [*got, *(d.events if decode is decode_records else d.columns.events())]  # type: ignore[attr-defined]
        assert [e.step for e in got] == [0, 1, 2, 9] and d.lost == 0
        assert got[3].name == "eval" and got[3].attrs == attrs
    buf = seg.buf
    buf[off + 20] ^= 0xFF  # its time damaged as well: the checksum fails, a loss is reported
    d = decode_records(seg.buf, seg.off, seg.size, 0, 100)
    rest = decode_records(seg.buf, d.end, seg.size, 0, 100, d.next_index)
    assert rest.events == [] and rest.at_end and rest.lost == 1
    TAG.pack_into(buf, off + 4, 0, 0)  # no marker: an append cut before it committed anything
    rest = decode_records(seg.buf, d.end, seg.size, 0, 100, d.next_index)
    assert rest.events == [] and rest.at_end and rest.lost == 0
    TAG.pack_into(buf, off + 4, SYNC, 0)
    LEN.pack_into(seg.buf, off, 10_000_000)  # an impossible length: a damaged last record, reported
    rest = decode_records(seg.buf, d.end, seg.size, 0, 100, d.next_index)
    assert rest.events == [] and rest.at_end and rest.lost == 1
    seg.release(delete=True)


def test_values_that_do_not_fit_are_refused_and_leave_nothing() -> None:
    j = Journal.for_stream("memory://fit", "ns", "job", 0)
    with pytest.raises(ValueError, match="step"):
        j.append(Kind.STEP_START, 1.0, 2**64)
    with pytest.raises(ValueError, match="time"):
        j.append(Kind.STEP_START, "soon", 1)  # type: ignore[arg-type]
    j.append(Kind.STEP_START, 2.0, 2)
    assert j.flush(30)
    assert _events("memory://fit") == [Event(Kind.STEP_START, 2.0, 0, step=2)]
    j.close()


@pytest.fixture
def full_disk(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A 2 MiB tmpfs filled to the last byte (needs the right to mount, as root in a container)."""
    mnt = tmp_path / "full"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs to fill up here: {r.stderr.strip()}")
    try:
        filler = mnt / "filler"
        with open(filler, "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        yield mnt, filler
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_full_disk_never_raises_and_loses_nothing(full_disk: tuple[Path, Path]) -> None:
    mnt, filler = full_disk
    db = str(mnt / "s.db")
    j = Journal.for_stream(db, "ns", "job", 0)
    for i in range(300):
        j.append(Kind.STEP_START, float(i), i)
    assert j.flush(0.5) is False
    assert j.failures >= 1
    # the journal went to the per-user directory, on a disk with room
    assert any("xdg" in str(p) for p in _segments(j.url))
    filler.unlink()
    assert j.flush(60)
    assert j.volatile == 0
    assert [e.step for e in _events(db)] == list(range(300))
    j.close()
