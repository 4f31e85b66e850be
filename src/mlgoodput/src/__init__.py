"""`ml_goodput_measurement.src`'s twin: code that imports the seed's modules from `.src`
(`from ml_goodput_measurement.src import goodput_elastic`, a guarded import in axlearn) switches
by changing the package name only. Each module here is the top-level one of the same name."""

from __future__ import annotations

import importlib
from typing import Any

#: The seed's `src` modules that mlgoodput has.
MODULES = ("goodput", "goodput_elastic", "goodput_utils", "monitoring", "monitoring_elastic")

__all__ = list(MODULES)


def __getattr__(name: str) -> Any:
    if name in MODULES:
        return importlib.import_module(f"mlgoodput.src.{name}")
    raise AttributeError(f"module 'mlgoodput.src' has no attribute {name!r}")
