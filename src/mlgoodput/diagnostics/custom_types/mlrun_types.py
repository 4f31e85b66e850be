"""The SDK's `custom_types.mlrun_types` path: the run object, its config dict and its enums."""

from mlgoodput.diagnostics._run import MLRun
from mlgoodput.diagnostics._types import (
    AcceleratorOrchestrator,
    ApplicationFramework,
    ConfigDict,
    Framework,
    Orchestrator,
    RlOrchestrator,
    RunPhase,
    ServingEngine,
)

__all__ = [
    "AcceleratorOrchestrator",
    "ApplicationFramework",
    "ConfigDict",
    "Framework",
    "MLRun",
    "Orchestrator",
    "RlOrchestrator",
    "RunPhase",
    "ServingEngine",
]
