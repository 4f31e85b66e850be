"""Analytic FLOP counts, to cross-check what a compiler or counter reports."""

from __future__ import annotations

import itertools


def transformer_flops(
    n_params: float,
    tokens: float,
    *,
    n_layers: int = 0,
    seq_len: int = 0,
    d_model: int = 0,
    causal: bool = False,
    training: bool = True,
) -> float:
    """FLOPs of processing `tokens` tokens: 2 x N x tokens forward (6 x for training:
    forward plus a backward that costs twice as much), plus the attention scores and the
    weighted sum, 2 x 2 x n_layers x seq_len x d_model per token forward (half when
    causal and the kernel skips the masked half)."""
    if n_params < 0 or tokens < 0:
        raise ValueError(f"n_params and tokens must be >= 0, got {n_params!r}, {tokens!r}")
    per_token_attn = 4.0 * n_layers * seq_len * d_model * (0.5 if causal else 1.0)
    forward = 2.0 * n_params * tokens + per_token_attn * tokens
    return 3.0 * forward if training else forward


def dense_params(sizes: list[int], bias: bool = True) -> int:
    """Parameters of a stack of dense layers sizes[0] -> sizes[1] -> ..."""
    return sum(a * b + (b if bias else 0) for a, b in itertools.pairwise(sizes))
