"""Saved accounting state beside a stream, and paged reads: optional store abilities.

A store that can keep the accounting engine's state (`StateStore`) lets a new process start
from it and read only the events stored since. A store that can page its reads
(`PagedStore`) lets a reader ingest a long job chunk by chunk instead of holding it whole.
Both are optional: callers fall back to the plain protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Protocol, runtime_checkable

from mlgoodput.store._columns import Columns

PAGE_ROWS = 16  # chunks per paged read: up to a million events


@runtime_checkable
class StateStore(Protocol):
    """Keeps one saved state (a sequence of byte pieces) per stream, written atomically."""

    def save_state(self, namespace: str, job: str, pieces: Iterable[bytes]) -> None: ...

    def load_state(self, namespace: str, job: str) -> Iterator[bytes] | None: ...

    def stream_position(self, namespace: str, job: str, cursor: int) -> tuple[int, int]:
        """(the cursor after the stream's latest chunk, the events stored at or before `cursor`)."""
        ...


class SavedPieces(Iterator[bytes]):
    """The pieces of one saved state: iterated in order, or read one at a time by index
    (`piece(i)`, None once that piece is gone: a newer save replaced the state), so a reader
    can fetch only the pieces it needs, when it needs them."""

    def __init__(self, count: int, get: Callable[[int], bytes | None]) -> None:
        self.count = count
        self._get = get
        self._next = 0

    def __iter__(self) -> SavedPieces:
        return self

    def __next__(self) -> bytes:
        if self._next >= self.count:
            raise StopIteration
        got = self._get(self._next)
        if got is None:  # a missing piece ends the iteration: the reader sees too few pieces
            self._next = self.count
            raise StopIteration
        self._next += 1
        return got

    def piece(self, i: int) -> bytes | None:
        return self._get(i) if 0 <= i < self.count else None


@runtime_checkable
class PagedStore(Protocol):
    def scan(self, namespace: str, job: str, cursor: int = 0) -> Iterator[tuple[int, Columns]]:
        """The stream's chunks after `cursor`, each with its cursor, read a page at a time."""
        ...


@runtime_checkable
class StateListing(Protocol):
    def load_single_states(self, namespace: str) -> dict[str, bytes]:
        """Every saved state of `namespace` that is one piece, by its key, in one read (a
        thousand jobs' small summaries in one query instead of a thousand)."""
        ...
