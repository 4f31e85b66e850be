"""FLOPs of a PyTorch step from `torch.utils.flop_counter.FlopCounterMode`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def torch_step_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> float:
    """FLOPs counted while `fn(*args, **kwargs)` runs once (forward, and backward when `fn`
    calls it): PyTorch counts matrix products, convolutions and attention, not elementwise ops."""
    try:
        import torch  # noqa: F401
    except ImportError as e:
        raise ImportError("torch_step_flops needs PyTorch: pip install 'mlgoodput[torch]'") from e
    from mlgoodput.torch import flop_counter

    counter = flop_counter()  # FlopCounterMode, counting CPU attention too
    with counter:
        fn(*args, **kwargs)
    return float(counter.get_total_flops())
