"""jax-monitoring's `listeners` module: start and stop listening with the current `config`.

`register_listeners()` starts mlgoodput's JAX monitoring session (listeners on every
`jax.monitoring` event kind, aggregation, a background exporter process) from
`config.get_config()`; `stop_listeners()` stops it. Both are safe to call twice.
"""

from __future__ import annotations

import logging

from mlgoodput.jax._init import register_listeners, shutdown
from mlgoodput.jax.config import Config, get_config, replace_config, set_config
from mlgoodput.jax.gcp_utils import get_client, get_project_path, initialize_client

__all__ = [
    "Config",
    "get_client",
    "get_config",
    "get_project_path",
    "initialize_client",
    "logger",
    "register_listeners",
    "replace_config",
    "set_config",
    "stop_listeners",
]


logger = logging.getLogger("mlgoodput.jax")


def stop_listeners() -> None:
    """Unregister the listeners, export what was aggregated and stop the exporter process."""
    shutdown()
