"""How `init` connects to the rest of mlgoodput: recorders' journals, the store, the exporter process."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from mlgoodput.export import Sample

log = logging.getLogger("mlgoodput.jax")

#: Store namespaces starting with this are mlgoodput's own streams, never a goodput job's.
RESERVED_PREFIX = "mlgoodput."


def recorder_journal(recorder: Any) -> Any:
    """The journal a `GoodputRecorder` writes through; None when its logging is disabled.

    The recorder keeps its journal private; it is the shared journal of the recorder's
    (store, logger_name, job_name, process index) stream, so events we append there are
    the job's events exactly as if the recorder had written them.
    """
    if not hasattr(recorder, "record_step_start_time") or not hasattr(recorder, "job_name"):
        raise TypeError(f"recorder must be an mlgoodput GoodputRecorder, got {recorder!r}")
    return recorder.journal


def find_goodput_journal(job_name: str) -> Any:
    """The journal of a goodput recorder of `job_name` already live in this process, if any
    (a recorder with logging enabled opens its journal when it is built)."""
    from mlgoodput._journal import Journal

    found = [j for j in Journal.live(job_name) if not j.namespace.startswith(RESERVED_PREFIX)]
    if len(found) > 1:
        log.warning(
            "mlgoodput.jax: several recorders of job %r in this process; compile events "
            "go to the first (pass recorder= to choose)",
            job_name,
        )
    return found[0] if found else None


def default_host(journal: Any) -> int:
    """The process index: the recorder's, else JAX's (once it is up), else the launcher's."""
    h = getattr(journal, "host", None)
    if isinstance(h, int):
        return h
    from mlgoodput.identity import detect_identity

    return detect_identity().process_index


def metric_journal(store: Any, job_name: str, host: int) -> Any:
    """The journal of the job's `mlgoodput.jax` stream (the aggregates as JAX_METRIC events)."""
    from mlgoodput._journal import Journal
    from mlgoodput.jax._session import NAMESPACE

    return Journal.for_stream(store, NAMESPACE, job_name, host)


class ProcessSink:
    """Hands samples to an `ExporterProcess` (never blocks, never raises) and stops it."""

    def __init__(self, proc: Any) -> None:
        self.proc = proc

    def export(self, samples: Sequence[Sample]) -> None:
        self.proc.submit(samples)

    def flush(self, timeout_s: float | None = None) -> bool:
        return bool(self.proc.flush(timeout_s))

    def shutdown(self, timeout_s: float | None = None) -> None:
        self.proc.stop(timeout_s)


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


def make_sink(exporters: Sequence[Any], *, interval_s: float) -> ProcessSink | None:
    """An started exporter process that owns `exporters` (None when there are none)."""
    if not exporters:
        return None
    from mlgoodput.export import ExporterProcess

    proc = ExporterProcess(list(exporters), interval_s=interval_s, name="mlgoodput-jax-exporter")
    proc.start()
    return ProcessSink(proc)
