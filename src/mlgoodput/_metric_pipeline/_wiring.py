"""How a metric pipeline connects to the rest of mlgoodput: recorders' journals, the process
index, the exporter process."""

from __future__ import annotations

import logging
from collections.abc import Sequence
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


def make_sink(exporters: Sequence[Any], *, interval_s: float) -> ProcessSink | None:
    """An started exporter process that owns `exporters` (None when there are none)."""
    if not exporters:
        return None
    from mlgoodput.export import ExporterProcess

    proc = ExporterProcess(list(exporters), interval_s=interval_s, name="mlgoodput-jax-exporter")
    proc.start()
    return ProcessSink(proc)
