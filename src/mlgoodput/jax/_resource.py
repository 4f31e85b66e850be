"""Where the Cloud Monitoring metrics of a JAX job say they come from: `global` or `gce_instance`.

Detection never touches the network unless the machine says it is on Google Cloud
(`_gcp_metadata.on_google_cloud`: its DMI tables, or a metadata server or Cloud TPU named in
the environment), and then only asks the metadata server with a short timeout.
It runs in the exporter, never on the training thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from mlgoodput import _env
from mlgoodput._gcp_metadata import on_google_cloud


def project_from_env() -> str | None:
    """The project named by the usual Google Cloud environment variables, if any."""
    for name in _env.GCP_PROJECT_VARS:
        v = os.environ.get(name)
        if v:
            return v
    return None


def detect_resource(
    project_id: str | None,
    resource_type: str | None,
    resource_labels: Mapping[str, str] | None,
    *,
    gce: bool | None = None,
    lookup: Callable[[str], str | None] | None = None,
) -> tuple[str | None, str, dict[str, str]]:
    """(project_id, monitored resource type, its labels), filling in what was not given.

    An explicit type and labels win. Otherwise a GCE VM reports `gce_instance` with its
    instance id and zone (from the metadata server) and anything else reports `global`.
    """
    is_gce = on_google_cloud() if gce is None else gce
    if lookup is None:
        from mlgoodput._gcp_metadata import metadata_value

        def lookup(path: str) -> str | None:
            return metadata_value(path, timeout_s=0.5)

    project = project_id or project_from_env()
    if project is None and is_gce:
        project = lookup("project/project-id")
    labels = {str(k): str(v) for k, v in (resource_labels or {}).items()}
    rtype = resource_type
    if rtype is None:
        rtype = "global"
        if is_gce:
            instance_id = lookup("instance/id")
            zone = lookup("instance/zone")
            if instance_id and zone:
                rtype = "gce_instance"
                labels.setdefault("instance_id", instance_id)
                labels.setdefault("zone", zone.rsplit("/", 1)[-1])
    if project:
        labels.setdefault("project_id", project)
    return project, rtype, labels
