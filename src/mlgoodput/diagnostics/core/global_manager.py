"""The SDK's `core.global_manager` path: the run this process records into."""

from __future__ import annotations

from mlgoodput.diagnostics._run import MLRun, current_run

__all__ = ["get_current_run"]


def get_current_run() -> MLRun | None:
    """The active run, or None before `machinelearning_run` (and after its `end()`)."""
    return current_run()
