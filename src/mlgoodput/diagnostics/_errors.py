"""The SDK's exception classes, with the same names and bases, so `except` clauses carry over.

mlgoodput raises `MLRunConfigurationError` for a bad `machinelearning_run` argument and, in
strict mode only, `RecordingError` from `metrics.record`; by default recording never raises
(see docs/diagnostics.md). The others exist so code that names them keeps importing.
"""

from __future__ import annotations

__all__ = [
    "ControlPlaneClientNotInitializedError",
    "MLDiagnosticError",
    "MLRunConfigurationError",
    "NoActiveRunError",
    "ProfilingError",
    "RecordingError",
]


class MLDiagnosticError(Exception):
    """Base class the SDK declares for its errors."""


class MLRunConfigurationError(ValueError):
    """A `machinelearning_run` argument is wrong (a ValueError, as in the SDK)."""


class RecordingError(ValueError):
    """A metric could not be recorded; raised only in strict mode (MLGOODPUT_STRICT=1)."""


class NoActiveRunError(Exception):
    """No machine learning run is active in this process."""


class ProfilingError(Exception):
    """Declared for compatibility: mlgoodput's `xprof` warns instead of raising it (strict
    mode raises `MlGoodputMisuseError`, a ValueError)."""


class ControlPlaneClientNotInitializedError(Exception):
    """Declared for compatibility: mlgoodput has no control plane client."""
