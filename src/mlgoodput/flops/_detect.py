"""The peak FLOP/s of a job's devices: the table, a configured CPU peak, or a measured matmul."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from mlgoodput import _env
from mlgoodput.flops._peaks import dtype_key, peak_per_device

#: Peak FLOP/s of this process's CPU devices together (a CPU's `device_kind` is just "cpu").
CPU_PEAK_FLOPS = _env.CPU_PEAK_FLOPS


def measure_matmul_flops(n: int = 512, repeats: int = 5) -> float | None:
    """The best FLOP/s of an n x n float32 matrix product on this CPU (numpy, else JAX), or None."""
    try:
        import numpy as np
    except ImportError:
        return None
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    a @ a  # warm up
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        a @ a
        best = min(best, time.perf_counter() - t0)
    return 2.0 * n**3 / best if best > 0 else None


def detect_peak(
    device_kinds: Sequence[str],
    dtype: object = "bf16",
    *,
    cpu_peak_flops_per_s: float | None = None,
    measure: bool = True,
) -> tuple[float, str] | None:
    """(peak FLOP/s of these devices together, source) or None when it cannot be known.

    Accelerators come from the table ("table:<name> x<count> <dtype>"); CPUs from
    `cpu_peak_flops_per_s`, else $MLGOODPUT_CPU_PEAK_FLOPS ("configured"), else a measured
    float32 matmul when `measure` ("measured")."""
    kinds = list(device_kinds)
    if not kinds:
        return None
    if all(k.lower() == "cpu" for k in kinds):
        if cpu_peak_flops_per_s is None:
            raw = os.environ.get(CPU_PEAK_FLOPS)
            if raw:
                try:
                    cpu_peak_flops_per_s = float(raw)
                except ValueError:
                    raise ValueError(f"${CPU_PEAK_FLOPS} must be a number of FLOP/s, got {raw!r}") from None
        if cpu_peak_flops_per_s is not None:
            if not cpu_peak_flops_per_s > 0:
                raise ValueError(f"cpu_peak_flops_per_s must be > 0, got {cpu_peak_flops_per_s!r}")
            return float(cpu_peak_flops_per_s), "configured"
        if measure:
            m = measure_matmul_flops()
            return None if m is None else (m, "measured")
        return None
    total = 0.0
    names = set()
    for k in kinds:
        hit = peak_per_device(k, dtype)
        if hit is None:
            return None
        total += hit[0]
        names.add(hit[1])
    return total, f"table:{'+'.join(sorted(names))} x{len(kinds)} {dtype_key(dtype)}"
