"""The metric pipeline behind `mlgoodput.jax.init`, for integrations that feed it other metrics.

An `Aggregator` of metric events, a `Shipper` that writes their aggregates to the job's
journal and exporters, and the helpers that find the job's journal and build the exporter
process. They live in `mlgoodput._metric_pipeline`, which `mlgoodput.torch.init` uses for
torch.compile times without importing the JAX integration; `default_exporters` and
`metric_journal` are the JAX session's own (Cloud Monitoring, the `mlgoodput.jax` stream).
"""

from mlgoodput._metric_pipeline import (
    Aggregator,
    ProcessSink,
    Shipper,
    default_host,
    find_goodput_journal,
    make_sink,
    recorder_journal,
)
from mlgoodput.jax._session import metric_journal
from mlgoodput.jax._wiring import default_exporters

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
