"""Seed-compatible monitoring API: `GoodputMonitor` and `GCPOptions` (see docs/exporting.md)."""

from mlgoodput._monitoring._monitor import GoodputMonitor
from mlgoodput.export._gcp import GCPOptions

__all__ = ["GCPOptions", "GoodputMonitor"]
