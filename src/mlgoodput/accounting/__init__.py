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
from mlgoodput.accounting._straggler_rule import MIN_LEAD_FRACTION, MIN_LEAD_S, StragglerVerdict
from mlgoodput.accounting._stragglers import RankStepStats, StragglerReport, compare_step_starts
from mlgoodput.accounting._stragglers import analyze as analyze_stragglers
from mlgoodput.accounting._timeline import HostLog, Timeline

__all__ = [
    "MIN_LEAD_FRACTION",
    "MIN_LEAD_S",
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
    "RankStepStats",
    "Segment",
    "SliceEfficiency",
    "SortedFloats",
    "StepNums",
    "StragglerReport",
    "StragglerVerdict",
    "Timeline",
    "advise",
    "analyze_stragglers",
    "compare_step_starts",
    "fast_numpy",
    "productive_by_piece",
    "retention_period",
    "snapshot_policy",
]
