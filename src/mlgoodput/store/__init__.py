"""Stores: where events live once they leave a process's journal.

`open_store` turns a URL, a path or None into a store; every store follows `Store`.
`from_cloud_logger` makes one of an ml-goodput-measurement `cloud_logger` object
(docs/cloud-logging.md).
"""

from __future__ import annotations

import os
import threading
from typing import Any

from mlgoodput import _env
from mlgoodput.store._cloud_logger import from_cloud_logger
from mlgoodput.store._columns import NO_STEP, Columns
from mlgoodput.store._memory import MemoryStore
from mlgoodput.store._protocol import (
    JobInfo,
    ReadResult,
    Store,
    StoreError,
    StoreReplacedError,
    store_identity,
)
from mlgoodput.store._sqlite import SQLiteStore
from mlgoodput.store._state import PagedStore, StateStore

__all__ = [
    "NO_STEP",
    "Columns",
    "JobInfo",
    "MemoryStore",
    "PagedStore",
    "ReadResult",
    "SQLiteStore",
    "StateStore",
    "Store",
    "StoreError",
    "StoreReplacedError",
    "from_cloud_logger",
    "open_store",
    "resolve_store_url",
    "store_identity",
]

_memory_stores: dict[str, MemoryStore] = {}
_memory_lock = threading.Lock()


def resolve_store_url(store: str | os.PathLike[str] | None, arg: str = "store") -> str:
    """The canonical URL for a `store=` argument (None: $MLGOODPUT_STORE, else the default)."""
    if store is None:
        store = _env.default_store_url()
    if isinstance(store, os.PathLike):
        store = os.fspath(store)
    if not isinstance(store, str):
        raise TypeError(f"{arg} must be a URL, a path or a store object, got {store!r}")
    if not store.strip():
        raise ValueError(f"{arg} must be a URL or a path, got {store!r}")
    if store.startswith("sqlite://"):
        path = store[len("sqlite://") :]
        if not path or path == "/:memory:":
            raise ValueError(f"{arg}: an in-memory SQLite store cannot be shared; use memory://NAME, got {store!r}")
        return "sqlite://" + os.path.abspath(path)
    if store.startswith("memory://"):
        return store
    if store.startswith(("postgresql://", "postgres://")):
        return store
    if store.startswith("cloudlogging://"):
        from mlgoodput.store._cloud_logging import parse_url

        parse_url(store, arg)  # a malformed URL fails here, with the argument's name
        return store
    if "://" in store:
        scheme = store.split("://", 1)[0]
        raise ValueError(
            f"{arg}: unknown store URL scheme {scheme!r} in {store!r}"
            " (expected sqlite:///path.db, postgresql://..., memory://name,"
            " cloudlogging://PROJECT/LOG_NAME or a file path)"
        )
    return "sqlite://" + os.path.abspath(os.path.expanduser(store))


def open_store(store: Any = None, arg: str = "store") -> Store:
    """A store object for a `store=` argument: a Store is returned as is, else see resolve_store_url."""
    if isinstance(store, Store) and not isinstance(store, (str, os.PathLike)):
        return store
    url = resolve_store_url(store, arg)
    if url.startswith("memory://"):
        with _memory_lock:
            st = _memory_stores.get(url)
            if st is None:
                st = _memory_stores[url] = MemoryStore(url)
            return st
    if url.startswith(("postgresql://", "postgres://")):
        from mlgoodput.store._postgres import PostgresStore

        return PostgresStore(url)
    if url.startswith("cloudlogging://"):
        from mlgoodput.store._cloud_logging import CloudLoggingStore

        return CloudLoggingStore(url)
    return SQLiteStore(url[len("sqlite://") :])
