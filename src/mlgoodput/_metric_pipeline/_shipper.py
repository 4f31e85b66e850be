"""The shipping thread of a metric pipeline: every interval, changed aggregates go to the
job's journal (as `Kind.JAX_METRIC` events) and all of them to the exporter process."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from mlgoodput._metric_pipeline._aggregate import Aggregator, SeriesSnapshot, metric_name, to_samples
from mlgoodput._worker import BackgroundWorker
from mlgoodput.events import Kind
from mlgoodput.export import Exporter, Sample

log = logging.getLogger("mlgoodput.jax")


class Shipper(BackgroundWorker):
    """Every interval: snapshot the aggregates, send changed series on."""

    def __init__(
        self,
        aggregator: Aggregator,
        base_labels: dict[str, str],
        sink: Exporter | None,
        metric_journal: Any,
        host: Callable[[], int],
        *,
        interval_s: float,
        histograms: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__("mlgoodput-jax-shipper", interval_s=interval_s)
        self._histograms = histograms
        self._agg = aggregator
        self._labels = base_labels
        self._sink = sink
        self._journal = metric_journal
        self._host = host
        self._clock = clock
        self._last_counts: dict[tuple[str, str, str], int] = {}
        self.rounds = 0
        self.skipped = 0  # series the journal could not take (too large)
        self.last_samples: list[Sample] = []

    def _work(self) -> bool:
        snap = self._agg.snapshot()
        now = self._clock()
        changed = [s for s in snap if self._last_counts.get(_key(s)) != s.count]
        if self._journal is not None:
            for s in changed:
                try:
                    self._journal.append(
                        Kind.JAX_METRIC,
                        now,
                        value=float(s.count),
                        name=metric_name(s.event, s.kind),
                        attrs={
                            "kind": s.kind,
                            "labels": {str(k): str(v) for k, v in s.labels},
                            "count": s.count,
                            "sum": s.sum,
                            "min": s.min,
                            "max": s.max,
                            "last": s.last,
                        },
                    )
                except ValueError as e:  # a name or labels too large for a journal record
                    self.skipped += 1
                    if self.skipped == 1:
                        log.warning("mlgoodput.jax: a series was not stored: %s", e)
        for s in changed:
            self._last_counts[_key(s)] = s.count
        if self._sink is not None and (changed or self.rounds == 0):
            labels = dict(self._labels)
            labels["host"] = str(self._host())
            samples = to_samples(snap, labels, now=now, histograms=self._histograms)
            self.last_samples = samples
            self._sink.export(samples)  # raises on failure: retried with backoff
        self.rounds += 1
        return True

    def _on_close(self, timeout_s: float) -> bool:
        if self._journal is not None:
            return bool(self._journal.close(timeout_s))  # what it cannot ship by then stays journaled
        return True


def _key(s: SeriesSnapshot) -> tuple[str, str, str]:
    return (s.kind, s.event, repr(s.labels))
