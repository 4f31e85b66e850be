"""The SDK's `api` package under its own path: `metrics`, `mlrun` and `machinelearning_run`."""

from mlgoodput.diagnostics import metrics
from mlgoodput.diagnostics.api import mlrun
from mlgoodput.diagnostics.api.mlrun import machinelearning_run

__all__ = ["machinelearning_run", "metrics", "mlrun"]
