"""Exporters by name: `make_exporter("prometheus", port=9100)`.

Each exporter module ends with one `register_exporter(NAME, FACTORY)` line; whoever builds
exporters from configuration (the goodput monitor, the CLI) asks for them by name here.
Adding an exporter means writing its module, its registration line and its tests
(docs/extending.md).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from mlgoodput.export._base import Exporter

_factories: dict[str, Callable[..., Exporter]] = {}
_lock = threading.Lock()


def register_exporter(name: str, factory: Callable[..., Exporter]) -> None:
    """Make an exporter buildable by name; registering a name again replaces it (a reloaded module)."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"name must be a non-empty string, got {name!r}")
    if not callable(factory):
        raise TypeError(f"factory must be callable, got {factory!r}")
    with _lock:
        _factories[name] = factory


def exporter_names() -> list[str]:
    """The registered exporter names, sorted."""
    with _lock:
        return sorted(_factories)


def make_exporter(name: str, **options: Any) -> Exporter:
    """A new exporter of the kind `name`, built with `options` (its constructor's arguments)."""
    with _lock:
        factory = _factories.get(name)
    if factory is None:
        raise ValueError(f"unknown exporter {name!r} (known: {', '.join(exporter_names())})")
    return factory(**options)
