"""Saved accounting state beside a stream, and paged reads: optional store abilities.

A store that can keep the accounting engine's state (`StateStore`) lets a new process start
from it and read only the events stored since. A store that can page its reads
(`PagedStore`) lets a reader ingest a long job chunk by chunk instead of holding it whole.
Both are optional: callers fall back to the plain protocol.
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
