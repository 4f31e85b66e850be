"""Exactly-once ingestion, written once for every store backend.

A journal numbers its events: each writer (a 63-bit id, one per journal) gives its events
consecutive sequence numbers from 0, and ships them as `EventBatch(writer, first_seq,
events)`. A batch may arrive again (a retry after a timeout, a replay of a journal segment
by the next process), whole or overlapping what is stored. A store keeps one mark per
writer, the sequence number after the last event it stored, and stores only the part of a
batch past that mark:

    part = new_part(batch.writer, batch.first_seq, len(batch.events), mark)
    if part is not None:
        write part.skip: of the events, numbered from part.first   # the rows
        before_mark(part)                                          # (a test's crash point)
        set the writer's mark to part.mark                         # same transaction

A store whose rows and mark commit together (one SQL transaction, one lock) stores each
event once. A store that cannot make them atomic (Cloud Logging) writes ids that readers
deduplicate (`mlgoodput-WRITER-SEQ`), so a crash between the two only makes a duplicate
that nobody sees. Stores without a table of marks keep them in `WriterMarks`.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from mlgoodput.events import EventBatch


@dataclass(frozen=True, slots=True)
class NewPart:
    """The part of a batch a store does not have yet.

    `skip`: events at the head of the batch that are stored already; `first`: the sequence
    number of the first new event; `n`: how many are new; `mark`: the writer's mark once
    they are stored (the sequence number after the batch)."""

    writer: int
    skip: int
    first: int
    n: int

    @property
    def mark(self) -> int:
        return self.first + self.n


def new_part(writer: int, first_seq: int, n: int, mark: int) -> NewPart | None:
    """What of a batch of `n` events from `first_seq` is new to a store whose mark for
    `writer` is `mark` (0 when the writer is new); None when all of it is stored."""
    skip = max(0, mark - first_seq)
    if skip >= n:
        return None
    return NewPart(writer, skip, first_seq + skip, n - skip)


def before_mark(part: NewPart) -> None:
    """Called by every backend between writing a part and recording its mark: a seam for
    tests that simulate a crash there (they replace it with one that raises). Does nothing."""


class WriterMarks:
    """The writers' marks of a store that keeps them in memory (thread-safe)."""

    def __init__(self) -> None:
        self._marks: dict[object, int] = {}
        self._lock = threading.Lock()

    def get(self, writer: int, scope: object = None) -> int:
        """The writer's mark (in `scope`, for stores that keep marks per log or table)."""
        with self._lock:
            return self._marks.get((scope, writer), 0)

    def new_part(self, batch: EventBatch, scope: object = None) -> NewPart | None:
        return new_part(batch.writer, batch.first_seq, len(batch.events), self.get(batch.writer, scope))

    def advance(self, writer: int, mark: int, scope: object = None) -> None:
        """Record that the writer's events before `mark` are stored (a mark never goes back)."""
        with self._lock:
            key = (scope, writer)
            if mark > self._marks.get(key, 0):
                self._marks[key] = mark
