"""The SDK's `custom_types.exceptions` path: the same classes as `mlgoodput.diagnostics`."""

from mlgoodput.diagnostics._errors import (
    ControlPlaneClientNotInitializedError,
    MLDiagnosticError,
    MLRunConfigurationError,
    NoActiveRunError,
    ProfilingError,
    RecordingError,
)

__all__ = [
    "ControlPlaneClientNotInitializedError",
    "MLDiagnosticError",
    "MLRunConfigurationError",
    "NoActiveRunError",
    "ProfilingError",
    "RecordingError",
]
