"""Store backends by URL scheme: the one place that knows which schemes exist.

Each backend module ends with one `register(StoreBackend(...))` line; everything else asks
this module (`open_store`, `resolve_store_url`, `store_file`, `is_process_local`) instead
of looking at a URL's scheme itself. Adding a backend means writing its module, its
registration line and its tests (docs/extending.md).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mlgoodput import _env
from mlgoodput.store._protocol import Store


@dataclass(frozen=True)
class StoreBackend:
    """What the rest of the package needs to know about one kind of store.

    `schemes`: the URL schemes it answers (`sqlite`, or `postgresql` and `postgres`).
    `opener(url)`: a store object for a canonical URL of this backend.
    `example`: how its URLs look, for error messages (`memory://NAME`).
    `canonical(url, arg)`: the canonical form of a URL, raising ValueError naming `arg` when
    it is malformed (None: the URL is taken as it is).
    `process_local`: the store lives and dies with the process that opened it (one store
    per URL and process): other processes cannot see it, and its journals are per process.
    `file_of(url)`: the file that holds the store, for backends that keep one (None: none).
    `takes_paths`: a bare path (no scheme) means a store of this backend (one backend only).
    """

    name: str
    schemes: tuple[str, ...]
    opener: Callable[[str], Store]
    example: str
    canonical: Callable[[str, str], str] | None = None
    process_local: bool = False
    file_of: Callable[[str], str | None] | None = None
    takes_paths: bool = False

    def __post_init__(self) -> None:
        if not self.schemes or not all(isinstance(s, str) and s and "://" not in s for s in self.schemes):
            raise ValueError(f"schemes must be non-empty scheme names without '://', got {self.schemes!r}")
        if not callable(self.opener):
            raise TypeError(f"opener must be callable, got {self.opener!r}")


_backends: dict[str, StoreBackend] = {}  # by name, in registration order
_by_scheme: dict[str, StoreBackend] = {}
_lock = threading.Lock()
_local_stores: dict[str, Store] = {}  # one store per URL of a process-local backend
_local_lock = threading.Lock()


def register(backend: StoreBackend) -> StoreBackend:
    """Make a backend known; registering the same name again replaces it (a reloaded module)."""
    with _lock:
        old = _backends.pop(backend.name, None)
        if old is not None:
            for s in old.schemes:
                _by_scheme.pop(s, None)
        for s in backend.schemes:
            taken = _by_scheme.get(s)
            if taken is not None:
                raise ValueError(f"store URL scheme {s!r} is already registered by the {taken.name!r} backend")
        if backend.takes_paths and any(b.takes_paths for b in _backends.values()):
            raise ValueError(f"backend {backend.name!r}: another backend already takes bare paths")
        _backends[backend.name] = backend
        for s in backend.schemes:
            _by_scheme[s] = backend
    return backend


def backends() -> list[StoreBackend]:
    """Every registered backend, in registration order."""
    with _lock:
        return list(_backends.values())


def scheme_of(url: str) -> str | None:
    """The scheme of `url` (`sqlite` for `sqlite:///x.db`), None for a bare path."""
    head, sep, _ = url.partition("://")
    return head if sep else None


def backend_for(url: str) -> StoreBackend | None:
    """The backend of a URL (a bare path: the backend that takes paths); None if unknown."""
    scheme = scheme_of(url)
    with _lock:
        if scheme is None:
            return next((b for b in _backends.values() if b.takes_paths), None)
        return _by_scheme.get(scheme)


def _path_backend() -> StoreBackend:
    b = backend_for("")
    if b is None:
        raise ValueError("no store backend takes file paths")
    return b


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
    scheme = scheme_of(store)
    if scheme is None:
        backend = _path_backend()
        store = f"{backend.schemes[0]}://" + os.path.abspath(os.path.expanduser(store))
    else:
        found = backend_for(store)
        if found is None:
            known = ", ".join(b.example for b in sorted(backends(), key=lambda b: not b.takes_paths))
            raise ValueError(
                f"{arg}: unknown store URL scheme {scheme!r} in {store!r} (expected {known} or a file path)"
            )
        backend = found
    return backend.canonical(store, arg) if backend.canonical is not None else store


def open_store(store: Any = None, arg: str = "store") -> Store:
    """A store object for a `store=` argument: a Store is returned as is, else see resolve_store_url.

    A process-local backend gives one store per URL in a process (so `memory://x` is the
    same store wherever this process opens it)."""
    if isinstance(store, Store) and not isinstance(store, (str, os.PathLike)):
        return store
    url = resolve_store_url(store, arg)
    backend = backend_for(url)
    assert backend is not None  # resolve_store_url refuses unknown schemes
    if not backend.process_local:
        return backend.opener(url)
    with _local_lock:
        st = _local_stores.get(url)
        if st is None:
            st = _local_stores[url] = backend.opener(url)
        return st


def is_process_local(url: str) -> bool:
    """True when the store at `url` lives only in this process (other processes cannot see it);
    False for stores other processes can open, and for URLs of no known backend."""
    b = backend_for(url)
    return b is not None and b.process_local


def store_file(url: str) -> str | None:
    """The file holding the store at `url`, for backends that keep their store in one file."""
    b = backend_for(url)
    if b is None or b.file_of is None:
        return None
    return b.file_of(url)
