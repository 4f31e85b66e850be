"""mlgoodput: where the accelerator time of ML training jobs goes.

The public modules are `mlgoodput.goodput` (recorder and calculator), `goodput_utils`,
`goodput_elastic`, `monitoring`, `monitoring_elastic`, `export`, `flops`, `jax`,
`diagnostics`, `console`, `store`, `accounting` and `testing`. Importing this package imports none of
them: each loads on first attribute access (`mlgoodput.goodput`), so `import mlgoodput`
stays fast.
"""

from __future__ import annotations

import importlib
import time
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: When this package was first imported (UNIX seconds): the latest a job of this process
#: can have started, where the process's own start cannot be read (`_process_window`).
_IMPORTED_AT = time.time()

#: Submodules that load on first access as attributes of the package.
_LAZY_MODULES = frozenset(
    {
        "accounting",
        "console",
        "diagnostics",
        "events",
        "export",
        "flops",
        "goodput",
        "goodput_elastic",
        "goodput_utils",
        "jax",
        "monitoring",
        "monitoring_elastic",
        "src",
        "store",
        "testing",
    }
)
#: Names re-exported from a private module, loaded on first access.
_LAZY_NAMES = {
    "MlGoodputWarning": "mlgoodput._misuse",
    "MlGoodputMisuseError": "mlgoodput._misuse",
}

__all__ = ["MlGoodputMisuseError", "MlGoodputWarning", "__version__"]

if TYPE_CHECKING:
    from mlgoodput._misuse import MlGoodputMisuseError, MlGoodputWarning


def __getattr__(name: str) -> Any:
    """PEP 562: load a submodule or re-exported name the first time it is asked for."""
    if name in _LAZY_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    where = _LAZY_NAMES.get(name)
    if where is not None:
        value = getattr(importlib.import_module(where), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | _LAZY_MODULES | set(_LAZY_NAMES))
