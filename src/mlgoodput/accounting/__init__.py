"""The accounting engine: events in, a GoodputReport out (spec/accounting.md). Pure."""

from mlgoodput.accounting._advisor import Advice, advise
from mlgoodput.accounting._calculator import GoodputCalculator, retention_period
from mlgoodput.accounting._calculator import _snapshot_policy as snapshot_policy
from mlgoodput.accounting._elastic import ElasticGoodputCalculator
from mlgoodput.accounting._engine import Engine
from mlgoodput.accounting._fast import numpy as fast_numpy
from mlgoodput.accounting._figures import CostStats, Productivity
from mlgoodput.accounting._overtime import productive_by_piece
from mlgoodput.accounting._partition import Segment
from mlgoodput.accounting._report import (
    PARTITION_BUCKETS,
    BadputType,
    GoodputReport,
    GoodputType,
    HostStepStats,
    SliceEfficiency,
)
from mlgoodput.accounting._sorted import SortedFloats
from mlgoodput.accounting._stepnums import StepNums
from mlgoodput.accounting._timeline import HostLog, Timeline

__all__ = [
    "PARTITION_BUCKETS",
    "Advice",
    "BadputType",
    "CostStats",
    "ElasticGoodputCalculator",
    "Engine",
    "GoodputCalculator",
    "GoodputReport",
    "GoodputType",
    "HostLog",
    "HostStepStats",
    "Productivity",
    "Segment",
    "SliceEfficiency",
    "SortedFloats",
    "StepNums",
    "Timeline",
    "advise",
    "fast_numpy",
    "productive_by_piece",
    "retention_period",
    "snapshot_policy",
]
