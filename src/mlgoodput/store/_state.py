"""Saved accounting state beside a stream, paged reads, columnar appends: optional store abilities.

A store that can keep the accounting engine's state (`StateStore`) lets a new process start
from it and read only the events stored since. A store that can page its reads
(`PagedStore`) lets a reader ingest a long job chunk by chunk instead of holding it whole.
A store that takes columns (`ColumnStore`) lets the journal's shipper skip building an
object per event. All are optional: callers fall back to the plain protocol.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
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


@runtime_checkable
class PagedStore(Protocol):
    def scan(self, namespace: str, job: str, cursor: int = 0) -> Iterator[tuple[int, Columns]]:
        """The stream's chunks after `cursor`, each with its cursor, read a page at a time."""
        ...


@runtime_checkable
class ColumnStore(Protocol):
    def append_columns(self, namespace: str, job: str, writer: int, first_seq: int, cols: Columns) -> None:
        """`append` for events already in columns; the same exactly-once promise per writer."""
        ...
