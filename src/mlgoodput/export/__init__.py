"""Exporters: backends that take Samples (TensorBoard, Prometheus, OTLP, Cloud Monitoring)."""

from mlgoodput.export._base import Exporter, Sample

__all__ = ["Exporter", "Sample"]
