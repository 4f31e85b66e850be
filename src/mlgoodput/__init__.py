"""mlgoodput: where the accelerator time of ML training jobs goes.

The public modules, by what they are for:

- recording: `goodput` (the seed-compatible recorder and calculator), `goodput_utils`,
  `goodput_elastic`, `events` (the event model) and `identity` (which process this is);
- frameworks: `jax`, `torch` and `flops` (FLOPs per step and peak FLOP/s);
- accounting: `accounting` (events in, a report out) over a `store`;
- looking: `monitoring` and `monitoring_elastic` (uploaders), `export` (the backends),
  `console`, `ui` (the web app) and `diagnostics` (runs, metrics, profiles);
- `testing` (fakes for tests) and `src` (the seed's `ml_goodput_measurement.src` layout).

`mlgoodput.cli` is the `mlgoodput` command. Importing this package imports none of the
modules above: each loads on first attribute access (`mlgoodput.goodput`, `mlgoodput.torch`),
so `import mlgoodput` stays fast. docs/architecture.md shows how they fit together.
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
        "identity",
        "jax",
        "monitoring",
        "monitoring_elastic",
        "src",
        "store",
        "testing",
        "torch",
        "ui",
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
