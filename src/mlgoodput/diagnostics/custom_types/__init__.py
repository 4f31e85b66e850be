"""The SDK's `custom_types` package under its own path: exceptions, metric and run types."""

from mlgoodput.diagnostics.custom_types import exceptions, metric_types, mlrun_types

__all__ = ["exceptions", "metric_types", "mlrun_types"]
