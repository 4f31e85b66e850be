"""FLOPs of the first training step, counted once with FlopCounterMode (for MFU).

The counter wraps the real first step (forward, backward, optimizer), entered at the step's
start hook and left at its end hook on the same thread; every later step runs without it.
Each rank counts its own work; the job's FLOPs per step are that times the world size
(data parallel: every rank does the same work).
"""

from __future__ import annotations

from typing import Any

__all__ = ["FirstStepFlops"]


class FirstStepFlops:
    """Counts one step: `begin()` at its start, `end()` at its end -> FLOPs of the job's step."""

    def __init__(self, world_size: int = 1) -> None:
        self.world_size = world_size
        self.rank_flops: float | None = None
        self.done = False
        self._mode: Any = None

    @property
    def counting(self) -> bool:
        return self._mode is not None

    def begin(self) -> None:
        if self.done or self._mode is not None:
            return
        self.done = True  # whatever happens, only one attempt at counting
        from torch.utils.flop_counter import FlopCounterMode

        mode: Any = FlopCounterMode(display=False)
        mode.__enter__()
        self._mode = mode

    def end(self) -> float | None:
        """Leave the counter; the job's FLOPs per step (None when nothing was counted)."""
        mode, self._mode = self._mode, None
        if mode is None:
            return None
        mode.__exit__(None, None, None)
        total = float(mode.get_total_flops())
        self.rank_flops = total
        return total * self.world_size if total > 0 else None

    def abandon(self) -> None:
        """Leave the counter without recording (the loop stopped inside the first step)."""
        mode, self._mode = self._mode, None
        if mode is not None:
            try:
                mode.__exit__(None, None, None)
            except Exception:
                pass
