"""The store protocol: where shipped events live, and what a store must promise."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from mlgoodput.events import EventBatch
from mlgoodput.store._columns import Columns, concat


class StoreError(OSError):
    """A store could not do its work now (locked, full, unreachable); retrying may succeed."""


class StoreReplacedError(StoreError):
    """The store was deleted or replaced by another one (a new file at the path, a recreated
    schema) while it was in use: what was just written may not be in the store now there."""


def store_identity(store: object) -> str | None:
    """What names the store's storage right now (its store id, for SQLite also the file's
    device and inode), for stores that have an `identity()`; None for the others. A writer
    compares it before and after a batch to never take a replaced store's word for it."""
    f = getattr(store, "identity", None)
    return None if f is None else str(f())


def append_batches(store: object, items: Sequence[tuple[str, str, EventBatch]]) -> None:
    """Store every (namespace, job, batch) of `items`, each batch kept once per writer as
    `append` keeps it. A store with an `append_batches` ability does it in one transaction
    (all or nothing: a node's shipper costs the store one transaction a round); for the
    others each item is one `append`, in order (a failure leaves the earlier ones stored,
    which a retry then skips)."""
    f = getattr(store, "append_batches", None)
    if f is not None:
        f(items)
        return
    append = store.append  # type: ignore[attr-defined]
    for ns, job, batch in items:
        append(ns, job, batch)


@dataclass(frozen=True, slots=True)
class JobInfo:
    """One (namespace, job) stream of a store, for listings."""

    namespace: str
    job: str
    events: int
    first_time: float
    last_time: float


class ReadResult:
    """Events read after a cursor, and the cursor to pass next time.

    `parts` are the stored chunks in order; `columns` joins them (on first use), for
    readers that want one block.
    """

    __slots__ = ("_columns", "cursor", "parts")

    def __init__(self, parts: list[Columns], cursor: int) -> None:
        self.parts = parts
        self.cursor = cursor
        self._columns: Columns | None = None

    @property
    def columns(self) -> Columns:
        if self._columns is None:
            self._columns = concat(self.parts)
        return self._columns

    def __len__(self) -> int:
        return sum(len(p) for p in self.parts)


@runtime_checkable
class Store(Protocol):
    """Append batches idempotently, read a stream after a cursor, list streams, close.

    `append` stores each event of a batch exactly once, however often the batch (or an
    overlapping one from the same writer) is appended. `read` returns the events of a
    stream stored after `cursor` in storage order; a later `read` with the returned cursor
    sees only newer events.
    """

    url: str

    def append(self, namespace: str, job: str, batch: EventBatch) -> None: ...

    def read(self, namespace: str, job: str, cursor: int = 0) -> ReadResult: ...

    def jobs(self) -> list[JobInfo]: ...

    def close(self) -> None: ...
