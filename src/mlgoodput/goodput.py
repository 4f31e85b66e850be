"""Seed-compatible facade: `from mlgoodput import goodput` instead of
`from ml_goodput_measurement import goodput`, with the same class and method names."""

from __future__ import annotations

from typing import Any

from mlgoodput._recorder import GoodputRecorder
from mlgoodput.accounting import BadputType, GoodputReport

__all__ = ["BadputType", "GoodputCalculator", "GoodputRecorder", "GoodputReport"]  # noqa: F822 (the calculator is imported lazily until main has it)


def __getattr__(name: str) -> Any:
    # The calculator lives in mlgoodput.accounting; imported on first use.
    if name == "GoodputCalculator":
        from mlgoodput.accounting import GoodputCalculator  # type: ignore[attr-defined]

        return GoodputCalculator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
