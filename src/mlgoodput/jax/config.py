"""jax-monitoring's `config` module: the process-wide settings `init` and `register_listeners` use.

`set_config` changes only the fields it is given (None leaves a field as it is), as in
jax-monitoring; `init` writes its arguments here, so `get_config()` shows what is running.
"""

from __future__ import annotations

import dataclasses
import threading

__all__ = ["Config", "get_config", "replace_config", "set_config"]


@dataclasses.dataclass
class Config:
    """Where JAX metrics go: the Cloud project, the metric prefix, the resource and the job label."""

    project_id: str | None = None
    metric_prefix: str = "custom.googleapis.com/jax/monitoring"
    monitored_resource_type: str = "global"
    monitored_resource_labels: dict[str, str] = dataclasses.field(default_factory=dict)
    job_name: str = "jax_job"


_lock = threading.Lock()
_GLOBAL_CONFIG = Config()


def get_config() -> Config:
    """The current settings (the object itself, as in jax-monitoring)."""
    return _GLOBAL_CONFIG


def replace_config(config: Config) -> None:
    """Replace the settings as a whole."""
    global _GLOBAL_CONFIG
    if not isinstance(config, Config):
        raise TypeError(f"config must be a mlgoodput.jax.config.Config, got {config!r}")
    with _lock:
        _GLOBAL_CONFIG = config


def set_config(
    project_id: str | None = None,
    metric_prefix: str | None = None,
    monitored_resource_type: str | None = None,
    monitored_resource_labels: dict[str, str] | None = None,
    job_name: str | None = None,
) -> None:
    """Change the given settings; an argument left at None keeps its current value."""
    for arg, v in (
        ("project_id", project_id),
        ("metric_prefix", metric_prefix),
        ("monitored_resource_type", monitored_resource_type),
        ("job_name", job_name),
    ):
        if v is not None and (not isinstance(v, str) or not v.strip()):
            raise TypeError(f"{arg} must be a non-empty string or None, got {v!r}")
    if monitored_resource_labels is not None and not isinstance(monitored_resource_labels, dict):
        raise TypeError(
            f"monitored_resource_labels must be a dict of str to str or None, got {monitored_resource_labels!r}"
        )
    with _lock:
        c = _GLOBAL_CONFIG
        if project_id is not None:
            c.project_id = project_id
        if metric_prefix is not None:
            c.metric_prefix = metric_prefix
        if monitored_resource_type is not None:
            c.monitored_resource_type = monitored_resource_type
        if monitored_resource_labels is not None:
            c.monitored_resource_labels = monitored_resource_labels
        if job_name is not None:
            c.job_name = job_name
