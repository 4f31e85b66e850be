"""Cloud Monitoring for JAX metrics with seed 000's naming: `custom.googleapis.com/jax/monitoring/...`.

This reuses `CloudMonitoringExporter` (client, batching, the service's 10 s rule, retries)
and changes only where a sample goes: the metric type is `metric_prefix` + `/` + the
sample name (the latest value of a duration is written under the event's own name, as
jax-monitoring does), and the monitored resource is `global` or, on a GCE VM, `gce_instance` with
its instance id and zone (or whatever `monitored_resource_type/labels` say). Histogram
bucket samples are not sent (one series per bucket would multiply the bill); count, sum,
min, max and last are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mlgoodput import _env
from mlgoodput._gcp_metadata import metadata_value
from mlgoodput.export import CloudMonitoringExporter, GCPOptions, Sample, label_name


class JaxCloudMonitoringExporter(CloudMonitoringExporter):
    """Cloud Monitoring custom metrics under `metric_prefix`, labelled with `job_name`."""

    def __init__(
        self,
        *,
        project_id: str | None = None,
        metric_prefix: str = "custom.googleapis.com/jax/monitoring",
        resource_type: str | None = None,
        resource_labels: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(metric_prefix, str) or not metric_prefix.strip("/"):
            raise ValueError(f"metric_prefix must be a non-empty string, got {metric_prefix!r}")
        # location and accelerator do not apply to custom metrics: set them so the base
        # class neither asks the metadata server for them nor turns export off.
        opts = GCPOptions(project_id=project_id, location="global", acc_type="none")
        super().__init__(opts, **kwargs)
        self.project_id = project_id
        self.metric_prefix = metric_prefix.rstrip("/")
        self.resource_type = resource_type
        self.resource_labels = dict(resource_labels or {})
        self._resource: tuple[str, dict[str, str]] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = super().__getstate__()
        for k in ("project_id", "metric_prefix", "resource_type", "resource_labels"):
            state[k] = getattr(self, k)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self._resource = None

    def start(self) -> None:
        if self._resolved is None:
            import os

            from mlgoodput._gcp_metadata import on_google_cloud
            from mlgoodput.jax._resource import detect_resource

            host = self.metadata_host or os.environ.get(_env.GCE_METADATA_HOST)

            def lookup(path: str) -> str | None:
                return metadata_value(path, host=host, timeout_s=self.metadata_timeout_s)

            project, rtype, rlabels = detect_resource(
                self.project_id,
                self.resource_type,
                self.resource_labels,
                gce=bool(host) or on_google_cloud(),
                lookup=lookup,
            )
            self._resource = (rtype, rlabels)
            if project is not None:
                self.gcp_options = GCPOptions(project_id=project, location="global", acc_type="none")
        super().start()

    def _series(self, s: Sample, opts: GCPOptions) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
        if s.name.endswith("/bucket"):
            return None
        rtype, rlabels = self._resource or ("global", {"project_id": opts.project_id or ""})
        mlabels = {label_name(str(k)): str(v) for k, v in s.labels.items()}
        name = s.name.strip("/")
        if name.endswith("/last") and s.unit == "s":
            # the latest duration goes under the event's own name, the metric type jax-monitoring
            # writes (`<prefix>/<event>`), so its dashboards and alerts keep working
            name = name[: -len("/last")]
        spec: dict[str, Any] = {
            "type": f"{self.metric_prefix}/{name}",
            "labels": mlabels,
            "rtype": rtype,
            "rlabels": dict(rlabels),
            "vtype": "DOUBLE",
        }
        key = (spec["type"], tuple(sorted(mlabels.items())), rtype, tuple(sorted(rlabels.items())))
        return key, spec
