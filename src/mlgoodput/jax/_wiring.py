"""The JAX session's own wiring: the exporters it ships to when none are given."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def default_exporters(
    *,
    project_id: str | None,
    metric_prefix: str,
    resource_type: str | None,
    resource_labels: Mapping[str, str] | None,
) -> list[Any]:
    """Cloud Monitoring with the seed's naming when a project is named or in the environment;
    otherwise none (the aggregates still reach the store)."""
    from mlgoodput.jax._resource import project_from_env

    if project_id is None and project_from_env() is None:
        return []
    from mlgoodput.jax._gcm import JaxCloudMonitoringExporter

    return [
        JaxCloudMonitoringExporter(
            project_id=project_id,
            metric_prefix=metric_prefix,
            resource_type=resource_type,
            resource_labels=resource_labels,
        )
    ]
