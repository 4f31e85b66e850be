"""The accounting: events in, a GoodputReport out (docs/accounting.md).

Two layers. The engine (`Engine`, `Timeline`, the partition into buckets, the figures, the
straggler analysis) is pure: it computes from the events it is given and a query time, and
reads no store, file or clock. `GoodputCalculator` and `ElasticGoodputCalculator` run it for one job in a store:
they read the store (recovering the journals of writers that died first), keep their place
between calls, and may save a snapshot back to the store so the next query starts from it.
"""

from mlgoodput.accounting._advisor import Advice, advise
from mlgoodput.accounting._calculator import GoodputCalculator, retention_period
from mlgoodput.accounting._calculator import snapshot_policy as snapshot_policy
from mlgoodput.accounting._elastic import ElasticGoodputCalculator
from mlgoodput.accounting._engine import Engine
from mlgoodput.accounting._fast import numpy as fast_numpy
from mlgoodput.accounting._figures import CostStats, Productivity
from mlgoodput.accounting._fleet import FleetReport, JobSummary, Prices, job_link, parse_utc_time
from mlgoodput.accounting._fleet_source import FleetSource
from mlgoodput.accounting._hoststats import StatColumns as StatColumns  # for other packages
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
from mlgoodput.accounting._stragglers import RankColumns as RankColumns  # for other packages
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
    "FleetReport",
    "FleetSource",
    "GoodputCalculator",
    "GoodputReport",
    "GoodputType",
    "HostLog",
    "HostStepStats",
    "JobSummary",
    "Prices",
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
    "job_link",
    "parse_utc_time",
    "productive_by_piece",
    "retention_period",
    "snapshot_policy",
]
