"""Recovery ships a dead process's segments in the order their events happened, whatever
their file names, and one writer's segments in the order of their record numbers."""

from __future__ import annotations

from pathlib import Path

from mlgoodput._recovery import in_time_order, journal_dirs, recover_journals
from mlgoodput._segment import HEADER_SIZE, create_segment, write_record
from mlgoodput.events import EventBatch, Kind
from mlgoodput.store import open_store
from mlgoodput.store._sqlite import SQLiteStore


def _dead_segment(
    d: Path, url: str, times: list[float], meta: dict[str, object] | None = None, writer: int | None = None
) -> Path:
    meta = {"store": url, "namespace": "ns", "job": "j", "host": 0, **(meta or {})}
    seg = create_segment(d, HEADER_SIZE + 64 * len(times) + 4096, 0, meta, writer)
    off = seg.off
    for i, t in enumerate(times):
        off += write_record(seg.buf, off, i, int(Kind.STEP_START), 0, 0, t, int(t), float("nan"), b"")
    seg.count, seg.off = len(times), off
    seg.seal()
    path = seg.path
    assert path is not None
    seg.release(delete=False)  # closes and unlocks: as a killed process leaves it
    return path


class _Recording(SQLiteStore):
    """The order in which batches arrive."""

    firsts: list[float]

    def append(self, namespace: str, job: str, batch: EventBatch) -> None:
        self.firsts.append(min(e.time for e in batch.events))
        super().append(namespace, job, batch)


def test_segments_are_recovered_in_time_order(tmp_path: Path) -> None:
    db = str(tmp_path / "s.db")
    url = open_store(db).url
    d = journal_dirs(url)[0]
    paths = [_dead_segment(d, url, [float(t0 + i) for i in range(50)]) for t0 in (300, 100, 200, 0)]
    assert [p.name for p in in_time_order(paths)] == [paths[i].name for i in (3, 1, 2, 0)]
    st = _Recording(db)
    st.firsts = []
    assert recover_journals(st) == 200
    assert st.firsts == [0.0, 100.0, 200.0, 300.0]
    rows = st.read("ns", "j").columns
    assert list(rows.times) == [float(t) for t in range(350) if t % 100 < 50]
    st.close()


def test_one_writers_segments_keep_their_numbers_order(tmp_path: Path) -> None:
    """Two segments of one writer (numbered on from `base`) whose times run backwards (a clock
    stepped back): the lower numbers go first, or the store's mark would skip them."""
    db = str(tmp_path / "s.db")
    url = open_store(db).url
    d = journal_dirs(url)[0]
    other = _dead_segment(d, url, [1.0, 2.0])
    later = _dead_segment(d, url, [5.0, 6.0], {"base": 2}, writer=77)
    earlier = _dead_segment(d, url, [50.0, 51.0], {"base": 0}, writer=77)
    assert in_time_order([later, earlier, other]) == [other, earlier, later]
    assert recover_journals(db) == 6
    st = open_store(db)
    assert sorted(st.read("ns", "j").columns.times) == [1.0, 2.0, 5.0, 6.0, 50.0, 51.0]  # none skipped
    st.close()
