"""Fakes that tests (ours and our users') build instead of patching: a store, a clock, an exporter."""

from __future__ import annotations

import threading
from collections.abc import Sequence

from mlgoodput.export._base import Sample
from mlgoodput.store import MemoryStore

__all__ = ["CapturingExporter", "FakeClock", "MemoryStore"]


class FakeClock:
    """A clock that moves only when told; call it for the time."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self.now = float(start)

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> float:
        self.now += seconds
        return self.now


class CapturingExporter:
    """An exporter that keeps every sample it is given; `fail_next(n)` makes the next n exports raise."""

    def __init__(self) -> None:
        self.batches: list[list[Sample]] = []
        self.shut_down = False
        self._fail = 0
        self._lock = threading.Lock()

    def fail_next(self, n: int = 1) -> None:
        self._fail = n

    def export(self, samples: Sequence[Sample]) -> None:
        with self._lock:
            if self._fail > 0:
                self._fail -= 1
                raise ConnectionError("CapturingExporter: failing as asked")
            self.batches.append(list(samples))

    def shutdown(self, timeout_s: float | None = None) -> None:
        self.shut_down = True

    def latest(self) -> dict[str, float]:
        """The last value exported for each sample name (labels ignored)."""
        out: dict[str, float] = {}
        for b in self.batches:
            for s in b:
                out[s.name] = s.value
        return out
