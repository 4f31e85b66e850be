"""Productivity figures reach every exporter's real counterpart (TensorBoard, Prometheus, OTLP, Cloud Monitoring)."""

from __future__ import annotations

from typing import Any

import pytest

from mlgoodput._monitoring._samples import cumulative_samples
from mlgoodput.accounting import GoodputCalculator
from mlgoodput.events import EventBatch
from mlgoodput.store import MemoryStore
from timelines import all_timelines, load


def _report() -> Any:
    tl = load(next(p for p in all_timelines() if p.stem.startswith("p1_")))
    store = MemoryStore()
    store.append(f"goodput_{tl.job_name}", tl.job_name, EventBatch(1, 0, tl.events))
    return GoodputCalculator(tl.job_name, f"goodput_{tl.job_name}", store=store, clock=lambda: tl.query).report()


def test_productivity_samples_are_exported(backend: Any) -> None:
    r = _report()
    samples = cumulative_samples(r)
    names = {s.name: s for s in samples}
    want = {
        "productivity/ml_productivity_goodput_pct": 100 * 0.2 * 31 / 113,
        "productivity/scheduling_goodput_pct": 100 * 83 / 113,
        "productivity/program_goodput_pct": 20.0,
        "productivity/mfu_pct": 100 * 7.2 / 44,
        "productivity/ettr_pct": 100 * 37 / 83,
        "productivity/mtbi_seconds": 66.0,
        "productivity/mttr_seconds": 27.0,
    }
    for name, v in want.items():
        assert names[name].value == pytest.approx(v), name
    backend.exporter.export([names[n] for n in want])
    labels = {"job_name": r.job_name, "logger_name": r.logger_name}
    for name, v in want.items():
        got = backend.read(name, labels)
        assert got == pytest.approx(v * backend.factor(name)), name
