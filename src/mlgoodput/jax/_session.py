"""`init` and `shutdown`: one process-wide session of JAX monitoring.

A session owns the aggregator and its listeners, the optional compile listener that writes
`Kind.COMPILE` events through a recorder's journal, and a shipping thread that, every
`interval_s`, turns the cumulative aggregates into samples for the exporter process (which
owns the exporters: a slow or dead backend never reaches the training thread) and into
`Kind.JAX_METRIC` events of the store.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from mlgoodput._metric_pipeline import Aggregator, Shipper
from mlgoodput._worker import exit_time_left
from mlgoodput.jax import _listeners

log = logging.getLogger("mlgoodput.jax")

DEFAULT_METRIC_PREFIX = "custom.googleapis.com/jax/monitoring"
#: Reserved store namespace of the aggregates.
NAMESPACE = "mlgoodput.jax"


class Session:
    """What `init` built; `shutdown` undoes it."""

    def __init__(
        self,
        *,
        job_name: str,
        aggregator: Aggregator,
        added: list[tuple[str, Callable[..., None]]],
        shipper: Shipper | None,
        sink: Any,
        compile_sink: Any,
        host: int,
        options: Mapping[str, Any],
    ) -> None:
        self.job_name = job_name
        self.aggregator = aggregator
        self.added = added
        self.shipper = shipper
        self.sink = sink
        self.compile_sink = compile_sink  # the goodput journal compile events go to, if any
        self.host = host
        self.options = dict(options)

    def flush(self, timeout_s: float | None = 10.0) -> bool:
        """Ship the aggregates now and have the exporters send them; True if all was done
        in time (the exporters' backends included)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        ok = self.shipper.flush(timeout_s) if self.shipper is not None else True
        if self.sink is not None and hasattr(self.sink, "flush"):
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ok = bool(self.sink.flush(left)) and ok
        return ok


_lock = threading.RLock()
_session: Session | None = None
_atexit_registered = False


def current() -> Session | None:
    """The running session, if `init` was called and `shutdown` was not."""
    return _session


def start(session_factory: Callable[[], Session]) -> Session:
    global _session, _atexit_registered
    with _lock:
        if _session is not None:
            return _session
        _session = session_factory()
        if not _atexit_registered:
            atexit.register(_stop_at_exit)
            _atexit_registered = True
        return _session


def _stop_at_exit() -> None:
    stop(exit_time_left())


def stop(timeout_s: float | None = 10.0) -> bool:
    """Unregister the listeners, ship the last aggregates and stop; safe to call twice."""
    global _session
    with _lock:
        s, _session = _session, None
    if s is None:
        return True
    _listeners.uninstall(s.added)
    ok = True
    deadline = None if timeout_s is None else time.monotonic() + timeout_s

    def left() -> float | None:
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    if s.shipper is not None:
        ok = s.shipper.close(left()) and ok
    if s.sink is not None:
        try:
            s.sink.shutdown(left())
        except Exception as e:
            log.warning("mlgoodput.jax: exporter shutdown failed: %s", e)
            ok = False
    if s.compile_sink is not None:
        try:
            s.compile_sink.flush(left())
        except Exception:
            ok = False
    return ok


def metric_journal(store: Any, job_name: str, host: int) -> Any:
    """The journal of the job's `mlgoodput.jax` stream (the aggregates as JAX_METRIC events)."""
    from mlgoodput._journal import Journal

    return Journal.for_stream(store, NAMESPACE, job_name, host)
