"""Peak dense FLOP/s per device by device kind and dtype (docs/accounting.md, "Peak FLOP/s").

Vendor datasheet figures for dense math (no structured sparsity), per chip or GPU, in
FLOP/s. A device kind is matched by the first entry whose pattern occurs in the lower-cased
kind string, so more specific patterns come first.
"""

from __future__ import annotations

T = 1e12

#: (pattern in the lower-cased device kind, display name, {dtype: dense FLOP/s per device})
PEAKS: tuple[tuple[str, str, dict[str, float]], ...] = (
    # Google TPUs (per chip)
    ("tpu7x", "TPU7x (Ironwood)", {"bf16": 2307 * T, "fp8": 4614 * T}),
    ("tpu v6 lite", "TPU v6e (Trillium)", {"bf16": 918 * T, "int8": 1836 * T}),
    ("tpu v6e", "TPU v6e (Trillium)", {"bf16": 918 * T, "int8": 1836 * T}),
    ("tpu v5 lite", "TPU v5e", {"bf16": 197 * T, "int8": 394 * T}),
    ("tpu v5e", "TPU v5e", {"bf16": 197 * T, "int8": 394 * T}),
    ("tpu v5p", "TPU v5p", {"bf16": 459 * T, "int8": 918 * T}),
    ("tpu v5", "TPU v5p", {"bf16": 459 * T, "int8": 918 * T}),
    ("tpu v4", "TPU v4", {"bf16": 275 * T, "int8": 275 * T}),
    # NVIDIA GPUs (per GPU, dense tensor-core figures; fp32 is the non-tensor rate)
    ("gb200", "NVIDIA GB200", {"bf16": 2500 * T, "fp16": 2500 * T, "fp8": 5000 * T, "tf32": 1250 * T}),
    ("b200", "NVIDIA B200", {"bf16": 2250 * T, "fp16": 2250 * T, "fp8": 4500 * T, "tf32": 1100 * T}),
    (
        "h200",
        "NVIDIA H200",
        {"bf16": 989.4 * T, "fp16": 989.4 * T, "fp8": 1978.9 * T, "tf32": 494.7 * T, "fp32": 66.9 * T},
    ),
    (
        "h100 pcie",
        "NVIDIA H100 PCIe",
        {"bf16": 756.5 * T, "fp16": 756.5 * T, "fp8": 1513 * T, "tf32": 378 * T, "fp32": 51.2 * T},
    ),
    (
        "h100 nvl",
        "NVIDIA H100 NVL",
        {"bf16": 835.5 * T, "fp16": 835.5 * T, "fp8": 1671 * T, "tf32": 417.5 * T, "fp32": 60 * T},
    ),
    (
        "h100",
        "NVIDIA H100 SXM",
        {"bf16": 989.4 * T, "fp16": 989.4 * T, "fp8": 1978.9 * T, "tf32": 494.7 * T, "fp32": 66.9 * T},
    ),
    ("a100", "NVIDIA A100", {"bf16": 312 * T, "fp16": 312 * T, "tf32": 156 * T, "fp32": 19.5 * T, "int8": 624 * T}),
    ("l40s", "NVIDIA L40S", {"bf16": 362 * T, "fp16": 362 * T, "fp8": 733 * T, "fp32": 91.6 * T}),
    ("l4", "NVIDIA L4", {"bf16": 121 * T, "fp16": 121 * T, "fp8": 242.5 * T, "fp32": 30.3 * T}),
    ("a10g", "NVIDIA A10G", {"bf16": 70 * T, "fp16": 70 * T, "fp32": 35 * T}),
    ("v100", "NVIDIA V100", {"fp16": 125 * T, "fp32": 15.7 * T}),
)

_ALIASES = {
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float32": "fp32",
    "float": "fp32",
    "tensorfloat32": "tf32",
    "float8": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
    "e4m3": "fp8",
    "e5m2": "fp8",
}


def dtype_key(dtype: object) -> str:
    """A dtype (a string, a numpy/JAX/torch dtype) as one of the table's keys."""
    s = str(getattr(dtype, "name", dtype)).lower().removeprefix("torch.").removeprefix("jnp.")
    return _ALIASES.get(s, s)


def peak_per_device(device_kind: str, dtype: object = "bf16") -> tuple[float, str] | None:
    """(dense FLOP/s, display name) of one device of this kind, or None if unknown."""
    kind = device_kind.lower()
    key = dtype_key(dtype)
    for pattern, name, by_dtype in PEAKS:
        if pattern in kind:
            v = by_dtype.get(key)
            return None if v is None else (v, name)
    return None
