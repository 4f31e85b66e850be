"""The public `init`, `register_listeners` and `shutdown` of `mlgoodput.jax` (jax-monitoring's API).

`init` takes jax-monitoring's arguments in its order (`project_id` first; `job_name` is the
fifth, so write `init(job_name=...)`), records them in `mlgoodput.jax.config` and starts
the session; `register_listeners()` starts it from the config as it stands.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from mlgoodput._metric_pipeline import (
    Aggregator,
    Shipper,
    default_host,
    find_goodput_journal,
    make_sink,
    recorder_journal,
)
from mlgoodput._misuse import misuse
from mlgoodput.events import check_name
from mlgoodput.jax import _listeners, _session, config

log = logging.getLogger("mlgoodput.jax")


def init(
    project_id: str | None = None,
    metric_prefix: str = _session.DEFAULT_METRIC_PREFIX,
    monitored_resource_type: str | None = None,
    monitored_resource_labels: Mapping[str, str] | None = None,
    job_name: str = "jax_job",
    *,
    store: Any = None,
    exporters: Sequence[Any] | None = None,
    recorder: Any = None,
    interval_s: float = 10.0,
    histograms: bool = True,
) -> _session.Session:
    """Start exporting `jax.monitoring` metrics of this process (safe to call twice).

    The arguments are jax-monitoring's, in its order; they are also stored in
    `mlgoodput.jax.config` (`get_config()`). `monitored_resource_type=None` picks `global`,
    or `gce_instance` on a GCE VM. Keyword-only extras:

    `exporters`: exporter objects (see `mlgoodput.export`) run by a background process;
    None means Cloud Monitoring when a project is known (`project_id` or the environment),
    else none (the aggregates still go to the store). `recorder`: a `GoodputRecorder` whose
    journal receives every compile as a `Kind.COMPILE` event (program startup); None looks
    for a recorder of `job_name` in this process. `histograms=False` leaves out the
    histogram bucket samples (TensorBoard shows each bucket as its own chart). A second call
    returns the running session.
    """
    check_name(job_name, "job_name")
    if project_id is not None:
        check_name(project_id, "project_id")
    check_name(metric_prefix, "metric_prefix")
    if monitored_resource_type is not None:
        check_name(monitored_resource_type, "monitored_resource_type")
    if monitored_resource_labels is not None and not isinstance(monitored_resource_labels, Mapping):
        raise TypeError(f"monitored_resource_labels must be a mapping of str to str, got {monitored_resource_labels!r}")
    if exporters is not None and (isinstance(exporters, (str, bytes)) or not isinstance(exporters, Sequence)):
        raise TypeError(f"exporters must be a list of exporters or None, got {exporters!r}")
    if isinstance(interval_s, bool) or not isinstance(interval_s, (int, float)) or not interval_s > 0:
        raise ValueError(f"interval_s must be a positive number of seconds, got {interval_s!r}")
    _listeners.monitoring_module()  # ImportError naming the extra when JAX is missing

    existing = _session.current()
    if existing is not None:
        if existing.job_name != job_name:
            misuse(
                "mlgoodput.jax.init",
                "job_name",
                job_name,
                f"already running for job {existing.job_name!r}; this call is ignored"
                " (call shutdown() first to start another)",
                kind="twice",
            )
        return existing
    from mlgoodput.jax._resource import project_from_env

    config.set_config(
        project_id=project_id if project_id is not None else project_from_env(),
        metric_prefix=metric_prefix,
        monitored_resource_type=monitored_resource_type,
        monitored_resource_labels=None if monitored_resource_labels is None else dict(monitored_resource_labels),
        job_name=job_name,
    )
    if exporters is None and (project_id or project_from_env()):
        from mlgoodput.jax import gcp_utils

        gcp_utils.initialize_client()  # as jax-monitoring's init does; never raises

    def build() -> _session.Session:
        from mlgoodput.jax._wiring import default_exporters

        agg = Aggregator()
        compile_sink = recorder_journal(recorder) if recorder is not None else find_goodput_journal(job_name)
        host = default_host(compile_sink)
        exps = (
            list(exporters)
            if exporters is not None
            else default_exporters(
                project_id=project_id,
                metric_prefix=metric_prefix,
                resource_type=monitored_resource_type,
                resource_labels=monitored_resource_labels,
            )
        )
        sink = make_sink(exps, interval_s=float(interval_s))  # raises if one cannot open
        callbacks = {"event": agg.on_event, "duration": agg.on_duration, "scalar": agg.on_scalar, "span": agg.on_span}
        added = _listeners.install(callbacks)
        try:
            if compile_sink is not None:
                added += _listeners.install(_listeners.compile_listeners(compile_sink))
            metric_journal = _session.metric_journal(store, job_name, host)
            shipper = Shipper(
                agg,
                {"job_name": job_name},
                sink,
                metric_journal,
                lambda: host,
                interval_s=float(interval_s),
                histograms=bool(histograms),
            )
            shipper.start()
        except BaseException:
            _listeners.uninstall(added)
            if sink is not None:
                sink.shutdown(5.0)
            raise
        return _session.Session(
            job_name=job_name,
            aggregator=agg,
            added=added,
            shipper=shipper,
            sink=sink,
            compile_sink=compile_sink,
            host=host,
            options={
                "project_id": project_id,
                "metric_prefix": metric_prefix,
                "monitored_resource_type": monitored_resource_type,
                "monitored_resource_labels": dict(monitored_resource_labels or {}),
                "store": store,
                "interval_s": interval_s,
                "exporters": exps,
                "histograms": histograms,
            },
        )

    return _session.start(build)


def shutdown(timeout_s: float | None = 10.0) -> bool:
    """Unregister the listeners, export the final aggregates and stop the exporter process.

    Safe to call twice and when `init` was never called; also runs at interpreter exit.
    Returns True when everything was delivered within `timeout_s`.
    """
    return _session.stop(timeout_s)


def register_listeners() -> _session.Session:
    """Start listening and exporting with the settings in `mlgoodput.jax.config` (as jax-monitoring's
    `register_listeners`); returns the running session, which a second call returns again."""
    c = config.get_config()
    return init(
        project_id=c.project_id,
        metric_prefix=c.metric_prefix,
        monitored_resource_type=c.monitored_resource_type,
        monitored_resource_labels=dict(c.monitored_resource_labels),
        job_name=c.job_name,
    )
