"""The exporter protocol: what every backend (TensorBoard, Prometheus, OTLP, Cloud Monitoring) takes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class Sample:
    """One value to export.

    `name` is the canonical, slash-separated metric name (`goodput/goodput_pct`,
    `badput/program_startup_seconds`, `rolling/60s/goodput_pct`, `metrics/loss`, ...);
    each exporter maps it to its backend's naming rules, documented in docs/exporting.md.
    """

    name: str
    value: float
    labels: Mapping[str, str] = field(default_factory=dict)
    kind: Literal["gauge", "counter"] = "gauge"
    step: int | None = None
    time: float | None = None  # UNIX seconds; None: when exported
    unit: str = ""
    description: str = ""


@runtime_checkable
class Exporter(Protocol):
    """Send samples somewhere. `export` raises on failure (the caller retries with backoff)."""

    def export(self, samples: Sequence[Sample]) -> None: ...

    def shutdown(self, timeout_s: float | None = None) -> None: ...
