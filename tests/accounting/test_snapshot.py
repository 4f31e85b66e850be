"""Saved accounting state: a new calculator starts from it and reads only newer events; a state
that fails a check is never used."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given

from mlgoodput.accounting import Engine, GoodputCalculator, GoodputReport, _snapshot
from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store import MemoryStore, SQLiteStore
from mlgoodput.store._columns import Columns, StoredRow
from tests.accounting.test_properties import SETTINGS, assert_same, jobs

T0 = 1_700_000_000.0
NOW = T0 + 5000.0


class CountingSQLite(SQLiteStore):
    """Counts the events each paged read returns (as stored: the calculator reads them so)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.read_events = 0

    def scan_pages(self, namespace: str, job: str, cursor: int = 0) -> Iterator[list[StoredRow]]:
        for rows in super().scan_pages(namespace, job, cursor):  # `scan` reads through it too
            self.read_events += sum(len(r[1]) for r in rows)
            yield rows


def _job(first: int, n: int, hosts: int = 3) -> list[Event]:
    ev = [Event(Kind.JOB_START, T0 + h * 0.1, host=h) for h in range(hosts)] if first == 0 else []
    for k in range(first, first + n):
        for h in range(hosts):
            ev.append(Event(Kind.STEP_START, T0 + 10 + k * (1.0 + 0.01 * h) + (k % 7) * 0.03, host=h, step=k))
        if k % 50 == 25:
            ev += [
                Event(Kind.CUSTOM_START, T0 + 10.2 + k, name="eval"),
                Event(Kind.CUSTOM_END, T0 + 10.5 + k, name="eval"),
            ]
    return ev


def _calc(store: object, snapshot: bool = True) -> GoodputCalculator:
    return GoodputCalculator("j", "l", store=store, clock=lambda: NOW, snapshot=snapshot)


def _report(calc: GoodputCalculator) -> GoodputReport:
    return calc.report()


@pytest.fixture(autouse=True)
def _save_always(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "always")


def _fill(store: SQLiteStore | MemoryStore, first: int, n: int, writer: int) -> int:
    ev = _job(first, n)
    store.append("l", "j", EventBatch(writer, 0, ev))
    return len(ev)


def test_a_new_calculator_starts_from_the_saved_state(tmp_path: Path) -> None:
    st = CountingSQLite(tmp_path / "s.db")
    n1 = _fill(st, 0, 400, writer=1)
    first = _report(_calc(st))
    assert st.read_events == n1
    n2 = _fill(st, 400, 30, writer=2)
    st.read_events = 0
    again = _calc(st)
    r = _report(again)
    assert st.read_events == n2  # only what came after the saved state
    fresh = _report(_calc(st, snapshot=False))
    assert r == fresh and r != first
    assert len(r.hosts) == 3 and r.hosts == fresh.hosts


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE state_pieces SET data = CAST(zeroblob(length(data)) AS BLOB) WHERE i = 1",  # bytes
        "DELETE FROM state_pieces WHERE i = 2",  # a missing piece
        'UPDATE state_pieces SET data = CAST(\'{"magic":"x"}\' AS BLOB) WHERE i = 0',  # not ours
        "UPDATE state_pieces SET data = CAST(replace(CAST(data AS TEXT), '\"format\":', '\"format\":9') AS BLOB) WHERE i = 0",
        "UPDATE state_pieces SET data = CAST(replace(CAST(data AS TEXT), '\"cursor\":', '\"cursor\":9') AS BLOB) WHERE i = 0",
        "UPDATE state_pieces SET data = CAST(replace(CAST(data AS TEXT), '\"events\":', '\"events\":1') AS BLOB) WHERE i = 0",
        'UPDATE state_pieces SET data = CAST(replace(CAST(data AS TEXT), \'"job":"j"\', \'"job":"k"\') AS BLOB) WHERE i = 0',
        # a header figure no other check covers: the header's own checksum catches it
        "UPDATE state_pieces SET data = CAST(replace(CAST(data AS TEXT), '\"max_time\":', '\"max_time\":9') AS BLOB) WHERE i = 0",
    ],
)
def test_a_damaged_or_stale_state_is_rebuilt_not_trusted(tmp_path: Path, damage: str) -> None:
    path = tmp_path / "s.db"
    st = CountingSQLite(path)
    n1 = _fill(st, 0, 200, writer=1)
    _report(_calc(st))
    n2 = _fill(st, 200, 20, writer=2)
    with sqlite3.connect(path) as conn:
        assert conn.execute(damage).rowcount == 1
    st.read_events = 0
    r = _report(_calc(st))
    assert st.read_events == n1 + n2  # the whole job again
    assert r == _report(_calc(st, snapshot=False))


def test_a_state_from_another_store_or_ahead_of_the_store_is_not_used() -> None:
    a, b = MemoryStore("memory://snap"), MemoryStore("memory://snap")
    for st in (a, b):
        _fill(st, 0, 100, writer=1)
    _fill(a, 100, 100, writer=2)
    _report(_calc(a))
    b._states = dict(a._states)  # the same URL, but b holds fewer chunks than a's cursor
    calc = _calc(b)
    assert _report(calc) == _report(_calc(b, snapshot=False))
    assert calc._engine.timeline.events == sum(len(c) for _, _, c in b._chunks)
    c = MemoryStore("memory://snap")
    _fill(c, 0, 101, writer=1)  # as many chunks, other events: the counts differ
    _fill(c, 101, 99, writer=2)
    c._states = dict(a._states)
    assert _report(_calc(c)) == _report(_calc(c, snapshot=False))


def test_off_means_nothing_saved_and_nothing_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "0")
    st = CountingSQLite(tmp_path / "s.db")
    _fill(st, 0, 50, writer=1)
    _report(_calc(st, snapshot=None))
    assert st.load_state("l", "j") is None
    with pytest.raises(TypeError, match="snapshot"):
        GoodputCalculator("j", "l", store=st, snapshot="yes")  # type: ignore[arg-type]


def test_a_store_that_cannot_save_still_answers(tmp_path: Path) -> None:
    class ReadOnly(SQLiteStore):
        def save_state(self, namespace: str, job: str, pieces: object) -> None:
            conn = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            try:
                conn.execute("CREATE TABLE x (y)")
            except sqlite3.Error as e:
                from mlgoodput.store import StoreError

                raise StoreError(str(e)) from e
            finally:
                conn.close()

    st = ReadOnly(tmp_path / "s.db")
    _fill(st, 0, 50, writer=1)
    r = _report(_calc(st))
    assert r.last_step == 49 and st.load_state("l", "j") is None


@pytest.mark.slow
@SETTINGS
@given(jobs())
def test_a_restored_engine_answers_like_the_original(job: tuple[list[Event], float]) -> None:
    events, q = job
    half = len(events) // 2
    e = Engine()
    e.timeline.ingest(Columns.from_events(events[:half]))
    e.report("j", "l", q)
    e.host_stats(q)
    pieces = iter(list(_snapshot.dump(e, url="memory://x", namespace="l", job="j", cursor=7)))
    head = _snapshot.header(next(pieces))
    assert head["cursor"] == 7
    r = _snapshot.load(head, pieces, stall_factor=3.0)
    for eng in (e, r):
        eng.timeline.ingest(Columns.from_events(events[half:]))
    assert_same(r.report("j", "l", q), e.report("j", "l", q))


@pytest.mark.slow
@SETTINGS
@given(jobs())
def test_what_the_last_query_derived_is_restored_exactly(job: tuple[list[Event], float]) -> None:
    """The saved activities, time partition and productivity scan give the answers a fresh
    engine computes from the events, at the saved query time and later, whole job and window."""
    from mlgoodput.accounting._calculator import _with_productivity

    events, q = job
    e = Engine()
    e.timeline.ingest(Columns.from_events(events))
    e.report("j", "l", q)
    pieces = iter(list(_snapshot.dump(e, url="memory://x", namespace="l", job="j", cursor=7)))
    saved = _snapshot.Saved(_snapshot.header(next(pieces)), pieces, stall_factor=3.0)
    r = saved.engine()
    assert saved.facts is not None
    fresh = Engine()
    fresh.timeline.ingest(Columns.from_events(events))
    late = max(q, fresh.timeline.max_time)
    for at in (q, late, late + 1000.0):
        assert r.report("j", "l", at) == fresh.report("j", "l", at)  # bit for bit
        assert r.report("j", "l", at, start=at - 50.0) == fresh.report("j", "l", at, start=at - 50.0)
    for at in (late, late + 1000.0):
        mine = _with_productivity(r, r.report("j", "l", at), at, None, saved.facts)
        assert mine == _with_productivity(fresh, fresh.report("j", "l", at), at, None)


# -- lazily read state ------------------------------------------------------------------------
def _long_job(n: int, *, ended: bool) -> list[Event]:
    """One host... and a second one, so per-host gaps are saved too; an eval every 500 steps."""
    ev = [Event(Kind.JOB_START, T0 + h * 0.1, host=h) for h in range(2)]
    for k in range(n):
        for h in range(2):
            ev.append(Event(Kind.STEP_START, T0 + 10 + k * (1.0 + 0.01 * h) + (k % 13) * 0.07, host=h, step=k))
        if k % 500 == 250:
            ev += [
                Event(Kind.CUSTOM_START, T0 + 10.2 + k, name="eval"),
                Event(Kind.CUSTOM_END, T0 + 10.6 + k, name="eval"),
            ]
    if ended:
        ev += [Event(Kind.JOB_END, T0 + 20 + n * 1.02, host=h) for h in range(2)]
    return ev


def _lazy_sections(path: Path) -> dict[str, tuple[int, int]]:
    """Section name -> (first piece index in the store, number of pieces) of the saved state."""
    with sqlite3.connect(path) as conn:
        first = conn.execute("SELECT data FROM state_pieces WHERE ns = 'l' AND job = 'j' AND i = 0").fetchone()[0]
    head = _snapshot.header(bytes(first))
    out = {}
    for name, code, n, at in head["sections"]:
        size = n * (1 if code == "B" else 8)
        out[name] = (at + 1, max(1, -(-size // _snapshot.PIECE)))
    return out


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_snapshot, "PIECE", 4096)  # 512 values a piece: a bucket spans several


@pytest.mark.usefixtures("small_pieces")
def test_a_lazily_read_state_answers_like_a_full_read_after_new_events(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    st = CountingSQLite(tmp_path / "s.db")
    ev = _long_job(20_000, ended=False)
    st.append("l", "j", EventBatch(1, 0, ev[: len(ev) - 300]))
    _report(_calc(st))
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "1")  # no save after 300 events (a save reads it all)
    st.append("l", "j", EventBatch(2, 0, ev[len(ev) - 300 :]))
    st.read_events = 0
    lazy = _calc(st)
    r = _report(lazy)
    assert st.read_events == 300  # only the new events
    e = lazy._engine
    assert e.derived is not None
    ordered = e.derived.ordered
    assert 0 < ordered.loaded() < len(ordered.bucket_sizes()[0]) // 2  # most buckets never read
    full = _calc(st, snapshot=False)
    assert r == _report(full)
    assert lazy.get_signed_step_deviation(last_n=50) == full.get_signed_step_deviation(last_n=50)
    # everything read, as a save reads it, gives the same state as the full read
    assert ordered.values() == full._engine.derived.ordered.values()  # type: ignore[union-attr]
    assert {h: s.diffs.values() for h, s in e.host_steps.items()} == {
        h: s.diffs.values() for h, s in full._engine.host_steps.items()
    }


def test_a_finished_job_with_nothing_new_is_answered_from_the_header(tmp_path: Path) -> None:
    st = CountingSQLite(tmp_path / "s.db")
    st.append("l", "j", EventBatch(1, 0, _long_job(3000, ended=True)))
    first = _report(_calc(st))
    st.read_events = 0
    again = _calc(st)
    r = _report(again)
    assert again._pending is not None  # no engine was built: the saved answer
    assert st.read_events == 0
    assert r == first == _report(_calc(st, snapshot=False))
    assert r.to_dict() == first.to_dict()
    r.badput_s.clear()  # type: ignore[attr-defined]  # each answer is the caller's own
    assert _report(again) == first
    # anything else builds the engine from the saved state and agrees
    assert again.report(start=T0 + 100) == _calc(st, snapshot=False).report(start=T0 + 100)
    assert again._pending is None


def test_a_running_job_is_not_answered_from_the_header(tmp_path: Path) -> None:
    st = CountingSQLite(tmp_path / "s.db")
    st.append("l", "j", EventBatch(1, 0, _long_job(3000, ended=False)))
    _report(_calc(st))
    later = GoodputCalculator("j", "l", store=st, clock=lambda: NOW + 777.0)
    r = later.report()  # the running step runs on: the saved answer would be stale
    assert later._pending is None
    assert r == GoodputCalculator("j", "l", store=st, clock=lambda: NOW + 777.0, snapshot=False).report()


@pytest.mark.usefixtures("small_pieces")
def test_a_running_job_with_nothing_new_reads_no_gaps_of_its_hosts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The hosts' step statistics are saved in the header: a later report of a running job
    that finds nothing new takes them as saved, without reading any host's gaps (each
    damaged here: read, they would fail their check and the job be read again)."""
    path = tmp_path / "s.db"
    st = CountingSQLite(path)
    st.append("l", "j", EventBatch(1, 0, _long_job(3000, ended=False)))
    first = _report(_calc(st))
    assert len(first.hosts) == 2
    gaps = [v for k, v in _lazy_sections(path).items() if k.startswith("gaps.") and k.count(".") == 1]
    assert len(gaps) == 2
    with sqlite3.connect(path) as conn:
        for at, count in gaps:
            conn.execute(
                "UPDATE state_pieces SET data = CAST(zeroblob(length(data)) AS BLOB) WHERE i >= ? AND i < ?",
                (at, at + count),
            )
    st.read_events = 0
    caplog.set_level("WARNING", logger="mlgoodput")
    later = GoodputCalculator("j", "l", store=st, clock=lambda: NOW + 777.0)
    r = later.report()
    assert st.read_events == 0 and not [m for m in caplog.messages if "damaged" in m]
    assert r.hosts == first.hosts
    assert r == GoodputCalculator("j", "l", store=st, clock=lambda: NOW + 777.0, snapshot=False).report()


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize("ended", [False, True])
def test_a_damaged_piece_found_on_lazy_access_means_a_full_rebuild(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, ended: bool
) -> None:
    path = tmp_path / "s.db"
    st = CountingSQLite(path)
    ev = _long_job(20_000, ended=ended)
    n1 = len(ev) - 300
    st.append("l", "j", EventBatch(1, 0, ev[:n1]))
    _report(_calc(st))
    first, count = _lazy_sections(path)["ordered"]
    assert count > 4
    with sqlite3.connect(path) as conn:  # every piece of the sorted step times
        cur = conn.execute(
            "UPDATE state_pieces SET data = CAST(zeroblob(length(data)) AS BLOB) WHERE i >= ? AND i < ?",
            (first, first + count),
        )
        assert cur.rowcount == count
    st.append("l", "j", EventBatch(2, 0, ev[n1:]))
    st.read_events = 0
    caplog.set_level("WARNING", logger="mlgoodput")
    calc = _calc(st)
    r = _report(calc)  # the header and the eager pieces pass; the sorted values fail when read
    assert st.read_events == 300 + len(ev)  # the new events, then the whole job again
    assert r == _report(_calc(st, snapshot=False))
    damaged = [m for m in caplog.messages if "damaged" in m]
    assert len(damaged) == 1 and "reading the job from the store" in damaged[0]
    assert _report(calc) == r  # and it goes on incrementally from there


def test_the_end_of_a_job_is_saved_once_with_its_answer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from mlgoodput.accounting import _calculator

    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "1")
    monkeypatch.setattr(_calculator, "SNAPSHOT_EVERY", 1000)
    st = CountingSQLite(tmp_path / "s.db")
    ev = _long_job(3000, ended=True)
    st.append("l", "j", EventBatch(1, 0, ev[:-2]))  # saved while running: no answer
    _report(_calc(st))
    saves: list[int] = []
    real = _snapshot.save

    def counting(*args: object, **kw: object) -> bool:
        saves.append(1)
        return real(*args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(_snapshot, "save", counting)
    st.append("l", "j", EventBatch(2, 0, ev[-2:]))  # the job ends: too little growth for a save...
    calc = _calc(st)
    r = _report(calc)
    assert saves == [1]  # ...but saved once, with the answer
    _report(calc)
    assert saves == [1]
    st.read_events = 0
    again = _calc(st)
    assert _report(again) == r == _report(_calc(st, snapshot=False))
    assert again._pending is not None and saves == [1]


@pytest.mark.usefixtures("small_pieces")
@pytest.mark.parametrize("replaced", [1, 2])
def test_a_state_replaced_under_a_lazy_reader(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, replaced: int
) -> None:
    """Replaced once: the store keeps the generation it reads from, so it goes on without a
    rebuild. Replaced twice: its pieces are gone; one warning and a full rebuild."""
    from mlgoodput.accounting import _calculator

    monkeypatch.setattr(_calculator, "SNAPSHOT_EVERY", 100)
    st = CountingSQLite(tmp_path / "s.db")
    ev = _long_job(20_000, ended=False)
    st.append("l", "j", EventBatch(1, 0, ev[:-4000]))
    _report(_calc(st))
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "1")
    lazy = _calc(st)
    _report(lazy)  # from the saved state: a few of its buckets read
    monkeypatch.setenv("MLGOODPUT_SNAPSHOT", "always")
    for k in range(replaced):  # other readers save newer states
        st.append("l", "j", EventBatch(2 + k, 0, ev[-4000 + 50 * k : -3950 + 50 * k]))
        _report(GoodputCalculator("j", "l", store=st, clock=lambda: NOW + 1))
    st.append("l", "j", EventBatch(9, 0, ev[-4000 + 50 * replaced :]))
    caplog.set_level("WARNING", logger="mlgoodput")
    st.read_events = 0
    r = _report(lazy)  # the new steps land in buckets it never read
    warned = [m for m in caplog.messages if "replaced" in m]
    if replaced == 1:  # still there: only the new events read
        assert warned == [] and st.read_events == 4000
    else:  # gone: it reads the job again
        assert len(warned) == 1 and st.read_events == 4000 + len(ev)
    fresh = _report(_calc(st, snapshot=False))
    assert r == fresh
    assert _report(lazy) == fresh


def test_save_later_waits_for_save_state(tmp_path: Path) -> None:
    """With save_later=True a query saves nothing; `save_state` saves once what it made due, and
    a new calculator then starts from that state."""
    st = CountingSQLite(tmp_path / "s.db")
    n1 = _fill(st, 0, 400, writer=1)
    calc = GoodputCalculator("j", "l", store=st, clock=lambda: NOW, snapshot=True, save_later=True)
    assert not calc.state_due and calc.save_state() is False  # no query yet: nothing due
    first = _report(calc)
    assert st.load_state("l", "j") is None  # the query left its save for later
    assert calc.state_due
    assert calc.save_state() is True
    assert not calc.state_due and calc.save_state() is False  # saved once
    assert st.load_state("l", "j") is not None
    st.read_events = 0
    again = _calc(st)
    assert_same(_report(again), first)
    assert st.read_events == 0  # started from the state save_state wrote
    assert n1 > 0


def test_save_later_is_checked() -> None:
    with pytest.raises(TypeError, match="save_later must be True or False, got 'yes'"):
        GoodputCalculator("j", "l", store="memory://", save_later="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(("growth", "saves"), [(0.1, [1, 2, 3]), (1.0, [1, 1, 2])])
def test_save_growth_sets_how_much_growth_saves_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, growth: float, saves: list[int]
) -> None:
    """A save writes the whole state: with save_growth=1.0 (the monitor's) a query saves again
    only once the job doubled since the last save; with the default 0.1, after 10% more."""
    from mlgoodput.accounting import _calculator

    monkeypatch.delenv("MLGOODPUT_SNAPSHOT")
    monkeypatch.setattr(_calculator, "SNAPSHOT_EVERY", 10)
    made: list[int] = []
    real = _snapshot.save

    def counting(*a: object, **k: object) -> bool:
        made.append(1)
        return real(*a, **k)  # type: ignore[arg-type]

    monkeypatch.setattr(_snapshot, "save", counting)
    st = SQLiteStore(tmp_path / "s.db")
    calc = GoodputCalculator("j", "l", store=st, clock=lambda: NOW, save_growth=growth)
    got = []
    first = 0
    for n, writer in ((100, 1), (60, 2), (60, 3)):  # +60% then +37.5% of the steps saved
        _fill(st, first, n, writer)
        first += n
        calc.report()
        got.append(len(made))
    assert got == saves


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), float("inf"), True, "1"])
def test_save_growth_is_checked(bad: object) -> None:
    with pytest.raises(ValueError, match="save_growth must be a positive, finite share"):
        GoodputCalculator("j", "l", store="memory://", save_growth=bad)  # type: ignore[arg-type]


def test_a_damaged_header_is_said_at_warning_and_rebuilt(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A saved state whose header fails its check is never used; the job is read from the
    store (the same answer) and a warning, not an info line, says so."""
    path = tmp_path / "s.db"
    st = CountingSQLite(path)
    st.append("l", "j", EventBatch(1, 0, _long_job(3000, ended=True)))
    want = _report(_calc(st))
    with sqlite3.connect(path) as conn:
        cur = conn.execute("UPDATE state_pieces SET data = CAST(zeroblob(length(data)) AS BLOB) WHERE i = 0")
        assert cur.rowcount == 1
    caplog.set_level("WARNING", logger="mlgoodput")
    assert _report(_calc(st)) == want
    warned = [r for r in caplog.records if r.levelname == "WARNING" and "saved accounting state" in r.getMessage()]
    assert len(warned) == 1 and "damaged" in warned[0].getMessage()
