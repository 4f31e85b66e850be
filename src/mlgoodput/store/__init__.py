"""Stores: where events live once they leave a process's journal.

`open_store` turns a URL, a path or None into a store; every store follows `Store`.
Backends are found by URL scheme in `_registry`; importing this package registers ours.
`from_cloud_logger` makes one of an ml-goodput-measurement `cloud_logger` object
(docs/cloud-logging.md).
"""

from __future__ import annotations

# each backend module registers itself when imported
from mlgoodput.store import _cloud_logging, _memory, _postgres, _sqlite  # noqa: F401
from mlgoodput.store._cloud_logger import from_cloud_logger
from mlgoodput.store._columns import NO_STEP, ColumnEvents, Columns
from mlgoodput.store._columns import RawChunk as RawChunk  # for other packages
from mlgoodput.store._columns import StoredRow as StoredRow  # for other packages
from mlgoodput.store._columns import concat as concat_columns
from mlgoodput.store._columns import decode as _decode
from mlgoodput.store._memory import MemoryStore
from mlgoodput.store._protocol import (
    JobInfo,
    ReadResult,
    Store,
    StoreError,
    StoreReplacedError,
    append_batches,
    store_identity,
)
from mlgoodput.store._registry import is_process_local as is_process_local  # for other packages
from mlgoodput.store._registry import open_store, resolve_store_url
from mlgoodput.store._registry import store_file as store_file  # for other packages
from mlgoodput.store._sqlite import SQLiteStore
from mlgoodput.store._state import PagedStore, StateListing, StateStore

decode_chunk = _decode  # for other packages: one stored chunk's bytes (a RawChunk) -> Columns

__all__ = [
    "NO_STEP",
    "ColumnEvents",
    "Columns",
    "JobInfo",
    "MemoryStore",
    "PagedStore",
    "ReadResult",
    "SQLiteStore",
    "StateListing",
    "StateStore",
    "Store",
    "StoreError",
    "StoreReplacedError",
    "append_batches",
    "concat_columns",
    "from_cloud_logger",
    "open_store",
    "resolve_store_url",
    "store_identity",
]
