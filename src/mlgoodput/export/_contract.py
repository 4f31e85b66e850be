"""The exporter contract, stated once: what the exporter process does with an exporter.

An exporter's life, and what each step may do:

1. **Built** in the user's process (the training script, the CLI): cheap, no I/O, no
   threads; arguments are checked here and a bad one raises naming it.
2. **Pickled** to the exporter process (a fresh interpreter): an exporter must be
   picklable, and keeps its live state (clients, sockets, files, locks) out of the pickle
   (`__getstate__`); `check_exporter` refuses one that is not, when it is handed over.
3. **start()** (optional, `Startable`), in the exporter process before any export: opens
   what must be open before the first sample (binds a port, takes a folder's lock). An
   OSError (the backend: a full or read-only disk) is warned about and start is tried again
   before each export, with backoff; any other error is a configuration error, and the
   exporter process then fails its own `start()` with that message. An exporter that
   serves (Prometheus) says where in a `url` attribute once it does; the exporter
   process reports it back (`ExporterProcess.addresses`).
4. **export(samples)**: sends samples (the latest value of each series). It raises on
   failure; the caller keeps the samples and retries with backoff, never blocking the
   others.
5. **flush(timeout_s)** (optional, `Flushable`): sends what the exporter itself buffers.
6. **close**, spelled `shutdown(timeout_s)` in the public `Exporter` protocol: releases
   what start and export opened, within the timeout; called once, at the end.

`Exporter` (export, shutdown) is the required part; `start` and `flush` are optional
abilities, found with `isinstance` against the protocols below, as the optional store
abilities are (store/_state.py). Callers use `start`, `flush` and `close` here.
"""

from __future__ import annotations

import pickle
from typing import Protocol, runtime_checkable

from mlgoodput.export._base import Exporter


@runtime_checkable
class Startable(Protocol):
    """An exporter that opens its backend before the first export."""

    def start(self) -> None: ...


@runtime_checkable
class Flushable(Protocol):
    """An exporter that buffers samples itself and can be told to send them."""

    def flush(self, timeout_s: float | None = None) -> object: ...


def check_exporter(exporter: object, arg: str = "exporters") -> Exporter:
    """`exporter` if it follows the contract's required part and pickles; else TypeError naming `arg`."""
    if not isinstance(exporter, Exporter):
        raise TypeError(f"{arg} must follow the Exporter protocol (export, shutdown), got {exporter!r}")
    try:
        pickle.dumps(exporter)
    except Exception as err:
        raise TypeError(f"exporter {exporter!r} cannot be sent to the exporter process: {err}") from err
    return exporter


def start(exporter: Exporter) -> None:
    """Open the exporter's backend, for exporters that have a start step (may raise)."""
    if isinstance(exporter, Startable):
        exporter.start()


def address(exporter: Exporter) -> str | None:
    """Where clients reach the exporter (a serving exporter's `url`), or None."""
    url = getattr(exporter, "url", None)
    return url if isinstance(url, str) else None


def flush(exporter: Exporter, timeout_s: float | None = None) -> None:
    """Send what the exporter buffers itself, for exporters that buffer (may raise)."""
    if isinstance(exporter, Flushable):
        exporter.flush(timeout_s)


def close(exporter: Exporter, timeout_s: float | None = None) -> None:
    """Release the exporter's backend (its `shutdown`), within `timeout_s` (may raise)."""
    exporter.shutdown(timeout_s)
