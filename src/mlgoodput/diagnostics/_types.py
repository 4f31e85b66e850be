"""The SDK's run enums and `ConfigDict`, kept apart from `_run` so both facades can import them."""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Any

__all__ = [
    "AcceleratorOrchestrator",
    "ApplicationFramework",
    "ConfigDict",
    "Framework",
    "Orchestrator",
    "RlOrchestrator",
    "RunPhase",
    "ServingEngine",
]


class RunPhase(enum.Enum):
    """Where a run is in its life."""

    PHASE_UNSPECIFIED = "RUN_PHASE_UNSPECIFIED"
    PHASE_ACTIVE = "ACTIVE"
    PHASE_COMPLETED = "COMPLETED"
    PHASE_FAILED = "FAILED"


class Framework(enum.Enum):
    """The ML framework of the workload."""

    JAX = "JAX"
    PYTORCH = "PYTORCH"


class ServingEngine(enum.Enum):
    """The serving engine of an inference workload, if any."""

    NONE = "NONE"
    VLLM = "VLLM"


class AcceleratorOrchestrator(enum.Enum):
    """Who drives the accelerators (Pathways or the job itself)."""

    NONE = "NONE"
    PATHWAYS = "PATHWAYS"


class ApplicationFramework(enum.Enum):
    """The training application built on the framework, if a known one."""

    NONE = "NONE"
    MAXTEXT = "MAXTEXT"
    AXLEARN = "AXLEARN"
    MAXDIFFUSION = "MAXDIFFUSION"


class RlOrchestrator(enum.Enum):
    """The reinforcement-learning orchestrator, if any."""

    NONE = "NONE"
    TUNIX = "TUNIX"


class Orchestrator(enum.StrEnum):
    """The workload orchestrator."""

    GKE = "GKE"
    SLURM = "SLURM"
    CUSTOM = "CUSTOM"
    NONE = "NONE"


class ConfigDict(dict[str, Any]):
    """A run's configs: a dict that also reads and writes keys as attributes.

    Every change (`update`, item or attribute assignment, deletion) is handed to
    `on_change` with the changed keys, so the run stores it as a RUN_CONFIG event.
    """

    def __init__(self, data: Any = (), on_change: Callable[[dict[str, Any]], None] | None = None) -> None:
        super().__init__(data)
        object.__setattr__(self, "_on_change", on_change)

    def _changed(self, data: dict[str, Any]) -> None:
        cb = self.__dict__.get("_on_change")
        if cb is not None and data:
            cb(data)

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        self[name] = value

    def __delattr__(self, name: str) -> None:
        try:
            del self[name]
        except KeyError:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}") from None

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self._changed({key: value})

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._changed({key: None})

    def update(self, *args: Any, **kwargs: Any) -> None:
        """Add or change keys, like dict.update, and record the change."""
        new = dict(*args, **kwargs)
        super().update(new)
        self._changed(new)
