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

from mlgoodput._worker import BackgroundWorker, exit_time_left
from mlgoodput.events import Kind
from mlgoodput.export import Exporter, Sample
from mlgoodput.jax import _listeners
from mlgoodput.jax._aggregate import Aggregator, SeriesSnapshot, metric_name, to_samples

log = logging.getLogger("mlgoodput.jax")

DEFAULT_METRIC_PREFIX = "custom.googleapis.com/jax/monitoring"
#: Reserved store namespace of the aggregates.
NAMESPACE = "mlgoodput.jax"


class Shipper(BackgroundWorker):
    """Every interval: snapshot the aggregates, send changed series on."""

    def __init__(
        self,
        aggregator: Aggregator,
        base_labels: dict[str, str],
        sink: Exporter | None,
        metric_journal: Any,
        host: Callable[[], int],
        *,
        interval_s: float,
        histograms: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__("mlgoodput-jax-shipper", interval_s=interval_s)
        self._histograms = histograms
        self._agg = aggregator
        self._labels = base_labels
        self._sink = sink
        self._journal = metric_journal
        self._host = host
        self._clock = clock
        self._last_counts: dict[tuple[str, str, str], int] = {}
        self.rounds = 0
        self.skipped = 0  # series the journal could not take (too large)
        self.last_samples: list[Sample] = []

    def _work(self) -> bool:
        snap = self._agg.snapshot()
        now = self._clock()
        changed = [s for s in snap if self._last_counts.get(_key(s)) != s.count]
        if self._journal is not None:
            for s in changed:
                try:
                    self._journal.append(
                        Kind.JAX_METRIC,
                        now,
                        value=float(s.count),
                        name=metric_name(s.event, s.kind),
                        attrs={
                            "kind": s.kind,
                            "labels": {str(k): str(v) for k, v in s.labels},
                            "count": s.count,
                            "sum": s.sum,
                            "min": s.min,
                            "max": s.max,
                            "last": s.last,
                        },
                    )
                except ValueError as e:  # a name or labels too large for a journal record
                    self.skipped += 1
                    if self.skipped == 1:
                        log.warning("mlgoodput.jax: a series was not stored: %s", e)
        for s in changed:
            self._last_counts[_key(s)] = s.count
        if self._sink is not None and (changed or self.rounds == 0):
            labels = dict(self._labels)
            labels["host"] = str(self._host())
            samples = to_samples(snap, labels, now=now, histograms=self._histograms)
            self.last_samples = samples
            self._sink.export(samples)  # raises on failure: retried with backoff
        self.rounds += 1
        return True

    def _on_close(self, timeout_s: float) -> bool:
        if self._journal is not None:
            return bool(self._journal.close(timeout_s))  # what it cannot ship by then stays journaled
        return True


def _key(s: SeriesSnapshot) -> tuple[str, str, str]:
    return (s.kind, s.event, repr(s.labels))


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
