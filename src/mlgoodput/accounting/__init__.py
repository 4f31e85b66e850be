"""The accounting engine: events in, a GoodputReport out (spec/accounting.md). Pure."""

from mlgoodput.accounting._calculator import GoodputCalculator
from mlgoodput.accounting._elastic import ElasticGoodputCalculator
from mlgoodput.accounting._engine import Engine
from mlgoodput.accounting._productivity import CostStats, Productivity
from mlgoodput.accounting._report import (
    PARTITION_BUCKETS,
    BadputType,
    GoodputReport,
    GoodputType,
    HostStepStats,
    SliceEfficiency,
)

__all__ = [
    "PARTITION_BUCKETS",
    "BadputType",
    "CostStats",
    "ElasticGoodputCalculator",
    "Engine",
    "GoodputCalculator",
    "GoodputReport",
    "GoodputType",
    "HostStepStats",
    "Productivity",
    "SliceEfficiency",
]
