"""Feeding a run's metric values to exporters (TensorBoard, Prometheus, OTLP, ...).

`metrics.record` only appends a tuple to a deque. A background worker turns the tuples
into `Sample`s named `metrics/<name>` (system metrics: `system/<name>`) with labels
`run` and `host`, and submits them to an `ExporterProcess`, which owns the exporters in
a child process and retries failing backends there. The ExporterProcess keeps the latest
value of each series, so a backend sees at least the newest value of every metric.
"""

from __future__ import annotations

from collections.abc import Sequence

from mlgoodput._worker import BackgroundWorker
from mlgoodput.export import Exporter, ExporterProcess, Sample


class MetricFeed(BackgroundWorker):
    """Drains recorded values into an ExporterProcess (ours, or one the caller shares)."""

    def __init__(
        self,
        exporters: Sequence[Exporter] | ExporterProcess,
        labels: dict[str, str],
        *,
        interval_s: float = 1.0,
        export_interval_s: float = 10.0,
    ) -> None:
        super().__init__("mlgoodput-run-exporters", interval_s=interval_s)
        if isinstance(exporters, ExporterProcess):
            self.process = exporters
            self._owns = False
        else:
            for i, e in enumerate(exporters):
                if not isinstance(e, Exporter):
                    raise TypeError(f"exporters[{i}] must have export(samples) and shutdown(timeout_s), got {e!r}")
            self.process = ExporterProcess(list(exporters), interval_s=export_interval_s, name="mlgoodput-run-exporter")
            self._owns = True
        self.labels = dict(labels)
        self.submitted = 0  # values handed to the exporter process

    def start(self) -> None:
        """Start the exporter process (raises if an exporter cannot open) and the feeding thread."""
        if self._owns:
            self.process.start()
        super().start()

    #: recorded values wait here (the latest kept when the exporters fall far behind)
    queue_size = 100_000
    queue_policy = "drop-oldest"

    def _work(self) -> bool:
        batch: list[Sample] = []
        for item in self._take(10_000):
            labels = self.labels if len(item) == 5 else {**item[5], **self.labels}
            batch.append(Sample(f"{item[0]}/{item[1]}", item[2], labels, step=item[3], time=item[4]))
        if batch:
            self.process.submit(batch)  # never raises; the process retries its backends
            self.submitted += len(batch)
        return len(self._queue) == 0

    def flush(self, timeout_s: float | None = None) -> bool:
        """Hand everything recorded so far to the exporters and wait until they exported it."""
        return super().flush(timeout_s) and self.process.flush(timeout_s)

    def _on_close(self, timeout_s: float) -> None:
        self._work()
        if self._owns:
            self.process.stop(timeout_s)
