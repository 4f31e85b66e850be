"""The monitor's insides: report-to-sample mapping, the uploader's sources, GoodputMonitor."""

from mlgoodput._monitoring._elastic import ElasticGoodputMonitor
from mlgoodput._monitoring._monitor import GoodputMonitor

__all__ = ["ElasticGoodputMonitor", "GoodputMonitor"]
