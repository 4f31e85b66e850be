"""numpy when it may be used: installed (the `fast` extra) and not turned off by
$MLGOODPUT_NUMPY=0. One loader for every package with numpy fast paths (the accounting's
kernels, the stores' column encoders); numpy is imported on first use only."""

from __future__ import annotations

import os
from typing import Any

from mlgoodput import _env

_np: Any = None
_state = 0  # 0: not tried yet, 1: numpy loaded, -1: off or missing


def numpy() -> Any:
    """The numpy module, or None (not installed, or $MLGOODPUT_NUMPY=0)."""
    global _np, _state
    if _state == 0:
        _state = -1
        if os.environ.get(_env.NUMPY, "").strip().lower() not in ("0", "off", "false", "no"):
            try:
                import numpy as np
            except ImportError:
                pass
            else:
                _np, _state = np, 1
    return _np


def reset() -> None:
    """Look at $MLGOODPUT_NUMPY again on next use (tests switch it)."""
    global _np, _state
    _np, _state = None, 0


def turn_off() -> None:
    """No numpy until the next `reset` (tests)."""
    global _np, _state
    _np, _state = None, -1
