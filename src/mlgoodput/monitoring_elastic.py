"""Seed-compatible elastic monitoring API: `ElasticGoodputMonitor` and `GCPOptions`."""

from mlgoodput import goodput_elastic, goodput_utils, monitoring
from mlgoodput._monitoring import ElasticGoodputMonitor
from mlgoodput.export import GCPOptions

__all__ = ["ElasticGoodputMonitor", "GCPOptions", "goodput_elastic", "goodput_utils", "monitoring"]
