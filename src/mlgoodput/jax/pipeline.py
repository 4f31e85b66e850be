"""The metric pipeline behind `mlgoodput.jax.init`, for integrations that feed it other metrics.

`mlgoodput.torch.init` uses it for torch.compile times: an `Aggregator` of metric events, a
`Shipper` that writes their aggregates to the job's journal and exporters, and the helpers
that find the job's journal and build the exporter process.
"""

from mlgoodput.jax._aggregate import Aggregator
from mlgoodput.jax._session import Shipper
from mlgoodput.jax._wiring import (
    ProcessSink,
    default_exporters,
    default_host,
    find_goodput_journal,
    make_sink,
    metric_journal,
    recorder_journal,
)

__all__ = [
    "Aggregator",
    "ProcessSink",
    "Shipper",
    "default_exporters",
    "default_host",
    "find_goodput_journal",
    "make_sink",
    "metric_journal",
    "recorder_journal",
]
