"""Warn once: the one place that decides whether a problem is said now or was said before.

A background thread or a training-loop call that meets the same problem again and again must
not flood the log, yet every occurrence matters to whoever debugs: `Once` counts each key and
says yes to the first `times` occurrences only. Every "logged once" and "warned once" of the
package goes through it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable

__all__ = ["Once"]


class Once:
    """How often each key came, and whether this occurrence is one to say (the first `times`).

    Thread-safe. `reset()` forgets everything (tests use it to see a warning again)."""

    __slots__ = ("_counts", "_lock", "times")

    def __init__(self, times: int = 1) -> None:
        if times < 1:
            raise ValueError(f"times must be at least 1, got {times!r}")
        self.times = times
        self._counts: dict[Hashable, int] = {}
        self._lock = threading.Lock()

    def first(self, key: Hashable) -> bool:
        """Count one occurrence of `key`; True when it is among the first `times`."""
        with self._lock:
            n = self._counts.get(key, 0) + 1
            self._counts[key] = n
        return n <= self.times

    def count(self, key: Hashable) -> int:
        """How often `key` came so far."""
        with self._lock:
            return self._counts.get(key, 0)

    def counts(self) -> dict[Hashable, int]:
        """A copy of every key's count."""
        with self._lock:
            return dict(self._counts)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._counts

    def reset(self) -> None:
        """Forget every key (each is said again)."""
        with self._lock:
            self._counts.clear()

    def log(self, log: logging.Logger, key: Hashable, msg: str, *args: object, level: int = logging.WARNING) -> bool:
        """`log.log(level, msg, *args)` when this occurrence of `key` is one to say; True if said."""
        if not self.first(key):
            return False
        log.log(level, msg, *args)
        return True

    def warning(self, log: logging.Logger, key: Hashable, msg: str, *args: object) -> bool:
        """`log.warning(msg, *args)` when this occurrence of `key` is one to say; True if said."""
        return self.log(log, key, msg, *args)
