"""The SDK's `core.xprof` path: `Xprof` is `mlgoodput.diagnostics.xprof`."""

from mlgoodput.diagnostics._xprof import xprof as Xprof

__all__ = ["Xprof"]
