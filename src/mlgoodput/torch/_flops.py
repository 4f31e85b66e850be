"""FLOPs of one training step, counted once with FlopCounterMode (for MFU).

The counter wraps one real step (forward, backward, optimizer), entered at the step's start
hook and left at its end hook on the same thread; every other step runs without it. It
counts the first step after the attempt's first one, and only when nothing was compiled:
with PyTorch 2.13, running a `torch.compile`d module under FlopCounterMode (its first call
or any later one) makes it run eagerly for the rest of the process (seen in tests/torch).
So once Dynamo has compiled a frame, the counter stays off and says so; count the eager
module instead (`mlgoodput.flops.torch_step_flops(model, batch)`, which is harmless to the
compiled one) and record it with `record_step_flops`. Steps do the same work, so the
count is the same.
Each rank counts its own work; the job's FLOPs per step are that times the world size
(data parallel: every rank does the same work).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["StepFlops", "cpu_attention_formulas", "dynamo_compiled", "flop_counter"]


def cpu_attention_formulas() -> dict[Any, Any]:
    """FLOP formulas for the CPU attention kernels that FlopCounterMode counts as zero in
    torch 2.13 (`scaled_dot_product_attention` on the CPU runs
    `_scaled_dot_product_flash_attention_for_cpu`, which its table lacks): the same count as
    for the GPU kernels. Empty where the installed torch already counts them."""
    import torch
    from torch.utils import flop_counter as _fc

    fc: Any = _fc  # its formulas are untyped

    aten = torch.ops.aten
    out: dict[Any, Any] = {}
    fwd = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu", None)
    bwd = getattr(aten, "_scaled_dot_product_flash_attention_for_cpu_backward", None)
    if fwd is not None and fwd not in fc.flop_registry and fwd.default not in fc.flop_registry:

        def forward(
            query_shape: Any, key_shape: Any, value_shape: Any, *args: Any, out_shape: Any = None, **kwargs: Any
        ) -> int:
            return int(fc.sdpa_flop_count(query_shape, key_shape, value_shape))

        out[fwd] = forward
    if bwd is not None and bwd not in fc.flop_registry and bwd.default not in fc.flop_registry:

        def backward(
            grad_out_shape: Any,
            query_shape: Any,
            key_shape: Any,
            value_shape: Any,
            *args: Any,
            out_shape: Any = None,
            **kwargs: Any,
        ) -> int:
            return int(fc.sdpa_backward_flop_count(grad_out_shape, query_shape, key_shape, value_shape))

        out[bwd] = backward
    return out


def flop_counter() -> Any:
    """A FlopCounterMode that also counts the CPU attention kernels."""
    from torch.utils.flop_counter import FlopCounterMode

    return FlopCounterMode(display=False, custom_mapping=cpu_attention_formulas())


def dynamo_compiled() -> bool:
    """Whether Dynamo compiled any frame in this process (its own counters; never imports)."""
    utils = sys.modules.get("torch._dynamo.utils")
    try:
        return utils is not None and int(utils.counters["frames"].get("total", 0)) > 0
    except Exception:  # counters we do not understand: assume compiled, stay off
        return utils is not None


class StepFlops:
    """Counts one step: `begin()` at each step's start (all but one do nothing), `end()` at its
    end -> FLOPs of the job's step."""

    def __init__(self, world_size: int = 1, skip: int = 1) -> None:
        self.world_size = world_size
        self.skip = skip  # steps to let pass first (the compile step)
        self.rank_flops: float | None = None
        self.done = False
        self.skipped_compiled = False  # not counted: a compiled step would turn eager
        self._mode: Any = None

    @property
    def counting(self) -> bool:
        return self._mode is not None

    def begin(self) -> None:
        if self.done or self._mode is not None:
            return
        if self.skip > 0:
            self.skip -= 1
            return
        self.done = True  # whatever happens, only one attempt at counting
        if dynamo_compiled():
            self.skipped_compiled = True
            return
        mode: Any = flop_counter()
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
