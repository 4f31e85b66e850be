"""FLOPs of a PyTorch step from `torch.utils.flop_counter.FlopCounterMode`.

`flop_counter` is the one counter: `torch_step_flops` here and the torch integration's
`StepFlops` (which counts one real training step) both use it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any


def torch_step_flops(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> float:
    """FLOPs counted while one training step runs, on this process.

    `fn` a function: `fn(*args, **kwargs)` once (forward, and backward when `fn` calls it).
    `fn` a `torch.nn.Module`: a training step of it, forward on the arguments and, with grad
    mode on, backward from the sum of its floating-point outputs (the loss does not change
    the count: FlopCounterMode counts matrix products, convolutions and attention, not
    elementwise work, nor the optimizer's update). A module is counted as its eager self:
    a `torch.compile`d one (which FlopCounterMode would turn eager for good) and a
    DistributedDataParallel wrapper (whose backward would wait on the other ranks) are
    unwrapped. The module is left as it was: its parameters' `.grad`, its buffers (batch
    norm statistics) and the random number generators are restored, so the count can run
    at any point of training.
    """
    try:
        import torch
    except ImportError as e:
        raise ImportError("torch_step_flops needs PyTorch: pip install 'mlgoodput[torch]'") from e
    counter = flop_counter()  # FlopCounterMode, counting CPU attention too
    if isinstance(fn, torch.nn.Module):
        _count_module(torch, counter, _eager(torch, fn), args, kwargs)
    else:
        with counter:
            fn(*args, **kwargs)
    return float(counter.get_total_flops())


def _eager(torch: Any, module: Any) -> Any:
    """The eager module inside `torch.compile` (its `_orig_mod`) and DDP (`.module`) wrappers."""
    ddp = torch.nn.parallel.DistributedDataParallel
    for _ in range(8):  # wrappers of wrappers, never a cycle
        inner = getattr(module, "_orig_mod", None)
        if isinstance(inner, torch.nn.Module):
            module = inner
        elif isinstance(module, ddp):
            module = module.module
        else:
            break
    return module


def _float_tensors(out: Any, torch: Any, depth: int = 0) -> Iterator[Any]:
    """The floating-point tensors of a module's output that need a gradient (a tensor, or
    tensors inside mappings such as a Hugging Face ModelOutput, lists and tuples)."""
    if isinstance(out, torch.Tensor):
        if out.requires_grad and out.is_floating_point():
            yield out
    elif depth < 4 and isinstance(out, Mapping):
        for v in out.values():
            yield from _float_tensors(v, torch, depth + 1)
    elif depth < 4 and isinstance(out, (list, tuple)):
        for v in out:
            yield from _float_tensors(v, torch, depth + 1)


def _count_module(torch: Any, counter: Any, module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    params = list(module.parameters())
    grads = [p.grad for p in params]
    buffers = [(b, b.detach().clone()) for b in module.buffers()]
    cuda = sorted({p.device.index or 0 for p in params if p.device.type == "cuda"})
    try:
        for p in params:
            p.grad = None
        with torch.random.fork_rng(devices=cuda), counter:
            out = module(*args, **kwargs)
            if torch.is_grad_enabled():
                ts = list(_float_tensors(out, torch))
                if ts:
                    sum(t.sum() for t in ts).backward()
    finally:
        for p, g in zip(params, grads, strict=True):
            p.grad = g
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)


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
