"""Exporters: backends that take Samples (TensorBoard, Prometheus, OTLP, Cloud Monitoring).

Each exporter is cheap to build and picklable; it opens its backend when first used, in
the process that uses it (normally an `ExporterProcess` child). Backend packages are
imported lazily, so `import mlgoodput.export` needs only the standard library.
The contract every exporter follows is in `_contract`; `make_exporter(name, **options)`
builds one by its registered name (`_registry`).
"""

from mlgoodput.export._base import Exporter, Sample
from mlgoodput.export._fleet import fleet_samples as fleet_samples  # for other packages
from mlgoodput.export._gcp import CloudMonitoringExporter, GCPOptions
from mlgoodput.export._names import label_name
from mlgoodput.export._otlp import OTLPExporter
from mlgoodput.export._process import ExporterError, ExporterProcess, SampleSource, StopHandle
from mlgoodput.export._prometheus import PrometheusExporter
from mlgoodput.export._registry import exporter_names as exporter_names  # for other packages
from mlgoodput.export._registry import make_exporter as make_exporter  # for other packages
from mlgoodput.export._series import SeriesLabels as SeriesLabels  # for other packages
from mlgoodput.export._series import new_sample as new_sample  # for other packages
from mlgoodput.export._tensorboard import TensorBoardExporter

__all__ = [
    "CloudMonitoringExporter",
    "Exporter",
    "ExporterError",
    "ExporterProcess",
    "GCPOptions",
    "OTLPExporter",
    "PrometheusExporter",
    "Sample",
    "SampleSource",
    "StopHandle",
    "TensorBoardExporter",
    "label_name",
]
