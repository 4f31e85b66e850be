"""FLOPs per step and peak FLOP/s, for MFU and program goodput (docs/accounting.md).

    from mlgoodput import flops
    recorder.record_step_flops(flops.jax_step_flops(train_step, state, batch))
    flops.record_peak(recorder)                 # from jax.devices(): the table, or the CPU's peak

`flop_counter()` is the PyTorch counter (FlopCounterMode, CPU attention counted too) that
`torch_step_flops` and `mlgoodput.torch` use; `track_jax_step_flops(step, recorder)` wraps a
jitted step so that every compiled shape's count is recorded (`mlgoodput.jax.track_step_flops`
is this with the JAX session's recorder). Nothing here imports JAX or PyTorch until a function
that needs it is called. The framework integrations import this package, never the other way.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from mlgoodput.flops._analytic import dense_params, transformer_flops
from mlgoodput.flops._detect import CPU_PEAK_FLOPS, detect_peak, measure_matmul_flops
from mlgoodput.flops._jax import jax_step_flops
from mlgoodput.flops._jax_steps import track_jax_step_flops
from mlgoodput.flops._peaks import PEAKS, peak_per_device
from mlgoodput.flops._torch import cpu_attention_formulas, flop_counter, torch_step_flops

__all__ = [
    "CPU_PEAK_FLOPS",
    "PEAKS",
    "cpu_attention_formulas",
    "dense_params",
    "detect_peak",
    "flop_counter",
    "jax_step_flops",
    "measure_matmul_flops",
    "peak_per_device",
    "record_jax_step_flops",
    "record_peak",
    "torch_step_flops",
    "track_jax_step_flops",
    "transformer_flops",
]


def record_jax_step_flops(recorder: Any, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> float | None:
    """Compute `jax_step_flops(fn, *args, **kwargs)` and record it on `recorder`; returns it."""
    v = jax_step_flops(fn, *args, **kwargs)
    if v is not None:
        recorder.record_step_flops(v)
    return v


def record_peak(
    recorder: Any,
    dtype: object = "bf16",
    *,
    device_kinds: Sequence[str] | None = None,
    cpu_peak_flops_per_s: float | None = None,
    measure: bool = True,
) -> tuple[float, str] | None:
    """Detect the peak of the job's devices (default: `jax.devices()`) and record it with
    its source; returns (FLOP/s, source), or None (nothing recorded) when unknown."""
    if device_kinds is None:
        from mlgoodput.flops._jax import device_kinds as _kinds

        device_kinds = _kinds()
    found = detect_peak(device_kinds, dtype, cpu_peak_flops_per_s=cpu_peak_flops_per_s, measure=measure)
    if found is not None:
        recorder.record_peak_flops(found[0], source=found[1])
    return found
