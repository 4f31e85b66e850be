"""ML run diagnostics (seed 003's API): runs with configs, metrics, system metrics and profiles.

    from mlgoodput.diagnostics import machinelearning_run, metrics, metric_types, xprof
    run = machinelearning_run(name="my-run", configs={"epochs": 100})
    metrics.record(metric_types.MetricType.LOSS, 0.123, step=1)
    with xprof():
        train_step()

Everything lives in the store (stream `mlgoodput.run`/<run name>) and a local profile
directory; read it back with `load_run` or `mlgoodput runs show NAME`.
"""

from mlgoodput._profiler import ProfilerBusyError, ProfilerNotActiveError
from mlgoodput.diagnostics import api, core, custom_types, metric_types, metrics
from mlgoodput.diagnostics._errors import (
    MLDiagnosticError,
    MLRunConfigurationError,
    NoActiveRunError,
    ProfilingError,
    RecordingError,
)
from mlgoodput.diagnostics._load import Run, list_runs, load_run
from mlgoodput.diagnostics._ondemand import capture
from mlgoodput.diagnostics._run import MLRun, current_run
from mlgoodput.diagnostics._start import machinelearning_run
from mlgoodput.diagnostics._xprof import xprof

__all__ = [
    "MLDiagnosticError",
    "MLRun",
    "MLRunConfigurationError",
    "NoActiveRunError",
    "ProfilerBusyError",
    "ProfilerNotActiveError",
    "ProfilingError",
    "RecordingError",
    "Run",
    "api",
    "capture",
    "core",
    "current_run",
    "custom_types",
    "list_runs",
    "load_run",
    "machinelearning_run",
    "metric_types",
    "metrics",
    "xprof",
]
