"""The exactly-once rule every store uses (store/_exactly_once.py), on its own."""

from __future__ import annotations

from mlgoodput.events import Event, EventBatch, Kind
from mlgoodput.store._exactly_once import NewPart, WriterMarks, new_part


def test_new_part_is_what_lies_past_the_mark() -> None:
    assert new_part(7, 0, 5, 0) == NewPart(7, skip=0, first=0, n=5)
    assert new_part(7, 3, 5, 5) == NewPart(7, skip=2, first=5, n=3)  # overlapping the stored head
    assert new_part(7, 3, 5, 5).mark == 8  # type: ignore[union-attr]
    assert new_part(7, 0, 5, 5) is None and new_part(7, 1, 3, 9) is None  # all stored already
    assert new_part(7, 10, 5, 5) == NewPart(7, skip=0, first=10, n=5)  # after a gap: stored as it is


def test_writer_marks_are_per_writer_and_scope_and_never_go_back() -> None:
    marks = WriterMarks()
    evs = [Event(Kind.STEP_START, float(i), 0, step=i) for i in range(4)]
    part = marks.new_part(EventBatch(1, 0, evs))
    assert part is not None and part.mark == 4
    marks.advance(1, part.mark)
    assert marks.new_part(EventBatch(1, 0, evs)) is None
    assert marks.new_part(EventBatch(2, 0, evs)) is not None  # another writer
    assert marks.new_part(EventBatch(1, 0, evs), scope="other-log") is not None  # another scope
    marks.advance(1, 2)
    assert marks.get(1) == 4
