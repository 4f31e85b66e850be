"""The part of the SDK's `core` package that user code names: `xprof.Xprof` and
`global_manager.get_current_run`. The rest of the SDK's `core` talks to its Google Cloud
control plane and has no counterpart here (see docs/compatibility.md)."""

from mlgoodput.diagnostics.core import global_manager, xprof

__all__ = ["global_manager", "xprof"]
