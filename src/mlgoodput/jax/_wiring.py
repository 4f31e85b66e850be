"""How `init` connects to the rest of mlgoodput: recorders, journals, the exporter process."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

log = logging.getLogger("mlgoodput.jax")


def find_recorder(job_name: str) -> Any:
    """A recorder of `job_name` already created in this process, if any."""
    return None


def recorder_journal(recorder: Any) -> Any:
    """The journal a recorder writes its events through."""
    j = getattr(recorder, "journal", None)
    if j is None or not callable(getattr(j, "append", None)):
        raise TypeError(f"recorder must be an mlgoodput GoodputRecorder, got {recorder!r}")
    return j


def recorder_host(recorder: Any) -> int | None:
    h = getattr(recorder, "host", None)
    return int(h) if isinstance(h, int) else None


def metric_journal(store: Any, job_name: str, host: int) -> Any:
    """The journal of the `mlgoodput.jax` stream of the job, or None without a journal."""
    return None


class _FanOut:
    def __init__(self, exporters: Sequence[Any]) -> None:
        self.exporters = list(exporters)

    def export(self, samples: Sequence[Any]) -> None:
        err: Exception | None = None
        for e in self.exporters:
            try:
                e.export(samples)
            except Exception as x:
                err = err or x
        if err is not None:
            raise err

    def shutdown(self, timeout_s: float | None = None) -> None:
        for e in self.exporters:
            try:
                e.shutdown(timeout_s)
            except Exception as x:
                log.warning("mlgoodput.jax: exporter shutdown failed: %s", x)


def make_sink(
    exporters: Sequence[Any] | None,
    *,
    job_name: str,
    project_id: str | None,
    metric_prefix: str,
    resource_type: str | None,
    resource_labels: Mapping[str, str] | None,
) -> Any:
    """The exporter process for `exporters` (None: Cloud Monitoring when a project is known)."""
    if not exporters:
        return None
    return _FanOut(exporters)
