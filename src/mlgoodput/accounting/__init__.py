"""The accounting engine: events in, a GoodputReport out (spec/accounting.md). Pure."""

from mlgoodput.accounting._calculator import GoodputCalculator
from mlgoodput.accounting._engine import Engine
from mlgoodput.accounting._productivity import CostStats, Productivity
from mlgoodput.accounting._report import (
    PARTITION_BUCKETS,
    BadputType,
    GoodputReport,
    HostStepStats,
    SliceEfficiency,
)

__all__ = [
    "PARTITION_BUCKETS",
    "BadputType",
    "CostStats",
    "Engine",
    "GoodputCalculator",
    "GoodputReport",
    "HostStepStats",
    "Productivity",
    "SliceEfficiency",
]
