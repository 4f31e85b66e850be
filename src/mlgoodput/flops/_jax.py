"""FLOPs of a jitted JAX function from the compiler (`Compiled.cost_analysis()`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def jax_step_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> float | None:
    """FLOPs of one call of `fn` (a `jax.jit` function, or any function, which is jitted)
    with these arguments, as XLA counts them for the program it compiled; None when the
    backend gives no count. On several devices the count is the whole program's."""
    import jax

    lower = getattr(fn, "lower", None)
    if lower is None:
        lower = jax.jit(fn).lower
    compiled = lower(*args, **kwargs).compile()
    cost = compiled.cost_analysis()
    if isinstance(cost, (list, tuple)):  # older JAX: one dict per computation
        total = 0.0
        seen = False
        for c in cost:
            if c and "flops" in c:
                total += float(c["flops"])
                seen = True
        return total if seen else None
    if not cost or "flops" not in cost:
        return None
    v = float(cost["flops"])
    return v if v > 0 else None


def device_kinds() -> list[str]:
    """The kinds of this process's view of all devices (`jax.devices()`)."""
    import jax

    return [d.device_kind for d in jax.devices()]
