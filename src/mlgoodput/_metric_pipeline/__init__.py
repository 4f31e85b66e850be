"""The metric pipeline that `mlgoodput.jax.init` and `mlgoodput.torch.init` both run.

An `Aggregator` folds metric events (JAX's `jax.monitoring` callbacks, torch.compile times)
into cumulative totals on the thread that reports them; a `Shipper` thread sends the changed
totals, every interval, to the job's journal and to an exporter process (`make_sink`). The
helpers find the journal of the job's recorder and the process index.

Neither framework integration owns it, so both import it from here and neither imports the
other. The public face for integrations outside mlgoodput is `mlgoodput.jax.pipeline`.
"""

from __future__ import annotations

from mlgoodput._metric_pipeline._aggregate import (
    Aggregator,
    SeriesSnapshot,
    bucket_upper_bound,
    metric_name,
    to_samples,
)
from mlgoodput._metric_pipeline._shipper import Shipper
from mlgoodput._metric_pipeline._wiring import (
    RESERVED_PREFIX,
    ProcessSink,
    default_host,
    find_goodput_journal,
    make_sink,
    recorder_journal,
)

__all__ = [
    "RESERVED_PREFIX",
    "Aggregator",
    "ProcessSink",
    "SeriesSnapshot",
    "Shipper",
    "bucket_upper_bound",
    "default_host",
    "find_goodput_journal",
    "make_sink",
    "metric_name",
    "recorder_journal",
    "to_samples",
]
