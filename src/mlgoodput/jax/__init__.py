"""JAX integration: `jax.monitoring` metrics, measured program startup, Orbax checkpoints.

    import mlgoodput.jax as jm
    jm.init(job_name="my-training-job")     # listeners on; aggregates exported in the background
                                            # (jax-monitoring's arguments and order: project_id first)
    ...                                     # jit, train
    jm.shutdown()                           # also runs at exit
    step = jm.track_step_flops(step)        # the compiler's FLOPs of each compiled step, recorded
    watcher = jm.CompletionWatcher(recorder) # steps timed by device completion (async dispatch)

Nothing happens at import. `OrbaxLogger` (imported on first use, it needs Orbax) records
checkpoint saves and restores of a `CheckpointManager` as the job's checkpoint events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mlgoodput.jax import config, gcp_utils, listeners
from mlgoodput.jax._flops import track_step_flops
from mlgoodput.jax._init import init, register_listeners, shutdown
from mlgoodput.jax._session import DEFAULT_METRIC_PREFIX, NAMESPACE, Session, current
from mlgoodput.jax._watch import CompletionWatcher
from mlgoodput.jax.config import set_config
from mlgoodput.jax.gcp_utils import initialize_client

if TYPE_CHECKING:
    from mlgoodput.jax._orbax import OrbaxLogger

__all__ = [
    "DEFAULT_METRIC_PREFIX",
    "NAMESPACE",
    "CompletionWatcher",
    "OrbaxLogger",
    "Session",
    "config",
    "current",
    "gcp_utils",
    "init",
    "initialize_client",
    "listeners",
    "register_listeners",
    "set_config",
    "shutdown",
    "track_step_flops",
]


def __getattr__(name: str) -> Any:
    if name == "OrbaxLogger":
        try:
            from mlgoodput.jax._orbax import OrbaxLogger
        except ImportError as e:
            raise ImportError("mlgoodput.jax.OrbaxLogger needs Orbax: pip install 'mlgoodput[jax]'") from e
        return OrbaxLogger
    raise AttributeError(f"module 'mlgoodput.jax' has no attribute {name!r}")
