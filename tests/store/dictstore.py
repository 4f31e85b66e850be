"""A store backend written only for the tests: `dict://NAME`, events kept in a dict.

It exists to show what adding a backend takes: this module (the store and its one
registration line at the end) and one import line in tests/store/conftest.py; the whole
contract suite (test_store_contract.py) then runs against it.
"""

from __future__ import annotations

import threading

from mlgoodput.events import EventBatch
from mlgoodput.store import _exactly_once
from mlgoodput.store._columns import Columns
from mlgoodput.store._exactly_once import WriterMarks
from mlgoodput.store._protocol import JobInfo, ReadResult
from mlgoodput.store._registry import StoreBackend, register


class DictStore:
    """Chunks per stream in a dict; a stream's cursor is the number of its chunks read."""

    def __init__(self, url: str) -> None:
        self.url = url
        self._streams: dict[tuple[str, str], list[Columns]] = {}
        self._marks = WriterMarks()
        self._lock = threading.Lock()

    def append(self, namespace: str, job: str, batch: EventBatch) -> None:
        with self._lock:
            part = self._marks.new_part(batch)
            if part is None:
                return
            cols = Columns.from_events(batch.events[part.skip :])
            _exactly_once.before_mark(part)
            self._streams.setdefault((namespace, job), []).append(cols)
            self._marks.advance(part.writer, part.mark)

    def read(self, namespace: str, job: str, cursor: int = 0) -> ReadResult:
        with self._lock:
            chunks = list(self._streams.get((namespace, job), []))
        return ReadResult(chunks[cursor:], max(cursor, len(chunks)))

    def jobs(self) -> list[JobInfo]:
        with self._lock:
            streams = sorted(self._streams.items())
        return [
            JobInfo(ns, job, sum(len(c) for c in cs), min(min(c.times) for c in cs), max(max(c.times) for c in cs))
            for (ns, job), cs in streams
            if cs
        ]

    def close(self) -> None:
        pass


register(StoreBackend("dict", ("dict",), DictStore, "dict://NAME", process_local=True))
