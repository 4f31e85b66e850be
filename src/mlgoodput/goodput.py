"""Seed-compatible facade: `from mlgoodput import goodput` instead of
`from ml_goodput_measurement import goodput`, with the same class and method names."""

from __future__ import annotations

from mlgoodput._recorder import GoodputRecorder
from mlgoodput.accounting import BadputType, GoodputCalculator, GoodputReport

__all__ = ["BadputType", "GoodputCalculator", "GoodputRecorder", "GoodputReport"]
