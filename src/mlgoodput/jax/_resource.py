"""Where the Cloud Monitoring metrics of a JAX job say they come from: `global` or `gce_instance`.

Detection never touches the network unless the machine says it is a Google Compute Engine
VM (its DMI product name), and then only asks the metadata server with a short timeout.
It runs in the exporter, never on the training thread.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

from mlgoodput import _env

_DMI_FILES = ("/sys/class/dmi/id/product_name", "/sys/class/dmi/id/bios_vendor")


def on_gce(read: Callable[[str], str] | None = None) -> bool:
    """True when the DMI tables name Google as the maker of this machine."""
    for path in _DMI_FILES:
        try:
            if read is not None:
                text = read(path)
            else:
                with open(path, encoding="utf-8") as f:
                    text = f.read()
        except OSError:
            continue
        if "Google" in text:
            return True
    return False


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
    is_gce = on_gce() if gce is None else gce
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
