"""Fakes that tests (ours and our users') build instead of patching: a store, a clock, an exporter."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from mlgoodput.export import Sample
from mlgoodput.store import MemoryStore

__all__ = [
    "CapturingExporter",
    "FakeClock",
    "FakeLoggingService",
    "FakeMetadataServer",
    "FakeMetricService",
    "FileExporter",
    "MemoryStore",
    "OTLPReceiver",
]

if TYPE_CHECKING:
    from mlgoodput._testing.fake_logging import FakeLoggingService
    from mlgoodput._testing.fake_servers import FakeMetadataServer, FakeMetricService, OTLPReceiver

_SERVERS = ("FakeMetadataServer", "FakeMetricService", "OTLPReceiver")


def __getattr__(name: str) -> object:
    """The fake servers live in their own module (they import grpc and protobuf lazily)."""
    if name in _SERVERS:
        from mlgoodput._testing import fake_servers

        return getattr(fake_servers, name)
    if name == "FakeLoggingService":
        from mlgoodput._testing.fake_logging import FakeLoggingService

        return FakeLoggingService
    raise AttributeError(name)


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


class FileExporter:
    """An exporter that works across processes: appends each batch as a JSON line to `path`.

    While the file `fail_flag` exists every export raises (a backend outage); while
    `hang_flag` exists exports block (a hung backend). Tests create and remove those files
    from the parent process. `read(path)` returns the batches written so far.
    """

    def __init__(
        self, path: str | os.PathLike[str], *, fail_flag: str | None = None, hang_flag: str | None = None
    ) -> None:
        self.path = os.fspath(path)
        self.fail_flag = fail_flag
        self.hang_flag = hang_flag

    def export(self, samples: Sequence[Sample]) -> None:
        while self.hang_flag and os.path.exists(self.hang_flag):
            time.sleep(0.05)
        if self.fail_flag and os.path.exists(self.fail_flag):
            raise ConnectionError("FileExporter: backend down (fail flag present)")
        rows = [{"name": s.name, "value": s.value, "labels": dict(s.labels), "step": s.step} for s in samples]
        with open(self.path, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "samples": rows}) + "\n")

    def shutdown(self, timeout_s: float | None = None) -> None:
        with open(self.path, "a") as f:
            f.write(json.dumps({"pid": os.getpid(), "shutdown": True}) + "\n")

    @staticmethod
    def read(path: str | os.PathLike[str]) -> list[dict[str, object]]:
        try:
            with open(path) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    @staticmethod
    def latest(path: str | os.PathLike[str]) -> dict[str, float]:
        """The last value written for each sample name, with its labels appended: `name|k=v,...`."""
        out: dict[str, float] = {}
        for row in FileExporter.read(path):
            for s in row.get("samples", []):  # type: ignore[attr-defined]
                labels = ",".join(
                    f"{k}={v}" for k, v in sorted(s["labels"].items()) if k not in ("job_name", "logger_name")
                )
                out[s["name"] + ("|" + labels if labels else "")] = s["value"]
        return out
