"""Feeding a run's metric values to exporters (TensorBoard, Prometheus, OTLP, ...).

`metrics.record` only appends a tuple to a deque; a background worker turns them into
`Sample`s and hands them to each exporter. A failing exporter keeps its unsent samples
(up to `max_pending`, oldest dropped and counted) and is retried with backoff, without
holding back the others.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any

from mlgoodput._worker import BackgroundWorker
from mlgoodput.export._base import Exporter, Sample


class MetricFeed(BackgroundWorker):
    """Turns recorded values into samples named `metrics/<name>` (or `system/<name>`) for exporters."""

    def __init__(
        self,
        exporters: Sequence[Exporter],
        labels: dict[str, str],
        *,
        interval_s: float = 1.0,
        max_pending: int = 100_000,
    ) -> None:
        super().__init__("mlgoodput-run-exporters", interval_s=interval_s)
        for i, e in enumerate(exporters):
            if not isinstance(e, Exporter):
                raise TypeError(f"exporters[{i}] must have export(samples) and shutdown(timeout_s), got {e!r}")
        self.exporters = list(exporters)
        self.labels = dict(labels)
        self.max_pending = max_pending
        self.dropped = 0
        self.queue: collections.deque[tuple[Any, ...]] = collections.deque()
        self._pending: list[list[Sample]] = [[] for _ in self.exporters]

    def _work(self) -> bool:
        q = self.queue
        new: list[Sample] = []
        while q:
            prefix, name, value, step, t = q.popleft()
            new.append(Sample(f"{prefix}/{name}", value, self.labels, step=step, time=t))
        error: BaseException | None = None
        for i, exp in enumerate(self.exporters):
            pending = self._pending[i]
            pending.extend(new)
            if len(pending) > self.max_pending:
                cut = len(pending) - self.max_pending
                self.dropped += cut
                del pending[:cut]
            if not pending:
                continue
            try:
                exp.export(pending)
            except Exception as e:  # retried next round; the worker logs it once
                error = error or e
                continue
            self._pending[i] = []
        if error is not None:
            raise error
        return not q

    def _on_close(self) -> None:
        for exp in self.exporters:
            try:
                exp.shutdown(2.0)
            except Exception as e:
                self._note_error(e)
