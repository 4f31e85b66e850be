"""One contract, every exporter, each against its real counterpart."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from mlgoodput.export import Exporter, Sample

JOB = {"job_name": "job-a", "logger_name": "goodput_job-a"}


def batch(v: float) -> list[Sample]:
    return [
        Sample("goodput/goodput_pct", v, JOB, step=10),
        Sample("goodput/productive_seconds", 10 * v, JOB, step=10, unit="s"),
        Sample("goodput/max_productive_step", 7.0, JOB, step=10),
        Sample("metrics/loss", v / 100, {**JOB, "split": "train"}, step=10),
    ]


def test_follows_the_protocol_and_pickles(backend: Any) -> None:
    assert isinstance(backend.exporter, Exporter)
    clone = pickle.loads(pickle.dumps(backend.exporter))
    assert type(clone) is type(backend.exporter)


def test_counterpart_sees_exported_values(backend: Any) -> None:
    backend.exporter.export(batch(42.5))
    assert backend.read("goodput/productive_seconds", JOB) == pytest.approx(425.0)
    assert backend.read("goodput/max_productive_step", JOB) == pytest.approx(7.0)
    assert backend.read("metrics/loss", {**JOB, "split": "train"}) == pytest.approx(0.425)
    if backend.name != "cloud-monitoring":  # Cloud Monitoring carries goodput as goodput_time seconds
        got = backend.read("goodput/goodput_pct", JOB)
        assert got == pytest.approx(42.5 * backend.factor("goodput/goodput_pct"))


def test_latest_value_wins(backend: Any) -> None:
    backend.exporter.export(batch(10.0))
    backend.exporter.export(batch(90.0))
    assert backend.read("goodput/productive_seconds", JOB) == pytest.approx(900.0)


def test_labels_keep_series_apart(backend: Any) -> None:
    other = {"job_name": "job-b", "logger_name": "goodput_job-b"}
    backend.exporter.export(
        [Sample("goodput/productive_seconds", 1.0, JOB), Sample("goodput/productive_seconds", 2.0, other)]
    )
    if backend.name == "tensorboard":
        return  # TensorBoard keeps one logdir per job: job labels are not part of the tag
    assert backend.read("goodput/productive_seconds", JOB) == pytest.approx(1.0)
    assert backend.read("goodput/productive_seconds", other) == pytest.approx(2.0)


def test_failure_raises_then_recovers(backend: Any) -> None:
    if backend.make_down is None:
        backend.exporter.export(batch(1.0))  # serving from memory: export cannot fail
        assert backend.read("goodput/productive_seconds", JOB) == pytest.approx(10.0)
        return
    backend.make_down()
    with pytest.raises(Exception):  # noqa: B017 - each backend raises its own error type
        backend.exporter.export(batch(5.0))
    assert backend.make_up is not None
    backend.make_up()
    backend.exporter.export(batch(6.0))
    assert backend.read("goodput/productive_seconds", JOB) == pytest.approx(60.0)


def test_shutdown_twice_is_safe(backend: Any) -> None:
    """A second shutdown neither raises nor undoes the first: what went out stays with the
    counterpart, and a serving exporter stays closed (its endpoint does not come back)."""
    backend.exporter.export(batch(3.0))
    assert backend.read("goodput/productive_seconds", JOB) == pytest.approx(30.0)
    backend.exporter.shutdown(1.0)
    backend.exporter.shutdown(1.0)
    if backend.name == "prometheus":  # it serves from memory: a shut exporter answers no scrape
        with pytest.raises(OSError):
            backend.read("goodput/productive_seconds", JOB)
    else:
        assert backend.read("goodput/productive_seconds", JOB) == pytest.approx(30.0)
