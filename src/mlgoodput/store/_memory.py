"""An in-process store: the reference for the store contract, and a fast fake for tests."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence

from mlgoodput.events import EventBatch
from mlgoodput.store import _exactly_once
from mlgoodput.store._columns import Columns
from mlgoodput.store._exactly_once import WriterMarks, new_part
from mlgoodput.store._protocol import JobInfo, ReadResult
from mlgoodput.store._registry import StoreBackend, register
from mlgoodput.store._state import SavedPieces


class MemoryStore:
    """Keeps chunks in a list; thread-safe; shared by name through `memory://NAME` URLs."""

    def __init__(self, url: str = "memory://") -> None:
        self.url = url
        self._lock = threading.Lock()
        self._chunks: list[tuple[str, str, Columns]] = []  # index + 1 is the cursor
        self._marks = WriterMarks()
        self._jobs: dict[tuple[str, str], list[float]] = {}
        self._states: dict[tuple[str, str], list[list[bytes]]] = {}  # current, previous
        self.closed = False

    def append(self, namespace: str, job: str, batch: EventBatch) -> None:
        self.append_batches(((namespace, job, batch),))

    def append_batches(self, items: Sequence[tuple[str, str, EventBatch]]) -> None:
        """Every (namespace, job, batch) at once, under one lock: what is new of each is worked
        out first (a writer's later batch sees its earlier one), and nothing changes unless all
        of it got through, as one transaction of a database would."""
        with self._lock:  # the rows and the marks change together: nothing to crash between
            marks: dict[int, int] = {}
            staged: list[tuple[str, str, Columns, int, int]] = []
            for ns, job, batch in items:
                mark = marks.get(batch.writer)
                part = new_part(
                    batch.writer,
                    batch.first_seq,
                    len(batch.events),
                    self._marks.get(batch.writer) if mark is None else mark,
                )
                if part is None:
                    continue
                kept = Columns.from_events(batch.events[part.skip :])
                _exactly_once.before_mark(part)
                marks[part.writer] = part.mark
                staged.append((ns, job, kept, part.writer, part.mark))
            for ns, job, kept, writer, mark in staged:
                self._chunks.append((ns, job, kept))
                self._marks.advance(writer, mark)
                info = self._jobs.setdefault((ns, job), [0, min(kept.times), max(kept.times)])
                info[0] += len(kept)
                info[1] = min(info[1], min(kept.times))
                info[2] = max(info[2], max(kept.times))

    def read(self, namespace: str, job: str, cursor: int = 0) -> ReadResult:
        with self._lock:
            chunks = list(self._chunks[cursor:])
            end = len(self._chunks)
        parts = [c for ns, j, c in chunks if ns == namespace and j == job]
        return ReadResult(parts, end)

    def save_state(self, namespace: str, job: str, pieces: Iterable[bytes]) -> None:
        """The new state becomes current; the one it replaces is kept for one more save (a
        reader still fetching its pieces finishes), as the other stores do."""
        saved = [bytes(p) for p in pieces]
        with self._lock:
            gens = self._states.setdefault((namespace, job), [])
            gens[:] = [saved, *gens[:1]]

    def load_single_states(self, namespace: str) -> dict[str, bytes]:
        with self._lock:
            return {j: g[0][0] for (ns, j), g in self._states.items() if ns == namespace and g and len(g[0]) == 1}

    def load_state(self, namespace: str, job: str) -> Iterator[bytes] | None:
        with self._lock:
            gens = self._states.get((namespace, job))
            saved = gens[0] if gens else None
        if saved is None:
            return None

        def piece(i: int) -> bytes | None:  # None once two newer saves dropped this one
            with self._lock:
                kept = any(g is saved for g in self._states.get((namespace, job), ()))
            return saved[i] if kept else None

        return SavedPieces(len(saved), piece)

    def stream_position(self, namespace: str, job: str, cursor: int) -> tuple[int, int]:
        with self._lock:
            head = len(self._chunks)  # cursors here count chunks of every stream
            mine = [(i + 1, len(c)) for i, (ns, j, c) in enumerate(self._chunks) if ns == namespace and j == job]
        return head, sum(n for pos, n in mine if pos <= cursor)

    def jobs(self) -> list[JobInfo]:
        with self._lock:
            return [JobInfo(ns, job, int(v[0]), v[1], v[2]) for (ns, job), v in sorted(self._jobs.items())]

    def close(self) -> None:
        self.closed = True


register(StoreBackend("memory", ("memory",), MemoryStore, "memory://NAME", process_local=True))
